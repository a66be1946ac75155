/// \file
/// The submission path every device operation takes: in-flight slot, stream order, completion
/// token. Backend authors never call this; `Device` and `Stream` do.
///
/// This header delivers to xdev's own future (`xdev::use_future`, the default token) without
/// Asio's executor machinery, which every translation unit including it would otherwise compile.
/// Any other completion token (a callback, `asio::detached`, `asio::use_awaitable`, a handler
/// bound to an executor) goes to its associated executor: `<xdev/async/tokens.hpp>` brings that
/// (`<xdev/xdev.hpp>`, AnyDevice and the ops include it). Without it such a token is one compile
/// error that names the header.
#pragma once

#include <xdev/async/detail/capture.hpp>
#include <xdev/async/detail/handler_executor.hpp>
#include <xdev/async/device_queue.hpp>
#include <xdev/async/event.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/detail/hooks.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/metrics.hpp>

#include <boost/asio/async_result.hpp>
#include <boost/asio/detail/thread_context.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace boost::asio::detail {
template <typename, typename...>
class awaitable_handler;
class detached_handler;
}  // namespace boost::asio::detail

namespace xdev {
namespace detail {

inline thread_local int async_depth = 0;

/// Marks the current thread as running xdev work or a completion handler while alive.
struct async_scope {
  async_scope() noexcept { ++async_depth; }
  ~async_scope() { --async_depth; }
  async_scope(const async_scope&) = delete;
  async_scope& operator=(const async_scope&) = delete;
};

/// True on a thread that must not block: one running xdev work or a completion handler, or one
/// running any Asio scheduler (a coroutine's io_context, a thread_pool worker). Submissions from
/// such a thread wait for an in-flight slot asynchronously instead of blocking, which is what
/// keeps nested submission and coroutines free of deadlock.
inline bool in_async_context() noexcept {
  // thread_context is Asio's own record of "this thread is inside run()"; pinned by Boost 1.81.
  return async_depth > 0 || boost::asio::detail::thread_context::top_of_thread_call_stack() != nullptr;
}

inline thread_local int initiating_depth = 0;

/// Marks the current thread as inside an initiating function while alive: an operation that
/// completes before its initiating function returns must not run its handler there (Asio's rule;
/// a coroutine would be resumed inside its own co_await expression).
struct initiating_scope {
  initiating_scope() noexcept { ++initiating_depth; }
  ~initiating_scope() { --initiating_depth; }
  initiating_scope(const initiating_scope&) = delete;
  initiating_scope& operator=(const initiating_scope&) = delete;
};

template <class Handler>
inline constexpr bool is_detached_handler =
    std::is_same_v<std::decay_t<Handler>, boost::asio::detail::detached_handler>;

// The handler of a `use_awaitable` operation (Boost 1.81's name for it, declared as Asio does).
// Asio 1.81 runs an initiation after the coroutine has suspended, and an exception thrown there
// escapes the coroutine to the executor running it (a thread_pool terminates): an initiation must
// give such a handler its error instead of throwing.
template <class Handler>
inline constexpr bool is_awaitable_handler = false;
template <class Executor, class... Ts>
inline constexpr bool is_awaitable_handler<boost::asio::detail::awaitable_handler<Executor, Ts...>> = true;

/// A handler of xdev's own machinery that may run inside the call that started its operation:
/// it declares `using completes_at_once = void;`. Such a handler resumes no user code there (what
/// it reports onwards goes through `deliver` again, with its own rule); running it at once saves
/// a hand-off to another thread (the SPMD driver's step completions).
template <class Handler>
inline constexpr bool completes_at_once = requires {
  typename std::decay_t<Handler>::completes_at_once;
};

// Counts a handler as pending on its device and its stream from when it is handed to its executor
// until it has run or been destroyed unrun (an executor that is torn down with it queued). It
// borrows the device and the stream, which the caller keeps alive while it delivers; `keep` makes
// it own references for a handler that may run after that (one posted to an executor): a handler
// run at once costs no reference counting on lines the submitting thread also writes.
class handler_ticket {
 public:
  /// `chain` may be null: a handler of work that belongs to no single stream.
  handler_ticket(DeviceQueue& q, OpChain* chain) noexcept : q_(&q), chain_(chain) {
    q_->handlers().add();
    if (chain_) chain_->handlers().add();
  }
  handler_ticket(handler_ticket&& o) noexcept
      : q_(std::exchange(o.q_, nullptr)),
        chain_(std::exchange(o.chain_, nullptr)),
        keep_q_(std::move(o.keep_q_)),
        keep_chain_(std::move(o.keep_chain_)) {}
  handler_ticket& operator=(handler_ticket&&) = delete;
  ~handler_ticket() { done(); }
  [[nodiscard]] DeviceQueue& queue() const noexcept { return *q_; }
  /// Keeps the device and the stream alive until `done` (the ones this ticket counts on).
  void keep(std::shared_ptr<DeviceQueue> q, std::shared_ptr<OpChain> chain) noexcept {
    keep_q_ = std::move(q);
    keep_chain_ = std::move(chain);
  }
  void done() noexcept {
    if (!q_) return;
    if (OpChain* c = std::exchange(chain_, nullptr)) c->handlers().remove();
    std::exchange(q_, nullptr)->handlers().remove();
    keep_chain_.reset();
    keep_q_.reset();
  }

 private:
  DeviceQueue* q_;
  OpChain* chain_;
  std::shared_ptr<DeviceQueue> keep_q_;
  std::shared_ptr<OpChain> keep_chain_;
};

// Marks the calling thread as running a completion handler of `q` while alive.
class running_handler_scope {
 public:
  explicit running_handler_scope(const DeviceQueue* q) noexcept
      : saved_queue_(running_handler_queue), saved_depth_(running_handler_depth) {
    running_handler_depth = running_handler_queue == q ? running_handler_depth + 1 : 1;
    running_handler_queue = q;
  }
  ~running_handler_scope() {
    running_handler_queue = saved_queue_;
    running_handler_depth = saved_depth_;
  }
  running_handler_scope(const running_handler_scope&) = delete;
  running_handler_scope& operator=(const running_handler_scope&) = delete;

 private:
  const DeviceQueue* saved_queue_;
  std::size_t saved_depth_;
};

// Calls `h` on its associated executor. Nothing it throws escapes to an executor (Asio's
// thread_pool would terminate): it becomes a kept error of the device instead. The handler is
// pending on its device and stream until it has run, so synchronize() waits for it. `q` and
// `chain` (null for work of no single stream) are the ones `ticket` counts on.
template <class Handler, class... Args>
void deliver(handler_ticket ticket, const std::shared_ptr<DeviceQueue>& q, const std::shared_ptr<OpChain>& chain,
             Handler h, std::exception_ptr ep, Args... args) {
  if constexpr (is_detached_handler<Handler>) {
    if (ep) q->keep_error(ep);
  }
  // Only an error can go unseen (a future dropped unread): a success needs no sink.
  if constexpr (requires { h.set_error_sink(q); }) {
    if (ep) h.set_error_sink(q);
  }
  auto invoke = [](handler_ticket& ticket, Handler& h, std::exception_ptr& ep, Args&... args) {
    {
      async_scope scope;
      running_handler_scope running(&ticket.queue());
      try {
        std::move(h)(std::move(ep), std::move(args)...);
      } catch (...) {
        ticket.queue().keep_error(std::current_exception());
      }
    }
    ticket.done();
  };
  if constexpr (runs_in_place<Handler>) {
    // xdev's future only fulfils a promise: safe at once, even inside its initiating function.
    invoke(ticket, h, ep, args...);
  } else {
    using E = handler_executor<Handler>;
    auto ex = E::get(h);
    // Completed inside its own initiating function: defer the handler. `detached` runs nothing,
    // so it is safe at once (a post would only add a hop through Asio's system thread pool).
    const bool defer = initiating_depth > 0 && !is_detached_handler<Handler> && !completes_at_once<Handler>;
    // The system executor's dispatch runs the function at once, inside this call; anything else
    // may run it later.
    if (!defer && E::dispatches_inline) return invoke(ticket, h, ep, args...);
    ticket.keep(q, chain);
    auto run = [invoke, ticket = std::move(ticket), h = std::move(h), ep = std::move(ep),
                ... args = std::move(args)]() mutable { invoke(ticket, h, ep, args...); };
    if (defer)
      E::post(ex, std::move(run));
    else
      E::dispatch(ex, std::move(run));
  }
}

/// `deliver` for work that belongs to the device as a whole (a collective), not to one stream.
template <class Handler, class... Args>
void deliver(const std::shared_ptr<DeviceQueue>& q, Handler h, std::exception_ptr ep, Args... args) {
  deliver(handler_ticket(*q, nullptr), q, nullptr, std::move(h), std::move(ep), std::move(args)...);
}

// The result slot of work that produces a `T`; `void` work has none.
template <class T>
struct result_slot {
  std::optional<T> value;
};
template <>
struct result_slot<void> {};

template <class T>
struct signature_for {
  using type = void(std::exception_ptr, T);
};
template <>
struct signature_for<void> {
  using type = void(std::exception_ptr);
};

/// What profiler hooks (`xdev::tools`) are told about a submitted piece of work. The strings are
/// static (op and call names). Work without a `name` is not reported.
struct activity_tag {
  tools::Category category = tools::Category::op;
  const char* name = nullptr;
  const char* dtype = nullptr;
  std::uint64_t bytes = 0;
};

// The activity of work on `q`'s device and `chain`'s stream, as the hooks report it.
inline tools::Activity activity_of(const activity_tag& t, std::uint64_t id, const DeviceQueue& q, const OpChain* chain,
                                   const std::optional<DeviceTimes>& device = std::nullopt) noexcept {
  return tools::Activity{id,
                         t.category,
                         t.name,
                         q.name(),
                         chain != nullptr ? chain->id() : 0,
                         t.bytes,
                         t.dtype != nullptr ? std::string_view(t.dtype) : std::string_view(),
                         std::chrono::steady_clock::now(),
                         0,
                         0,
                         device ? device->begin : std::chrono::steady_clock::time_point{},
                         device ? device->end : std::chrono::steady_clock::time_point{}};
}

/// A launch that is one enqueue on the stream's queue (see `ChainNode::queue_ordered`): what the
/// transfers, host tasks and ops of a stream submit. `ordered` false: host ordering after all.
template <class L>
struct ordered_launch {
  L launch;
  bool ordered = true;
  /// The other device of a copy between two devices (kept alive by the launch), whose memory the
  /// work also uses: frees on it are ordered after this work too. Null for work on one device.
  std::shared_ptr<DeviceQueue> peer = nullptr;
  /// What the work is, for profiler hooks.
  activity_tag tag = {};
  void operator()(Completion done) { std::move(launch)(std::move(done)); }
};

template <class L>
ordered_launch<std::decay_t<L>> queue_ordered(L&& launch, bool ordered = true,
                                              std::shared_ptr<DeviceQueue> peer = nullptr, activity_tag tag = {}) {
  return {std::forward<L>(launch), ordered, std::move(peer), tag};
}
/// `queue_ordered` for work that profiler hooks report as `tag`.
template <class L>
ordered_launch<std::decay_t<L>> queue_ordered(L&& launch, activity_tag tag) {
  return {std::forward<L>(launch), true, nullptr, tag};
}

template <class L>
inline constexpr bool is_ordered_launch = false;
template <class L>
inline constexpr bool is_ordered_launch<ordered_launch<L>> = true;

// One submitted operation: the backend launch, the handler with its work guard, the result slot,
// in one allocation.
template <class T, class Launch, class Handler>
class submit_node final : public ChainNode {
 public:
  submit_node(std::shared_ptr<DeviceQueue> q, Launch&& launch, std::shared_ptr<result_slot<T>> slot, Handler&& h)
      : q_(std::move(q)),
        launch_(std::move(launch)),
        slot_(std::move(slot)),
        work_(work_guard_of<Handler>::make(h)),
        h_(std::move(h)),
        epoch_(q_->enter_epoch()) {
    if constexpr (is_ordered_launch<Launch>) {
      if (launch_.peer && launch_.peer != q_) peer_epoch_ = launch_.peer->enter_epoch();
    }
  }
  ~submit_node() override { leave_epoch(); }

  [[nodiscard]] bool queue_ordered() const noexcept override {
    if constexpr (is_ordered_launch<Launch>)
      return launch_.ordered;
    else
      return false;
  }

 private:
  // Memory dropped while this work was pending may be freed once it is over (stream-ordered frees).
  void leave_epoch() noexcept {
    if (in_epoch_) q_->leave_epoch(epoch_);
    in_epoch_ = false;
    if constexpr (is_ordered_launch<Launch>) {
      if (peer_epoch_) launch_.peer->leave_epoch(*peer_epoch_);
      peer_epoch_.reset();
    }
  }

  [[nodiscard]] bool reports_refusal() const noexcept override { return is_awaitable_handler<Handler>; }
  void deliver_refusal(std::exception_ptr ep) noexcept override {
    if constexpr (is_awaitable_handler<Handler>) {
      leave_epoch();
      if constexpr (std::is_void_v<T>)
        deliver(handler_ticket(*q_, chain().get()), q_, chain(), std::move(h_), std::move(ep));
      else
        deliver(handler_ticket(*q_, chain().get()), q_, chain(), std::move(h_), std::move(ep), T{});
      work_.reset();
    } else {
      (void)ep;
    }
  }

  void launch(Completion done) override {
    // Admitted before an abort and not started since: it completes cancelled, without running.
    if (q_->cancels_unstarted()) throw q_->cancelled_error();
    if constexpr (is_ordered_launch<Launch>) {
      if (launch_.tag.name != nullptr && tools::active()) {
        activity_ = tools::detail::next_activity_id();
        tools::detail::emit_begin(activity_of(launch_.tag, activity_, *q_, chain().get()));
      }
    }
    std::move(launch_)(std::move(done));
  }

  // Tells the hooks the work is over (when they were told it began).
  void end_activity(const std::exception_ptr& ep) noexcept {
    if constexpr (is_ordered_launch<Launch>) {
      if (activity_ != 0)
        tools::detail::emit_end(activity_of(launch_.tag, activity_, *q_, chain().get(), device_times()), ep);
    }
  }

  // The work is over: its frees may run (before the slot: whoever sees the device idle sees them
  // done), then its in-flight slot goes back.
  void give_back_slot(DeviceQueue& q) {
    leave_epoch();
    q.throttle().release([this] { return chain_has_operation_queued(); });
  }

  void finish(std::exception_ptr ep) noexcept override {
    DeviceQueue& q = *q_;
    end_activity(ep);
    q.note_completed(ep != nullptr);
    if constexpr (is_detached_handler<Handler>) {
      // No handler to run or wait for: the error, if any, is kept before the slot is given back,
      // so that whoever sees the device idle sees it too.
      if (ep) q.keep_error(std::move(ep));
      give_back_slot(q);
      work_.reset();
      return;
    }
    // The handler counts as pending before the slot is given back, so that nothing waiting for
    // the device sees it idle in between; the slot covers the work only, not the handler.
    handler_ticket ticket(q, chain().get());
    give_back_slot(q);
    if constexpr (std::is_void_v<T>) {
      deliver(std::move(ticket), q_, chain(), std::move(h_), std::move(ep));
    } else {
      T value = (ep || !slot_->value) ? T{} : std::move(*slot_->value);
      deliver(std::move(ticket), q_, chain(), std::move(h_), std::move(ep), std::move(value));
    }
    work_.reset();
  }

  std::shared_ptr<DeviceQueue> q_;
  Launch launch_;
  std::shared_ptr<result_slot<T>> slot_;
  [[no_unique_address]] typename work_guard_of<Handler>::type work_;
  Handler h_;
  std::uint64_t epoch_;
  std::uint64_t activity_ = 0;  // the id profiler hooks were given at launch; 0: none
  bool in_epoch_ = true;
  std::optional<std::uint64_t> peer_epoch_;  // the other device's, for a copy between two devices
};

// The error of a submission the device refused, as an exception_ptr (for a handler).
inline std::exception_ptr refusal_of(const DeviceQueue& q) noexcept {
  try {
    return std::make_exception_ptr(q.shut_down_error());
  } catch (...) {
    return std::current_exception();  // no memory for the message: that is the error then
  }
}

// Queues a node once the throttle lets it through; refuses it if it never does (the device was
// shut down). Small enough for `unique_function`'s inline storage.
struct pending_push {
  DeviceQueue* q;  // null for a marker, which is not counted as submitted work
  ChainNode* node;
  pending_push(DeviceQueue* queue, ChainNode* n) noexcept : q(queue), node(n) {}
  pending_push(pending_push&& o) noexcept : q(o.q), node(std::exchange(o.node, nullptr)) {}
  pending_push& operator=(pending_push&&) = delete;
  ~pending_push() {
    if (node) node->refuse(q != nullptr && node->reports_refusal() ? refusal_of(*q) : nullptr);
  }
  void operator()() {
    if (q) q->note_submitted();
    std::exchange(node, nullptr)->push();
  }
};

// Admits `node` (already built, holding its handler, bound to its chain): takes an in-flight slot
// (blocking, or asynchronously from a thread that must not block), then queues it.
// `reports`: the node's `reports_refusal()`, known where it was made.
inline void admit(const std::shared_ptr<DeviceQueue>& q, ChainNode* node, bool reports) {
  // The throttle refuses once the device is closed, atomically with taking a slot, so nothing is
  // admitted after shutdown() has returned (the node and its handler are discarded unrun, or the
  // handler gets the error: see ChainNode::refuse).
  if (in_async_context()) {
    // The pending grant owns the node until it runs; the chain outlives it (the node keeps it).
    if (!q->throttle().async_acquire(pending_push{q.get(), node}) && !reports) throw q->shut_down_error();
    return;
  }
  if (!q->throttle().acquire(q->name())) {
    if (reports) return node->refuse(refusal_of(*q));
    node->discard();
    throw q->shut_down_error();  // `q` is the caller's reference: alive without the node's
  }
  q->note_submitted();
  node->push();
}

// `Launch` is `void(Completion)`: it starts the work on the backend.
template <class T, class Launch>
struct submit_initiation {
  std::shared_ptr<DeviceQueue> queue;
  std::shared_ptr<OpChain> chain;
  Launch launch;
  std::shared_ptr<result_slot<T>> slot;

  template <class Handler>
  void operator()(Handler&& handler) {
    using H = std::decay_t<Handler>;
    H h(std::forward<Handler>(handler));
    if (CaptureSink* sink = capturing(chain.get())) [[unlikely]] {
      // Graph capture: recorded to run at each replay; the handler completes now.
      if constexpr (std::is_void_v<T> && std::is_copy_constructible_v<Launch>) {
        sink->record(std::function<void(Completion)>(std::move(launch)));
        dispatch_to(std::move(h), [](H& recorded) {
          async_scope scope;
          std::move(recorded)(std::exception_ptr{});
        });
        return;
      } else if constexpr (!std::is_void_v<T>) {
        throw error(errc::invalid_argument,
                    "capture: an operation with a result (sum, dot, parallel_reduce, ...) cannot be captured: a "
                    "replay would have nowhere to deliver it");
      } else {
        throw error(errc::invalid_argument, "capture: this operation cannot be captured (its launch is not copyable)");
      }
    }
    if constexpr (is_awaitable_handler<H>) {
      if (queue->closed()) {          // the coroutine gets the refusal at its co_await (see the trait)
        initiating_scope initiating;  // so that it is posted, not resumed inside this call
        const std::shared_ptr<DeviceQueue> q = std::move(queue);
        if constexpr (std::is_void_v<T>)
          deliver(handler_ticket(*q, chain.get()), q, chain, std::move(h), refusal_of(*q));
        else
          deliver(handler_ticket(*q, chain.get()), q, chain, std::move(h), refusal_of(*q), T{});
        return;
      }
    } else {
      queue->check_open();
    }
    if constexpr (requires { h.note_work_ahead(queue->completed_count(), std::size_t{}); })
      h.note_work_ahead(queue->completed_count(), queue->admitted_count());
    auto* node = new submit_node<T, Launch, H>(queue, std::move(launch), std::move(slot), std::move(h));
    node->bind(std::move(chain));
    // From here on `this` may be gone: the operation can complete inside admit(), and a coroutine
    // resumed by its completion destroys the frame that owns this initiation. Use locals only
    // (the initiation is used once: its reference moves to the local).
    const std::shared_ptr<DeviceQueue> q = std::move(queue);
    initiating_scope initiating;
    admit(q, node, is_awaitable_handler<H>);
  }
};

/// Submits work producing `T` (or nothing, for `void`) on `chain` of the device behind `queue`.
/// `launch(Completion)` starts it; for non-void `T` it must fill `slot->value` before completing.
template <class T, class Token, class Launch>
auto submit(std::shared_ptr<DeviceQueue> queue, std::shared_ptr<OpChain> chain, std::shared_ptr<result_slot<T>> slot,
            Launch launch, Token&& token) {
  return boost::asio::async_initiate<Token, typename signature_for<T>::type>(
      submit_initiation<T, Launch>{std::move(queue), std::move(chain), std::move(launch), std::move(slot)}, token);
}

// A marker: runs `at_point` in stream order and delivers nothing.
class marker_node final : public ChainNode {
 public:
  explicit marker_node(unique_function<void(Completion)> at_point) : at_point_(std::move(at_point)) {}
  [[nodiscard]] bool is_operation() const noexcept override { return false; }

 private:
  void launch(Completion done) override { std::move(at_point_)(std::move(done)); }
  void finish(std::exception_ptr) noexcept override {}
  unique_function<void(Completion)> at_point_;
};

/// Queues `node` (not an operation: it takes no in-flight slot) on `chain`, keeping its place
/// behind waiting submissions.
inline void enqueue_node(DeviceQueue& queue, const std::shared_ptr<OpChain>& chain, ChainNode* node) {
  node->bind(chain);
  queue.throttle().after_waiters(pending_push{nullptr, node});
}

/// Inserts a marker on `chain` that runs `at_point` when every operation submitted before it has
/// completed; takes no in-flight slot and keeps its place behind waiting submissions.
inline void enqueue_marker(DeviceQueue& queue, const std::shared_ptr<OpChain>& chain,
                           unique_function<void(Completion)> at_point) {
  enqueue_node(queue, chain, new marker_node(std::move(at_point)));
}

}  // namespace detail

/// Waits for `event` with a completion token (signature `void(std::exception_ptr)`).
template <class Token>
auto async_wait(const Event& event, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(
      [event](auto handler) {
        using H = decltype(handler);
        auto work = detail::work_guard_of<H>::make(handler);
        event.on_ready([h = std::move(handler), work = std::move(work)]() mutable {
          detail::dispatch_to(std::move(h), [](H& waiter) {
            detail::async_scope scope;
            std::move(waiter)(std::exception_ptr{});
          });
          work.reset();
        });
      },
      token);
}

}  // namespace xdev
