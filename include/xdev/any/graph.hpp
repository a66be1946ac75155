/// \file
/// Graph capture and replay (CUDA graphs through `torch.cuda.graphs`, SYCL's `command_graph`): a
/// fixed sequence of work on one stream, recorded once and submitted again as one unit.
///
///     xdev::Graph step = xdev::capture(stream, [&] {
///       stream.copy_to_device(std::span<const float>(batch), x.buffer());
///       xdev::ops::gemm(stream, x, w, y);
///       xdev::ops::scale(stream, y, 0.5F);
///     });
///     for (...) step.replay().get();    // one in-flight slot, one completion, no per-op overhead
///
/// While `capture` runs its body, what the calling thread submits to `stream` (transfers, ops,
/// host tasks, user kernels, waits for events recorded elsewhere) is recorded, not run, and each
/// token completes at once. `replay` submits the recorded work as one operation: it takes one
/// in-flight slot and completes once, after its last step. On a stream with a native in-order
/// queue (OpenCL) the steps are handed to the queue back to back, with no host round trip between
/// them; elsewhere each starts when the one before it has completed. A failing step ends the
/// replay with its error (steps already handed to a native queue still run).
///
/// Memory: the captured work refers to the arrays and host memory it was given, which must stay
/// alive while the graph is replayed. To replay on other memory, pass `GraphBindings`: each binding
/// maps a buffer (or host range) used at capture to one of the same size used instead.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/detail/capture.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/error.hpp>

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev {

class Graph;

/// What a replay uses instead of the memory the captured work used (see the file comment).
class GraphBindings {
 public:
  /// Replays with `now` wherever the captured work used `captured` (same device, same size).
  /// \throws xdev::error `errc::invalid_argument` naming the mismatch.
  template <class T>
  GraphBindings& buffer(const AnyBuffer<T>& captured, const AnyBuffer<T>& now) {
    if (captured.empty() || now.empty()) throw error(errc::invalid_argument, "GraphBindings: an empty buffer");
    if (!(captured.device() == now.device()))
      throw error(errc::invalid_argument,
                  "GraphBindings: a buffer of " + captured.device().name() + " bound to one of " + now.device().name());
    if (captured.size() != now.size())
      throw error(errc::invalid_argument, "GraphBindings: a buffer of " + std::to_string(captured.size()) +
                                              " elements bound to one of " + std::to_string(now.size()));
    data_.buffers.push_back({captured.native_handle(), now.native_handle()});
    return *this;
  }
  /// As `buffer`, for arrays (of the same shape).
  template <class T>
  GraphBindings& array(const AnyArray<T>& captured, const AnyArray<T>& now) {
    if (captured.shape() != now.shape())
      throw error(errc::invalid_argument, "GraphBindings: arrays of different shapes");
    return buffer(captured.buffer(), now.buffer());
  }
  /// Replays with `now` wherever the captured transfers used host memory in `captured` (same size;
  /// a transfer of part of it uses the same part of `now`).
  template <class T, std::size_t E1, class U, std::size_t E2>
  requires std::is_same_v<std::remove_const_t<T>, U> GraphBindings& host(std::span<T, E1> captured,
                                                                         std::span<U, E2> now) {
    if (captured.size() != now.size())
      throw error(errc::invalid_argument, "GraphBindings: host memory of " + std::to_string(captured.size()) +
                                              " elements bound to " + std::to_string(now.size()));
    if (captured.empty()) throw error(errc::invalid_argument, "GraphBindings: empty host memory");
    data_.host.push_back(
        {static_cast<const void*>(captured.data()), captured.size_bytes(), static_cast<void*>(now.data())});
    return *this;
  }
  [[nodiscard]] bool empty() const noexcept { return data_.buffers.empty() && data_.host.empty(); }

 private:
  friend class Graph;
  detail::GraphBindingsData data_;
};

namespace detail {

// A captured graph: the stream, its recorded steps, and how the stream orders work.
struct GraphState {
  AnyStream stream;
  std::vector<std::function<void(Completion)>> steps;
  NativeQueue* native = nullptr;  // the stream's native queue (kept alive by `stream`), or null
};

// One replay: issues the steps (all at once on a native queue, one after the other elsewhere, and
// after any step whose launch continues from a completion) and completes `done` after the last.
class ReplayRun : public std::enable_shared_from_this<ReplayRun> {
 public:
  ReplayRun(std::shared_ptr<const GraphState> g, std::shared_ptr<const GraphBindingsData> b, Completion done)
      : g_(std::move(g)), bindings_(std::move(b)), done_(std::move(done)) {}

  static void start(std::shared_ptr<const GraphState> g, std::shared_ptr<const GraphBindingsData> b, Completion done) {
    if (g->steps.empty()) return done(nullptr);
    auto run = std::make_shared<ReplayRun>(std::move(g), std::move(b), std::move(done));
    // Returning before every step was issued: the stream's later work waits for the replay.
    if (!run->issue()) note_multi_step_launch();
  }

 private:
  // Issues steps until all are (true), or until one must complete before the next may start
  // (false: its completion resumes).
  bool issue() {
    for (;;) {
      std::size_t k = 0;
      {
        std::unique_lock lk(m_);
        if (error_ || next_ == g_->steps.size()) {
          issued_all_ = true;
          if (outstanding_ == 0 && !finished_) {
            finished_ = true;
            lk.unlock();
            finish();
          }
          return true;
        }
        k = next_++;
        ++outstanding_;
      }
      launch_was_multi_step = false;
      {
        const GraphBindingsScope scope(bindings_.get());
        // Without a native queue the next step may run inline on a backend's own thread (the loop
        // goes on when it completed inside the call).
        const bool inline_welcome = std::exchange(inline_launch_welcome, g_->native == nullptr);
        try {
          std::function<void(Completion)> step = g_->steps[k];  // a copy: a launch consumes what it holds
          step(Completion([self = shared_from_this()](std::exception_ptr ep) { self->step_done(std::move(ep)); }));
        } catch (...) {
          step_done(std::current_exception());
        }
        inline_launch_welcome = inline_welcome;
      }
      const bool multi_step = std::exchange(launch_was_multi_step, false);
      if (g_->native == nullptr || multi_step) {
        std::lock_guard lk(m_);
        if (outstanding_ != 0) {
          waiting_ = true;
          return false;
        }
      }
    }
  }

  void step_done(std::exception_ptr ep) {
    std::unique_lock lk(m_);
    if (ep && !error_) error_ = std::move(ep);
    if (--outstanding_ != 0) return;
    if (waiting_) {
      waiting_ = false;
      lk.unlock();
      if (g_->native != nullptr) g_->native->bind();  // off the stream's starting thread: bind its queue
      issue();
      if (g_->native != nullptr) g_->native->unbind();
      return;
    }
    if (issued_all_ && !finished_) {
      finished_ = true;
      lk.unlock();
      finish();
    }
  }

  void finish() noexcept {
    std::exception_ptr ep;
    {
      std::lock_guard lk(m_);
      ep = error_;
    }
    Completion done = std::move(done_);
    done(std::move(ep));
  }

  std::shared_ptr<const GraphState> g_;
  std::shared_ptr<const GraphBindingsData> bindings_;
  Completion done_;
  std::mutex m_;
  std::size_t next_ = 0;         // the next step to issue
  std::size_t outstanding_ = 0;  // issued and not completed
  bool issued_all_ = false;
  bool waiting_ = false;  // the issuing loop stopped until `outstanding_` reaches 0
  bool finished_ = false;
  std::exception_ptr error_;  // the first step's failure
};

}  // namespace detail

/// Recorded work of one stream, replayed as one unit (see the file comment). Copies share it.
class Graph {
 public:
  Graph() = default;

  /// The number of recorded steps.
  [[nodiscard]] std::size_t size() const noexcept { return state_ ? state_->steps.size() : 0; }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  /// The stream it was captured on, and replays on. \throws xdev::error for a default-constructed graph.
  [[nodiscard]] const AnyStream& stream() const {
    if (!state_) throw error(errc::invalid_argument, "Graph: a default-constructed graph has no stream");
    return state_->stream;
  }

  /// Submits the recorded work to the stream again, as one operation (one in-flight slot, one
  /// completion through `token`).
  template <class Token = const use_future_t&>
  requires(!std::is_same_v<std::remove_cvref_t<Token>, GraphBindings>) auto replay(Token&& token = use_future) const {
    return replay(GraphBindings{}, std::forward<Token>(token));
  }
  /// As above, on the memory `bindings` says instead of the captured memory.
  template <class Token = const use_future_t&>
  auto replay(const GraphBindings& bindings, Token&& token = use_future) const {
    const AnyStream& s = stream();
    auto b = bindings.empty() ? nullptr : std::make_shared<const detail::GraphBindingsData>(bindings.data_);
    return s.template submit<void>(
        nullptr,
        detail::queue_ordered(
            [st = state_, b = std::move(b)](Completion done) { detail::ReplayRun::start(st, b, std::move(done)); },
            detail::activity_tag{tools::Category::op, "graph_replay"}),
        std::forward<Token>(token));
  }

 private:
  template <class F>
  friend Graph capture(const AnyStream& stream, F&& body);
  std::shared_ptr<const detail::GraphState> state_;
};

/// Records what `body()` submits to `stream` from this thread, without running it (see the file
/// comment). Work submitted to other streams, or from other threads, runs as usual.
/// \throws xdev::error `errc::invalid_argument` for a capture inside another capture on this
///         thread, and from inside `body`: an operation with a result (sum, dot, parallel_reduce:
///         a replay would have nowhere to deliver it), `record()` or `synchronize()` on the
///         captured stream. What `body` throws propagates, and nothing is kept.
template <class F>
[[nodiscard]] Graph capture(const AnyStream& stream, F&& body) {
  if (detail::active_capture != nullptr)
    throw error(errc::invalid_argument, "capture: this thread is already capturing a stream");
  if (!stream.device().valid()) throw error(errc::invalid_argument, "capture: the stream names no device");
  detail::CaptureSink sink(chain_of(stream).get());
  {
    detail::active_capture = &sink;
    struct Restore {
      ~Restore() { detail::active_capture = nullptr; }
    } restore;
    std::forward<F>(body)();
  }
  auto state = std::make_shared<detail::GraphState>(detail::GraphState{stream, sink.take(), nullptr});
  if (stream.uses_native_queue()) state->native = chain_of(stream)->native_queue();
  Graph g;
  g.state_ = std::move(state);
  return g;
}

}  // namespace xdev
