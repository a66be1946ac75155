// The registry (built-in and plugin backends, client options, process configuration hooks),
// default-backend selection with XDEV_DEVICE, and the device-agnostic accelerator functions.
#include "plugin_test_support.hpp"
#include "scoped_current_device.hpp"
#include "support/error_of.hpp"

#include <xdev/any/accelerator.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/ops.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using ::testing::HasSubstr;
using xdev_test::fixture_dir;
namespace fs = std::filesystem;

using xdev_test::ScopedEnv;

using xdev_test::error_of;

xdev::plugin::SearchPath dirs(std::initializer_list<fs::path> d) {
  return xdev::plugin::SearchPath(std::vector<fs::path>(d));
}

std::vector<std::string> names_of(const std::vector<xdev::BackendInfo>& infos) {
  std::vector<std::string> out;
  for (const auto& b : infos) out.push_back(b.name);
  return out;
}

TEST(Registry, HostIsAlwaysThereAndMatchesTheTypedBackend) {
  xdev::Registry reg{xdev::plugin::SearchPath{}};
  EXPECT_THAT(reg.names(), ::testing::ElementsAre("HOST"));
  const auto infos = reg.backends();
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_TRUE(infos[0].builtin);
  EXPECT_TRUE(infos[0].available);
  EXPECT_TRUE(infos[0].library.empty());
  EXPECT_EQ(infos[0].capabilities, xdev::backends::Host::capabilities::set);
  EXPECT_EQ(infos[0].priority, -100);
  const auto devs = reg.devices("HOST");
  ASSERT_EQ(devs.size(), infos[0].device_count);
  EXPECT_EQ(devs[0].name(), "HOST:0");
  EXPECT_THAT(devs[0].description(), ::testing::StartsWith("host memory, ")) << "the host backend describes itself";
}

TEST(Registry, ListsPluginsWithTheirLibraryAndCreatesEachClientOnce) {
  xdev::Registry reg{dirs({fixture_dir("good")})};
  EXPECT_THAT(reg.names(), ::testing::UnorderedElementsAre("HOST", "GOOD"));
  const auto infos = reg.backends();
  // Default-selection order: GOOD (priority 0) before HOST (-100).
  EXPECT_THAT(names_of(infos), ::testing::ElementsAre("GOOD", "HOST"));
  EXPECT_FALSE(infos[0].builtin);
  EXPECT_EQ(infos[0].library, xdev_test::fixture_plugin("good", "good"));
  EXPECT_EQ(infos[0].device_count, 2u);
  const auto a = reg.devices("GOOD");
  const auto b = reg.devices("good");  // names match ignoring case
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1].name(), "GOOD:1");
  EXPECT_EQ(a[1].description(), "fixture device 1 of 2 (malloc'ed host memory)") << "the plugin's describe_device";
  EXPECT_EQ(a, b) << "one client per backend: the same devices every time";
}

TEST(Registry, UnknownBackendNamesTheOnesThatExist) {
  xdev::Registry reg{dirs({fixture_dir("good")})};
  const auto e = error_of([&] { (void)reg.devices("NOPE"); });
  EXPECT_EQ(e.code(), xdev::errc::not_found);
  EXPECT_THAT(e.what(), HasSubstr("no backend named \"NOPE\""));
  EXPECT_THAT(e.what(), HasSubstr("available: HOST, GOOD"));
}

TEST(Registry, APluginWhoseClientFailsIsListedUnavailableAndIsAnErrorWhenAskedFor) {
  xdev_test::CapturedDiagnostics diagnostics;
  xdev::Registry reg{dirs({fixture_dir("createfails"), fixture_dir("good")})};
  const auto infos = reg.backends();
  const auto it = std::find_if(infos.begin(), infos.end(), [](const auto& b) { return b.name == "CREATEFAILS"; });
  ASSERT_NE(it, infos.end());
  EXPECT_FALSE(it->available);
  EXPECT_THAT(it->why_unavailable, HasSubstr("no board present (simulated)"));
  EXPECT_EQ(names_of(infos).front(), "GOOD") << "the others still work";
  EXPECT_EQ(diagnostics.matching(xdev::plugin::Severity::warning, "backend CREATEFAILS is unavailable").size(), 1u);

  const auto e = error_of([&] { (void)reg.devices("CREATEFAILS"); });
  EXPECT_EQ(e.code(), xdev::errc::unavailable);
  EXPECT_THAT(e.what(), HasSubstr("CREATEFAILS: create: fixture: no board present (simulated)"));
}

TEST(Registry, MissingPluginNamesTheCandidatesThatFailedToLoad) {
  xdev_test::CapturedDiagnostics diagnostics;
  xdev::Registry reg{dirs({fixture_dir("mixed")})};
  const auto e = error_of([&] { (void)reg.devices("UNRESOLVED"); });
  EXPECT_EQ(e.code(), xdev::errc::not_found);
  EXPECT_THAT(e.what(), HasSubstr("available: HOST, ALPHA, NEWER_MINOR"));
  EXPECT_THAT(e.what(), HasSubstr("not loaded: " + xdev_test::fixture_plugin("mixed", "unresolved").string()));
}

TEST(Registry, ClientOptionsApplyBeforeFirstUseOnly) {
  xdev::Registry reg{dirs({fixture_dir("good")})};
  reg.set_options("GOOD", {.max_inflight = 3, .memory_limit = 4096});
  const auto devs = reg.devices("GOOD");
  EXPECT_EQ(devs[0].max_inflight(), 3u);
  EXPECT_EQ(devs[1].memory_stats().limit, std::optional<std::size_t>(4096));
  const auto infos = reg.backends();
  EXPECT_EQ(infos[0].options.max_inflight, std::optional<std::size_t>(3));

  const auto late = error_of([&] { reg.set_options("GOOD", {.max_inflight = 5}); });
  EXPECT_EQ(late.code(), xdev::errc::unavailable);
  EXPECT_THAT(late.what(), HasSubstr("already exists"));
  const auto bad = error_of([&] { reg.set_options("HOST", {.max_inflight = 0}); });
  EXPECT_EQ(bad.code(), xdev::errc::invalid_argument);
  EXPECT_THAT(bad.what(), HasSubstr("max_inflight=0 is not in [1, 1048576]"));
}

TEST(Registry, ProcessConfigurationHooksValidateAndMustComeFirst) {
  xdev::Registry reg{xdev::plugin::SearchPath{}};
  const xdev::ProcessPlacement p{.local_rank = 1, .local_world_size = 2, .global_rank = 3, .global_world_size = 4};
  reg.configure_multiprocess(p);
  EXPECT_EQ(reg.placement(), p);
  reg.configure_single_process();
  EXPECT_EQ(reg.placement(), xdev::ProcessPlacement{});
  const auto bad = error_of([&] { reg.configure_multiprocess({.local_rank = 2, .local_world_size = 2}); });
  EXPECT_EQ(bad.code(), xdev::errc::invalid_argument);
  EXPECT_THAT(bad.what(), HasSubstr("local rank 2 of 2"));

  (void)reg.devices("HOST");
  const auto late = error_of([&] { reg.configure_multiprocess(p); });
  EXPECT_EQ(late.code(), xdev::errc::unavailable);
  EXPECT_THAT(late.what(), HasSubstr("clients of HOST already exist"));
}

TEST(Registry, BuiltInBackendsAreRegisteredByNameAndShadowPlugins) {
  xdev_test::CapturedDiagnostics diagnostics;
  xdev::Registry reg{dirs({fixture_dir("good")})};
  auto factory = [](const xdev::ClientConfig& c) {
    auto rt = std::make_shared<xdev::Runtime<xdev::backends::Host>>(
        xdev::RuntimeOptions{.max_inflight = c.options.max_inflight},
        xdev::backends::Host::Options{.devices = 3, .threads = 2});
    std::vector<xdev::AnyDevice> out;
    for (std::size_t i = 0; i < rt->device_count(); ++i) out.emplace_back(rt->device(i), rt);
    return out;
  };
  reg.register_backend("GOOD", factory);
  EXPECT_EQ(reg.devices("GOOD").size(), 3u) << "the built-in GOOD, not the plugin";
  EXPECT_EQ(diagnostics.matching(xdev::plugin::Severity::warning, "shadowed by the built-in backend").size(), 1u);

  EXPECT_EQ(error_of([&] { reg.register_backend("GOOD", factory); }).code(), xdev::errc::invalid_argument);
  const auto lower = error_of([&] { reg.register_backend("sim", factory); });
  EXPECT_EQ(lower.code(), xdev::errc::invalid_argument);
  EXPECT_THAT(lower.what(), HasSubstr("upper case"));
  EXPECT_EQ(error_of([&] { reg.register_backend("1X", factory); }).code(), xdev::errc::invalid_argument);
}

TEST(Registry, DevicesKeepThePluginLoadedAfterTheRegistryIsGone) {
  const auto file = xdev_test::fixture_plugin("good", "good");
  std::vector<xdev::AnyDevice> devs;
  {
    xdev::Registry reg{dirs({fixture_dir("good")})};
    devs = reg.devices("GOOD");
  }
  EXPECT_TRUE(xdev_test::is_mapped(file));
  EXPECT_EQ(devs[0].name(), "GOOD:0");
  devs.clear();
  EXPECT_FALSE(xdev_test::is_mapped(file)) << "the last device gone, the library unloads";
}

// The REF plugin completes ops on its own worker threads, and a completion keeps its device's
// owner alive until the worker destroys it: when the program lets go of everything right after an
// op completed, the last reference to the runtime can be released on that worker. Destroying the
// runtime there would make REF join the thread it runs on (std::terminate: "Resource deadlock
// avoided"); the registry hands that destruction to another thread instead.
TEST(Registry, ARuntimeReleasedLastOnABackendThreadIsNotDestroyedThere) {
  for (int i = 0; i < 200; ++i) {
    xdev::Registry reg{dirs({fs::path(XDEV_TEST_PLUGIN_DIR)})};
    auto devs = reg.devices("REF");
    auto x = xdev::empty<float>(devs[0], {256});
    xdev::ops::fill(devs[0], x, 1.0f).get();
    xdev::ops::scale(devs[0], x, 2.0f).get();
  }  // array, devices and registry go here, possibly before the worker has let go
  SUCCEED();
}

// The reaper's thread never unloads a plugin: it may still be at work while the process exits,
// and its dlclose then unmapped REF under the exiting thread, which was running REF's own static
// destructor (the test above crashed at exit now and then under TSan). The library stays mapped
// until the next load of a plugin or `unload_released_libraries()`.
TEST(Registry, ALibraryReleasedOnTheReapersThreadStaysMappedUntilUnloadedElsewhere) {
  const auto file = xdev_test::fixture_plugin("good", "good");
  (void)xdev::plugin::unload_released_libraries();  // what earlier tests in this process left
  std::vector<xdev::AnyDevice> devs;
  {
    xdev::Registry reg{dirs({fixture_dir("good")})};
    devs = reg.devices("GOOD");
  }
  ASSERT_TRUE(xdev_test::is_mapped(file));
  // Released off the thread that made the runtime: the reaper destroys it.
  std::thread([d = std::move(devs)]() mutable { d.clear(); }).join();

  std::size_t unloaded = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (unloaded == 0 && std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(xdev_test::is_mapped(file)) << "unloaded on the reaper's thread";
    unloaded = xdev::plugin::unload_released_libraries();
    if (unloaded == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(unloaded, 1u);
  EXPECT_FALSE(xdev_test::is_mapped(file));
  EXPECT_EQ(xdev::plugin::unload_released_libraries(), 0u);
}

// ---- selection ------------------------------------------------------------------------------

TEST(Selection, XdevDeviceNamesTheDefaultBackend) {
  xdev::Registry reg{dirs({fixture_dir("good")})};
  {
    ScopedEnv env("XDEV_DEVICE", "HOST");
    EXPECT_EQ(reg.default_backend(), "HOST");
  }
  {
    ScopedEnv env("XDEV_DEVICE", "good");
    EXPECT_EQ(reg.default_backend(), "GOOD");
  }
}

TEST(Selection, WithoutXdevDeviceTheHighestPriorityWinsAndHostIsLast) {
  ScopedEnv env("XDEV_DEVICE", std::nullopt);
  xdev::Registry with_plugin{dirs({fixture_dir("good")})};
  EXPECT_EQ(with_plugin.default_backend(), "GOOD");
  xdev::Registry host_only{xdev::plugin::SearchPath{}};
  EXPECT_EQ(host_only.default_backend(), "HOST");
  // A plugin whose client fails is passed over.
  xdev_test::CapturedDiagnostics diagnostics;
  xdev::Registry failing{dirs({fixture_dir("createfails")})};
  EXPECT_EQ(failing.default_backend(), "HOST");
}

TEST(Selection, ThePluginOfLowerPriorityThanHostIsOnlyUsedByName) {
  ScopedEnv env("XDEV_DEVICE", std::nullopt);
  xdev::Registry reg{dirs({fs::path(XDEV_TEST_PLUGIN_DIR)})};
  ASSERT_THAT(reg.names(), ::testing::Contains("REF"));
  EXPECT_EQ(reg.default_backend(), "HOST") << "REF declares Priority<-200>";
  ScopedEnv by_name("XDEV_DEVICE", "REF");
  EXPECT_EQ(reg.default_backend(), "REF");
}

TEST(Selection, UnknownXdevDeviceListsTheAvailableBackends) {
  xdev::Registry reg{dirs({fixture_dir("good")})};
  ScopedEnv env("XDEV_DEVICE", "TPU");
  const auto e = error_of([&] { (void)reg.default_backend(); });
  EXPECT_EQ(e.code(), xdev::errc::not_found);
  EXPECT_THAT(e.what(), HasSubstr("XDEV_DEVICE=TPU names no backend"));
  EXPECT_THAT(e.what(), HasSubstr("available: HOST, GOOD"));
}

TEST(Selection, MalformedXdevDeviceNamesTheVariableTheValueAndWhatIsAccepted) {
  xdev::Registry reg{xdev::plugin::SearchPath{}};
  for (const char* bad : {"HOST:", "../lib", "a b", "_X", "HOST;"}) {
    ScopedEnv env("XDEV_DEVICE", bad);
    const auto e = error_of([&] { (void)reg.default_backend(); });
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument) << bad;
    EXPECT_THAT(e.what(), HasSubstr(std::string("XDEV_DEVICE=") + bad + ": "));
    EXPECT_THAT(e.what(), HasSubstr("(accepted: terms separated by ';', each [!]NAME[:DEVICES]"));
  }
}

TEST(Selection, APluginAskedForByNameThatFailsIsAnError) {
  xdev_test::CapturedDiagnostics diagnostics;
  xdev::Registry reg{dirs({fixture_dir("createfails")})};
  ScopedEnv env("XDEV_DEVICE", "CREATEFAILS");
  const auto e = error_of([&] { (void)reg.default_backend(); });
  EXPECT_EQ(e.code(), xdev::errc::unavailable);
  EXPECT_THAT(e.what(), HasSubstr("no board present (simulated)"));
}

// ---- accelerator functions (the process-wide registry: these tests set the environment before
// its first use, so each must run in a process of its own, as CTest runs them) ------------------

using xdev_test::ScopedCurrentDevice;

TEST(Accelerator, FollowTheSelectedBackend) {
  ScopedCurrentDevice restore;
  ScopedEnv path("XDEV_PLUGIN_PATH", fixture_dir("good").string());
  ScopedEnv device("XDEV_DEVICE", "GOOD");
  namespace acc = xdev::accelerator;
  EXPECT_TRUE(acc::is_available());
  EXPECT_EQ(acc::current_backend(), "GOOD");
  EXPECT_EQ(acc::device_count(), 2u);
  EXPECT_EQ(acc::current_device().name(), "GOOD:0");
  {
    acc::DeviceGuard guard(1);
    EXPECT_EQ(acc::current_device().name(), "GOOD:1");
    std::string other;
    std::thread([&] { other = acc::current_device().name(); }).join();
    EXPECT_EQ(other, "GOOD:0") << "the current device is per thread";
    {
      acc::DeviceGuard inner(xdev::Registry::global().devices("HOST")[0]);
      EXPECT_EQ(acc::current_device().name(), "HOST:0");
    }
    EXPECT_EQ(acc::current_device().name(), "GOOD:1");
    acc::synchronize();
  }
  EXPECT_EQ(acc::current_device().name(), "GOOD:0");
  acc::set_current_device(1);
  EXPECT_EQ(acc::current_device().name(), "GOOD:1");
  const auto e = error_of([] { acc::set_current_device(7); });
  EXPECT_EQ(e.code(), xdev::errc::not_found);
  EXPECT_THAT(e.what(), HasSubstr("set_current_device(7): GOOD has 2 device(s)"));
  EXPECT_EQ(error_of([] { acc::set_current_device(xdev::AnyDevice{}); }).code(), xdev::errc::invalid_argument);
}

TEST(Accelerator, AnUnknownXdevDeviceIsNotAvailableAndSaysWhy) {
  ScopedEnv path("XDEV_PLUGIN_PATH", std::nullopt);
  ScopedEnv device("XDEV_DEVICE", "NOPE");
  EXPECT_FALSE(xdev::accelerator::is_available());
  const auto e = error_of([] { (void)xdev::accelerator::current_device(); });
  EXPECT_EQ(e.code(), xdev::errc::not_found);
  EXPECT_THAT(e.what(), HasSubstr("XDEV_DEVICE=NOPE names no backend; available: HOST"));
}

}  // namespace
