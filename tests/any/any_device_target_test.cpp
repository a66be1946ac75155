// The device test harness with targets that give AnyDevices (concepts::AnyDeviceTestTarget): the
// fixture's devices, its require_* helpers, and availability, alongside a typed target.
#include <xdev/any/any_device.hpp>
#include <xdev/testing/device_test.hpp>
#include <xdev/testing/erased_targets.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// Erased devices that exist on no machine.
struct AnyNeverTarget {
  static std::string name() { return "ANYNEVER"; }
  static std::vector<xdev::AnyDevice> devices(std::string& why_unavailable) {
    why_unavailable = "ANYNEVER devices exist on no machine";
    return {};
  }
};

static_assert(xdev::concepts::AnyDeviceTestTarget<xdev::testing::AnyHostTarget>);
static_assert(!xdev::concepts::DeviceTestTarget<xdev::testing::AnyHostTarget>);
static_assert(!xdev::concepts::AnyDeviceTestTarget<xdev::testing::HostTarget>);

using AnyHarnessTargets =
    xdev::testing::Targets<xdev::testing::AnyHostTarget, AnyNeverTarget, xdev::testing::HostTarget>;
XDEV_DEVICE_TEST_SUITE(AnyHarness, AnyHarnessTargets);

XDEV_DEVICE_TEST(AnyHarness, DevicesAreAnyDevicesForAnyTargets) {
  EXPECT_NE(TypeParam::name(), "ANYNEVER") << "an unavailable target runs no body";
  constexpr bool erased = xdev::concepts::AnyDeviceTestTarget<TypeParam>;
  static_assert(TestFixture::erased == erased);
  static_assert(std::is_same_v<decltype(this->device()), typename TestFixture::device_type>);
  static_assert(std::is_same_v<typename TestFixture::device_type, xdev::AnyDevice> == erased);
  ASSERT_EQ(this->device_count(), 2u);
  EXPECT_EQ(this->device(1).ordinal(), 1u);
  EXPECT_NE(this->device(0), this->device(1));
  EXPECT_EQ(this->device(0).name(), "HOST:0");
  try {
    (void)this->device(2);
    ADD_FAILURE() << "device 2 exists";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::not_found);
  }
}

XDEV_DEVICE_TEST(AnyHarness, RequireDtypeReadsTheCapabilitiesInForce) {
  EXPECT_TRUE(this->require_dtype(xdev::DType::f64));
  EXPECT_TRUE(this->require_devices(2));
  EXPECT_FALSE(::testing::Test::IsSkipped());
}

XDEV_DEVICE_TEST(AnyHarness, RequireLaunchableSkipsForAnyTargets) {
  const bool ok = this->require_launchable();
  EXPECT_EQ(ok, !TestFixture::erased);
  EXPECT_EQ(::testing::Test::IsSkipped(), TestFixture::erased);
}

TEST(AnyHarnessAvailability, AnUnavailableAnyTargetIsDecidedLikeATypedOne) {
  const std::vector<std::string> known{"ANYHOST", "ANYNEVER", "HOST"};
  EXPECT_EQ(xdev::testing::availability_decision("ANYNEVER", false, "gone", std::nullopt, known).action,
            xdev::testing::Action::skip);
  EXPECT_EQ(xdev::testing::availability_decision("ANYNEVER", false, "gone", "ANYNEVER", known).action,
            xdev::testing::Action::fail);
  const auto names = xdev::testing::registered_target_names();
  for (const char* n : {"ANYHOST", "ANYNEVER"}) EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

}  // namespace
