/// \file
/// What the asynchronous placement operations (`mark_sharding`, `reshard`, `to_host`) share: a
/// join of the transfers one operation submits, a gate on the work already submitted to some
/// devices, and the delivery of the outcome through the user's completion token.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/detail/join.hpp>
#include <xdev/async/device_queue.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/tokens.hpp>
#include <xdev/backend/completion.hpp>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include <cstddef>
#include <exception>
#include <memory>
#include <span>
#include <utility>

namespace xdev::spmd::detail {

/// The join of an operation's pieces (`xdev::detail::Join`, <xdev/async/detail/join.hpp>).
using Join = xdev::detail::Join;

/// Runs `then(ep)` once the work already submitted to the default stream of every device in
/// `devices` has completed (at once, on this thread, when `devices` is empty). `ep` is the first
/// error of those markers (a device that failed), else null.
inline void after_pending_work(std::span<const AnyDevice> devices, Completion then) {
  auto join = std::make_shared<Join>(std::move(then));
  for (const auto& d : devices)
    if (!join->submit([&](Join::Arrival a) { d.execute([] {}, std::move(a)); })) break;
  join->seal();
}

/// Hands an operation's outcome to the user's completion handler the way every xdev operation
/// does (on its associated executor; deferred when it completes inside its initiating function),
/// and keeps that executor from running out of work until then. `sink`: the device queue that
/// keeps an error nobody read (a dropped future, a detached token).
template <class Handler>
class Delivery {
 public:
  Delivery(Handler h, std::shared_ptr<DeviceQueue> sink)
      : work_(boost::asio::make_work_guard(boost::asio::get_associated_executor(h))),
        handler_(std::move(h)),
        sink_(std::move(sink)) {}

  template <class... Result>
  void operator()(std::exception_ptr ep, Result&&... result) {
    xdev::detail::deliver(sink_, std::move(handler_), std::move(ep), std::forward<Result>(result)...);
    work_.reset();
  }

 private:
  boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler>> work_;
  Handler handler_;
  std::shared_ptr<DeviceQueue> sink_;
};

/// Starts an operation inside its initiating function: an outcome already known before the
/// call returns is delivered later (Asio's rule), and no submission made here blocks the caller
/// (a device that is full waits asynchronously for a slot).
template <class Start>
void initiate_placement(Start&& start) {
  xdev::detail::initiating_scope initiating;
  xdev::detail::async_scope never_block;
  std::forward<Start>(start)();
}

}  // namespace xdev::spmd::detail
