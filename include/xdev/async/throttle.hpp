/// \file
/// `xdev::Throttle`: the bound on a device's in-flight executions.
#pragma once

#include <xdev/core/detail/unique_function.hpp>
#include <xdev/core/error.hpp>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <utility>

namespace xdev {

/// Counts in-flight executions against a limit. A submission takes a slot before it is queued
/// and gives it back when it completes. Waiters are served strictly first-come first-served,
/// whether they block a thread (`acquire`) or wait asynchronously (`async_acquire`, used by
/// coroutines and by work submitted from inside running work, which must never block).
///
/// Entries that need no slot (`after_waiters`: stream markers such as event records) keep
/// their place in that order, so a marker never overtakes work submitted before it.
class Throttle {
 public:
  explicit Throttle(std::size_t limit) : limit_(limit) {
    if (limit == 0) throw error(errc::invalid_argument, "in-flight limit 0 is not accepted; it must be at least 1");
  }
  Throttle(const Throttle&) = delete;
  Throttle& operator=(const Throttle&) = delete;

  /// Blocks the calling thread until a slot is held. Returns false, holding nothing, once the
  /// throttle is closed.
  [[nodiscard]] bool acquire() {
    std::unique_lock lk(m_);
    if (closed_) return false;
    if (try_take_locked()) return true;
    bool granted = false;
    ++waits_;
    waiters_.push_back({true, [this, &granted] {
                          std::lock_guard g(m_);
                          granted = true;
                          cv_.notify_all();
                        }});
    cv_.wait(lk, [&] { return granted; });
    return true;
  }

  /// Runs `on_granted` once a slot is held: now, on this thread, or later on the thread that
  /// releases a slot. Never blocks. Returns false, and never runs `on_granted`, once the throttle
  /// is closed.
  [[nodiscard]] bool async_acquire(detail::unique_function<void()> on_granted) {
    {
      std::lock_guard lk(m_);
      if (closed_) return false;
      if (!try_take_locked()) {
        ++waits_;
        waiters_.push_back({true, std::move(on_granted)});
        return true;
      }
    }
    on_granted();
    return true;
  }

  /// Refuses later acquisitions (those already waiting are still served), then waits until idle.
  /// Checked under the same lock as acquisition, so no acquisition can slip past a close.
  void close() {
    {
      std::lock_guard lk(m_);
      closed_ = true;
    }
    wait_idle();
  }

  /// Runs `f` (which needs no slot) after every waiter queued before it has been served.
  void after_waiters(detail::unique_function<void()> f) {
    {
      std::lock_guard lk(m_);
      if (dispatching_ || !waiters_.empty()) {
        waiters_.push_back({false, std::move(f)});
        return;
      }
    }
    f();
  }

  /// Returns a slot; serves waiters in order.
  void release() {
    std::unique_lock lk(m_);
    --in_use_;
    if (dispatching_) return;  // the thread already dispatching will see the free slot
    if (waiters_.empty()) {    // the common case: nobody to serve, nothing to allocate
      if (in_use_ == 0) idle_cv_.notify_all();
      return;
    }
    dispatching_ = true;
    for (;;) {
      std::deque<detail::unique_function<void()>> ready;
      while (!waiters_.empty() && (!waiters_.front().needs_slot || in_use_ < limit_)) {
        if (waiters_.front().needs_slot) take_locked();
        ready.push_back(std::move(waiters_.front().run));
        waiters_.pop_front();
      }
      if (ready.empty()) break;
      lk.unlock();
      for (auto& f : ready) f();
      lk.lock();
    }
    dispatching_ = false;
    if (in_use_ == 0 && waiters_.empty()) idle_cv_.notify_all();
  }

  /// Blocks until no slot is held and nobody waits.
  void wait_idle() {
    std::unique_lock lk(m_);
    idle_cv_.wait(lk, [&] { return in_use_ == 0 && waiters_.empty() && !dispatching_; });
  }

  [[nodiscard]] std::size_t limit() const noexcept { return limit_; }
  /// Slots held now.
  [[nodiscard]] std::size_t in_flight() const {
    std::lock_guard lk(m_);
    return in_use_;
  }
  /// The most slots ever held at once.
  [[nodiscard]] std::size_t high_water() const {
    std::lock_guard lk(m_);
    return high_water_;
  }
  /// How many acquisitions had to wait for a slot.
  [[nodiscard]] std::size_t waits() const {
    std::lock_guard lk(m_);
    return waits_;
  }

 private:
  struct waiter {
    bool needs_slot;
    detail::unique_function<void()> run;
  };

  bool try_take_locked() {
    if (dispatching_ || !waiters_.empty() || in_use_ >= limit_) return false;
    take_locked();
    return true;
  }
  void take_locked() {
    if (++in_use_ > high_water_) high_water_ = in_use_;
  }

  mutable std::mutex m_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<waiter> waiters_;
  const std::size_t limit_;
  std::size_t in_use_ = 0;
  std::size_t high_water_ = 0;
  std::size_t waits_ = 0;
  bool dispatching_ = false;
  bool closed_ = false;
};

}  // namespace xdev
