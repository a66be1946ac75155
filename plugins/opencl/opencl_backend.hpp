/// \file
/// `xdev_opencl::OpenCL`: xdev's OpenCL backend, device type "OPENCL", shipped as the plugin
/// `libxdev_plugin_opencl.so` (opencl_plugin.cpp). It links the OpenCL ICD loader only, so it
/// drives whatever OpenCL drivers are installed (PoCL on a CPU, a GPU vendor's driver).
///
/// - Devices: every device of every platform, in platform order, restricted by
///   `XDEV_OPENCL_PLATFORM` (a case-insensitive substring of the platform name) and
///   `XDEV_OPENCL_DEVICE_TYPE` (a comma-separated list of `cpu`, `gpu`, `accelerator`, or `all`, the
///   default). In a multi-process job each local process takes its share (see `share_of`).
/// - One context per platform (per platform and fp64 support), in which the kernels of
///   kernels.hpp are compiled once, when the backend is created (`XDEV_OPENCL_BUILD_OPTIONS` adds
///   compiler options); a failed build reports the compiler's log. Each device has one in-order
///   command queue.
/// - Memory: one `clCreateBuffer` per allocation. A request above the device's maximum allocation,
///   or beyond its global memory (counted per device), and the runtime's own out-of-memory codes
///   are `errc::out_of_memory` naming the device and the size.
/// - Asynchrony: transfers are non-blocking `clEnqueueRead/Write/CopyBuffer`, ops are kernels; the
///   last command of each submission carries an event whose `clSetEventCallback` reports the
///   completion to xdev: no thread waits per operation. Completions therefore run on the OpenCL
///   runtime's callback thread. Host tasks wait for a marker, then run on the backend's own thread.
/// - Device times: the queues profile their commands (`CL_QUEUE_PROFILING_ENABLE`) where the
///   device's timer can be put on the host's steady clock (the offset is measured once per device,
///   at start, from a marker's QUEUED time); each completion then reports when the device started
///   and ended its submission's last command (`xdev::report_device_times`).
/// - User kernels (`xdev::Kernel`, OpenCL C, ABI 1.9): built per device on the first launch there,
///   with the build log in the error when the build fails, and the signature checked against the
///   declared parameters (user_kernel.hpp); launched like the ops, on the bound queue.
/// - Every failed OpenCL call is reported with the call and the status by name (cl_error.hpp).
#pragma once

#include "cl_error.hpp"
#include "kernels.hpp"
#include "settings.hpp"
#include "user_kernel.hpp"

#include <xdev/backend/completion.hpp>
#include <xdev/backend/detail/join.hpp>
#include <xdev/backend/device_properties.hpp>
#include <xdev/backend/queue_binding.hpp>
#include <xdev/backend/serial_worker.hpp>
#include <xdev/backend/strided_region.hpp>
#include <xdev/core/detail/block_pool.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/kernels/detail/rounding.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/policy/capabilities.hpp>
#include <xdev/random/stream.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace xdev_opencl {

/// What the backend knows of one OpenCL device (from `clGetDeviceInfo`).
struct DeviceInfo {
  std::string name;
  std::string vendor;
  std::string version;         ///< CL_DEVICE_VERSION: "OpenCL 3.0 PoCL ..."
  std::string driver_version;  ///< CL_DRIVER_VERSION
  std::string platform;        ///< the platform's name
  cl_device_type type = 0;
  cl_uint compute_units = 0;
  cl_ulong global_memory = 0;   ///< bytes
  cl_ulong max_allocation = 0;  ///< bytes, CL_DEVICE_MAX_MEM_ALLOC_SIZE
  cl_ulong local_memory = 0;    ///< bytes
  std::size_t max_work_group = 0;
  bool fp64 = false;
  bool fp16 = false;

  /// CL_DEVICE_TYPE as xdev's (a device of several types: its GPU, accelerator or CPU bit, in that
  /// order, as `type_name`).
  [[nodiscard]] xdev::DeviceType device_type() const noexcept {
    if (type & CL_DEVICE_TYPE_GPU) return xdev::DeviceType::gpu;
    if (type & CL_DEVICE_TYPE_ACCELERATOR) return xdev::DeviceType::accelerator;
    if (type & CL_DEVICE_TYPE_CPU) return xdev::DeviceType::cpu;
    return xdev::DeviceType::unknown;
  }
  /// "CPU", "GPU", "accelerator" or "other" (`device_type` in the descriptions' words).
  [[nodiscard]] std::string type_name() const {
    switch (device_type()) {
      case xdev::DeviceType::gpu:
        return "GPU";
      case xdev::DeviceType::accelerator:
        return "accelerator";
      case xdev::DeviceType::cpu:
        return "CPU";
      case xdev::DeviceType::unknown:
        break;
    }
    return "other";
  }
};

/// The devices local process `rank` of `size` takes out of `count` (`xdev::plugin::device_share`).
inline std::pair<std::size_t, std::size_t> share_of(std::size_t count, std::size_t rank, std::size_t size) {
  return xdev::plugin::device_share(count, rank, size);
}

namespace detail {

// The device types `XDEV_OPENCL_DEVICE_TYPE` selects (settings.hpp), as OpenCL's bits.
inline cl_device_type device_type_bits(const DeviceTypes& t) {
  if (t.all) return CL_DEVICE_TYPE_ALL;
  cl_device_type bits = 0;
  if (t.cpu) bits |= CL_DEVICE_TYPE_CPU;
  if (t.gpu) bits |= CL_DEVICE_TYPE_GPU;
  if (t.accelerator) bits |= CL_DEVICE_TYPE_ACCELERATOR;
  return bits;
}

// A string property from an OpenCL info query: `query(size, buffer, &size_needed)` is
// clGetPlatformInfo, clGetDeviceInfo, ... bound to its object and parameter. Trailing NULs dropped.
template <class Query>
std::string info_string(Query query, const char* call) {
  std::size_t size = 0;
  cl_check(query(0, nullptr, &size), "OPENCL", call);
  std::string s(size, '\0');
  cl_check(query(size, s.data(), nullptr), "OPENCL", call);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

inline std::string platform_string(cl_platform_id p, cl_platform_info what) {
  return info_string([&](std::size_t n, void* v, std::size_t* r) { return clGetPlatformInfo(p, what, n, v, r); },
                     "clGetPlatformInfo");
}

inline std::string device_string(cl_device_id d, cl_device_info what) {
  return info_string([&](std::size_t n, void* v, std::size_t* r) { return clGetDeviceInfo(d, what, n, v, r); },
                     "clGetDeviceInfo");
}

template <class T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  cl_check(clGetDeviceInfo(d, what, sizeof v, &v, nullptr), "OPENCL", "clGetDeviceInfo");
  return v;
}

inline DeviceInfo query_device(cl_device_id d, const std::string& platform) {
  DeviceInfo i;
  i.name = device_string(d, CL_DEVICE_NAME);
  i.vendor = device_string(d, CL_DEVICE_VENDOR);
  i.version = device_string(d, CL_DEVICE_VERSION);
  i.driver_version = device_string(d, CL_DRIVER_VERSION);
  i.platform = platform;
  i.type = device_value<cl_device_type>(d, CL_DEVICE_TYPE);
  i.compute_units = device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS);
  i.global_memory = device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE);
  i.max_allocation = device_value<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  i.local_memory = device_value<cl_ulong>(d, CL_DEVICE_LOCAL_MEM_SIZE);
  i.max_work_group = device_value<std::size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  const std::string extensions = " " + device_string(d, CL_DEVICE_EXTENSIONS) + " ";
  i.fp64 = device_value<cl_device_fp_config>(d, CL_DEVICE_DOUBLE_FP_CONFIG) != 0 ||
           extensions.find(" cl_khr_fp64 ") != std::string::npos;
  i.fp16 = extensions.find(" cl_khr_fp16 ") != std::string::npos;
  return i;
}

// The argument of a kernel that is `__local` memory of `bytes` bytes.
struct Local {
  std::size_t bytes;
};

// What an OpenCL callback needs to report a finished submission to xdev.
struct Pending {
  // One per command reported: from the recycling pool.
  static void* operator new(std::size_t bytes) { return xdev::detail::block_pool::instance().allocate(bytes); }
  static void operator delete(void* p, std::size_t bytes) noexcept {
    xdev::detail::block_pool::instance().deallocate(p, bytes);
  }

  xdev::Completion done;
  std::optional<std::int64_t> clock_offset;  // device timer + this = host steady clock (ns), when known
  // What prefixes a failure, "OPENCL:0: gemm": the device's label and a static op name (joined
  // only when the command fails), or a description built at submission (`what`).
  const std::string* device = nullptr;
  const char* op = nullptr;
  std::string what;
  xdev::HostTask then;                   // runs on success before `done` (may throw): result checks
  std::vector<unsigned char> host_data;  // host memory a read-back writes into (lives until then ran)

  [[nodiscard]] std::string describe() const {
    if (op == nullptr) return what;
    std::string d = *device;
    d += ": ";
    d += op;
    return d;
  }
};

// The event callback: reports the submission's status (or `then`'s exception) to xdev.
inline void CL_CALLBACK on_complete(cl_event ev, cl_int status, void* user) noexcept {
  std::unique_ptr<Pending> p(static_cast<Pending*>(user));
  // Where the device ran the command (profiling info), on the host's steady clock.
  std::optional<xdev::DeviceTimes> times;
  cl_ulong start = 0, end = 0;
  if (p->clock_offset && status >= 0 &&
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr) == CL_SUCCESS &&
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) == CL_SUCCESS && start != 0 &&
      end >= start) {
    const auto at = [&](cl_ulong t) {
      return std::chrono::steady_clock::time_point(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::nanoseconds(static_cast<std::int64_t>(t) + *p->clock_offset)));
    };
    times = xdev::DeviceTimes{at(start), at(end)};
  }
  clReleaseEvent(ev);
  std::exception_ptr ep;
  if (status < 0) {
    ep = std::make_exception_ptr(cl_failure(p->describe(), "the command", status));
  } else if (p->then) {
    try {
      p->then();
    } catch (...) {
      ep = std::current_exception();
    }
  }
  auto done = std::move(p->done);
  p.reset();  // before `done`: the backend may be destroyed once the last completion ran
  if (times) xdev::report_device_times(*times);
  done(std::move(ep));
}

template <class T>
inline constexpr bool is_float_data = std::is_same_v<T, float> || std::is_same_v<T, double>;

// The dtype name kernels.hpp uses for an element type.
template <class T>
constexpr std::string_view dtype_suffix() noexcept {
  return xdev::name_of(xdev::dtype_of<T>);
}

// A kernel name's fixed part, as a template argument: kernel_name<"scale_", T>.
template <std::size_t N>
struct NamePrefix {
  char c[N]{};
  consteval NamePrefix(const char (&s)[N]) {  // NOLINT(google-explicit-constructor): a literal is the point
    for (std::size_t i = 0; i < N; ++i) c[i] = s[i];
  }
};

// The name of one of kernels.hpp's kernels, with static storage: its address identifies it, so a
// launch finds its cl_kernel in `OpenCL::kernel`'s per-device cache without building or comparing
// strings.
class StaticKernelName {
 public:
  [[nodiscard]] constexpr const char* c_str() const noexcept { return text_; }
  constexpr operator std::string_view() const noexcept { return text_; }  // NOLINT(google-explicit-constructor)

 private:
  template <NamePrefix, class...>
  friend struct KernelNameText;
  constexpr explicit StaticKernelName(const char* text) noexcept : text_(text) {}
  const char* text_;
};

// `P` followed by the dtype names of `T...`, joined by '_': "scale_f32", "convert_f16_i32".
template <NamePrefix P, class... T>
struct KernelNameText {
  static_assert(sizeof...(T) > 0, "a kernel name ends with at least one dtype");
  static constexpr auto text = [] {
    constexpr std::size_t prefix = sizeof(P.c) - 1;  // without its terminator
    constexpr std::size_t length = prefix + (dtype_suffix<T>().size() + ... + 0) + (sizeof...(T) - 1);
    std::array<char, length + 1> out{};
    std::size_t at = 0;
    for (std::size_t i = 0; i < prefix; ++i) out[at++] = P.c[i];
    bool first = true;
    const auto put = [&](std::string_view part) {
      if (!first) out[at++] = '_';
      first = false;
      for (char ch : part) out[at++] = ch;
    };
    (put(dtype_suffix<T>()), ...);
    return out;
  }();
  static constexpr StaticKernelName name{text.data()};
};

template <NamePrefix P, class... T>
inline constexpr StaticKernelName kernel_name = KernelNameText<P, T...>::name;

// The rounding code of the kernels (0 none, 1 to f32, 2 to f16, 3 to bf16) for autocast dtype
// `compute` on T data: xdev's own input rounding (`xdev::kernels::detail::Rounding`, same order).
template <class T>
cl_uint rounding_code(xdev::DType compute, const char* op) {
  return static_cast<cl_uint>(xdev::kernels::detail::rounding_for<T>(compute, op));
}
using xdev::kernels::detail::Rounding;
static_assert(static_cast<int>(Rounding::none) == 0 && static_cast<int>(Rounding::to_f32) == 1 &&
              static_cast<int>(Rounding::to_f16) == 2 && static_cast<int>(Rounding::to_bf16) == 3);

}  // namespace detail

/// The OpenCL backend (see the file comment).
class OpenCL {
 public:
  static constexpr std::string_view name = "OPENCL";
  /// Up to 64 operations in flight, Philox by default, no dense gather (an OpenCL device gathers
  /// rows directly), autocast to bf16 under the `private_use` key (PyTorch's key for out-of-tree
  /// devices). The priority is decided at run time (`runtime_capabilities`).
  using capabilities =
      xdev::Capabilities<xdev::MaxInflight<64>, xdev::RngDefault<xdev::RngAlgorithm::philox>, xdev::DenseGather<0>,
                         xdev::Autocast<xdev::AutocastKey::private_use, xdev::DType::bf16>, xdev::Priority<-150>>;
  using memory_handle = cl_mem;
  static constexpr std::string_view plugin_version = "1.0.0";
  static constexpr std::string_view plugin_platform =
      "OpenCL 1.2 through the ICD loader: every installed OpenCL driver's devices";

  /// Finds the devices, creates a context per platform, compiles the kernels there, and a command
  /// queue per device.
  /// \throws xdev::error `errc::unavailable` when there is no OpenCL platform or no device passes
  /// the filters (the message lists what was found); `errc::invalid_argument` for a malformed
  /// `XDEV_OPENCL_DEVICE_TYPE`; `errc::internal` with the build log when the kernels fail to compile.
  explicit OpenCL(const xdev::plugin::ClientOptions& options = {}) {
    try {
      discover(options);
    } catch (...) {
      release();
      throw;
    }
  }
  OpenCL(const OpenCL&) = delete;
  OpenCL& operator=(const OpenCL&) = delete;
  ~OpenCL() { release(); }

  [[nodiscard]] std::size_t device_count() const noexcept { return devices_.size(); }

  /// The static capabilities, with what the devices tell: the smallest global memory, f64 only when
  /// every device has it, and a priority above the host backend's (-100) when a GPU or accelerator
  /// is among the devices (100), below it for CPU devices only (-150).
  [[nodiscard]] xdev::CapabilitySet runtime_capabilities() const noexcept { return caps_; }

  /// What the device is: "Portable Computing Language / cpu-haswell-... (CPU), OpenCL 3.0 PoCL ...,
  /// 2 compute units, 23.1 GiB global memory (max allocation 8 GiB), 512 KiB local, fp64 yes,
  /// fp16 no".
  [[nodiscard]] std::string device_description(std::size_t device) const {
    const DeviceInfo& i = devices_.at(device)->info;
    auto size = [](cl_ulong b) {
      char buf[32];
      if (b >= (cl_ulong{1} << 30))
        std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / static_cast<double>(1ull << 30));
      else if (b >= (cl_ulong{1} << 20))
        std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / static_cast<double>(1ull << 20));
      else
        std::snprintf(buf, sizeof buf, "%.0f KiB", static_cast<double>(b) / 1024.0);
      return std::string(buf);
    };
    return i.platform + " / " + i.name + " (" + i.type_name() + "), " + i.version + ", " +
           std::to_string(i.compute_units) + " compute units, " + size(i.global_memory) +
           " global memory (max allocation " + size(i.max_allocation) + "), " + size(i.local_memory) + " local, fp64 " +
           (i.fp64 ? "yes" : "no") + ", fp16 " + (i.fp16 ? "yes" : "no");
  }

  /// What device `device` is as typed fields (`concepts::ReportsDeviceProperties`, ABI 1.8), from
  /// `clGetDeviceInfo`: CL_DEVICE_TYPE, CL_DEVICE_NAME, CL_DEVICE_VENDOR, CL_DRIVER_VERSION, CL_DEVICE_VERSION,
  /// CL_DEVICE_MAX_COMPUTE_UNITS, CL_DEVICE_MAX_WORK_GROUP_SIZE and CL_DEVICE_GLOBAL_MEM_SIZE.
  /// OpenCL has no standard query for free memory, so `memory_free` is unknown.
  [[nodiscard]] xdev::DeviceProperties device_properties(std::size_t device) const {
    const DeviceInfo& i = devices_.at(device)->info;
    xdev::DeviceProperties p;
    p.type = i.device_type();
    p.name = i.name;
    p.vendor = i.vendor;
    p.driver_version = i.driver_version;
    p.architecture = i.version;
    p.compute_units = i.compute_units;
    p.max_work_group_size = i.max_work_group;
    p.memory_total = static_cast<std::size_t>(i.global_memory);
    return p;
  }

  /// The device's properties as queried.
  [[nodiscard]] const DeviceInfo& device_info(std::size_t device) const { return devices_.at(device)->info; }

  // ---- memory -------------------------------------------------------------------------------

  /// A new buffer of `bytes` bytes in the device's context.
  /// \throws xdev::error `errc::out_of_memory` naming the device and the size.
  memory_handle allocate(std::size_t device, std::size_t bytes) {
    Dev& d = dev(device);
    const cl_ulong want = std::max<cl_ulong>(bytes, 1);
    if (want > d.info.max_allocation)
      throw xdev::error(xdev::errc::out_of_memory, d.label + " cannot allocate " + std::to_string(bytes) +
                                                       " bytes: above the device's maximum allocation of " +
                                                       std::to_string(d.info.max_allocation) + " bytes");
    cl_ulong used = d.allocated.load();
    do {
      if (want > d.info.global_memory - std::min(used, d.info.global_memory))
        throw xdev::error(xdev::errc::out_of_memory,
                          d.label + " cannot allocate " + std::to_string(bytes) + " bytes: " + std::to_string(used) +
                              " of its " + std::to_string(d.info.global_memory) + " bytes of global memory are in use");
    } while (!d.allocated.compare_exchange_weak(used, used + want));
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(contexts_[d.context].context, CL_MEM_READ_WRITE, want, nullptr, &err);
    if (err != CL_SUCCESS || m == nullptr) {
      d.allocated -= want;
      if (cl_errc(err) == xdev::errc::out_of_memory || err == CL_INVALID_BUFFER_SIZE)
        throw xdev::error(xdev::errc::out_of_memory,
                          d.label + " cannot allocate " + std::to_string(bytes) + " bytes: clCreateBuffer failed: " +
                              std::string(cl_error_name(err)) + " (" + std::to_string(err) + ")");
      throw cl_failure(d.label + ": allocating " + std::to_string(bytes) + " bytes", "clCreateBuffer", err);
    }
    return m;
  }

  void deallocate(std::size_t device, memory_handle h, std::size_t bytes) noexcept {
    if (h == nullptr) return;
    clReleaseMemObject(h);
    if (device < devices_.size()) devices_[device]->allocated -= std::max<cl_ulong>(bytes, 1);
  }

  // ---- transfers (non-blocking, on the device's in-order queue) -----------------------------

  void copy_to_device(std::size_t device, const void* src, memory_handle dst, std::size_t dst_offset, std::size_t bytes,
                      xdev::Completion done) {
    if (bytes == 0) return done(nullptr);
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    cl_event ev = nullptr;
    cl_check(clEnqueueWriteBuffer(queue_of(d), dst, CL_FALSE, dst_offset, bytes, src, 0, nullptr, &ev), d.label,
             "clEnqueueWriteBuffer");
    complete_on(d, lk, ev, pending(std::move(done), d, "copy to device"));
  }

  void copy_to_host(std::size_t device, memory_handle src, std::size_t src_offset, void* dst, std::size_t bytes,
                    xdev::Completion done) {
    if (bytes == 0) return done(nullptr);
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    cl_event ev = nullptr;
    cl_check(clEnqueueReadBuffer(queue_of(d), src, CL_FALSE, src_offset, bytes, dst, 0, nullptr, &ev), d.label,
             "clEnqueueReadBuffer");
    complete_on(d, lk, ev, pending(std::move(done), d, "copy to host"));
  }

  /// A strided window (`concepts::StridedTransfers`) in one `clEnqueueReadBufferRect` /
  /// `clEnqueueWriteBufferRect`: the region's offset becomes the buffer origin (slice, row, byte)
  /// and the host side is dense. A slice pitch that is not a multiple of the row pitch (which
  /// OpenCL requires) goes one slice per call.
  void copy_to_host_strided(std::size_t device, memory_handle src, const xdev::StridedRegion& r, void* dst,
                            xdev::Completion done) {
    copy_rect(device, src, r, dst, true, std::move(done));
  }
  void copy_to_device_strided(std::size_t device, const void* src, memory_handle dst, const xdev::StridedRegion& r,
                              xdev::Completion done) {
    copy_rect(device, dst, r, const_cast<void*>(src), false, std::move(done));
  }

  /// A copy between strided windows (`concepts::StridedCopies`): within one context and between
  /// two buffers, one `clEnqueueCopyBufferRect` on the source device's queue. Between windows of
  /// one buffer (their rectangles may interleave, which OpenCL refuses as an overlap), two: into a
  /// dense temporary buffer of the region's bytes and out of it. Two contexts, a slice pitch that
  /// is no multiple of the row pitch, or no memory for the temporary: one `copy_between` per row.
  void copy_between_strided(std::size_t sd, memory_handle src, const xdev::StridedRegion& sr, std::size_t dd,
                            memory_handle dst, const xdev::StridedRegion& dr, xdev::Completion done) {
    if (sr.bytes() == 0) return done(nullptr);
    Dev& s = dev(sd);
    Dev& t = dev(dd);
    const auto slice_pitch = [](const xdev::StridedRegion& r) {
      return r.slices > 1 ? r.slice_pitch : r.rows * r.row_pitch;
    };
    const std::size_t sp = slice_pitch(sr), dp = slice_pitch(dr);
    cl_mem temporary = nullptr;
    if (src == dst && s.context == t.context) {
      cl_int err = CL_SUCCESS;
      temporary = clCreateBuffer(contexts_[s.context].context, CL_MEM_READ_WRITE, sr.bytes(), nullptr, &err);
      if (err != CL_SUCCESS) temporary = nullptr;
    }
    if ((src == dst && temporary == nullptr) || s.context != t.context || sp % sr.row_pitch != 0 ||
        dp % dr.row_pitch != 0) {
      if (temporary != nullptr) clReleaseMemObject(temporary);
      return xdev::detail::start_parts(
          sr.rows * sr.slices,
          [&](std::size_t i, xdev::Completion part) {
            copy_between(sd, src, sr.row_offset(i), dd, dst, dr.row_offset(i), sr.row_bytes, std::move(part));
          },
          std::move(done));
    }
    const std::size_t from[3] = {sr.offset % sp % sr.row_pitch, sr.offset % sp / sr.row_pitch, sr.offset / sp};
    const std::size_t to[3] = {dr.offset % dp % dr.row_pitch, dr.offset % dp / dr.row_pitch, dr.offset / dp};
    const std::size_t region[3] = {sr.row_bytes, sr.rows, sr.slices};
    const std::size_t dense[3] = {0, 0, 0};
    const std::size_t dense_slice = sr.row_bytes * sr.rows;
    std::unique_lock lk(s.m);
    cl_event ev = nullptr;
    cl_int err = CL_SUCCESS;
    if (temporary == nullptr) {
      err = clEnqueueCopyBufferRect(queue_of(s), src, dst, from, to, region, sr.row_pitch, sp, dr.row_pitch, dp, 0,
                                    nullptr, &ev);
    } else {
      // In and out of the temporary on the in-order queue; it is freed once both commands ran.
      err = clEnqueueCopyBufferRect(queue_of(s), src, temporary, from, dense, region, sr.row_pitch, sp, sr.row_bytes,
                                    dense_slice, 0, nullptr, nullptr);
      if (err == CL_SUCCESS)
        err = clEnqueueCopyBufferRect(queue_of(s), temporary, dst, dense, to, region, sr.row_bytes, dense_slice,
                                      dr.row_pitch, dp, 0, nullptr, &ev);
      clReleaseMemObject(temporary);
    }
    cl_check(err, s.label, "clEnqueueCopyBufferRect");
    complete_on(s, lk, ev, pending(std::move(done), s.label + ": strided copy to " + t.label));
  }

  /// Within one context, a `clEnqueueCopyBuffer` on the source device's queue; between contexts,
  /// through host memory: a read on the source's queue whose completion enqueues the write on the
  /// destination's.
  void copy_between(std::size_t src_device, memory_handle src, std::size_t src_offset, std::size_t dst_device,
                    memory_handle dst, std::size_t dst_offset, std::size_t bytes, xdev::Completion done) {
    if (bytes == 0) return done(nullptr);
    Dev& s = dev(src_device);
    Dev& t = dev(dst_device);
    if (s.context == t.context) {
      std::unique_lock lk(s.m);
      cl_event ev = nullptr;
      cl_check(clEnqueueCopyBuffer(queue_of(s), src, dst, src_offset, dst_offset, bytes, 0, nullptr, &ev), s.label,
               "clEnqueueCopyBuffer");
      complete_on(s, lk, ev, pending(std::move(done), s.label + ": copy to " + t.label));
      return;
    }
    auto staging = std::make_shared<std::vector<unsigned char>>(bytes);
    auto p = pending(std::move(done), s.label + ": copy to " + t.label + " (read)");
    // The read's completion starts the write; the write's completion reports to xdev.
    auto finish = std::make_shared<xdev::Completion>(std::move(p->done));
    p->done = [this, &t, dst, dst_offset, bytes, staging, finish](std::exception_ptr ep) mutable {
      if (ep) return (*finish)(ep);
      try {
        std::unique_lock lk(t.m);
        cl_event ev = nullptr;
        cl_check(clEnqueueWriteBuffer(t.queue, dst, CL_FALSE, dst_offset, bytes, staging->data(), 0, nullptr, &ev),
                 t.label, "clEnqueueWriteBuffer");
        auto w = pending([staging, finish](std::exception_ptr e) { (*finish)(std::move(e)); },
                         t.label + ": copy from another context (write)");
        complete_on(t, lk, ev, std::move(w));
      } catch (...) {
        (*finish)(std::current_exception());
      }
    };
    std::unique_lock lk(s.m);
    cl_event ev = nullptr;
    cl_check(clEnqueueReadBuffer(queue_of(s), src, CL_FALSE, src_offset, bytes, staging->data(), 0, nullptr, &ev),
             s.label, "clEnqueueReadBuffer");
    complete_on(s, lk, ev, std::move(p));
  }

  /// Runs `task` on the backend's host thread once the device's queue reached this point. On a
  /// stream's own queue (bound by xdev) the commands enqueued after it wait for the task too: a
  /// barrier on a user event that is set when the task has run (whatever its outcome: a failed task
  /// reports its own error and must not fail the commands after it).
  void execute(std::size_t device, xdev::HostTask task, xdev::Completion done) {
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    const cl_command_queue q = queue_of(d);
    cl_event gate = nullptr;
    if (q != d.queue) {
      cl_int err = CL_SUCCESS;
      gate = clCreateUserEvent(contexts_[d.context].context, &err);
      cl_check(err, d.label, "clCreateUserEvent");
    }
    cl_event ev = nullptr;
    try {
      cl_check(clEnqueueMarkerWithWaitList(q, 0, nullptr, &ev), d.label, "clEnqueueMarkerWithWaitList");
      if (gate != nullptr)
        cl_check(clEnqueueBarrierWithWaitList(q, 1, &gate, nullptr), d.label, "clEnqueueBarrierWithWaitList");
    } catch (...) {
      if (ev != nullptr) clReleaseEvent(ev);
      if (gate != nullptr) {
        clSetUserEventStatus(gate, CL_COMPLETE);
        clReleaseEvent(gate);
      }
      throw;
    }
    auto shared_task = std::make_shared<xdev::HostTask>(std::move(task));
    auto open_gate = [gate] {
      if (gate == nullptr) return;
      clSetUserEventStatus(gate, CL_COMPLETE);
      clReleaseEvent(gate);
    };
    complete_on(d, lk, ev,
                pending(
                    [this, shared_task, open_gate, done = std::move(done)](std::exception_ptr ep) mutable {
                      if (ep) {
                        open_gate();
                        return done(ep);
                      }
                      host_worker_->post([shared_task, open_gate, done = std::move(done)]() mutable {
                        std::exception_ptr e;
                        try {
                          (*shared_task)();
                        } catch (...) {
                          e = std::current_exception();
                        }
                        open_gate();
                        done(std::move(e));
                      });
                    },
                    d.label + ": host task"));
  }

  // ---- native queues (concepts::NativeQueues) -----------------------------------------------

  /// One more in-order command queue on `device`, for an xdev stream.
  using queue_handle = cl_command_queue;
  queue_handle create_queue(std::size_t device) {
    Dev& d = dev(device);
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(contexts_[d.context].context, d.id, queue_properties(d), &err);
    cl_check(err, d.label, "clCreateCommandQueue");
    try {
      std::lock_guard lk(d.m);
      d.stream_queues.push_back(q);
    } catch (...) {
      clReleaseCommandQueue(q);
      throw;
    }
    return q;
  }
  /// xdev destroys a queue only once every operation on it has completed. The queues of streams
  /// still alive when the backend is destroyed are released with it.
  void destroy_queue(std::size_t device, queue_handle q) noexcept {
    if (q == nullptr) return;
    if (device < devices_.size()) {
      Dev& d = *devices_[device];
      std::lock_guard lk(d.m);
      std::erase(d.stream_queues, q);
    }
    clFinish(q);
    clReleaseCommandQueue(q);
  }
  /// The calling thread's next calls for `device` enqueue on `q` (until `unbind_queue`).
  void bind_queue(std::size_t device, queue_handle q) noexcept {
    xdev::QueueBinding<queue_handle>::bind(this, device < devices_.size() ? devices_[device].get() : nullptr, q);
  }
  void unbind_queue(std::size_t) noexcept { xdev::QueueBinding<queue_handle>::unbind(); }

  // ---- native markers (concepts::NativeMarkers) ---------------------------------------------

  /// A marker event on the bound queue; `done` once the commands before it have completed. The
  /// event is retained for xdev until `release_marker`.
  using marker_handle = cl_event;
  marker_handle record_marker(std::size_t device, xdev::Completion done) {
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    cl_event ev = nullptr;
    cl_check(clEnqueueMarkerWithWaitList(queue_of(d), 0, nullptr, &ev), d.label, "clEnqueueMarkerWithWaitList");
    clRetainEvent(ev);  // xdev's reference; the completion callback owns the other
    try {
      complete_on(d, lk, ev, pending(std::move(done), d, "marker"));
    } catch (...) {
      clReleaseEvent(ev);
      throw;
    }
    return ev;
  }
  /// The commands enqueued later on the bound queue wait for `m` (a marker of any queue of the
  /// device: all of them share the device's context).
  void wait_marker(std::size_t device, marker_handle m) {
    Dev& d = dev(device);
    std::lock_guard lk(d.m);
    cl_check(clEnqueueBarrierWithWaitList(queue_of(d), 1, &m, nullptr), d.label, "clEnqueueBarrierWithWaitList");
  }
  void release_marker(std::size_t, marker_handle m) noexcept { clReleaseEvent(m); }

  // ---- pinned host memory (concepts::AllocatesPinned) ------------------------------------------

  /// Host memory the device transfers from and to fast: a `CL_MEM_ALLOC_HOST_PTR` buffer in the
  /// device's context, mapped for reading and writing (what OpenCL drivers recognise as pinned in
  /// `clEnqueueRead/WriteBuffer`, the NVIDIA and AMD guides' fast path). Kept mapped until
  /// `deallocate_pinned`.
  /// \throws xdev::error `errc::out_of_memory` naming the device and the size.
  void* allocate_pinned(std::size_t device, std::size_t bytes) {
    Dev& d = dev(device);
    const std::size_t want = std::max<std::size_t>(bytes, 1);
    const std::string what = d.label + ": " + std::to_string(bytes) + " bytes of pinned host memory";
    cl_int err = CL_SUCCESS;
    cl_mem m =
        clCreateBuffer(contexts_[d.context].context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, want, nullptr, &err);
    if (err != CL_SUCCESS || m == nullptr) throw cl_failure(what, "clCreateBuffer", err);
    void* p = nullptr;
    {
      std::lock_guard lk(d.m);
      p = clEnqueueMapBuffer(d.queue, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, want, 0, nullptr, nullptr, &err);
    }
    if (err != CL_SUCCESS || p == nullptr) {
      clReleaseMemObject(m);
      throw cl_failure(what, "clEnqueueMapBuffer", err);
    }
    std::lock_guard lk(pinned_m_);
    pinned_.emplace(p, PinnedHost{m, device, want});
    return p;
  }
  /// Unmaps and releases memory from `allocate_pinned`.
  void deallocate_pinned(std::size_t, void* p, std::size_t) noexcept {
    PinnedHost h;
    {
      std::lock_guard lk(pinned_m_);
      const auto it = pinned_.find(p);
      if (it == pinned_.end()) return;
      h = it->second;
      pinned_.erase(it);
    }
    unmap(h, p);
  }
  /// True when `p` lies in memory from `allocate_pinned` (what a transfer from or to it uses).
  [[nodiscard]] bool is_pinned(const void* p) const noexcept {
    std::lock_guard lk(pinned_m_);
    auto it = pinned_.upper_bound(const_cast<void*>(p));
    if (it == pinned_.begin()) return false;
    --it;
    return static_cast<const char*>(p) < static_cast<const char*>(it->first) + it->second.bytes;
  }

  // ---- ops on windows of arrays (concepts::OpensWindows) ----------------------------------------

  /// A window for an op: a sub-buffer of `m` to its end, which every op kernel takes like an
  /// allocation. A sub-buffer starts only at a multiple of the device's base alignment
  /// (CL_DEVICE_MEM_BASE_ADDR_ALIGN): for an `offset` between two, it starts at the multiple below,
  /// and the distance to `offset` is the byte offset every op passes with it (`window_start`).
  std::optional<cl_mem> open_window(std::size_t device, cl_mem m, std::size_t offset) {
    const Dev& d = dev(device);
    const std::size_t start = offset % d.base_align;
    cl_mem w = sub_buffer(m, offset - start, d.label + ": an op's operand");
    if (start != 0) {
      try {
        std::lock_guard lk(windows_m_);
        window_starts_.emplace(w, start);
      } catch (...) {
        clReleaseMemObject(w);
        throw;
      }
      unaligned_windows_.fetch_add(1, std::memory_order_release);
    }
    return w;
  }
  /// Releases the window: the commands that use it keep their own reference until they finish.
  void close_window(std::size_t, cl_mem w) noexcept {
    if (unaligned_windows_.load(std::memory_order_acquire) != 0) {
      std::lock_guard lk(windows_m_);
      if (window_starts_.erase(w) != 0) unaligned_windows_.fetch_sub(1, std::memory_order_release);
    }
    clReleaseMemObject(w);
  }

  // ---- user kernels given as source (concepts::RunsSourceKernels; user_kernel.hpp) ------------

  using kernel_handle = detail::UserKernel*;
  /// Kernel arguments may be windows: a sub-buffer of the array (`clCreateSubBuffer`).
  static constexpr bool kernel_arg_offsets = true;

  /// Takes an OpenCL C kernel; it is built for each device on its first launch there.
  /// \throws xdev::error `errc::unimplemented` for another language; `errc::invalid_argument` for
  /// a bool scalar parameter (OpenCL C kernels take none).
  kernel_handle create_kernel(const xdev::KernelSource& s) {
    if (s.language != xdev::opencl_c)
      throw xdev::error(xdev::errc::unimplemented, "OPENCL compiles kernels in \"" + std::string(xdev::opencl_c) +
                                                       "\", not \"" + s.language + "\" (kernel \"" + s.entry + "\")");
    for (std::size_t i = 0; i < s.params.size(); ++i)
      if (s.params[i].kind == xdev::KernelArgKind::scalar && s.params[i].dtype == xdev::DType::bool_)
        throw xdev::error(xdev::errc::invalid_argument, "OPENCL: kernel \"" + s.entry + "\": parameter " +
                                                            std::to_string(i) +
                                                            " is a bool scalar, which OpenCL C kernels cannot take "
                                                            "(declare it u8 and pass a std::uint8_t)");
    auto k = std::make_unique<detail::UserKernel>(s, devices_.size());
    std::lock_guard lk(user_kernels_m_);
    return user_kernels_.emplace(k.get(), std::move(k)).first->first;
  }
  /// Lets the kernel go (launches already enqueued still run: OpenCL retains what they use).
  void destroy_kernel(kernel_handle k) noexcept {
    std::unique_ptr<detail::UserKernel> gone;
    std::lock_guard lk(user_kernels_m_);
    const auto it = user_kernels_.find(k);
    if (it == user_kernels_.end()) return;
    gone = std::move(it->second);
    user_kernels_.erase(it);
  }
  /// Enqueues the kernel on the bound queue over `a.global` (work-groups `a.local`, or the
  /// runtime's choice), building it for this device first if needed.
  /// \throws xdev::error `errc::invalid_argument` with the build log, or naming a disagreement
  /// between the source and the declared parameters.
  void launch_kernel(std::size_t device, kernel_handle k, const xdev::KernelLaunchArgs<memory_handle>& a,
                     xdev::Completion done) {
    Dev& d = dev(device);
    const xdev::KernelSource& src = k->source();
    if (a.args.size() != src.params.size())
      throw xdev::error(xdev::errc::invalid_argument, d.label + ": kernel \"" + src.entry +
                                                          "\": " + std::to_string(a.args.size()) + " arguments for " +
                                                          std::to_string(src.params.size()) + " parameters");
    cl_kernel kern = k->for_device(device, contexts_[d.context].context, d.id, d.label);
    const std::uint32_t dims = a.global.dims();
    if (dims < 1 || dims > xdev::NDRange::max_dims)
      throw xdev::error(xdev::errc::invalid_argument,
                        d.label + ": kernel \"" + src.entry + "\": " + std::to_string(dims) + " dims, not 1 to 3");
    std::size_t global[xdev::NDRange::max_dims] = {1, 1, 1}, local[xdev::NDRange::max_dims] = {1, 1, 1};
    for (std::uint32_t i = 0; i < dims && i < xdev::NDRange::max_dims; ++i) {
      global[i] = a.global[i];
      local[i] = a.local.empty() ? 0 : a.local[i];
    }
    // Windows (views): sub-buffers from their first element to the array's end, released once
    // enqueued (the command keeps what it uses). None, and no allocation, for whole arrays.
    struct Windows {
      std::vector<cl_mem> of;  // per argument: its sub-buffer, or null
      ~Windows() {
        for (cl_mem w : of)
          if (w != nullptr) clReleaseMemObject(w);
      }
    } windows;
    if (xdev::detail::first_window(a.args) != a.args.size()) {
      windows.of.assign(a.args.size(), nullptr);
      for (std::size_t i = 0; i < a.args.size(); ++i)
        if (src.params[i].kind == xdev::KernelArgKind::buffer && a.args[i].offset != 0)
          windows.of[i] = window(d, src.entry, i, a.args[i].memory, a.args[i].offset);
    }
    std::unique_lock lk(d.m);  // the kernel object's arguments are shared: set and enqueue under the lock
    for (std::size_t i = 0; i < a.args.size(); ++i) {
      const auto index = static_cast<cl_uint>(i);
      cl_int err;
      if (src.params[i].kind == xdev::KernelArgKind::buffer) {  // the user's kernel: one argument per buffer
        const cl_mem m = windows.of.empty() || windows.of[i] == nullptr ? a.args[i].memory : windows.of[i];
        err = clSetKernelArg(kern, index, sizeof m, &m);
      } else {
        err = clSetKernelArg(kern, index, xdev::size_of(src.params[i].dtype), &a.args[i].scalar_bits);
      }
      cl_check(err, d.label + ": kernel \"" + src.entry + "\" argument " + std::to_string(i), "clSetKernelArg");
    }
    cl_event ev = nullptr;
    const cl_int err = clEnqueueNDRangeKernel(queue_of(d), kern, dims, nullptr, global,
                                              a.local.empty() ? nullptr : local, 0, nullptr, &ev);
    if (err != CL_SUCCESS) throw cl_failure(d.label + ": kernel \"" + src.entry + "\"", "clEnqueueNDRangeKernel", err);
    complete_on(d, lk, ev, pending(std::move(done), d.label + ": kernel \"" + src.entry + "\""));
  }

  // ---- the portable operations: OpenCL C kernels (kernels.hpp) ------------------------------

  /// `x[i] = value` by `clEnqueueFillBuffer` with the value's bytes as the pattern (every dtype).
  template <class T>
  requires xdev::HasDType<T>
  void fill(std::size_t device, const xdev::ops::FillArgs<T, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0) return done(nullptr);
    Dev& d = dev(device);
    unsigned char pattern[sizeof(T)];
    std::memcpy(pattern, &a.value, sizeof(T));
    if constexpr (std::is_same_v<T, bool>) pattern[0] = a.value ? 1 : 0;
    std::unique_lock lk(d.m);
    cl_event ev = nullptr;
    cl_check(
        clEnqueueFillBuffer(queue_of(d), a.x, pattern, sizeof(T), window_start(a.x), a.n * sizeof(T), 0, nullptr, &ev),
        d.label, "clEnqueueFillBuffer");
    complete_on(d, lk, ev, pending(std::move(done), d, "fill"));
  }

  template <class T>
  requires detail::is_float_data<T>
  void scale(std::size_t device, const xdev::ops::ScaleArgs<T, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0) return done(nullptr);
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    constexpr detail::StaticKernelName k = detail::kernel_name<"scale_", T>;
    complete_on(d, lk, enqueue_1d(d, k, a.n, a.x, cl_ulong{a.n}, a.alpha), pending(std::move(done), d, "scale"));
  }

  /// `out = e^x` with OpenCL's `exp` (within 3 ulp of the correctly rounded result, the OpenCL
  /// 1.2 full profile's bound); f16 and bf16 through float, rounded once.
  template <class T>
  requires detail::is_float_data<T> || std::is_same_v<T, xdev::f16> || std::is_same_v<T, xdev::bf16>
  void exp(std::size_t device, const xdev::ops::ExpArgs<T, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0) return done(nullptr);
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    constexpr detail::StaticKernelName k = detail::kernel_name<"exp_", T>;
    complete_on(d, lk, enqueue_1d(d, k, a.n, a.x, a.out, cl_ulong{a.n}), pending(std::move(done), d, "exp"));
  }

  template <class T>
  requires detail::is_float_data<T>
  void axpy(std::size_t device, const xdev::ops::AxpyArgs<T, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0) return done(nullptr);
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    constexpr detail::StaticKernelName k = detail::kernel_name<"axpy_", T>;
    complete_on(d, lk, enqueue_1d(d, k, a.n, a.alpha, a.x, a.y, cl_ulong{a.n}), pending(std::move(done), d, "axpy"));
  }

  /// add, mul, min and max as xdev defines them (see `xdev::kernels::binary`).
  template <class T>
  requires detail::is_float_data<T>
  void binary(std::size_t device, const xdev::ops::BinaryArgs<T, memory_handle>& a, xdev::Completion done) {
    using Op = xdev::ops::BinaryOp;
    if (a.op != Op::add && a.op != Op::mul && a.op != Op::min && a.op != Op::max)
      throw xdev::error(xdev::errc::invalid_argument,
                        "OPENCL: binary: unknown operator " + std::to_string(static_cast<int>(a.op)));
    if (a.n == 0) return done(nullptr);
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    constexpr detail::StaticKernelName k = detail::kernel_name<"binary_", T>;
    complete_on(d, lk, enqueue_1d(d, k, a.n, static_cast<cl_uint>(a.op), a.a, a.b, a.out, cl_ulong{a.n}),
                pending(std::move(done), d, xdev::ops::name_of(a.op)));
  }

  /// A work-group tree per pass, passes until one value is left, then read back into `*result`.
  template <class T>
  requires detail::is_float_data<T>
  void sum(std::size_t device, const xdev::ops::SumArgs<T, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0) {
      *a.result = T(0);
      return done(nullptr);
    }
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    constexpr detail::StaticKernelName pass = detail::kernel_name<"sum_pass_", T>;
    reduce<T>(d, lk, a.n, a.result, std::move(done), "sum", [&](cl_mem out, std::size_t groups) {
      enqueue_groups(d, pass, groups, a.x, cl_ulong{a.n}, out, detail::Local{d.reduce_local * sizeof(T)}, no_event);
    });
  }

  /// The dot product: the first pass multiplies (after the autocast rounding), the rest sum.
  template <class T>
  requires detail::is_float_data<T>
  void dot(std::size_t device, const xdev::ops::DotArgs<T, memory_handle>& a, xdev::Completion done) {
    const cl_uint rounding = detail::rounding_code<T>(a.compute, "dot");
    if (a.n == 0) {
      *a.result = T(0);
      return done(nullptr);
    }
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    constexpr detail::StaticKernelName pass = detail::kernel_name<"dot_pass_", T>;
    reduce<T>(d, lk, a.n, a.result, std::move(done), "dot", [&](cl_mem out, std::size_t groups) {
      enqueue_groups(d, pass, groups, a.x, a.y, cl_ulong{a.n}, rounding, out, detail::Local{d.reduce_local * sizeof(T)},
                     no_event);
    });
  }

  /// A work-group tree per output for long axes, one work item per output for short ones.
  template <class T>
  requires detail::is_float_data<T>
  void sum_axis(std::size_t device, const xdev::ops::SumAxisArgs<T, memory_handle>& a, xdev::Completion done) {
    const std::size_t outputs = a.outer * a.inner;
    if (outputs == 0) return done(nullptr);
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    cl_event ev = nullptr;
    if (a.axis >= tree_axis_min) {
      ev = enqueue_groups(d, detail::kernel_name<"sum_axis_", T>, outputs, a.x, a.out, cl_ulong{a.outer},
                          cl_ulong{a.axis}, cl_ulong{a.inner}, detail::Local{d.reduce_local * sizeof(T)});
    } else {
      ev = enqueue_1d(d, detail::kernel_name<"sum_axis_small_", T>, outputs, a.x, a.out, cl_ulong{a.outer},
                      cl_ulong{a.axis}, cl_ulong{a.inner});
    }
    complete_on(d, lk, ev, pending(std::move(done), d, "sum"));
  }

  /// Local-memory tiled matrix multiply (kernels.hpp, `gemm_range`). With `alpha == 0` or an empty
  /// depth, A and B are not read: C = beta C.
  template <class T>
  requires detail::is_float_data<T>
  void gemm(std::size_t device, const xdev::ops::GemmArgs<T, memory_handle>& a, xdev::Completion done) {
    const cl_uint rounding = detail::rounding_code<T>(a.compute, "gemm");
    if (a.m == 0 || a.n == 0) return done(nullptr);
    Dev& d = dev(device);
    if (kernels::gemm_local_items > d.gemm_items)
      throw xdev::error(xdev::errc::unimplemented, d.label + ": gemm needs work-groups of " +
                                                       std::to_string(kernels::gemm_local_items) +
                                                       " items; the device runs its gemm kernel in groups of at most " +
                                                       std::to_string(d.gemm_items));
    const cl_ulong k = a.alpha == T(0) ? 0 : a.k;
    const auto range = kernels::gemm_range(a.m, a.n);
    std::unique_lock lk(d.m);
    cl_kernel kern = kernel(d, detail::kernel_name<"gemm_", T>);
    set_args(d, kern, "gemm", cl_uint{a.trans_a}, cl_uint{a.trans_b}, cl_ulong{a.m}, cl_ulong{a.n}, k, a.alpha, a.a,
             cl_ulong{a.lda}, a.b, cl_ulong{a.ldb}, a.beta, a.c, cl_ulong{a.ldc}, rounding);
    cl_event ev = nullptr;
    cl_check(clEnqueueNDRangeKernel(queue_of(d), kern, 2, nullptr, range.global, range.local, 0, nullptr, &ev),
             d.label + ": gemm", "clEnqueueNDRangeKernel");
    complete_on(d, lk, ev, pending(std::move(done), d, "gemm"));
  }

  /// Rows of `table` by index: a check kernel finds the first index out of range, the gather kernel
  /// then writes nothing, and the op fails with the host backend's message.
  template <class T, class I>
  requires xdev::HasDType<T> &&(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>)void gather(
      std::size_t device, const xdev::ops::GatherArgs<T, I, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0) return done(nullptr);
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    cl_mem status = temp_buffer(d, 16, "gather");
    const cl_uint none = 0xFFFFFFFFu;
    cl_int err = clEnqueueFillBuffer(queue_of(d), status, &none, sizeof none, 0, 16, 0, nullptr, nullptr);
    if (err != CL_SUCCESS) {
      clReleaseMemObject(status);
      throw cl_failure(d.label + ": gather", "clEnqueueFillBuffer", err);
    }
    auto p = pending(std::move(done), d, "gather");
    try {
      const std::string idx(detail::dtype_suffix<I>());
      enqueue_1d(d, "gather_check_" + idx, a.n, a.index, cl_ulong{a.n}, cl_ulong{a.rows}, status, no_event);
      const std::size_t items = a.n * std::max<std::size_t>(a.cols, 1);
      enqueue_1d(d, "gather_" + std::to_string(sizeof(T)) + "_" + idx, items, a.table, cl_ulong{a.rows},
                 cl_ulong{a.cols}, a.index, cl_ulong{a.n}, a.out, status, no_event);
      p->host_data.resize(16);
      cl_event ev = nullptr;
      cl_check(clEnqueueReadBuffer(queue_of(d), status, CL_FALSE, 0, 16, p->host_data.data(), 0, nullptr, &ev), d.label,
               "clEnqueueReadBuffer");
      clReleaseMemObject(status);  // freed once the queued commands that use it have finished
      status = nullptr;
      const unsigned char* bytes = p->host_data.data();
      p->then = [bytes, rows = a.rows] {
        std::uint32_t first = 0;
        std::int64_t value = 0;
        std::memcpy(&first, bytes, sizeof first);
        std::memcpy(&value, bytes + 8, sizeof value);
        if (first != 0xFFFFFFFFu)
          throw xdev::error(xdev::errc::invalid_argument,
                            "gather: index " + std::to_string(value) + " at position " + std::to_string(first) +
                                " is out of range for a table of " + std::to_string(rows) + " rows");
      };
      complete_on(d, lk, ev, std::move(p));
    } catch (...) {
      if (status != nullptr) clReleaseMemObject(status);
      throw;
    }
  }

  /// Philox4x32-10 and Threefry2x32-20 streams, bit for bit those of <xdev/random/stream.hpp>;
  /// normals through OpenCL's log, sqrt, cos and sin.
  /// \throws xdev::error `errc::invalid_argument` for an unknown algorithm or a stddev that is
  /// negative or NaN, as the host backend does, before anything runs.
  template <class T>
  requires detail::is_float_data<T>
  void rng(std::size_t device, const xdev::ops::RngArgs<T, memory_handle>& a, xdev::Completion done) {
    if (a.normal)
      xdev::random::fill_normal(a.algorithm, a.seed, a.offset, std::span<T>{}, a.mean, a.stddev);
    else
      xdev::random::fill_uniform(a.algorithm, a.seed, a.offset, std::span<T>{});
    if (a.n == 0) return done(nullptr);
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    const auto alg = static_cast<cl_uint>(a.algorithm);
    cl_event ev = a.normal ? enqueue_1d(d, detail::kernel_name<"rng_normal_", T>, a.n, a.out, cl_ulong{a.n}, alg,
                                        cl_ulong{a.seed}, cl_ulong{a.offset}, a.mean, a.stddev)
                           : enqueue_1d(d, detail::kernel_name<"rng_uniform_", T>, a.n, a.out, cl_ulong{a.n}, alg,
                                        cl_ulong{a.seed}, cl_ulong{a.offset});
    complete_on(d, lk, ev, pending(std::move(done), d, a.normal ? "rng_normal" : "rng_uniform"));
  }

  /// Every pair of dtypes, bit for bit `xdev::kernels::convert`; the same dtype is a buffer copy.
  template <class S, class D>
  requires xdev::HasDType<S> && xdev::HasDType<D>
  void convert(std::size_t device, const xdev::ops::ConvertArgs<S, D, memory_handle>& a, xdev::Completion done) {
    if (a.n == 0 || (std::is_same_v<S, D> && a.src == a.dst)) return done(nullptr);
    Dev& d = dev(device);
    std::unique_lock lk(d.m);
    cl_event ev = nullptr;
    if constexpr (std::is_same_v<S, D>) {
      cl_check(clEnqueueCopyBuffer(queue_of(d), a.src, a.dst, window_start(a.src), window_start(a.dst), a.n * sizeof(S),
                                   0, nullptr, &ev),
               d.label, "clEnqueueCopyBuffer");
    } else {
      ev = enqueue_1d(d, detail::kernel_name<"convert_", S, D>, a.n, a.src, a.dst, cl_ulong{a.n});
    }
    complete_on(d, lk, ev, pending(std::move(done), d, "convert"));
  }

 private:
  // One rect transfer of `r` between buffer `m` and dense host memory `host` (`read`: to the host).
  void copy_rect(std::size_t device, cl_mem m, const xdev::StridedRegion& r, void* host, bool read,
                 xdev::Completion done) {
    if (r.bytes() == 0) return done(nullptr);
    const std::size_t slice_pitch = r.slices > 1 ? r.slice_pitch : r.rows * r.row_pitch;
    if (slice_pitch % r.row_pitch != 0) {
      const std::size_t slice_bytes = r.rows * r.row_bytes;
      return xdev::detail::start_parts(
          r.slices,
          [&](std::size_t k, xdev::Completion part) {
            xdev::StridedRegion one = r;
            one.offset = r.offset + k * r.slice_pitch;
            one.slices = 1;
            copy_rect(device, m, one, static_cast<std::byte*>(host) + k * slice_bytes, read, std::move(part));
          },
          std::move(done));
    }
    Dev& d = dev(device);
    const std::size_t origin[3] = {r.offset % slice_pitch % r.row_pitch, r.offset % slice_pitch / r.row_pitch,
                                   r.offset / slice_pitch};
    const std::size_t host_origin[3] = {0, 0, 0};
    const std::size_t region[3] = {r.row_bytes, r.rows, r.slices};
    std::unique_lock lk(d.m);
    cl_event ev = nullptr;
    if (read)
      cl_check(clEnqueueReadBufferRect(queue_of(d), m, CL_FALSE, origin, host_origin, region, r.row_pitch, slice_pitch,
                                       r.row_bytes, r.rows * r.row_bytes, host, 0, nullptr, &ev),
               d.label, "clEnqueueReadBufferRect");
    else
      cl_check(clEnqueueWriteBufferRect(queue_of(d), m, CL_FALSE, origin, host_origin, region, r.row_pitch, slice_pitch,
                                        r.row_bytes, r.rows * r.row_bytes, host, 0, nullptr, &ev),
               d.label, "clEnqueueWriteBufferRect");
    complete_on(d, lk, ev, pending(std::move(done), d, read ? "strided copy to host" : "strided copy to device"));
  }

  // Axes at least this long are summed by a work-group tree per output.
  static constexpr std::size_t tree_axis_min = 64;

  struct Context {
    cl_platform_id platform = nullptr;
    cl_context context = nullptr;
    cl_program program = nullptr;
  };

  struct Dev {
    cl_device_id id = nullptr;
    std::size_t context = 0;
    cl_command_queue queue = nullptr;
    DeviceInfo info;
    std::string label;             // "OPENCL:0"
    std::size_t reduce_local = 1;  // power-of-two work-group size of the reductions
    std::size_t gemm_items = 0;    // the largest work-group the gemm kernels can run in
    std::uint64_t base_align = 1;  // where a sub-buffer may start: a multiple of this many bytes
    std::mutex m;                  // held while setting kernel arguments and enqueueing
    std::map<std::string, cl_kernel, std::less<>> kernels;
    // `kernels` by the address of a static name (detail::kernel_name), filled as they are first
    // launched (under m).
    std::unordered_map<const char*, cl_kernel> kernels_by_name_address;
    std::atomic<cl_ulong> allocated{0};
    std::vector<cl_command_queue> stream_queues;  // made by create_queue and not yet destroyed (under m)
    // The device timer's offset from the host's steady clock (ns), measured at start: set when
    // the queues profile their commands, which then report where the device ran them.
    std::optional<std::int64_t> clock_offset;
  };

  static cl_command_queue_properties queue_properties(const Dev& d) noexcept {
    return d.clock_offset ? CL_QUEUE_PROFILING_ENABLE : 0;
  }

  // The offset from `q`'s device timer to the host's steady clock: the QUEUED time of a marker,
  // taken inside clEnqueueMarkerWithWaitList, against the host clock around that call; the
  // narrowest of a few tries (within microseconds). Nothing when the device does not profile.
  static std::optional<std::int64_t> measure_clock_offset(cl_command_queue q) noexcept {
    std::optional<std::int64_t> best;
    std::int64_t best_window = 0;
    const auto now = [] {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
    for (int i = 0; i < 5; ++i) {
      cl_event ev = nullptr;
      const std::int64_t before = now();
      if (clEnqueueMarkerWithWaitList(q, 0, nullptr, &ev) != CL_SUCCESS) return std::nullopt;
      const std::int64_t after = now();
      cl_ulong queued = 0;
      const bool ok =
          clWaitForEvents(1, &ev) == CL_SUCCESS &&
          clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_QUEUED, sizeof queued, &queued, nullptr) == CL_SUCCESS &&
          queued != 0;
      clReleaseEvent(ev);
      if (!ok) return std::nullopt;
      if (!best || after - before < best_window) {
        best = (before + after) / 2 - static_cast<std::int64_t>(queued);
        best_window = after - before;
      }
    }
    return best;
  }

  // Where the calling thread's commands for `d` go: the bound queue of a stream, else the
  // device's own queue.
  cl_command_queue queue_of(const Dev& d) const noexcept {
    return xdev::QueueBinding<cl_command_queue>::queue_of(this, &d, d.queue);
  }

  // No event wanted from an enqueue (a command in the middle of a submission).
  struct NoEvent {};
  static constexpr NoEvent no_event{};

  Dev& dev(std::size_t device) {
    if (device >= devices_.size())
      throw xdev::error(xdev::errc::invalid_argument, "OPENCL: device " + std::to_string(device) + " does not exist (" +
                                                          std::to_string(devices_.size()) + " devices)");
    return *devices_[device];
  }

  // Where device `d` starts a sub-buffer: a multiple of this many bytes (CL_DEVICE_MEM_BASE_ADDR_ALIGN);
  // asked once per device, kept in `Dev::base_align`.
  static std::uint64_t base_align(const Dev& d, const std::string& what) {
    cl_uint align_bits = 0;
    cl_check(clGetDeviceInfo(d.id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, nullptr), what,
             "clGetDeviceInfo");
    return std::max<std::uint64_t>(align_bits / 8, 1);
  }

  // A sub-buffer of `m` from byte `offset` (a multiple of the device's base alignment) to its end.
  // \throws xdev::error `errc::invalid_argument` for an offset past the allocation.
  static cl_mem sub_buffer(cl_mem m, std::uint64_t offset, const std::string& what) {
    std::size_t size = 0;
    cl_check(clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, nullptr), what, "clGetMemObjectInfo");
    if (offset >= size)
      throw xdev::error(xdev::errc::invalid_argument, what + " is a window at byte " + std::to_string(offset) +
                                                          " of an array of " + std::to_string(size) + " bytes");
    const cl_buffer_region region{static_cast<std::size_t>(offset), size - static_cast<std::size_t>(offset)};
    cl_int err = CL_SUCCESS;
    cl_mem sub = clCreateSubBuffer(m, 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    if (err != CL_SUCCESS || sub == nullptr) throw cl_failure(what, "clCreateSubBuffer", err);
    return sub;
  }

  // A sub-buffer of `m` from byte `offset` to its end: kernel argument `i`, a window.
  // \throws xdev::error `errc::invalid_argument` naming the device's alignment when `offset` is not
  //         a multiple of it, or past the allocation.
  cl_mem window(const Dev& d, const std::string& entry, std::size_t i, cl_mem m, std::uint64_t offset) {
    const std::string what = d.label + ": kernel \"" + entry + "\" argument " + std::to_string(i);
    const std::uint64_t align = d.base_align;
    if (offset % align != 0)
      throw xdev::error(xdev::errc::invalid_argument,
                        what + " is a window at byte " + std::to_string(offset) +
                            " of its array; OpenCL starts a window (a sub-buffer) only at a multiple of " +
                            std::to_string(align) +
                            " bytes on this device (CL_DEVICE_MEM_BASE_ADDR_ALIGN): slice at "
                            "such an element, or pass the whole array and the offset as a scalar");
    return sub_buffer(m, offset, what);
  }

  static std::unique_ptr<detail::Pending> pending(xdev::Completion done, std::string what) {
    auto p = std::make_unique<detail::Pending>();
    p->done = std::move(done);
    p->what = std::move(what);
    return p;
  }

  // The same for a command whose failure reads "<device label>: <op>" (`op` a string literal): the
  // text is joined only when it fails.
  static std::unique_ptr<detail::Pending> pending(xdev::Completion done, const Dev& d, const char* op) {
    auto p = std::make_unique<detail::Pending>();
    p->done = std::move(done);
    p->device = &d.label;
    p->op = op;
    return p;
  }

  // Hands the submission's last event to the callback that reports it, and flushes the queue so
  // that the runtime starts the commands. Unlocks `lk` (the device's enqueue lock) first: a runtime
  // may run the callback inside clSetEventCallback when the event already completed, and the
  // completion may submit the next op to this device.
  void complete_on(Dev& d, std::unique_lock<std::mutex>& lk, cl_event ev, std::unique_ptr<detail::Pending> p) {
    lk.unlock();
    p->clock_offset = d.clock_offset;
    detail::Pending* owned = p.release();  // the callback's from here on, possibly before the call returns
    const cl_int err = clSetEventCallback(ev, CL_COMPLETE, &detail::on_complete, owned);
    if (err != CL_SUCCESS) {
      std::unique_ptr<detail::Pending> back(owned);  // not registered: still ours
      clReleaseEvent(ev);
      throw cl_failure(back->describe(), "clSetEventCallback", err);
    }
    clFlush(queue_of(d));
  }

  // Where an op's array starts in `m`, in bytes: 0, except in a window opened at an offset between
  // two multiples of the base alignment (`open_window`).
  cl_ulong window_start(cl_mem m) const {
    if (unaligned_windows_.load(std::memory_order_acquire) == 0) return 0;
    std::lock_guard lk(windows_m_);
    const auto it = window_starts_.find(m);
    return it == window_starts_.end() ? 0 : it->second;
  }

  cl_kernel kernel(const Dev& d, std::string_view name) const {
    const auto it = d.kernels.find(name);
    if (it == d.kernels.end())
      throw xdev::error(xdev::errc::internal, d.label + ": the kernel " + std::string(name) + " does not exist");
    return it->second;
  }

  // The same by a static name: found by its address after its first launch on `d`. Under d.m.
  cl_kernel kernel(Dev& d, detail::StaticKernelName name) {
    const auto it = d.kernels_by_name_address.find(name.c_str());
    if (it != d.kernels_by_name_address.end()) return it->second;
    const cl_kernel k = kernel(d, std::string_view(name));
    d.kernels_by_name_address.emplace(name.c_str(), k);
    return k;
  }

  // Sets the kernel argument at `index` and moves `index` past it: a buffer is two arguments, the
  // cl_mem and the byte offset where the op's array starts in it (kernels.hpp, XDEV_BUF).
  template <class A>
  void set_arg(const Dev& d, cl_kernel k, std::string_view kernel_name, cl_uint& index, const A& value) const {
    cl_int err;
    if constexpr (std::is_same_v<A, detail::Local>)
      err = clSetKernelArg(k, index, value.bytes, nullptr);
    else
      err = clSetKernelArg(k, index, sizeof(A), &value);
    if constexpr (std::is_same_v<A, cl_mem>) {
      if (err == CL_SUCCESS) {
        const cl_ulong at = window_start(value);
        err = clSetKernelArg(k, index + 1, sizeof at, &at);
      }
    }
    if (err != CL_SUCCESS)
      throw cl_failure(d.label + ": " + std::string(kernel_name) + " argument " + std::to_string(index),
                       "clSetKernelArg", err);
    index += std::is_same_v<A, cl_mem> ? 2 : 1;
  }

  template <class... A>
  void set_args(const Dev& d, cl_kernel k, std::string_view kernel_name, const A&... args) const {
    cl_uint i = 0;
    (set_arg(d, k, kernel_name, i, args), ...);
  }

  // Enqueues kernel `name` over `n` work items (the runtime picks the work-group size) with
  // `args`; returns its event, or none when the last argument is `no_event`.
  template <class Name, class... A>
  cl_event enqueue_1d(Dev& d, const Name& name, std::size_t n, const A&... args) {
    return enqueue(d, name, n, 0, args...);
  }

  // Enqueues kernel `name` over `groups` work-groups of `d.reduce_local` items.
  template <class Name, class... A>
  cl_event enqueue_groups(Dev& d, const Name& name, std::size_t groups, const A&... args) {
    return enqueue(d, name, groups * d.reduce_local, d.reduce_local, args...);
  }

  // `name`: a detail::kernel_name, or a string for a name built at run time.
  template <class Name, class... A>
  cl_event enqueue(Dev& d, const Name& name, std::size_t global, std::size_t local, const A&... args) {
    cl_kernel k = kernel(d, name);
    constexpr bool want_event = !(std::is_same_v<A, NoEvent> || ...);
    cl_uint i = 0;
    auto one = [&](const auto& v) {
      if constexpr (!std::is_same_v<std::decay_t<decltype(v)>, NoEvent>) set_arg(d, k, name, i, v);
    };
    (one(args), ...);
    cl_event ev = nullptr;
    const cl_int err = clEnqueueNDRangeKernel(queue_of(d), k, 1, nullptr, &global, local != 0 ? &local : nullptr, 0,
                                              nullptr, want_event ? &ev : nullptr);
    if (err != CL_SUCCESS)
      throw cl_failure(d.label + ": " + std::string(std::string_view(name)), "clEnqueueNDRangeKernel", err);
    return ev;
  }

  cl_mem temp_buffer(Dev& d, std::size_t bytes, const char* op) {
    cl_int err = CL_SUCCESS;
    cl_mem m =
        clCreateBuffer(contexts_[d.context].context, CL_MEM_READ_WRITE, std::max<std::size_t>(bytes, 1), nullptr, &err);
    if (err != CL_SUCCESS || m == nullptr)
      throw cl_failure(d.label + ": " + op + ": a temporary of " + std::to_string(bytes) + " bytes", "clCreateBuffer",
                       err);
    return m;
  }

  // Runs the reduction passes: `first(out, groups)` enqueues the first pass into `out` (one value
  // per group), then sum passes reduce those the same way until one value is left, which is read
  // into `*result`.
  template <class T, class First>
  void reduce(Dev& d, std::unique_lock<std::mutex>& lk, std::size_t n, T* result, xdev::Completion done, const char* op,
              First&& first) {
    const std::size_t per_group = d.reduce_local * kernels::reduce_items;
    std::size_t groups = (n + per_group - 1) / per_group;
    cl_mem ping = temp_buffer(d, groups * sizeof(T), op);
    cl_mem pong = nullptr;
    try {
      first(ping, groups);
      constexpr detail::StaticKernelName pass = detail::kernel_name<"sum_pass_", T>;
      if (groups > 1) pong = temp_buffer(d, ((groups + per_group - 1) / per_group) * sizeof(T), op);
      while (groups > 1) {
        const std::size_t count = groups;
        groups = (count + per_group - 1) / per_group;
        enqueue_groups(d, pass, groups, ping, cl_ulong{count}, pong, detail::Local{d.reduce_local * sizeof(T)},
                       no_event);
        std::swap(ping, pong);
      }
      cl_event ev = nullptr;
      cl_check(clEnqueueReadBuffer(queue_of(d), ping, CL_FALSE, 0, sizeof(T), result, 0, nullptr, &ev), d.label,
               "clEnqueueReadBuffer");
      // Released now, freed by the runtime once the queued commands that use them have finished.
      clReleaseMemObject(ping);
      if (pong != nullptr) clReleaseMemObject(pong);
      ping = pong = nullptr;
      complete_on(d, lk, ev, pending(std::move(done), d, op));
    } catch (...) {
      if (ping != nullptr) clReleaseMemObject(ping);
      if (pong != nullptr) clReleaseMemObject(pong);
      throw;
    }
  }

  void discover(const xdev::plugin::ClientOptions& options) {
    const cl_device_type wanted = detail::device_type_bits(detail::device_types_from_environment());
    const auto platform_filter = xdev::getenv_string("XDEV_OPENCL_PLATFORM");

    cl_uint platform_count = 0;
    const cl_int perr = clGetPlatformIDs(0, nullptr, &platform_count);
    if (perr == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (perr == CL_SUCCESS && platform_count == 0))
      throw xdev::error(xdev::errc::unavailable,
                        "OPENCL: no OpenCL platform: the ICD loader found no driver (see /etc/OpenCL/vendors, "
                        "OCL_ICD_VENDORS)");
    cl_check(perr, "OPENCL", "clGetPlatformIDs");
    std::vector<cl_platform_id> platforms(platform_count);
    cl_check(clGetPlatformIDs(platform_count, platforms.data(), nullptr), "OPENCL", "clGetPlatformIDs");

    struct Found {
      cl_platform_id platform;
      cl_device_id id;
      DeviceInfo info;
    };
    std::vector<Found> found;
    std::string seen;  // what the filters left out, for the error message
    for (cl_platform_id p : platforms) {
      const std::string pname = detail::platform_string(p, CL_PLATFORM_NAME);
      cl_uint count = 0;
      const cl_int derr = clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &count);
      if (derr == CL_DEVICE_NOT_FOUND || count == 0) continue;
      cl_check(derr, "OPENCL: platform " + pname, "clGetDeviceIDs");
      std::vector<cl_device_id> ids(count);
      cl_check(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, count, ids.data(), nullptr), "OPENCL: platform " + pname,
               "clGetDeviceIDs");
      for (cl_device_id id : ids) {
        DeviceInfo info = detail::query_device(id, pname);
        const bool platform_ok =
            !platform_filter || detail::lower(pname).find(detail::lower(*platform_filter)) != std::string::npos;
        if (platform_ok && (info.type & wanted) != 0 && device_value_available(id))
          found.push_back({p, id, std::move(info)});
        else
          seen += (seen.empty() ? "" : ", ") + info.name + " (" + info.type_name() + ") on " + pname;
      }
    }
    if (found.empty())
      throw xdev::error(xdev::errc::unavailable,
                        "OPENCL: no OpenCL device passes XDEV_OPENCL_PLATFORM / XDEV_OPENCL_DEVICE_TYPE" +
                            (seen.empty() ? std::string(" (no devices at all)") : "; found: " + seen));

    const auto [first, last] = share_of(found.size(), options.local_rank, options.local_world_size);
    found = std::vector<Found>(found.begin() + static_cast<std::ptrdiff_t>(first),
                               found.begin() + static_cast<std::ptrdiff_t>(last));

    // One context per (platform, fp64): the program is built with or without the double kernels.
    std::vector<std::pair<cl_platform_id, bool>> keys;
    for (const auto& f : found)
      if (std::find(keys.begin(), keys.end(), std::pair{f.platform, f.info.fp64}) == keys.end())
        keys.emplace_back(f.platform, f.info.fp64);
    for (const auto& [platform, fp64] : keys) {
      std::vector<cl_device_id> ids;
      for (const auto& f : found)
        if (f.platform == platform && f.info.fp64 == fp64) ids.push_back(f.id);
      contexts_.push_back(make_context(platform, fp64, ids));
    }

    for (const auto& f : found) {
      auto d = std::make_unique<Dev>();
      d->id = f.id;
      d->info = f.info;
      d->label = "OPENCL:" + std::to_string(devices_.size());
      d->base_align = base_align(*d, d->label);
      d->context = static_cast<std::size_t>(std::find(keys.begin(), keys.end(), std::pair{f.platform, f.info.fp64}) -
                                            keys.begin());
      // Owned by devices_ before anything can fail: release() frees what was created.
      devices_.push_back(std::move(d));
      Dev& dv = *devices_.back();
      cl_int err = CL_SUCCESS;
      // Queues profile their commands where the device's timer can be put on the host's clock.
      dv.queue = clCreateCommandQueue(contexts_[dv.context].context, f.id, CL_QUEUE_PROFILING_ENABLE, &err);
      if (err == CL_SUCCESS) dv.clock_offset = measure_clock_offset(dv.queue);
      if (err == CL_SUCCESS && !dv.clock_offset) {
        clReleaseCommandQueue(dv.queue);
        dv.queue = nullptr;
      }
      if (dv.queue == nullptr) dv.queue = clCreateCommandQueue(contexts_[dv.context].context, f.id, 0, &err);
      cl_check(err, dv.label, "clCreateCommandQueue");
      create_kernels(dv);
      // Work-group sizes: what the device and each compiled kernel allow (registers may limit a
      // kernel below the device's maximum on a GPU).
      std::size_t reduce_max = std::min<std::size_t>(256, f.info.max_work_group);
      dv.gemm_items = f.info.max_work_group;
      for (const auto& [kname, k] : dv.kernels) {
        std::size_t allowed = 0;
        cl_check(clGetKernelWorkGroupInfo(k, f.id, CL_KERNEL_WORK_GROUP_SIZE, sizeof allowed, &allowed, nullptr),
                 dv.label + ": " + kname, "clGetKernelWorkGroupInfo");
        if (kname.starts_with("gemm_")) dv.gemm_items = std::min(dv.gemm_items, allowed);
        if (kname.starts_with("sum_pass_") || kname.starts_with("dot_pass_") || kname.starts_with("sum_axis_"))
          reduce_max = std::min(reduce_max, allowed);
      }
      dv.reduce_local = 1;
      while (dv.reduce_local * 2 <= reduce_max) dv.reduce_local *= 2;
    }

    caps_ = capabilities::set;
    caps_.memory_per_device = 0;
    bool accelerator = false;
    for (const auto& d : devices_) {
      const auto mem = static_cast<std::size_t>(d->info.global_memory);
      caps_.memory_per_device = caps_.memory_per_device == 0 ? mem : std::min(caps_.memory_per_device, mem);
      if (!d->info.fp64) caps_.supported_dtypes &= ~(std::uint32_t{1} << static_cast<unsigned>(xdev::DType::f64));
      accelerator = accelerator || (d->info.type & (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR)) != 0;
    }
    caps_.priority = accelerator ? 100 : -150;
    host_worker_ = std::make_unique<xdev::SerialWorker>();
  }

  static bool device_value_available(cl_device_id id) {
    cl_bool available = CL_FALSE;
    return clGetDeviceInfo(id, CL_DEVICE_AVAILABLE, sizeof available, &available, nullptr) == CL_SUCCESS &&
           available == CL_TRUE;
  }

  static Context make_context(cl_platform_id platform, bool fp64, const std::vector<cl_device_id>& ids) {
    Context c;
    c.platform = platform;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform), 0};
    cl_int err = CL_SUCCESS;
    c.context = clCreateContext(props, static_cast<cl_uint>(ids.size()), ids.data(), nullptr, nullptr, &err);
    cl_check(err, "OPENCL", "clCreateContext");
    const char* source = kernels::program_source();
    c.program = clCreateProgramWithSource(c.context, 1, &source, nullptr, &err);
    if (err != CL_SUCCESS) {
      clReleaseContext(c.context);
      throw cl_failure("OPENCL", "clCreateProgramWithSource", err);
    }
    std::string options = fp64 ? "-cl-std=CL1.2 -DXDEV_FP64=1" : "-cl-std=CL1.2";
    if (const auto extra = xdev::getenv_string("XDEV_OPENCL_BUILD_OPTIONS")) options += " " + *extra;
    err = clBuildProgram(c.program, static_cast<cl_uint>(ids.size()), ids.data(), options.c_str(), nullptr, nullptr);
    if (err != CL_SUCCESS) {
      std::string log;
      for (cl_device_id id : ids) {
        try {
          log += "\n--- build log for " + detail::device_string(id, CL_DEVICE_NAME) + ":\n" +
                 detail::info_string(
                     [&](std::size_t n, void* v, std::size_t* r) {
                       return clGetProgramBuildInfo(c.program, id, CL_PROGRAM_BUILD_LOG, n, v, r);
                     },
                     "clGetProgramBuildInfo");
        } catch (const std::exception& e) {
          log += std::string("\n--- no build log: ") + e.what();
        }
      }
      clReleaseProgram(c.program);
      clReleaseContext(c.context);
      throw xdev::error(err == CL_BUILD_PROGRAM_FAILURE ? xdev::errc::internal : cl_errc(err),
                        "OPENCL: compiling the kernels (" + options + ") failed: clBuildProgram: " +
                            std::string(cl_error_name(err)) + " (" + std::to_string(err) + ")" + log);
    }
    return c;
  }

  void create_kernels(Dev& d) {
    cl_program program = contexts_[d.context].program;
    cl_uint count = 0;
    cl_check(clCreateKernelsInProgram(program, 0, nullptr, &count), d.label, "clCreateKernelsInProgram");
    std::vector<cl_kernel> ks(count);
    cl_check(clCreateKernelsInProgram(program, count, ks.data(), nullptr), d.label, "clCreateKernelsInProgram");
    for (std::size_t i = 0; i < ks.size(); ++i) {
      try {
        d.kernels.emplace(detail::info_string(
                              [&](std::size_t n, void* v, std::size_t* r) {
                                return clGetKernelInfo(ks[i], CL_KERNEL_FUNCTION_NAME, n, v, r);
                              },
                              "clGetKernelInfo"),
                          ks[i]);
      } catch (...) {
        for (std::size_t j = i; j < ks.size(); ++j) clReleaseKernel(ks[j]);  // not in the map yet
        throw;
      }
    }
  }

  void release() noexcept {
    for (auto& d : devices_) {
      if (d->queue != nullptr) clFinish(d->queue);
      for (cl_command_queue q : d->stream_queues) clFinish(q);
    }
    host_worker_.reset();                      // runs the host tasks already posted
    user_kernels_.clear();                     // their programs and kernels, before the contexts go
    for (auto& [p, h] : pinned_) unmap(h, p);  // pinned memory not given back
    pinned_.clear();
    for (auto& d : devices_) {
      for (auto& [n, k] : d->kernels) clReleaseKernel(k);
      if (d->queue != nullptr) clReleaseCommandQueue(d->queue);
      // Streams that outlive the runtime: xdev no longer calls destroy_queue for them.
      for (cl_command_queue q : d->stream_queues) clReleaseCommandQueue(q);
      d->stream_queues.clear();
    }
    devices_.clear();
    for (auto& c : contexts_) {
      if (c.program != nullptr) clReleaseProgram(c.program);
      if (c.context != nullptr) clReleaseContext(c.context);
    }
    contexts_.clear();
  }

  std::vector<Context> contexts_;
  std::vector<std::unique_ptr<Dev>> devices_;
  struct PinnedHost {
    cl_mem buffer = nullptr;
    std::size_t device = 0;
    std::size_t bytes = 0;
  };
  void unmap(const PinnedHost& h, void* p) noexcept {
    Dev& d = *devices_[h.device];
    {
      std::lock_guard lk(d.m);
      clEnqueueUnmapMemObject(d.queue, h.buffer, p, 0, nullptr, nullptr);
    }
    clReleaseMemObject(h.buffer);
  }
  mutable std::mutex pinned_m_;
  // The op windows open at an offset below a multiple of the base alignment, and their start in the
  // sub-buffer (bytes); `unaligned_windows_` counts them, so that ops skip the lookup when none is.
  mutable std::mutex windows_m_;
  std::map<cl_mem, std::size_t> window_starts_;  // under windows_m_
  std::atomic<std::size_t> unaligned_windows_{0};
  std::map<void*, PinnedHost> pinned_;  // under pinned_m_
  std::mutex user_kernels_m_;
  std::map<detail::UserKernel*, std::unique_ptr<detail::UserKernel>> user_kernels_;  // under user_kernels_m_
  xdev::CapabilitySet caps_;
  std::unique_ptr<xdev::SerialWorker> host_worker_;
};

}  // namespace xdev_opencl
