/// \file
/// The submission path every device operation takes: in-flight slot, stream order, completion
/// token. Backend authors never call this; `Device` and `Stream` do.
#pragma once

#include <xdev/async/device_queue.hpp>
#include <xdev/async/event.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/detail/thread_context.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

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

template <class Handler>
inline constexpr bool is_future_handler = false;
template <class... Ts>
inline constexpr bool is_future_handler<future_handler<Ts...>> = true;

// Calls `h` on its associated executor. Nothing it throws escapes to an executor (Asio's
// thread_pool would terminate): it becomes a kept error of the device instead.
template <class Handler, class... Args>
void deliver(const std::shared_ptr<DeviceQueue>& q, Handler h, std::exception_ptr ep, Args... args) {
  if constexpr (is_detached_handler<Handler>) {
    if (ep) q->keep_error(ep);
  }
  if constexpr (requires { h.set_error_sink(q); }) h.set_error_sink(q);
  auto ex = boost::asio::get_associated_executor(h);
  auto invoke = [q, h = std::move(h), ep = std::move(ep), ... args = std::move(args)]() mutable {
    async_scope scope;
    try {
      std::move(h)(std::move(ep), std::move(args)...);
    } catch (...) {
      q->keep_error(std::current_exception());
    }
  };
  // Completed inside its own initiating function: defer the handler (xdev's future handler only
  // fulfils a promise, which is safe at once).
  if (initiating_depth > 0 && !is_future_handler<Handler>)
    boost::asio::post(ex, std::move(invoke));
  else
    boost::asio::dispatch(ex, std::move(invoke));
}

// Launches backend work so that `done` is called exactly once even when the backend call throws.
template <class Call>
void launch_guarded(Completion done, Call&& call) {
  struct once {
    std::atomic<bool> fired{false};
    Completion done;
    void operator()(std::exception_ptr ep) {
      if (!fired.exchange(true, std::memory_order_acq_rel)) done(std::move(ep));
    }
    // A backend that drops its completion unrun would leave the stream and the in-flight slot
    // stuck forever: fail the operation instead.
    ~once() {
      if (fired.load(std::memory_order_acquire) || !done) return;
      done(std::make_exception_ptr(
          error(errc::internal, "the backend destroyed the completion of an operation without calling it")));
    }
  };
  auto state = std::make_shared<once>();
  state->done = std::move(done);
  try {
    std::forward<Call>(call)(Completion([state](std::exception_ptr ep) { (*state)(std::move(ep)); }));
  } catch (...) {
    (*state)(std::current_exception());
  }
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

// `Launch` is `void(Completion)`: it starts the work on the backend.
template <class T, class Launch>
struct submit_initiation {
  std::shared_ptr<DeviceQueue> queue;
  std::shared_ptr<OpChain> chain;
  Launch launch;
  std::shared_ptr<result_slot<T>> slot;

  template <class Handler>
  void operator()(Handler&& handler) {
    queue->check_open();
    auto work = boost::asio::make_work_guard(boost::asio::get_associated_executor(handler));
    ChainOp op{
        [launch = std::move(launch)](Completion done) mutable { launch_guarded(std::move(done), std::move(launch)); },
        [q = queue, h = std::forward<Handler>(handler), work = std::move(work),
         slot = slot](std::exception_ptr ep) mutable {
          q->note_completed(ep != nullptr);
          if constexpr (std::is_void_v<T>) {
            deliver(q, std::move(h), std::move(ep));
          } else {
            T value = (ep || !slot->value) ? T{} : std::move(*slot->value);
            deliver(q, std::move(h), std::move(ep), std::move(value));
          }
          work.reset();
          q->throttle().release();
        }};
    auto enqueue = [q = queue, chain = chain, op = std::move(op)]() mutable {
      q->note_submitted();
      chain->push(std::move(op));
    };
    // From here on `this` may be gone: the operation can complete inside enqueue(), and a coroutine
    // resumed by its completion destroys the frame that owns this initiation. Use locals only.
    const std::shared_ptr<DeviceQueue> q = queue;
    initiating_scope initiating;
    // The throttle refuses once the device is closed, atomically with taking a slot, so nothing is
    // admitted after shutdown() has returned (the op and its handler are discarded unrun).
    if (in_async_context()) {
      if (!q->throttle().async_acquire(std::move(enqueue))) throw q->shut_down_error();
    } else {
      if (!q->throttle().acquire()) throw q->shut_down_error();
      enqueue();
    }
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

/// Inserts a marker on `chain` that runs `at_point` when every operation submitted before it has
/// completed; takes no in-flight slot and keeps its place behind waiting submissions.
inline void enqueue_marker(DeviceQueue& queue, const std::shared_ptr<OpChain>& chain,
                           unique_function<void(Completion)> at_point) {
  queue.throttle().after_waiters([chain, at_point = std::move(at_point)]() mutable {
    chain->push(ChainOp{std::move(at_point), [](std::exception_ptr) {}});
  });
}

}  // namespace detail

/// Waits for `event` with a completion token (signature `void(std::exception_ptr)`).
template <class Token>
auto async_wait(const Event& event, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(
      [event](auto handler) {
        auto work = boost::asio::make_work_guard(boost::asio::get_associated_executor(handler));
        event.on_ready([h = std::move(handler), work = std::move(work)]() mutable {
          auto ex = boost::asio::get_associated_executor(h);
          boost::asio::dispatch(ex, [h = std::move(h)]() mutable {
            detail::async_scope scope;
            std::move(h)(std::exception_ptr{});
          });
          work.reset();
        });
      },
      token);
}

}  // namespace xdev
