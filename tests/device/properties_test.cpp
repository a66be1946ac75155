// Device properties (DeviceProperties through Device<B>::properties() and AnyDevice::properties()):
// what the host backend reports about the machine, what xdev fills in itself for a backend without
// the hook (dtypes, host accessibility, memory from MemoryPerDevice), and a backend's own hook.
#include <xdev/any/any_device.hpp>
#include <xdev/backend/device_properties.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/policy/capabilities.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <sstream>
#include <string>

#include "support/manual_backend.hpp"
#include "support/test_targets.hpp"

namespace {

using xdev::DType;
using xdev::backends::Host;

TEST(DeviceProperties, TheHostReportsTheMachineItsThreadsAndItsMemoryNow) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 2, .threads = 3});
  const xdev::DeviceProperties p = rt.device(1).properties();
  EXPECT_EQ(p.type, xdev::DeviceType::cpu);
  EXPECT_EQ(p.compute_units, 3u) << "the worker threads";
  EXPECT_EQ(p.max_work_group_size, 0u) << "no work-group limit";
  EXPECT_FALSE(p.architecture.empty()) << "uname's machine";
  EXPECT_THAT(p.driver_version, ::testing::StartsWith("Linux "));
  EXPECT_GT(p.memory_total, std::size_t{1} << 20);
  ASSERT_TRUE(p.memory_free.has_value());
  EXPECT_LE(*p.memory_free, p.memory_total);
  EXPECT_TRUE(p.host_accessible);
  for (DType t : xdev::all_dtypes) EXPECT_TRUE(p.supports(t)) << t;
  // The same through erasure, and the same machine for every host device.
  const xdev::DeviceProperties q = xdev::AnyDevice(rt.device(0)).properties();
  EXPECT_EQ(q.name, p.name);
  EXPECT_EQ(q.memory_total, p.memory_total);
  EXPECT_EQ(q.compute_units, 3u);
  EXPECT_EQ(xdev::AnyDevice().properties(), xdev::DeviceProperties{}) << "a handle of no device";
}

// ManualBackend's memory is new[]'ed host memory, but it does not say so (no host_address).
class SizedBackend
    : public xdev_test::PolicyBackend<xdev::Capabilities<xdev::MemoryPerDevice<std::size_t{1} << 20>,
                                                         xdev::SupportedDTypes<DType::f32, DType::f64>>> {
 public:
  static constexpr std::string_view name = "SIZED";
  using PolicyBackend::PolicyBackend;
};

TEST(DeviceProperties, WithoutTheHookXdevFillsInWhatItKnowsItself) {
  xdev::Runtime<SizedBackend> rt;
  const xdev::DeviceProperties p = xdev::AnyDevice(rt.device(0)).properties();
  EXPECT_EQ(p.name, "");
  EXPECT_EQ(p.type, xdev::DeviceType::unknown);
  EXPECT_EQ(p.compute_units, 0u);
  EXPECT_FALSE(p.memory_free.has_value());
  EXPECT_EQ(p.memory_total, std::size_t{1} << 20) << "the MemoryPerDevice capability";
  EXPECT_FALSE(p.host_accessible);
  EXPECT_TRUE(p.supports(DType::f32) && p.supports(DType::f64));
  EXPECT_FALSE(p.supports(DType::f16));
}

// A backend with its own hook: its figures win over the capability's.
class BoardBackend : public SizedBackend {
 public:
  static constexpr std::string_view name = "BOARD";
  using SizedBackend::SizedBackend;
  xdev::DeviceProperties device_properties(std::size_t device) const {
    xdev::DeviceProperties p;
    p.type = xdev::DeviceType::accelerator;
    p.name = "board " + std::to_string(device);
    p.vendor = "Example Corp";
    p.compute_units = 64;
    p.max_work_group_size = 256;
    p.memory_total = std::size_t{1} << 30;
    p.memory_free = std::size_t{1} << 29;
    p.host_accessible = true;  // not the backend's to say: xdev sets it from the concept
    return p;
  }
};
static_assert(xdev::concepts::ReportsDeviceProperties<BoardBackend>);
static_assert(!xdev::concepts::ReportsDeviceProperties<SizedBackend>);

TEST(DeviceProperties, ABackendsHookGivesItsFiguresAndXdevKeepsTheRest) {
  xdev::Runtime<BoardBackend> rt({}, std::size_t{2});
  const xdev::DeviceProperties p = rt.device(1).properties();
  EXPECT_EQ(p.name, "board 1");
  EXPECT_EQ(p.type, xdev::DeviceType::accelerator);
  EXPECT_EQ(p.vendor, "Example Corp");
  EXPECT_EQ(p.compute_units, 64u);
  EXPECT_EQ(p.max_work_group_size, 256u);
  EXPECT_EQ(p.memory_total, std::size_t{1} << 30) << "the driver's figure wins over MemoryPerDevice";
  EXPECT_EQ(p.memory_free, std::size_t{1} << 29);
  EXPECT_FALSE(p.host_accessible) << "set by xdev from HostAccessibleBackend";
  EXPECT_FALSE(p.supports(DType::i32));
  std::ostringstream os;
  os << p;
  EXPECT_EQ(
      os.str(),
      "{type=accelerator, name=\"board 1\", vendor=\"Example Corp\", driver=\"\", architecture=\"\", compute_units=64, "
      "max_work_group=256, memory_total=1073741824, memory_free=536870912, host_accessible=no, "
      "dtypes=[f32,f64]}");
}

TEST(DeviceProperties, EachDeviceTypePrintsAsItsName) {
  const auto text = [](xdev::DeviceType t) {
    std::ostringstream os;
    os << t;
    return os.str();
  };
  EXPECT_EQ(text(xdev::DeviceType::unknown), "unknown");
  EXPECT_EQ(text(xdev::DeviceType::cpu), "cpu");
  EXPECT_EQ(text(xdev::DeviceType::gpu), "gpu");
  EXPECT_EQ(text(xdev::DeviceType::accelerator), "accelerator");
  EXPECT_EQ(text(static_cast<xdev::DeviceType>(9)), "unknown");
}

}  // namespace
