/// \file
/// `xdev::DeviceQueue`: a device's execution bookkeeping — in-flight bound, kept errors, shutdown.
#pragma once

#include <xdev/async/detail/op_chain.hpp>
#include <xdev/async/throttle.hpp>
#include <xdev/core/error.hpp>

#include <atomic>
#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace xdev {

/// Counters of one device's execution, readable at any time.
struct ExecutionStats {
  std::size_t submitted = 0;       ///< operations admitted (transfers and host functions)
  std::size_t completed = 0;       ///< operations whose completion was delivered
  std::size_t failed = 0;          ///< completed with an error
  std::size_t throttle_waits = 0;  ///< submissions that had to wait for an in-flight slot
  std::size_t max_inflight = 0;    ///< the bound in force
  std::size_t inflight_high_water = 0;
};

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

  /// \throws xdev::error `errc::unavailable` once the device has been shut down.
  void check_open() const {
    if (closed_.load(std::memory_order_acquire)) throw shut_down_error();
  }

  /// Rejects new submissions, then waits for every admitted one to complete.
  void close() {
    closed_.store(true, std::memory_order_release);
    throttle_.close();
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

  /// Waits for all in-flight work, then rethrows the oldest kept error (the rest stay for the
  /// following calls, so none is lost).
  void synchronize() {
    throttle_.wait_idle();
    std::exception_ptr first;
    {
      std::lock_guard lk(m_);
      if (kept_.empty()) return;
      first = std::move(kept_.front());
      kept_.pop_front();
    }
    std::rethrow_exception(first);
  }

  /// Number of errors kept and not yet raised.
  [[nodiscard]] std::size_t kept_errors() const {
    std::lock_guard lk(m_);
    return kept_.size();
  }

  void note_submitted() noexcept { submitted_.fetch_add(1, std::memory_order_relaxed); }
  void note_completed(bool failed) noexcept {
    completed_.fetch_add(1, std::memory_order_relaxed);
    if (failed) failed_.fetch_add(1, std::memory_order_relaxed);
  }

  [[nodiscard]] ExecutionStats stats() const {
    return {submitted_.load(std::memory_order_relaxed),
            completed_.load(std::memory_order_relaxed),
            failed_.load(std::memory_order_relaxed),
            throttle_.waits(),
            throttle_.limit(),
            throttle_.high_water()};
  }

 private:
  std::string name_;
  Throttle throttle_;
  std::shared_ptr<detail::OpChain> default_chain_;
  std::atomic<bool> closed_{false};
  mutable std::mutex m_;
  std::deque<std::exception_ptr> kept_;
  std::atomic<std::size_t> submitted_{0};
  std::atomic<std::size_t> completed_{0};
  std::atomic<std::size_t> failed_{0};
};

}  // namespace xdev
