// Pinned host memory (<xdev/any/pinned.hpp>) on the OPENCL plugin, loaded through the registry: the
// plugin backs it with a mapped CL_MEM_ALLOC_HOST_PTR buffer (ABI 1.9 `allocate_host`), transfers
// from and to it at any offset round-trip, and memory dropped while a transfer from it is queued is
// released after the transfer. REF, which has no pinned memory, gives ordinary host memory.
//
// Without an OpenCL driver the tests skip with the reason, unless XDEV_TEST_DEVICES lists OPENCL.
#include <xdev/any/any_device.hpp>
#include <xdev/any/pinned.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/ops/elementwise.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <future>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "opencl_plugin_devices.hpp"

namespace {

using ::testing::ElementsAre;
using xdev::AnyDevice;
namespace fs = std::filesystem;

using PinnedOpenCL = xdev_test::OpenCLPluginDevices;

TEST_F(PinnedOpenCL, ThePluginMapsItAndTransfersRoundTripAtAnyOffset) {
  for (const AnyDevice& dev : devices) {
    auto p = xdev::pinned<float>(dev, 1000);
    EXPECT_TRUE(p.backend_allocated()) << dev.name() << ": a mapped CL_MEM_ALLOC_HOST_PTR buffer";
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p.data()) % alignof(float), 0u);
    std::iota(p.begin(), p.end(), 0.0F);
    auto a = xdev::empty<float>(dev, {1000});
    dev.copy_to_device(std::span<const float>(p.span()), a).get();
    xdev::ops::scale(dev, a, 3.0F).get();
    auto back = xdev::pinned<float>(dev, 1000);
    dev.copy_to_host(a, back.span()).get();
    EXPECT_EQ(back[0], 0.0F) << dev.name();
    EXPECT_EQ(back[999], 2997.0F) << dev.name();
    // A window in the middle of the pinned block (a transfer of part of it).
    auto small = xdev::empty<float>(dev, {4});
    dev.copy_to_device(std::span<const float>(p.span().subspan(500, 4)), small).get();
    std::vector<float> out(4);
    dev.copy_to_host(small, std::span<float>(out)).get();
    EXPECT_THAT(out, ElementsAre(500.0F, 501.0F, 502.0F, 503.0F)) << dev.name();
  }
}

TEST_F(PinnedOpenCL, MemoryDroppedWhileATransferIsQueuedIsReleasedAfterIt) {
  const AnyDevice& dev = devices.front();
  const auto s = dev.make_stream();
  auto a = xdev::empty<std::int32_t>(dev, {1 << 16});
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  s.execute([opened] { opened.wait(); });
  {
    auto p = xdev::pinned<std::int32_t>(dev, 1 << 16);
    std::iota(p.begin(), p.end(), 7);
    s.copy_to_device(std::span<const std::int32_t>(p.span()), a.buffer());
  }
  gate.set_value();
  std::vector<std::int32_t> out(1 << 16);
  s.copy_to_host(a.buffer(), std::span<std::int32_t>(out)).get();
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out.back(), 7 + (1 << 16) - 1);
}

TEST(PinnedElsewhere, APluginWithoutPinnedMemoryGivesOrdinaryHostMemory) {
  xdev::Registry reg{xdev::plugin::SearchPath(std::vector<fs::path>{fs::path(XDEV_TEST_PLUGIN_DIR)})};
  const AnyDevice ref = reg.devices("REF").at(0);
  auto p = xdev::pinned<double>(ref, 16);
  EXPECT_FALSE(p.backend_allocated());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p.data()) % 64, 0u);
  std::iota(p.begin(), p.end(), 1.0);
  auto a = xdev::empty<double>(ref, {16});
  ref.copy_to_device(std::span<const double>(p.span()), a).get();
  std::vector<double> out(16);
  ref.copy_to_host(a, std::span<double>(out)).get();
  EXPECT_EQ(out[15], 16.0);
}

}  // namespace
