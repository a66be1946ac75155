/// \file
/// `xdev::DeviceQueue`: a device's execution bookkeeping — in-flight bound, kept errors, shutdown.
#pragma once

#include <xdev/async/detail/op_chain.hpp>
#include <xdev/async/throttle.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/metrics.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
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
