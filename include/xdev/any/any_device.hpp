/// \file
/// `xdev::AnyDevice`: one device of any backend, chosen at run time. With it: `xdev::AnyStream`,
/// `xdev::AnyBuffer<T>` and `xdev::AnyArray<T>`. See docs/any-device.md.
///
/// An `AnyDevice` is made from any `Device<B>`. It keeps the device's execution queue, so work
/// submitted through it takes the same path as typed work (in-flight bound, stream order, every
/// completion token, kept errors raised by `synchronize()`); only the start of each operation on
/// the backend goes through one virtual call. The portable ops (`xdev::ops::fill(any_dev,
/// any_array, 1.0f)`, ...) take `AnyDevice`, `AnyStream` and `AnyArray<T>` through the same
/// functions as typed handles, with the same checks and the same dispatch (member, `implements`
/// hook, CPU fallback). `xdev::parallel_for` takes only typed devices.
///
///     xdev::Runtime<xdev::backends::Host> host;
///     xdev::AnyDevice dev = host.device(0);                  // prints as "HOST:0"
///     auto x = xdev::empty<float>(dev, {1024});                 // xdev::AnyArray<float>
///     xdev::ops::fill(dev, x, 1.0f).get();
///     float s = xdev::ops::sum(dev, x).get();
#pragma once

#include <xdev/any/detail/erased_ops.hpp>
#include <xdev/any/detail/model.hpp>
#include <xdev/async/detail/join.hpp>
#include <xdev/async/detail/op_chain.hpp>
#include <xdev/async/device_queue.hpp>
#include <xdev/async/event.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/backend/device_properties.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/device/device.hpp>
#include <xdev/fwd.hpp>
#include <xdev/memory/allocator.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/memory/array_view.hpp>
#include <xdev/memory/buffer.hpp>
#include <xdev/ops/dispatch.hpp>
#include <xdev/ops/fallback.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/ops/ops.hpp>
#include <xdev/policy/capability_set.hpp>
#include <xdev/random/generator.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace xdev {

/// Device memory for `size()` elements of `T` on an `AnyDevice` (`Buffer<T, detail::erased_backend>`).
template <class T>
using AnyBuffer = Buffer<T, detail::erased_backend>;

/// A dense row-major array on an `AnyDevice` (`Array<T, detail::erased_backend>`): what the
/// portable ops take with an `AnyDevice` or `AnyStream` queue.
template <class T>
using AnyArray = Array<T, detail::erased_backend>;

/// A window onto an `AnyArray<T>` (`ArrayView<T, detail::erased_backend>`; `xdev::slice` makes one).
template <class T>
using AnyArrayView = ArrayView<T, detail::erased_backend>;

/// One device of any backend: a shared pointer to an erased model of a `Device<B>`. Copying it
/// copies that pointer. Two `AnyDevice`s are equal when they name the same device of the same
/// runtime, even when erased separately (and an `AnyDevice` equals the `Device<B>` it was made
/// from); `std::hash<AnyDevice>` agrees with `std::hash<Device<B>>`. Prints as its `name()`.
///
///     std::vector<xdev::AnyDevice> devices{host.device(0), sim.device(0)};   // mixed backends
///     for (const auto& d : devices) std::cout << d << ' ' << d.capability_set() << '\n';
///
/// Lifetime: made from a `Device<B>` alone, the `Runtime<B>` must outlive the pending work; the
/// `AnyDevice`, its arrays and streams may outlive it but not be used after it (as for `Device<B>`:
/// every use throws `errc::unavailable`, destroying them frees nothing). Made with an `owner`,
/// the owner is kept alive as long as any copy, any array or stream made through it, or any
/// operation submitted through it is alive (a plugin registry passes the runtime and the loaded
/// library there). The owner may be released on a backend thread, when the last such operation
/// completes.
///
/// A default-constructed `AnyDevice` names no device: `valid()` is false, `name()` is empty, and
/// every operation throws `errc::invalid_argument`.
class AnyDevice {
 public:
  /// Not a backend: the tag `AnyArray<T>` and `AnyBuffer<T>` are made of.
  using backend_type = detail::erased_backend;

  AnyDevice() noexcept = default;

  /// Erases `dev` (an invalid `dev` gives an invalid `AnyDevice`), keeping `owner` alive as
  /// described above (null: nothing to keep; once the runtime is destroyed, every use of the
  /// device or of its buffers throws `errc::unavailable` and freeing them does nothing).
  /// Fails to compile, saying so, when `B::memory_handle` is larger than 16 bytes or not trivially
  /// copyable.
  template <class B>
  AnyDevice(Device<B> dev, std::shared_ptr<void> owner = nullptr)  // NOLINT(google-explicit-constructor): erasure
  {
    static_assert(std::is_trivially_copyable_v<typename B::memory_handle>,
                  "xdev::AnyDevice: the backend's memory_handle must be trivially copyable to be erased");
    static_assert(sizeof(typename B::memory_handle) <= detail::erased_handle::capacity,
                  "xdev::AnyDevice: the backend's memory_handle is larger than 16 bytes and cannot be erased; "
                  "use a handle of at most 16 bytes (a pointer, an index, a pointer and an offset)");
    if (dev.valid()) model_ = std::make_shared<const detail::DeviceModel<B>>(dev, std::move(owner));
  }

  /// A device over a model of xdev's own making (the adopted memory of `from_dlpack`, say): not
  /// for backends, which erase a `Device<B>` with the constructor above.
  explicit AnyDevice(std::shared_ptr<const detail::AnyDeviceModel> model) noexcept : model_(std::move(model)) {}

  /// False for a default-constructed handle that names no device.
  [[nodiscard]] bool valid() const noexcept { return model_ != nullptr; }
  /// "NAME:ordinal", e.g. "HOST:0" (the backend's run-time name); empty when `!valid()`.
  [[nodiscard]] const std::string& name() const noexcept { return valid() ? model_->identity.name : no_name(); }
  /// The device type's name, e.g. "HOST"; empty when `!valid()`.
  [[nodiscard]] std::string_view type_name() const noexcept {
    return valid() ? std::string_view(model_->identity.type_name) : std::string_view();
  }
  [[nodiscard]] std::size_t ordinal() const noexcept { return valid() ? model_->identity.ordinal : 0; }
  /// What the device is, for people (`Device<B>::description()`): the backend's
  /// `device_description(ordinal())` when it has that hook (a plugin's `describe_device`; the host
  /// backend's "host memory, 8 worker threads"), else ""; "" when `!valid()`. Asked each time.
  /// \throws xdev::error what the backend's hook throws (a plugin's error: "REF: describe_device: ...").
  [[nodiscard]] std::string description() const { return valid() ? model_->description() : std::string(); }
  /// What the device is, as typed fields (`Device<B>::properties()`: name, vendor, driver version,
  /// compute units, work-group size, memory total and free now, host accessibility, dtypes); a
  /// plugin's come from its `device_properties` entry (ABI 1.8). Empty fields when `!valid()`.
  /// \throws xdev::error what the backend's hook throws ("REF: device_properties: ...").
  [[nodiscard]] DeviceProperties properties() const { return valid() ? model_->properties() : DeviceProperties{}; }
  /// The capabilities in force (the backend's run-time set; defaults when `!valid()`).
  [[nodiscard]] CapabilitySet capability_set() const noexcept {
    return valid() ? model_->identity.capabilities : CapabilitySet{};
  }
  /// True when the host can address the device's memory directly (the backend models
  /// `concepts::HostAccessibleBackend`, as the host backend does, or a plugin says so with
  /// `XDEV_PLUGIN_HOST_MEMORY`); false when `!valid()`.
  [[nodiscard]] bool host_accessible() const noexcept { return valid() && model_->identity.host_accessible; }
  /// True when `parallel_for` and `parallel_reduce` can run a C++ kernel on the device: its backend
  /// launches user kernels (`concepts::LaunchableBackend`) or its memory is host-accessible.
  [[nodiscard]] bool runs_kernels() const noexcept { return valid() && model_->identity.runs_kernels; }
  /// True when both handles belong to the same runtime (a copy between them is possible).
  [[nodiscard]] bool same_runtime(const AnyDevice& o) const noexcept {
    return valid() && o.valid() && model_->identity.runtime == o.model_->identity.runtime;
  }
  /// What this handle keeps alive (null when made without an owner).
  [[nodiscard]] const std::shared_ptr<void>& owner() const noexcept {
    static const std::shared_ptr<void> none;
    return valid() ? model_->owner : none;
  }
  /// The typed device inside when its backend is `B`, else null (like `std::function::target`).
  template <class B>
  [[nodiscard]] const Device<B>* target() const noexcept {
    return valid() ? static_cast<const Device<B>*>(model_->target(typeid(B))) : nullptr;
  }

  // Memory

  /// Allocates device memory for `count` elements of `T` (contents unspecified) through the
  /// device's caching allocator.
  /// \throws xdev::error `errc::out_of_memory` naming the device, the request and the limit.
  template <class T>
  [[nodiscard]] AnyBuffer<T> allocate(std::size_t count) const;

  [[nodiscard]] MemoryStats memory_stats() const { return model().memory_stats(); }
  /// Sets the peak statistic to the bytes in use now.
  void reset_peak_memory_stats() const { model().reset_peak_memory_stats(); }
  /// Sets (or with `std::nullopt` clears) the bytes this device may have in use.
  void set_memory_limit(std::optional<std::size_t> bytes) const { model().set_memory_limit(bytes); }
  /// Returns cached free blocks to the backend.
  void release_cached_memory() const { model().release_cached_memory(); }

  // Random numbers

  /// Restarts the device's default random stream at `seed`, offset 0.
  void manual_seed(std::uint64_t seed) const { model().generator().manual_seed(seed); }
  /// The device's default random stream position.
  [[nodiscard]] random::GeneratorState& generator() const { return model().generator(); }

  // Execution

  /// The device's default stream (the one the typed device uses too).
  [[nodiscard]] AnyStream default_stream() const;
  /// A new stream: in order within itself, free to overlap with other streams.
  [[nodiscard]] AnyStream make_stream(StreamOptions options = {}) const;

  /// `default_stream().execute(f, token)`.
  template <class F, class Token = const use_future_t&>
  auto execute(F&& f, Token&& token = use_future) const;
  /// `default_stream().copy_to_device(src, dst, token)` (host→device).
  template <class T, class Token = const use_future_t&>
  auto copy_to_device(std::span<const T> src, AnyBuffer<T>& dst, Token&& token = use_future) const;
  /// As above, into an array's buffer.
  template <class T, class Token = const use_future_t&>
  auto copy_to_device(std::span<const T> src, AnyArray<T>& dst, Token&& token = use_future) const;
  /// `default_stream().copy_to_host(src, dst, token)` (device→host).
  template <class T, class Token = const use_future_t&>
  auto copy_to_host(const AnyBuffer<T>& src, std::span<T> dst, Token&& token = use_future) const;
  /// As above, from an array's buffer.
  template <class T, class Token = const use_future_t&>
  auto copy_to_host(const AnyArray<T>& src, std::span<T> dst, Token&& token = use_future) const;
  /// As above, into a window of an array (`xdev::slice`).
  template <class T, class Token = const use_future_t&>
  requires(!std::is_const_v<T>) auto copy_to_device(std::span<const T> src, const AnyArrayView<T>& dst,
                                                    Token&& token = use_future) const;
  /// As above, from a window of an array (`xdev::slice`).
  template <class T, class Token = const use_future_t&>
  auto copy_to_host(const AnyArrayView<T>& src, std::span<std::remove_const_t<T>> dst,
                    Token&& token = use_future) const;
  /// `default_stream().copy(src, dst, token)` (device→device, within one runtime).
  template <class T, class Token = const use_future_t&>
  auto copy(const AnyBuffer<T>& src, AnyBuffer<T>& dst, Token&& token = use_future) const;
  /// `default_stream().copy(src, dst, token)` between two windows (device→device).
  template <class S, class T, class Token = const use_future_t&>
  requires(!std::is_const_v<T> &&
           std::is_same_v<std::remove_const_t<S>, T>) auto copy(const AnyArrayView<S>& src, const AnyArrayView<T>& dst,
                                                                Token&& token = use_future) const;

  /// Waits for all work submitted to the device, through any handle and on any stream, then
  /// raises the oldest error that no future or handler received.
  void synchronize() const { queue()->synchronize(); }
  /// Bytes transferred into and out of this device so far.
  [[nodiscard]] TransferStats transfer_stats() const { return queue()->transfer_stats(); }
  /// The in-flight bound in force.
  [[nodiscard]] std::size_t max_inflight() const { return queue()->throttle().limit(); }
  [[nodiscard]] ExecutionStats execution_stats() const { return queue()->stats(); }
  /// The device's execution state, shared with its typed handle (for xdev's own layers).
  /// \throws xdev::error `errc::invalid_argument` when `!valid()`.
  [[nodiscard]] const std::shared_ptr<DeviceQueue>& queue() const { return model().identity.queue; }

  /// The erased model (for xdev's own layers).
  /// \throws xdev::error `errc::invalid_argument` when `!valid()`.
  [[nodiscard]] const detail::AnyDeviceModel& model() const {
    if (!valid()) throw error(errc::invalid_argument, "the AnyDevice is empty: it names no device");
    return *model_;
  }

  /// `done`, made to keep this device's owner alive until the backend has called and dropped it
  /// (for xdev's own layers: every completion handed to the backend goes through it).
  [[nodiscard]] Completion keep_alive(Completion done) const {
    if (!valid() || !model_->owner) return done;
    return [model = model_, done = std::move(done)](std::exception_ptr ep) mutable { done(std::move(ep)); };
  }

  /// A hash combining runtime and ordinal: `std::hash<Device<B>>` of the typed device.
  [[nodiscard]] std::size_t hash() const noexcept {
    const std::size_t h = std::hash<const void*>{}(valid() ? model_->identity.runtime : nullptr);
    return h ^ (std::hash<std::size_t>{}(ordinal()) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  }

  friend bool operator==(const AnyDevice& a, const AnyDevice& b) noexcept {
    if (!a.valid() || !b.valid()) return a.valid() == b.valid();
    return a.model_->identity.runtime == b.model_->identity.runtime && a.ordinal() == b.ordinal();
  }
  /// True when `a` erases `d` (or a device equal to it).
  template <class B>
  friend bool operator==(const AnyDevice& a, const Device<B>& d) noexcept {
    if (!a.valid() || !d.valid()) return a.valid() == d.valid();
    return a.model_->identity.runtime == static_cast<const void*>(&d.runtime()) && a.ordinal() == d.ordinal();
  }
  /// `name()`, or "(no device)" when `!valid()`.
  friend std::ostream& operator<<(std::ostream& os, const AnyDevice& d) {
    return os << (d.valid() ? d.name() : std::string("(no device)"));
  }

 private:
  static const std::string& no_name() noexcept {
    static const std::string empty;
    return empty;
  }

  std::shared_ptr<const detail::AnyDeviceModel> model_;
};

/// The capabilities in force on `dev` (as `dev.capability_set()`).
[[nodiscard]] inline CapabilitySet capabilities_of(const AnyDevice& dev) noexcept {
  return dev.capability_set();
}

/// An `AnyBuffer<T>` (`Buffer<T, erased_backend>`, the same class as a typed buffer) lives on an
/// `AnyDevice` and gives its memory back through the device's model. Holding its device, it keeps
/// the device's owner alive.
template <>
struct detail::buffer_device<detail::erased_backend> {
  using device_type = AnyDevice;
  using handle_type = erased_handle;
  static void release(const AnyDevice& d, erased_handle h, std::size_t bytes) noexcept {
    d.model().deallocate(h, bytes);
  }
};

/// A new array of `shape` on `dev`, contents unspecified.
/// \throws xdev::error `errc::out_of_memory` as `AnyDevice::allocate`.
template <class T>
AnyArray<T> empty(const AnyDevice& dev, Shape shape) {
  return AnyArray<T>(dev.template allocate<T>(static_cast<std::size_t>(shape.numel())), shape);
}

/// In-order work on an `AnyDevice`: the erased form of `Stream<B>`, with the same members and
/// rules (see <xdev/async/stream.hpp>). Copies share the same queue.
class AnyStream : public detail::StreamCore {
 public:
  using backend_type = detail::erased_backend;

  AnyStream(AnyDevice device, std::shared_ptr<detail::OpChain> chain)
      : StreamCore(device.queue(), std::move(chain)), device_(std::move(device)) {}

  [[nodiscard]] const AnyDevice& device() const noexcept { return device_; }

  /// Runs `f()` on the device after the work before it; completes with its result
  /// (`void(std::exception_ptr, R)`, or `void(std::exception_ptr)` when `f` returns void).
  template <class F, class Token = const use_future_t&>
  auto execute(F&& f, Token&& token = use_future) const {
    using R = std::invoke_result_t<std::decay_t<F>&>;
    static_assert(std::is_void_v<R> || std::is_default_constructible_v<R>,
                  "xdev::AnyStream::execute: the result of f must be void or default-constructible");
    std::shared_ptr<detail::result_slot<R>> slot;
    if constexpr (!std::is_void_v<R>) slot = std::make_shared<detail::result_slot<R>>();
    auto launch = [dev = device_, slot, f = std::forward<F>(f)](Completion done) mutable {
      dev.model().execute(HostTask([slot, f = std::move(f)]() mutable {
                            detail::async_scope scope;
                            if constexpr (std::is_void_v<R>)
                              f();
                            else
                              slot->value.emplace(f());
                          }),
                          dev.keep_alive(std::move(done)));
    };
    return detail::submit<R>(
        queue_, chain_, std::move(slot),
        detail::queue_ordered(std::move(launch), detail::activity_tag{tools::Category::host_task, "execute"}),
        std::forward<Token>(token));
  }

  /// Copies `src` from host memory into `dst` (host→device). Sizes must match.
  /// \throws xdev::error `errc::invalid_argument` when they differ or `dst` is not on this stream's device.
  template <class T, class Token = const use_future_t&>
  auto copy_to_device(std::span<const T> src, AnyBuffer<T>& dst, Token&& token = use_future) const {
    check_same_device(dst.device(), "copy_to_device: destination");
    check_sizes("copy_to_device", src.size(), dst.size());
    auto launch = [dev = device_, src = src.data(), h = dst.native_handle(), n = dst.size_bytes()](Completion done) {
      dev.queue()->note_transfer(TransferDirection::from_host, n);
      dev.model().copy_to_device(src, h, 0, n, dev.keep_alive(std::move(done)));
    };
    return detail::submit<void>(
        queue_, chain_, nullptr,
        detail::queue_ordered(std::move(launch), detail::activity_tag{tools::Category::transfer, "copy_to_device",
                                                                      nullptr, dst.size_bytes()}),
        std::forward<Token>(token));
  }

  /// Copies `src` into host memory `dst` (device→host). Sizes must match.
  /// \throws xdev::error `errc::invalid_argument` when they differ or `src` is not on this stream's device.
  template <class T, class Token = const use_future_t&>
  auto copy_to_host(const AnyBuffer<T>& src, std::span<T> dst, Token&& token = use_future) const {
    check_same_device(src.device(), "copy_to_host: source");
    check_sizes("copy_to_host", src.size(), dst.size());
    auto launch = [dev = device_, h = src.native_handle(), dst = dst.data(), n = src.size_bytes()](Completion done) {
      dev.queue()->note_transfer(TransferDirection::to_host, n);
      dev.model().copy_to_host(h, 0, dst, n, dev.keep_alive(std::move(done)));
    };
    return detail::submit<void>(
        queue_, chain_, nullptr,
        detail::queue_ordered(std::move(launch), detail::activity_tag{tools::Category::transfer, "copy_to_host",
                                                                      nullptr, src.size_bytes()}),
        std::forward<Token>(token));
  }

  /// Copies the window `src` into host memory `dst`, densely in the view's row-major order, as
  /// `Stream<B>::copy_to_host` of a view (strided regions: docs/views.md).
  /// \throws xdev::error `errc::invalid_argument` when sizes differ or `src` is not on this stream's device.
  template <class T, class Token = const use_future_t&>
  auto copy_to_host(const AnyArrayView<T>& src, std::span<std::remove_const_t<T>> dst,
                    Token&& token = use_future) const {
    check_same_device(src.device(), "copy_to_host: source");
    check_sizes("copy_to_host", src.size(), dst.size());
    using V = std::remove_const_t<T>;
    auto launch = [dev = device_, h = src.native_handle(), layout = src.layout(),
                   dst = reinterpret_cast<std::byte*>(dst.data())](Completion done) {
      dev.queue()->note_transfer(TransferDirection::to_host, layout.numel() * sizeof(V));
      detail::start_view_transfer(
          layout, sizeof(V),
          [&](std::size_t at, std::size_t host, std::size_t bytes, Completion part) {
            dev.model().copy_to_host(h, at, dst + host, bytes, std::move(part));
          },
          [&](const StridedRegion& r, std::size_t host, Completion part) {
            dev.model().copy_to_host_strided(h, r, dst + host, std::move(part));
          },
          dev.keep_alive(std::move(done)));
    };
    return detail::submit<void>(
        queue_, chain_, nullptr,
        detail::queue_ordered(std::move(launch), detail::activity_tag{tools::Category::transfer, "copy_to_host",
                                                                      nullptr, src.size_bytes()}),
        std::forward<Token>(token));
  }

  /// Copies host memory `src` (dense, in the view's row-major order) into the window `dst`, with
  /// backend transfers as `copy_to_host` of a view.
  /// \throws xdev::error `errc::invalid_argument` when sizes differ or `dst` is not on this stream's device.
  template <class T, class Token = const use_future_t&>
  requires(!std::is_const_v<T>) auto copy_to_device(std::span<const T> src, const AnyArrayView<T>& dst,
                                                    Token&& token = use_future) const {
    check_same_device(dst.device(), "copy_to_device: destination");
    check_sizes("copy_to_device", src.size(), dst.size());
    auto launch = [dev = device_, src = reinterpret_cast<const std::byte*>(src.data()), h = dst.native_handle(),
                   layout = dst.layout()](Completion done) {
      dev.queue()->note_transfer(TransferDirection::from_host, layout.numel() * sizeof(T));
      detail::start_view_transfer(
          layout, sizeof(T),
          [&](std::size_t at, std::size_t host, std::size_t bytes, Completion part) {
            dev.model().copy_to_device(src + host, h, at, bytes, std::move(part));
          },
          [&](const StridedRegion& r, std::size_t host, Completion part) {
            dev.model().copy_to_device_strided(src + host, h, r, std::move(part));
          },
          dev.keep_alive(std::move(done)));
    };
    return detail::submit<void>(
        queue_, chain_, nullptr,
        detail::queue_ordered(std::move(launch), detail::activity_tag{tools::Category::transfer, "copy_to_device",
                                                                      nullptr, dst.size_bytes()}),
        std::forward<Token>(token));
  }

  /// Copies `src` into `dst` (device→device); either may be on another device of the same runtime,
  /// but one of them must be on this stream's device. Sizes must match.
  /// \throws xdev::error `errc::invalid_argument` naming the devices when neither is on this
  /// stream's device, or when they belong to different runtimes (or backends).
  template <class T, class Token = const use_future_t&>
  auto copy(const AnyBuffer<T>& src, AnyBuffer<T>& dst, Token&& token = use_future) const {
    check_copy_devices(src.device(), dst.device());
    check_sizes("copy", src.size(), dst.size());
    auto launch = [dev = device_, sq = src.device().queue(), s = src.device().ordinal(), sh = src.native_handle(),
                   dq = dst.device().queue(), d = dst.device().ordinal(), dh = dst.native_handle(),
                   n = src.size_bytes()](Completion done) {
      detail::note_copy(*sq, *dq, n);
      dev.model().copy_between(s, sh, 0, d, dh, 0, n, dev.keep_alive(std::move(done)));
    };
    // Between two devices the backend may use the other device's queue: host-ordered then. The
    // other device's frees wait for the copy too (stream-ordered frees).
    const bool within = src.device() == dst.device();
    auto peer = src.device() == device_ ? dst.device().queue() : src.device().queue();
    return detail::submit<void>(
        queue_, chain_, nullptr,
        detail::queue_ordered(std::move(launch), within, std::move(peer),
                              detail::activity_tag{tools::Category::transfer, "copy", nullptr, src.size_bytes()}),
        std::forward<Token>(token));
  }

  /// Copies the window `src` into the window `dst` (device→device), as `Stream<B>::copy` of two
  /// views, element by element in row-major order. Shapes must be equal; one of the two must be on
  /// this stream's device, both on one runtime; windows onto one array must not share an element.
  /// \throws xdev::error `errc::invalid_argument` for any of these.
  template <class S, class T, class Token = const use_future_t&>
  requires(!std::is_const_v<T> &&
           std::is_same_v<std::remove_const_t<S>, T>) auto copy(const AnyArrayView<S>& src, const AnyArrayView<T>& dst,
                                                                Token&& token = use_future) const {
    const AnyDevice& sd = src.device();
    const AnyDevice& dd = dst.device();
    check_copy_devices(sd, dd);
    detail::check_view_copy(src.layout(), dst.layout(), sd == dd && src.native_handle() == dst.native_handle());
    auto launch = [dev = device_, sq = sd.queue(), s = sd.ordinal(), sh = src.native_handle(), sl = src.layout(),
                   dq = dd.queue(), d = dd.ordinal(), dh = dst.native_handle(), dl = dst.layout()](Completion done) {
      detail::note_copy(*sq, *dq, sl.numel() * sizeof(T));
      detail::start_view_copy(
          sl, dl, sizeof(T),
          [&](std::size_t from, std::size_t to, std::size_t bytes, Completion part) {
            dev.model().copy_between(s, sh, from, d, dh, to, bytes, dev.keep_alive(std::move(part)));
          },
          [&](const StridedRegion& from, const StridedRegion& to, Completion part) {
            dev.model().copy_between_strided(s, sh, from, d, dh, to, dev.keep_alive(std::move(part)));
          },
          std::move(done));
    };
    auto peer = sd == device_ ? dd.queue() : sd.queue();
    return detail::submit<void>(
        queue_, chain_, nullptr,
        detail::queue_ordered(std::move(launch), sd == dd, std::move(peer),
                              detail::activity_tag{tools::Category::transfer, "copy", nullptr, src.size_bytes()}),
        std::forward<Token>(token));
  }

  friend bool operator==(const AnyStream& a, const AnyStream& b) noexcept { return a.chain_ == b.chain_; }

 private:
  static std::string describe(const AnyDevice& d) { return d.valid() ? d.name() : std::string("no device"); }
  void check_copy_devices(const AnyDevice& src, const AnyDevice& dst) const {
    if (src != device_ && dst != device_)
      throw error(errc::invalid_argument, "copy: neither source (" + describe(src) + ") nor destination (" +
                                              describe(dst) + ") is on this stream's device " + device_.name());
    if (!src.same_runtime(dst))
      throw error(errc::invalid_argument, "copy: source (" + describe(src) + ") and destination (" + describe(dst) +
                                              ") belong to different runtimes; a copy between devices of two "
                                              "runtimes or backends is not supported");
  }
  void check_same_device(const AnyDevice& d, const char* what) const {
    if (d != device_)
      throw error(errc::invalid_argument, std::string(what) + " buffer is on " + describe(d) +
                                              ", not on this stream's device " + device_.name());
  }

  AnyDevice device_;
};

// ---- AnyDevice members that need AnyStream and AnyBuffer -------------------------------------

template <class T>
AnyBuffer<T> AnyDevice::allocate(std::size_t count) const {
  const auto& m = model();
  if (count > std::size_t(-1) / sizeof(T))
    throw error(errc::out_of_memory, "allocation of " + std::to_string(count) + " elements of " +
                                         std::to_string(sizeof(T)) + " bytes on " + name() + " overflows size_t");
  return AnyBuffer<T>(*this, m.allocate(count * sizeof(T)), count);
}

inline AnyStream AnyDevice::default_stream() const {
  return AnyStream(*this, queue()->default_chain());
}

inline AnyStream AnyDevice::make_stream(StreamOptions options) const {
  (void)model();
  return AnyStream(*this, detail::make_chain(options, model().make_native_queue()));
}

template <class F, class Token>
auto AnyDevice::execute(F&& f, Token&& token) const {
  return default_stream().execute(std::forward<F>(f), std::forward<Token>(token));
}

template <class T, class Token>
auto AnyDevice::copy_to_device(std::span<const T> src, AnyBuffer<T>& dst, Token&& token) const {
  return default_stream().copy_to_device(src, dst, std::forward<Token>(token));
}

template <class T, class Token>
auto AnyDevice::copy_to_device(std::span<const T> src, AnyArray<T>& dst, Token&& token) const {
  return default_stream().copy_to_device(src, dst.buffer(), std::forward<Token>(token));
}

template <class T, class Token>
auto AnyDevice::copy_to_host(const AnyBuffer<T>& src, std::span<T> dst, Token&& token) const {
  return default_stream().copy_to_host(src, dst, std::forward<Token>(token));
}

template <class T, class Token>
auto AnyDevice::copy_to_host(const AnyArray<T>& src, std::span<T> dst, Token&& token) const {
  return default_stream().copy_to_host(src.buffer(), dst, std::forward<Token>(token));
}

template <class T, class Token>
requires(!std::is_const_v<T>) auto AnyDevice::copy_to_device(std::span<const T> src, const AnyArrayView<T>& dst,
                                                             Token&& token) const {
  return default_stream().copy_to_device(src, dst, std::forward<Token>(token));
}

template <class T, class Token>
auto AnyDevice::copy_to_host(const AnyArrayView<T>& src, std::span<std::remove_const_t<T>> dst, Token&& token) const {
  return default_stream().copy_to_host(src, dst, std::forward<Token>(token));
}

template <class T, class Token>
auto AnyDevice::copy(const AnyBuffer<T>& src, AnyBuffer<T>& dst, Token&& token) const {
  return default_stream().copy(src, dst, std::forward<Token>(token));
}

template <class S, class T, class Token>
requires(!std::is_const_v<T> && std::is_same_v<std::remove_const_t<S>, T>) auto AnyDevice::copy(
    const AnyArrayView<S>& src, const AnyArrayView<T>& dst, Token&& token) const {
  return default_stream().copy(src, dst, std::forward<Token>(token));
}

/// `AnyDevice` is a device handle and `AnyStream` a stream handle: the portable ops take them.
template <>
inline constexpr bool enable_device_handle<AnyDevice> = true;
template <>
inline constexpr bool enable_stream_handle<AnyStream> = true;

/// The erased entry of every op (<xdev/any/detail/erased_ops.hpp>): the backend's member through
/// the device's model, else the CPU fallback over the erased arguments.
template <>
struct ops::op_launcher<AnyDevice> : xdev::detail::erased_op_launcher<AnyDevice> {};

}  // namespace xdev

/// `AnyDevice::hash()`: equal to `std::hash<Device<B>>` of the device it erases.
template <>
struct std::hash<xdev::AnyDevice> {
  std::size_t operator()(const xdev::AnyDevice& d) const noexcept { return d.hash(); }
};
