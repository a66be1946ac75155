// Plugin trust (docs/security.md): what the loader checks before any byte of a plugin runs, the
// descriptor it checks being the one it loads, XDEV_ALLOW_INSECURE_PLUGINS, secure-execution mode
// and XDEV_DISABLE_PLUGIN_UNLOADING. Each test works on its own copy of a fixture plugin (a new
// file, so a new image whose constructor marks "constructor" when it is mapped).
#include <xdev/core/env.hpp>
#include <xdev/plugin/loader.hpp>

#include "plugin_test_support.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

namespace {

namespace fs = std::filesystem;
namespace plugin = xdev::plugin;
using ::testing::HasSubstr;
using xdev_test::CapturedDiagnostics;
using xdev_test::error_of;
using xdev_test::fixture_plugin;
using xdev_test::is_mapped;
using xdev_test::Markers;
using xdev_test::PluginCopy;
using xdev_test::ScopedEnv;

TEST(Trust, AGroupWritablePluginIsRefusedBeforeItsConstructorRuns) {
  Markers markers;
  ScopedEnv no_override("XDEV_ALLOW_INSECURE_PLUGINS", nullptr);
  PluginCopy copy;
  fs::permissions(copy.file(), fs::perms(0775));
  const auto what = error_of([&] { (void)plugin::load(copy.file()); }, xdev::errc::permission_denied);
  EXPECT_THAT(what, HasSubstr("cannot load xdev plugin \"" + copy.file().string() + "\": not trusted: the file \"" +
                              copy.file().string() + "\" is writable by its group (mode 0775)"));
  EXPECT_THAT(what, HasSubstr("XDEV_ALLOW_INSECURE_PLUGINS=1"));
  EXPECT_EQ(markers.count("good", "constructor"), 0) << "the refused file's code ran";
  EXPECT_FALSE(is_mapped(copy.file()));

  // Discovery refuses it the same way, with the code, and goes on.
  CapturedDiagnostics diagnostics;
  const auto found = plugin::discover(plugin::SearchPath{{copy.dir()}});
  ASSERT_EQ(found.candidates.size(), 1u);
  EXPECT_EQ(found.candidates[0].status, plugin::CandidateStatus::failed);
  EXPECT_EQ(found.candidates[0].error, xdev::errc::permission_denied);
  EXPECT_THAT(found.report(), HasSubstr("not trusted: the file"));
  EXPECT_EQ(markers.count("good", "constructor"), 0);

  // Fixed, it loads.
  fs::permissions(copy.file(), fs::perms(0755));
  EXPECT_EQ(plugin::load(copy.file())->name(), "GOOD");
  EXPECT_EQ(markers.count("good", "constructor"), 1);
}

TEST(Trust, AWorldWritableDirectoryAboveThePluginIsRefusedUnlessSticky) {
  Markers markers;
  ScopedEnv no_override("XDEV_ALLOW_INSECURE_PLUGINS", nullptr);
  PluginCopy copy;
  fs::permissions(copy.dir(), fs::perms(0777));
  const auto what = error_of([&] { (void)plugin::load(copy.file()); }, xdev::errc::permission_denied);
  EXPECT_THAT(what, HasSubstr("not trusted: the directory \"" + copy.dir().string() +
                              "\" is writable by every user (mode 0777)"));
  fs::permissions(copy.dir(), fs::perms(0775));
  EXPECT_THAT(error_of([&] { (void)plugin::load(copy.file()); }, xdev::errc::permission_denied),
              HasSubstr("the directory \"" + copy.dir().string() + "\" is writable by its group (mode 0775)"));
  EXPECT_EQ(markers.count("good", "constructor"), 0);

  // With the sticky bit (as /tmp), nobody can replace what they do not own: accepted.
  fs::permissions(copy.dir(), fs::perms(01777));
  EXPECT_EQ(plugin::load(copy.file())->name(), "GOOD");
  EXPECT_EQ(markers.count("good", "constructor"), 1);
}

TEST(Trust, APluginOwnedByAnotherUserIsRefusedEvenForRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  Markers markers;
  ScopedEnv no_override("XDEV_ALLOW_INSECURE_PLUGINS", nullptr);
  PluginCopy copy;
  ASSERT_EQ(::chown(copy.file().c_str(), 65534, static_cast<gid_t>(-1)), 0);
  EXPECT_THAT(error_of([&] { (void)plugin::load(copy.file()); }, xdev::errc::permission_denied),
              HasSubstr("the file \"" + copy.file().string() +
                        "\" is owned by uid 65534, neither root nor this process's user (uid 0)"));
  ASSERT_EQ(::chown(copy.dir().c_str(), 65534, static_cast<gid_t>(-1)), 0);
  ASSERT_EQ(::chown(copy.file().c_str(), 0, static_cast<gid_t>(-1)), 0);
  EXPECT_THAT(error_of([&] { (void)plugin::load(copy.file()); }, xdev::errc::permission_denied),
              HasSubstr("the directory \"" + copy.dir().string() + "\" is owned by uid 65534"));
  EXPECT_EQ(markers.count("good", "constructor"), 0);
  ASSERT_EQ(::chown(copy.dir().c_str(), 0, static_cast<gid_t>(-1)), 0);
}

TEST(Trust, InsecurePluginsLoadWithAWarningWhenAllowed) {
  Markers markers;
  PluginCopy copy;
  fs::permissions(copy.file(), fs::perms(0777));
  {
    ScopedEnv no_override("XDEV_ALLOW_INSECURE_PLUGINS", nullptr);
    CapturedDiagnostics diagnostics;
    auto lib = plugin::load(copy.file(), plugin::LoadOptions{.allow_insecure_plugins = true});
    EXPECT_EQ(lib->name(), "GOOD");
    const auto warnings = diagnostics.matching(plugin::Severity::warning, "untrusted");
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], HasSubstr("is writable by every user (mode 0777)"));
  }
  {
    ScopedEnv allow("XDEV_ALLOW_INSECURE_PLUGINS", "1");
    CapturedDiagnostics diagnostics;
    EXPECT_EQ(plugin::load(copy.file())->name(), "GOOD");
    // The program's explicit choice wins over the environment.
    EXPECT_THAT(error_of([&] { (void)plugin::load(copy.file(), plugin::LoadOptions{.allow_insecure_plugins = false}); },
                         xdev::errc::permission_denied),
                HasSubstr("not trusted: the file"));
  }
  {
    ScopedEnv malformed("XDEV_ALLOW_INSECURE_PLUGINS", "yes");
    EXPECT_THAT(error_of([&] { (void)plugin::load(copy.file()); }, xdev::errc::invalid_argument),
                HasSubstr("XDEV_ALLOW_INSECURE_PLUGINS=\"yes\" is not 0 or 1"));
  }
}

// The descriptor that was checked is what the dynamic loader maps: replacing the file by name
// after the check changes nothing.
TEST(Trust, TheFileCheckedIsTheFileLoaded) {
  PluginCopy copy;
  const auto canonical = fs::canonical(copy.file());
  const auto opened = plugin::detail::open_plugin_file(canonical, "test");
  ASSERT_EQ(plugin::detail::untrusted_reason(opened, canonical), "");
  // Swap another plugin in under the same name (as an attacker racing the loader would).
  const auto swapped = copy.dir() / "swap.tmp";
  fs::copy_file(fixture_plugin("neverunload", "neverunload"), swapped);
  fs::rename(swapped, copy.file());
  void* handle = ::dlopen(opened.loader_path().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  const auto* entry_address = static_cast<const void* const*>(::dlsym(handle, XDEV_PLUGIN_ENTRY_NAME));
  ASSERT_NE(entry_address, nullptr);
  xdev_plugin_entry_fn entry = nullptr;
  std::memcpy(&entry, entry_address, sizeof entry);
  EXPECT_STREQ(entry()->name, "GOOD") << "the dynamic loader mapped the file swapped in after the check";
  ::dlclose(handle);
}

TEST(Trust, DisablingUnloadingKeepsPluginsMappedAfterTheirLastOwner) {
  PluginCopy copy;
  {
    ScopedEnv keep("XDEV_DISABLE_PLUGIN_UNLOADING", "1");
    auto lib = plugin::load(copy.file());
    ASSERT_TRUE(is_mapped(copy.file()));
  }
  EXPECT_TRUE(is_mapped(copy.file())) << "unloaded although XDEV_DISABLE_PLUGIN_UNLOADING=1";

  PluginCopy other("dup1", "dup");
  {
    auto lib = plugin::load(other.file());
    ASSERT_TRUE(is_mapped(other.file()));
  }
  EXPECT_FALSE(is_mapped(other.file())) << "the default unloads after the last owner";

  ScopedEnv malformed("XDEV_DISABLE_PLUGIN_UNLOADING", "always");
  EXPECT_THAT(error_of([&] { (void)plugin::load(other.file()); }, xdev::errc::invalid_argument),
              HasSubstr("XDEV_DISABLE_PLUGIN_UNLOADING=\"always\" is not 0 or 1"));
}

// Secure-execution mode through the test hook (the setgid run under setpriv is the ctest
// `plugin.secure_execution_setgid`): no variable is read, the plugin path is the installed one.
TEST(SecureExecution, EveryVariableIsIgnoredAndSaidOnce) {
  ScopedEnv path("XDEV_PLUGIN_PATH", xdev_test::fixture_dir("good").string());
  ScopedEnv device("XDEV_DEVICE", "GOOD");
  ASSERT_TRUE(xdev::getenv_string("XDEV_DEVICE"));
  ASSERT_FALSE(plugin::search_path().empty());
  struct Reset {
    ~Reset() { xdev::set_secure_execution_for_testing(std::nullopt); }
  } reset;
  xdev::set_secure_execution_for_testing(true);
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(xdev::secure_execution());
  EXPECT_FALSE(xdev::getenv_string("XDEV_DEVICE"));
  EXPECT_FALSE(xdev::getenv_string("XDEV_PLUGIN_PATH"));
  const auto searched = plugin::search_path();
  for (const auto& dir : searched.directories()) EXPECT_NE(dir.origin, plugin::SearchOrigin::environment);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("xdev: secure-execution mode"));
  EXPECT_EQ(said.find("xdev:"), said.rfind("xdev:")) << "said more than once: " << said;

  xdev::set_secure_execution_for_testing(std::nullopt);
  EXPECT_TRUE(xdev::getenv_string("XDEV_DEVICE"));
}

}  // namespace
