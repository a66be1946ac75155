/// \file
/// `xdev::Event`: a point in a stream that the host or another stream can wait for.
#pragma once

#include <xdev/core/detail/unique_function.hpp>
#include <xdev/core/error.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xdev {

namespace detail {

struct EventState {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  bool recorded = false;                       // made by a stream's record(), not default-constructed
  std::uint64_t tool_id = 0;                   // the point as profiler hooks name it (0: none), set at record
  std::chrono::steady_clock::time_point when;  // when `set` ran (under `m`, once `done`)
  std::vector<unique_function<void()>> callbacks;
  // While pending: the native marker the recording stream's queue put at this point, if any
  // (`concepts::NativeMarkers`), and how to let go of it once the event is ready.
  const void* marker_queue = nullptr;
  std::uint64_t marker = 0;
  unique_function<void()> release_marker;

  // `reached`: when the device reached the point, if its backend said; else now.
  void set(std::optional<std::chrono::steady_clock::time_point> reached = std::nullopt) {
    std::vector<unique_function<void()>> run;
    unique_function<void()> release;
    const auto now = reached ? *reached : std::chrono::steady_clock::now();  // before the lock: the point, not the wait
    {
      std::lock_guard lk(m);
      when = now;
      done = true;
      run.swap(callbacks);
      release = std::move(release_marker);
      marker_queue = nullptr;
      cv.notify_all();
    }
    // Nobody uses the marker after this: a waiter looks at it only under the lock, while pending.
    if (release) release();
    for (auto& f : run) f();
  }

  // Keeps the marker `queue` recorded for this point until the event is set (at once if it is).
  void attach_marker(const void* queue, std::uint64_t handle, unique_function<void()> release) {
    {
      std::lock_guard lk(m);
      if (!done) {
        marker_queue = queue;
        marker = handle;
        release_marker = std::move(release);
        return;
      }
    }
    release();
  }

  enum class marker_wait { ready, waited, unavailable };
  // For a stream that waits for this point: `ready` when the event is set; `waited` when a
  // marker is attached and `wait(marker_queue, marker)`, called under the lock (so the marker
  // cannot be released meanwhile), took it; else `unavailable`.
  template <class Wait>
  marker_wait wait_on_marker(Wait&& wait) {
    std::lock_guard lk(m);
    if (done) return marker_wait::ready;
    if (marker_queue != nullptr && wait(marker_queue, marker)) return marker_wait::waited;
    return marker_wait::unavailable;
  }

  // When the point was reached; throws when it was not recorded or is not reached yet. `which`
  // names the event in the message.
  std::chrono::steady_clock::time_point time_of(const char* which) {
    std::lock_guard lk(m);
    if (!recorded)
      throw error(errc::invalid_argument,
                  std::string(which) + " was not recorded by a stream (a default-constructed Event has no time)");
    if (!done)
      throw error(
          errc::unavailable,
          std::string(which) + " is not ready yet: wait for both events before asking for the time between them");
    return when;
  }

  // Runs `f` once the event is set: at once when it already is, else on the thread that sets it.
  void on_ready(unique_function<void()> f) {
    {
      std::lock_guard lk(m);
      if (!done) {
        callbacks.push_back(std::move(f));
        return;
      }
    }
    f();
  }
};

}  // namespace detail

/// A point in a stream, made by `Stream::record()`. It becomes ready when every piece of work
/// submitted to that stream before the record has completed. Copies share the same point.
///
///     auto e = producer.record();
///     consumer.wait(e);       // later work on `consumer` starts after `e`
///     e.wait();               // or block the host until it is ready
class Event {
 public:
  /// An event that is already ready (waiting on it returns at once).
  Event() : state_(std::make_shared<detail::EventState>()) { state_->done = true; }

  /// True once the recorded point has been reached.
  [[nodiscard]] bool ready() const {
    std::lock_guard lk(state_->m);
    return state_->done;
  }

  /// Blocks the calling thread until the event is ready.
  void wait() const {
    std::unique_lock lk(state_->m);
    state_->cv.wait(lk, [&] { return state_->done; });
  }

  /// Blocks for at most `timeout`; returns whether the event is ready.
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) const {
    std::unique_lock lk(state_->m);
    return state_->cv.wait_for(lk, timeout, [&] { return state_->done; });
  }

  /// Runs `f` once the event is ready: at once if it is, else on the thread that completes it.
  /// `f` must not throw. For a completion-token form, see `xdev::async_wait` in async/submit.hpp.
  void on_ready(detail::unique_function<void()> f) const { state_->on_ready(std::move(f)); }

  /// Milliseconds from this event's point to `later`'s (negative when `later` was reached first),
  /// as `torch.cuda.Event.elapsed_time` gives them. Both events must come from `Stream::record()`
  /// and be ready. Where the stream's backend reports device times for its markers (OpenCL,
  /// through profiling info: see `report_device_times`), each point's time is when the device
  /// reached it, converted to the host's steady clock. Elsewhere it is the steady clock read when
  /// xdev saw the point reached (the completion of the work before it), which includes the time a
  /// completion takes to reach the host (microseconds on the host backend).
  /// \throws xdev::error `errc::invalid_argument` for an event that was not recorded (a
  ///         default-constructed one); `errc::unavailable` for one that is not ready yet.
  [[nodiscard]] double elapsed_time(const Event& later) const {
    const auto from = state_->time_of("Event::elapsed_time: this event");
    const auto to = later.state_->time_of("Event::elapsed_time: the later event");
    return std::chrono::duration<double, std::milli>(to - from).count();
  }

  friend bool operator==(const Event& a, const Event& b) noexcept { return a.state_ == b.state_; }

  /// For streams: an event that is not yet ready, for a point recorded now.
  static Event pending() {
    auto s = std::make_shared<detail::EventState>();
    s->recorded = true;
    return Event(std::move(s));
  }
  /// For streams: marks the event ready and runs its waiters; `reached` is when the device
  /// reached the point, where its backend reported it (else now).
  void set(std::optional<std::chrono::steady_clock::time_point> reached = std::nullopt) const { state_->set(reached); }
  /// For streams: the shared state (where a native marker of the recording stream is kept).
  [[nodiscard]] detail::EventState& state() const noexcept { return *state_; }

 private:
  explicit Event(std::shared_ptr<detail::EventState> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::EventState> state_;
};

}  // namespace xdev
