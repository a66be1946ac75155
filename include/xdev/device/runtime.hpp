/// \file
/// `xdev::Runtime<B>`: one backend's devices in this process, with their memory and queues.
#pragma once

#include <xdev/async/device_queue.hpp>
#include <xdev/core/detail/environment_hooks.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/log.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/device_range.hpp>
#include <xdev/memory/allocator.hpp>
#include <xdev/random/generator.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev {

/// Options for creating a runtime; each unset member takes the value described.
struct RuntimeOptions {
  /// In-flight bound of every device. Unset: `XDEV_MAX_INFLIGHT`, else the `MaxInflight` capability.
  std::optional<std::size_t> max_inflight = std::nullopt;
  /// Bytes each device may have in use. Unset: the `MemoryPerDevice` capability, if not 0.
  std::optional<std::size_t> memory_limit = std::nullopt;
};

/// How `Runtime::shutdown` ends the work already submitted.
enum class ShutdownMode : unsigned char {
  drain,  ///< every admitted operation runs to its end (what the destructor does)
  abort,  ///< admitted operations that have not started complete with `errc::cancelled`, unrun
};

namespace detail {
template <class B>
struct DeviceState {
  DeviceState(B& backend, std::size_t ordinal, const std::string& name, std::optional<std::size_t> limit,
              std::size_t max_inflight)
      : allocator(backend, ordinal, name, limit), queue(std::make_shared<DeviceQueue>(name, max_inflight)) {}
  DeviceAllocator<B> allocator;
  std::shared_ptr<DeviceQueue> queue;
  random::GeneratorState generator;
  std::shared_ptr<QueueLifeline> queue_lifeline = std::make_shared<QueueLifeline>();  // see BackendQueue
};
}  // namespace detail

/// Owns a backend object and the xdev state of each of its devices (allocator, execution queue).
/// Destroying it finishes all work in flight first. Not copyable or movable: devices point to it.
/// Its handles (`Device`, `Buffer`, `Array`, `Stream`) may outlive it: using one afterwards throws
/// `errc::unavailable` (see `Device`), and a buffer's destructor then does nothing.
///
///     xdev::Runtime<xdev::backends::Host> host({.max_inflight = 8});
///     for (xdev::Device<xdev::backends::Host> d : host.devices()) std::cout << d << '\n';
template <class B>
class Runtime {
  static_assert(check_backend<B>(), "xdev::Runtime<B>: B does not satisfy xdev::concepts::Backend (see above)");

 public:
  /// Creates the backend from `backend_args` and sets up its devices.
  /// \throws xdev::error `errc::invalid_argument` for a malformed `XDEV_MAX_INFLIGHT`,
  /// `XDEV_LOG_LEVEL` or option.
  template <class... Args>
  explicit Runtime(RuntimeOptions options = {}, Args&&... backend_args)
      : backend_(std::forward<Args>(backend_args)...) {
    (void)log::level();  // a malformed XDEV_LOG_LEVEL is an error here, not silence later
    // XDEV_TOOLS_LIBS, then XDEV_TRACE, once per process (see core/detail/environment_hooks.hpp)
    tools::detail::load_environment_libraries();
    trace::detail::start_environment_trace();
    const CapabilitySet caps = detail::backend_capabilities(backend_);
    const std::size_t inflight = resolve_max_inflight(options, caps);
    std::optional<std::size_t> limit = options.memory_limit;
    if (!limit && caps.memory_per_device != 0) limit = caps.memory_per_device;
    const std::size_t n = backend_.device_count();
    if (n > std::uint32_t(-1))
      throw error(errc::invalid_argument, "backend " + std::string(name()) + " reports " + std::to_string(n) +
                                              " devices; xdev handles at most 2^32 - 1");
    states_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      states_.push_back(
          std::make_unique<detail::DeviceState<B>>(backend_, i, Device<B>(*this, i).name(), limit, inflight));
      // A backend with native queues runs the default stream on one of them too.
      if (auto q = detail::make_native_queue(Device<B>(*this, i)))
        states_.back()->queue->set_default_chain(detail::make_chain({}, std::move(q)));
    }
  }
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  ~Runtime() {
    shutdown();
    // A default stream on a native queue must let go of it while the backend is alive (the
    // device's queue object may be held a little longer, by an erased device's identity).
    for (auto& s : states_)
      if (s->queue->default_chain()->native()) s->queue->set_default_chain(std::make_shared<detail::OpChain>());
    // A stream's queue may still be let go of on a completion thread (its last operation has been
    // delivered, the chain not yet dropped): that ends before the backend goes, later ones skip it.
    for (auto& s : states_) {
      const std::lock_guard lk(s->queue_lifeline->m);
      s->queue_lifeline->alive = false;
    }
  }

  [[nodiscard]] B& backend() noexcept { return backend_; }
  [[nodiscard]] std::size_t device_count() const noexcept { return states_.size(); }

  /// The device type's name: the backend's `runtime_name()` when it has one, else `B::name`.
  [[nodiscard]] std::string_view name() const noexcept { return detail::backend_name(backend_); }

  /// Device `ordinal`.
  /// \throws xdev::error `errc::not_found` naming the device and how many exist.
  [[nodiscard]] Device<B> device(std::size_t ordinal) {
    if (ordinal >= states_.size())
      throw error(errc::not_found, "device " + std::string(name()) + ':' + std::to_string(ordinal) +
                                       " does not exist; " + std::string(name()) + " has " +
                                       std::to_string(states_.size()) + " device(s)");
    return Device<B>(*this, ordinal);
  }

  /// Every device, as a random-access view of `Device<B>` in ordinal order (range-v3 and
  /// `std::views` pipelines take it).
  [[nodiscard]] DeviceRange<B> devices() noexcept { return DeviceRange<B>(*this, states_.size()); }

  /// Waits for all work on every device, then raises the oldest unobserved error of any device.
  void synchronize() {
    for (auto& s : states_) s->queue->throttle().wait_idle();
    for (auto& s : states_) s->queue->synchronize();
  }

  /// Stops accepting work (later submissions fail with `errc::unavailable`) and waits for all work
  /// in flight to complete. Idempotent; the destructor calls it.
  void shutdown() {
    for (auto& s : states_) s->queue->close();
  }

  /// Stops accepting work on every device (later submissions fail with `errc::unavailable`), ends
  /// the work already admitted as `mode` says, and waits up to `timeout` until every operation has
  /// completed and its handler has run. With `ShutdownMode::abort`, an operation that has not
  /// started (queued behind others on its stream, or waiting for an in-flight slot) completes with
  /// `errc::cancelled` when its turn comes, without running: its future, callback or coroutine
  /// sees the error. What a backend has already been handed (the operation running now, or work
  /// in a native queue: OpenCL, CUDA) cannot be taken back and is waited for.
  ///
  ///     rt.shutdown(xdev::ShutdownMode::abort, std::chrono::seconds(2));
  ///
  /// Idempotent; a later abort also cancels what a drain would still run.
  /// \throws xdev::error `errc::deadline_exceeded`, naming each device with work still running
  /// after `timeout`. That work goes on; the runtime's destructor waits for it.
  void shutdown(ShutdownMode mode, std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max()) {
    const auto now = std::chrono::steady_clock::now();
    const auto deadline = timeout >= std::chrono::steady_clock::time_point::max() - now
                              ? std::chrono::steady_clock::time_point::max()
                              : now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
    for (auto& s : states_) s->queue->refuse(mode == ShutdownMode::abort);  // every device stops first
    std::string late;
    for (auto& s : states_) {
      if (s->queue->wait_closed_until(deadline)) continue;
      late += (late.empty() ? "" : ", ") + s->queue->name() + " (" + std::to_string(s->queue->throttle().in_flight()) +
              " operation(s) in flight)";
    }
    if (!late.empty())
      throw error(errc::deadline_exceeded,
                  "shutdown(" + std::string(mode == ShutdownMode::abort ? "abort" : "drain") + "): after " +
                      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) +
                      " ms, work is still running on " + late + "; the runtime's destructor waits for it");
  }

  /// The state behind device `ordinal` (for `Device`).
  [[nodiscard]] detail::DeviceState<B>& state(std::size_t ordinal) { return *states_[ordinal]; }
  /// What tells this runtime's handles that it is alive (for `Device`).
  [[nodiscard]] const detail::RuntimeAnchorLease& anchor() const noexcept { return anchor_; }

 private:
  std::size_t resolve_max_inflight(const RuntimeOptions& o, const CapabilitySet& caps) const {
    constexpr std::size_t max_accepted = std::size_t{1} << 20;
    if (o.max_inflight) {
      if (*o.max_inflight < 1 || *o.max_inflight > max_accepted)
        throw error(errc::invalid_argument, "RuntimeOptions::max_inflight=" + std::to_string(*o.max_inflight) +
                                                " is not in [1, " + std::to_string(max_accepted) + "]");
      return *o.max_inflight;
    }
    if (auto env = getenv_count("XDEV_MAX_INFLIGHT", 1, max_accepted)) return *env;
    // A static MaxInflight<N> is checked at compile time; a run-time one only here.
    if (concepts::HasRuntimeCapabilities<B> && (caps.max_inflight < 1 || caps.max_inflight > max_accepted))
      throw error(errc::invalid_argument, "the capabilities of backend " + std::string(name()) +
                                              " give max_inflight=" + std::to_string(caps.max_inflight) +
                                              ", which is not in [1, " + std::to_string(max_accepted) + "]");
    return caps.max_inflight;
  }

  detail::RuntimeAnchorLease anchor_;  // let go of last: handles see the runtime alive until then
  B backend_;                          // destroyed after every device state has released its memory
  std::vector<std::unique_ptr<detail::DeviceState<B>>> states_;
};

/// The process-wide runtime of backend `B`, created with default options on first use and
/// destroyed (after finishing its work) at exit.
template <class B>
Runtime<B>& default_runtime() {
  static Runtime<B> instance;
  return instance;
}

}  // namespace xdev
