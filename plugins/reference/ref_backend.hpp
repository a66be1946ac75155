/// \file
/// `xdev_ref::Ref`: xdev's reference plugin backend, device type "REF". Written the way a vendor
/// writes an out-of-tree backend: its own namespace, only public xdev headers, and no relation to
/// xdev's host backend. Memory comes from `std::aligned_alloc`; each device has one worker thread
/// that runs its queue in order. It implements fill (every dtype), scale, axpy, binary (add, mul,
/// min, max), sum, dot and gemm (f32 and f64) natively and leaves sum_axis, gather, rng and
/// convert to xdev's CPU fallback, so a test through it exercises both paths. `ref_plugin.cpp`
/// turns it into the plugin `libxdev_plugin_ref.so` with `XDEV_DEFINE_PLUGIN(xdev_ref::Ref)`.
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/backend/device_properties.hpp>
#include <xdev/backend/serial_worker.hpp>
#include <xdev/backends/detail/host_properties.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/kernels/elementwise.hpp>
#include <xdev/kernels/gemm.hpp>
#include <xdev/kernels/parallel.hpp>
#include <xdev/kernels/reduce.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/policy/capabilities.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev_ref {

/// The reference backend (see the file comment). `XDEV_REF_DEVICES` sets its number of devices
/// (default 2, at most `max_devices`).
class Ref {
 public:
  static constexpr std::string_view name = "REF";
  /// Up to 16 in flight, Philox, and a priority below HOST's (-100), so xdev never picks REF by
  /// default over the host backend.
  using capabilities =
      xdev::Capabilities<xdev::MaxInflight<16>, xdev::Priority<-200>, xdev::RngDefault<xdev::RngAlgorithm::philox>>;
  using memory_handle = void*;
  static constexpr std::string_view plugin_version = "1.0.0";
  static constexpr std::string_view plugin_platform =
      "xdev reference plugin: aligned_alloc memory, one worker thread per device";

  /// Most devices `XDEV_REF_DEVICES` may ask for.
  static constexpr std::size_t max_devices = 64;

  /// \throws xdev::error `errc::invalid_argument` for a malformed `XDEV_REF_DEVICES`.
  Ref() {
    const std::size_t n = xdev::getenv_count("XDEV_REF_DEVICES", 1, max_devices).value_or(2);
    for (std::size_t i = 0; i < n; ++i) workers_.push_back(std::make_unique<xdev::SerialWorker>());
  }

  /// The number of devices (one worker thread each).
  [[nodiscard]] std::size_t device_count() const noexcept { return workers_.size(); }

  /// What a REF device is (`concepts::ReportsDeviceProperties`, exported through the ABI 1.8
  /// entry): one worker thread, host memory from `aligned_alloc`, so the machine's memory total
  /// and what it has available now.
  [[nodiscard]] xdev::DeviceProperties device_properties(std::size_t device) const {
    xdev::DeviceProperties p;
    p.type = xdev::DeviceType::cpu;
    p.name = "xdev reference device " + std::to_string(device);
    p.vendor = "xdev";
    p.driver_version = std::string(plugin_version);
    p.compute_units = 1;
    p.memory_total = xdev::backends::detail::host_static_properties().memory_total;
    p.memory_free = xdev::backends::detail::host_memory_available();
    return p;
  }

  /// 64-byte-aligned memory from `std::aligned_alloc`.
  /// \throws xdev::error `errc::out_of_memory` when the system cannot provide `bytes`.
  memory_handle allocate(std::size_t device, std::size_t bytes) {
    constexpr std::size_t alignment = 64;
    void* p = bytes <= std::size_t(-1) - alignment
                  ? std::aligned_alloc(
                        alignment, std::max<std::size_t>(alignment, (bytes + alignment - 1) / alignment * alignment))
                  : nullptr;
    if (p == nullptr)
      throw xdev::error(xdev::errc::out_of_memory,
                        "REF:" + std::to_string(device) + " cannot allocate " + std::to_string(bytes) + " bytes");
    return p;
  }
  /// Frees memory from `allocate`.
  void deallocate(std::size_t, memory_handle h, std::size_t) noexcept { std::free(h); }
  /// REF's memory is host memory and its handles are its addresses (`HostAccessibleBackend`): the
  /// plugin table says so (`XDEV_PLUGIN_HOST_MEMORY`), so user C++ kernels and DLPack work on REF
  /// devices. Every operation accepts any host address as a handle, not only what `allocate` gave.
  [[nodiscard]] void* host_address(memory_handle h) const noexcept { return h; }
  /// The address `bytes` past `h` (`concepts::OffsetsHandles`): the plugin table then has the op
  /// windows of ABI 1.12, and ops on windows of REF arrays run here, not through the fallback.
  [[nodiscard]] memory_handle offset_handle(memory_handle h, std::size_t bytes) const noexcept {
    return static_cast<std::byte*>(h) + bytes;
  }

  /// Transfers and host tasks run on the device's worker, in submission order; `copy_between`
  /// runs on the source device's worker (all REF devices share the host's memory).
  void copy_to_device(std::size_t device, const void* src, memory_handle dst, std::size_t dst_offset, std::size_t bytes,
                      xdev::Completion done) {
    run(
        device, [=] { copy(static_cast<std::byte*>(dst) + dst_offset, src, bytes); }, std::move(done));
  }
  void copy_to_host(std::size_t device, memory_handle src, std::size_t src_offset, void* dst, std::size_t bytes,
                    xdev::Completion done) {
    run(
        device, [=] { copy(dst, static_cast<const std::byte*>(src) + src_offset, bytes); }, std::move(done));
  }
  void copy_between(std::size_t src_device, memory_handle src, std::size_t src_offset, std::size_t, memory_handle dst,
                    std::size_t dst_offset, std::size_t bytes, xdev::Completion done) {
    run(
        src_device,
        [=] {
          std::memmove(static_cast<std::byte*>(dst) + dst_offset, static_cast<const std::byte*>(src) + src_offset,
                       bytes);
        },
        std::move(done));
  }
  void execute(std::size_t device, xdev::HostTask task, xdev::Completion done) {
    run(device, std::move(task), std::move(done));
  }

  // ---- native ops: plain loops where the result is exact per element, xdev's host kernels
  // (serially, on this device's worker) where the order of the arithmetic matters ----------------

  /// `x[i] = value`, for every dtype.
  template <class T>
  void fill(std::size_t device, const xdev::ops::FillArgs<T, memory_handle>& a, xdev::Completion done) {
    run(
        device, [a] { std::fill_n(static_cast<T*>(a.x), a.n, a.value); }, std::move(done));
  }

  /// `x[i] = x[i] * alpha` (f32, f64).
  template <std::floating_point T>
  void scale(std::size_t device, const xdev::ops::ScaleArgs<T, memory_handle>& a, xdev::Completion done) {
    run(
        device,
        [a] {
          T* x = static_cast<T*>(a.x);
          for (std::size_t i = 0; i < a.n; ++i) x[i] = x[i] * a.alpha;
        },
        std::move(done));
  }

  /// `y += alpha * x` by xdev's host kernel (f32, f64).
  template <std::floating_point T>
  void axpy(std::size_t device, const xdev::ops::AxpyArgs<T, memory_handle>& a, xdev::Completion done) {
    run(
        device, [a] { xdev::kernels::axpy(serial, a.alpha, static_cast<const T*>(a.x), static_cast<T*>(a.y), a.n); },
        std::move(done));
  }

  /// `out = a + b`, `a * b`, `min(a, b)` or `max(a, b)`, element by element (f32, f64); min and
  /// max as xdev defines them: `(b < a) ? b : a` and `(a < b) ? b : a`.
  /// \throws xdev::error `errc::invalid_argument` for an operator it does not know.
  template <std::floating_point T>
  void binary(std::size_t device, const xdev::ops::BinaryArgs<T, memory_handle>& a, xdev::Completion done) {
    using Op = xdev::ops::BinaryOp;
    if (a.op != Op::add && a.op != Op::mul && a.op != Op::min && a.op != Op::max)
      throw xdev::error(xdev::errc::invalid_argument,
                        "REF: binary: unknown operator " + std::to_string(static_cast<int>(a.op)));
    run(
        device,
        [a] {
          const T* x = static_cast<const T*>(a.a);
          const T* y = static_cast<const T*>(a.b);
          T* out = static_cast<T*>(a.out);
          switch (a.op) {
            case Op::add:
              for (std::size_t i = 0; i < a.n; ++i) out[i] = x[i] + y[i];
              break;
            case Op::mul:
              for (std::size_t i = 0; i < a.n; ++i) out[i] = x[i] * y[i];
              break;
            case Op::min:
              for (std::size_t i = 0; i < a.n; ++i) out[i] = y[i] < x[i] ? y[i] : x[i];
              break;
            case Op::max:
              for (std::size_t i = 0; i < a.n; ++i) out[i] = x[i] < y[i] ? y[i] : x[i];
              break;
          }
        },
        std::move(done));
  }

  /// The pairwise sum of xdev's host kernel (f32, f64).
  template <std::floating_point T>
  void sum(std::size_t device, const xdev::ops::SumArgs<T, memory_handle>& a, xdev::Completion done) {
    run(
        device, [a] { *a.result = xdev::kernels::sum(serial, static_cast<const T*>(a.x), a.n); }, std::move(done));
  }

  /// The dot product of xdev's host kernel, autocast included (f32, f64).
  template <std::floating_point T>
  void dot(std::size_t device, const xdev::ops::DotArgs<T, memory_handle>& a, xdev::Completion done) {
    run(
        device,
        [a] {
          *a.result =
              xdev::kernels::dot(serial, static_cast<const T*>(a.x), static_cast<const T*>(a.y), a.n, a.compute);
        },
        std::move(done));
  }

  /// Matrix multiply by xdev's host kernel, run serially on the device's worker (f32, f64).
  template <std::floating_point T>
  void gemm(std::size_t device, const xdev::ops::GemmArgs<T, memory_handle>& a, xdev::Completion done) {
    run(
        device,
        [a] {
          xdev::kernels::gemm(serial, a.trans_a, a.trans_b, a.m, a.n, a.k, a.alpha, static_cast<const T*>(a.a), a.lda,
                              static_cast<const T*>(a.b), a.ldb, a.beta, static_cast<T*>(a.c), a.ldc, a.compute);
        },
        std::move(done));
  }

 private:
  static constexpr xdev::kernels::Parallel serial{};

  static void copy(void* dst, const void* src, std::size_t bytes) noexcept {
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }

  // Runs `f` on the device's worker, then reports to `done` (with what `f` threw, if anything).
  template <class F>
  void run(std::size_t device, F&& f, xdev::Completion done) {
    workers_.at(device)->post(xdev::HostTask([f = std::forward<F>(f), done = std::move(done)]() mutable {
      std::exception_ptr ep;
      try {
        f();
      } catch (...) {
        ep = std::current_exception();
      }
      done(std::move(ep));
    }));
  }

  std::vector<std::unique_ptr<xdev::SerialWorker>> workers_;
};

}  // namespace xdev_ref
