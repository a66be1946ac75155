/// \file
/// Internal: `SpinMutex`, the lock of state that a submitting thread and a completion thread
/// both touch once per operation (a stream's chain), held for a few dozen instructions at a time.
#pragma once

#include <atomic>
#include <thread>

namespace xdev::detail {

/// Tells the processor that the thread is spinning (it frees the core's resources for its
/// sibling, and it saves power).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

/// A lock that never puts its waiter to sleep in the kernel: it spins a short while, then
/// yields the processor between attempts. Where two threads take a lock once per operation
/// each, `std::mutex` made them sleep and wake each other in the kernel (a few microseconds
/// each time); with this lock the waiter only waits out the holder's few dozen instructions
/// (longer only when the holder lost its processor). Only for critical sections that run no user
/// code and never block. Satisfies *Lockable*.
class SpinMutex {
 public:
  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      for (unsigned spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins < spin_limit)
          cpu_relax();
        else
          std::this_thread::yield();  // the holder may have lost its processor
      }
    }
  }
  [[nodiscard]] bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr unsigned spin_limit = 256;
  std::atomic<bool> locked_{false};
};

}  // namespace xdev::detail
