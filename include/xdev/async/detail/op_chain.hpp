/// \file
/// The in-order chain behind a `Stream`: each operation starts when the one before it completed.
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/core/detail/block_pool.hpp>
#include <xdev/core/detail/spin_mutex.hpp>
#include <xdev/core/error.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <utility>

namespace xdev::detail {

class OpChain;

/// A backend's native in-order queue behind a chain (see `concepts::NativeQueues`). Destroying it
/// destroys the backend queue; the chain does that only after every operation on it has completed.
class NativeQueue {
 public:
  virtual ~NativeQueue() = default;
  /// Routes the calling thread's backend calls for the queue's device to this queue, until
  /// `unbind`.
  virtual void bind() noexcept = 0;
  virtual void unbind() noexcept = 0;

  // Native markers (`concepts::NativeMarkers`); a queue without them keeps the defaults.

  /// Whether this queue records markers, and whether it can wait on those of `other` (a queue of
  /// the same backend object and device).
  [[nodiscard]] virtual bool has_markers() const noexcept { return false; }
  [[nodiscard]] virtual bool shares_markers_with(const NativeQueue& other) const noexcept {
    (void)other;
    return false;
  }
  /// With this queue bound: a marker that calls `done` once everything enqueued before it on the
  /// queue has completed.
  virtual std::uint64_t record_marker(Completion done) {
    (void)done;
    throw error(errc::unimplemented, "this queue has no native markers");
  }
  /// With this queue bound: later work waits for `marker`, recorded on a queue this one shares
  /// markers with.
  virtual void wait_marker(std::uint64_t marker) {
    (void)marker;
    throw error(errc::unimplemented, "this queue has no native markers");
  }
  virtual void release_marker(std::uint64_t marker) noexcept { (void)marker; }
};

/// Completion handlers handed to an executor and not yet run (or destroyed unrun). What
/// `synchronize()` waits for after the work itself, so that a callback that was deferred out of
/// its initiating function has run when `synchronize()` returns.
class HandlerCount {
 public:
  void add() noexcept { n_.fetch_add(1, std::memory_order_relaxed); }
  void remove() noexcept {
    if (n_.fetch_sub(1, std::memory_order_acq_rel) == 1) n_.notify_all();
  }
  /// Waits until no handler is pending.
  void wait() const noexcept {
    for (std::size_t v = n_.load(std::memory_order_acquire); v != 0; v = n_.load(std::memory_order_acquire))
      n_.wait(v, std::memory_order_acquire);
  }
  /// `wait`, giving up at `deadline` (it looks every 100 µs: for shutdowns, not hot paths).
  /// Returns whether no handler is pending.
  [[nodiscard]] bool wait_until(std::chrono::steady_clock::time_point deadline) const noexcept {
    while (n_.load(std::memory_order_acquire) != 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
  }

 private:
  std::atomic<std::size_t> n_{0};
};

/// One queued operation, allocated once per submission (from the block pool) and holding all it
/// needs until its completion has been delivered: how to start it, its handler, its result. The
/// chain links nodes through `next`, so queueing allocates nothing.
///
/// Two references keep a started node alive: the starter's and the backend's `Completion`. The
/// node completes exactly once, whether the backend calls the completion, throws from the call
/// that starts the work, or destroys the completion unrun.
class ChainNode {
 public:
  ChainNode() = default;
  ChainNode(const ChainNode&) = delete;
  ChainNode& operator=(const ChainNode&) = delete;

  static void* operator new(std::size_t bytes) { return block_pool::instance().allocate(bytes); }
  static void operator delete(void* p, std::size_t bytes) noexcept { block_pool::instance().deallocate(p, bytes); }

  /// Whether the work of this node is an operation (true) or an ordering marker that may wait
  /// for something outside the device, such as an event another stream has not reached yet.
  [[nodiscard]] virtual bool is_operation() const noexcept { return true; }

  /// Drops the submitter's reference to a node that was never started.
  void discard() noexcept { unref(); }

  /// Drops a node that its device refused before queueing it (it was shut down). A node that
  /// `reports_refusal()` delivers `ep` through its handler first; for the others the submitting
  /// call throws.
  void refuse(std::exception_ptr ep) noexcept {
    deliver_refusal(std::move(ep));
    unref();
  }
  /// Whether `refuse` hands the error to the node's handler: true for a handler that cannot see
  /// an exception thrown by the submitting call (a coroutine's, see `submit_node`).
  [[nodiscard]] virtual bool reports_refusal() const noexcept { return false; }

  /// On a chain with a native queue: whether the work is one enqueue on the bound queue, which the
  /// backend orders after the work before it (transfers, host tasks, ops). Other work (a
  /// collective step, a marker) waits on the host until everything before it has completed, and
  /// holds back everything after it until it has completed, as on a chain without a queue.
  [[nodiscard]] virtual bool queue_ordered() const noexcept { return false; }

  /// Gives the node to the chain it will run on (which it keeps alive until it completes).
  inline void bind(std::shared_ptr<OpChain> chain) noexcept;
  /// Queues the node on its chain (which then owns it).
  inline void push();

 protected:
  virtual ~ChainNode() = default;

  /// Starts the work; `done` must eventually be called exactly once (a throw counts as a call).
  virtual void launch(Completion done) = 0;
  /// Delivers the outcome (the handler, the in-flight slot); runs before the next node starts.
  virtual void finish(std::exception_ptr ep) noexcept = 0;
  /// `refuse`'s delivery (a node that holds no slot): nothing unless `reports_refusal()`.
  virtual void deliver_refusal(std::exception_ptr ep) noexcept { (void)ep; }

  /// The chain the node is bound to (from `bind` until the node completes).
  [[nodiscard]] const std::shared_ptr<OpChain>& chain() const noexcept { return chain_ref_; }

  /// From `finish`: whether an operation waits on this node's chain (see OpChain::operation_queued).
  [[nodiscard]] inline bool chain_has_operation_queued() const;

  /// From `finish`: where the device ran the work, when its backend reported it (see
  /// `report_device_times`).
  [[nodiscard]] const std::optional<DeviceTimes>& device_times() const noexcept { return device_times_; }

 private:
  friend class OpChain;

  // The Completion a backend gets: a pointer to the node (stored inline, no allocation).
  class completion_ref {
   public:
    explicit completion_ref(ChainNode* n) noexcept : n_(n) {}
    completion_ref(completion_ref&& o) noexcept : n_(std::exchange(o.n_, nullptr)) {}
    completion_ref& operator=(completion_ref&&) = delete;
    ~completion_ref() {
      if (ChainNode* n = std::exchange(n_, nullptr)) n->dropped();
    }
    void operator()(std::exception_ptr ep) {
      if (ChainNode* n = std::exchange(n_, nullptr)) {
        n->device_times_ = take_device_times();  // what the backend reported for this completion
        n->complete(std::move(ep));
        n->unref();
      }
    }

   private:
    ChainNode* n_;
  };

  void start() noexcept {
    refs_.fetch_add(1, std::memory_order_relaxed);  // the completion's reference
    std::exception_ptr thrown;
    try {
      launch(Completion(completion_ref(this)));
    } catch (...) {
      thrown = std::current_exception();
    }
    int s = launching;
    if (!launch_state_.compare_exchange_strong(s, launched, std::memory_order_acq_rel) || thrown)
      complete(thrown ? std::move(thrown) : dropped_error());
    unref();  // the starter's
  }

  // The backend let go of the completion without calling it. During the call that starts the
  // work this is part of that call failing (its exception is the error, see start()); later it
  // would leave the stream and the in-flight slot stuck forever, so the operation fails instead.
  void dropped() noexcept {
    int s = launching;
    if (!launch_state_.compare_exchange_strong(s, dropped_while_launching, std::memory_order_acq_rel))
      complete(dropped_error());
    unref();
  }

  static std::exception_ptr dropped_error() {
    return std::make_exception_ptr(
        error(errc::internal, "the backend destroyed the completion of an operation without calling it"));
  }

  inline void complete(std::exception_ptr ep) noexcept;

  // A native chain's turn for this node: deliver, then drop the chain's reference.
  void deliver_native(std::exception_ptr ep) noexcept {
    finish(std::move(ep));
    const std::shared_ptr<OpChain> keep = std::move(chain_ref_);  // the chain outlives this call
    unref();
  }

  // Completes a node that a poisoned chain will not start, with the chain's error.
  void fail_unstarted(std::exception_ptr ep) noexcept {
    complete(std::move(ep));
    unref();  // the starter's
  }

  void unref() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  ChainNode* next_ = nullptr;
  // Native chains: the outcome, kept until the node's turn to be delivered comes; whether this
  // node holds back the starts after it.
  std::exception_ptr result_;
  std::optional<DeviceTimes> device_times_;  // set before `complete`, read by `finish`
  bool done_ = false;
  bool holds_back_ = false;
  OpChain* chain_ = nullptr;  // kept alive by chain_ref_ until the node completes
  std::shared_ptr<OpChain> chain_ref_;
  std::atomic<int> refs_{1};
  std::atomic<bool> fired_{false};
  enum : int { launching, launched, dropped_while_launching };
  std::atomic<int> launch_state_{launching};
};

/// Runs nodes one after another. A node that completes inside its own start (a synchronous
/// backend) does not recurse into the next: the chain loops instead, so a long queue never grows
/// the stack.
///
/// With a native queue (`set_native_queue`), the chain hands each operation to the backend's
/// in-order queue as soon as it is pushed, without waiting for the ones before it, and delivers
/// the completions in submission order whatever order the backend reports them in. Work that is not
/// queue-ordered (see `ChainNode::queue_ordered`) keeps the host ordering of a chain without one.
class OpChain : public std::enable_shared_from_this<OpChain> {
 public:
  OpChain() = default;
  explicit OpChain(std::unique_ptr<NativeQueue> queue) : queue_(std::move(queue)) {}
  OpChain(const OpChain&) = delete;
  OpChain& operator=(const OpChain&) = delete;

  [[nodiscard]] bool native() const noexcept { return queue_ != nullptr; }
  /// The chain's id, unique in the process (what profiler hooks call the stream).
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  /// The native queue, or null for a host chain.
  [[nodiscard]] NativeQueue* native_queue() const noexcept { return queue_.get(); }

  /// Queues `n`, bound to this chain (which now owns it); starts it at once when the chain is idle.
  void push(ChainNode* n) {
    if (queue_) return push_native(n);
    {
      std::lock_guard lk(m_);
      append_locked(n);
      if (busy_) return;
      busy_ = true;
    }
    run_next();
  }

  /// Poisoning (`ErrorPolicy::poison`): once an operation on the chain fails, later operations
  /// fail at once with that error instead of running. Markers still run.
  void set_poison_on_error(bool on) noexcept { poison_on_error_ = on; }
  [[nodiscard]] bool poisons_on_error() const noexcept { return poison_on_error_; }
  /// The error that poisoned the chain, or null.
  [[nodiscard]] std::exception_ptr poison() const {
    std::lock_guard lk(m_);
    return poison_;
  }
  /// Lets later operations run again.
  void clear_poison() {
    std::lock_guard lk(m_);
    poison_ = nullptr;
  }

  /// The handlers of this chain's operations that have been handed on and not yet run.
  [[nodiscard]] HandlerCount& handlers() noexcept { return handlers_; }
  [[nodiscard]] const HandlerCount& handlers() const noexcept { return handlers_; }

  /// Whether an operation (not a marker) waits behind the one completing now: its completion
  /// is then sure to follow without anything from outside the device.
  [[nodiscard]] bool operation_queued() const {
    std::lock_guard lk(m_);
    return head_ != nullptr && head_->is_operation();
  }

 private:
  friend class ChainNode;
  enum class phase { starting, running, completed_while_starting };

  void append_locked(ChainNode* n) noexcept {
    if (tail_)
      tail_->next_ = n;
    else
      head_ = n;
    tail_ = n;
  }
  ChainNode* pop_front_locked() noexcept {
    ChainNode* n = head_;
    head_ = n->next_;
    if (head_ == nullptr) tail_ = nullptr;
    return n;
  }

  // Starts the nodes of a host chain one after another, as the thread that owns the chain (busy_).
  // The lock is taken once per node (to pop it): the submitting thread pushes under the same lock
  // for every operation, so each extra acquisition is a contended cache line. Whether the node
  // completed inside its own start (the loop goes on) or will complete later (its completion goes
  // on, see on_complete) is decided by one exchange on `phase_`, which only the starting and the
  // completing thread touch.
  void run_next() {
    std::unique_lock lk(m_);
    for (;;) {
      ChainNode* n = head_;
      if (n == nullptr) {
        busy_ = false;
        return;
      }
      pop_front_locked();
      std::exception_ptr poisoned = n->is_operation() ? poison_ : nullptr;
      lk.unlock();
      // Before the start: the node's completion (on any thread) comes after it.
      phase_.store(phase::starting, std::memory_order_relaxed);
      if (poisoned)
        n->fail_unstarted(std::move(poisoned));
      else
        n->start();
      phase p = phase::starting;
      if (phase_.compare_exchange_strong(p, phase::running, std::memory_order_acq_rel, std::memory_order_acquire))
        return;   // it completes later, and its completion goes on
      lk.lock();  // it completed inside start(): go on here
    }
  }

  // ---- native queue ----------------------------------------------------------------------
  // head_..tail_: every node pushed and not yet delivered, in order; next_start_: the first not
  // yet started. One thread at a time starts (starting_) and one delivers (delivering_).

  void push_native(ChainNode* n) {
    n->refs_.fetch_add(1, std::memory_order_relaxed);  // the chain's, until delivered
    std::unique_lock lk(m_);
    append_locked(n);
    if (next_start_ == nullptr) next_start_ = n;
    if (starting_) return;
    starting_ = true;
    start_native(lk);
  }

  // Starts what may start now. Called holding the lock, as the one starting thread (starting_);
  // returns without it. The lock is taken once per node started (the submitting thread and the
  // completing one both take it for every operation, so every acquisition counts).
  void start_native(std::unique_lock<SpinMutex>& lk) {
    ChainNode* started = nullptr;  // our reference to the node started last, dropped unlocked
    for (;;) {
      ChainNode* n = next_start_;
      // Held back: by a node that must complete first, or a host-ordered node that must wait for
      // everything before it.
      if (n == nullptr || held_back_ != 0 || (!n->queue_ordered() && n != head_)) {
        starting_ = false;
        lk.unlock();
        if (started != nullptr) started->unref();
        return;
      }
      next_start_ = n->next_;
      if (!n->queue_ordered()) {
        n->holds_back_ = true;
        ++held_back_;
      }
      std::exception_ptr poisoned = n->is_operation() ? poison_ : nullptr;
      n->refs_.fetch_add(1, std::memory_order_relaxed);  // ours: it may be delivered before we look again
      lk.unlock();
      if (started != nullptr) started->unref();
      bool multi_step = false;
      if (poisoned) {
        n->fail_unstarted(std::move(poisoned));
      } else if (n->queue_ordered()) {
        detail::launch_was_multi_step = false;
        queue_->bind();
        n->start();
        queue_->unbind();
        multi_step = std::exchange(detail::launch_was_multi_step, false);
      } else {
        n->start();
      }
      started = n;
      lk.lock();
      if (multi_step && !n->done_) {
        n->holds_back_ = true;
        ++held_back_;
      }
    }
  }

  // A node of a native chain completed: keep the outcome until its turn, deliver what is due.
  void node_done(ChainNode* n, std::exception_ptr ep) {
    std::unique_lock lk(m_);
    n->result_ = std::move(ep);
    n->done_ = true;
    bool resume = false;
    if (n->holds_back_) {
      n->holds_back_ = false;
      resume = --held_back_ == 0;
    }
    if (!delivering_) {
      delivering_ = true;
      while (head_ != nullptr && head_->done_) {
        ChainNode* h = pop_front_locked();
        std::exception_ptr result = std::move(h->result_);
        if (h->is_operation()) {
          if (poison_)
            result = poison_;  // it ran after the failure: its outcome means nothing
          else if (result && poison_on_error_)
            poison_ = result;
        }
        lk.unlock();
        h->deliver_native(std::move(result));
        lk.lock();
        resume = true;  // a host-ordered node may now be at the head
      }
      delivering_ = false;
    }
    if (!resume || starting_) return;
    starting_ = true;
    start_native(lk);
  }

  void on_complete(const std::exception_ptr& failed) {
    if (failed && poison_on_error_) {
      std::lock_guard lk(m_);
      if (!poison_) poison_ = failed;
    }
    // Inside the node's start (a synchronous backend): the starting loop goes on. Else the start
    // has returned (the exchange to `running` happened before this sees it) and this thread goes on.
    phase p = phase::starting;
    if (phase_.compare_exchange_strong(p, phase::completed_while_starting, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
      return;
    run_next();
  }

  std::unique_ptr<NativeQueue> queue_;  // null: the host chain
  const std::uint64_t id_ = next_id();
  static std::uint64_t next_id() noexcept {
    static std::atomic<std::uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }
  ChainNode* next_start_ = nullptr;
  std::size_t held_back_ = 0;
  bool starting_ = false;
  bool delivering_ = false;
  mutable SpinMutex m_;  // taken by the submitting and the completing thread for every operation
  std::exception_ptr poison_;
  bool poison_on_error_ = false;
  HandlerCount handlers_;
  ChainNode* head_ = nullptr;
  ChainNode* tail_ = nullptr;
  bool busy_ = false;
  std::atomic<phase> phase_{phase::running};  // host chain: see run_next
};

inline void ChainNode::bind(std::shared_ptr<OpChain> chain) noexcept {
  chain_ = chain.get();
  chain_ref_ = std::move(chain);
}

inline void ChainNode::push() {
  chain_->push(this);
}

inline bool ChainNode::chain_has_operation_queued() const {
  return chain_->operation_queued();
}

inline void ChainNode::complete(std::exception_ptr ep) noexcept {
  if (fired_.exchange(true, std::memory_order_acq_rel)) return;
  if (chain_->native()) {
    // Held for the whole call: delivering this node (or a later one) may hand the user what lets
    // them drop the stream, while node_done still has the chain's state to settle.
    const std::shared_ptr<OpChain> keep = chain_ref_;
    return keep->node_done(this, std::move(ep));
  }
  // Delivered before the next node starts, so a stream's completions arrive in order.
  const std::exception_ptr failed = is_operation() ? ep : nullptr;
  finish(std::move(ep));
  const std::shared_ptr<OpChain> chain = std::move(chain_ref_);
  chain->on_complete(failed);
}

}  // namespace xdev::detail
