/// \file
/// `xdev::SerialWorker`: one thread that runs posted host tasks in order — what a backend that
/// executes on threads of its own needs (the REF plugin runs each device on one; the OpenCL plugin
/// runs host tasks on one).
#pragma once

#include <xdev/backend/completion.hpp>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace xdev {

/// A thread running posted jobs one after another, in the order they were posted. Destroying it
/// runs the jobs already posted, then joins the thread. Jobs report their own failures: one that
/// throws terminates the program, like any exception escaping a thread.
class SerialWorker {
 public:
  SerialWorker() : thread_([this] { loop(); }) {}
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;
  ~SerialWorker() {
    {
      std::lock_guard lk(m_);
      stopping_ = true;
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
    cv_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      HostTask job;
      {
        std::unique_lock lk(m_);
        cv_.wait(lk, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::deque<HostTask> jobs_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace xdev
