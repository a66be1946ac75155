// Runtime::shutdown(mode, timeout): drain runs what was admitted, abort cancels what has not
// started. Run by the asan and tsan suites too (a submitter racing the shutdown).
#include <xdev/async/tokens.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace {

using ::testing::HasSubstr;
using Host = xdev::backends::Host;
using namespace std::chrono_literals;

// How a token completed.
enum class outcome { pending, ran, cancelled, other_error };

outcome outcome_of(std::exception_ptr ep) {
  if (!ep) return outcome::ran;
  try {
    std::rethrow_exception(ep);
  } catch (const xdev::error& e) {
    return e.code() == xdev::errc::cancelled ? outcome::cancelled : outcome::other_error;
  } catch (...) {
    return outcome::other_error;
  }
}

outcome outcome_of(std::future<void>& f) {
  try {
    f.get();
    return outcome::ran;
  } catch (...) {
    return outcome_of(std::current_exception());
  }
}

// Whether the device refuses new work now (its runtime has begun shutting down).
bool refuses(const xdev::Device<Host>& dev) {
  try {
    (void)dev.execute([] {});
    return false;
  } catch (const xdev::error& e) {
    return e.code() == xdev::errc::unavailable;
  }
}

TEST(Shutdown, AbortCancelsEveryQueuedOperationOfEveryTokenAndRefusesNewWork) {
  xdev::Runtime<Host> rt({.max_inflight = 512}, Host::Options{.devices = 1, .threads = 2});
  const auto dev = rt.device(0);
  std::atomic<int> ran{0};

  // The first task holds the stream until the shutdown has begun, so everything after it is
  // still queued then: deterministically cancelled, however the threads are scheduled.
  std::promise<void> gate;
  auto gate_opened = gate.get_future().share();
  std::vector<std::future<void>> futures;
  futures.push_back(dev.execute([&, gate_opened] {
    gate_opened.wait();
    ++ran;
  }));
  // 100 slow tasks queued behind it.
  for (int i = 0; i < 100; ++i)
    futures.push_back(dev.execute([&] {
      std::this_thread::sleep_for(10ms);
      ++ran;
    }));
  // A callback and a coroutine waiting on queued work.
  std::promise<outcome> callback;
  dev.execute([&] { ++ran; }, [&](std::exception_ptr ep) { callback.set_value(outcome_of(ep)); });
  std::promise<outcome> coroutine;
  boost::asio::thread_pool coroutine_pool(1);
  boost::asio::co_spawn(
      coroutine_pool,
      [&]() -> boost::asio::awaitable<void> {
        std::exception_ptr ep;
        try {
          co_await dev.execute([&] { ++ran; }, boost::asio::use_awaitable);
        } catch (...) {
          ep = std::current_exception();
        }
        coroutine.set_value(outcome_of(ep));
      },
      boost::asio::detached);

  // Everything above admitted (the coroutine runs on a thread of its own) before the race starts.
  while (dev.execution_stats().submitted < 103) std::this_thread::sleep_for(1ms);

  // A submitter racing the shutdown: whatever it got admitted completes, the rest is refused.
  std::vector<std::future<void>> raced;
  std::atomic<bool> racer_refused{false};
  std::thread racer([&] {
    for (;;) {
      try {
        raced.push_back(dev.execute([&] { ++ran; }));
      } catch (const xdev::error& e) {
        EXPECT_EQ(e.code(), xdev::errc::unavailable) << e.what();
        racer_refused = true;
        return;
      }
    }
  });

  // An abort with no time to wait: the cancellation is in place when it throws (the gate task
  // still runs), racing the submitter. Then the gate task may finish, and an abort that waits
  // returns once every token has completed.
  std::this_thread::sleep_for(1ms);
  try {
    rt.shutdown(xdev::ShutdownMode::abort, 0ms);
    ADD_FAILURE() << "shutdown returned with the gate task still running";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::deadline_exceeded) << e.what();
  }
  gate.set_value();
  rt.shutdown(xdev::ShutdownMode::abort, 60s);
  racer.join();
  EXPECT_TRUE(racer_refused);

  // Every token has completed by the time shutdown returned: the gate task ran, the rest did not.
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(outcome_of(futures[0]), outcome::ran);
  for (std::size_t i = 1; i < futures.size(); ++i) {
    ASSERT_EQ(futures[i].wait_for(0s), std::future_status::ready) << "task " << i;
    EXPECT_EQ(outcome_of(futures[i]), outcome::cancelled) << "task " << i;
  }
  for (auto& f : raced) {
    ASSERT_EQ(f.wait_for(0s), std::future_status::ready);
    EXPECT_EQ(outcome_of(f), outcome::cancelled);
  }
  auto callback_outcome = callback.get_future();
  ASSERT_EQ(callback_outcome.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(callback_outcome.get(), outcome::cancelled);
  EXPECT_EQ(coroutine.get_future().get(), outcome::cancelled);
  coroutine_pool.join();

  const auto stats = dev.execution_stats();
  EXPECT_EQ(stats.completed, stats.submitted);
  EXPECT_EQ(stats.failed, stats.submitted - 1);
  EXPECT_TRUE(refuses(dev));
}

TEST(Shutdown, TheCancellationErrorNamesTheDeviceAndTheMode) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 2, .threads = 1});
  const auto dev = rt.device(1);
  std::promise<void> gate;
  auto first = dev.execute([opened = gate.get_future().share()] { opened.wait(); });
  auto second = dev.execute([] {});
  EXPECT_THROW(rt.shutdown(xdev::ShutdownMode::abort, 0ms), xdev::error);  // `first` still runs
  gate.set_value();
  rt.shutdown(xdev::ShutdownMode::abort);
  first.get();
  try {
    second.get();
    FAIL() << "a queued task ran after the abort";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::cancelled);
    EXPECT_THAT(e.what(), HasSubstr("HOST:1"));
    EXPECT_THAT(e.what(), HasSubstr("ShutdownMode::abort"));
  }
}

TEST(Shutdown, ASubmissionWaitingForAnInFlightSlotCompletesCancelled) {
  xdev::Runtime<Host> rt({.max_inflight = 2}, Host::Options{.devices = 1, .threads = 1});
  const auto dev = rt.device(0);
  std::promise<void> gate;
  auto first = dev.execute([opened = gate.get_future().share()] { opened.wait(); });
  auto second = dev.execute([] {});
  std::future<void> third;
  std::thread submitter([&] { third = dev.execute([] {}); });  // blocks: both slots are held
  while (dev.execution_stats().throttle_waits == 0) std::this_thread::sleep_for(1ms);
  EXPECT_THROW(rt.shutdown(xdev::ShutdownMode::abort, 0ms), xdev::error);
  gate.set_value();
  submitter.join();  // served once a slot came back: admitted, and cancelled when its turn came
  rt.shutdown(xdev::ShutdownMode::abort, 60s);
  EXPECT_EQ(outcome_of(first), outcome::ran);
  EXPECT_EQ(outcome_of(second), outcome::cancelled);
  EXPECT_EQ(outcome_of(third), outcome::cancelled);
}

// A coroutine that submits to a device already shut down sees errc::unavailable at its co_await.
// (Asio 1.81 lets an exception thrown by an initiation escape the coroutine, and the thread_pool
// running it terminated the process.)
TEST(Shutdown, ACoroutineSubmittingAfterTheShutdownSeesTheRefusalAtItsCoAwait) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 1});
  const auto dev = rt.device(0);
  rt.shutdown(xdev::ShutdownMode::abort);
  boost::asio::thread_pool pool(1);
  auto refused = [](std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const xdev::error& e) {
      return e.code() == xdev::errc::unavailable && std::string(e.what()).find("HOST:0") != std::string::npos;
    } catch (...) {
      return false;
    }
  };
  std::promise<bool> void_result;
  std::promise<bool> int_result;
  boost::asio::co_spawn(
      pool,
      [&]() -> boost::asio::awaitable<void> {
        try {
          co_await dev.execute([] {}, boost::asio::use_awaitable);
          void_result.set_value(false);
        } catch (...) {
          void_result.set_value(refused(std::current_exception()));
        }
        try {
          (void)co_await dev.execute([] { return 7; }, boost::asio::use_awaitable);
          int_result.set_value(false);
        } catch (...) {
          int_result.set_value(refused(std::current_exception()));
        }
      },
      boost::asio::detached);
  EXPECT_TRUE(void_result.get_future().get());
  EXPECT_TRUE(int_result.get_future().get());
  pool.join();
}

TEST(Shutdown, DrainRunsEverythingAdmitted) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  const auto dev = rt.device(0);
  std::atomic<int> ran{0};
  std::vector<std::future<void>> futures;
  for (int i = 0; i < 20; ++i)
    futures.push_back(dev.execute([&] {
      std::this_thread::sleep_for(1ms);
      ++ran;
    }));
  rt.shutdown(xdev::ShutdownMode::drain, 60s);
  EXPECT_EQ(ran.load(), 20);
  for (auto& f : futures) EXPECT_EQ(outcome_of(f), outcome::ran);
  EXPECT_TRUE(refuses(dev));
}

TEST(Shutdown, WorkStillRunningAtTheDeadlineIsNamedAndWaitedForByTheDestructor) {
  std::promise<void> gate;
  std::future<void> running;
  std::atomic<bool> finished{false};
  {
    xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 1});
    const auto dev = rt.device(0);
    running = dev.execute([&, opened = gate.get_future().share()] {
      opened.wait();
      finished = true;
    });
    try {
      rt.shutdown(xdev::ShutdownMode::abort, 20ms);
      FAIL() << "shutdown returned with a task still running";
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.code(), xdev::errc::deadline_exceeded);
      EXPECT_THAT(e.what(), HasSubstr("HOST:0 (1 operation(s) in flight)"));
    }
    EXPECT_TRUE(refuses(dev));
    gate.set_value();
  }  // the destructor waits for the running task
  EXPECT_TRUE(finished);
  EXPECT_EQ(outcome_of(running), outcome::ran);
}

TEST(Shutdown, AnAbortDuringADrainCancelsWhatTheDrainWouldStillRun) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 1});
  const auto dev = rt.device(0);
  std::promise<void> gate;
  auto first = dev.execute([opened = gate.get_future().share()] { opened.wait(); });
  std::vector<std::future<void>> rest;
  for (int i = 0; i < 10; ++i) rest.push_back(dev.execute([] {}));
  std::thread drainer([&] { rt.shutdown(); });
  // Only a refused submission tells that the drain has begun; one admitted before is cancelled too.
  while (!refuses(dev)) std::this_thread::sleep_for(1ms);
  // An abort with no time to wait: the cancellation is in place when it throws.
  EXPECT_THROW(rt.shutdown(xdev::ShutdownMode::abort, 0ms), xdev::error);
  gate.set_value();
  drainer.join();
  EXPECT_EQ(outcome_of(first), outcome::ran);
  for (auto& f : rest) EXPECT_EQ(outcome_of(f), outcome::cancelled);
}

}  // namespace
