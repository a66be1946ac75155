/// \file
/// `xdev_cuda::Cuda`: xdev's CUDA backend, device type "CUDA", shipped as the plugin
/// `libxdev_plugin_cuda.so` (cuda_plugin.cpp). This file is C++ for the host compiler: it uses the
/// CUDA runtime API and cuBLAS; the device code is cuda_kernels.cu (nvcc), reached through the
/// launchers of cuda_kernels.h.
///
/// - Devices: the CUDA devices the runtime sees (`CUDA_VISIBLE_DEVICES` applies), in the runtime's
///   order; in a multi-process job each local process takes its share (`xdev::plugin::device_share`).
/// - Memory: `cudaMallocAsync` from the device's default memory pool, whose release threshold is
///   raised so that freed memory stays in the pool (freeing is then cheap); `cudaFreeAsync`. xdev
///   frees a buffer only once the work using it has completed.
/// - Streams: each xdev stream is a CUDA stream (`concepts::NativeQueues`): its operations are
///   enqueued on it as soon as they hold an in-flight slot, without a host round trip in between.
///   Calls not bound to a stream go to the device's own stream.
/// - Completion: an event recorded after each operation, which one thread per device waits for in
///   submission order (polling `cudaEventQuery` for 2 ms, about every microsecond for the last
///   operation queued and every 4 us while more wait behind it, then every 10 us between short
///   sleeps); `XDEV_CUDA_COMPLETION=host_func` reports
///   through `cudaLaunchHostFunc` instead (the host function marks the record arrived, and the
///   same thread reports it, since CUDA forbids CUDA calls inside it). docs/cuda.md compares the two.
/// - Transfers: `cudaMemcpyAsync`. Page-locked host memory is used directly; pageable memory goes
///   through pinned staging buffers (kept for reuse), copied in and out in stream order by host
///   functions, so that a copy never reads or writes host memory before the stream's earlier work.
///   Between devices: `cudaMemcpyPeerAsync` (peer access is enabled where the devices allow it).
///   A strided window (`concepts::StridedTransfers`, `concepts::StridedCopies`) is one
///   `cudaMemcpy2DAsync` per slice of its region (`cudaMemcpy3DPeerAsync` between devices).
/// - Ops: gemm and dot through cuBLAS (under autocast, gemm's inputs are rounded to f16/bf16 first
///   and multiplied by a half-precision cuBLAS gemm that accumulates in f32; dot with rounding, and
///   everything else, is the plugin's own kernels).
/// - Errors: every failed CUDA or cuBLAS call is an `xdev::error` naming the call and the status
///   (cuda_error.hpp). A sticky error (an illegal address in a kernel, ...) marks the device lost:
///   every pending and later operation fails with `errc::unavailable` and the original message,
///   host tasks and host-function completions the stream will never reach included (the
///   completion thread checks the device's health while it waits for one).
#pragma once

#include "cuda_error.hpp"
#include "cuda_kernels.h"
#include "settings.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <xdev/plugin/abi.h>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/detail/strided_copy.hpp>
#include <xdev/backend/device_properties.hpp>
#include <xdev/backend/queue_binding.hpp>
#include <xdev/backend/serial_worker.hpp>
#include <xdev/backend/strided_region.hpp>
#include <xdev/core/detail/block_pool.hpp>
#include <xdev/core/detail/spin_mutex.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/kernels/detail/rounding.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/policy/capabilities.hpp>
#include <xdev/random/stream.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace xdev_cuda {

/// What the backend knows of one CUDA device (`cudaGetDeviceProperties`).
struct DeviceInfo {
  int ordinal = 0;  ///< the CUDA runtime's device number
  std::string name;
  int major = 0;  ///< compute capability
  int minor = 0;
  int multiprocessors = 0;
  std::size_t total_memory = 0;  ///< bytes
  std::size_t l2_bytes = 0;
  int max_threads_per_block = 0;
  bool integrated = false;
  std::size_t max_pitch = 0;  ///< the largest pitch of a pitched copy (`cudaMemcpy2DAsync`), bytes
};

namespace detail {

inline std::string bytes_text(std::size_t b) {
  char buf[32];
  if (b >= (std::size_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / static_cast<double>(1ull << 30));
  else if (b >= (std::size_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / static_cast<double>(1ull << 20));
  else
    std::snprintf(buf, sizeof buf, "%.0f KiB", static_cast<double>(b) / 1024.0);
  return buf;
}

// The xdev dtype code (XDEV_DTYPE_*) of an element type.
template <class T>
constexpr int dtype_code() noexcept {
  return static_cast<int>(xdev::dtype_of<T>);
}
static_assert(dtype_code<float>() == XDEV_DTYPE_F32 && dtype_code<double>() == XDEV_DTYPE_F64 &&
              dtype_code<xdev::bf16>() == XDEV_DTYPE_BF16 && dtype_code<bool>() == XDEV_DTYPE_BOOL);

template <class T>
inline constexpr bool is_float_data = std::is_same_v<T, float> || std::is_same_v<T, double>;

// The rounding code of the kernels (0 none, 1 to f32, 2 to f16, 3 to bf16) for autocast dtype
// `compute` on T data: xdev's own input rounding (`xdev::kernels::detail::Rounding`, same order).
template <class T>
int rounding_code(xdev::DType compute, const char* op) {
  return static_cast<int>(xdev::kernels::detail::rounding_for<T>(compute, op));
}
using xdev::kernels::detail::Rounding;
static_assert(static_cast<int>(Rounding::none) == 0 && static_cast<int>(Rounding::to_f32) == 1 &&
              static_cast<int>(Rounding::to_f16) == 2 && static_cast<int>(Rounding::to_bf16) == 3);

// Page-locked host memory, kept for reuse: small slots (results of reductions, gather's status)
// carved from 64 KiB chunks, and staging buffers in power-of-two sizes up to a cached total.
class PinnedPool {
 public:
  static constexpr std::size_t slot_bytes = 64;
  static constexpr std::size_t chunk_bytes = 64 * 1024;
  static constexpr std::size_t cache_limit = std::size_t{256} << 20;

  PinnedPool() = default;
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;
  ~PinnedPool() {
    for (void* c : chunks_) cudaFreeHost(c);
    for (auto& [size, p] : staging_) cudaFreeHost(p);
  }

  void* slot(std::string_view what) {
    std::lock_guard lk(m_);
    if (slots_.empty()) {
      void* c = nullptr;
      cuda_check(cudaHostAlloc(&c, chunk_bytes, cudaHostAllocPortable), what, "cudaHostAlloc");
      chunks_.push_back(c);
      for (std::size_t off = 0; off < chunk_bytes; off += slot_bytes) slots_.push_back(static_cast<char*>(c) + off);
    }
    void* s = slots_.back();
    slots_.pop_back();
    return s;
  }
  void release_slot(void* s) noexcept {
    std::lock_guard lk(m_);
    slots_.push_back(s);
  }

  // A staging buffer of at least `bytes` bytes; `size` receives its size (for `release_staging`).
  void* staging(std::size_t bytes, std::size_t& size, std::string_view what) {
    size = std::size_t{1} << 16;
    while (size < bytes) size <<= 1;
    {
      std::lock_guard lk(m_);
      if (const auto it = staging_.find(size); it != staging_.end()) {
        void* p = it->second;
        staging_.erase(it);
        cached_ -= size;
        return p;
      }
    }
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation)
      throw xdev::error(xdev::errc::out_of_memory, std::string(what) + ": no page-locked staging buffer of " +
                                                       std::to_string(size) + " bytes: cudaHostAlloc failed");
    cuda_check(e, what, "cudaHostAlloc");
    return p;
  }
  void release_staging(void* p, std::size_t size) noexcept {
    {
      std::lock_guard lk(m_);
      if (cached_ + size <= cache_limit) {
        staging_.emplace(size, p);
        cached_ += size;
        return;
      }
    }
    cudaFreeHost(p);
  }

 private:
  std::mutex m_;
  std::vector<void*> chunks_;
  std::vector<void*> slots_;
  std::multimap<std::size_t, void*> staging_;
  std::size_t cached_ = 0;
};

// What a completion needs to report a finished operation to xdev.
struct Pending {
  // One per operation: from the recycling pool.
  static void* operator new(std::size_t bytes) { return xdev::detail::block_pool::instance().allocate(bytes); }
  static void operator delete(void* p, std::size_t bytes) noexcept {
    xdev::detail::block_pool::instance().deallocate(p, bytes);
  }

  xdev::Completion done;
  const std::string* label = nullptr;  // "CUDA:0": prefixes a failure, with `op`
  const char* op = "";
  xdev::HostTask then;  // runs on success before `done` (may throw): results to host memory, checks
  PinnedPool* pool = nullptr;
  void* slot = nullptr;  // a pinned result slot, returned to `pool` after `then`
  void* staging = nullptr;
  std::size_t staging_size = 0;
  cudaEvent_t event = nullptr;  // poll mode: recorded after the operation
  // host_func mode: the stream reached the operation (arrived) or, after the device was lost, its
  // failure was reported without it (abandoned: the host function deletes it if it ever runs).
  // Changed under the device's lock.
  enum class State : std::uint8_t { outstanding, arrived, abandoned };
  std::atomic<State> state{State::outstanding};
};

// A pageable host copy in stream order (a host function's argument): `to` <- `from`.
struct HostCopy {
  void* to;
  const void* from;
  std::size_t bytes;
};

}  // namespace detail

/// The CUDA backend (see the file comment).
class Cuda {
 public:
  static constexpr std::string_view name = "CUDA";
  /// Up to 256 operations in flight (measured: from 64 on, the bound costs nothing on an H200;
  /// docs/cuda.md), Philox by default, no dense gather (rows are gathered directly), autocast to
  /// bf16 under PyTorch's `cuda` key, and a priority above OpenCL's GPUs (100) and the host (-100).
  using capabilities =
      xdev::Capabilities<xdev::MaxInflight<256>, xdev::RngDefault<xdev::RngAlgorithm::philox>, xdev::DenseGather<0>,
                         xdev::Autocast<xdev::AutocastKey::cuda, xdev::DType::bf16>, xdev::Priority<200>>;
  /// A device pointer.
  using memory_handle = void*;
  /// The device pointer `bytes` past `h` (`xdev::concepts::OffsetsHandles`): ops on windows of
  /// arrays run here (every kernel takes element-aligned pointers; cuBLAS takes any such pointer,
  /// as it does for PyTorch's views), through the table's op windows (ABI 1.12).
  [[nodiscard]] memory_handle offset_handle(memory_handle h, std::size_t bytes) const noexcept {
    return static_cast<std::byte*>(h) + bytes;
  }
  static constexpr std::string_view plugin_version = "1.0.0";
  static constexpr std::string_view plugin_platform = "CUDA runtime and cuBLAS: the NVIDIA GPUs of this machine";

  /// Finds the devices and sets each one up: its memory pool, stream, cuBLAS handle and completion
  /// thread.
  /// \throws xdev::error `errc::unavailable` when there is no CUDA device or no usable driver (the
  /// message says which, from the runtime); `errc::invalid_argument` for a malformed
  /// `XDEV_CUDA_COMPLETION`.
  explicit Cuda(const xdev::plugin::ClientOptions& options = {}) {
    mode_ = detail::completion_mode_from_environment();
    try {
      discover(options);
    } catch (...) {
      release();
      throw;
    }
  }
  Cuda(const Cuda&) = delete;
  Cuda& operator=(const Cuda&) = delete;
  ~Cuda() { release(); }

  [[nodiscard]] std::size_t device_count() const noexcept { return devices_.size(); }
  [[nodiscard]] CompletionMode completion_mode() const noexcept { return mode_; }

  /// The static capabilities, with the smallest device memory as `memory_per_device`.
  [[nodiscard]] xdev::CapabilitySet runtime_capabilities() const noexcept { return caps_; }

  /// "NVIDIA H200, compute capability 9.0, 132 multiprocessors, 139.8 GiB memory (139.2 GiB free),
  /// 60.0 MiB L2, CUDA driver 13.0, runtime 13.0".
  [[nodiscard]] std::string device_description(std::size_t device) const {
    const Dev& d = *devices_.at(device);
    const DeviceInfo& i = d.info;
    std::size_t free = 0, total = 0;
    {
      const int prev = current_device();
      cudaSetDevice(i.ordinal);
      if (cudaMemGetInfo(&free, &total) != cudaSuccess) free = 0;
      cudaSetDevice(prev);
    }
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    return i.name + ", compute capability " + std::to_string(i.major) + "." + std::to_string(i.minor) + ", " +
           std::to_string(i.multiprocessors) + " multiprocessors, " + detail::bytes_text(i.total_memory) + " memory (" +
           detail::bytes_text(free) + " free), " + detail::bytes_text(i.l2_bytes) + " L2, CUDA driver " +
           version(driver) + ", runtime " + version(runtime);
  }

  /// What device `device` is as typed fields (`concepts::ReportsDeviceProperties`, ABI 1.8): the
  /// name, SMs, largest block, compute capability and memory of `cudaGetDeviceProperties`, the
  /// driver's version, and the free memory of `cudaMemGetInfo` at the moment of the call (unknown
  /// when that call fails).
  [[nodiscard]] xdev::DeviceProperties device_properties(std::size_t device) const {
    const DeviceInfo& i = devices_.at(device)->info;
    xdev::DeviceProperties p;
    p.type = xdev::DeviceType::gpu;
    p.name = i.name;
    p.vendor = "NVIDIA";
    int driver = 0;
    if (cudaDriverGetVersion(&driver) == cudaSuccess)
      p.driver_version = "CUDA " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
    p.architecture = std::to_string(i.major) + "." + std::to_string(i.minor);
    p.compute_units = static_cast<std::size_t>(i.multiprocessors);
    p.max_work_group_size = static_cast<std::size_t>(i.max_threads_per_block);
    p.memory_total = i.total_memory;
    std::size_t free = 0, total = 0;
    const int prev = current_device();
    cudaSetDevice(i.ordinal);
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) p.memory_free = free;
    cudaSetDevice(prev);
    return p;
  }

  [[nodiscard]] const DeviceInfo& device_info(std::size_t device) const { return devices_.at(device)->info; }

  // ---- memory -------------------------------------------------------------------------------

  /// `cudaMallocAsync` from the device's pool. \throws xdev::error `errc::out_of_memory` naming
  /// the device, the size and the device's free memory.
  memory_handle allocate(std::size_t device, std::size_t bytes) {
    Dev& d = dev(device);
    void* p = nullptr;
    const cudaError_t e = cudaMallocAsync(&p, std::max<std::size_t>(bytes, 1), d.alloc_stream);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it
      std::size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      throw xdev::error(xdev::errc::out_of_memory, d.label + " cannot allocate " + std::to_string(bytes) +
                                                       " bytes: cudaMallocAsync failed: cudaErrorMemoryAllocation (" +
                                                       std::to_string(free) + " of " + std::to_string(total) +
                                                       " bytes free)");
    }
    check(d, e, "allocate", "cudaMallocAsync");
    // The allocation is ordered on alloc_stream; other streams may use it once that has run.
    check(d, cudaStreamSynchronize(d.alloc_stream), "allocate", "cudaStreamSynchronize");
    return p;
  }

  /// Page-locked host memory (`cudaHostAlloc`, portable to every device) for `xdev::pinned`:
  /// transfers from and to it are a direct `cudaMemcpyAsync` (`page_locked`), never staged.
  /// \throws xdev::error `errc::out_of_memory` naming the device and the size.
  void* allocate_pinned(std::size_t device, std::size_t bytes) {
    Dev& d = dev(device);
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, std::max<std::size_t>(bytes, 1), cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky
      throw xdev::error(xdev::errc::out_of_memory, d.label + ": no " + std::to_string(bytes) +
                                                       " bytes of page-locked host memory: cudaHostAlloc failed");
    }
    check(d, e, "pinned host memory", "cudaHostAlloc");
    return p;
  }
  void deallocate_pinned(std::size_t, void* p, std::size_t) noexcept { cudaFreeHost(p); }

  void deallocate(std::size_t device, memory_handle h, std::size_t) noexcept {
    if (h == nullptr || device >= devices_.size()) return;
    Dev& d = *devices_[device];
    select(d);
    cudaFreeAsync(h, d.alloc_stream);
  }

  // ---- transfers ----------------------------------------------------------------------------

  void copy_to_device(std::size_t device, const void* src, memory_handle dst, std::size_t dst_offset, std::size_t bytes,
                      xdev::Completion done) {
    if (bytes == 0) return done(nullptr);
    Dev& d = dev(device);
    const cudaStream_t s = queue_of(d);
    char* to = static_cast<char*>(dst) + dst_offset;
    auto p = pending(d, std::move(done), "copy to device");
    if (page_locked(src)) {
      check(d, cudaMemcpyAsync(to, src, bytes, cudaMemcpyHostToDevice, s), "copy to device", "cudaMemcpyAsync");
    } else {
      p->pool = &pinned_;
      p->staging = pinned_.staging(bytes, p->staging_size, d.label);
      host_copy(d, s, p->staging, src, bytes);
      check(d, cudaMemcpyAsync(to, p->staging, bytes, cudaMemcpyHostToDevice, s), "copy to device", "cudaMemcpyAsync");
    }
    complete_on(d, s, std::move(p));
  }

  void copy_to_host(std::size_t device, memory_handle src, std::size_t src_offset, void* dst, std::size_t bytes,
                    xdev::Completion done) {
    if (bytes == 0) return done(nullptr);
    Dev& d = dev(device);
    const cudaStream_t s = queue_of(d);
    const char* from = static_cast<const char*>(src) + src_offset;
    auto p = pending(d, std::move(done), "copy to host");
    if (page_locked(dst)) {
      check(d, cudaMemcpyAsync(dst, from, bytes, cudaMemcpyDeviceToHost, s), "copy to host", "cudaMemcpyAsync");
    } else {
      p->pool = &pinned_;
      p->staging = pinned_.staging(bytes, p->staging_size, d.label);
      check(d, cudaMemcpyAsync(p->staging, from, bytes, cudaMemcpyDeviceToHost, s), "copy to host", "cudaMemcpyAsync");
      host_copy(d, s, dst, p->staging, bytes);
    }
    complete_on(d, s, std::move(p));
  }

  /// On the source device's stream: `cudaMemcpyAsync` within a device, `cudaMemcpyPeerAsync`
  /// between devices (direct when peer access is enabled, staged by CUDA otherwise).
  void copy_between(std::size_t src_device, memory_handle src, std::size_t src_offset, std::size_t dst_device,
                    memory_handle dst, std::size_t dst_offset, std::size_t bytes, xdev::Completion done) {
    if (bytes == 0) return done(nullptr);
    Dev& s = dev(src_device);
    Dev& t = dev(dst_device);
    const cudaStream_t q = queue_of(s);
    const char* from = static_cast<const char*>(src) + src_offset;
    char* to = static_cast<char*>(dst) + dst_offset;
    auto p = pending(s, std::move(done), "copy between devices");
    if (&s == &t)
      check(s, cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, q), "copy", "cudaMemcpyAsync");
    else
      check(s, cudaMemcpyPeerAsync(to, t.info.ordinal, from, s.info.ordinal, bytes, q), "copy to " + t.label,
            "cudaMemcpyPeerAsync");
    complete_on(s, q, std::move(p));
  }

  // ---- strided windows (concepts::StridedTransfers, concepts::StridedCopies) -----------------

  /// A strided window in one `cudaMemcpy2DAsync` per slice of the region (the host side dense).
  /// Pageable host memory goes through a pinned staging buffer of the region's bytes, as for a
  /// plain transfer. A pitch beyond the device's limit for pitched copies goes one row per call.
  void copy_to_host_strided(std::size_t device, memory_handle src, const xdev::StridedRegion& r, void* dst,
                            xdev::Completion done) {
    if (r.bytes() == 0) return done(nullptr);
    Dev& d = dev(device);
    if (!pitched(d, r.row_pitch))
      return xdev::detail::copy_rows_to_host(*this, device, src, r, static_cast<std::byte*>(dst), std::move(done));
    const cudaStream_t s = queue_of(d);
    auto p = pending(d, std::move(done), "strided copy to host");
    void* dense = dst;
    if (!page_locked(dst)) {
      p->pool = &pinned_;
      p->staging = pinned_.staging(r.bytes(), p->staging_size, d.label);
      dense = p->staging;
    }
    for (std::size_t k = 0; k < r.slices; ++k)
      check(d,
            cudaMemcpy2DAsync(static_cast<char*>(dense) + k * r.rows * r.row_bytes, r.row_bytes,
                              static_cast<const char*>(src) + r.offset + k * r.slice_pitch, r.row_pitch, r.row_bytes,
                              r.rows, cudaMemcpyDeviceToHost, s),
            "strided copy to host", "cudaMemcpy2DAsync");
    if (dense != dst) host_copy(d, s, dst, dense, r.bytes());
    complete_on(d, s, std::move(p));
  }

  void copy_to_device_strided(std::size_t device, const void* src, memory_handle dst, const xdev::StridedRegion& r,
                              xdev::Completion done) {
    if (r.bytes() == 0) return done(nullptr);
    Dev& d = dev(device);
    if (!pitched(d, r.row_pitch))
      return xdev::detail::copy_rows_to_device(*this, device, static_cast<const std::byte*>(src), dst, r,
                                               std::move(done));
    const cudaStream_t s = queue_of(d);
    auto p = pending(d, std::move(done), "strided copy to device");
    const void* dense = src;
    if (!page_locked(src)) {
      p->pool = &pinned_;
      p->staging = pinned_.staging(r.bytes(), p->staging_size, d.label);
      host_copy(d, s, p->staging, src, r.bytes());
      dense = p->staging;
    }
    for (std::size_t k = 0; k < r.slices; ++k)
      check(d,
            cudaMemcpy2DAsync(static_cast<char*>(dst) + r.offset + k * r.slice_pitch, r.row_pitch,
                              static_cast<const char*>(dense) + k * r.rows * r.row_bytes, r.row_bytes, r.row_bytes,
                              r.rows, cudaMemcpyHostToDevice, s),
            "strided copy to device", "cudaMemcpy2DAsync");
    complete_on(d, s, std::move(p));
  }

  /// A copy between strided windows, on the source device's stream, one call per slice:
  /// `cudaMemcpy2DAsync` within a device, `cudaMemcpy3DPeerAsync` between devices. The two windows
  /// share no byte (xdev refuses a copy between overlapping windows of one array), so windows of
  /// one allocation whose rows interleave need no temporary.
  void copy_between_strided(std::size_t src_device, memory_handle src, const xdev::StridedRegion& sr,
                            std::size_t dst_device, memory_handle dst, const xdev::StridedRegion& dr,
                            xdev::Completion done) {
    if (sr.bytes() == 0) return done(nullptr);
    Dev& s = dev(src_device);
    Dev& t = dev(dst_device);
    if (!pitched(s, sr.row_pitch) || !pitched(t, dr.row_pitch))
      return xdev::detail::copy_rows_between(*this, src_device, src, sr, dst_device, dst, dr, std::move(done));
    const cudaStream_t q = queue_of(s);
    auto p = pending(s, std::move(done), "strided copy between devices");
    for (std::size_t k = 0; k < sr.slices; ++k) {
      char* from = static_cast<char*>(src) + sr.offset + k * sr.slice_pitch;
      char* to = static_cast<char*>(dst) + dr.offset + k * dr.slice_pitch;
      if (&s == &t) {
        check(
            s,
            cudaMemcpy2DAsync(to, dr.row_pitch, from, sr.row_pitch, sr.row_bytes, sr.rows, cudaMemcpyDeviceToDevice, q),
            "strided copy", "cudaMemcpy2DAsync");
      } else {
        cudaMemcpy3DPeerParms m{};
        m.srcPtr.ptr = from;
        m.srcPtr.pitch = sr.row_pitch;
        m.srcPtr.xsize = sr.row_bytes;
        m.srcPtr.ysize = sr.rows;
        m.srcDevice = s.info.ordinal;
        m.dstPtr.ptr = to;
        m.dstPtr.pitch = dr.row_pitch;
        m.dstPtr.xsize = sr.row_bytes;
        m.dstPtr.ysize = sr.rows;
        m.dstDevice = t.info.ordinal;
        m.extent.width = sr.row_bytes;  // bytes, for memory that is not a CUDA array
        m.extent.height = sr.rows;
        m.extent.depth = 1;
        check(s, cudaMemcpy3DPeerAsync(&m, q), "strided copy to " + t.label, "cudaMemcpy3DPeerAsync");
      }
    }
    complete_on(s, q, std::move(p));
  }

  /// Runs `task` on the backend's host thread once the stream reached this point; the stream's
  /// later work waits until it has run (a host function on the stream holds it until then).
  void execute(std::size_t device, xdev::HostTask task, xdev::Completion done) {
    Dev& d = dev(device);
    const cudaStream_t s = queue_of(d);
    auto gate = std::make_unique<Gate>();
    gate->task = std::move(task);
    gate->done = std::move(done);
    gate->worker = host_worker_.get();
    gate->dev = &d;
    Gate* raw = gate.release();
    {
      std::lock_guard lk(d.m);
      d.gates.push_back(raw);
    }
    const cudaError_t e = cudaLaunchHostFunc(s, &Cuda::run_gate, raw);
    if (e != cudaSuccess) {
      std::unique_ptr<Gate> back(raw);  // not enqueued: still ours
      bool reported = false;
      {
        std::lock_guard lk(d.m);
        reported = raw->abandoned;  // the device was lost meanwhile and its failure was reported
        std::erase(d.gates, raw);
      }
      if (reported) return;
      check(d, e, "host task", "cudaLaunchHostFunc");
    }
    std::lock_guard lk(d.m);
    if (d.sleeping) d.cv.notify_one();  // its completion thread now watches the device's health
  }

  // ---- native queues (concepts::NativeQueues) -----------------------------------------------

  /// A CUDA stream (non-blocking) on `device`, one per xdev stream.
  using queue_handle = cudaStream_t;
  queue_handle create_queue(std::size_t device) {
    Dev& d = dev(device);
    cudaStream_t s = nullptr;
    check(d, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "a stream", "cudaStreamCreateWithFlags");
    return s;
  }
  /// xdev destroys a queue only once every operation on it has completed.
  void destroy_queue(std::size_t device, queue_handle q) noexcept {
    if (q == nullptr) return;
    if (device < devices_.size()) {
      Dev& d = *devices_[device];
      select(d);
      cudaStreamSynchronize(q);
      std::lock_guard lk(d.blas_m);
      if (const auto it = d.blas.find(q); it != d.blas.end()) {
        cublasDestroy(it->second);
        d.blas.erase(it);
      }
    } else {
      cudaStreamSynchronize(q);
    }
    cudaStreamDestroy(q);
  }
  /// The calling thread's next calls for `device` enqueue on `q` (until `unbind_queue`).
  void bind_queue(std::size_t device, queue_handle q) noexcept {
    xdev::QueueBinding<queue_handle>::bind(this, device < devices_.size() ? devices_[device].get() : nullptr, q);
  }
  void unbind_queue(std::size_t) noexcept { xdev::QueueBinding<queue_handle>::unbind(); }

  // ---- native markers (concepts::NativeMarkers) ---------------------------------------------

  /// A CUDA event recorded on the bound stream; `done` once the stream has reached it (through the
  /// device's completion thread, like every operation). Another stream of the device waits for it
  /// with `cudaStreamWaitEvent`: no host round trip.
  using marker_handle = cudaEvent_t;
  marker_handle record_marker(std::size_t device, xdev::Completion done) {
    Dev& d = dev(device);
    const cudaStream_t s = queue_of(d);
    cudaEvent_t ev = nullptr;
    check(d, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "a marker", "cudaEventCreateWithFlags");
    const cudaError_t e = cudaEventRecord(ev, s);
    if (e != cudaSuccess) {
      cudaEventDestroy(ev);
      check(d, e, "a marker", "cudaEventRecord");
    }
    try {
      complete_on(d, s, pending(d, std::move(done), "marker"));
    } catch (...) {
      cudaEventDestroy(ev);
      throw;
    }
    return ev;
  }
  /// The later work on the bound stream waits for `m` (recorded on any stream of the device).
  void wait_marker(std::size_t device, marker_handle m) {
    Dev& d = dev(device);
    check(d, cudaStreamWaitEvent(queue_of(d), m, 0), "a wait for a marker", "cudaStreamWaitEvent");
  }
  /// Called once the marker was reached: destroying the event then frees it at once.
  void release_marker(std::size_t device, marker_handle m) noexcept {
    if (device < devices_.size()) select(*devices_[device]);
    cudaEventDestroy(m);
  }

  // ---- ops ----------------------------------------------------------------------------------

  /// `x[i] = value` for every dtype, as its bytes.
  template <class T>
  requires xdev::HasDType<T>
  void fill(std::size_t device, const xdev::ops::FillArgs<T, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0) return done(nullptr);
    std::uint64_t pattern = 0;
    if constexpr (std::is_same_v<T, bool>)
      pattern = a.value ? 1 : 0;
    else
      std::memcpy(&pattern, &a.value, sizeof(T));
    launch(device, std::move(done), "fill",
           [&](cudaStream_t s) { return kernels::fill(a.x, a.n, sizeof(T), pattern, s); });
  }

  template <class T>
  requires detail::is_float_data<T>
  void scale(std::size_t device, const xdev::ops::ScaleArgs<T, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0) return done(nullptr);
    launch(device, std::move(done), "scale",
           [&](cudaStream_t s) { return kernels::scale(detail::dtype_code<T>(), a.x, a.n, a.alpha, s); });
  }

  template <class T>
  requires detail::is_float_data<T>
  void axpy(std::size_t device, const xdev::ops::AxpyArgs<T, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0) return done(nullptr);
    launch(device, std::move(done), "axpy",
           [&](cudaStream_t s) { return kernels::axpy(detail::dtype_code<T>(), a.alpha, a.x, a.y, a.n, s); });
  }

  /// add, mul, min and max as xdev defines them (see `xdev::kernels::binary`).
  template <class T>
  requires detail::is_float_data<T>
  void binary(std::size_t device, const xdev::ops::BinaryArgs<T, memory_handle>& a, xdev::Completion done) {
    using Op = xdev::ops::BinaryOp;
    if (a.op != Op::add && a.op != Op::mul && a.op != Op::min && a.op != Op::max)
      throw xdev::error(xdev::errc::invalid_argument,
                        "CUDA: binary: unknown operator " + std::to_string(static_cast<int>(a.op)));
    if (a.n == 0) return done(nullptr);
    launch(device, std::move(done), "binary", [&](cudaStream_t s) {
      return kernels::binary(detail::dtype_code<T>(), static_cast<int>(a.op), a.a, a.b, a.out, a.n, s);
    });
  }

  template <class T>
  requires detail::is_float_data<T> || std::is_same_v<T, xdev::f16> || std::is_same_v<T, xdev::bf16>
  void exp(std::size_t device, const xdev::ops::ExpArgs<T, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0) return done(nullptr);
    launch(device, std::move(done), "exp",
           [&](cudaStream_t s) { return kernels::exp(detail::dtype_code<T>(), a.x, a.out, a.n, s); });
  }

  /// Two passes into device memory, then the value to a pinned slot, then to `*result`.
  template <class T>
  requires detail::is_float_data<T>
  void sum(std::size_t device, const xdev::ops::SumArgs<T, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0) {
      *a.result = T(0);
      return done(nullptr);
    }
    reduce_to_host<T>(device, std::move(done), "sum", a.n, a.result, [&](cudaStream_t s, void* out, void* scratch) {
      return kernels::sum(detail::dtype_code<T>(), a.x, a.n, out, scratch, s);
    });
  }

  /// cuBLAS `?dot` without autocast; the plugin's kernel with the inputs rounded under autocast.
  template <class T>
  requires detail::is_float_data<T>
  void dot(std::size_t device, const xdev::ops::DotArgs<T, memory_handle>& a, xdev::Completion done) {
    const int rounding = detail::rounding_code<T>(a.compute, "dot");
    if (a.n == 0) {
      *a.result = T(0);
      return done(nullptr);
    }
    if (rounding != 0 || a.n > static_cast<std::size_t>(INT_MAX)) {
      reduce_to_host<T>(device, std::move(done), "dot", a.n, a.result, [&](cudaStream_t s, void* out, void* scratch) {
        return kernels::dot(detail::dtype_code<T>(), a.x, a.y, a.n, rounding, out, scratch, s);
      });
      return;
    }
    Dev& d = dev(device);
    const cudaStream_t s = queue_of(d);
    void* out = temp(d, s, sizeof(T), "dot");
    auto p = pending(d, std::move(done), "dot");
    {
      std::lock_guard lk(d.blas_m);
      const cublasHandle_t h = blas_for(d, s);
      blas(d, cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");
      cublasStatus_t st;
      if constexpr (std::is_same_v<T, float>)
        st = cublasSdot(h, static_cast<int>(a.n), static_cast<const float*>(a.x), 1, static_cast<const float*>(a.y), 1,
                        static_cast<float*>(out));
      else
        st = cublasDdot(h, static_cast<int>(a.n), static_cast<const double*>(a.x), 1, static_cast<const double*>(a.y),
                        1, static_cast<double*>(out));
      cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
      if (st != CUBLAS_STATUS_SUCCESS) {
        cudaFreeAsync(out, s);
        throw cublas_failure(d.label + ": dot", "cublas?dot", st);
      }
    }
    result_to_host<T>(d, s, *p, out, a.result);
    complete_on(d, s, std::move(p));
  }

  template <class T>
  requires detail::is_float_data<T>
  void sum_axis(std::size_t device, const xdev::ops::SumAxisArgs<T, memory_handle>& a, xdev::Completion done) {
    if (a.outer * a.inner == 0) return done(nullptr);
    launch(device, std::move(done), "sum", [&](cudaStream_t s) {
      return kernels::sum_axis(detail::dtype_code<T>(), a.x, a.out, a.outer, a.axis, a.inner, s);
    });
  }

  /// cuBLAS on the row-major problem as the column-major C^T = op(B)^T op(A)^T. Under autocast the
  /// inputs are rounded into temporaries first: f32 data to f16/bf16 (then a half-precision cuBLAS
  /// gemm with f32 accumulation), f64 data to rounded doubles. With
  /// `alpha == 0` or an empty depth, A and B are not read: C = beta C.
  template <class T>
  requires detail::is_float_data<T>
  void gemm(std::size_t device, const xdev::ops::GemmArgs<T, memory_handle>& a, xdev::Completion done) {
    const int rounding = detail::rounding_code<T>(a.compute, "gemm");
    if (a.m == 0 || a.n == 0) return done(nullptr);
    Dev& d = dev(device);
    if (a.k == 0 || a.alpha == T(0)) {
      launch(device, std::move(done), "gemm", [&](cudaStream_t s) {
        return kernels::scale_matrix(detail::dtype_code<T>(), a.c, a.m, a.n, a.ldc, a.beta, s);
      });
      return;
    }
    constexpr auto int_max = static_cast<std::size_t>(INT_MAX);
    if (a.m > int_max || a.n > int_max || a.k > int_max || a.lda > int_max || a.ldb > int_max || a.ldc > int_max)
      throw xdev::error(xdev::errc::unimplemented, d.label + ": gemm: a dimension or stride above " +
                                                       std::to_string(INT_MAX) + " (cuBLAS's 32-bit interface)");
    const cudaStream_t s = queue_of(d);
    const void* A = a.a;
    const void* B = a.b;
    void* rounded_a = nullptr;
    void* rounded_b = nullptr;
    // Elements of A and B as stored (the last row may end before its stride).
    const std::size_t na = ((a.trans_a ? a.k : a.m) - 1) * a.lda + (a.trans_a ? a.m : a.k);
    const std::size_t nb = ((a.trans_b ? a.n : a.k) - 1) * a.ldb + (a.trans_b ? a.k : a.n);
    cudaDataType_t input_type = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_64F;
    if (rounding >= 2 && std::is_same_v<T, float>) {
      // f32 data under autocast: the inputs converted to f16/bf16 (to nearest even, as xdev rounds
      // them everywhere), then multiplied by cuBLAS with f32 accumulation.
      const int half = rounding == 2 ? XDEV_DTYPE_F16 : XDEV_DTYPE_BF16;
      input_type = rounding == 2 ? CUDA_R_16F : CUDA_R_16BF;
      rounded_a = temp(d, s, na * 2, "gemm");
      rounded_b = temp(d, s, nb * 2, "gemm");
      check(d, kernels::convert(XDEV_DTYPE_F32, half, A, rounded_a, na, s), "gemm", "a kernel launch");
      check(d, kernels::convert(XDEV_DTYPE_F32, half, B, rounded_b, nb, s), "gemm", "a kernel launch");
      A = rounded_a;
      B = rounded_b;
    } else if (std::is_same_v<T, double> && rounding != 0) {
      // f64 data under autocast: rounded copies of the inputs; products and sums in f64.
      rounded_a = temp(d, s, na * sizeof(T), "gemm");
      rounded_b = temp(d, s, nb * sizeof(T), "gemm");
      check(d, kernels::round_inputs(detail::dtype_code<T>(), A, rounded_a, na, rounding, s), "gemm",
            "a kernel launch");
      check(d, kernels::round_inputs(detail::dtype_code<T>(), B, rounded_b, nb, rounding, s), "gemm",
            "a kernel launch");
      A = rounded_a;
      B = rounded_b;
    }
    auto p = pending(d, std::move(done), "gemm");
    const cublasOperation_t op_a = a.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = a.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int m = static_cast<int>(a.m), n = static_cast<int>(a.n), k = static_cast<int>(a.k);
    cublasStatus_t st;
    {
      std::lock_guard lk(d.blas_m);
      const cublasHandle_t h = blas_for(d, s);
      if constexpr (std::is_same_v<T, float>) {
        st = cublasGemmEx(h, op_b, op_a, n, m, k, &a.alpha, B, input_type, static_cast<int>(a.ldb), A, input_type,
                          static_cast<int>(a.lda), &a.beta, a.c, CUDA_R_32F, static_cast<int>(a.ldc),
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      } else {
        st = cublasDgemm(h, op_b, op_a, n, m, k, &a.alpha, static_cast<const double*>(B), static_cast<int>(a.ldb),
                         static_cast<const double*>(A), static_cast<int>(a.lda), &a.beta, static_cast<double*>(a.c),
                         static_cast<int>(a.ldc));
      }
    }
    if (rounded_a != nullptr) cudaFreeAsync(rounded_a, s);
    if (rounded_b != nullptr) cudaFreeAsync(rounded_b, s);
    if (st != CUBLAS_STATUS_SUCCESS) throw cublas_failure(d.label + ": gemm", "cublasGemmEx", st);
    complete_on(d, s, std::move(p));
  }

  /// Rows of `table` by index: a check kernel finds the first index out of range, the gather kernel
  /// then writes nothing, and the op fails with the host backend's message.
  template <class T, class I>
  requires xdev::HasDType<T> &&(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>)void gather(
      std::size_t device, const xdev::ops::GatherArgs<T, I, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0) return done(nullptr);
    Dev& d = dev(device);
    const cudaStream_t s = queue_of(d);
    void* status = temp(d, s, 16, "gather");
    auto p = pending(d, std::move(done), "gather");
    try {
      check(d, cudaMemsetAsync(status, 0xFF, 4, s), "gather", "cudaMemsetAsync");
      const int idx = detail::dtype_code<I>();
      check(d, kernels::gather_check(idx, a.index, a.n, a.rows, status, s), "gather", "a kernel launch");
      check(d, kernels::gather(sizeof(T), idx, a.table, a.rows, a.cols, a.index, a.n, a.out, status, s), "gather",
            "a kernel launch");
      p->pool = &pinned_;
      p->slot = pinned_.slot(d.label);
      check(d, cudaMemcpyAsync(p->slot, status, 16, cudaMemcpyDeviceToHost, s), "gather", "cudaMemcpyAsync");
    } catch (...) {
      cudaFreeAsync(status, s);
      throw;
    }
    cudaFreeAsync(status, s);
    p->then = [bytes = static_cast<const unsigned char*>(p->slot), rows = a.rows] {
      std::uint32_t first = 0;
      std::int64_t value = 0;
      std::memcpy(&first, bytes, sizeof first);
      std::memcpy(&value, bytes + 8, sizeof value);
      if (first != 0xFFFFFFFFu)
        throw xdev::error(xdev::errc::invalid_argument, "gather: index " + std::to_string(value) + " at position " +
                                                            std::to_string(first) + " is out of range for a table of " +
                                                            std::to_string(rows) + " rows");
    };
    complete_on(d, s, std::move(p));
  }

  /// Philox4x32-10 and Threefry2x32-20 streams, bit for bit those of <xdev/random/stream.hpp> for
  /// uniforms; normals through CUDA's log, sqrt, cos and sin.
  template <class T>
  requires detail::is_float_data<T>
  void rng(std::size_t device, const xdev::ops::RngArgs<T, memory_handle>& a, xdev::Completion done) {
    // The host's checks (an unknown algorithm, a negative or NaN stddev), before anything runs.
    if (a.normal)
      xdev::random::fill_normal(a.algorithm, a.seed, a.offset, std::span<T>{}, a.mean, a.stddev);
    else
      xdev::random::fill_uniform(a.algorithm, a.seed, a.offset, std::span<T>{});
    if (a.n == 0) return done(nullptr);
    launch(device, std::move(done), a.normal ? "rng_normal" : "rng_uniform", [&](cudaStream_t s) {
      return kernels::rng(detail::dtype_code<T>(), a.out, a.n, static_cast<int>(a.algorithm), a.seed, a.offset,
                          a.normal, static_cast<double>(a.mean), static_cast<double>(a.stddev), s);
    });
  }

  /// Every pair of dtypes, bit for bit `xdev::kernels::convert`; the same dtype is a copy.
  template <class S, class D>
  requires xdev::HasDType<S> && xdev::HasDType<D>
  void convert(std::size_t device, const xdev::ops::ConvertArgs<S, D, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0 || (std::is_same_v<S, D> && a.src == a.dst)) return done(nullptr);
    launch(device, std::move(done), "convert", [&](cudaStream_t s) {
      if constexpr (std::is_same_v<S, D>)
        return cudaMemcpyAsync(a.dst, a.src, a.n * sizeof(S), cudaMemcpyDeviceToDevice, s);
      else
        return kernels::convert(detail::dtype_code<S>(), detail::dtype_code<D>(), a.src, a.dst, a.n, s);
    });
  }

  /// The stream the calling thread's next call for `device` enqueues on (the bound stream of an
  /// xdev stream, else the device's own): for tests and benchmarks that mix in raw CUDA.
  [[nodiscard]] cudaStream_t current_stream(std::size_t device) { return queue_of(dev(device)); }

 private:
  struct Gate;
  struct Dev {
    DeviceInfo info;
    std::string label;                    // "CUDA:0"
    cudaStream_t stream = nullptr;        // unbound calls
    cudaStream_t alloc_stream = nullptr;  // allocations and frees
    // One cuBLAS handle per stream, made on the stream's first gemm or dot: a handle switched
    // between streams loses its workspace at every switch (cublasSetStream resets it).
    std::map<cudaStream_t, cublasHandle_t> blas;
    std::mutex blas_m;  // guards `blas`, and a handle's pointer mode during a call

    // Completions, in submission order, served by `completer`. The submitting thread and the
    // completion thread both take `m` for every operation: a spinning lock, which never puts
    // either to sleep in the kernel (`cv` only when the completion thread is idle, or waits for a
    // host function in 10 ms steps between health checks).
    xdev::detail::SpinMutex m;
    std::condition_variable_any cv;
    std::deque<detail::Pending*> done_queue;
    std::atomic<std::size_t> queued{0};  // done_queue's size, read without the lock while idle
    xdev::detail::SpinMutex events_m;
    std::vector<cudaEvent_t> events;  // recycled (under events_m)
    bool stopping = false;
    bool sleeping = false;  // the completion thread waits on `cv` (else it polls): notify it
    std::thread completer;

    // Host tasks whose host function has not run yet (under `m`): reported failed if the device
    // is lost, since a stream stops running host functions after a sticky error.
    std::vector<Gate*> gates;

    // Set once a sticky error was seen: every later call fails with it.
    std::atomic<bool> lost{false};
    std::string lost_message;  // written once before `lost` is set
  };

  // A host task and its completion, held by the host function that gates the stream. Listed in
  // its device's `gates` until the task ran; if the device is lost first, the completion thread
  // reports the task failed (`abandoned`) and the host function, should it still run, only frees it.
  struct Gate {
    xdev::HostTask task;
    xdev::Completion done;
    xdev::SerialWorker* worker = nullptr;
    Dev* dev = nullptr;
    bool abandoned = false;  // under dev->m
    std::mutex m;
    std::condition_variable cv;
    bool ran = false;
  };

  // CUDA calls this on its host-function thread when the stream reaches the gate: the task runs on
  // the backend's own thread (it may call CUDA, which a host function must not), and the stream
  // waits until it has.
  static void CUDART_CB run_gate(void* user) {
    Gate* g = static_cast<Gate*>(user);
    g->worker->post([g]() mutable {
      xdev::Completion done;
      {
        std::lock_guard lk(g->dev->m);
        if (!g->abandoned) {
          done = std::move(g->done);
          std::erase(g->dev->gates, g);
        }
      }
      std::exception_ptr e;
      if (done) {
        try {
          g->task();
        } catch (...) {
          e = std::current_exception();
        }
      }
      {
        std::lock_guard lk(g->m);
        g->ran = true;
        g->cv.notify_one();  // under the lock: the gate's owner deletes it once it saw `ran`
      }
      if (done) done(std::move(e));
    });
    std::unique_lock lk(g->m);
    g->cv.wait(lk, [g] { return g->ran; });
    lk.unlock();
    delete g;
  }

  // The stream bound to the calling thread by xdev, else the device's own.
  cudaStream_t queue_of(const Dev& d) const noexcept {
    return xdev::QueueBinding<cudaStream_t>::queue_of(this, &d, d.stream);
  }

  static int current_device() noexcept {
    int c = 0;
    cudaGetDevice(&c);
    return c;
  }

  // Makes `d` the calling thread's current CUDA device.
  static void select(const Dev& d) noexcept {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess || current != d.info.ordinal) cudaSetDevice(d.info.ordinal);
  }

  Dev& dev(std::size_t device) {
    if (device >= devices_.size())
      throw xdev::error(xdev::errc::invalid_argument, "CUDA: device " + std::to_string(device) + " does not exist (" +
                                                          std::to_string(devices_.size()) + " devices)");
    Dev& d = *devices_[device];
    if (d.lost.load(std::memory_order_acquire))
      throw xdev::error(xdev::errc::unavailable, d.label + " is lost: " + d.lost_message);
    select(d);
    return d;
  }

  // Marks the device lost after a sticky error (first message wins), and wakes its completion
  // thread, which then reports what the stream will never reach.
  static void mark_lost(Dev& d, const std::string& message) {
    std::lock_guard lk(d.m);
    if (d.lost.load()) return;
    d.lost_message = message;
    d.lost.store(true, std::memory_order_release);
    d.cv.notify_all();
  }

  // Whether the device's context still works: a sticky error (from a kernel on any stream) is
  // returned by every later call, a query of the device's own stream included.
  static void check_health(Dev& d) {
    const cudaError_t e = cudaStreamQuery(d.stream);
    if (cuda_sticky(e)) mark_lost(d, cuda_failure(d.label, "cudaStreamQuery", e).what());
  }

  void check(Dev& d, cudaError_t e, std::string_view op, std::string_view call) {
    if (e == cudaSuccess) return;
    auto err = cuda_failure(d.label + ": " + std::string(op), call, e);
    if (cuda_sticky(e)) {
      mark_lost(d, err.what());
      throw xdev::error(xdev::errc::unavailable, err.what());
    }
    throw err;
  }

  // The cuBLAS handle of stream `s` (made on first use). The caller holds `d.blas_m`.
  cublasHandle_t blas_for(Dev& d, cudaStream_t s) {
    if (const auto it = d.blas.find(s); it != d.blas.end()) return it->second;
    cublasHandle_t h = nullptr;
    blas(d, cublasCreate(&h), "cublasCreate");
    if (const cublasStatus_t st = cublasSetStream(h, s); st != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(h);
      blas(d, st, "cublasSetStream");
    }
    d.blas.emplace(s, h);
    return h;
  }

  void blas(Dev& d, cublasStatus_t st, const char* call) {
    if (st != CUBLAS_STATUS_SUCCESS) throw cublas_failure(d.label, call, st);
  }

  // Whether a pitched copy (`cudaMemcpy2DAsync`) takes rows `pitch` bytes apart on `d`.
  static bool pitched(const Dev& d, std::size_t pitch) noexcept { return pitch <= d.info.max_pitch; }

  static bool page_locked(const void* p) noexcept {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return attr.type == cudaMemoryTypeHost;
  }

  // Device memory for the length of one operation, in stream order.
  void* temp(Dev& d, cudaStream_t s, std::size_t bytes, const char* op) {
    void* p = nullptr;
    const cudaError_t e = cudaMallocAsync(&p, std::max<std::size_t>(bytes, 1), s);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw xdev::error(xdev::errc::out_of_memory, d.label + ": " + op + ": no temporary of " + std::to_string(bytes) +
                                                       " bytes: cudaMallocAsync failed: cudaErrorMemoryAllocation");
    }
    check(d, e, op, "cudaMallocAsync");
    return p;
  }

  // `to` <- `from` on the host, when stream `s` reaches this point.
  void host_copy(Dev& d, cudaStream_t s, void* to, const void* from, std::size_t bytes) {
    auto* c = new detail::HostCopy{to, from, bytes};
    const cudaError_t e = cudaLaunchHostFunc(
        s,
        [](void* u) {
          std::unique_ptr<detail::HostCopy> copy(static_cast<detail::HostCopy*>(u));
          std::memcpy(copy->to, copy->from, copy->bytes);
        },
        c);
    if (e != cudaSuccess) {
      delete c;
      check(d, e, "a pageable host copy", "cudaLaunchHostFunc");
    }
  }

  std::unique_ptr<detail::Pending> pending(Dev& d, xdev::Completion done, const char* op) {
    auto p = std::make_unique<detail::Pending>();
    p->done = std::move(done);
    p->label = &d.label;
    p->op = op;
    return p;
  }

  // Enqueues one launch (`enqueue(stream)` returns its status) and its completion.
  template <class Enqueue>
  void launch(std::size_t device, xdev::Completion done, const char* op, Enqueue&& enqueue) {
    Dev& d = dev(device);
    const cudaStream_t s = queue_of(d);
    auto p = pending(d, std::move(done), op);
    check(d, enqueue(s), op, "a kernel launch");
    complete_on(d, s, std::move(p));
  }

  // Copies the T at device address `value` into a pinned slot, freed with the stream; `p.then`
  // writes it to `*result`.
  template <class T>
  void result_to_host(Dev& d, cudaStream_t s, detail::Pending& p, void* value, T* result) {
    try {
      p.pool = &pinned_;
      p.slot = pinned_.slot(d.label);
      check(d, cudaMemcpyAsync(p.slot, value, sizeof(T), cudaMemcpyDeviceToHost, s), p.op, "cudaMemcpyAsync");
    } catch (...) {
      cudaFreeAsync(value, s);
      throw;
    }
    cudaFreeAsync(value, s);
    p.then = [slot = static_cast<const T*>(p.slot), result] { *result = *slot; };
  }

  // sum and dot: `enqueue(stream, out, scratch)` computes into device memory `out`.
  template <class T, class Enqueue>
  void reduce_to_host(std::size_t device, xdev::Completion done, const char* op, std::size_t n, T* result,
                      Enqueue&& enqueue) {
    Dev& d = dev(device);
    const cudaStream_t s = queue_of(d);
    const std::size_t scratch_bytes = kernels::reduce_scratch_bytes(n, sizeof(T));
    // One temporary: the result first (aligned), then the partial sums.
    char* mem = static_cast<char*>(temp(d, s, 256 + scratch_bytes, op));
    auto p = pending(d, std::move(done), op);
    const cudaError_t e = enqueue(s, mem, mem + 256);
    if (e != cudaSuccess) {
      cudaFreeAsync(mem, s);
      check(d, e, op, "a kernel launch");
    }
    result_to_host<T>(d, s, *p, mem, result);
    complete_on(d, s, std::move(p));
  }

  // Hands the operation's completion to the device's completion thread: an event recorded now
  // (poll mode) or a host function that marks the record arrived when the stream reaches it. The
  // record joins the device's queue in submission order either way.
  void complete_on(Dev& d, cudaStream_t s, std::unique_ptr<detail::Pending> p) {
    if (mode_ == CompletionMode::host_func) {
      struct Hop {
        Dev* d;
        detail::Pending* p;
      };
      auto* hop = new Hop{&d, p.get()};
      const cudaError_t e = cudaLaunchHostFunc(
          s,
          [](void* u) {
            std::unique_ptr<Hop> h(static_cast<Hop*>(u));
            arrive(*h->d, h->p);
          },
          hop);
      if (e != cudaSuccess) {
        delete hop;
        check(d, e, p->op, "cudaLaunchHostFunc");
      }
      std::lock_guard lk(d.m);
      d.done_queue.push_back(p.release());  // the completion thread's (or the host function's, if abandoned)
      d.queued.fetch_add(1, std::memory_order_release);
      if (d.sleeping) d.cv.notify_one();
      return;
    }
    cudaEvent_t ev = nullptr;
    {
      std::lock_guard lk(d.events_m);
      if (!d.events.empty()) {
        ev = d.events.back();
        d.events.pop_back();
      }
    }
    if (ev == nullptr)
      check(d, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), p->op, "cudaEventCreateWithFlags");
    const cudaError_t e = cudaEventRecord(ev, s);
    if (e != cudaSuccess) {
      cudaEventDestroy(ev);
      check(d, e, p->op, "cudaEventRecord");
    }
    p->event = ev;
    std::lock_guard lk(d.m);
    d.done_queue.push_back(p.release());
    d.queued.fetch_add(1, std::memory_order_release);
    if (d.sleeping) d.cv.notify_one();  // a polling completion thread sees it without a wake-up
  }

  // host_func mode: the stream reached record `p` (CUDA's host-function thread; no CUDA calls).
  // A record the completion thread has given up on (the device was lost) is only freed.
  static void arrive(Dev& d, detail::Pending* p) {
    {
      std::lock_guard lk(d.m);
      if (p->state.load(std::memory_order_relaxed) != detail::Pending::State::abandoned) {
        p->state.store(detail::Pending::State::arrived, std::memory_order_release);
        if (d.sleeping) d.cv.notify_one();
        return;
      }
    }
    delete p;
  }

  using Lock = std::unique_lock<xdev::detail::SpinMutex>;

  // The completion thread of a device: reports each record in submission order once its event
  // completed (poll) or its host function ran (host_func). A stream stops at a sticky error and
  // never runs its later host functions, so while any wait on one the thread checks the device's
  // health every `health_poll`; once the device is lost it reports those records and pending host
  // tasks as failed with the original error instead of waiting for them.
  void serve_completions(Dev& d) {
    select(d);
#if defined(__linux__)
    prctl(PR_SET_TIMERSLACK, 1000UL);  // its short sleeps end within a microsecond of their time
#endif
    Lock lk(d.m);
    while (true) {
      if (d.lost.load(std::memory_order_acquire) && !d.gates.empty()) fail_gates(d, lk);
      if (d.done_queue.empty() && !d.stopping) {
        idle_wait(d, lk);
        continue;
      }
      if (d.done_queue.empty()) return;  // stopping, and everything was reported
      detail::Pending* p = d.done_queue.front();
      if (p->event == nullptr && !await_arrival(d, lk, *p)) {
        // Lost before the stream reached it: from now on the record is its host function's.
        d.done_queue.pop_front();
        d.queued.fetch_sub(1, std::memory_order_relaxed);
        p->state.store(detail::Pending::State::abandoned, std::memory_order_relaxed);
        auto done = std::move(p->done);
        auto failure = lost_error(d, *p->label + ": " + p->op);
        lk.unlock();
        done(std::move(failure));
        lk.lock();
        continue;
      }
      lk.unlock();
      cudaError_t status = cudaSuccess;
      if (p->event != nullptr) status = wait_for_event(d, p->event);
      lk.lock();
      d.done_queue.pop_front();
      d.queued.fetch_sub(1, std::memory_order_relaxed);
      lk.unlock();
      if (p->event != nullptr) {
        if (status == cudaSuccess) {
          std::lock_guard ek(d.events_m);
          d.events.push_back(p->event);
        } else {
          cudaEventDestroy(p->event);
        }
      }
      deliver(d, p, status);
      lk.lock();
    }
  }

  static std::exception_ptr lost_error(const Dev& d, const std::string& what) {
    return std::make_exception_ptr(
        xdev::error(xdev::errc::unavailable, what + ": " + d.label + " is lost: " + d.lost_message));
  }

  // Nothing queued: waits (holding `lk` on return) for a record, for the end, or, while host tasks
  // are pending, for the device to be lost. The next operation usually follows within
  // microseconds, so it looks for one for a while before sleeping (then submitting costs no
  // wake-up; it reads the queue's size without the lock, which the submitting thread takes).
  void idle_wait(Dev& d, Lock& lk) {
    using clock = std::chrono::steady_clock;
    const auto until = clock::now() + idle_poll;
    lk.unlock();
    while (d.queued.load(std::memory_order_acquire) == 0 && clock::now() < until) xdev::detail::cpu_relax();
    lk.lock();
    while (!d.stopping && d.done_queue.empty()) {
      if (d.lost.load(std::memory_order_acquire)) {
        if (!d.gates.empty()) fail_gates(d, lk);
        d.sleeping = true;
        d.cv.wait(lk);
        d.sleeping = false;
        continue;
      }
      d.sleeping = true;
      const bool watch = !d.gates.empty();
      const bool timed_out = watch ? d.cv.wait_for(lk, health_poll) == std::cv_status::timeout : (d.cv.wait(lk), false);
      d.sleeping = false;
      if (timed_out) {
        lk.unlock();
        check_health(d);
        lk.lock();
      }
    }
  }

  // host_func mode: waits (holding `lk` on entry and return) until the stream reached `p`; false
  // if the device was lost first.
  bool await_arrival(Dev& d, Lock& lk, const detail::Pending& p) {
    using State = detail::Pending::State;
    if (p.state.load(std::memory_order_acquire) == State::outstanding) {
      using clock = std::chrono::steady_clock;
      const auto until = clock::now() + idle_poll;
      lk.unlock();
      while (p.state.load(std::memory_order_acquire) == State::outstanding && clock::now() < until)
        xdev::detail::cpu_relax();
      lk.lock();
    }
    while (p.state.load(std::memory_order_acquire) == State::outstanding) {
      if (d.lost.load(std::memory_order_acquire)) return false;
      d.sleeping = true;
      const bool timed_out = d.cv.wait_for(lk, health_poll) == std::cv_status::timeout;
      d.sleeping = false;
      if (timed_out && p.state.load(std::memory_order_acquire) == State::outstanding) {
        lk.unlock();
        check_health(d);
        lk.lock();
      }
    }
    return true;
  }

  // The device is lost: every host task whose host function has not run is reported failed.
  static void fail_gates(Dev& d, Lock& lk) {
    std::vector<xdev::Completion> dones;
    for (Gate* g : d.gates) {
      g->abandoned = true;  // its host function, if it ever runs, only frees it
      dones.push_back(std::move(g->done));
    }
    d.gates.clear();
    lk.unlock();
    for (auto& done : dones) done(lost_error(d, d.label + ": host task"));
    lk.lock();
  }

  // Waits for `ev`: polling `cudaEventQuery` for `spin_limit` (as `cudaStreamSynchronize` spins
  // by default on a machine with more cores than GPUs), then every `sleep_poll` in short sleeps.
  // While `ev` is the last operation queued (someone may be waiting for just it) the polls are
  // about a microsecond apart; while more operations wait behind it, `busy_poll` apart: each
  // query takes the driver's lock, which the thread enqueuing those operations needs too (polled
  // every microsecond, a launch cost 1.4 us more on an H100). A blocking wait on the event would
  // save the wake-ups, but waking from it took about 0.2 ms on an H200 machine (docs/cuda.md),
  // which is what a 2 ms gemm then lost.
  static cudaError_t wait_for_event(const Dev& d, cudaEvent_t ev) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    cudaError_t status;
    while ((status = cudaEventQuery(ev)) == cudaErrorNotReady) {
      const auto now = clock::now();
      if (now - start < spin_limit) {
        const auto pause = d.queued.load(std::memory_order_relaxed) > 1 ? busy_poll : std::chrono::microseconds(1);
        while (clock::now() - now < pause) xdev::detail::cpu_relax();
      } else {
        std::this_thread::sleep_for(sleep_poll);
      }
    }
    return status;
  }

  void deliver(Dev& d, detail::Pending* raw, cudaError_t status) {
    std::unique_ptr<detail::Pending> p(raw);
    std::exception_ptr ep;
    if (status != cudaSuccess) {
      auto err = cuda_failure(*p->label + ": " + p->op, "the operation", status);
      if (cuda_sticky(status)) {
        mark_lost(d, err.what());
        ep = std::make_exception_ptr(xdev::error(xdev::errc::unavailable, err.what()));
      } else {
        ep = std::make_exception_ptr(err);
      }
    } else if (d.lost.load(std::memory_order_acquire)) {
      ep = std::make_exception_ptr(xdev::error(xdev::errc::unavailable, d.label + " is lost: " + d.lost_message));
    } else if (p->then) {
      try {
        p->then();
      } catch (...) {
        ep = std::current_exception();
      }
    }
    if (p->slot != nullptr) p->pool->release_slot(p->slot);
    if (p->staging != nullptr) p->pool->release_staging(p->staging, p->staging_size);
    auto done = std::move(p->done);
    p.reset();  // before `done`: the backend may be destroyed once the last completion ran
    done(std::move(ep));
  }

  void discover(const xdev::plugin::ClientOptions& options) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw cuda_failure("CUDA: no usable CUDA device", "cudaGetDeviceCount", e);
    }
    if (count == 0) throw xdev::error(xdev::errc::unavailable, "CUDA: the CUDA runtime sees no device");
    const auto [first, last] = xdev::plugin::device_share(static_cast<std::size_t>(count), options);

    for (std::size_t i = first; i < last; ++i) {
      auto d = std::make_unique<Dev>();
      d->label = "CUDA:" + std::to_string(devices_.size());
      cudaDeviceProp prop{};
      const int ordinal = static_cast<int>(i);
      cuda_check(cudaGetDeviceProperties(&prop, ordinal), d->label, "cudaGetDeviceProperties");
      d->info.ordinal = ordinal;
      d->info.name = prop.name;
      d->info.major = prop.major;
      d->info.minor = prop.minor;
      d->info.multiprocessors = prop.multiProcessorCount;
      d->info.total_memory = prop.totalGlobalMem;
      d->info.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
      d->info.max_threads_per_block = prop.maxThreadsPerBlock;
      d->info.integrated = prop.integrated != 0;
      d->info.max_pitch = prop.memPitch;
      // Owned by devices_ before anything can fail: release() frees what was created.
      devices_.push_back(std::move(d));
      Dev& dv = *devices_.back();
      cuda_check(cudaSetDevice(ordinal), dv.label, "cudaSetDevice");
      cudaMemPool_t pool = nullptr;
      cuda_check(cudaDeviceGetDefaultMemPool(&pool, ordinal), dv.label, "cudaDeviceGetDefaultMemPool");
      std::uint64_t keep = UINT64_MAX;  // freed memory stays in the pool
      cuda_check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), dv.label,
                 "cudaMemPoolSetAttribute");
      cuda_check(cudaStreamCreateWithFlags(&dv.stream, cudaStreamNonBlocking), dv.label, "cudaStreamCreateWithFlags");
      cuda_check(cudaStreamCreateWithFlags(&dv.alloc_stream, cudaStreamNonBlocking), dv.label,
                 "cudaStreamCreateWithFlags");
      dv.completer = std::thread([this, &dv] { serve_completions(dv); });
    }
    // Peer access between every pair that allows it (copies between them are then direct).
    for (auto& a : devices_)
      for (auto& b : devices_) {
        if (a == b) continue;
        int can = 0;
        if (cudaDeviceCanAccessPeer(&can, a->info.ordinal, b->info.ordinal) == cudaSuccess && can != 0) {
          cudaSetDevice(a->info.ordinal);
          if (cudaDeviceEnablePeerAccess(b->info.ordinal, 0) != cudaSuccess) cudaGetLastError();
        }
      }

    caps_ = capabilities::set;
    caps_.memory_per_device = 0;
    for (const auto& d : devices_)
      caps_.memory_per_device =
          caps_.memory_per_device == 0 ? d->info.total_memory : std::min(caps_.memory_per_device, d->info.total_memory);
    host_worker_ = std::make_unique<xdev::SerialWorker>();
  }

  void release() noexcept {
    for (auto& d : devices_) {
      select(*d);
      if (d->stream != nullptr) cudaStreamSynchronize(d->stream);
      if (d->alloc_stream != nullptr) cudaStreamSynchronize(d->alloc_stream);
    }
    for (auto& d : devices_) {
      if (d->completer.joinable()) {
        {
          std::lock_guard lk(d->m);
          d->stopping = true;
        }
        d->cv.notify_one();
        d->completer.join();
      }
    }
    host_worker_.reset();  // runs the host tasks already posted
    for (auto& d : devices_) {
      select(*d);
      for (cudaEvent_t ev : d->events) cudaEventDestroy(ev);
      for (const auto& [stream, h] : d->blas) cublasDestroy(h);
      if (d->stream != nullptr) cudaStreamDestroy(d->stream);
      if (d->alloc_stream != nullptr) cudaStreamDestroy(d->alloc_stream);
    }
    devices_.clear();
  }

  // How long the completion thread polls an event continuously, how far apart those polls are
  // while more operations wait behind the polled one, then how long it sleeps between polls.
  static constexpr std::chrono::microseconds spin_limit{2000};
  static constexpr std::chrono::microseconds busy_poll{4};
  static constexpr std::chrono::microseconds sleep_poll{10};
  // How long the completion thread looks for the next operation before it sleeps.
  static constexpr std::chrono::microseconds idle_poll{100};
  // How often it checks the device's health while waiting for a host function.
  static constexpr std::chrono::milliseconds health_poll{10};

  CompletionMode mode_ = CompletionMode::poll;
  std::vector<std::unique_ptr<Dev>> devices_;
  xdev::CapabilitySet caps_;
  detail::PinnedPool pinned_;
  std::unique_ptr<xdev::SerialWorker> host_worker_;
};

}  // namespace xdev_cuda
