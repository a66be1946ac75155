/// \file
/// The distributed session's collectives thread, which a thread waiting for a collective can
/// stand in for.
#pragma once

#include <xdev/async/detail/wait_helper.hpp>
#include <xdev/backend/completion.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace xdev::distributed::detail {

/// Runs posted jobs one at a time, in the order they were posted (the order every rank must start
/// its collectives in), on a thread of its own, like a `SerialWorker`: after a job the thread looks
/// for the next one for `spin` before it sleeps. Destroying it (or `close`) runs what was posted,
/// then joins the thread.
///
/// A job posted with `post_awaited` may instead run on the thread that waits for it: for
/// `reservation` after the post, the collectives thread leaves it to such a waiter, which `help`
/// lets run it (and any job posted before it) in order. A small collective lasts about as long as
/// the two wake-ups of a hand-off between threads, and at 1 MiB they were still a tenth of its
/// time; run by its waiter it needs neither. Only one job runs at a time, whichever thread runs
/// it.
///
/// Posts for waiters do not wake the thread: it dozes (timed sleeps) while they come, and finds a
/// job nobody took when it wakes. Each of those wake-ups takes a core for a moment from a process
/// that may be in the middle of a collective, so while the waiters take every job the thread dozes
/// longer each time, from `doze` up to `longest_doze`. A job it finds left to nobody past its
/// reservation brings the doze back to `doze`; so does a post while such a job waits, which also
/// wakes the thread to run it.
///
/// A job posted for a waiter may also say how soon the thread must start it if its waiter does
/// not come (`start_within`, after the reservation): a long collective held while the program
/// computes should not wait out a doze of several milliseconds. The thread's dozes are then no
/// longer than that, for as long as the latest post for a waiter asks for it, and a post that a
/// doze already under way would leave waiting longer wakes the thread.
class CollectiveQueue : public std::enable_shared_from_this<CollectiveQueue> {
 public:
  using Clock = std::chrono::steady_clock;

  CollectiveQueue(std::chrono::microseconds spin, std::chrono::microseconds reservation,
                  std::chrono::microseconds doze = std::chrono::microseconds(500),
                  std::chrono::microseconds linger = std::chrono::milliseconds(20),
                  std::chrono::microseconds longest_doze = std::chrono::milliseconds(4))
      : spin_(spin),
        reservation_(reservation),
        doze_(doze),
        linger_(linger),
        longest_doze_(std::max(doze, longest_doze)),
        next_doze_(doze),
        doze_cap_(longest_doze_),
        thread_([this] { loop(); }) {}
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;
  ~CollectiveQueue() { close(); }

  /// Queues `job` for the collectives thread. Thread-safe.
  void post(HostTask job) { (void)enqueue(std::move(job), false, longest_doze_); }

  /// Queues `job`, leaving it to a waiter for `reservation`; the returned helper (for the job's
  /// future) runs it on the waiting thread. If no waiter has started it by then, the thread
  /// starts it within `start_within` of the reservation's end (at most `longest_doze`; at least
  /// 1 us), give or take the scheduler. Thread-safe.
  [[nodiscard]] xdev::detail::wait_helper post_awaited(
      HostTask job, std::chrono::microseconds start_within = std::chrono::microseconds::max()) {
    start_within = std::clamp(start_within, std::chrono::microseconds(1), longest_doze_);
    const std::uint64_t ticket = enqueue(std::move(job), true, start_within);
    return {&help_thunk, std::weak_ptr<void>(shared_from_this()), ticket};
  }

  /// Runs, on the calling thread, the queued jobs up to and including `ticket`'s, unless that one
  /// has already started elsewhere; waits while another thread runs a job posted before it.
  /// Returns at once on a thread that is running a job of this queue (a completion handler).
  void help(std::uint64_t ticket) {
    if (running_here_ == this) return;
    std::unique_lock lk(m_);
    for (;;) {
      if (done_upto_ >= ticket || jobs_.empty() || jobs_.front().ticket > ticket) return;
      if (!running_) {
        run_front(lk);
        continue;
      }
      ++done_waiters_;
      done_cv_.wait(lk);
      --done_waiters_;
    }
  }

  /// How many times the thread has woken from a doze.
  [[nodiscard]] std::uint64_t wakeups() const {
    std::lock_guard lk(m_);
    return wakeups_;
  }

  /// Runs what was posted (reservations end at once), then joins the thread. Idempotent; not
  /// concurrent with `post`.
  void close() {
    {
      std::lock_guard lk(m_);
      if (stopping_) return;
      stopping_ = true;
      events_.fetch_add(1, std::memory_order_release);  // ends a spin at once
    }
    work_cv_.notify_one();
    done_cv_.notify_all();
    thread_.join();
  }

 private:
  struct Job {
    std::uint64_t ticket;
    HostTask fn;
    Clock::time_point held_until;  // left to a waiter until then
  };

  static void help_thunk(void* self, std::uint64_t ticket) { static_cast<CollectiveQueue*>(self)->help(ticket); }

  // `awaited`: left to a waiter for `reservation_`, then the thread's to start within
  // `start_within`.
  std::uint64_t enqueue(HostTask job, bool awaited, std::chrono::microseconds start_within) {
    const Clock::time_point now = awaited ? Clock::now() : Clock::time_point{};
    // Notified under the lock: once the job runs, its completion may lead to this queue's
    // destruction, which must not find the posting thread still inside notify_one.
    std::lock_guard lk(m_);
    const std::uint64_t ticket = ++last_ticket_;
    jobs_.push_back(Job{ticket, std::move(job), awaited ? now + reservation_ : Clock::time_point{}});
    events_.fetch_add(1, std::memory_order_release);
    if (awaited) {
      last_awaited_post_ = now;
      doze_cap_ = start_within;
    }
    // A spinning or busy thread finds the job without a notification; a dozing one is not woken
    // for a job left to its waiter (it wakes within its doze anyway), unless an earlier job waits
    // past its reservation with nobody running it (that one is the thread's to run now), or the
    // doze would end later than this job asked to be started by.
    const Job& front = jobs_.front();
    const bool stale = awaited && !running_ && front.ticket != ticket && front.held_until != Clock::time_point{} &&
                       front.held_until <= now;
    const bool too_late = awaited && doze_ends_ - jobs_.back().held_until > start_within;
    if (stale) next_doze_ = doze_;
    if (state_ == State::asleep || (state_ == State::dozing && (!awaited || stale || too_late))) work_cv_.notify_one();
    return ticket;
  }

  // Runs the front job on this thread; `lk` (on m_) is held on entry and on return, not meanwhile.
  void run_front(std::unique_lock<std::mutex>& lk) {
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = true;
    events_.fetch_add(1, std::memory_order_release);
    lk.unlock();
    run(job.fn);
    lk.lock();
    running_ = false;
    done_upto_ = job.ticket;
    events_.fetch_add(1, std::memory_order_release);
    if (done_waiters_ > 0) done_cv_.notify_all();
    // The thread, if it waits, is woken for what a waiter left to it, and when closing (it ends
    // only once no job runs).
    if (state_ != State::awake && (!jobs_.empty() || stopping_)) work_cv_.notify_one();
  }

  // A job that throws terminates the program, on whichever thread runs it (as on a SerialWorker).
  void run(HostTask& fn) noexcept {
    CollectiveQueue* const saved = std::exchange(running_here_, this);
    fn();
    running_here_ = saved;
    fn = nullptr;  // what the job captured goes before the next one runs
  }

  // The thread: runs the front job once no waiter may take it; after a job of its own, looks for
  // the next one for `spin` (a chain of collectives nobody waits for at once); otherwise dozes
  // (a timed sleep: until a reservation ends, or for `doze` while waiters have been running their
  // jobs within `linger`, so that posts for waiters need not wake it) or sleeps until a post.
  void loop() {
    bool ran = false;
    std::unique_lock lk(m_);
    for (;;) {
      if (jobs_.empty() && !running_ && stopping_) return;
      const Clock::time_point now = Clock::now();
      const bool front_free = !jobs_.empty() && !running_;
      if (front_free && (stopping_ || now >= jobs_.front().held_until)) {
        // A job left to a waiter who did not come: look more often again.
        if (jobs_.front().held_until != Clock::time_point{}) next_doze_ = doze_;
        run_front(lk);
        ran = true;
        continue;
      }
      const std::uint64_t seen = events_.load(std::memory_order_relaxed);
      if (ran && spin_.count() > 0 && jobs_.empty()) {
        ran = false;
        lk.unlock();
        look_for_work(seen);
        lk.lock();
        continue;
      }
      ran = false;
      const auto changed = [&] { return events_.load(std::memory_order_relaxed) != seen; };
      if (front_free) {
        state_ = State::dozing;
        doze_ends_ = jobs_.front().held_until;  // a copy: a waiter may pop the job meanwhile
        work_cv_.wait_until(lk, doze_ends_, changed);
        ++wakeups_;
      } else if (now - last_awaited_post_ < linger_) {
        state_ = State::dozing;
        const auto doze = std::min(next_doze_, doze_cap_);
        next_doze_ = std::min(2 * next_doze_, longest_doze_);
        doze_ends_ = now + doze;
        work_cv_.wait_until(lk, doze_ends_, changed);
        ++wakeups_;
      } else {
        state_ = State::asleep;
        next_doze_ = doze_;
        work_cv_.wait(lk, changed);
      }
      state_ = State::awake;
    }
  }

  // Waits, without the lock, until something happens (a post) or the spin budget is spent.
  void look_for_work(std::uint64_t seen) const {
    const auto deadline = Clock::now() + spin_;
    while (events_.load(std::memory_order_acquire) == seen && Clock::now() < deadline) std::this_thread::yield();
  }

  static inline thread_local CollectiveQueue* running_here_ = nullptr;

  enum class State { awake, dozing, asleep };

  const std::chrono::microseconds spin_;
  const std::chrono::microseconds reservation_;
  const std::chrono::microseconds doze_;
  const std::chrono::microseconds linger_;
  const std::chrono::microseconds longest_doze_;
  mutable std::mutex m_;
  std::condition_variable work_cv_;  // the thread waits for a post
  std::condition_variable done_cv_;  // waiters wait for the end of a job running elsewhere
  std::deque<Job> jobs_;
  std::uint64_t last_ticket_ = 0;
  std::uint64_t done_upto_ = 0;  // tickets complete in order: every job up to this one has run
  bool running_ = false;         // a job runs (on any thread)
  bool stopping_ = false;
  State state_ = State::awake;  // how the thread waits (guarded by m_)
  Clock::time_point last_awaited_post_{};
  std::chrono::microseconds next_doze_;  // the thread's next doze while waiters come
  std::chrono::microseconds doze_cap_;   // no doze longer: the latest post for a waiter asks for it
  Clock::time_point doze_ends_{};        // when the thread's doze ends, while state_ is dozing
  std::uint64_t wakeups_ = 0;            // from a doze
  std::size_t done_waiters_ = 0;
  std::atomic<std::uint64_t> events_{0};  // posts, job starts and ends, close: what a spin watches
  std::thread thread_;                    // last: starts after the members it uses exist
};

}  // namespace xdev::distributed::detail
