// A backend defined outside xdev, as a user would write one. Its work does not run by itself:
// the test decides when each queued operation completes (or makes every operation complete
// inline, inside the submitting call), so in-flight bounds and ordering can be checked exactly.
#pragma once

#include <xdev/backend/concepts.hpp>
#include <xdev/core/error.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>

namespace xdev_test {

class ManualBackend {
 public:
  static constexpr std::string_view name = "MANUAL";
  using capabilities = xdev::Capabilities<xdev::MaxInflight<4>, xdev::Priority<5>>;
  using memory_handle = std::byte*;

  enum class Mode { queued, inline_completion };

  explicit ManualBackend(std::size_t devices = 2, Mode mode = Mode::queued, std::size_t capacity = std::size_t(-1))
      : devices_(devices), mode_(mode), capacity_(capacity) {}

  std::size_t device_count() const { return devices_; }

  memory_handle allocate(std::size_t device, std::size_t bytes) {
    std::lock_guard lk(m_);
    if (bytes > capacity_ - used_)
      throw xdev::error(xdev::errc::out_of_memory,
                        "MANUAL:" + std::to_string(device) + " has no room for " + std::to_string(bytes) + " bytes");
    used_ += bytes;
    ++backend_allocations_;
    return new std::byte[bytes];
  }
  void deallocate(std::size_t, memory_handle h, std::size_t bytes) noexcept {
    std::lock_guard lk(m_);
    used_ -= bytes;
    delete[] h;
  }

  void copy_to_device(std::size_t, const void* src, memory_handle dst, std::size_t off, std::size_t n,
                      xdev::Completion done) {
    add(
        [=] {
          if (n != 0) std::memcpy(dst + off, src, n);
        },
        std::move(done));
  }
  void copy_to_host(std::size_t, memory_handle src, std::size_t off, void* dst, std::size_t n, xdev::Completion done) {
    add(
        [=] {
          if (n != 0) std::memcpy(dst, src + off, n);
        },
        std::move(done));
  }
  void copy_between(std::size_t, memory_handle src, std::size_t soff, std::size_t, memory_handle dst, std::size_t doff,
                    std::size_t n, xdev::Completion done) {
    add(
        [=] {
          if (n != 0) std::memmove(dst + doff, src + soff, n);
        },
        std::move(done));
  }
  void execute(std::size_t, xdev::HostTask task, xdev::Completion done) {
    add([t = std::make_shared<xdev::HostTask>(std::move(task))] { (*t)(); }, std::move(done));
  }

  // Completes the oldest queued operation; returns false when none is queued.
  bool run_one() {
    job j;
    {
      std::lock_guard lk(m_);
      if (queue_.empty()) return false;
      j = std::move(queue_.front());
      queue_.pop_front();
    }
    complete(j);
    return true;
  }
  // Completes the newest queued operation (out of order); returns false when none is queued.
  bool run_newest() {
    job j;
    {
      std::lock_guard lk(m_);
      if (queue_.empty()) return false;
      j = std::move(queue_.back());
      queue_.pop_back();
    }
    complete(j);
    return true;
  }
  std::size_t run_all() {
    std::size_t n = 0;
    while (run_one()) ++n;
    return n;
  }
  // Blocks until at least `n` operations are queued.
  void wait_queued(std::size_t n) {
    std::unique_lock lk(m_);
    cv_.wait(lk, [&] { return queue_.size() >= n; });
  }
  std::size_t queued() const {
    std::lock_guard lk(m_);
    return queue_.size();
  }
  std::size_t backend_allocations() const {
    std::lock_guard lk(m_);
    return backend_allocations_;
  }
  std::size_t bytes_used() const {
    std::lock_guard lk(m_);
    return used_;
  }

 private:
  struct job {
    std::function<void()> work;
    std::shared_ptr<xdev::Completion> done;
  };

  static void complete(job& j) {
    std::exception_ptr ep;
    try {
      j.work();
    } catch (...) {
      ep = std::current_exception();
    }
    (*j.done)(ep);
  }

  void add(std::function<void()> work, xdev::Completion done) {
    job j{std::move(work), std::make_shared<xdev::Completion>(std::move(done))};
    if (mode_ == Mode::inline_completion) {
      complete(j);
      return;
    }
    std::lock_guard lk(m_);
    queue_.push_back(std::move(j));
    cv_.notify_all();
  }

  std::size_t devices_;
  Mode mode_;
  std::size_t capacity_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<job> queue_;
  std::size_t used_ = 0;
  std::size_t backend_allocations_ = 0;
};

static_assert(xdev::check_backend<ManualBackend>());

}  // namespace xdev_test
