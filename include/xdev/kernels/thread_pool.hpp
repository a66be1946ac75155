/// \file
/// `xdev::kernels::ThreadPool`: a `boost::asio::thread_pool` whose threads start one at a time,
/// so that failing to start one is an exception and not a hang.
///
/// `boost::asio::thread_pool(n)` starts its threads in its constructor; when starting the k-th
/// fails (memory runs out, `pthread_create` fails) the constructor throws with the first k - 1
/// threads still running and waiting for work, and their thread group's destructor joins them:
/// forever. This pool starts the threads itself, attaching each to an asio pool that has none, and
/// on a failure stops and joins the ones it started before the exception leaves the constructor.
#pragma once

#include <boost/asio/thread_pool.hpp>

#include <cstddef>
#include <thread>
#include <vector>

namespace xdev::kernels {

/// `threads` workers running an `asio::thread_pool` (`get()`). As with asio's pool, `join()` lets
/// them finish the work posted so far, and the destructor stops them (work not yet started is
/// dropped) and joins them.
class ThreadPool {
 public:
  /// \throws std::system_error when a thread cannot be started, std::bad_alloc when memory runs
  /// out; either way no thread of this pool is left running.
  explicit ThreadPool(std::size_t threads) : pool_(0) {
    workers_.reserve(threads);
    try {
      for (std::size_t i = 0; i < threads; ++i)
        workers_.emplace_back([this] {
          current_ = this;
          pool_.attach();
        });
    } catch (...) {
      pool_.stop();
      for (auto& t : workers_) t.join();
      throw;
    }
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() {
    pool_.stop();
    for (auto& t : workers_)
      if (t.joinable()) t.join();
  }

  [[nodiscard]] boost::asio::thread_pool& get() noexcept { return pool_; }
  [[nodiscard]] std::size_t size() const noexcept { return workers_.size(); }

  /// The pool whose worker the calling thread is, or null on any other thread.
  [[nodiscard]] static ThreadPool* current() noexcept { return current_; }

  /// Lets the workers finish the work posted so far (and whatever that work posts), then joins
  /// them. Idempotent; not to be called from one of the workers.
  void join() noexcept {
    if (joined_) return;
    joined_ = true;
    pool_.wait();  // gives up the pool's own unit of work: the workers return once it has none
    for (auto& t : workers_) t.join();
  }

 private:
  boost::asio::thread_pool pool_;
  std::vector<std::thread> workers_;
  bool joined_ = false;
  static inline thread_local ThreadPool* current_ = nullptr;
};

}  // namespace xdev::kernels
