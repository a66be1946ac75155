/// \file
/// What the asynchronous placement operations (`mark_sharding`, `reshard`, `to_host`) share: a
/// join of the transfers one operation submits, a gate on the work already submitted to some
/// devices, and the delivery of the outcome through the user's completion token.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/device_queue.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/backend/completion.hpp>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <utility>

namespace xdev::spmd::detail {

/// Counts the pieces of one operation's work and runs `then(first error)` once, on the thread
/// where the last piece completed. It starts with one count, held by the code that adds pieces
/// (`seal` drops it), so a piece that completes while others are still being added cannot end
/// the join early; every piece completes (or fails) before `then` runs, so nothing is left
/// running on a buffer that `then` frees.
class Join : public std::enable_shared_from_this<Join> {
 public:
  explicit Join(Completion then) : then_(std::move(then)) {}

  /// The completion handler of one piece: xdev's own, so it may run inside the call that
  /// submitted the piece (`completes_at_once`), which saves a thread hand-off.
  struct Arrival {
    using completes_at_once = void;
    std::shared_ptr<Join> join;
    void operator()(std::exception_ptr ep) const { join->arrive(std::move(ep)); }
  };

  /// One more piece; call the returned handler when it completes. A submission that throws has
  /// not taken its handler: call it with the exception yourself.
  [[nodiscard]] Arrival add() {
    left_.fetch_add(1, std::memory_order_relaxed);
    return Arrival{shared_from_this()};
  }

  /// Every piece has been added; `ep` says why adding stopped early, if it did.
  void seal(std::exception_ptr ep = nullptr) { arrive(std::move(ep)); }

  /// Submits one piece with `submit(Arrival)`; when that throws, the piece arrives with the
  /// exception and false is returned (add nothing more: seal).
  template <class Submit>
  bool submit(Submit&& submit) {
    Arrival a = add();
    try {
      std::forward<Submit>(submit)(Arrival(a));
      return true;
    } catch (...) {
      a(std::current_exception());
      return false;
    }
  }

 private:
  void arrive(std::exception_ptr ep) {
    if (ep) {
      std::lock_guard lk(m_);
      if (!first_) first_ = std::move(ep);
    }
    if (left_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::exception_ptr first;
    {
      std::lock_guard lk(m_);
      first = first_;
    }
    Completion then = std::move(then_);
    std::move(then)(std::move(first));
  }

  std::atomic<std::size_t> left_{1};
  std::mutex m_;
  std::exception_ptr first_;
  Completion then_;
};

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
