/// \file
/// The engine behind <xdev/spmd/collectives.hpp>: a collective as a set of per-device step
/// programs, driven from the completions of their device work, with a process-wide deadline
/// timer. Users call the functions of collectives.hpp; nothing here is public.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/device_queue.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/detail/node_cache.hpp>
#include <xdev/core/detail/unique_function.hpp>
#include <xdev/core/error.hpp>
#include <xdev/spmd/detail/collective_plan.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace xdev::spmd::detail {

// ---- deadlines ---------------------------------------------------------------------------------

/// One thread, started on first use, that calls each scheduled callback when its time comes
/// (unless it was cancelled). The callbacks only hold weak references to their collectives, so a
/// pending deadline never keeps one alive, and nothing is destroyed on this thread at exit.
///
/// Why a thread of its own rather than an Asio timer on some user's io_context: a collective
/// must time out even when nobody runs an io_context, and its deadline must fire even when every
/// backend thread is stuck in the work that made it late.
class DeadlineTimer {
 public:
  using Clock = std::chrono::steady_clock;
  using Callback = xdev::detail::unique_function<void()>;

  /// The process-wide timer. Its thread is joined when static objects are destroyed at exit;
  /// nothing runs on it then, so it never keeps the process alive.
  static DeadlineTimer& instance() {
    static DeadlineTimer timer;
    return timer;
  }

  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  ~DeadlineTimer() {
    std::thread t;
    {
      std::lock_guard lk(m_);
      stopping_ = true;
      t = std::move(thread_);
    }
    cv_.notify_all();
    if (t.joinable()) t.join();
    // Entries still pending belong to collectives that outlive the process's statics; they are
    // dropped without being called.
  }

  /// Calls `f` on the timer's thread at `when`, unless `cancel(id)` came first; returns that id.
  std::uint64_t schedule(Clock::time_point when, Callback f) {
    std::lock_guard lk(m_);
    const std::uint64_t id = ++last_id_;
    if (stopping_) return id;  // at exit: nobody will wait for the result any more
    // In the node of an earlier entry: collectives started one after another schedule and cancel
    // their deadlines without allocating.
    const auto entry = nodes_.insert(entries_, Key{when, id}, std::move(f));
    if (!thread_.joinable()) {
      try {
        thread_ = std::thread([this] { run(); });
      } catch (...) {  // no thread (the system's limit, memory): nothing scheduled, the next call tries again
        entries_.erase(entry);
        throw;
      }
    }
    // Woken only when this entry is due before the time it sleeps until: collectives started one
    // after another, each cancelling its deadline before the next, cost the thread no wake-up.
    if (when < sleeping_until_) cv_.notify_all();
    return id;
  }

  /// Forgets the callback of `id` if it has not started. One that is running finishes.
  void cancel(std::uint64_t id) {
    Callback dropped;  // destroyed outside the lock: it may release the last reference to something
    std::lock_guard lk(m_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->first.id == id) {
        dropped = std::move(it->second);
        nodes_.erase(entries_, it);
        break;
      }
  }

 private:
  DeadlineTimer() = default;

  struct Key {
    Clock::time_point when;
    std::uint64_t id;
    bool operator<(const Key& o) const noexcept { return when != o.when ? when < o.when : id < o.id; }
  };
  using Entries = std::map<Key, Callback>;

  // Cancelling never wakes the thread: it wakes at the time it chose, finds the entry gone and
  // sleeps until the next one (or until a new entry is due earlier).
  void run() {
    std::unique_lock lk(m_);
    while (!stopping_) {
      if (entries_.empty()) {
        sleeping_until_ = Clock::time_point::max();
        cv_.wait(lk);
        sleeping_until_ = Clock::time_point::min();
        continue;
      }
      auto first = entries_.begin();
      // A copy: the entry may be cancelled (erased) while we wait.
      const Clock::time_point when = first->first.when;
      if (Clock::now() < when) {
        sleeping_until_ = when;
        cv_.wait_until(lk, when);
        sleeping_until_ = Clock::time_point::min();
        continue;
      }
      Callback f = std::move(first->second);
      nodes_.erase(entries_, first);
      lk.unlock();
      {
        // What the callback starts must not block this thread (see in_async_context()).
        xdev::detail::async_scope scope;
        try {
          f();
        } catch (...) {  // a deadline callback reports through its collective; never lose the timer
        }
        f = nullptr;
      }
      lk.lock();
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  Entries entries_;
  xdev::detail::NodeCache<Entries> nodes_;  // of ended entries (their callbacks moved out)
  std::uint64_t last_id_ = 0;
  bool stopping_ = false;
  // When the thread will next look at the entries by itself: min() while it is awake.
  Clock::time_point sleeping_until_ = Clock::time_point::min();
  std::thread thread_;
};

// ---- the driver --------------------------------------------------------------------------------

/// A step that must have completed before another may start: step `step` of participant `who`.
struct StepRef {
  std::size_t who;
  std::size_t step;
};

/// Runs one collective: every participant (one mesh device) has a program of steps, numbered from
/// 0. Step 0 is the participant's *arrival*: a marker on its default stream that completes when
/// the work submitted there before the collective has completed. Every later step submits a few
/// operations (region copies, portable ops) on the same stream, and may depend on steps of other
/// participants (`deps`), which is how a device waits for the data of its ring predecessor.
///
/// Driving. Nothing ever blocks a thread on device work. A step is *submitted* once its
/// dependencies have *completed* and every earlier step of its participant has been submitted
/// (stream order then runs them in order); it *completes* when every operation it submitted has
/// delivered its completion. Completions arrive on backend threads; each one records itself and
/// calls `drive()`, which scans for newly ready steps and submits them. Only one thread drives at
/// a time (the others just leave their record), so every participant's steps reach its stream in
/// program order, and submissions from a completion handler never block (they are parked in the
/// device's first-come-first-served queue when its in-flight bound is reached).
///
/// Ending. The collective completes once, with the first error any operation reported, with a
/// `deadline_exceeded` error naming the stuck participants when the deadline passes first, or
/// with success when every step has completed. From then on no step is started. Operations
/// already submitted still run; their completions hold this object (and its temporaries) alive.
class CollectiveDriver : public std::enable_shared_from_this<CollectiveDriver> {
 public:
  using Finish = xdev::detail::unique_function<void(std::exception_ptr)>;

  /// The collective `plan` (its `what` names the collective in messages, "all_reduce over axis
  /// 'data'"), with one participant per array of `plan.in`, on that array's device. Every program
  /// is one step long (the arrival) until `set_steps`; the derived class sets them and calls
  /// `lay_out` in its constructor.
  explicit CollectiveDriver(CollectivePlan plan) : plan_(std::move(plan)), parts_(plan_.in.size()) {}
  CollectiveDriver(const CollectiveDriver&) = delete;
  CollectiveDriver& operator=(const CollectiveDriver&) = delete;

  virtual ~CollectiveDriver() {
    // Only reachable without a result when the collective was never started.
    if (finish_)
      finish_(std::make_exception_ptr(error(errc::internal, plan_.what + " was abandoned before it completed")));
  }

  /// "all_reduce over axis 'data'": the collective, for messages (as long as this object lives).
  [[nodiscard]] const std::string& what() const noexcept { return plan_.what; }

  /// Starts the collective: `finish` receives its outcome exactly once, at the latest `timeout`
  /// from now. Must be called on a thread in an async context (the initiation sets one up), so
  /// that no submission blocks it.
  void start(std::chrono::milliseconds timeout, Finish finish) {
    {
      std::lock_guard lk(m_);
      finish_ = std::move(finish);
      timeout_ = timeout;
    }
    const auto now = DeadlineTimer::Clock::now();
    const auto max_wait = DeadlineTimer::Clock::time_point::max() - now;
    const auto when = timeout >= max_wait ? DeadlineTimer::Clock::time_point::max()
                                          : now + std::chrono::duration_cast<DeadlineTimer::Clock::duration>(timeout);
    std::weak_ptr<CollectiveDriver> weak = weak_from_this();
    std::uint64_t id = 0;
    try {
      id = DeadlineTimer::instance().schedule(when, [weak] {
        if (auto self = weak.lock()) self->on_deadline();
      });
    } catch (...) {
      // No deadline could be set (no thread for the timer, no memory): the collective fails
      // through its token, before any step was submitted.
      std::unique_lock lk(m_);
      error_ = std::current_exception();
      finished_ = true;
      settle(lk);
      return;
    }
    bool fired;
    {
      std::lock_guard lk(m_);
      fired = delivered_;
      if (!fired) {
        timer_id_ = id;
        timer_set_ = true;
      }
    }
    if (fired) DeadlineTimer::instance().cancel(id);
    drive();
  }

 protected:
  /// The steps that must have completed before step `step` of participant `who` may start (the
  /// participant's own earlier steps are implied: they are submitted first on the same stream).
  virtual void deps(std::size_t who, std::size_t step, std::vector<StepRef>& out) const = 0;
  /// Submits step `step` of participant `who` (never 0). Every operation takes a token from
  /// `token(who, step)`. Throws to fail the collective (an allocation, a rejected submission).
  virtual void run_step(std::size_t who, std::size_t step) = 0;
  /// Frees the temporaries (called once nothing submitted can touch them any more).
  virtual void release_temporaries() noexcept = 0;

  [[nodiscard]] const CollectivePlan& plan() const noexcept { return plan_; }
  /// Participant `p`'s device.
  [[nodiscard]] const AnyDevice& device(std::size_t p) const noexcept { return plan_.in[p].device; }

  /// Sets the length of participant `p`'s program (at least 1: the arrival); then `lay_out`.
  void set_steps(std::size_t p, std::size_t steps) noexcept { parts_[p].steps = steps < 1 ? 1 : steps; }
  /// Sizes the per-step records once every program's length is set (before `start`). Every
  /// record of the collective lives in one of four blocks allocated here: a call costs the same
  /// few allocations however many devices and steps it has.
  void lay_out() {
    std::size_t at = 0;
    for (auto& part : parts_) {
      part.first = at;
      at += part.steps;
    }
    total_steps_ = at;
    state_.assign(at, StepState{});
    ready_.reserve(at);
    scratch_.reserve(parts_.size());
  }

  /// A completion handler (`void(std::exception_ptr)`) for one operation of step `step` of
  /// participant `who`: the step completes when all of its operations have. A handler that is
  /// destroyed without being called (its operation was discarded) counts as failed.
  class StepToken {
   public:
    /// Run at once even inside the submission that completed it (see `xdev::detail::deliver`):
    /// it only records the completion and submits the steps that became ready; the user's
    /// handler is delivered by `settle`, under the initiating function's rule.
    using completes_at_once = void;

    StepToken(std::shared_ptr<CollectiveDriver> d, std::size_t who, std::size_t step) noexcept
        : d_(std::move(d)), who_(who), step_(step), unwinding_(std::uncaught_exceptions()) {}
    StepToken(StepToken&& o) noexcept : d_(std::move(o.d_)), who_(o.who_), step_(o.step_), unwinding_(o.unwinding_) {}
    StepToken& operator=(StepToken&&) = delete;
    StepToken(const StepToken&) = delete;
    StepToken& operator=(const StepToken&) = delete;
    ~StepToken() {
      if (!d_) return;
      // Dropped by a submission that is throwing: that exception reaches the driver and is the
      // error to report, so this one only stops counting the operation.
      if (std::uncaught_exceptions() > unwinding_) {
        d_->arrive(who_, step_, nullptr);
        return;
      }
      d_->arrive(who_, step_,
                 std::make_exception_ptr(error(errc::cancelled, "an operation of " + d_->plan_.what + " on " +
                                                                    d_->device(who_).name() +
                                                                    " was discarded before it ran")));
    }
    void operator()(std::exception_ptr ep) {
      auto d = std::move(d_);
      d->arrive(who_, step_, std::move(ep));
    }

   private:
    std::shared_ptr<CollectiveDriver> d_;
    std::size_t who_;
    std::size_t step_;
    int unwinding_;
  };

  /// Counts one more operation of step `step` of `who`; its handler is the returned token. When
  /// the submission itself throws, the token is destroyed unused, which fails the step: callers
  /// catch nothing.
  StepToken token(std::size_t who, std::size_t step) {
    std::lock_guard lk(m_);
    ++step_locked(who, step).pending;
    ++outstanding_;
    return StepToken(shared_from_this(), who, step);
  }

 private:
  // A participant's program.
  struct Part {
    std::size_t steps = 1;      // its length
    std::size_t first = 0;      // where its steps' records start in state_
    std::size_t next = 0;       // the next step to submit
    std::size_t completed = 0;  // every step below this one has completed
  };
  struct StepState {
    std::size_t pending = 0;  // operations (and the driver's hold) not yet completed
    bool done = false;
  };
  StepState& step_locked(std::size_t who, std::size_t step) noexcept { return state_[parts_[who].first + step]; }

  // Besides its own dependencies, every later step waits for its participant's arrival: a device
  // that never arrives then has nothing of the collective queued but the marker.
  bool deps_met_locked(std::size_t who, std::size_t step, std::vector<StepRef>& scratch) const {
    if (step == 0) return true;
    if (parts_[who].completed == 0) return false;
    scratch.clear();
    deps(who, step, scratch);
    return std::all_of(scratch.begin(), scratch.end(),
                       [&](const StepRef& r) { return parts_[r.who].completed > r.step; });
  }

  // Submits every step that is ready, until none is. See the class comment.
  void drive() {
    std::unique_lock lk(m_);
    if (driving_) return;  // the driving thread rescans after its current batch
    driving_ = true;
    // The driving thread's own (driving_ keeps every other one out): reserved by lay_out.
    std::vector<StepRef>& ready = ready_;
    for (;;) {
      ready.clear();
      if (!finished_) {
        for (std::size_t p = 0; p < parts_.size(); ++p) {
          auto& pr = parts_[p];
          while (pr.next < pr.steps && deps_met_locked(p, pr.next, scratch_)) {
            // The driver's hold: the step cannot complete while its operations are being submitted.
            ++step_locked(p, pr.next).pending;
            ++outstanding_;
            ready.push_back({p, pr.next++});
          }
        }
      }
      if (ready.empty()) {
        driving_ = false;
        return;
      }
      lk.unlock();
      for (const auto& r : ready) {
        std::exception_ptr ep;
        if (!stopped()) {
          try {
            if (r.step != 0)
              run_step(r.who, r.step);
            else
              arrive_marker(r.who);
          } catch (const error& e) {
            // Say which collective failed; the message already names the device.
            ep = std::make_exception_ptr(error(e.condition(), plan_.what + ": " + e.message()));
          } catch (...) {
            ep = std::current_exception();
          }
        }
        arrive(r.who, r.step, std::move(ep));  // releases the hold
      }
      lk.lock();
    }
  }

  bool stopped() {
    std::lock_guard lk(m_);
    return finished_;
  }

  // Step 0: an empty operation on the participant's default stream.
  void arrive_marker(std::size_t who) {
    const auto& d = device(who);
    xdev::detail::submit<void>(
        d.queue(), d.queue()->default_chain(), nullptr, [](Completion done) { done(nullptr); }, token(who, 0));
  }

  // One operation (or the driver's hold) of step `step` of `who` has completed.
  void arrive(std::size_t who, std::size_t step, std::exception_ptr ep) {
    std::unique_lock lk(m_);
    --outstanding_;
    auto& pr = parts_[who];
    if (ep && !error_ && !delivered_) error_ = std::move(ep);
    if (StepState& st = step_locked(who, step); --st.pending == 0) {
      st.done = true;
      while (pr.completed < pr.steps && step_locked(who, pr.completed).done) {
        ++pr.completed;
        ++completed_steps_;
      }
    }
    const bool all_done = completed_steps_ == total_steps_;
    if (error_ || all_done) finished_ = true;
    settle(lk);
    if (!finished_) {
      lk.unlock();
      drive();
    }
  }

  // Delivers the outcome once it is known; frees the temporaries once nothing can touch them.
  void settle(std::unique_lock<std::mutex>& lk) {
    const bool release = finished_ && outstanding_ == 0 && !released_;
    if (release) released_ = true;
    Finish fin;
    std::exception_ptr ep;
    bool cancel_timer = false;
    const std::uint64_t timer_id = timer_id_;
    if (finished_ && !delivered_ && (error_ || completed_steps_ == total_steps_)) {
      delivered_ = true;
      fin = std::move(finish_);
      finish_ = nullptr;
      ep = error_;
      cancel_timer = timer_set_;
      timer_set_ = false;
    }
    if (!release && !fin) return;
    lk.unlock();
    // Temporaries first: whoever learns of success may check the devices' memory at once.
    if (release) release_temporaries();
    if (cancel_timer) DeadlineTimer::instance().cancel(timer_id);
    if (fin) fin(std::move(ep));
    lk.lock();
  }

  void on_deadline() {
    std::unique_lock lk(m_);
    if (finished_) return;
    error_ = std::make_exception_ptr(error(errc::deadline_exceeded, deadline_message_locked()));
    finished_ = true;
    timer_set_ = false;
    settle(lk);
  }

  // "<what> did not complete within 200 ms: HOST:2 did not arrive (step 0 of 6); waiting: ..."
  std::string deadline_message_locked() const {
    std::string stuck;
    std::string waiting;
    for (std::size_t p = 0; p < parts_.size(); ++p) {
      const auto& pr = parts_[p];
      if (pr.completed == pr.steps) continue;
      const std::string of = " of " + std::to_string(pr.steps - 1);
      if (pr.next > pr.completed) {  // it has work submitted that has not completed
        if (!stuck.empty()) stuck += "; ";
        stuck += device(p).name() + (pr.completed == 0 ? " did not arrive (step 0" + of + ")"
                                                       : " did not complete step " + std::to_string(pr.completed) + of);
      } else {
        if (!waiting.empty()) waiting += ", ";
        waiting += device(p).name() + " (before step " + std::to_string(pr.next) + of + ")";
      }
    }
    std::string msg = plan_.what + " did not complete within " + std::to_string(timeout_.count()) + " ms: ";
    msg += stuck.empty() ? std::string("no device had work pending") : stuck;
    if (!waiting.empty()) msg += "; waiting for them: " + waiting;
    return msg;
  }

  const CollectivePlan plan_;
  std::size_t total_steps_ = 0;

  std::mutex m_;
  std::vector<Part> parts_;
  std::vector<StepState> state_;  // per step of every participant, parts_[p].first on
  std::vector<StepRef> ready_;    // drive()'s, on the driving thread only
  std::vector<StepRef> scratch_;  // deps_met_locked()'s, on the driving thread only
  std::size_t completed_steps_ = 0;
  std::size_t outstanding_ = 0;
  bool driving_ = false;
  bool finished_ = false;   // no further step starts
  bool delivered_ = false;  // `finish_` has been called
  bool released_ = false;   // the temporaries are gone
  std::exception_ptr error_;
  Finish finish_;
  std::chrono::milliseconds timeout_{0};
  std::uint64_t timer_id_ = 0;
  bool timer_set_ = false;
};

}  // namespace xdev::spmd::detail
