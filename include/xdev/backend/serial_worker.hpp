/// \file
/// `xdev::SerialWorker`: one thread that runs posted host tasks in order — what a backend that
/// executes on threads of its own needs (the REF plugin runs each device on one; the OpenCL plugin
/// runs host tasks on one).
#pragma once

#include <xdev/backend/completion.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace xdev {

/// A thread running posted jobs one after another, in the order they were posted. Destroying it
/// runs the jobs already posted, then joins the thread. Jobs report their own failures: one that
/// throws terminates the program, like any exception escaping a thread.
///
/// By default the thread sleeps as soon as it has nothing to run, and a post wakes it. Given a
/// spin budget, it first looks for the next job for that long, yielding its core between looks:
/// a worker that receives one job right after another (a chain of collectives) then takes the
/// next without a sleep and a wake-up, at the price of up to that much CPU after its last job.
class SerialWorker {
 public:
  SerialWorker() : SerialWorker(std::chrono::microseconds(0)) {}
  explicit SerialWorker(std::chrono::microseconds spin_before_sleep)
      : spin_(spin_before_sleep), thread_([this] { loop(); }) {}
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;
  ~SerialWorker() {
    {
      std::lock_guard lk(m_);
      stopping_ = true;
      has_work_.store(true, std::memory_order_release);  // ends a spin at once
    }
    cv_.notify_one();
    thread_.join();
  }

  /// Queues `job` behind the jobs already posted. Thread-safe.
  void post(HostTask job) {
    // Notified under the lock: once the job runs, its completion may lead to this worker's
    // destruction, which must not find the posting thread still inside notify_one.
    std::lock_guard lk(m_);
    jobs_.push_back(std::move(job));
    has_work_.store(true, std::memory_order_release);
    if (sleeping_) cv_.notify_one();  // a spinning or busy worker finds the job without it
  }

 private:
  void loop() {
    for (;;) {
      if (spin_.count() > 0) look_for_work();
      HostTask job;
      {
        std::unique_lock lk(m_);
        if (!stopping_ && jobs_.empty()) {
          sleeping_ = true;
          cv_.wait(lk, [&] { return stopping_ || !jobs_.empty(); });
          sleeping_ = false;
        }
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
        has_work_.store(!jobs_.empty() || stopping_, std::memory_order_relaxed);
      }
      job();
    }
  }

  // Waits, without the lock, until a job is posted or the spin budget is spent.
  void look_for_work() const {
    const auto deadline = std::chrono::steady_clock::now() + spin_;
    while (!has_work_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
  }

  const std::chrono::microseconds spin_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<HostTask> jobs_;
  bool stopping_ = false;
  bool sleeping_ = false;              // the thread waits on cv_ (guarded by m_)
  std::atomic<bool> has_work_{false};  // jobs_ is not empty, or stopping_: read without the lock
  std::thread thread_;                 // last: starts after the members it uses exist
};

}  // namespace xdev
