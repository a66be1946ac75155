/// \file
/// `xdev::DeviceQueue`: a device's execution bookkeeping — in-flight bound, kept errors, shutdown.
#pragma once

#include <xdev/async/detail/op_chain.hpp>
#include <xdev/async/detail/progress_counter.hpp>
#include <xdev/async/throttle.hpp>
#include <xdev/core/detail/hooks.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/metrics.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev {

class DeviceQueue;

namespace detail {
// The device whose completion handler this thread is running, and how many levels deep.
inline thread_local const DeviceQueue* running_handler_queue = nullptr;
inline thread_local std::size_t running_handler_depth = 0;

inline std::size_t running_handlers_of(const DeviceQueue* q) noexcept {
  return running_handler_queue == q ? running_handler_depth : 0;
}
}  // namespace detail

/// Counters of one device's execution, readable at any time.
struct ExecutionStats {
  std::size_t submitted = 0;       ///< operations admitted (transfers and host functions)
  std::size_t completed = 0;       ///< operations whose completion was delivered
  std::size_t failed = 0;          ///< completed with an error
  std::size_t throttle_waits = 0;  ///< submissions that had to wait for an in-flight slot
  std::size_t max_inflight = 0;    ///< the bound in force
  std::size_t inflight_high_water = 0;
};

/// Bytes moved into and out of one device by transfers, counted when the transfer is started on
/// the backend. `from_peer`/`to_peer` count copies between two different devices (on the receiving
/// and the sending device); `within` counts copies inside one device.
struct TransferStats {
  std::size_t bytes_from_host = 0;  ///< host→device
  std::size_t bytes_to_host = 0;    ///< device→host
  std::size_t bytes_from_peer = 0;  ///< another device→this device
  std::size_t bytes_to_peer = 0;    ///< this device→another device
  std::size_t bytes_within = 0;     ///< this device→this device
  std::size_t transfers = 0;        ///< transfers that involved this device

  /// Every byte that entered this device's memory from outside it (host or peer).
  [[nodiscard]] std::size_t bytes_in() const noexcept { return bytes_from_host + bytes_from_peer; }
};

/// Which side of a transfer a device was on.
enum class TransferDirection : std::uint8_t { from_host, to_host, from_peer, to_peer, within };

/// Per-device execution state shared by every stream of the device. Users reach it through
/// `Device`; backends never see it.
class DeviceQueue {
 public:
  DeviceQueue(std::string device_name, std::size_t max_inflight)
      : name_(std::move(device_name)), throttle_(max_inflight), default_chain_(std::make_shared<detail::OpChain>()) {}
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] Throttle& throttle() noexcept { return throttle_; }
  [[nodiscard]] const std::shared_ptr<detail::OpChain>& default_chain() const noexcept { return default_chain_; }
  /// Puts the default stream on `chain` (a native queue's): before any work is submitted, or after
  /// `close()`.
  void set_default_chain(std::shared_ptr<detail::OpChain> chain) noexcept { default_chain_ = std::move(chain); }

  /// \throws xdev::error `errc::unavailable` once the device has been shut down.
  void check_open() const {
    if (closed_.load(std::memory_order_acquire)) throw shut_down_error();
  }

  /// Rejects new submissions, then waits for every admitted one to complete and for its
  /// completion handler to have run.
  void close() {
    refuse(false);
    throttle_.wait_idle();
    wait_handlers();
  }

  /// Rejects new submissions from now on. With `cancel_unstarted`, admitted work that has not
  /// started yet is cancelled too: when its turn comes it completes with `errc::cancelled` (its
  /// future, callback or coroutine sees that error) instead of running. Work a backend has been
  /// handed (running, or in a native queue) cannot be taken back.
  void refuse(bool cancel_unstarted) {
    if (cancel_unstarted) aborted_.store(true, std::memory_order_release);
    closed_.store(true, std::memory_order_release);
    throttle_.refuse();
  }

  /// After `refuse`: waits until every admitted operation has completed and its handler has run,
  /// giving up at `deadline`. Returns whether that was reached.
  [[nodiscard]] bool wait_closed_until(std::chrono::steady_clock::time_point deadline) {
    if (!throttle_.wait_idle_until(deadline)) return false;
    if (detail::running_handlers_of(this) != 0) return true;  // from a handler: see wait_handlers
    if (deadline == std::chrono::steady_clock::time_point::max()) {
      handlers_.wait();
      return true;
    }
    return handlers_.wait_until(deadline);
  }

  /// Whether `refuse(true)` cancelled the work not started yet.
  [[nodiscard]] bool cancels_unstarted() const noexcept { return aborted_.load(std::memory_order_acquire); }

  /// The error of an operation cancelled by `refuse(true)`.
  [[nodiscard]] error cancelled_error() const {
    return error(errc::cancelled,
                 "device " + name_ + " was shut down with ShutdownMode::abort before this operation started");
  }

  /// Completion handlers of this device's work that have been handed on and not yet run.
  [[nodiscard]] detail::HandlerCount& handlers() noexcept { return handlers_; }

  /// Waits until every completion handler handed on has run. Called from inside one of this
  /// device's handlers it waits for none: handlers running at the same time would otherwise wait
  /// for each other.
  void wait_handlers() const noexcept {
    if (detail::running_handlers_of(this) == 0) handlers_.wait();
  }

  /// The error a submission gets once the device is shut down.
  [[nodiscard]] error shut_down_error() const {
    return error(errc::unavailable, "device " + name_ + " is shut down and accepts no more work");
  }
  [[nodiscard]] bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }

  /// Keeps an error nobody else will see (its future was dropped, its handler was detached or
  /// threw); the next `synchronize()` raises it.
  void keep_error(std::exception_ptr e) {
    std::lock_guard lk(m_);
    kept_.push_back(std::move(e));
  }

  /// Waits for all in-flight work and its completion handlers, then rethrows the oldest kept
  /// error (the rest stay for the following calls, so none is lost).
  void synchronize() {
    tools::detail::within_activity(tools::Category::synchronize, "synchronize", name_, 0, [&] {
      throttle_.wait_idle();
      wait_handlers();
      raise_kept_error();
    });
  }

  /// Rethrows the oldest kept error, if any, and forgets it.
  void raise_kept_error() {
    std::exception_ptr first;
    {
      std::lock_guard lk(m_);
      if (kept_.empty()) return;
      first = std::move(kept_.front());
      kept_.pop_front();
    }
    std::rethrow_exception(first);
  }

  // Stream-ordered frees. Work is counted in epochs from its submission to its completion (or
  // its discarding); a buffer dropped while work is in flight parks its free in the newest epoch
  // that holds work and starts a new one, and the free runs once every epoch up to it has drained.
  // So memory is never handed to another allocation while work submitted before the drop (on any
  // stream of this device) may still use it, and a device that is never idle still frees.

  // While no free is parked (the common case) there is one epoch, whose work is counted in
  // `single_epoch_` without the lock; parking a free moves the count into `epochs_` under the
  // lock, and draining back to one epoch moves it back.

  /// Counts submitted work in the current epoch; returns the epoch for `leave_epoch`.
  [[nodiscard]] std::uint64_t enter_epoch() {
    std::uint64_t s = single_epoch_.load(std::memory_order_relaxed);
    while ((s & single) != 0) {
      // Counted in the only epoch, which cannot end before this work leaves it: its number holds.
      if (single_epoch_.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed))
        return epoch_base_.load(std::memory_order_relaxed);
    }
    std::lock_guard lk(epoch_m_);
    if ((single_epoch_.load(std::memory_order_relaxed) & single) != 0) {  // back to one epoch meanwhile
      single_epoch_.fetch_add(1, std::memory_order_acquire);
      return epoch_base_.load(std::memory_order_relaxed);
    }
    ++epochs_.back().work;
    return epoch_base_.load(std::memory_order_relaxed) + epochs_.size() - 1;
  }

  /// The work counted by `enter_epoch` returning `e` has completed or been discarded; runs the
  /// frees this allows.
  void leave_epoch(std::uint64_t e) noexcept {
    // With one epoch, `e` is that epoch: an older one would still hold this work.
    std::uint64_t s = single_epoch_.load(std::memory_order_relaxed);
    while ((s & single) != 0) {
      if (single_epoch_.compare_exchange_weak(s, s - 1, std::memory_order_release, std::memory_order_relaxed)) return;
    }
    std::lock_guard lk(epoch_m_);
    if ((single_epoch_.load(std::memory_order_relaxed) & single) != 0) {
      single_epoch_.fetch_sub(1, std::memory_order_release);
      return;
    }
    std::uint64_t base = epoch_base_.load(std::memory_order_relaxed);
    --epochs_[e - base].work;
    while (epochs_.size() > 1 && epochs_.front().work == 0) {
      // Frees only return memory to the allocator (which never calls back here): run them under
      // the lock rather than allocate to carry them out of it.
      for (auto& f : epochs_.front().frees) f();
      epochs_.pop_front();
      epoch_base_.store(++base, std::memory_order_relaxed);
    }
    if (epochs_.size() == 1) {  // nothing parked any more: count without the lock again
      single_epoch_.store(single | std::exchange(epochs_.back().work, 0), std::memory_order_release);
    }
  }

  /// Runs `free` once all work submitted to this device before the call has completed: at once
  /// when none is in flight. `free` must not throw, and must fit a `unique_function` without
  /// allocating (three pointers): a free cannot fail.
  template <class F>
  void release_after_work(F&& free) noexcept {
    static_assert(sizeof(std::decay_t<F>) <= 3 * sizeof(void*), "a stream-ordered free must not allocate");
    // Idle (one epoch, no work in it): nothing submitted before this call can be using the memory,
    // and the locked path below would come to the same answer.
    if (single_epoch_.load(std::memory_order_acquire) == single) {
      free();
      return;
    }
    park_or_wait(detail::unique_function<void()>(std::forward<F>(free)));
  }

  /// Number of errors kept and not yet raised.
  [[nodiscard]] std::size_t kept_errors() const {
    std::lock_guard lk(m_);
    return kept_.size();
  }

  /// The operations completed so far, in a counter that stays readable after this queue is gone.
  [[nodiscard]] const std::atomic<std::size_t>& completed_count() const noexcept { return completed_.get(); }

  /// The operations admitted so far (a word the submitting threads write, the completing ones do not).
  [[nodiscard]] std::size_t admitted_count() const noexcept { return submitted_.load(std::memory_order_relaxed); }
  void note_submitted() noexcept { submitted_.fetch_add(1, std::memory_order_relaxed); }
  void note_completed(bool failed) noexcept {
    completed_.get().fetch_add(1, std::memory_order_relaxed);
    if (failed) failed_.fetch_add(1, std::memory_order_relaxed);
  }

  /// Records a transfer of `bytes` on this device's side `dir` (also in the process-wide metrics
  /// `transfer.<dir>.bytes` and `transfer.<dir>.count`).
  void note_transfer(TransferDirection dir, std::size_t bytes) noexcept {
    transfer_bytes_[static_cast<std::size_t>(dir)].fetch_add(bytes, std::memory_order_relaxed);
    transfers_.fetch_add(1, std::memory_order_relaxed);
    static metrics::Counter* const counters[2 * direction_count] = {
        &metrics::counter("transfer.from_host.bytes"), &metrics::counter("transfer.to_host.bytes"),
        &metrics::counter("transfer.from_peer.bytes"), &metrics::counter("transfer.to_peer.bytes"),
        &metrics::counter("transfer.within.bytes"),    &metrics::counter("transfer.from_host.count"),
        &metrics::counter("transfer.to_host.count"),   &metrics::counter("transfer.from_peer.count"),
        &metrics::counter("transfer.to_peer.count"),   &metrics::counter("transfer.within.count")};
    counters[static_cast<std::size_t>(dir)]->add(bytes);
    counters[direction_count + static_cast<std::size_t>(dir)]->add(1);
  }

  [[nodiscard]] TransferStats transfer_stats() const noexcept {
    auto get = [&](TransferDirection d) {
      return transfer_bytes_[static_cast<std::size_t>(d)].load(std::memory_order_relaxed);
    };
    return {get(TransferDirection::from_host), get(TransferDirection::to_host),
            get(TransferDirection::from_peer), get(TransferDirection::to_peer),
            get(TransferDirection::within),    transfers_.load(std::memory_order_relaxed)};
  }

  [[nodiscard]] ExecutionStats stats() const {
    return {submitted_.load(std::memory_order_relaxed),
            completed_.get().load(std::memory_order_relaxed),
            failed_.load(std::memory_order_relaxed),
            throttle_.waits(),
            throttle_.limit(),
            throttle_.high_water()};
  }

 private:
  std::string name_;
  Throttle throttle_;
  std::shared_ptr<detail::OpChain> default_chain_;
  detail::HandlerCount handlers_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> aborted_{false};
  mutable std::mutex m_;
  std::deque<std::exception_ptr> kept_;
  struct Epoch {
    std::size_t work = 0;
    std::vector<detail::unique_function<void()>> frees;
  };
  // `release_after_work` while work may be in flight: parks `free` in the newest epoch with work.
  void park_or_wait(detail::unique_function<void()> free) noexcept {
    {
      std::lock_guard lk(epoch_m_);
      const std::uint64_t s = single_epoch_.load(std::memory_order_acquire);
      if ((s & single) != 0 && s != single) {  // work in flight: the epochs go under the lock
        epochs_.back().work = single_epoch_.exchange(0, std::memory_order_acq_rel) & ~single;
      }
      // The newest epoch with work in it, if any (the front holds work unless it is the only one).
      Epoch* last = nullptr;
      if (epochs_.back().work != 0)
        last = &epochs_.back();
      else if (epochs_.size() > 1)
        last = &epochs_[epochs_.size() - 2];
      if (last != nullptr) {
        try {
          last->frees.reserve(last->frees.size() + 1);
          last->frees.push_back(std::move(free));
          if (last == &epochs_.back()) epochs_.emplace_back();
          return;
        } catch (...) {
          // No memory to park it: fall through and wait for the device to go idle instead.
        }
      }
      if (epochs_.size() == 1 && (single_epoch_.load(std::memory_order_relaxed) & single) == 0)
        single_epoch_.store(single | std::exchange(epochs_.back().work, 0), std::memory_order_release);
    }
    if (free) {
      wait_for_epochs();
      free();
    }
  }

  void wait_for_epochs() noexcept {
    for (;;) {
      if (single_epoch_.load(std::memory_order_acquire) == single) return;  // one epoch, no work
      {
        std::lock_guard lk(epoch_m_);
        const std::uint64_t s = single_epoch_.load(std::memory_order_acquire);
        if (s == single || ((s & single) == 0 && epochs_.size() == 1 && epochs_.back().work == 0)) return;
      }
      std::this_thread::yield();
    }
  }
  static constexpr std::uint64_t single = std::uint64_t{1} << 63;
  mutable std::mutex epoch_m_;
  std::deque<Epoch> epochs_ = std::deque<Epoch>(1);
  std::atomic<std::uint64_t> single_epoch_{single};  // `single` | the work in the only epoch
  std::atomic<std::uint64_t> epoch_base_{0};         // the number of the oldest epoch
  std::atomic<std::size_t> submitted_{0};
  detail::ProgressCounter completed_;  // outlives this queue: see use_future's `note_work_ahead`
  std::atomic<std::size_t> failed_{0};
  static constexpr std::size_t direction_count = 5;
  std::atomic<std::size_t> transfer_bytes_[direction_count] = {};
  std::atomic<std::size_t> transfers_{0};
};

namespace detail {
/// Records a device→device copy of `bytes` from the device of `src` to the device of `dst`.
inline void note_copy(DeviceQueue& src, DeviceQueue& dst, std::size_t bytes) noexcept {
  if (&src == &dst) {
    src.note_transfer(TransferDirection::within, bytes);
  } else {
    src.note_transfer(TransferDirection::to_peer, bytes);
    dst.note_transfer(TransferDirection::from_peer, bytes);
  }
}
}  // namespace detail

}  // namespace xdev
