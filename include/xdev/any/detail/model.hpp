/// \file
/// What `xdev::AnyDevice` erases: `AnyDeviceModel`, the backend-independent interface (identity,
/// memory, transfers, host tasks, and one `run` entry for every portable op), and
/// `DeviceModel<B>`, its implementation over a `Device<B>`. Users never touch these.
#pragma once

#include <xdev/async/device_queue.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/backend/detail/strided_copy.hpp>
#include <xdev/backend/device_properties.hpp>
#include <xdev/backend/user_kernel.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/half.hpp>
#include <xdev/device/device.hpp>
#include <xdev/memory/allocator.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/ops/ops.hpp>
#include <xdev/policy/capability_set.hpp>
#include <xdev/random/generator.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace xdev::detail {

/// Stands for "whichever backend" in `Buffer<T, erased_backend>` and `Array<T, erased_backend>`
/// (`xdev::AnyBuffer<T>`, `xdev::AnyArray<T>`). Not a backend.
struct erased_backend {};

/// A backend's `memory_handle`, erased: its bytes, zero-padded to `capacity`. Two erased handles
/// are equal when their bytes are.
struct erased_handle {
  static constexpr std::size_t capacity = 16;
  alignas(8) unsigned char bytes[capacity] = {};

  friend bool operator==(const erased_handle& a, const erased_handle& b) noexcept {
    return std::memcmp(a.bytes, b.bytes, capacity) == 0;
  }
};

/// What a graph replay uses instead of the memory the captured work used (`xdev::GraphBindings`):
/// buffers by handle, host memory by range. Read by `DeviceModel` through `active_bindings`, which a
/// replay sets around each step it starts, so the captured launches reach the backend with the
/// bound memory.
struct GraphBindingsData {
  struct Host {
    const void* captured;
    std::size_t bytes;
    void* now;
  };
  std::vector<std::pair<erased_handle, erased_handle>> buffers;
  std::vector<Host> host;
};

/// The bindings of the replay step this thread is starting, or null.
inline thread_local const GraphBindingsData* active_bindings = nullptr;

/// Sets `active_bindings` for a scope.
class GraphBindingsScope {
 public:
  explicit GraphBindingsScope(const GraphBindingsData* b) noexcept : prev_(std::exchange(active_bindings, b)) {}
  GraphBindingsScope(const GraphBindingsScope&) = delete;
  GraphBindingsScope& operator=(const GraphBindingsScope&) = delete;
  ~GraphBindingsScope() { active_bindings = prev_; }

 private:
  const GraphBindingsData* prev_;
};

/// `h`, or what the active bindings put in its place.
[[nodiscard]] inline erased_handle bound(const erased_handle& h) noexcept {
  if (const GraphBindingsData* b = active_bindings) {
    for (const auto& [from, to] : b->buffers)
      if (from == h) return to;
  }
  return h;
}
/// Host address `p`, or the same place in the host memory the active bindings put instead.
template <class P>
[[nodiscard]] P* bound_host(P* p) noexcept {
  if (const GraphBindingsData* b = active_bindings) {
    const auto* c = static_cast<const unsigned char*>(static_cast<const void*>(p));
    for (const auto& h : b->host) {
      const auto* from = static_cast<const unsigned char*>(h.captured);
      if (c >= from && c < from + h.bytes)
        return static_cast<P*>(static_cast<void*>(static_cast<unsigned char*>(h.now) + (c - from)));
    }
  }
  return p;
}

/// Host memory from `AnyDeviceModel::allocate_pinned`: its address, and whether the backend
/// allocated it (page-locked or device-mapped) or it is ordinary host memory.
struct PinnedBlock {
  void* data = nullptr;
  bool backend = false;
};

/// Ordinary host memory for `xdev::pinned` where the backend has none: 64-byte aligned.
inline void* ordinary_pinned(std::size_t bytes, const std::string& device) {
  constexpr std::size_t alignment = 64;
  void* p = bytes <= std::size_t(-1) - alignment
                ? std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment)
                : nullptr;
  if (p == nullptr)
    throw error(errc::out_of_memory, "pinned: " + device + ": no " + std::to_string(bytes) + " bytes of host memory");
  return p;
}

/// True when a backend's memory handle `H` fits in an `erased_handle`.
template <class H>
inline constexpr bool erasable_handle = (sizeof(H) <= erased_handle::capacity) && std::is_trivially_copyable_v<H>;

template <class H>
erased_handle erase_handle(const H& h) noexcept {
  static_assert(erasable_handle<H>);
  erased_handle e;
  std::memcpy(e.bytes, &h, sizeof(H));
  return e;
}

template <class H>
H unerase_handle(const erased_handle& e) noexcept {
  static_assert(erasable_handle<H>);
  H h{};
  std::memcpy(&h, e.bytes, sizeof(H));
  return h;
}

/// One device of some backend, behind virtual calls. The identity (names, capabilities, queue)
/// is captured once, at erasure, so reading it costs no call. `owner` is kept alive as long as
/// the model is.
class AnyDeviceModel {
 public:
  /// What an erased device is, read once from the typed device.
  struct Identity {
    const void* runtime = nullptr;  ///< the runtime's address: equal for devices of one runtime
    std::size_t ordinal = 0;
    std::string name;       ///< "HOST:0"
    std::string type_name;  ///< "HOST"
    CapabilitySet capabilities;
    std::shared_ptr<DeviceQueue> queue;
    bool host_accessible = false;  ///< memory handles are host addresses (`host_address` answers)
    bool runs_kernels = false;     ///< `launch` runs user C++ kernels (see `launch`)
  };

  AnyDeviceModel(std::shared_ptr<void> owner_, Identity id) : owner(std::move(owner_)), identity(std::move(id)) {}
  AnyDeviceModel(const AnyDeviceModel&) = delete;
  AnyDeviceModel& operator=(const AnyDeviceModel&) = delete;
  virtual ~AnyDeviceModel() = default;

  /// What the device is, for people: `Device<B>::description()` (asked each time: "" when the
  /// backend has no `device_description` hook).
  virtual std::string description() const = 0;
  /// What the device is, as typed fields: `Device<B>::properties()` (asked each time).
  virtual DeviceProperties properties() const = 0;
  /// The host address of memory `h` when the backend's memory is host memory
  /// (`concepts::HostAccessibleBackend`, or `concepts::RuntimeHostAccess` saying so), else null.
  virtual void* host_address(erased_handle h) const noexcept = 0;

  // Memory, through the device's caching allocator (statistics and limit included).
  virtual erased_handle allocate(std::size_t bytes) const = 0;
  virtual void deallocate(erased_handle h, std::size_t bytes) const noexcept = 0;
  virtual MemoryStats memory_stats() const = 0;
  virtual void reset_peak_memory_stats() const = 0;
  virtual void set_memory_limit(std::optional<std::size_t> bytes) const = 0;
  virtual void release_cached_memory() const = 0;
  virtual random::GeneratorState& generator() const = 0;

  // The backend's asynchronous entry points, as `Backend` states them, for this device.
  virtual void copy_to_device(const void* src, erased_handle dst, std::size_t dst_offset, std::size_t bytes,
                              Completion done) const = 0;
  virtual void copy_to_host(erased_handle src, std::size_t src_offset, void* dst, std::size_t bytes,
                            Completion done) const = 0;
  virtual void copy_between(std::size_t src_device, erased_handle src, std::size_t src_offset, std::size_t dst_device,
                            erased_handle dst, std::size_t dst_offset, std::size_t bytes, Completion done) const = 0;
  /// The transfers of a strided window (`StridedRegion`): the backend's strided hook
  /// (`concepts::StridedTransfers`), else one plain transfer per row.
  virtual void copy_to_host_strided(erased_handle src, const StridedRegion& region, void* dst,
                                    Completion done) const = 0;
  virtual void copy_to_device_strided(const void* src, erased_handle dst, const StridedRegion& region,
                                      Completion done) const = 0;
  /// A copy between strided windows (`concepts::StridedCopies`, else one `copy_between` per row).
  virtual void copy_between_strided(std::size_t src_device, erased_handle src, const StridedRegion& src_region,
                                    std::size_t dst_device, erased_handle dst, const StridedRegion& dst_region,
                                    Completion done) const = 0;
  virtual void execute(HostTask task, Completion done) const = 0;
  /// Runs a user C++ kernel (`parallel_for`, `parallel_reduce`): the backend's `launch` when it is
  /// a `concepts::LaunchableBackend`; else, for host-accessible memory, the whole range as one host
  /// task in device order; else (`identity.runs_kernels` false) completes with `errc::unimplemented`.
  virtual void launch(ops::LaunchArgs args, Completion done) const = 0;

  /// Host memory for transfers with this device (`xdev::pinned`): the backend's pinned memory
  /// (`concepts::AllocatesPinned`), else ordinary host memory.
  virtual PinnedBlock allocate_pinned(std::size_t bytes) const = 0;
  /// Gives back a block of `allocate_pinned` after the device's work submitted so far (memory of a
  /// backend that is gone went with it).
  virtual void deallocate_pinned(PinnedBlock block, std::size_t bytes) const noexcept = 0;

  /// User kernels given as source (`concepts::RunsSourceKernels`; `xdev::Kernel`): the backend's
  /// kernel object for `source`, shared by the devices of this backend object; a backend that runs
  /// none throws `errc::unimplemented` naming the device and the language.
  virtual std::uint64_t create_kernel(const KernelSource& source) const = 0;
  /// Lets go of a kernel from `create_kernel` (launches already started still run).
  virtual void destroy_kernel(std::uint64_t kernel) const noexcept = 0;
  /// Runs `kernel` on this device with `args` (validated by `xdev::Kernel`), completing `done`.
  virtual void launch_kernel(std::uint64_t kernel, KernelLaunchArgs<erased_handle> args, Completion done) const = 0;

  /// Runs a portable op natively: `args` points to the op's `*Args<T..., erased_handle>` struct
  /// for dtypes (`t`, `t2`) as `ops::detail::op_info` describes them; the model rebuilds the typed
  /// struct and, when the backend has the op's member and its `implements` / `implements_binary`
  /// hooks accept it (`ops::runs_natively`, the typed path's decision), starts it with `done` and
  /// returns true. Otherwise it returns false and leaves `done` alone: the caller runs the CPU
  /// fallback over the erased arguments (`op_launcher<AnyDevice>`), so the fallback's host kernels
  /// are compiled where an op is called, once for every backend, not in every erasure of every
  /// backend. A combination no public op produces completes `done` with `errc::unimplemented` and
  /// returns true.
  virtual bool run(ops::OpKind op, DType t, DType t2, const void* args, const ops::detail::OperandOffsets& offsets,
                   Completion& done) const = 0;

  /// The typed `Device<B>` inside when `backend` is `typeid(B)`, else null.
  virtual const void* target(const std::type_info& backend) const noexcept = 0;

  /// A native queue for a new stream (`concepts::NativeQueues`), or null.
  virtual std::unique_ptr<NativeQueue> make_native_queue() const = 0;

  const std::shared_ptr<void> owner;  // first: released last
  const Identity identity;
};

template <class... Ts>
struct type_list {};

// The element types an op accepts through `AnyDevice`: those its public signature accepts.
using every_element = type_list<bool, std::uint8_t, std::int32_t, std::int64_t, f16, bf16, float, double>;
using float_element = type_list<float, double>;
using floating_element = type_list<f16, bf16, float, double>;
using index_element = type_list<std::int32_t, std::int64_t>;

// Calls `f(std::type_identity<T>{})` for the `T` of `Ts` whose dtype is `t`, if any.
template <class... Ts, class F>
void visit_dtype(type_list<Ts...>, DType t, F&& f) {
  (void)((t == dtype_of<Ts> && (f(std::type_identity<Ts>{}), true)) || ...);
}

/// `AnyDeviceModel` over `Device<B>`.
template <class B>
class DeviceModel final : public AnyDeviceModel {
  using H = typename B::memory_handle;

 public:
  DeviceModel(Device<B> dev, std::shared_ptr<void> owner)
      : AnyDeviceModel(std::move(owner),
                       {&dev.runtime(), dev.ordinal(), dev.name(), std::string(backend_name(dev.backend())),
                        capabilities_of(dev), dev.queue(), detail::backend_host_accessible(dev.backend()),
                        concepts::LaunchableBackend<B> || detail::backend_host_accessible(dev.backend())}),
        dev_(dev) {}

  std::string description() const override { return dev_.description(); }
  DeviceProperties properties() const override { return dev_.properties(); }
  void* host_address(erased_handle h) const noexcept override {
    return detail::backend_host_address(dev_.backend(), unerase_handle<H>(h));
  }

  erased_handle allocate(std::size_t bytes) const override { return erase_handle(dev_.allocator().allocate(bytes)); }
  void deallocate(erased_handle h, std::size_t bytes) const noexcept override {
    if (!dev_.valid()) return;  // as Device::release_memory: the memory went with the backend
    // Stream-ordered, as Device::release_memory.
    dev_.queue()->release_after_work(
        [a = &dev_.allocator(), h = unerase_handle<H>(h), bytes] { a->deallocate(h, bytes); });
  }
  MemoryStats memory_stats() const override { return dev_.memory_stats(); }
  void reset_peak_memory_stats() const override { dev_.reset_peak_memory_stats(); }
  void set_memory_limit(std::optional<std::size_t> bytes) const override { dev_.set_memory_limit(bytes); }
  void release_cached_memory() const override { dev_.release_cached_memory(); }
  random::GeneratorState& generator() const override { return dev_.generator(); }

  void copy_to_device(const void* src, erased_handle dst, std::size_t dst_offset, std::size_t bytes,
                      Completion done) const override {
    dev_.backend().copy_to_device(dev_.ordinal(), bound_host(src), unerase_handle<H>(bound(dst)), dst_offset, bytes,
                                  std::move(done));
  }
  void copy_to_host(erased_handle src, std::size_t src_offset, void* dst, std::size_t bytes,
                    Completion done) const override {
    dev_.backend().copy_to_host(dev_.ordinal(), unerase_handle<H>(bound(src)), src_offset, bound_host(dst), bytes,
                                std::move(done));
  }
  void copy_between(std::size_t src_device, erased_handle src, std::size_t src_offset, std::size_t dst_device,
                    erased_handle dst, std::size_t dst_offset, std::size_t bytes, Completion done) const override {
    dev_.backend().copy_between(src_device, unerase_handle<H>(bound(src)), src_offset, dst_device,
                                unerase_handle<H>(bound(dst)), dst_offset, bytes, std::move(done));
  }
  void copy_to_host_strided(erased_handle src, const StridedRegion& region, void* dst, Completion done) const override {
    detail::copy_region_to_host(dev_.backend(), dev_.ordinal(), unerase_handle<H>(bound(src)), region,
                                static_cast<std::byte*>(bound_host(dst)), std::move(done));
  }
  void copy_to_device_strided(const void* src, erased_handle dst, const StridedRegion& region,
                              Completion done) const override {
    detail::copy_region_to_device(dev_.backend(), dev_.ordinal(), static_cast<const std::byte*>(bound_host(src)),
                                  unerase_handle<H>(bound(dst)), region, std::move(done));
  }
  void copy_between_strided(std::size_t src_device, erased_handle src, const StridedRegion& src_region,
                            std::size_t dst_device, erased_handle dst, const StridedRegion& dst_region,
                            Completion done) const override {
    detail::copy_region_between(dev_.backend(), src_device, unerase_handle<H>(bound(src)), src_region, dst_device,
                                unerase_handle<H>(bound(dst)), dst_region, std::move(done));
  }
  void execute(HostTask task, Completion done) const override {
    dev_.backend().execute(dev_.ordinal(), std::move(task), std::move(done));
  }
  void launch(ops::LaunchArgs args, Completion done) const override {
    if constexpr (concepts::LaunchableBackend<B>) {
      dev_.backend().launch(dev_.ordinal(), std::move(args), std::move(done));
    } else {
      if (identity.host_accessible) {
        dev_.backend().execute(dev_.ordinal(), HostTask([a = std::move(args)] { a.kernel(0, a.n); }), std::move(done));
        return;
      }
      done(std::make_exception_ptr(error(errc::unimplemented, identity.name + " cannot run a C++ kernel: its memory is "
                                                                              "not host-accessible")));
    }
  }

  std::unique_ptr<NativeQueue> make_native_queue() const override { return detail::make_native_queue(dev_); }

  PinnedBlock allocate_pinned(std::size_t bytes) const override {
    if constexpr (concepts::AllocatesPinned<B>) {
      // The stream-ordered release packs the ordinal and the size into one word (below).
      if (dev_.ordinal() < pinned_max_ordinal && bytes < pinned_max_bytes) {
        if (void* p = dev_.backend().allocate_pinned(dev_.ordinal(), bytes)) return {p, true};
      }
    }
    return {ordinary_pinned(bytes, identity.name), false};
  }
  void deallocate_pinned(PinnedBlock block, std::size_t bytes) const noexcept override {
    if (!block.backend) {
      if (!dev_.valid()) return std::free(block.data);
      return dev_.queue()->release_after_work([p = block.data] { std::free(p); });
    }
    if constexpr (concepts::AllocatesPinned<B>) {
      if (!dev_.valid()) return;  // the backend, and its memory, are gone
      // Three words at most (a free must not allocate): the ordinal shares one with the size.
      const std::uint64_t where = (std::uint64_t{dev_.ordinal()} << 48) | bytes;
      dev_.queue()->release_after_work([b = &dev_.backend(), p = block.data, where] {
        b->deallocate_pinned(static_cast<std::size_t>(where >> 48), p,
                             static_cast<std::size_t>(where & (pinned_max_bytes - 1)));
      });
    }
  }

  std::uint64_t create_kernel(const KernelSource& source) const override {
    if constexpr (concepts::RunsSourceKernels<B>) {
      const auto k = dev_.backend().create_kernel(source);
      if constexpr (std::is_pointer_v<decltype(k)>)
        return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(k));
      else
        return static_cast<std::uint64_t>(k);
    } else {
      throw error(errc::unimplemented, identity.name + " does not run kernels given as source (asked for " +
                                           source.language + " kernel \"" + source.entry +
                                           "\"); C++ kernels on host-accessible devices are parallel_for");
    }
  }
  void destroy_kernel(std::uint64_t kernel) const noexcept override {
    if constexpr (concepts::RunsSourceKernels<B>) dev_.backend().destroy_kernel(kernel_of(kernel));
  }
  void launch_kernel(std::uint64_t kernel, KernelLaunchArgs<erased_handle> args, Completion done) const override {
    if constexpr (concepts::RunsSourceKernels<B>) {
      if constexpr (!takes_kernel_arg_offsets<B>) detail::refuse_windows(identity.name, args.args);
      KernelLaunchArgs<H> typed{args.global, args.local, {}};
      typed.args.reserve(args.args.size());
      for (const auto& a : args.args)
        typed.args.push_back({unerase_handle<H>(bound(a.memory)), a.scalar_bits, a.offset});
      dev_.backend().launch_kernel(dev_.ordinal(), kernel_of(kernel), std::move(typed), std::move(done));
    } else {
      (void)kernel, (void)args;
      done(
          std::make_exception_ptr(error(errc::unimplemented, identity.name + " does not run kernels given as source")));
    }
  }

  bool run(ops::OpKind op, DType t, DType t2, const void* args, const ops::detail::OperandOffsets& offsets,
           Completion& done) const override {
    bool known = false;
    bool native = false;
    // Rebuilds the typed arguments from the erased ones behind `args` and starts the backend's
    // member when it has one that takes them.
    auto launch = [&]<class Erased>(std::type_identity<Erased>) {
      known = true;
      using Typed = decltype(ops::detail::rebind_handles<H>(std::declval<const Erased&>(), unerase_handle<H>));
      if constexpr (ops::has_native_op<B, Typed>) {
        // Operands at an offset run here when the backend can move a handle on
        // (`concepts::OffsetsHandles`) or open a window there (`concepts::OpensWindows`); else the
        // caller's fallback stages them.
        if (!concepts::OffsetsHandles<B> && !concepts::OpensWindows<B> && offsets.any()) return;
        const Typed typed = ops::detail::rebind_handles<H>(
            *static_cast<const Erased*>(args), [](const erased_handle& e) { return unerase_handle<H>(bound(e)); });
        if (!ops::runs_natively(dev_.backend(), typed)) return;
        if constexpr (concepts::OffsetsHandles<B>) {
          native = true;
          ops::detail::call_native(dev_.backend(), dev_.ordinal(), ops::detail::shifted(dev_.backend(), typed, offsets),
                                   std::move(done));
        } else if constexpr (concepts::OpensWindows<B>) {
          ops::detail::OpWindows<B> windows(dev_.backend(), dev_.ordinal());
          if (const std::optional<Typed> moved = windows.shift(typed, offsets)) {
            native = true;
            ops::detail::call_native(dev_.backend(), dev_.ordinal(), *moved, std::move(done));
          }
        } else {
          native = true;
          ops::detail::call_native(dev_.backend(), dev_.ordinal(), typed, std::move(done));
        }
      }
    };
    // One element type: `Args<T, erased_handle>` for the `T` of `types` whose dtype is `t`.
    auto one = [&]<template <class, class> class Args, class... Ts>(type_list<Ts...> types) {
      visit_dtype(types, t,
                  [&]<class T>(std::type_identity<T>) { launch(std::type_identity<Args<T, erased_handle>>{}); });
    };
    switch (op) {
      case ops::OpKind::fill:
        one.template operator()<ops::FillArgs>(every_element{});
        break;
      case ops::OpKind::scale:
        one.template operator()<ops::ScaleArgs>(float_element{});
        break;
      case ops::OpKind::axpy:
        one.template operator()<ops::AxpyArgs>(float_element{});
        break;
      case ops::OpKind::binary:
        one.template operator()<ops::BinaryArgs>(float_element{});
        break;
      case ops::OpKind::sum:
        one.template operator()<ops::SumArgs>(float_element{});
        break;
      case ops::OpKind::sum_axis:
        one.template operator()<ops::SumAxisArgs>(float_element{});
        break;
      case ops::OpKind::dot:
        one.template operator()<ops::DotArgs>(float_element{});
        break;
      case ops::OpKind::gemm:
        one.template operator()<ops::GemmArgs>(float_element{});
        break;
      case ops::OpKind::rng:
        one.template operator()<ops::RngArgs>(float_element{});
        break;
      case ops::OpKind::exp:
        one.template operator()<ops::ExpArgs>(floating_element{});
        break;
      case ops::OpKind::gather:
        visit_dtype(every_element{}, t, [&]<class T>(std::type_identity<T>) {
          visit_dtype(index_element{}, t2, [&]<class I>(std::type_identity<I>) {
            launch(std::type_identity<ops::GatherArgs<T, I, erased_handle>>{});
          });
        });
        break;
      case ops::OpKind::convert:
        visit_dtype(every_element{}, t, [&]<class S>(std::type_identity<S>) {
          visit_dtype(every_element{}, t2, [&]<class D>(std::type_identity<D>) {
            launch(std::type_identity<ops::ConvertArgs<S, D, erased_handle>>{});
          });
        });
        break;
    }
    if (!known) {
      done(std::make_exception_ptr(error(errc::unimplemented, std::string("op ") + ops::name_of(op) + " on " +
                                                                  identity.name + " has no erased form for dtypes " +
                                                                  std::string(name_of(t)) + ", " +
                                                                  std::string(name_of(t2)))));
      return true;
    }
    return native;
  }

  const void* target(const std::type_info& backend) const noexcept override {
    return backend == typeid(B) ? &dev_ : nullptr;
  }

 private:
  // The backend's pinned memory is used for devices and sizes that fit the packed release (every
  // real one: 2^48 bytes is beyond any host's address space); ordinary memory otherwise.
  static constexpr std::size_t pinned_max_ordinal = std::size_t{1} << 16;
  static constexpr std::uint64_t pinned_max_bytes = std::uint64_t{1} << 48;

  // A kernel handle of `B` back from its 64 bits.
  static auto kernel_of(std::uint64_t k) noexcept {
    if constexpr (concepts::RunsSourceKernels<B>) {
      using K = typename B::kernel_handle;
      if constexpr (std::is_pointer_v<K>)
        return reinterpret_cast<K>(static_cast<std::uintptr_t>(k));
      else
        return static_cast<K>(k);
    } else {
      return k;
    }
  }

  Device<B> dev_;
};

}  // namespace xdev::detail
