// The reaper (`detail::make_reaped`) at process exit. A completion tells the user first and lets go
// of its device after, on the backend's thread; the user may be returning from main by then, so the
// last handle to a runtime can go while the process exits. Seen by TSan in CI: the hand-over to the
// reaper signalled a condition variable that the exit was destroying. These tests mean most under
// the tsan preset, where that race is a report and the child process exits with TSan's code.
#include <xdev/any/detail/reaper.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <thread>

namespace {

struct Counted {
  static inline std::atomic<int> destroyed{0};
  ~Counted() { destroyed.fetch_add(1); }
};

// Releases an object on another thread than its maker's, then exits with no order between the two
// (the flag is relaxed, as nothing in a real program orders a backend's thread with main's return).
[[noreturn]] void release_on_another_thread_then_exit() {
  static std::atomic<bool> released{false};
  std::thread([o = xdev::detail::make_reaped<Counted>()]() mutable {
    o.reset();  // queued for the reaper
    released.store(true, std::memory_order_relaxed);
  }).detach();
  while (!released.load(std::memory_order_relaxed)) std::this_thread::yield();
  std::exit(0);
}

TEST(ReaperAtExit, AReleaseOnABackendThreadRacingTheExitTouchesNothingTheExitDestroys) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: its reaper starts there
  EXPECT_EXIT(release_on_another_thread_then_exit(), ::testing::ExitedWithCode(0), "");
}

// Released after the reaper has run what was pending at exit (an `atexit` handler registered
// before the reaper exists runs after it): the object is kept, the process ends normally.
std::shared_ptr<Counted> late;
[[noreturn]] void release_after_the_drain_then_exit() {
  std::atexit([] {
    std::thread([] { late.reset(); }).join();
    std::_Exit(Counted::destroyed.load() == 0 ? 0 : 3);
  });
  late = xdev::detail::make_reaped<Counted>();
  std::exit(0);
}

TEST(ReaperAtExit, AnObjectReleasedAfterTheExitDrainIsKeptAndTheProcessEndsNormally) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(release_after_the_drain_then_exit(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
