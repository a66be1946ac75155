/// \file
/// `detail::make_reaped`: objects whose last release may happen on a thread they own (for xdev's
/// own layers: the registry's runtimes, the SPMD virtual device's runtime).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace xdev {

namespace detail {

/// Runs, on a thread of its own, the destructions that must not run where the last owner let go.
/// A runtime's last handle can be released on one of its backend's own threads (a completion held
/// it); destroying the runtime there would make the backend join the thread it runs on. Its
/// destructor runs what is pending and joins.
class Reaper {
 public:
  static Reaper& instance() {
    static Reaper r;
    return r;
  }
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;
  ~Reaper() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
    // Jobs queued while no thread could be started, or by the jobs run here: run now, at exit,
    // rather than leaked. One at a time, since a job may queue another.
    for (;;) {
      std::function<void()> job;
      {
        std::lock_guard lock(mutex_);
        if (jobs_.empty()) break;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  void defer(std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
      // Once stopping, no thread is started (nobody would join it): the destructor runs the job.
      if (!thread_.joinable() && !stopping_) {
        try {
          thread_ = std::thread([this] { loop(); });
        } catch (...) {
          // No thread now (the system's limit, memory): the job stays queued for the next call that can
          // start one, or for the destructor. This runs in a deleter, which must not throw.
        }
      }
    }
    cv_.notify_one();
  }

 private:
  Reaper() = default;
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and nothing left
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

/// A new `T` whose last release destroys it at once on the thread that made it, and on the
/// `Reaper`'s thread anywhere else (see `Reaper`).
template <class T, class... Args>
std::shared_ptr<T> make_reaped(Args&&... args) {
  (void)Reaper::instance();  // made before the object, so destroyed after it
  return std::shared_ptr<T>(new T(std::forward<Args>(args)...), [creator = std::this_thread::get_id()](T* p) {
    if (std::this_thread::get_id() == creator)
      delete p;
    else
      Reaper::instance().defer([p] { delete p; });
  });
}

}  // namespace detail

}  // namespace xdev
