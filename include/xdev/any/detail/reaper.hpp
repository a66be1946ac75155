/// \file
/// `detail::make_reaped`: objects whose last release may happen on a thread they own (for xdev's
/// own layers: the registry's runtimes, the SPMD virtual device's runtime).
#pragma once

#include <xdev/plugin/detail/unload_thread.hpp>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace xdev {

namespace detail {

/// Runs, on a thread of its own, the destructions that must not run where the last owner let go.
/// A runtime's last handle can be released on one of its backend's own threads (a completion held
/// it); destroying the runtime there would make the backend join the thread it runs on.
///
/// At exit, what is pending runs and the thread is joined (like a static's destructor, after every
/// static made after the reaper). The reaper's own state is never destroyed: a completion tells the
/// user first and lets go of its device after, so a backend's thread may still hand an object over
/// while the process exits, and must not find a destroyed mutex or condition variable. An object
/// handed over after that drain is kept, not destroyed: the process is ending, and destroying it
/// would need a thread nobody joins. A job that lets go of a plugin library's last reference
/// leaves the library mapped (`plugin::unload_released_libraries`): the reaper's thread may be at
/// work while the process exits, when unmapping a plugin can pull its code from under the exit.
class Reaper {
 public:
  /// One deferred destruction, allocated when its object is made: queueing it (from a deleter,
  /// which must not throw) allocates nothing.
  struct Job {
    Job* next = nullptr;
    void (*destroy)(void*) noexcept = nullptr;
    void* object = nullptr;
  };

  static Reaper& instance() {
    static Reaper* const r = new Reaper;  // never deleted, reachable: see the class
    static const Drain drain{*r};
    return *r;
  }
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  /// Queues `job` (owned from now on) to run on the reaper's thread. Never throws and never
  /// allocates, except to start the thread on first use; when the thread cannot be started (the
  /// system's limit, memory) the job stays queued for the next call that can, or the exit drain.
  void defer(Job* job) noexcept {
    std::lock_guard lock(mutex_);
    (tail_ != nullptr ? tail_->next : head_) = job;
    tail_ = job;
    // Once stopping, no thread is started (nobody would join it): the drain runs the job, or it
    // is kept (see the class).
    if (!thread_.joinable() && !stopping_) {
      try {
        thread_ = std::thread([this] { loop(); });
      } catch (...) {
      }
    }
    cv_.notify_one();
  }

 private:
  /// Runs at exit what the reaper still holds (see the class).
  struct Drain {
    explicit Drain(Reaper& r) noexcept : reaper(r) {}
    Drain(const Drain&) = delete;
    Drain& operator=(const Drain&) = delete;
    ~Drain() { reaper.drain(); }
    Reaper& reaper;
  };

  Reaper() = default;
  ~Reaper() = delete;

  void drain() noexcept {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
    // Jobs queued while no thread could be started, or by the jobs run here. One at a time, since
    // a job may queue another.
    for (;;) {
      Job* job = nullptr;
      {
        std::lock_guard lock(mutex_);
        job = pop_locked();
      }
      if (job == nullptr) break;
      run(job);
    }
  }
  Job* pop_locked() noexcept {
    Job* job = head_;
    if (job != nullptr) {
      head_ = job->next;
      if (head_ == nullptr) tail_ = nullptr;
    }
    return job;
  }
  static void run(Job* job) noexcept {
    const auto destroy = job->destroy;
    void* const object = job->object;
    delete job;
    destroy(object);
  }
  void loop() {
    // A plugin library released by a job stays mapped: the process may be exiting meanwhile (see
    // <xdev/plugin/detail/parked_images.hpp>).
    plugin::detail::unloads_parked_here = true;
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || head_ != nullptr; });
      Job* job = pop_locked();
      if (job == nullptr) return;  // stopping, and nothing left
      lock.unlock();
      run(job);
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  Job* head_ = nullptr;
  Job* tail_ = nullptr;
  bool stopping_ = false;
  std::thread thread_;
};

/// A new `T` whose last release destroys it at once on the thread that made it, and on the
/// `Reaper`'s thread anywhere else (see `Reaper`). What that hand-over needs is allocated here, so
/// that the release never fails.
template <class T, class... Args>
std::shared_ptr<T> make_reaped(Args&&... args) {
  (void)Reaper::instance();  // made before the object, so drained after it
  auto job = std::make_unique<Reaper::Job>();
  job->destroy = [](void* p) noexcept { delete static_cast<T*>(p); };
  T* const object = new T(std::forward<Args>(args)...);
  // From here the deleter owns the job: shared_ptr's constructor calls it if it throws.
  return std::shared_ptr<T>(object, [creator = std::this_thread::get_id(), job = job.release()](T* p) noexcept {
    if (std::this_thread::get_id() == creator) {
      delete job;
      delete p;
    } else {
      job->object = p;
      Reaper::instance().defer(job);
    }
  });
}

}  // namespace detail

}  // namespace xdev
