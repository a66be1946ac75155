// The in-flight bound: exact, lossless, never deadlocking nested or coroutine submitters.
#include <xdev/async/throttle.hpp>
#include <xdev/async/tokens.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>

#include "support/manual_backend.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
using Host = xdev::backends::Host;
using xdev_test::ManualBackend;
using namespace std::chrono_literals;

TEST(Throttle, RejectsZero) {
  EXPECT_THROW(xdev::Throttle(0), xdev::error);
}

TEST(Throttle, HighWaterEqualsTheBoundExactlyAndNothingIsDropped) {
  constexpr std::size_t bound = 8;
  xdev::Runtime<Host> rt({.max_inflight = bound}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  std::atomic<int> ran{0};
  std::vector<std::future<void>> futures;
  for (int i = 0; i < 1000; ++i)
    futures.push_back(dev.execute([&] {
      std::this_thread::sleep_for(20us);
      ran.fetch_add(1);
    }));
  for (auto& f : futures) f.get();
  dev.synchronize();
  EXPECT_EQ(ran.load(), 1000);
  const auto s = dev.execution_stats();
  EXPECT_EQ(s.inflight_high_water, bound);
  EXPECT_EQ(s.max_inflight, bound);
  EXPECT_EQ(s.submitted, 1000u);
  EXPECT_EQ(s.completed, 1000u);
  EXPECT_GT(s.throttle_waits, 0u);
}

// Acquire and release skip the lock while nobody waits; under contention they must still hold
// the bound exactly and lose no slot, whichever path each call takes.
TEST(Throttle, ConcurrentAcquireAndReleaseNeverExceedTheBoundNorLoseASlot) {
  constexpr std::size_t bound = 3;
  xdev::Throttle t(bound);
  std::atomic<std::size_t> held{0};
  std::atomic<std::size_t> most{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int i = 0; i < 20000; ++i) {
        ASSERT_TRUE(t.acquire());
        const std::size_t now = held.fetch_add(1) + 1;
        for (std::size_t m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
        }
        held.fetch_sub(1);
        t.release(((i + k) & 1) != 0);  // both kinds of release
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_LE(most.load(), bound);
  EXPECT_LE(t.high_water(), bound);
  EXPECT_EQ(t.in_flight(), 0u);
  t.wait_idle();  // returns: nothing held, nobody waiting
  for (std::size_t i = 0; i < bound; ++i) EXPECT_TRUE(t.acquire()) << "every slot came back";
  EXPECT_EQ(t.in_flight(), bound);
}

// wait_idle() sleeps on the lock's condition while releases may take the lock-free path: the
// last release must still wake it.
TEST(Throttle, WaitIdleWakesWhenTheLastSlotIsReturnedWithoutTheLock) {
  xdev::Throttle t(4);
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(t.acquire());
    std::atomic<bool> idle{false};
    std::thread waiter([&] {
      t.wait_idle();
      idle.store(true);
    });
    if ((i & 1) != 0) std::this_thread::yield();
    t.release();
    waiter.join();  // hangs (and the test times out) on a lost wake-up
    ASSERT_TRUE(idle.load());
  }
}

TEST(Throttle, ASubmitterBlocksUntilASlotFrees) {
  xdev::Runtime<ManualBackend> rt({}, 1);  // MaxInflight<4>, completions driven by the test
  auto dev = rt.device(0);
  std::vector<xdev::Stream<ManualBackend>> streams;
  std::vector<std::future<void>> fs;
  for (int i = 0; i < 4; ++i) {  // one operation per stream: each completion leaves its stream dry
    streams.push_back(dev.make_stream());
    fs.push_back(streams.back().execute([] {}));
  }
  auto fifth = std::async(std::launch::async, [&] { return dev.execute([] {}); });
  EXPECT_EQ(fifth.wait_for(50ms), std::future_status::timeout) << "the fifth submission did not wait for a slot";
  rt.backend().run_one();
  ASSERT_EQ(fifth.wait_for(10s), std::future_status::ready) << "a freed slot did not admit the waiting submission";
  auto f5 = fifth.get();
  rt.backend().run_all();
  EXPECT_EQ(dev.execution_stats().inflight_high_water, 4u);
  rt.backend().run_all();
  f5.get();
}

// Hysteresis: while the stream that frees a slot has more work queued (so more completions are
// sure to follow), a blocked submitter sleeps on until in-flight work is down to half the bound,
// then refills the free slots in one go.
TEST(Throttle, ABlockedSubmitterWakesAtTheLowMarkWhileMoreCompletionsAreComing) {
  xdev::Runtime<ManualBackend> rt({}, 1);  // bound 4: low mark 2
  auto dev = rt.device(0);
  std::vector<std::future<void>> fs;
  for (int i = 0; i < 4; ++i) fs.push_back(dev.execute([] {}));  // one stream: one queued behind another
  auto fifth = std::async(std::launch::async, [&] { return dev.execute([] {}); });
  EXPECT_EQ(fifth.wait_for(50ms), std::future_status::timeout);
  rt.backend().run_one();  // 3 in flight, two more queued on the stream: not yet
  EXPECT_EQ(fifth.wait_for(50ms), std::future_status::timeout) << "woken above the low mark";
  rt.backend().run_one();  // 2 in flight: the low mark
  ASSERT_EQ(fifth.wait_for(10s), std::future_status::ready) << "not woken at the low mark";
  auto f5 = fifth.get();
  // The woken thread refills without waiting.
  fs.push_back(dev.execute([] {}));
  EXPECT_EQ(dev.execution_stats().inflight_high_water, 4u);
  while (rt.backend().run_all() != 0) {
  }
  for (auto& f : fs) f.get();
  f5.get();
}

// The low mark must not deadlock: here the work holding the slots waits for an event that only
// the blocked submitter sets, after its submission returns. Each stream that runs dry or stops at
// a marker serves the waiter at once.
TEST(Throttle, ABlockedSubmitterIsServedWhenTheRemainingWorkWaitsForIt) {
  xdev::Runtime<Host> rt({.max_inflight = 8}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  auto a = dev.make_stream();
  auto b = dev.make_stream();
  const xdev::Event gate = xdev::Event::pending();
  b.wait(gate);
  std::vector<std::future<void>> fs;
  for (int i = 0; i < 5; ++i) fs.push_back(b.execute([] {}));  // 5 slots, stuck behind the gate
  for (int i = 0; i < 3; ++i) fs.push_back(a.execute([] { std::this_thread::sleep_for(2ms); }));
  auto producer = std::async(std::launch::async, [&] {
    auto last = a.execute([] {});  // blocks: 8 in flight
    (void)a.execute([gate] { gate.set(); });
    return last;
  });
  ASSERT_EQ(producer.wait_for(10s), std::future_status::ready) << "deadlock: the blocked submitter was never served";
  producer.get().get();
  for (auto& f : fs) f.get();
  EXPECT_EQ(dev.execution_stats().inflight_high_water, 8u);
}

TEST(Throttle, EnvironmentOverridesTheCapabilityAndOptionsOverrideTheEnvironment) {
  ::setenv("XDEV_MAX_INFLIGHT", "3", 1);
  {
    xdev::Runtime<ManualBackend> env_only({}, 1);
    EXPECT_EQ(env_only.device(0).max_inflight(), 3u);
    xdev::Runtime<ManualBackend> explicit_option({.max_inflight = 6}, 1);
    EXPECT_EQ(explicit_option.device(0).max_inflight(), 6u);
  }
  ::setenv("XDEV_MAX_INFLIGHT", "many", 1);
  try {
    xdev::Runtime<ManualBackend> bad({}, 1);
    FAIL() << "malformed XDEV_MAX_INFLIGHT accepted";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("XDEV_MAX_INFLIGHT=\"many\""));
  }
  ::unsetenv("XDEV_MAX_INFLIGHT");
  EXPECT_THROW((xdev::Runtime<ManualBackend>({.max_inflight = 0}, 1)), xdev::error);
}

TEST(Throttle, NestedSubmissionFromRunningWorkDoesNotDeadlock) {
  xdev::Runtime<Host> rt({.max_inflight = 1}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  std::promise<int> inner_result;
  auto outer = dev.execute([&] {
    // The only slot is held by this very task: a blocking submission here would never return.
    dev.execute([] { return 41; }, [&](std::exception_ptr, int v) { inner_result.set_value(v + 1); });
  });
  auto inner = inner_result.get_future();
  ASSERT_EQ(inner.wait_for(10s), std::future_status::ready) << "nested submission deadlocked (watchdog)";
  EXPECT_EQ(inner.get(), 42);
  outer.get();
  EXPECT_EQ(dev.execution_stats().inflight_high_water, 1u);
}

asio::awaitable<int> submit_many(xdev::Device<ManualBackend> dev, int n) {
  int done = 0;
  for (int i = 0; i < n; ++i) {
    // Not awaited one by one: each submission may have to wait for a slot, by suspending.
    dev.execute([] {}, [&done](std::exception_ptr) { ++done; });
  }
  co_await dev.execute([] {}, asio::use_awaitable);
  co_return done;
}

TEST(Throttle, ACoroutineSuspendsInsteadOfBlockingItsThread) {
  xdev::Runtime<ManualBackend> rt({}, 1);  // bound 4
  auto dev = rt.device(0);
  asio::io_context io;
  std::atomic<bool> other_handler_ran{false};
  auto result = asio::co_spawn(io, submit_many(dev, 10), xdev::use_future);
  std::thread runner([&] { io.run(); });
  for (int i = 0; i < 2000 && dev.execution_stats().inflight_high_water < 4; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(dev.execution_stats().inflight_high_water, 4u);
  // The coroutine now waits for a slot; its thread must still be free for other work.
  asio::post(io, [&] { other_handler_ran = true; });
  for (int i = 0; i < 200 && !other_handler_ran; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(other_handler_ran) << "the io_context thread was blocked by a full throttle";
  EXPECT_EQ(dev.execution_stats().inflight_high_water, 4u);
  // Drive completions until the coroutine finishes.
  while (result.wait_for(1ms) != std::future_status::ready) rt.backend().run_all();
  runner.join();
  EXPECT_EQ(result.get(), 10);
  EXPECT_EQ(dev.execution_stats().inflight_high_water, 4u);
  EXPECT_EQ(dev.execution_stats().completed, 11u);
}

}  // namespace
