// Completion tokens: every way a caller can receive a device operation's outcome.
#include <xdev/async/tokens.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include "support/manual_backend.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <future>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
using Host = xdev::backends::Host;
using namespace std::chrono_literals;

struct custom_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Tokens : public ::testing::Test {
 protected:
  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 2, .threads = 2}};
  xdev::Device<Host> dev = rt.device(0);
};

TEST_F(Tokens, FutureCarriesTheResult) {
  std::future<std::string> f = dev.execute([] { return std::string("done"); }, xdev::use_future);
  EXPECT_EQ(f.get(), "done");
  std::future<void> v = dev.execute([] {});
  v.get();
}

TEST_F(Tokens, FutureCarriesTheExceptionWithItsTypeAndMessage) {
  auto f = dev.execute([]() -> int { throw custom_failure("bad kernel 17"); });
  try {
    (void)f.get();
    FAIL() << "no exception";
  } catch (const custom_failure& e) {
    EXPECT_STREQ(e.what(), "bad kernel 17");
  }
  // The error was delivered, so it is not raised again by synchronize().
  EXPECT_NO_THROW(dev.synchronize());
}

TEST_F(Tokens, AsioUseFutureWorksToo) {
  std::future<int> f = dev.execute([] { return 5; }, asio::use_future);
  EXPECT_EQ(f.get(), 5);
}

TEST_F(Tokens, CallbackReceivesErrorAndValue) {
  std::promise<std::pair<bool, int>> p;
  dev.execute([] { return 9; }, [&](std::exception_ptr e, int v) { p.set_value({e != nullptr, v}); });
  EXPECT_EQ(p.get_future().get(), std::make_pair(false, 9));

  std::promise<std::string> q;
  dev.execute([] { throw custom_failure("cb"); },
              [&](std::exception_ptr e) {
                try {
                  std::rethrow_exception(e);
                } catch (const custom_failure& f) {
                  q.set_value(f.what());
                }
              });
  EXPECT_EQ(q.get_future().get(), "cb");
}

asio::awaitable<int> coro_body(xdev::Device<Host> dev) {
  std::vector<int> in{1, 2, 3, 4}, out(4);
  auto buf = dev.allocate<int>(4);
  co_await dev.copy_to_device(std::span<const int>(in), buf, asio::use_awaitable);
  co_await dev.execute([&] { buf.host_data()[0] = 10; }, asio::use_awaitable);
  co_await dev.copy_to_host(buf, std::span<int>(out), asio::use_awaitable);
  int sum = 0;
  for (int v : out) sum += v;
  try {
    co_await dev.execute([] { throw custom_failure("in coroutine"); }, asio::use_awaitable);
  } catch (const custom_failure&) {
    sum += 1000;
  }
  co_return sum;
}

TEST_F(Tokens, AwaitableInACoroutine) {
  asio::io_context io;
  auto f = asio::co_spawn(io, coro_body(dev), asio::use_future);
  io.run();  // returns only when the coroutine is done: pending xdev work keeps io busy
  EXPECT_EQ(f.get(), 10 + 2 + 3 + 4 + 1000);
}

TEST_F(Tokens, DeferredRunsOnlyWhenInvoked) {
  std::atomic<int> runs{0};
  auto op = dev.execute([&] { return ++runs; }, asio::deferred);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(runs.load(), 0);  // nothing was submitted yet
  std::future<int> f = std::move(op)(xdev::use_future);
  EXPECT_EQ(f.get(), 1);
}

TEST_F(Tokens, DroppedFutureErrorIsRaisedByTheNextSynchronize) {
  (void)dev.execute([] { throw custom_failure("nobody listens"); }, xdev::use_future);
  try {
    dev.synchronize();
    FAIL() << "the error of a dropped future was lost";
  } catch (const custom_failure& e) {
    EXPECT_STREQ(e.what(), "nobody listens");
  }
  EXPECT_NO_THROW(dev.synchronize());  // raised once
  // Only the device that ran the work keeps its error.
  EXPECT_NO_THROW(rt.device(1).synchronize());
}

TEST_F(Tokens, FutureDroppedAfterCompletionWithoutGetStillReportsItsError) {
  {
    auto f = dev.execute([] { throw custom_failure("seen by nobody"); });
    f.wait();  // completed, but the error was never retrieved
  }
  EXPECT_THROW(dev.synchronize(), custom_failure);
  EXPECT_NO_THROW(dev.synchronize());
}

TEST_F(Tokens, HeldFutureErrorIsNotRaisedBySynchronize) {
  auto f = dev.execute([] { throw custom_failure("held"); });
  dev.synchronize();  // does not throw: the future holds the error
  EXPECT_THROW(f.get(), custom_failure);
}

TEST_F(Tokens, EveryKeptErrorIsRaisedInTurn) {
  for (int i = 0; i < 3; ++i) (void)dev.execute([i] { throw custom_failure("e" + std::to_string(i)); });
  std::vector<std::string> seen;
  for (int i = 0; i < 3; ++i) {
    try {
      dev.synchronize();
    } catch (const custom_failure& e) {
      seen.push_back(e.what());
    }
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"e0", "e1", "e2"}));  // in submission order (same stream)
  EXPECT_NO_THROW(dev.synchronize());
}

TEST_F(Tokens, DetachedErrorIsKept) {
  dev.execute([] { throw custom_failure("detached"); }, asio::detached);
  EXPECT_THROW(dev.synchronize(), custom_failure);
}

TEST_F(Tokens, ThrowingCallbackNeverTerminatesAndIsKept) {
  dev.execute([] {}, [](std::exception_ptr) { throw custom_failure("from handler"); });
  EXPECT_THROW(dev.synchronize(), custom_failure);
}

asio::awaitable<int> await_inline_completions(xdev::Device<xdev_test::ManualBackend> dev) {
  std::vector<int> in{1, 2, 3}, out(3);
  auto buf = dev.allocate<int>(3);
  int total = 0;
  for (int i = 0; i < 100; ++i) {
    co_await dev.copy_to_device(std::span<const int>(in), buf, asio::use_awaitable);
    co_await dev.copy_to_host(buf, std::span<int>(out), asio::use_awaitable);
    total += co_await dev.execute([&] { return out[0] + out[1] + out[2]; }, asio::use_awaitable);
  }
  co_return total;
}

TEST(TokensInline, ACoroutineIsNotResumedInsideItsOwnInitiatingFunction) {
  // Every operation completes inside the submitting call; resuming the coroutine right there
  // would destroy the frame that still runs the initiation (caught by ASan before the fix).
  xdev::Runtime<xdev_test::ManualBackend> rt({}, 1, xdev_test::ManualBackend::Mode::inline_completion);
  asio::io_context io;
  auto f = asio::co_spawn(io, await_inline_completions(rt.device(0)), xdev::use_future);
  io.run();
  EXPECT_EQ(f.get(), 600);
}

TEST(TokensInline, ACallbackRunsAfterItsInitiatingFunctionReturns) {
  xdev::Runtime<xdev_test::ManualBackend> rt({}, 1, xdev_test::ManualBackend::Mode::inline_completion);
  auto dev = rt.device(0);
  asio::io_context io;
  bool returned = false, ran_after_return = false;
  asio::post(io, [&] {
    dev.execute([] {}, asio::bind_executor(io, [&](std::exception_ptr) { ran_after_return = returned; }));
    returned = true;
  });
  io.run();
  EXPECT_TRUE(ran_after_return);
}

// A future polls before it sleeps only when little work is still ahead of it when it is waited
// for. Counted then, not at submission: a batch of 1024 submissions waited for in order found its
// work done by the time it came to each future, and was still put to sleep and woken for each.
TEST(FutureWait, PollsOnlyWhenAtMostTwoOperationsAreStillAheadWhenItIsWaitedFor) {
  xdev::detail::future_probe p;
  std::atomic<std::size_t> completed{10};
  p.note_work_ahead(completed, 20);  // 10 operations ahead of it
  EXPECT_FALSE(p.worth_polling());
  completed = 17;
  EXPECT_FALSE(p.worth_polling()) << "3 ahead";
  completed = 18;
  EXPECT_TRUE(p.worth_polling()) << "2 ahead";
  completed = 25;
  EXPECT_TRUE(p.worth_polling()) << "none ahead (and other work done since)";
  p.note_work_ahead(std::numeric_limits<std::size_t>::max());  // no count to read: sleeps at once
  EXPECT_FALSE(p.worth_polling());
}

TEST(FutureWait, TheDeviceCountsTheOperationsItAdmittedAndThoseThatCompleted) {
  xdev::Runtime<xdev_test::ManualBackend> rt({}, 1);
  auto dev = rt.device(0);
  xdev::DeviceQueue& q = *rt.state(0).queue;
  std::vector<xdev::Future<void>> futures;
  for (int i = 0; i < 3; ++i) futures.push_back(dev.execute([] {}));
  EXPECT_EQ(q.admitted_count(), 3u);
  EXPECT_EQ(q.completed_count().load(), 0u);
  rt.backend().run_one();
  futures[0].get();
  EXPECT_EQ(q.completed_count().load(), 1u);
  for (int i = 1; i < 3; ++i) ASSERT_TRUE(rt.backend().run_one()) << "operation " << i << " was not started";
  futures[1].get();
  futures[2].get();
  EXPECT_EQ(q.admitted_count(), 3u);
  EXPECT_EQ(q.completed_count().load(), 3u);
}

// A future reads its device's count of completed work when it is waited for, which may be after
// the device is gone (under ASan, a read of the freed device queue would be reported).
TEST(FutureWait, AFutureWaitedForAfterItsRuntimeIsGoneReadsNoFreedMemory) {
  std::optional<xdev::Future<int>> f;
  {
    xdev::Runtime<Host> rt{{}, Host::Options{.devices = 1, .threads = 1}};
    f = rt.device(0).execute([] { return 7; });
  }  // the destructor waits for the work
  EXPECT_EQ(f->get(), 7);
}

}  // namespace
