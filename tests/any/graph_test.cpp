// Graph capture and replay (<xdev/any/graph.hpp>) on the host backend: capture records without
// running, replay runs the steps in order as one operation (one in-flight slot, one completion,
// every token), bindings swap buffers and host memory, a failing step ends the replay with its
// error and the stream goes on, and what cannot be captured is refused naming it. (On REF and
// OpenCL: tests/opencl/opencl_graph_test.cpp.)
#include <xdev/any/any_device.hpp>
#include <xdev/any/graph.hpp>
#include <xdev/any/kernel.hpp>
#include <xdev/any/parallel.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/elementwise.hpp>
#include <xdev/ops/reduce.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <future>
#include <latch>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support/error_of.hpp"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using xdev::AnyDevice;
using xdev::backends::Host;
using xdev_test::error_of;

class GraphCapture : public ::testing::Test {
 protected:
  // The array's values after the work submitted to `s` so far.
  std::vector<float> read(const xdev::AnyArray<float>& a) {
    std::vector<float> out(a.size());
    s.copy_to_host(a.buffer(), std::span<float>(out)).get();
    return out;
  }
  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 1, .threads = 2}};
  AnyDevice dev{rt.device(0)};
  xdev::AnyStream s = dev.make_stream();
};

TEST_F(GraphCapture, CaptureRecordsWithoutRunningAndReplayRunsTheStepsInOrder) {
  std::vector<float> in{1, 2, 3, 4};
  auto x = xdev::empty<float>(dev, {4});
  std::atomic<int> host_runs{0};
  const xdev::Graph g = xdev::capture(s, [&] {
    s.copy_to_device(std::span<const float>(in), x.buffer());
    xdev::ops::scale(s, x, 10.0F);
    s.execute([&] { ++host_runs; });
    xdev::ops::add(s, x, x, x);
  });
  EXPECT_EQ(g.size(), 4u);
  s.synchronize();
  EXPECT_EQ(host_runs.load(), 0) << "nothing ran during the capture";
  g.replay().get();
  EXPECT_EQ(host_runs.load(), 1);
  EXPECT_THAT(read(x), ElementsAre(20, 40, 60, 80));
  in = {5, 6, 7, 8};  // the captured copy reads the same host memory again
  g.replay().get();
  EXPECT_THAT(read(x), ElementsAre(100, 120, 140, 160));
  EXPECT_EQ(host_runs.load(), 2);
}

TEST_F(GraphCapture, AReplayIsOneOperationAndTakesEveryToken) {
  auto x = xdev::empty<float>(dev, {2});
  xdev::ops::fill(s, x, 1.0F).get();
  const xdev::Graph g = xdev::capture(s, [&] {
    for (int i = 0; i < 10; ++i) xdev::ops::scale(s, x, 2.0F);
  });
  const auto before = dev.queue()->throttle().high_water();
  std::promise<void> called;
  g.replay([&](std::exception_ptr ep) {
    if (ep)
      called.set_exception(ep);
    else
      called.set_value();
  });
  called.get_future().get();
  EXPECT_LE(dev.queue()->throttle().high_water(), std::max<std::size_t>(before, 1)) << "one in-flight slot";
  EXPECT_THAT(read(x), ElementsAre(1024, 1024));
  // Work submitted after a replay runs after all of it.
  g.replay();
  xdev::ops::scale(s, x, 0.5F);
  EXPECT_THAT(read(x), ElementsAre(512 * 1024, 512 * 1024));
}

// Without a native queue, each step after the first starts from the completion of the one before,
// on the host backend's worker: the backend runs it there inline (no hand-off, no wake-up).
TEST_F(GraphCapture, OnTheHostAReplaysStepsRunBackToBackOnOneWorker) {
  // The first step holds its worker until replay() has returned: otherwise it may complete while
  // the calling thread is still issuing, and that thread (not the worker) issues the next step.
  std::latch returned(1);
  std::vector<std::thread::id> ran(6);
  const xdev::Graph g = xdev::capture(s, [&] {
    s.execute([&] {
      returned.wait();
      ran[0] = std::this_thread::get_id();
    });
    for (std::size_t i = 1; i < ran.size(); ++i) s.execute([&ran, i] { ran[i] = std::this_thread::get_id(); });
  });
  auto done = g.replay();
  returned.count_down();
  done.get();
  EXPECT_NE(ran[0], std::this_thread::get_id());
  for (std::size_t i = 1; i < ran.size(); ++i) EXPECT_EQ(ran[i], ran[0]) << "step " << i;
}

TEST_F(GraphCapture, BindingsReplayOnOtherBuffersAndHostMemory) {
  auto a = xdev::empty<float>(dev, {3});
  auto b = xdev::empty<float>(dev, {3});
  std::vector<float> in_a{1, 2, 3}, in_b{7, 8, 9};
  std::vector<float> out_a(3), out_b(3);
  const xdev::Graph g = xdev::capture(s, [&] {
    s.copy_to_device(std::span<const float>(in_a), a.buffer());
    xdev::ops::scale(s, a, 2.0F);
    s.copy_to_host(a.buffer(), std::span<float>(out_a));
  });
  g.replay().get();
  EXPECT_THAT(out_a, ElementsAre(2, 4, 6));
  xdev::GraphBindings on_b;
  on_b.array(a, b)
      .host(std::span<const float>(in_a), std::span<float>(in_b))
      .host(std::span<float>(out_a), std::span<float>(out_b));
  g.replay(on_b).get();
  EXPECT_THAT(out_b, ElementsAre(14, 16, 18));
  EXPECT_THAT(out_a, ElementsAre(2, 4, 6)) << "the captured memory is untouched";
  EXPECT_THAT(read(a), ElementsAre(2, 4, 6));

  auto c = xdev::empty<float>(dev, {4});
  EXPECT_THAT(error_of([&] { xdev::GraphBindings().array(a, c); }).what(), HasSubstr("arrays of different shapes"));
  std::vector<float> two(2);
  EXPECT_THAT(error_of([&] { xdev::GraphBindings().host(std::span<const float>(in_a), std::span<float>(two)); }).what(),
              HasSubstr("host memory of 3 elements bound to 2"));
}

TEST_F(GraphCapture, AFailingStepEndsTheReplayWithItsErrorAndTheStreamGoesOn) {
  std::atomic<int> after{0};
  const xdev::Graph g = xdev::capture(s, [&] {
    s.execute([] { throw std::runtime_error("step 2 failed"); });
    s.execute([&] { ++after; });
  });
  try {
    g.replay().get();
    ADD_FAILURE() << "the error was lost";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("step 2 failed"));
  }
  EXPECT_EQ(after.load(), 0) << "no step runs after a failure";
  s.execute([&] { ++after; }).get();
  EXPECT_EQ(after.load(), 1);
}

TEST_F(GraphCapture, KernelsAndEventWaitsAreCapturedToo) {
  auto x = xdev::empty<std::int32_t>(dev, {8});
  std::int32_t* p = xdev::host_data(x);
  const auto other = dev.make_stream();
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  other.execute([opened] { opened.wait(); });
  const xdev::Event ready = other.record();
  const xdev::Graph g = xdev::capture(s, [&] {
    s.wait(ready);
    xdev::parallel_for(s, 8, [p](std::size_t i) { p[i] = static_cast<std::int32_t>(i) * 3; });
  });
  EXPECT_EQ(g.size(), 2u);
  auto f = g.replay();
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout) << "waits for the event";
  gate.set_value();
  f.get();
  EXPECT_EQ(p[7], 21);
}

TEST_F(GraphCapture, WhatCannotBeCapturedIsRefusedNamingIt) {
  auto x = xdev::empty<float>(dev, {4});
  const auto sum = error_of([&] { (void)xdev::capture(s, [&] { (void)xdev::ops::sum(s, x); }); });
  EXPECT_EQ(sum.code(), xdev::errc::invalid_argument);
  EXPECT_THAT(sum.what(), HasSubstr("an operation with a result"));
  EXPECT_THAT(error_of([&] { (void)xdev::capture(s, [&] { (void)s.record(); }); }).what(),
              HasSubstr("record() on a stream being captured"));
  EXPECT_THAT(error_of([&] { (void)xdev::capture(s, [&] { s.synchronize(); }); }).what(),
              HasSubstr("synchronize() on a stream being captured"));
  EXPECT_THAT(error_of([&] { (void)xdev::capture(s, [&] { (void)xdev::capture(s, [] {}); }); }).what(),
              HasSubstr("already capturing"));
  // A body that throws keeps nothing, and the stream is no longer captured.
  EXPECT_THROW((void)xdev::capture(s,
                                   [&] {
                                     xdev::ops::scale(s, x, 2.0F);
                                     throw std::runtime_error("body failed");
                                   }),
               std::runtime_error);
  xdev::ops::fill(s, x, 3.0F).get();  // runs: the capture is over
  EXPECT_THAT(read(x), ElementsAre(3, 3, 3, 3));
  // Another stream, during a capture, runs as usual.
  const auto t = dev.make_stream();
  const xdev::Graph g = xdev::capture(s, [&] {
    xdev::ops::fill(t, x, 5.0F).get();
    xdev::ops::scale(s, x, 2.0F);
  });
  EXPECT_EQ(g.size(), 1u);
  EXPECT_THAT(read(x), ElementsAre(5, 5, 5, 5));
  EXPECT_THROW((void)xdev::Graph().replay(), xdev::error);
  EXPECT_TRUE(xdev::capture(s, [] {}).empty());
  xdev::capture(s, [] {}).replay().get();  // an empty graph completes at once
}

}  // namespace
