// SpinMutex, the lock of a stream's chain: mutual exclusion and the ordering a lock gives (TSan
// checks the latter in the tsan suite: a plain counter is written under the lock from 4 threads).
#include <xdev/core/detail/spin_mutex.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace {

TEST(SpinMutex, ExcludesAndOrdersEveryThreadThatTakesIt) {
  xdev::detail::SpinMutex m;
  std::uint64_t counter = 0;  // not atomic: only the lock protects it
  constexpr int threads = 4, rounds = 50000;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < rounds; ++i) {
        std::lock_guard lk(m);
        counter = counter + 1;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(counter, std::uint64_t{threads} * rounds);
}

TEST(SpinMutex, TryLockFailsWhileHeldAndSucceedsAfter) {
  xdev::detail::SpinMutex m;
  ASSERT_TRUE(m.try_lock());
  bool other = true;
  std::thread([&] { other = m.try_lock(); }).join();
  EXPECT_FALSE(other);
  m.unlock();
  std::thread([&] {
    other = m.try_lock();
    if (other) m.unlock();
  }).join();
  EXPECT_TRUE(other);
}

}  // namespace
