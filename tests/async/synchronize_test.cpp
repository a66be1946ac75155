// synchronize() means "everything submitted before it has completed and its completion handlers
// have run", also when a handler was deferred out of its initiating function (a backend that
// completes inline) or handed to another executor.
#include <xdev/async/tokens.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>

#include "support/manual_backend.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/thread_pool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

namespace asio = boost::asio;
using Host = xdev::backends::Host;
using xdev_test::ManualBackend;
using namespace std::chrono_literals;

constexpr int submissions = 100;

// A handler slow enough that a synchronize() that does not wait for it returns first.
auto slow_counting_handler(std::atomic<int>& ran) {
  return [&ran](std::exception_ptr) {
    std::this_thread::sleep_for(200us);
    ran.fetch_add(1);
  };
}

TEST(Synchronize, WaitsForHandlersDeferredByABackendThatCompletesInline) {
  xdev::Runtime<ManualBackend> rt({.max_inflight = 1 << 20}, 1, ManualBackend::Mode::inline_completion);
  auto dev = rt.device(0);
  std::atomic<int> ran{0};
  for (int i = 0; i < submissions; ++i) dev.execute([] {}, slow_counting_handler(ran));
  dev.synchronize();
  EXPECT_EQ(ran.load(), submissions);
}

TEST(Synchronize, WaitsForHandlersOnAnotherExecutorWithAThreadedBackend) {
  asio::thread_pool handlers(2);
  {
    xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
    auto dev = rt.device(0);
    std::atomic<int> ran{0};
    for (int i = 0; i < submissions; ++i) dev.execute([] {}, asio::bind_executor(handlers, slow_counting_handler(ran)));
    dev.synchronize();
    EXPECT_EQ(ran.load(), submissions);
  }
  handlers.join();
}

// `asio::detached` has no handler to wait for, but its errors must be kept before the device can
// be seen idle: synchronize() raises each of them, in submission order, whether the work
// completed inside its initiating function or on a worker.
template <class B>
void expect_every_detached_error_kept(const xdev::Device<B>& dev) {
  for (int i = 0; i < submissions; ++i)
    dev.execute(
        [i] {
          if (i % 10 == 3) throw std::runtime_error("failed " + std::to_string(i));
        },
        asio::detached);
  for (int i = 3; i < submissions; i += 10) {
    try {
      dev.synchronize();
      FAIL() << "the error of operation " << i << " was not kept";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "failed " + std::to_string(i));
    }
  }
  EXPECT_NO_THROW(dev.synchronize());
  EXPECT_EQ(dev.execution_stats().completed, std::size_t{submissions});
}

TEST(Synchronize, RaisesEveryErrorOfDetachedWorkCompletedInline) {
  xdev::Runtime<ManualBackend> rt({.max_inflight = 1 << 20}, 1, ManualBackend::Mode::inline_completion);
  expect_every_detached_error_kept(rt.device(0));
}

TEST(Synchronize, RaisesEveryErrorOfDetachedWorkCompletedOnAWorker) {
  xdev::Runtime<Host> rt({.max_inflight = 4}, Host::Options{.devices = 1, .threads = 2});
  expect_every_detached_error_kept(rt.device(0));
}

TEST(Synchronize, StreamSynchronizeWaitsForItsHandlers) {
  xdev::Runtime<ManualBackend> rt({.max_inflight = 1 << 20}, 1, ManualBackend::Mode::inline_completion);
  auto stream = rt.device(0).make_stream();
  std::atomic<int> ran{0};
  for (int i = 0; i < submissions; ++i) stream.execute([] {}, slow_counting_handler(ran));
  stream.synchronize();
  EXPECT_EQ(ran.load(), submissions);
}

TEST(Synchronize, StreamSynchronizeRaisesAKeptError) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1});
  auto stream = rt.device(0).make_stream();
  (void)stream.execute([] { throw std::runtime_error("lost"); });  // the future is dropped unread
  EXPECT_THROW(stream.synchronize(), std::runtime_error);
  EXPECT_NO_THROW(stream.synchronize());
}

TEST(Synchronize, RuntimeSynchronizeAndDestructionWaitForHandlers) {
  std::atomic<int> ran{0};
  {
    xdev::Runtime<ManualBackend> rt({.max_inflight = 1 << 20}, 2, ManualBackend::Mode::inline_completion);
    for (int i = 0; i < submissions; ++i) rt.device(i % 2).execute([] {}, slow_counting_handler(ran));
    rt.synchronize();
    EXPECT_EQ(ran.load(), submissions);
    for (int i = 0; i < submissions; ++i) rt.device(i % 2).execute([] {}, slow_counting_handler(ran));
  }  // what the handlers capture may be destroyed right after the runtime
  EXPECT_EQ(ran.load(), 2 * submissions);
}

TEST(Synchronize, FromInsideAHandlerDoesNotWaitForItself) {
  xdev::Runtime<ManualBackend> rt({.max_inflight = 1 << 20}, 1, ManualBackend::Mode::inline_completion);
  auto dev = rt.device(0);
  std::atomic<int> synchronized{0};
  for (int i = 0; i < 4; ++i)
    dev.execute([] {},
                [&](std::exception_ptr) {
                  dev.synchronize();
                  synchronized.fetch_add(1);
                });
  dev.synchronize();
  EXPECT_EQ(synchronized.load(), 4);
}

// A callback's captures may be destroyed right after synchronize(): with handlers still pending
// this is a use after free that ASan reports.
TEST(Synchronize, CapturesMayBeDestroyedRightAfterwards) {
  xdev::Runtime<ManualBackend> rt({.max_inflight = 1 << 20}, 1, ManualBackend::Mode::inline_completion);
  auto dev = rt.device(0);
  for (int round = 0; round < 5; ++round) {
    auto state = std::make_unique<std::atomic<int>>(0);
    for (int i = 0; i < submissions; ++i)
      dev.execute([] {},
                  [s = state.get()](std::exception_ptr) {
                    std::this_thread::sleep_for(20us);
                    s->fetch_add(1);
                  });
    dev.synchronize();
    EXPECT_EQ(state->load(), submissions);
  }
}

}  // namespace
