/// \file
/// Every Asio completion token for xdev's operations: a callback, `asio::detached`,
/// `asio::use_awaitable`, a handler bound to an executor (`asio::bind_executor`). The handler runs
/// on its associated executor, which is kept busy (a work guard) while the operation is pending.
///
/// `xdev::use_future`, the default token, needs only the header of the call itself (for example
/// <xdev/device/device.hpp>): this one brings Asio's executor machinery, about a third of a second
/// of compile time, for the translation units that use other tokens. `<xdev/xdev.hpp>` and
/// `<xdev/ops/dispatch.hpp>` (so every op header that takes a token, and AnyDevice) include it.
///
///     #include <xdev/async/tokens.hpp>
///     dev.execute([] { return 42; }, [](std::exception_ptr ep, int v) { ... });
#pragma once

#include <xdev/async/detail/handler_executor.hpp>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>

#include <type_traits>
#include <utility>

namespace xdev::detail {

template <class Handler>
struct handler_executor<Handler, std::enable_if_t<!runs_in_place<Handler>>> {
  using executor_type = boost::asio::associated_executor_t<Handler>;
  using work_guard = boost::asio::executor_work_guard<executor_type>;
  /// The system executor's dispatch runs the function at once, inside the call; any other
  /// executor may run it later.
  static constexpr bool dispatches_inline = std::is_same_v<executor_type, boost::asio::system_executor>;

  static executor_type get(const Handler& h) noexcept { return boost::asio::get_associated_executor(h); }
  template <class F>
  static void dispatch(const executor_type& ex, F&& f) {
    boost::asio::dispatch(ex, std::forward<F>(f));
  }
  template <class F>
  static void post(const executor_type& ex, F&& f) {
    boost::asio::post(ex, std::forward<F>(f));
  }
};

}  // namespace xdev::detail
