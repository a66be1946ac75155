/// \file
/// The chain nodes of `Stream::record()` and `Stream::wait(e)` on a native queue with markers, and
/// what the profiler hooks are told about a record or a wait (async/stream.hpp uses both).
#pragma once

#include <xdev/async/event.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/detail/hooks.hpp>
#include <xdev/core/metrics.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

namespace xdev::detail {

// Native markers (`concepts::NativeMarkers`), on a chain whose queue has them: both nodes are one
// enqueue on the stream's queue, so they neither wait for the work before them on the host nor
// hold back the work after them.

/// What the profiler hooks are told about a stream's record or wait: a span in stream order (see
/// `tools::Category::event_record` and `event_wait`). Inert when made without a queue (nobody
/// listened when the record or wait was called).
class event_activity {
 public:
  event_activity() = default;
  event_activity(tools::Category c, std::shared_ptr<DeviceQueue> q, std::uint64_t stream, std::uint64_t event)
      : q_(std::move(q)), stream_(stream), event_(event), category_(c) {}

  void begin() noexcept {
    if (!q_) return;
    id_ = tools::detail::next_activity_id();
    tools::detail::emit_begin(activity());
  }
  void end(const std::optional<DeviceTimes>& device = std::nullopt) noexcept {
    if (id_ == 0) return;
    static const std::exception_ptr none;
    tools::Activity a = activity();
    if (device) {
      a.device_begin = device->begin;
      a.device_end = device->end;
    }
    tools::detail::emit_end(a, none);
    id_ = 0;
  }

 private:
  [[nodiscard]] tools::Activity activity() const noexcept {
    return tools::Activity{id_,
                           category_,
                           category_ == tools::Category::event_record ? "record" : "wait",
                           q_->name(),
                           stream_,
                           0,
                           {},
                           std::chrono::steady_clock::now(),
                           0,
                           event_,
                           {},
                           {}};
  }

  std::shared_ptr<DeviceQueue> q_;
  std::uint64_t stream_ = 0, event_ = 0, id_ = 0;
  tools::Category category_ = tools::Category::event_record;
};

class event_node : public ChainNode {
 public:
  event_node(Event e, event_activity tool) : event_(std::move(e)), tool_(std::move(tool)) {}
  [[nodiscard]] bool is_operation() const noexcept override { return false; }
  [[nodiscard]] bool queue_ordered() const noexcept override { return true; }

 protected:
  Event event_;
  event_activity tool_;
};

// `Stream::record()`: a marker on the queue; the event is set when the node's turn to be
// delivered comes (after every completion before it, as on the host chain).
class record_node final : public event_node {
 public:
  using event_node::event_node;

 private:
  void launch(Completion done) override {
    tool_.begin();
    NativeQueue* q = chain()->native_queue();
    const std::uint64_t m = q->record_marker(std::move(done));
    event_.state().attach_marker(q, m, [q, m] { q->release_marker(m); });  // the chain outlives the node
  }
  void finish(std::exception_ptr) noexcept override {
    // The point is reached where the device reached its marker, when the backend says when.
    tool_.end(device_times());
    event_.set(device_times() ? std::optional(device_times()->end) : std::nullopt);
  }
};

// `Stream::wait(e)`: a wait on the recording queue's marker when `e` has one this queue can wait
// on; else (another device, a host chain, a record not yet on its queue) the stream is held on
// the host until `e` is ready, as a host chain does.
class wait_node final : public event_node {
 public:
  using event_node::event_node;

 private:
  void launch(Completion done) override {
    tool_.begin();
    NativeQueue* q = chain()->native_queue();
    using W = EventState::marker_wait;
    const W w = event_.state().wait_on_marker([q](const void* source, std::uint64_t m) noexcept {
      if (!q->shares_markers_with(*static_cast<const NativeQueue*>(source))) return false;
      try {
        q->wait_marker(m);
        return true;
      } catch (...) {
        return false;  // the backend could not enqueue the wait: the host holds the stream instead
      }
    });
    if (w == W::unavailable) {
      note_multi_step_launch();  // holds back what follows until `done`
      static metrics::Counter& host = metrics::counter("stream.wait.host");
      host.add(1);
      event_.on_ready([done = std::move(done), tool = std::move(tool_)]() mutable {
        tool.end();
        done(nullptr);
      });
      return;
    }
    if (w == W::waited) {
      static metrics::Counter& native = metrics::counter("stream.wait.native");
      native.add(1);
    }
    tool_.end();
    done(nullptr);
  }
  void finish(std::exception_ptr) noexcept override {}
};

}  // namespace xdev::detail
