// Plugins of an older ABI minor next to current ones, from real shared libraries: BINARY11 (ABI
// 1.1, a native `binary` entry that knows add and mul only) and BINARY12 (ABI 1.2, which also
// knows min and max). A 1.1 plugin must never receive XDEV_BINARY_MIN or _MAX: xdev runs
// `ops::minimum` and `ops::maximum` for it through the CPU fallback, and keeps add and mul native.
#include "plugin_test_support.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/ops.hpp>
#include <xdev/plugin/loader.hpp>
#include <xdev/plugin/plugin_backend.hpp>
#include <xdev/testing/arrays.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace {

namespace plugin = xdev::plugin;
using xdev::ops::BinaryOp;
using xdev::testing::to_device;
using xdev::testing::to_host;
using xdev_test::fixture_dir;
using xdev_test::fixture_plugin;
using xdev_test::Markers;

// What ran where, for one run of `run_binary_ops`.
struct Ran {
  std::uint64_t fallback_minimum = 0, fallback_maximum = 0, fallback_add = 0, fallback_mul = 0;
  int native_min = 0, native_max = 0, native_add = 0, native_mul = 0, native_unknown = 0;
};

// Runs add, mul, minimum and maximum once each on `dev` (a Device<PluginBackend> or an AnyDevice
// of plugin `tag`), checks the results, and reports what ran natively (the fixture's markers) and
// what through the fallback (the `fallback.*` counters).
template <class Dev>
Ran run_binary_ops(const Dev& dev, const std::string& tag) {
  Markers markers;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a{-3.0f, 2.0f, 5.0f, -0.0f, nan, 1.0f};
  const std::vector<float> b{-4.0f, 7.0f, 5.0f, 0.0f, 1.0f, nan};
  auto da = to_device(dev, {6}, a);
  auto db = to_device(dev, {6}, b);
  auto out = to_device(dev, {6}, std::vector<float>(6, 9.0f));
  const auto value = [](const char* name) { return xdev::metrics::value(name); };
  const auto before_min = value("fallback.minimum"), before_max = value("fallback.maximum");
  const auto before_add = value("fallback.add"), before_mul = value("fallback.mul");

  xdev::ops::minimum(dev, da, db, out).get();
  auto lo = to_host(out);
  EXPECT_EQ(lo[0], -4.0f);
  EXPECT_EQ(lo[1], 2.0f);
  EXPECT_EQ(lo[2], 5.0f);
  EXPECT_TRUE(lo[3] == 0.0f && std::signbit(lo[3])) << "a tie gives a: -0.0";
  EXPECT_TRUE(std::isnan(lo[4])) << "a NaN in a propagates";
  EXPECT_EQ(lo[5], 1.0f) << "a NaN in b does not";
  xdev::ops::maximum(dev, da, db, out).get();
  auto hi = to_host(out);
  EXPECT_EQ(hi[0], -3.0f);
  EXPECT_EQ(hi[1], 7.0f);
  EXPECT_EQ(hi[2], 5.0f);
  EXPECT_TRUE(hi[3] == 0.0f && std::signbit(hi[3])) << "a tie gives a: -0.0";
  EXPECT_TRUE(std::isnan(hi[4])) << "a NaN in a propagates";
  EXPECT_EQ(hi[5], 1.0f) << "a NaN in b does not";
  xdev::ops::add(dev, da, da, out).get();
  EXPECT_EQ(to_host(out)[1], 4.0f);
  xdev::ops::mul(dev, da, da, out).get();
  EXPECT_EQ(to_host(out)[0], 9.0f);

  Ran r;
  r.fallback_minimum = value("fallback.minimum") - before_min;
  r.fallback_maximum = value("fallback.maximum") - before_max;
  r.fallback_add = value("fallback.add") - before_add;
  r.fallback_mul = value("fallback.mul") - before_mul;
  r.native_min = markers.count(tag, "min");
  r.native_max = markers.count(tag, "max");
  r.native_add = markers.count(tag, "add");
  r.native_mul = markers.count(tag, "mul");
  r.native_unknown = markers.count(tag, "unknown");
  return r;
}

void expect_min_max_through_the_fallback(const Ran& r) {
  EXPECT_EQ(r.fallback_minimum, 1u);
  EXPECT_EQ(r.fallback_maximum, 1u);
  EXPECT_EQ(r.native_min, 0);
  EXPECT_EQ(r.native_max, 0);
  EXPECT_EQ(r.native_unknown, 0) << "the 1.1 plugin was sent a code it does not know";
  EXPECT_EQ(r.fallback_add, 0u) << "add stays native";
  EXPECT_EQ(r.fallback_mul, 0u) << "mul stays native";
  EXPECT_EQ(r.native_add, 1);
  EXPECT_EQ(r.native_mul, 1);
}

void expect_all_native(const Ran& r) {
  EXPECT_EQ(r.fallback_minimum, 0u);
  EXPECT_EQ(r.fallback_maximum, 0u);
  EXPECT_EQ(r.fallback_add, 0u);
  EXPECT_EQ(r.fallback_mul, 0u);
  EXPECT_EQ(r.native_min, 1);
  EXPECT_EQ(r.native_max, 1);
  EXPECT_EQ(r.native_add, 1);
  EXPECT_EQ(r.native_mul, 1);
  EXPECT_EQ(r.native_unknown, 0);
}

TEST(AbiMinor, APluginOfAbi11GetsMinimumAndMaximumThroughTheFallback) {
  const auto lib = plugin::load(fixture_plugin("binary", "binary11"));
  ASSERT_EQ(lib->abi_minor(), 1u);
  EXPECT_EQ(lib->api().struct_size, plugin::detail::table_size_v1_1) << "a table of the 1.1 header's size";
  xdev::Runtime<plugin::PluginBackend> rt({}, &lib->api(), lib);
  EXPECT_EQ(rt.backend().abi_minor(), 1u);
  EXPECT_EQ(rt.device(0).description(), "") << "a 1.1 table has no describe_device";
  EXPECT_TRUE(rt.backend().implements_binary(BinaryOp::add));
  EXPECT_TRUE(rt.backend().implements_binary(BinaryOp::mul));
  EXPECT_FALSE(rt.backend().implements_binary(BinaryOp::min));
  EXPECT_FALSE(rt.backend().implements_binary(BinaryOp::max));
  expect_min_max_through_the_fallback(run_binary_ops(rt.device(0), "binary11"));

  // Called directly, the member refuses rather than send the plugin a code it cannot know.
  const auto h = rt.backend().allocate(0, 16);
  const xdev::ops::BinaryArgs<float, std::uint64_t> args{BinaryOp::min, h, h, h, 4};
  try {
    rt.backend().run_op(0, args, xdev::Completion([](std::exception_ptr) {}));
    ADD_FAILURE() << "binary(min) reached a 1.1 plugin";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::unimplemented);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("BINARY11: binary: operator minimum needs plugin ABI 1.2, the "
                                               "plugin reports 1.1"));
  }
  rt.backend().deallocate(0, h, 16);
  rt.synchronize();
}

TEST(AbiMinor, APluginOfAbi12RunsMinimumAndMaximumNatively) {
  const auto lib = plugin::load(fixture_plugin("binary", "binary12"));
  ASSERT_EQ(lib->abi_minor(), 2u);
  xdev::Runtime<plugin::PluginBackend> rt({}, &lib->api(), lib);
  EXPECT_TRUE(rt.backend().implements_binary(BinaryOp::min));
  EXPECT_TRUE(rt.backend().implements_binary(BinaryOp::max));
  EXPECT_FALSE(rt.backend().implements_binary(static_cast<BinaryOp>(7)));
  expect_all_native(run_binary_ops(rt.device(0), "binary12"));
  rt.synchronize();
}

// The same through the registry's AnyDevices: the erased path reaches the same typed dispatch.
TEST(AbiMinor, AnyDevicesOfBothPluginsTakeTheSamePaths) {
  xdev::Registry reg{xdev::plugin::SearchPath(std::vector<std::filesystem::path>{fixture_dir("binary")})};
  EXPECT_THAT(reg.names(), ::testing::UnorderedElementsAre("HOST", "BINARY11", "BINARY12"));
  const auto old_devices = reg.devices("BINARY11");
  const auto new_devices = reg.devices("BINARY12");
  ASSERT_FALSE(old_devices.empty());
  ASSERT_FALSE(new_devices.empty());
  expect_min_max_through_the_fallback(run_binary_ops(old_devices[1], "binary11"));
  expect_all_native(run_binary_ops(new_devices[1], "binary12"));
  EXPECT_EQ(old_devices[1].description(), "");
  EXPECT_EQ(new_devices[1].description(), "") << "a 1.2 table ends before describe_device";
}

}  // namespace
