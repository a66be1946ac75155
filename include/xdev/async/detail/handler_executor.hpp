/// \file
/// How a completion handler reaches its executor (`handler_executor`), and the handlers that need
/// none: xdev's own future runs in place, on the thread that completes its work. The trait's Asio
/// side, for every other token, is <xdev/async/tokens.hpp>; the submission path
/// (<xdev/async/submit.hpp>) uses both through this header.
#pragma once

#include <xdev/async/use_future.hpp>

#include <type_traits>
#include <utility>

namespace xdev::detail {

template <class Handler>
inline constexpr bool is_future_handler = false;
template <class... Ts>
inline constexpr bool is_future_handler<future_handler<Ts...>> = true;

/// A handler that has no executor of its own and only fulfils a promise: xdev's future. It runs
/// on the thread that completes its work, and needs no part of Asio's executor machinery.
template <class Handler>
inline constexpr bool runs_in_place = is_future_handler<std::decay_t<Handler>>;

template <class Handler>
inline constexpr bool tokens_header_included = false;

/// How a completion handler reaches its associated executor: `executor_type`, `get(h)`,
/// `work_guard` (keeps the executor's context running while the work is pending), whether
/// `dispatch` runs the function inside the call (`dispatches_inline`), `dispatch` and `post`.
/// <xdev/async/tokens.hpp> specializes it for every handler that does not run in place; a
/// translation unit without that header gets this primary template, which only reports it.
template <class Handler, class = void>
struct handler_executor;

// What a handler that runs in place keeps while its work is pending: nothing.
struct no_work_guard {
  void reset() noexcept {}
};

template <class Handler, class>
struct handler_executor {
  static_assert(tokens_header_included<Handler>,
                "xdev: this completion token (a callback, asio::detached, asio::use_awaitable, a handler bound to an "
                "executor) needs #include <xdev/async/tokens.hpp> (or <xdev/xdev.hpp>); without it only "
                "xdev::use_future, the default token, is available");
  // Only so that the static_assert above is the one error the compiler reports.
  struct executor_type {};
  struct work_guard : no_work_guard {
    explicit work_guard(executor_type) noexcept {}
  };
  static constexpr bool dispatches_inline = true;
  static executor_type get(const Handler&) noexcept { return {}; }
  template <class F>
  static void dispatch(executor_type, F&&) noexcept {}
  template <class F>
  static void post(executor_type, F&&) noexcept {}
};

template <class Handler, bool = runs_in_place<Handler>>
struct work_guard_of {
  using type = typename handler_executor<Handler>::work_guard;
  static type make(const Handler& h) { return type(handler_executor<Handler>::get(h)); }
};
template <class Handler>
struct work_guard_of<Handler, true> {
  using type = no_work_guard;
  static type make(const Handler&) noexcept { return {}; }
};

/// Runs `f(h)` on `h`'s associated executor (`dispatch`: at once where that executor allows it).
template <class Handler, class F>
void dispatch_to(Handler h, F f) {
  if constexpr (runs_in_place<Handler>) {
    f(h);
  } else {
    using E = handler_executor<Handler>;
    auto ex = E::get(h);
    E::dispatch(ex, [h = std::move(h), f = std::move(f)]() mutable { f(h); });
  }
}

}  // namespace xdev::detail
