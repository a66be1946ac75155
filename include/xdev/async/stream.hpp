/// \file
/// `xdev::Stream<B>`: in-order execution on one device; work on different streams may overlap.
#pragma once

#include <xdev/async/detail/event_nodes.hpp>
#include <xdev/async/detail/join.hpp>
#include <xdev/async/event.hpp>
#include <xdev/async/queue.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/backend/detail/strided_copy.hpp>
#include <xdev/core/error.hpp>
#include <xdev/fwd.hpp>
#include <xdev/memory/detail/view_layout.hpp>

#include <cstddef>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace xdev {

/// What a failed operation does to the operations after it on the same stream.
enum class ErrorPolicy {
  /// Each operation reports its own outcome; later work runs as usual (the default).
  isolate,
  /// The first failure poisons the stream: every later operation fails at once with that same
  /// error (its type and message, which name the device and the operation) instead of running on
  /// what the failed one left behind, as PJRT's error buffers do. Markers (events) still complete.
  /// `Stream::clear_error()` lets work run again.
  poison,
};

/// Options for `make_stream`.
struct StreamOptions {
  ErrorPolicy on_error = ErrorPolicy::isolate;
};

namespace detail {

/// A chain for a new stream: on `queue` when the backend gave one (see `concepts::NativeQueues`),
/// else on the host.
inline std::shared_ptr<OpChain> make_chain(const StreamOptions& o, std::unique_ptr<NativeQueue> queue = nullptr) {
  auto chain = queue ? std::make_shared<OpChain>(std::move(queue)) : std::make_shared<OpChain>();
  chain->set_poison_on_error(o.on_error == ErrorPolicy::poison);
  return chain;
}

/// What `Stream<B>` and `AnyStream` share: one chain of one device queue, with its ordering
/// markers and its submission. The device-specific parts (how a copy or a host task reaches the
/// backend) stay in the two stream classes.
class StreamCore {
 public:
  /// An event that becomes ready when all work submitted to this stream so far has completed.
  /// On a native queue with markers (`concepts::NativeMarkers`) the event also carries the
  /// queue's marker, which other streams of the device wait on without the host.
  [[nodiscard]] Event record() const {
    refuse_in_capture("record()");
    return record_point(tools::active());
  }

  /// Work submitted to this stream after this call starts only once `e` is ready. When this
  /// stream and the one that recorded `e` are native queues of one device with markers, the
  /// device orders them (the metric `stream.wait.native` counts these waits); otherwise the
  /// stream is held on the host until `e` is ready (`stream.wait.host` where a native queue had to).
  void wait(const Event& e) const {
    if (CaptureSink* sink = capturing(chain_.get())) {  // a graph step: wait for `e` at each replay
      sink->record([e](Completion done) {
        note_multi_step_launch();  // held on the host: later steps wait for it even on a native queue
        e.on_ready([done = std::move(done)]() mutable { done(nullptr); });
      });
      return;
    }
    event_activity tool;
    if (tools::active()) tool = event_activity(tools::Category::event_wait, queue_, chain_->id(), e.state().tool_id);
    if (markers_in_use()) {
      enqueue_node(*queue_, chain_, new wait_node(e, std::move(tool)));
      return;
    }
    enqueue_marker(*queue_, chain_, [e, tool = std::move(tool)](Completion done) mutable {
      tool.begin();
      e.on_ready([done = std::move(done), tool = std::move(tool)]() mutable {
        tool.end();
        done(nullptr);
      });
    });
  }

  /// Blocks until everything submitted to this stream before the call has completed and its
  /// completion handlers have run, then raises the oldest error the device kept (as
  /// `Device::synchronize()` does). Work on other streams may still be running.
  void synchronize() const {
    refuse_in_capture("synchronize()");
    tools::detail::within_activity(tools::Category::synchronize, "Stream::synchronize", queue_->name(), chain_->id(),
                                   [&] {
                                     record_point(false).wait();
                                     if (running_handlers_of(queue_.get()) == 0) chain_->handlers().wait();
                                     queue_->raise_kept_error();
                                   });
  }

  /// With `ErrorPolicy::poison`: the error that poisoned the stream, or null.
  [[nodiscard]] std::exception_ptr sticky_error() const { return chain_->poison(); }
  /// With `ErrorPolicy::poison`: forgets the error, so that operations submitted from now on run.
  /// (Operations already queued behind the failure may still fail with it.)
  void clear_error() const { chain_->clear_poison(); }
  /// Whether the stream runs on a native in-order queue of its backend (`concepts::NativeQueues`):
  /// its operations are handed to the device without waiting for the ones before them.
  [[nodiscard]] bool uses_native_queue() const noexcept { return chain_->native(); }
  /// Whether that queue also has native markers (`concepts::NativeMarkers`): events recorded on
  /// it are waited for by the device, not the host, on the device's other streams.
  [[nodiscard]] bool has_markers() const noexcept {
    return chain_->native_queue() != nullptr && chain_->native_queue()->has_markers();
  }

  /// The policy the stream was made with.
  [[nodiscard]] ErrorPolicy error_policy() const noexcept {
    return chain_->poisons_on_error() ? ErrorPolicy::poison : ErrorPolicy::isolate;
  }

  /// Submits an operation built by an op implementation: `launch(Completion)` starts it on the
  /// backend and, for a non-void `R`, fills `slot->value` before completing. Used by `xdev::ops`;
  /// takes an in-flight slot and keeps stream order like every other operation.
  template <class R, class Launch, class Token>
  auto submit(std::shared_ptr<result_slot<R>> slot, Launch&& launch, Token&& token) const {
    return detail::submit<R>(queue_, chain_, std::move(slot), std::forward<Launch>(launch), std::forward<Token>(token));
  }

 protected:
  // The stream's chain (graph capture records what is submitted to it).
  friend const std::shared_ptr<OpChain>& chain_of(const StreamCore& s) noexcept { return s.chain_; }

  void refuse_in_capture(const char* what) const {
    if (capturing(chain_.get()) != nullptr)
      throw error(errc::invalid_argument, std::string("capture: ") + what +
                                              " on a stream being captured: only work is recorded; call it before "
                                              "or after the capture");
  }

  // record(), told to the profiler hooks when `reported` (a synchronize's own record is not).
  [[nodiscard]] Event record_point(bool reported) const {
    Event e = Event::pending();
    event_activity tool;
    if (reported) {
      e.state().tool_id = tools::detail::next_activity_id();
      tool = event_activity(tools::Category::event_record, queue_, chain_->id(), e.state().tool_id);
    }
    if (markers_in_use()) {
      enqueue_node(*queue_, chain_, new record_node(e, std::move(tool)));
      return e;
    }
    enqueue_marker(*queue_, chain_, [e, tool = std::move(tool)](Completion done) mutable {
      tool.begin();  // the point is reached now: a span of no length
      tool.end();
      e.set();
      done(nullptr);
    });
    return e;
  }

  // The device's markers, while it takes work. Once it is shut down (or its runtime destroyed:
  // a stream may outlive it) nothing runs any more, and the host marker, which touches no
  // backend, gives the same answer.
  [[nodiscard]] bool markers_in_use() const noexcept { return has_markers() && !queue_->closed(); }

  StreamCore(std::shared_ptr<DeviceQueue> queue, std::shared_ptr<OpChain> chain)
      : queue_(std::move(queue)), chain_(std::move(chain)) {}

  static void check_sizes(const char* op, std::size_t src, std::size_t dst) {
    if (src != dst)
      throw error(errc::invalid_argument, std::string(op) + ": source has " + std::to_string(src) +
                                              " elements but destination has " + std::to_string(dst));
  }

  std::shared_ptr<DeviceQueue> queue_;
  std::shared_ptr<OpChain> chain_;
};

}  // namespace detail

/// An in-order queue of work on one device: each operation starts after the one submitted before
/// it has completed. Operations on different streams of a device may run at the same time. All
/// streams of a device share its in-flight bound. Copies share the same queue.
///
/// Every operation returns at once through a completion token: `xdev::use_future` (the default),
/// a callback `void(std::exception_ptr[, T])`, `asio::use_awaitable`, `asio::deferred`, ...
/// Memory passed by span or buffer must stay valid until the operation completes.
template <class B>
class Stream : public detail::StreamCore {
 public:
  using backend_type = B;

  Stream(Device<B> device, std::shared_ptr<detail::OpChain> chain)
      : StreamCore(device.queue(), std::move(chain)), device_(device) {}

  [[nodiscard]] const Device<B>& device() const noexcept { return device_; }

  /// Runs `f()` on the device after the work before it; completes with its result
  /// (signature `void(std::exception_ptr, R)`, or `void(std::exception_ptr)` when `f` returns void).
  /// An exception thrown by `f` reaches the token with its type and message.
  template <class F, class Token = const use_future_t&>
  auto execute(F&& f, Token&& token = use_future) const {
    using R = std::invoke_result_t<std::decay_t<F>&>;
    static_assert(std::is_void_v<R> || std::is_default_constructible_v<R>,
                  "xdev::Stream::execute: the result of f must be void or default-constructible");
    // Void work needs no result slot: one allocation less on the hottest path.
    std::shared_ptr<detail::result_slot<R>> slot;
    if constexpr (!std::is_void_v<R>) slot = std::make_shared<detail::result_slot<R>>();
    auto launch = [dev = device_, slot, f = std::forward<F>(f)](Completion done) mutable {
      dev.backend().execute(dev.ordinal(), HostTask([slot, f = std::move(f)]() mutable {
                              detail::async_scope scope;
                              if constexpr (std::is_void_v<R>)
                                f();
                              else
                                slot->value.emplace(f());
                            }),
                            std::move(done));
    };
    return detail::submit<R>(
        queue_, chain_, std::move(slot),
        detail::queue_ordered(std::move(launch), detail::activity_tag{tools::Category::host_task, "execute"}),
        std::forward<Token>(token));
  }

  /// Copies `src` from host memory into `dst` (host→device). Sizes must match.
  /// \throws xdev::error `errc::invalid_argument` when they differ or `dst` is not on this stream's device.
  template <class T, class Token = const use_future_t&>
  auto copy_to_device(std::span<const T> src, Buffer<T, B>& dst, Token&& token = use_future) const {
    check_same_device(dst.device(), "copy_to_device: destination");
    check_sizes("copy_to_device", src.size(), dst.size());
    auto launch = [dev = device_, src = src.data(), h = dst.native_handle(), n = dst.size_bytes()](Completion done) {
      dev.queue()->note_transfer(TransferDirection::from_host, n);
      dev.backend().copy_to_device(dev.ordinal(), src, h, 0, n, std::move(done));
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
  auto copy_to_host(const Buffer<T, B>& src, std::span<T> dst, Token&& token = use_future) const {
    check_same_device(src.device(), "copy_to_host: source");
    check_sizes("copy_to_host", src.size(), dst.size());
    auto launch = [dev = device_, h = src.native_handle(), dst = dst.data(), n = src.size_bytes()](Completion done) {
      dev.queue()->note_transfer(TransferDirection::to_host, n);
      dev.backend().copy_to_host(dev.ordinal(), h, 0, dst, n, std::move(done));
    };
    return detail::submit<void>(
        queue_, chain_, nullptr,
        detail::queue_ordered(std::move(launch), detail::activity_tag{tools::Category::transfer, "copy_to_host",
                                                                      nullptr, src.size_bytes()}),
        std::forward<Token>(token));
  }

  /// Copies the elements of the window `src` (an `ArrayView`, see `xdev::slice`) into host memory
  /// `dst`, densely in the view's row-major order: one backend transfer for a contiguous view; for
  /// a strided one, one call per strided region when the backend has `concepts::StridedTransfers`,
  /// else one transfer per contiguous run. Sizes must match.
  /// \throws xdev::error `errc::invalid_argument` when they differ or `src` is not on this stream's device.
  template <class T, class Token = const use_future_t&>
  auto copy_to_host(const ArrayView<T, B>& src, std::span<std::remove_const_t<T>> dst,
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
            dev.backend().copy_to_host(dev.ordinal(), h, at, dst + host, bytes, std::move(part));
          },
          [&](const StridedRegion& r, std::size_t host, Completion part) {
            detail::copy_region_to_host(dev.backend(), dev.ordinal(), h, r, dst + host, std::move(part));
          },
          std::move(done));
    };
    return detail::submit<void>(
        queue_, chain_, nullptr,
        detail::queue_ordered(std::move(launch), detail::activity_tag{tools::Category::transfer, "copy_to_host",
                                                                      nullptr, src.size_bytes()}),
        std::forward<Token>(token));
  }

  /// Copies host memory `src` into the window `dst` (host→device): `src` is dense, in the view's
  /// row-major order; backend transfers as `copy_to_host` of a view. Sizes must match.
  /// \throws xdev::error `errc::invalid_argument` when they differ or `dst` is not on this stream's device.
  template <class T, class Token = const use_future_t&>
  requires(!std::is_const_v<T>) auto copy_to_device(std::span<const T> src, const ArrayView<T, B>& dst,
                                                    Token&& token = use_future) const {
    check_same_device(dst.device(), "copy_to_device: destination");
    check_sizes("copy_to_device", src.size(), dst.size());
    auto launch = [dev = device_, src = reinterpret_cast<const std::byte*>(src.data()), h = dst.native_handle(),
                   layout = dst.layout()](Completion done) {
      dev.queue()->note_transfer(TransferDirection::from_host, layout.numel() * sizeof(T));
      detail::start_view_transfer(
          layout, sizeof(T),
          [&](std::size_t at, std::size_t host, std::size_t bytes, Completion part) {
            dev.backend().copy_to_device(dev.ordinal(), src + host, h, at, bytes, std::move(part));
          },
          [&](const StridedRegion& r, std::size_t host, Completion part) {
            detail::copy_region_to_device(dev.backend(), dev.ordinal(), src + host, h, r, std::move(part));
          },
          std::move(done));
    };
    return detail::submit<void>(
        queue_, chain_, nullptr,
        detail::queue_ordered(std::move(launch), detail::activity_tag{tools::Category::transfer, "copy_to_device",
                                                                      nullptr, dst.size_bytes()}),
        std::forward<Token>(token));
  }

  /// Copies `src` into `dst` (device→device); either may be on another device of the same runtime,
  /// but one of them must be on this stream's device. Sizes must match.
  template <class T, class Token = const use_future_t&>
  auto copy(const Buffer<T, B>& src, Buffer<T, B>& dst, Token&& token = use_future) const {
    check_copy_devices(src.device(), dst.device());
    check_sizes("copy", src.size(), dst.size());
    auto launch = [dev = device_, sq = src.device().queue(), s = src.device().ordinal(), sh = src.native_handle(),
                   dq = dst.device().queue(), d = dst.device().ordinal(), dh = dst.native_handle(),
                   n = src.size_bytes()](Completion done) {
      detail::note_copy(*sq, *dq, n);
      dev.backend().copy_between(s, sh, 0, d, dh, 0, n, std::move(done));
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

  /// Copies the window `src` into the window `dst` (device→device), element by element in
  /// row-major order: one backend transfer when both are contiguous; else one call per pair of
  /// strided regions when the backend has `concepts::StridedCopies`, one transfer per row without. Shapes must be
  /// equal; either may be on another device of the same runtime, but one of them must be on this stream's device;
  /// windows onto one array must not share an element. The source may be a window of a `const` array. \throws
  /// xdev::error `errc::invalid_argument` for any of these.
  template <class S, class T, class Token = const use_future_t&>
  requires(!std::is_const_v<T> &&
           std::is_same_v<std::remove_const_t<S>, T>) auto copy(const ArrayView<S, B>& src, const ArrayView<T, B>& dst,
                                                                Token&& token = use_future) const {
    const Device<B>& sd = src.device();
    const Device<B>& dd = dst.device();
    check_copy_devices(sd, dd);
    detail::check_view_copy(src.layout(), dst.layout(), sd == dd && src.native_handle() == dst.native_handle());
    auto launch = [dev = device_, sq = sd.queue(), s = sd.ordinal(), sh = src.native_handle(), sl = src.layout(),
                   dq = dd.queue(), d = dd.ordinal(), dh = dst.native_handle(), dl = dst.layout()](Completion done) {
      detail::note_copy(*sq, *dq, sl.numel() * sizeof(T));
      detail::start_view_copy(
          sl, dl, sizeof(T),
          [&](std::size_t from, std::size_t to, std::size_t bytes, Completion part) {
            dev.backend().copy_between(s, sh, from, d, dh, to, bytes, std::move(part));
          },
          [&](const StridedRegion& from, const StridedRegion& to, Completion part) {
            detail::copy_region_between(dev.backend(), s, sh, from, d, dh, to, std::move(part));
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
  friend bool operator==(const Stream& a, const Stream& b) noexcept { return a.chain_ == b.chain_; }

 private:
  void check_copy_devices(const Device<B>& src, const Device<B>& dst) const {
    if (src != device_ && dst != device_)
      throw error(errc::invalid_argument, "copy: neither source (" + src.name() + ") nor destination (" + dst.name() +
                                              ") is on this stream's device " + device_.name());
    if (!src.same_runtime(dst))
      throw error(errc::invalid_argument, "copy: source and destination belong to different runtimes");
  }
  void check_same_device(const Device<B>& d, const char* what) const {
    if (d != device_)
      throw error(errc::invalid_argument,
                  std::string(what) + " buffer is on " + d.name() + ", not on this stream's device " + device_.name());
  }

  Device<B> device_;
};

/// `Stream<B>` is a stream handle (`concepts::Queue`).
template <class B>
inline constexpr bool enable_stream_handle<Stream<B>> = true;

}  // namespace xdev
