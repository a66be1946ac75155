/// \file
/// `xdev_bench::Countdown`: waits for a known number of completions, as a plain callback would.
#pragma once

#include <atomic>

namespace xdev_bench {

/// Counts completions down to zero; the waiting thread sleeps on the atomic (a futex), and the
/// completion that reaches zero wakes it.
class Countdown {
 public:
  void reset(int n) { left_.store(n, std::memory_order_relaxed); }
  void count_down() {
    if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) left_.notify_one();
  }
  void wait() {
    for (int v = left_.load(std::memory_order_acquire); v != 0; v = left_.load(std::memory_order_acquire))
      left_.wait(v, std::memory_order_acquire);
  }

 private:
  std::atomic<int> left_{0};
};

}  // namespace xdev_bench
