/// \file
/// `xdev::Throttle`: the bound on a device's in-flight executions.
#pragma once

#include <xdev/core/detail/hooks.hpp>
#include <xdev/core/detail/spin_mutex.hpp>
#include <xdev/core/detail/unique_function.hpp>
#include <xdev/core/error.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

namespace xdev {

/// Counts in-flight executions against a limit. A submission takes a slot before it is queued
/// and gives it back when it completes. Waiters are served strictly first-come first-served,
/// whether they block a thread (`acquire`) or wait asynchronously (`async_acquire`, used by
/// coroutines and by work submitted from inside running work, which must never block).
///
/// Entries that need no slot (`after_waiters`: stream markers such as event records) keep
/// their place in that order, so a marker never overtakes work submitted before it.
///
/// A thread blocked in `acquire` is not served for every completion. While the releases say that
/// more completions are on their way (`release(true)`: the completing operation's stream has
/// another operation queued behind it), a blocked thread at the head of the queue is served only
/// once in-flight work has fallen to the low mark, half the limit; it then refills the free slots
/// in one go through the uncontended path. It spins for up to `blocked::spin_budget` before it
/// sleeps, so that it is usually still awake when served: waking a sleeping thread takes longer
/// than a busy device needs to run what is left below the low mark. A release that promises
/// nothing more (a stream ran dry, or waits on a marker) serves waiters at once, so work that only
/// the blocked thread could unblock never deadlocks. Asynchronous waiters cost no wake-up and
/// are always served at once.
class Throttle {
 public:
  explicit Throttle(std::size_t limit) : limit_(limit), low_mark_(limit / 2) {
    if (limit == 0) throw error(errc::invalid_argument, "in-flight limit 0 is not accepted; it must be at least 1");
  }
  Throttle(const Throttle&) = delete;
  Throttle& operator=(const Throttle&) = delete;

  /// Blocks the calling thread until a slot is held. Returns false, holding nothing, once the
  /// throttle is closed.
  [[nodiscard]] bool acquire(std::string_view device = {}) {
    if (try_take_fast()) return true;
    std::unique_lock lk(m_);
    freeze_locked();
    if (closed_) return false;
    if (try_take_locked()) {
      settle_locked();
      return true;
    }
    blocked me;
    ++waits_;
    waiters_.push_back({true, &me, [&me] { me.grant(); }});
    settle_locked();
    lk.unlock();
    tools::detail::scoped_activity span(tools::Category::throttle_wait, "throttle_wait", device);
    me.wait();
    return true;
  }

  /// Runs `on_granted` once a slot is held: now, on this thread, or later on the thread that
  /// releases a slot. Never blocks. Returns false, and never runs `on_granted`, once the throttle
  /// is closed.
  [[nodiscard]] bool async_acquire(detail::unique_function<void()> on_granted) {
    if (!try_take_fast()) {
      std::lock_guard lk(m_);
      freeze_locked();
      if (closed_) return false;
      if (!try_take_locked()) {
        ++waits_;
        waiters_.push_back({true, nullptr, std::move(on_granted)});
        settle_locked();
        return true;
      }
      settle_locked();
    }
    on_granted();
    return true;
  }

  /// Refuses later acquisitions (those already waiting are still served), then waits until idle.
  /// Checked under the same lock as acquisition, so no acquisition can slip past a close.
  void close() {
    refuse();
    wait_idle();
  }

  /// `close` without the wait.
  void refuse() {
    std::lock_guard lk(m_);
    closed_ = true;
    freeze_locked();  // for good: every later acquisition takes the lock and sees closed_
  }

  /// Runs `f` (which needs no slot) after every waiter queued before it has been served.
  void after_waiters(detail::unique_function<void()> f) {
    {
      std::lock_guard lk(m_);
      if (dispatching_ || !waiters_.empty()) {  // the state is frozen while either holds
        waiters_.push_back({false, nullptr, std::move(f)});
        return;
      }
    }
    f();
  }

  /// Returns a slot; serves waiters in order. `more_coming()`: another release is sure to follow
  /// without help from outside (the releaser's stream has an operation queued), so a blocked
  /// thread may be left asleep until in-flight work reaches the low mark (see the class comment).
  /// It is asked only while a thread is blocked or a grant is being served: what it costs (a
  /// look at the stream's queue, under its lock) is not paid by a release that only counts.
  template <class MoreComing>
  requires std::is_invocable_r_v<bool, MoreComing&>
  void release(MoreComing&& more_coming) {
    // Without the `frozen` bit the fast path ignores the promise, and a bit set after this look
    // only makes the release serve at once, which is always correct.
    release((state_.load(std::memory_order_relaxed) & frozen) != 0 && more_coming());
  }

  /// `release` with the promise already known.
  void release(bool more_coming = false) {
    if (try_give_back_fast(more_coming)) return;
    std::unique_lock lk(m_);
    freeze_locked();
    const std::size_t left = count(state_.fetch_sub(1, std::memory_order_acq_rel) - 1);
    if (dispatching_) return;  // the thread already dispatching will see the free slot
    if (waiters_.empty()) {
      if (left == 0) idle_cv_.notify_all();
      settle_locked();
      return;
    }
    if (more_coming && left > low_mark_ && waiters_.front().thread != nullptr) return;
    dispatching_ = true;
    settle_locked();  // no more releases without the lock while this dispatch runs
    // One at a time, so that serving a waiter allocates nothing.
    while (!waiters_.empty() && (!waiters_.front().needs_slot || in_use_locked() < limit_)) {
      if (waiters_.front().needs_slot) take_locked();
      detail::unique_function<void()> run = std::move(waiters_.front().run);
      waiters_.pop_front();
      lk.unlock();
      run();
      lk.lock();
    }
    dispatching_ = false;
    if (in_use_locked() == 0 && waiters_.empty()) idle_cv_.notify_all();
    settle_locked();
  }

  /// Blocks until no slot is held and nobody waits.
  void wait_idle() { (void)wait_idle_until(std::chrono::steady_clock::time_point::max()); }

  /// `wait_idle`, giving up at `deadline`. Returns whether the throttle is idle.
  [[nodiscard]] bool wait_idle_until(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lk(m_);
    idle_waiters_.fetch_add(1, std::memory_order_seq_cst);
    const auto idle = [&] { return in_use_locked() == 0 && waiters_.empty() && !dispatching_; };
    bool reached = true;
    if (deadline == std::chrono::steady_clock::time_point::max())
      idle_cv_.wait(lk, idle);
    else
      reached = idle_cv_.wait_until(lk, deadline, idle);
    idle_waiters_.fetch_sub(1, std::memory_order_relaxed);
    return reached;
  }

  [[nodiscard]] std::size_t limit() const noexcept { return limit_; }
  /// Slots held now.
  [[nodiscard]] std::size_t in_flight() const noexcept { return count(state_.load(std::memory_order_acquire)); }
  /// The most slots ever held at once.
  [[nodiscard]] std::size_t high_water() const noexcept { return high_water_.load(std::memory_order_relaxed); }
  /// How many acquisitions had to wait for a slot.
  [[nodiscard]] std::size_t waits() const {
    std::lock_guard lk(m_);
    return waits_;
  }

 private:
  // A thread blocked in acquire(). It spins for a short while first: at the low mark, a device
  // busy with small operations has only microseconds of work left, far less than it takes to wake
  // a sleeping thread (tens of microseconds on a loaded machine), and a producer that sleeps lets
  // the device run dry. Only after the budget does it sleep.
  class blocked {
   public:
    static constexpr auto spin_budget = std::chrono::microseconds(50);

    void grant() {
      // Under the lock, so that a sleeping waiter cannot see the grant, return and destroy this
      // object before the notification is done.
      std::lock_guard g(m_);
      if (state_.exchange(granted, std::memory_order_acq_rel) == sleeping) cv_.notify_one();
    }

    void wait() {
      const auto until = std::chrono::steady_clock::now() + spin_budget;
      for (int i = 0; state_.load(std::memory_order_acquire) == spinning; ++i) {
        if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
        detail::cpu_relax();
      }
      std::unique_lock g(m_);  // also waits for a grant in progress to let go of the lock
      int expected = spinning;
      if (state_.compare_exchange_strong(expected, sleeping, std::memory_order_acq_rel))
        cv_.wait(g, [&] { return state_.load(std::memory_order_acquire) == granted; });
    }

   private:
    enum : int { spinning, sleeping, granted };
    std::mutex m_;
    std::condition_variable cv_;
    std::atomic<int> state_{spinning};
  };

  struct waiter {
    bool needs_slot;
    blocked* thread;  // a thread in acquire(), else null
    detail::unique_function<void()> run;
  };

  // The state word: the slots held, and two bits kept by whoever holds the lock. While `frozen`
  // is clear (nobody waits, no dispatch is running, not closed), acquire and release change the
  // count with one atomic operation and no lock. Whoever takes the lock sets `frozen` first, so
  // that the count only changes under the lock from then on, and settles the bits before letting
  // go. `parked`: a thread blocked in acquire() waits at the head for the low mark; a release that
  // promises more completions and leaves the count above the low mark then has nothing to do but
  // count, and does so without the lock too. The release that reaches the low mark takes the lock.
  static constexpr std::uint64_t frozen = std::uint64_t{1} << 63;
  static constexpr std::uint64_t parked = std::uint64_t{1} << 62;
  static constexpr std::size_t count(std::uint64_t state) noexcept {
    return static_cast<std::size_t>(state & ~(frozen | parked));
  }

  bool try_take_fast() noexcept {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    while ((s & frozen) == 0 && count(s) < limit_) {
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
        note_high_water(count(s) + 1);
        return true;
      }
    }
    return false;
  }
  bool try_give_back_fast(bool more_coming) {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    for (;;) {
      const bool free_path = (s & frozen) == 0;
      const bool above_low_mark = more_coming && (s & parked) != 0 && count(s) > low_mark_ + 1;
      if (!free_path && !above_low_mark) return false;
      if (state_.compare_exchange_weak(s, s - 1, std::memory_order_seq_cst, std::memory_order_relaxed)) {
        // Seen by wait_idle() either way: it counts itself in before it reads the state.
        if (free_path && count(s) == 1 && idle_waiters_.load(std::memory_order_seq_cst) != 0) {
          std::lock_guard lk(m_);
          idle_cv_.notify_all();
        }
        return true;
      }
    }
  }
  void freeze_locked() noexcept { state_.fetch_or(frozen, std::memory_order_seq_cst); }
  // Sets the bits from the state under the lock (see `frozen`, `parked`).
  void settle_locked() noexcept {
    std::uint64_t bits = 0;
    if (closed_ || dispatching_)
      bits = frozen;
    else if (!waiters_.empty())
      bits = waiters_.front().thread != nullptr ? frozen | parked : frozen;
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    while (!state_.compare_exchange_weak(s, (s & ~(frozen | parked)) | bits, std::memory_order_acq_rel,
                                         std::memory_order_relaxed)) {
    }
  }
  // seq_cst: wait_idle() reads it after counting itself in (see try_give_back_fast).
  std::size_t in_use_locked() const noexcept { return count(state_.load(std::memory_order_seq_cst)); }

  bool try_take_locked() {
    if (dispatching_ || !waiters_.empty() || in_use_locked() >= limit_) return false;
    take_locked();
    return true;
  }
  void take_locked() { note_high_water(count(state_.fetch_add(1, std::memory_order_acq_rel)) + 1); }
  void note_high_water(std::size_t n) noexcept {
    std::size_t h = high_water_.load(std::memory_order_relaxed);
    while (n > h && !high_water_.compare_exchange_weak(h, n, std::memory_order_relaxed)) {
    }
  }

  // Held for a few instructions at a time, by the submitting thread (a producer that found no slot)
  // and by the completing one (a release that serves waiters). With `std::mutex`, a completing
  // worker that found it held slept in the kernel and was woken by the unlock: about one release
  // in three that took the lock did, and that cost a tenth of a bounded device's throughput.
  mutable detail::SpinMutex m_;
  std::condition_variable_any idle_cv_;  // wait_idle() sleeps on it, with m_
  std::deque<waiter> waiters_;
  const std::size_t limit_;
  const std::size_t low_mark_;
  std::atomic<std::uint64_t> state_{0};
  std::atomic<std::size_t> high_water_{0};
  std::atomic<std::size_t> idle_waiters_{0};
  std::size_t waits_ = 0;
  bool dispatching_ = false;
  bool closed_ = false;
};

}  // namespace xdev
