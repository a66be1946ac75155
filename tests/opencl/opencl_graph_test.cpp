// Graph capture and replay (<xdev/any/graph.hpp>) on the plugins, loaded through the registry: on
// OPENCL, whose streams have native in-order queues, a replay hands its steps to the queue back to
// back (transfers, the plugin's ops, a user kernel) and still runs them in order, waits for an event
// held on the host before what follows, and swaps memory through bindings; on REF (no native
// queues) the steps run one after the other.
//
// Without an OpenCL driver the OPENCL tests skip with the reason, unless XDEV_TEST_DEVICES lists it.
#include <xdev/any/any_device.hpp>
#include <xdev/any/graph.hpp>
#include <xdev/any/kernel.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/ops/elementwise.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <future>
#include <span>
#include <string>
#include <vector>

#include "opencl_plugin_devices.hpp"

namespace {

using ::testing::ElementsAre;
using xdev::AnyDevice;
using xdev::KernelParam;
namespace fs = std::filesystem;

// y = a * x + b.
xdev::Kernel axpb() {
  return xdev::Kernel({.source = R"CL(
      __kernel void axpb(__global float* y, __global const float* x, float a, float b) {
        const size_t i = get_global_id(0);
        y[i] = a * x[i] + b;
      })CL",
                       .entry = "axpb",
                       .params = {KernelParam::buffer<float>(), KernelParam::buffer<float>(),
                                  KernelParam::scalar<float>(), KernelParam::scalar<float>()}});
}

using PluginGraph = xdev_test::OpenCLPluginDevices;

TEST_F(PluginGraph, OnOpenCLAReplayHandsItsStepsToTheNativeQueueInOrder) {
  const AnyDevice& dev = devices.front();
  const auto s = dev.make_stream();
  ASSERT_TRUE(s.uses_native_queue());
  const xdev::Kernel k = axpb();
  std::vector<float> in{1, 2, 3, 4}, out(4);
  auto x = xdev::empty<float>(dev, {4});
  auto y = xdev::empty<float>(dev, {4});
  const xdev::Graph g = xdev::capture(s, [&] {
    s.copy_to_device(std::span<const float>(in), x.buffer());
    k.launch(s, {4}, {y, x, 2.0F, 1.0F});   // y = 2x + 1
    xdev::ops::scale(s, y, 3.0F);           // the plugin's own op
    k.launch(s, {4}, {x, y, 1.0F, -1.0F});  // x = y - 1
    s.copy_to_host(x.buffer(), std::span<float>(out));
  });
  EXPECT_EQ(g.size(), 5u);
  for (int round = 0; round < 3; ++round) {
    g.replay().get();
    EXPECT_THAT(out, ElementsAre(8, 14, 20, 26)) << "round " << round;
  }
  // Bindings: the same step on other memory.
  std::vector<float> in2{10, 20, 30, 40}, out2(4);
  auto x2 = xdev::empty<float>(dev, {4});
  xdev::GraphBindings b;
  b.array(x, x2)
      .host(std::span<const float>(in), std::span<float>(in2))
      .host(std::span<float>(out), std::span<float>(out2));
  g.replay(b).get();
  EXPECT_THAT(out2, ElementsAre(62, 122, 182, 242));
  EXPECT_THAT(out, ElementsAre(8, 14, 20, 26));
}

TEST_F(PluginGraph, OnOpenCLAStepHeldOnTheHostHoldsBackTheStepsAfterIt) {
  const AnyDevice& dev = devices.front();
  const auto s = dev.make_stream();
  const auto other = dev.make_stream();
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  std::vector<float> out(2);
  auto x = xdev::empty<float>(dev, {2});
  xdev::ops::fill(s, x, 1.0F).get();
  other.execute([opened] { opened.wait(); });
  const xdev::Event held = other.record();
  const xdev::Graph h = xdev::capture(s, [&] {
    s.wait(held);
    xdev::ops::scale(s, x, 5.0F);
    s.copy_to_host(x.buffer(), std::span<float>(out));
  });
  auto f = h.replay();
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(30)), std::future_status::timeout);
  EXPECT_THAT(out, ElementsAre(0, 0)) << "nothing after the wait ran";
  gate.set_value();
  f.get();
  EXPECT_THAT(out, ElementsAre(5, 5));
}

TEST(PluginGraphElsewhere, OnRefTheStepsRunOneAfterTheOther) {
  xdev::Registry reg{xdev::plugin::SearchPath(std::vector<fs::path>{fs::path(XDEV_TEST_PLUGIN_DIR)})};
  const AnyDevice ref = reg.devices("REF").at(0);
  const auto s = ref.make_stream();
  EXPECT_FALSE(s.uses_native_queue());
  auto x = xdev::empty<double>(ref, {3});
  std::vector<double> in{1, 2, 3}, out(3);
  const xdev::Graph g = xdev::capture(s, [&] {
    s.copy_to_device(std::span<const double>(in), x.buffer());
    xdev::ops::scale(s, x, 2.0);
    xdev::ops::add(s, x, x, x);
    s.copy_to_host(x.buffer(), std::span<double>(out));
  });
  g.replay().get();
  EXPECT_THAT(out, ElementsAre(4, 8, 12));
  in = {0.5, 1, 1.5};
  g.replay().get();
  EXPECT_THAT(out, ElementsAre(2, 4, 6));
}

}  // namespace
