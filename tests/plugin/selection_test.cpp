// Device selection: what XDEV_DEVICE's terms make visible and which backend becomes the default
// (Registry), choosing a device with a selector (select_device and the ready-made selectors), and
// the scoped current device (DeviceScope). Backends: HOST and the GOOD fixture plugin (priority
// above HOST's, two devices, memory not host-addressable through the ABI).
#include "plugin_test_support.hpp"
#include "scoped_current_device.hpp"
#include "support/error_of.hpp"
#include "support/test_targets.hpp"

#include <xdev/any/accelerator.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/any/selector.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/core/log.hpp>
#include <xdev/device/runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using xdev::AnyDevice;
using xdev_test::fixture_dir;
using xdev_test::ScopedEnv;
namespace fs = std::filesystem;
namespace sel = xdev::selectors;

using xdev_test::error_of;

std::vector<std::string> names(const std::vector<AnyDevice>& devices) {
  std::vector<std::string> out;
  for (const auto& d : devices) out.push_back(d.name());
  return out;
}

// A registry over the given plugin directories whose HOST has two devices.
struct TwoHostDevices {
  explicit TwoHostDevices(std::vector<fs::path> dirs)
      : host_devices("XDEV_HOST_DEVICES", "2"), reg(xdev::plugin::SearchPath(std::move(dirs))) {}
  ScopedEnv host_devices;
  xdev::Registry reg;
};

// ---- what XDEV_DEVICE makes visible -------------------------------------------------------------

TEST(Selection, WithoutXdevDeviceEveryDeviceIsVisibleBackendsByPriority) {
  ScopedEnv env("XDEV_DEVICE", std::nullopt);
  TwoHostDevices t({fixture_dir("good")});
  EXPECT_THAT(names(t.reg.visible_devices()), ElementsAre("GOOD:0", "GOOD:1", "HOST:0", "HOST:1"));
  EXPECT_EQ(t.reg.default_backend(), "GOOD");
  EXPECT_THAT(names(t.reg.default_devices()), ElementsAre("GOOD:0", "GOOD:1"));
}

TEST(Selection, TermsListDevicesInTheOrderWrittenAndTheFirstNamedBackendIsTheDefault) {
  TwoHostDevices t({fixture_dir("good")});
  {
    ScopedEnv env("XDEV_DEVICE", "host:1;good:1,0;HOST");
    EXPECT_THAT(names(t.reg.visible_devices()), ElementsAre("HOST:1", "GOOD:1", "GOOD:0", "HOST:0"));
    EXPECT_EQ(t.reg.default_backend(), "HOST") << "named first, though GOOD has the higher priority";
    EXPECT_THAT(names(t.reg.default_devices()), ElementsAre("HOST:1", "HOST:0"));
  }
  {
    ScopedEnv env("XDEV_DEVICE", "GOOD:1");
    EXPECT_THAT(names(t.reg.visible_devices()), ElementsAre("GOOD:1"));
    EXPECT_THAT(names(t.reg.default_devices()), ElementsAre("GOOD:1"));
  }
}

TEST(Selection, ExclusionsRemoveDevicesAndAloneStartFromEveryDevice) {
  TwoHostDevices t({fixture_dir("good")});
  {
    ScopedEnv env("XDEV_DEVICE", "!good:0");
    EXPECT_THAT(names(t.reg.visible_devices()), ElementsAre("GOOD:1", "HOST:0", "HOST:1"));
    EXPECT_EQ(t.reg.default_backend(), "GOOD");
  }
  {
    ScopedEnv env("XDEV_DEVICE", "!GOOD");
    EXPECT_THAT(names(t.reg.visible_devices()), ElementsAre("HOST:0", "HOST:1"));
    EXPECT_EQ(t.reg.default_backend(), "HOST");
  }
  {
    ScopedEnv env("XDEV_DEVICE", "good;host;!*:0");
    EXPECT_THAT(names(t.reg.visible_devices()), ElementsAre("GOOD:1", "HOST:1"));
  }
}

TEST(Selection, AStarTakesEveryAvailableBackendByPriorityAndSkipsOnesThatFail) {
  xdev_test::CapturedDiagnostics diagnostics;
  TwoHostDevices t({fixture_dir("good"), fixture_dir("createfails")});
  ScopedEnv env("XDEV_DEVICE", "*:1");
  EXPECT_THAT(names(t.reg.visible_devices()), ElementsAre("GOOD:1", "HOST:1"));
  EXPECT_EQ(t.reg.default_backend(), "GOOD");
}

TEST(Selection, ABackendBelowHostsPriorityIsTheDefaultWhenNamedOrWhenNothingElseIsLeft) {
  TwoHostDevices t({fs::path(XDEV_TEST_PLUGIN_DIR)});
  {
    ScopedEnv env("XDEV_DEVICE", "*");
    EXPECT_THAT(names(t.reg.visible_devices()), ::testing::Contains("REF:0")) << "visible, for select_device";
    EXPECT_NE(t.reg.default_backend(), "REF") << "REF declares Priority<-200>: only used by name";
  }
  {
    ScopedEnv env("XDEV_DEVICE", "host:1;ref:1");
    EXPECT_EQ(t.reg.default_backend(), "HOST");
  }
  {
    ScopedEnv env("XDEV_DEVICE", "ref:1;host");
    EXPECT_EQ(t.reg.default_backend(), "REF");
    EXPECT_THAT(names(t.reg.default_devices()), ElementsAre("REF:1"));
  }
  {
    // Whatever else the build has (OPENCL), excluded: only REF is left, so it is the default.
    std::string others;
    for (const auto& n : t.reg.names())
      if (n != "REF") others += (others.empty() ? "!" : ";!") + n;
    ScopedEnv env("XDEV_DEVICE", others.c_str());
    EXPECT_EQ(t.reg.default_backend(), "REF") << others;
  }
}

TEST(Selection, TheDebugLogSaysOncePerBackendWhyItIsNotTheDefault) {
  std::vector<std::string> said;
  const xdev::log::Sink previous = xdev::log::set_sink([&](const xdev::log::Record& r) {
    if (r.component == "registry") said.emplace_back(r.message);
  });
  xdev::log::set_level(xdev::log::Level::debug);
  {
    TwoHostDevices t({fs::path(XDEV_TEST_PLUGIN_DIR)});
    ScopedEnv env("XDEV_DEVICE", "!HOST");
    (void)t.reg.default_backend();
  }
  xdev::log::set_level(std::nullopt);
  xdev::log::set_sink(previous);
  const auto about_ref = std::count_if(said.begin(), said.end(), [](const std::string& m) {
    return m.find("not the default backend: REF (priority -200") != std::string::npos;
  });
  EXPECT_EQ(about_ref, 1) << "REF has two devices, and is one backend";
}

TEST(Selection, ANameOrDeviceThatDoesNotExistIsAnErrorSayingWhatExists) {
  TwoHostDevices t({fixture_dir("good")});
  {
    ScopedEnv env("XDEV_DEVICE", "GOOD:5");
    const auto e = error_of([&] { (void)t.reg.default_backend(); });
    EXPECT_EQ(e.code(), xdev::errc::not_found);
    EXPECT_THAT(e.what(), HasSubstr("XDEV_DEVICE=GOOD:5: GOOD has no device 5 (it has 2)"));
  }
  {
    ScopedEnv env("XDEV_DEVICE", "host;tpu:0");
    const auto e = error_of([&] { (void)t.reg.visible_devices(); });
    EXPECT_EQ(e.code(), xdev::errc::not_found);
    EXPECT_THAT(e.what(), HasSubstr("XDEV_DEVICE=host;tpu:0: term \"TPU:0\" names no backend; available: HOST, GOOD"));
  }
  {
    ScopedEnv env("XDEV_DEVICE", "!TPU");
    const auto e = error_of([&] { (void)t.reg.visible_devices(); });
    EXPECT_EQ(e.code(), xdev::errc::not_found) << "a misspelt exclusion is not silently ignored";
    EXPECT_THAT(e.what(), HasSubstr("XDEV_DEVICE=!TPU names no backend"));
  }
}

TEST(Selection, AFilterThatLeavesNothingSaysWhichDevicesThereAre) {
  TwoHostDevices t({fixture_dir("good")});
  ScopedEnv env("XDEV_DEVICE", "good:1;!*:1");
  const auto e = error_of([&] { (void)t.reg.default_backend(); });
  EXPECT_EQ(e.code(), xdev::errc::unavailable);
  EXPECT_THAT(e.what(),
              HasSubstr("XDEV_DEVICE=good:1;!*:1 leaves no device visible; devices: GOOD:0, GOOD:1, HOST:0, HOST:1"));
}

TEST(Selection, ABackendThatFailsIsAnErrorWhenAListNamesIt) {
  xdev_test::CapturedDiagnostics diagnostics;
  TwoHostDevices t({fixture_dir("createfails")});
  ScopedEnv env("XDEV_DEVICE", "HOST:0;CREATEFAILS");
  const auto e = error_of([&] { (void)t.reg.visible_devices(); });
  EXPECT_EQ(e.code(), xdev::errc::unavailable);
  EXPECT_THAT(e.what(), HasSubstr("no board present (simulated)"));
}

// ---- select_device over a list ------------------------------------------------------------------

TEST(SelectDevice, TheHighestScoreWinsAndTiesGoToPriorityThenOrdinal) {
  ScopedEnv env("XDEV_DEVICE", std::nullopt);
  TwoHostDevices t({fixture_dir("good")});
  std::vector<AnyDevice> all = t.reg.visible_devices();
  std::vector<AnyDevice> shuffled{all[3], all[1], all[2], all[0]};  // HOST:1, GOOD:1, HOST:0, GOOD:0
  const std::span<const AnyDevice> c(shuffled);
  EXPECT_EQ(xdev::select_device([](const AnyDevice&) { return 0; }, c).name(), "GOOD:0");
  EXPECT_EQ(xdev::select_device(sel::prefer(sel::backend("host"), 5), c).name(), "HOST:0");
  EXPECT_EQ(xdev::select_device([](const AnyDevice& d) { return d.name() == "HOST:1" ? 9 : 1; }, c).name(), "HOST:1");
  EXPECT_EQ(xdev::select_device(sel::backend("GOOD") && sel::ordinal(1), c).name(), "GOOD:1");
}

TEST(SelectDevice, WhenEveryDeviceIsRejectedTheErrorGivesEachOneItsReason) {
  TwoHostDevices t({fixture_dir("good")});
  ScopedEnv env("XDEV_DEVICE", "GOOD:0;HOST:1");
  const std::vector<AnyDevice> c = t.reg.visible_devices();
  const auto e = error_of([&] { (void)xdev::select_device(sel::backend("OPENCL"), std::span<const AnyDevice>(c)); });
  EXPECT_EQ(e.code(), xdev::errc::not_found);
  EXPECT_THAT(e.what(), HasSubstr("select_device: no device was accepted; rejected: GOOD:0: a GOOD device, not OPENCL; "
                                  "HOST:1: a HOST device, not OPENCL"));
  const auto plain =
      error_of([&] { (void)xdev::select_device([](const AnyDevice&) { return -3; }, std::span<const AnyDevice>(c)); });
  EXPECT_THAT(plain.what(), HasSubstr("GOOD:0: scored -3"));
  const auto none = error_of([&] { (void)xdev::select_device(sel::host_accessible(), std::span<const AnyDevice>()); });
  EXPECT_THAT(none.what(), HasSubstr("(there were no candidates)"));
}

TEST(SelectDevice, AspectsReadWhatTheDeviceIs) {
  ScopedEnv env("XDEV_DEVICE", std::nullopt);
  TwoHostDevices t({fixture_dir("good")});
  const std::vector<AnyDevice> c = t.reg.visible_devices();
  const std::span<const AnyDevice> all(c);
  EXPECT_EQ(xdev::select_device(sel::host_accessible(), all).name(), "HOST:0");
  const auto good = error_of([&] { (void)xdev::select_device(sel::host_accessible() && sel::backend("GOOD"), all); });
  EXPECT_THAT(good.what(), HasSubstr("GOOD:0: its memory is not host-accessible"));
  EXPECT_EQ(xdev::select_device(sel::has_dtype(xdev::DType::f64), all).name(), "GOOD:0");

  // Memory: the host's is the machine's; a limit is what a device can hold; GOOD states nothing.
  ASSERT_TRUE(xdev::memory_capacity(c[2]).has_value());
  EXPECT_GT(*xdev::memory_capacity(c[2]), std::size_t{1} << 20);
  EXPECT_FALSE(xdev::memory_capacity(c[0]).has_value());
  EXPECT_EQ(xdev::select_device(sel::min_memory(std::size_t{1} << 20), all).name(), "HOST:0");
  c[2].set_memory_limit(std::size_t{1} << 16);
  EXPECT_EQ(xdev::memory_capacity(c[2]), std::size_t{1} << 16);
  EXPECT_EQ(xdev::select_device(sel::min_memory(std::size_t{1} << 20), all).name(), "HOST:1");
  const auto big =
      error_of([&] { (void)xdev::select_device(sel::min_memory(std::numeric_limits<std::size_t>::max()), all); });
  EXPECT_THAT(big.what(), HasSubstr("GOOD:1: its memory size is unknown"));
  EXPECT_THAT(big.what(), HasSubstr("HOST:0: 65536 bytes of memory, fewer than the"));
}

TEST(SelectDevice, ADeviceWithoutTheDtypeIsRejectedAndTheOtherChosen) {
  xdev::Runtime<xdev_test::F32OnlyBackend> f32_only;
  xdev::Runtime<xdev::backends::Host> host({}, xdev::backends::Host::Options{.devices = 1, .threads = 1});
  const std::vector<AnyDevice> c{AnyDevice(f32_only.device(0)), AnyDevice(host.device(0))};
  const std::span<const AnyDevice> all(c);
  EXPECT_EQ(xdev::select_device(sel::has_dtype(xdev::DType::f32), all).name(), "F32ONLY:0")
      << "F32ONLY states no priority (0), above HOST's";
  EXPECT_EQ(xdev::select_device(sel::has_dtype(xdev::DType::f64), all).name(), "HOST:0");
  const auto e = error_of([&] { (void)xdev::select_device(sel::has_dtype(xdev::DType::f64), all.first(1)); });
  EXPECT_THAT(e.what(), HasSubstr("F32ONLY:0: no f64 support"));
}

// A selector returning bool is refused at compile time: false would read as score 0, which accepts.
static_assert(!xdev::DeviceSelector<bool (*)(const AnyDevice&)>);
static_assert(xdev::DeviceSelector<int (*)(const AnyDevice&)>);
static_assert(xdev::DeviceSelector<xdev::Score (*)(const AnyDevice&)>);
static_assert(xdev::DeviceSelector<sel::Selector>);

// ---- the process-wide registry (each test runs in a process of its own, as CTest runs them) -------

using xdev_test::ScopedCurrentDevice;

TEST(GlobalSelection, SelectDeviceChoosesAmongWhatXdevDeviceLeavesAndSaysSo) {
  ScopedEnv path("XDEV_PLUGIN_PATH", fixture_dir("good").string());
  ScopedEnv host("XDEV_HOST_DEVICES", "2");
  ScopedEnv device("XDEV_DEVICE", "host:1;good:0");
  EXPECT_EQ(xdev::select_device([](const AnyDevice&) { return 0; }).name(), "GOOD:0");
  EXPECT_EQ(xdev::select_device(sel::host_accessible()).name(), "HOST:1");
  const auto e = error_of([] { (void)xdev::select_device(sel::backend("GOOD") && sel::ordinal(1)); });
  EXPECT_EQ(e.code(), xdev::errc::not_found);
  EXPECT_THAT(e.what(), HasSubstr("HOST:1: a HOST device, not GOOD; GOOD:0: ordinal 0, not 1; "
                                  "XDEV_DEVICE=host:1;good:0 left only these devices as candidates"));
}

TEST(GlobalSelection, AcceleratorDevicesAreRenumberedByXdevDevice) {
  ScopedCurrentDevice restore;
  ScopedEnv path("XDEV_PLUGIN_PATH", fixture_dir("good").string());
  ScopedEnv device("XDEV_DEVICE", "good:1,0");
  namespace acc = xdev::accelerator;
  EXPECT_THAT(names(acc::devices()), ElementsAre("GOOD:1", "GOOD:0"));
  EXPECT_EQ(acc::current_device().name(), "GOOD:1");
  acc::set_current_device(1);
  EXPECT_EQ(acc::current_device().name(), "GOOD:0");
  EXPECT_EQ(xdev::select_device(xdev::default_selector()).name(), "GOOD:1") << "today's rule, as a selector";
}

TEST(GlobalSelection, TheDefaultSelectorIsTheHighestPriorityDeviceZeroWithoutXdevDevice) {
  ScopedEnv path("XDEV_PLUGIN_PATH", fixture_dir("good").string());
  ScopedEnv device("XDEV_DEVICE", std::nullopt);
  EXPECT_EQ(xdev::select_device(xdev::default_selector()).name(), "GOOD:0");
  EXPECT_EQ(xdev::select_device(xdev::default_selector()), xdev::accelerator::current_device());
}

TEST(GlobalSelection, DeviceScopeSetsTheCurrentDeviceBySelectorOrdinalOrHandleAndNests) {
  ScopedCurrentDevice restore;
  ScopedEnv path("XDEV_PLUGIN_PATH", fixture_dir("good").string());
  ScopedEnv host("XDEV_HOST_DEVICES", "2");
  ScopedEnv device("XDEV_DEVICE", std::nullopt);
  namespace acc = xdev::accelerator;
  EXPECT_EQ(acc::current_device().name(), "GOOD:0");
  {
    xdev::DeviceScope s(sel::backend("HOST") && sel::ordinal(1));
    EXPECT_EQ(acc::current_device().name(), "HOST:1");
    std::string other;
    std::thread([&] { other = acc::current_device().name(); }).join();
    EXPECT_EQ(other, "GOOD:0") << "the current device is per thread";
    {
      xdev::DeviceScope inner(std::size_t{1});
      EXPECT_EQ(acc::current_device().name(), "GOOD:1");
      {
        acc::DeviceGuard guard(xdev::Registry::global().devices("HOST")[0]);
        EXPECT_EQ(acc::current_device().name(), "HOST:0");
      }
      EXPECT_EQ(acc::current_device().name(), "GOOD:1");
    }
    EXPECT_EQ(acc::current_device().name(), "HOST:1");
  }
  EXPECT_EQ(acc::current_device().name(), "GOOD:0");
  // A selector that accepts nothing leaves the current device as it was.
  EXPECT_THROW(xdev::DeviceScope s(sel::backend("TPU")), xdev::error);
  EXPECT_EQ(acc::current_device().name(), "GOOD:0");
}

}  // namespace
