/// \file
/// `xdev::Device<B>`: a typed handle to one device of backend `B`.
#pragma once

#include <xdev/async/device_queue.hpp>
#include <xdev/async/queue.hpp>
#include <xdev/async/stream.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/backend/device_properties.hpp>
#include <xdev/device/detail/runtime_anchor.hpp>
#include <xdev/fwd.hpp>
#include <xdev/memory/allocator.hpp>
#include <xdev/memory/buffer.hpp>
#include <xdev/policy/capabilities.hpp>
#include <xdev/random/generator.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace xdev {

namespace detail {
template <class B>
struct DeviceState;  // defined in device/runtime.hpp
}  // namespace detail

/// A handle to device `ordinal()` of a `Runtime<B>`: a pointer and an index, cheap to copy. Every
/// call resolves statically to the backend. Obtained from `Runtime<B>::device(i)` or `devices()`.
///
///     xdev::Runtime<xdev::backends::Host> host;
///     xdev::Device dev = host.device(0);            // prints as "HOST:0"
///     auto buf = dev.allocate<float>(1024);
///     dev.copy_to_device(std::span<const float>(v), buf).get();
///
/// Compile-time capabilities are reachable from the type: `Device<B>::capabilities::max_inflight`.
/// The capabilities in force are `xdev::capabilities_of(dev)`: the same values, unless `B` describes
/// itself at run time (`runtime_capabilities()`, see <xdev/backend/concepts.hpp>).
///
/// A handle that outlives its runtime is never undefined behaviour: every member that needs the
/// runtime checks first that it is still alive and throws `errc::unavailable` if not (a buffer's
/// destructor then does nothing: its memory went with the backend). Three accessors are not
/// checked, because they cost about a nanosecond and a check would double that: `runtime()`,
/// `backend()`, and `Buffer::host_data()`. Call them only while the runtime lives, or test
/// `valid()` first. (Using a handle on one thread while another destroys its runtime is a data
/// race, as for any object.)
namespace detail {
template <class B>
std::unique_ptr<NativeQueue> make_native_queue(const Device<B>& dev);
}  // namespace detail

template <class B>
class Device {
  static_assert(check_backend<B>(), "xdev::Device<B>: B does not satisfy xdev::concepts::Backend (see above)");

 public:
  using backend_type = B;
  using capabilities = typename detail::capabilities_type_of<B>::type;
  /// The compile-time capabilities as a run-time value, for typed code. For a backend that
  /// describes itself at run time this is only its static `capabilities` list: the set in force
  /// (what ops, the runtime and an `AnyDevice` use) is `xdev::capabilities_of(dev)`.
  static constexpr CapabilitySet capability_set = capabilities::set;

  /// A handle to no device (what a moved-from buffer holds).
  Device() noexcept = default;
  Device(Runtime<B>& runtime, std::size_t ordinal) noexcept
      : runtime_(&runtime),
        anchor_(runtime.anchor().anchor()),
        ordinal_(static_cast<std::uint32_t>(ordinal)),
        stamp_(runtime.anchor().stamp()) {}

  [[nodiscard]] std::size_t ordinal() const noexcept { return ordinal_; }
  /// "NAME:ordinal", e.g. "HOST:0"; NAME is the backend's `runtime_name()` when it has one, else `B::name`.
  /// \throws xdev::error `errc::unavailable` when the runtime has been destroyed (as every checked member).
  [[nodiscard]] std::string name() const {
    require_valid();
    return std::string(detail::backend_name(backend())) + ':' + std::to_string(ordinal_);
  }
  /// What the device is, for people: the backend's `device_description(ordinal())` when it has
  /// that hook (`concepts::DescribesDevices`), else "". Free-form text, e.g. "host memory, 8 worker
  /// threads".
  /// \throws xdev::error what the backend's hook throws (a plugin's error, say).
  [[nodiscard]] std::string description() const {
    require_valid();
    return detail::backend_description(backend(), ordinal_);
  }
  /// What the device is, as typed fields: the backend's `device_properties(ordinal())` when it has
  /// that hook (`concepts::ReportsDeviceProperties`), else empty fields; xdev then sets
  /// `host_accessible` and `supported_dtypes`, and `memory_total` from the `MemoryPerDevice`
  /// capability when the backend left it 0. Asked each time (`memory_free` is the driver's figure
  /// now). \throws xdev::error what the backend's hook throws.
  [[nodiscard]] DeviceProperties properties() const {
    require_valid();
    DeviceProperties p = detail::backend_properties(backend(), ordinal_);
    const CapabilitySet caps = detail::backend_capabilities(backend());
    p.host_accessible = detail::backend_host_accessible(backend());
    p.supported_dtypes = caps.supported_dtypes;
    if (p.memory_total == 0) p.memory_total = caps.memory_per_device;
    return p;
  }
  /// The runtime. Not checked (see the class comment): only while the runtime lives.
  [[nodiscard]] Runtime<B>& runtime() const noexcept { return *runtime_; }
  /// The backend object. Not checked (see the class comment): only while the runtime lives.
  [[nodiscard]] B& backend() const noexcept { return runtime_->backend(); }
  /// True while the handle names a device of a runtime that is alive; false for a
  /// default-constructed (or moved-from buffer's) handle, and once the runtime has been destroyed.
  [[nodiscard]] bool valid() const noexcept {
    return anchor_->stamp.load(std::memory_order_acquire) == stamp_;  // 2 vs 0 for a handle of no device
  }
  /// Returns if `valid()`.
  /// \throws xdev::error `errc::unavailable` saying why not: the handle names no device, or its
  /// runtime has been destroyed.
  void require_valid() const {
    if (!valid()) [[unlikely]]
      throw_not_alive();
  }
  /// True when both handles belong to the same runtime (a copy between them is possible).
  [[nodiscard]] bool same_runtime(const Device& o) const noexcept {
    return stamp_ != 0 && anchor_ == o.anchor_ && stamp_ == o.stamp_;
  }

  // Memory

  /// Allocates device memory for `count` elements of `T` (contents unspecified).
  /// \throws xdev::error `errc::out_of_memory` naming the device, the request and the limit.
  template <class T>
  [[nodiscard]] Buffer<T, B> allocate(std::size_t count) const {
    if (count > std::size_t(-1) / sizeof(T))
      throw error(errc::out_of_memory, "allocation of " + std::to_string(count) + " elements of " +
                                           std::to_string(sizeof(T)) + " bytes on " + name() + " overflows size_t");
    return Buffer<T, B>(*this, state().allocator.allocate(count * sizeof(T)), count);
  }

  [[nodiscard]] MemoryStats memory_stats() const { return state().allocator.stats(); }
  /// Sets the peak statistic to the bytes in use now.
  void reset_peak_memory_stats() const { state().allocator.reset_peak(); }
  /// Sets (or with `std::nullopt` clears) the bytes this device may have in use.
  void set_memory_limit(std::optional<std::size_t> bytes) const { state().allocator.set_limit(bytes); }
  /// Returns cached free blocks to the backend.
  void release_cached_memory() const { state().allocator.release_cached(); }

  // Random numbers

  /// Restarts the device's default random stream at `seed`, offset 0 (`ops::rng_*` continue it).
  void manual_seed(std::uint64_t seed) const { state().generator.manual_seed(seed); }
  /// The device's default random stream position (seed, and offset in raw 32-bit outputs).
  [[nodiscard]] random::GeneratorState& generator() const { return state().generator; }

  // Execution

  /// The device's default stream: device-level operations below run on it, in order.
  [[nodiscard]] Stream<B> default_stream() const { return Stream<B>(*this, queue()->default_chain()); }
  /// A new stream: in order within itself, free to overlap with other streams.
  [[nodiscard]] Stream<B> make_stream(StreamOptions options = {}) const {
    return Stream<B>(*this, detail::make_chain(options, detail::make_native_queue(*this)));
  }

  /// `default_stream().execute(f, token)`.
  template <class F, class Token = const use_future_t&>
  auto execute(F&& f, Token&& token = use_future) const {
    return default_stream().execute(std::forward<F>(f), std::forward<Token>(token));
  }
  /// `default_stream().copy_to_device(src, dst, token)`.
  template <class T, class Token = const use_future_t&>
  auto copy_to_device(std::span<const T> src, Buffer<T, B>& dst, Token&& token = use_future) const {
    return default_stream().copy_to_device(src, dst, std::forward<Token>(token));
  }
  /// `default_stream().copy_to_host(src, dst, token)`.
  template <class T, class Token = const use_future_t&>
  auto copy_to_host(const Buffer<T, B>& src, std::span<T> dst, Token&& token = use_future) const {
    return default_stream().copy_to_host(src, dst, std::forward<Token>(token));
  }
  /// `default_stream().copy_to_device(src, dst, token)` into a window (`xdev::slice`).
  template <class T, class Token = const use_future_t&>
  requires(!std::is_const_v<T>) auto copy_to_device(std::span<const T> src, const ArrayView<T, B>& dst,
                                                    Token&& token = use_future) const {
    return default_stream().copy_to_device(src, dst, std::forward<Token>(token));
  }
  /// `default_stream().copy_to_host(src, dst, token)` from a window (`xdev::slice`).
  template <class T, class Token = const use_future_t&>
  auto copy_to_host(const ArrayView<T, B>& src, std::span<std::remove_const_t<T>> dst,
                    Token&& token = use_future) const {
    return default_stream().copy_to_host(src, dst, std::forward<Token>(token));
  }
  /// `default_stream().copy(src, dst, token)` between two windows (device→device; `const` or
  /// not, the source may be either).
  template <class S, class T, class Token = const use_future_t&>
  requires(!std::is_const_v<T> &&
           std::is_same_v<std::remove_const_t<S>, T>) auto copy(const ArrayView<S, B>& src, const ArrayView<T, B>& dst,
                                                                Token&& token = use_future) const {
    return default_stream().copy(src, dst, std::forward<Token>(token));
  }
  /// `default_stream().copy(src, dst, token)`.
  template <class T, class Token = const use_future_t&>
  auto copy(const Buffer<T, B>& src, Buffer<T, B>& dst, Token&& token = use_future) const {
    return default_stream().copy(src, dst, std::forward<Token>(token));
  }

  /// Waits for all work submitted to the device, on any stream, to complete; then raises the
  /// oldest error that no future or handler received (work whose future was dropped, a detached
  /// operation, a handler that threw).
  void synchronize() const { queue()->synchronize(); }

  /// The in-flight bound in force: `RuntimeOptions::max_inflight`, else `XDEV_MAX_INFLIGHT`, else
  /// the `MaxInflight` capability.
  [[nodiscard]] std::size_t max_inflight() const { return queue()->throttle().limit(); }
  [[nodiscard]] ExecutionStats execution_stats() const { return queue()->stats(); }
  /// Bytes transferred into and out of this device so far.
  [[nodiscard]] TransferStats transfer_stats() const { return queue()->transfer_stats(); }

  /// The device's execution state (for xdev's own layers).
  [[nodiscard]] const std::shared_ptr<DeviceQueue>& queue() const { return state().queue; }
  /// The device's caching allocator (for xdev's own layers, such as `AnyDevice`).
  [[nodiscard]] DeviceAllocator<B>& allocator() const { return state().allocator; }

  /// A hash combining runtime and ordinal (what `std::hash<Device<B>>` returns; an `AnyDevice`
  /// erasing this device hashes the same).
  [[nodiscard]] std::size_t hash() const noexcept {
    const std::size_t h = std::hash<const void*>{}(runtime_);
    return h ^ (std::hash<std::size_t>{}(ordinal_) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  }

  /// The same device of the same runtime. A handle of a destroyed runtime never equals a handle
  /// of a runtime made later, even at the same address.
  friend bool operator==(const Device& a, const Device& b) noexcept {
    return a.anchor_ == b.anchor_ && a.stamp_ == b.stamp_ && a.ordinal_ == b.ordinal_;
  }
  /// `name()`; "(no device)" or "(device N of a destroyed runtime)" when `!valid()`.
  friend std::ostream& operator<<(std::ostream& os, const Device& d) {
    if (d.valid()) return os << d.name();
    if (d.stamp_ == 0) return os << "(no device)";
    return os << "(device " << d.ordinal_ << " of a destroyed runtime)";
  }

 private:
  template <class T, class B2>
  friend class Buffer;
  friend struct detail::buffer_device<B>;

  [[noreturn, gnu::cold, gnu::noinline]] void throw_not_alive() const {
    if (stamp_ == 0)
      throw error(errc::unavailable, "this xdev::Device<" + std::string(B::name) +
                                         "> names no device (default-constructed, or a moved-from buffer's)");
    throw error(errc::unavailable, "device " + std::to_string(ordinal_) + " of an xdev::Runtime<" +
                                       std::string(B::name) +
                                       "> that has been destroyed: a Device, Buffer, Array or Stream "
                                       "must not be used after its runtime");
  }
  detail::DeviceState<B>& state() const {
    require_valid();
    return runtime_->state(ordinal_);
  }
  // Stream-ordered: the block goes back to the allocator once the work submitted before this
  // call has completed (it may still be using the block). Nothing to do once the runtime is gone:
  // the memory went with its backend.
  void release_memory(typename detail::memory_handle_of<B>::type h, std::size_t bytes) const noexcept {
    if (!valid()) [[unlikely]]
      return;
    auto& st = runtime_->state(ordinal_);
    st.queue->release_after_work([a = &st.allocator, h, bytes] { a->deallocate(h, bytes); });
  }

  Runtime<B>* runtime_ = nullptr;                              // for the unchecked accessors: one load from the handle
  const detail::RuntimeAnchor* anchor_ = &detail::no_runtime;  // whether *runtime_ is still alive
  std::uint32_t ordinal_ = 0;
  std::uint32_t stamp_ = 0;  // the anchor's stamp while the runtime lives (odd); 0: no device
};

namespace detail {

/// Whether a device's backend still takes `destroy_queue`; shared by the runtime and the device's
/// native queues. A queue is often destroyed on a backend's completion thread (the last operation
/// of a dropped stream lets go of it), while another thread may be destroying the runtime: the
/// runtime clears `alive` under `m` before its backend goes, so a `destroy_queue` that has begun
/// ends first, and none begins after.
struct QueueLifeline {
  std::mutex m;
  bool alive = true;  // under m
};

/// A stream's queue on a backend with native queues (`concepts::NativeQueues`). A stream that
/// outlives its runtime leaves the queue to the backend's destructor.
template <class B>
class BackendQueue final : public NativeQueue {
 public:
  explicit BackendQueue(const Device<B>& dev)
      : dev_(dev),
        lifeline_(dev.runtime().state(dev.ordinal()).queue_lifeline),
        q_(dev.backend().create_queue(dev.ordinal())) {}
  ~BackendQueue() override {
    std::lock_guard lk(lifeline_->m);
    if (lifeline_->alive) dev_.backend().destroy_queue(dev_.ordinal(), q_);
  }
  BackendQueue(const BackendQueue&) = delete;
  BackendQueue& operator=(const BackendQueue&) = delete;
  void bind() noexcept override { dev_.backend().bind_queue(dev_.ordinal(), q_); }
  void unbind() noexcept override { dev_.backend().unbind_queue(dev_.ordinal()); }

  [[nodiscard]] bool has_markers() const noexcept override {
    if constexpr (concepts::NativeMarkers<B>) {
      if constexpr (requires(const B& b) {
                      { b.native_markers() } -> std::convertible_to<bool>;
                    })
        return std::as_const(dev_.backend()).native_markers();
      return true;
    }
    return false;
  }
  [[nodiscard]] bool shares_markers_with(const NativeQueue& other) const noexcept override {
    const auto* o = dynamic_cast<const BackendQueue*>(&other);
    return o != nullptr && o->dev_ == dev_ && has_markers();
  }
  std::uint64_t record_marker(Completion done) override {
    if constexpr (concepts::NativeMarkers<B>)
      return to_bits(dev_.backend().record_marker(dev_.ordinal(), std::move(done)));
    else
      return NativeQueue::record_marker(std::move(done));
  }
  void wait_marker(std::uint64_t m) override {
    if constexpr (concepts::NativeMarkers<B>)
      dev_.backend().wait_marker(dev_.ordinal(), from_bits(m));
    else
      NativeQueue::wait_marker(m);
  }
  void release_marker(std::uint64_t m) noexcept override {
    if constexpr (concepts::NativeMarkers<B>) dev_.backend().release_marker(dev_.ordinal(), from_bits(m));
  }

 private:
  template <class H>
  static std::uint64_t to_bits(H h) noexcept {
    if constexpr (std::is_pointer_v<H>)
      return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(h));
    else
      return static_cast<std::uint64_t>(h);
  }
  static auto from_bits(std::uint64_t m) noexcept {
    using H = typename B::marker_handle;
    if constexpr (std::is_pointer_v<H>)
      return reinterpret_cast<H>(static_cast<std::uintptr_t>(m));
    else
      return static_cast<H>(m);
  }

  Device<B> dev_;
  std::shared_ptr<QueueLifeline> lifeline_;
  typename B::queue_handle q_;
};

/// A new native queue on `dev` for a stream, or null for a backend without them (or one that
/// declines them at run time through `native_queues()`).
template <class B>
std::unique_ptr<NativeQueue> make_native_queue(const Device<B>& dev) {
  if constexpr (concepts::NativeQueues<B>) {
    dev.require_valid();
    if constexpr (requires(const B& b) {
                    { b.native_queues() } -> std::convertible_to<bool>;
                  }) {
      if (!dev.backend().native_queues()) return nullptr;
    }
    return std::make_unique<BackendQueue<B>>(dev);
  } else {
    (void)dev;
    return nullptr;
  }
}

}  // namespace detail

/// The capabilities in force on `dev`: its backend's `runtime_capabilities()` when it has that hook,
/// else `Device<B>::capability_set`. What ops, the runtime and an erased `AnyDevice` go by.
///
///     if (xdev::capabilities_of(dev).supports(xdev::DType::f64)) ...
/// \throws xdev::error `errc::unavailable` for a backend that describes itself at run time, once
/// `dev`'s runtime has been destroyed.
template <class B>
[[nodiscard]] CapabilitySet capabilities_of(const Device<B>& dev) noexcept(!concepts::HasRuntimeCapabilities<B>) {
  if constexpr (concepts::HasRuntimeCapabilities<B>) {
    dev.require_valid();
    return dev.backend().runtime_capabilities();
  } else {
    (void)dev;
    return Device<B>::capability_set;
  }
}

/// `Device<B>` is a device handle (`concepts::DeviceHandle`): ops and streams take it as a queue.
template <class B>
inline constexpr bool enable_device_handle<Device<B>> = true;

}  // namespace xdev

template <class B>
struct std::hash<xdev::Device<B>> {
  std::size_t operator()(const xdev::Device<B>& d) const noexcept { return d.hash(); }
};
