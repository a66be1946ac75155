// Streams and events: order within a stream, overlap across streams, points to wait on.
#include <xdev/async/event.hpp>
#include <xdev/async/stream.hpp>
#include <xdev/async/tokens.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/core/error.hpp>
#include <xdev/device/runtime.hpp>

#include "support/manual_backend.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <exception>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Host = xdev::backends::Host;
using xdev_test::ManualBackend;
using namespace std::chrono_literals;

class Streams : public ::testing::Test {
 protected:
  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 1, .threads = 4}};
  xdev::Device<Host> dev = rt.device(0);
};

TEST_F(Streams, WorkOnOneStreamRunsInSubmissionOrder) {
  auto s = dev.make_stream();
  std::vector<int> order;
  std::mutex m;
  for (int i = 0; i < 200; ++i)
    (void)s.execute([&, i] {
      std::lock_guard lk(m);
      order.push_back(i);
    });
  dev.synchronize();
  ASSERT_EQ(order.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(order[i], i);
}

TEST_F(Streams, WorkOnTwoStreamsOverlaps) {
  // Each task waits until both have started: this completes only if the two run at the same time.
  std::atomic<int> started{0};
  auto rendezvous = [&] {
    started.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (started.load() < 2)
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("the other stream never ran");
    return true;
  };
  auto a = dev.make_stream().execute(rendezvous);
  auto b = dev.make_stream().execute(rendezvous);
  EXPECT_TRUE(a.get());
  EXPECT_TRUE(b.get());
}

TEST_F(Streams, DefaultStreamIsShared) {
  EXPECT_EQ(dev.default_stream(), dev.default_stream());
  EXPECT_FALSE(dev.make_stream() == dev.make_stream());
}

TEST_F(Streams, EventOrdersAConsumerStreamAfterAProducerStream) {
  auto producer = dev.make_stream();
  auto consumer = dev.make_stream();
  std::atomic<int> value{0};
  (void)producer.execute([&] {
    std::this_thread::sleep_for(30ms);
    value = 1;
  });
  xdev::Event produced = producer.record();
  consumer.wait(produced);
  auto seen = consumer.execute([&] { return value.load(); });
  EXPECT_EQ(seen.get(), 1);
  EXPECT_TRUE(produced.ready());
}

TEST_F(Streams, HostCanWaitForAnEvent) {
  auto s = dev.make_stream();
  std::atomic<bool> done{false};
  (void)s.execute([&] {
    std::this_thread::sleep_for(20ms);
    done = true;
  });
  auto e = s.record();
  e.wait();
  EXPECT_TRUE(done);
  EXPECT_TRUE(e.wait_for(0s));
}

TEST_F(Streams, EventAsyncWaitWithACallback) {
  auto s = dev.make_stream();
  (void)s.execute([] { std::this_thread::sleep_for(10ms); });
  std::promise<void> p;
  xdev::async_wait(s.record(), [&](std::exception_ptr) { p.set_value(); });
  EXPECT_EQ(p.get_future().wait_for(10s), std::future_status::ready);
}

TEST_F(Streams, DefaultEventIsReady) {
  EXPECT_TRUE(xdev::Event{}.ready());
}

TEST_F(Streams, ElapsedTimeBetweenTwoRecordsCoversTheWorkBetweenThem) {
  auto s = dev.make_stream();
  const xdev::Event start = s.record();
  (void)s.execute([] { std::this_thread::sleep_for(40ms); });
  const xdev::Event end = s.record();
  end.wait();
  start.wait();
  // Only the lower bound is certain: the end point comes after a 40 ms sleep the start preceded.
  EXPECT_GE(start.elapsed_time(end), 40.0);
  EXPECT_DOUBLE_EQ(end.elapsed_time(start), -start.elapsed_time(end));
  EXPECT_DOUBLE_EQ(start.elapsed_time(start), 0.0);
}

TEST_F(Streams, ElapsedTimeRefusesAnEventThatWasNotRecorded) {
  auto recorded = dev.make_stream().record();
  recorded.wait();
  try {
    (void)xdev::Event{}.elapsed_time(recorded);
    FAIL() << "a default-constructed event has no time";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("not recorded"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)recorded.elapsed_time(xdev::Event{}), xdev::error);
}

TEST_F(Streams, ElapsedTimeRefusesAnEventNotReadyYet) {
  auto s = dev.make_stream();
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  const xdev::Event start = s.record();
  (void)s.execute([opened] { opened.wait(); });
  const xdev::Event end = s.record();
  start.wait();
  try {
    (void)start.elapsed_time(end);
    FAIL() << "the later event is still pending";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::unavailable);
    EXPECT_NE(std::string(e.what()).find("not ready"), std::string::npos) << e.what();
  }
  gate.set_value();
  end.wait();
  EXPECT_GE(start.elapsed_time(end), 0.0);
}

TEST(StreamsInline, ABackendThatCompletesInsideTheCallDoesNotGrowTheStack) {
  xdev::Runtime<ManualBackend> rt({.max_inflight = 1 << 20}, 1, ManualBackend::Mode::inline_completion);
  auto dev = rt.device(0);
  int count = 0;
  for (int i = 0; i < 100000; ++i) dev.execute([&] { ++count; }, [](std::exception_ptr) {});
  dev.synchronize();
  EXPECT_EQ(count, 100000);
}

TEST(StreamsQueued, AMarkerNeverOvertakesEarlierWork) {
  xdev::Runtime<ManualBackend> rt({}, 1);
  auto dev = rt.device(0);
  auto s = dev.default_stream();
  std::atomic<int> ran{0};
  (void)s.execute([&] { ++ran; });
  auto e = s.record();
  EXPECT_FALSE(e.ready());
  rt.backend().run_all();
  EXPECT_TRUE(e.ready());
  EXPECT_EQ(ran.load(), 1);
}

struct ThrowingBackend : ManualBackend {
  using ManualBackend::ManualBackend;
  void execute(std::size_t, xdev::HostTask, xdev::Completion) { throw std::runtime_error("driver refused"); }
};

TEST(StreamsFaultyBackend, ASubmissionTheBackendRejectsFailsItsTokenAndTheStreamGoesOn) {
  xdev::Runtime<ThrowingBackend> rt({}, 1, ManualBackend::Mode::inline_completion);
  auto dev = rt.device(0);
  auto f = dev.execute([] {});
  EXPECT_THROW(f.get(), std::runtime_error);
  std::vector<int> in{1, 2}, out(2);
  auto b = dev.allocate<int>(2);
  dev.copy_to_device(std::span<const int>(in), b).get();  // the stream still works
  dev.copy_to_host(b, std::span<int>(out)).get();
  EXPECT_EQ(out, in);
}

struct ForgetfulBackend : ManualBackend {
  using ManualBackend::ManualBackend;
  void execute(std::size_t, xdev::HostTask, xdev::Completion) {}  // drops the completion unrun
};

TEST(StreamsFaultyBackend, ACompletionTheBackendDropsFailsTheOperationInsteadOfHanging) {
  xdev::Runtime<ForgetfulBackend> rt({}, 1, ManualBackend::Mode::inline_completion);
  auto dev = rt.device(0);
  auto f = dev.execute([] {});
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "the operation hung";
  try {
    f.get();
    FAIL();
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::internal);
  }
  EXPECT_EQ(dev.execution_stats().completed, 1u);  // the slot was returned
}

// Completes each operation one of three ways, in turn: inside the call that starts it, on a thread
// of its own that polls for work and completes it at once (racing with the start's return), or
// on that thread after a short pause. A stream's chain must then go on exactly once per
// operation, in order, whichever thread sees the completion first.
struct RacingBackend : ManualBackend {
  using ManualBackend::ManualBackend;
  RacingBackend(const RacingBackend&) = delete;
  RacingBackend& operator=(const RacingBackend&) = delete;
  ~RacingBackend() {
    stop = true;
    completer.join();
  }
  void execute(std::size_t, xdev::HostTask task, xdev::Completion done) {
    const unsigned way = turn++ % 3;
    if (way == 0) {
      task();
      return done(nullptr);
    }
    std::lock_guard lk(m);
    jobs.push_back({std::move(task), std::move(done), way == 2});
  }

 private:
  struct job {
    xdev::HostTask task;
    xdev::Completion done;
    bool pause;
  };
  void complete_jobs() {
    while (!stop) {
      std::unique_lock lk(m);
      if (jobs.empty()) {
        lk.unlock();
        std::this_thread::yield();
        continue;
      }
      job j = std::move(jobs.front());
      jobs.pop_front();
      lk.unlock();
      if (j.pause) std::this_thread::sleep_for(std::chrono::microseconds(2));
      j.task();
      j.done(nullptr);
    }
  }
  std::atomic<unsigned> turn{0};
  std::atomic<bool> stop{false};
  std::mutex m;
  std::deque<job> jobs;
  std::thread completer{[this] { complete_jobs(); }};
};

TEST(StreamsFaultyBackend, CompletionsRacingTheirOwnStartKeepTheStreamInOrder) {
  xdev::Runtime<RacingBackend> rt({.max_inflight = 8}, 1);
  auto dev = rt.device(0);
  constexpr int n = 6000;
  std::vector<int> ran;  // written by the work only: a stream runs one operation at a time
  ran.reserve(n);
  std::atomic<int> delivered{0};
  std::atomic<int> failed{0};
  // (A handler of an operation that completed inside its own submission is posted, so handlers
  // may run out of order; the work may not.)
  for (int i = 0; i < n; ++i)
    dev.execute([&ran, i] { ran.push_back(i); },
                [&](std::exception_ptr ep) {
                  delivered.fetch_add(1);
                  if (ep) failed.fetch_add(1);
                });
  dev.synchronize();
  EXPECT_EQ(delivered.load(), n);
  EXPECT_EQ(failed.load(), 0);
  ASSERT_EQ(ran.size(), std::size_t{n});
  for (int i = 0; i < n; ++i) ASSERT_EQ(ran[std::size_t(i)], i);
  EXPECT_EQ(dev.execution_stats().completed, std::size_t{n});
}

}  // namespace
