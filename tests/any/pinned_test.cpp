// Pinned host memory (<xdev/any/pinned.hpp>) on the host backend, where it is ordinary aligned
// memory: transfers from and to it, a buffer dropped while a transfer from it is still queued
// (freed after it, not before), moves, and the errors. (The OpenCL plugin's mapped memory is in
// tests/opencl; the ABI entries in tests/plugin_abi.)
#include <xdev/any/any_device.hpp>
#include <xdev/any/pinned.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <future>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "support/error_of.hpp"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using xdev::AnyDevice;
using xdev::backends::Host;
using xdev_test::error_of;

class Pinned : public ::testing::Test {
 protected:
  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 1, .threads = 1}};
  AnyDevice dev{rt.device(0)};
};

TEST_F(Pinned, OnTheHostItIsOrdinaryAlignedMemoryThatTransfersUse) {
  auto p = xdev::pinned<float>(dev, 100);
  EXPECT_FALSE(p.backend_allocated()) << "the host backend has no pinned memory of its own";
  EXPECT_EQ(p.size(), 100u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p.data()) % 64, 0u);
  EXPECT_EQ(p.device(), dev);
  std::iota(p.begin(), p.end(), 0.0F);
  auto a = xdev::empty<float>(dev, {100});
  dev.copy_to_device(std::span<const float>(p.span()), a).get();
  auto back = xdev::pinned<float>(dev, 100);
  dev.copy_to_host(a, back.span()).get();
  EXPECT_EQ(back[0], 0.0F);
  EXPECT_EQ(back[99], 99.0F);
}

TEST_F(Pinned, ABufferDroppedWhileATransferFromItIsQueuedIsFreedAfterTheTransfer) {
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  const auto s = dev.make_stream();
  s.execute([opened] { opened.wait(); });  // holds the device
  auto a = xdev::empty<std::int32_t>(dev, {4});
  {
    auto p = xdev::pinned<std::int32_t>(dev, 4);
    for (std::size_t i = 0; i < 4; ++i) p[i] = static_cast<std::int32_t>(10 * i);
    s.copy_to_device(std::span<const std::int32_t>(p.span()), a.buffer());
  }  // dropped with the copy still queued behind the gate
  gate.set_value();
  std::vector<std::int32_t> out(4);
  s.copy_to_host(a.buffer(), std::span<std::int32_t>(out)).get();
  EXPECT_THAT(out, ElementsAre(0, 10, 20, 30)) << "the copy read the memory before it was freed";
}

TEST_F(Pinned, MovesTransferOwnershipAndEmptyBuffersAllocateNothing) {
  auto p = xdev::pinned<double>(dev, 8);
  double* data = p.data();
  xdev::PinnedBuffer<double> q = std::move(p);
  EXPECT_EQ(q.data(), data);
  EXPECT_TRUE(p.empty());  // NOLINT(bugprone-use-after-move): a moved-from buffer is empty
  q = xdev::pinned<double>(dev, 2);
  EXPECT_EQ(q.size(), 2u);
  const auto none = xdev::pinned<double>(dev, 0);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.data(), nullptr);
}

TEST_F(Pinned, BadRequestsAreErrorsThatNameTheProblem) {
  const auto no_device = error_of([] { (void)xdev::pinned<float>(AnyDevice{}, 4); });
  EXPECT_EQ(no_device.code(), xdev::errc::invalid_argument);
  EXPECT_THAT(no_device.what(), HasSubstr("pinned: the handle names no device"));
  const auto huge = error_of([&] { (void)xdev::pinned<double>(dev, static_cast<std::size_t>(-1) / 4); });
  EXPECT_EQ(huge.code(), xdev::errc::invalid_argument);
  EXPECT_THAT(huge.what(), HasSubstr("overflow"));
  const auto oom = error_of([&] { (void)xdev::pinned<char>(dev, static_cast<std::size_t>(-1) / 2); });
  EXPECT_EQ(oom.code(), xdev::errc::out_of_memory);
  EXPECT_THAT(oom.what(), HasSubstr("pinned: HOST:0: no"));
}

}  // namespace
