/// \file
/// `detail::ProgressCounter`: a device's count of completed operations, in memory that outlives
/// the device, so that a future waited for later can ask how much work is still ahead of it.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace xdev::detail {

/// A lease on one counter of this process's never-freed counters (one pool per copy of xdev, as
/// for the runtime anchors). A `Future` keeps a pointer to its device's counter and reads it when
/// it is waited for, possibly after the device is gone: it then reads a counter that is idle or
/// serves another device, a wrong estimate (its wait sleeps sooner or later), never freed memory.
class ProgressCounter {
 public:
  ProgressCounter() : counter_(pool::instance().acquire()) {}
  ProgressCounter(const ProgressCounter&) = delete;
  ProgressCounter& operator=(const ProgressCounter&) = delete;
  ~ProgressCounter() { pool::instance().release(counter_); }

  [[nodiscard]] std::atomic<std::size_t>& get() const noexcept { return *counter_; }

 private:
  class pool {
   public:
    static pool& instance() {
      static pool* const p = new pool;  // deliberately never deleted: futures may read a counter at exit
      return *p;
    }
    std::atomic<std::size_t>* acquire() {
      std::lock_guard lk(m_);
      if (free_.empty()) {
        constexpr std::size_t block = 64;
        free_.reserve(total_ + block);  // room for every counter, so that `release` never allocates
        blocks_.reserve(blocks_.size() + 1);
        auto counters = std::make_unique<line[]>(block);
        for (std::size_t i = 0; i < block; ++i) free_.push_back(&counters[i].count);
        blocks_.push_back(std::move(counters));
        total_ += block;
      }
      std::atomic<std::size_t>* c = free_.back();
      free_.pop_back();
      c->store(0, std::memory_order_relaxed);
      return c;
    }
    void release(std::atomic<std::size_t>* c) noexcept {
      std::lock_guard lk(m_);
      free_.push_back(c);  // within the capacity reserved for every counter: never throws
    }

   private:
    // A cache line each: the devices' completing threads write their own counters.
    struct alignas(64) line {
      std::atomic<std::size_t> count{0};
    };
    std::mutex m_;
    std::vector<std::atomic<std::size_t>*> free_;
    std::vector<std::unique_ptr<line[]>> blocks_;
    std::size_t total_ = 0;  // counters in all blocks
  };

  std::atomic<std::size_t>* counter_;
};

}  // namespace xdev::detail
