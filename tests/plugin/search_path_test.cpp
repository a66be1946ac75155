// xdev::plugin::SearchPath: parsing XDEV_PLUGIN_PATH, the installed directory, program-given
// directories.
#include <xdev/plugin/search_path.hpp>

#include "plugin_test_support.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace plugin = xdev::plugin;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> paths_of(const plugin::SearchPath& path) {
  std::vector<std::string> out;
  for (const auto& dir : path.directories()) out.push_back(dir.path.string());
  return out;
}

TEST(SearchPath, ParsesAbsoluteEntriesInOrderWithoutDuplicates) {
  const auto path = plugin::SearchPath::parse("/opt/b:/opt/a:/opt/b/:/opt/./a");
  EXPECT_THAT(paths_of(path), ElementsAre("/opt/b", "/opt/a"));
  EXPECT_THAT(path.warnings(), IsEmpty());
  EXPECT_EQ(path.to_string(), "/opt/b:/opt/a");
  for (const auto& dir : path.directories()) EXPECT_EQ(dir.origin, plugin::SearchOrigin::environment);
}

TEST(SearchPath, IgnoresEmptyAndRelativeEntriesWithOneWarningEach) {
  const auto path = plugin::SearchPath::parse(":plugins:/opt/p::./here:");
  EXPECT_THAT(paths_of(path), ElementsAre("/opt/p"));
  EXPECT_THAT(path.warnings(),
              ElementsAre("XDEV_PLUGIN_PATH entry 1 is empty: ignored (the current directory is never searched for "
                          "plugins)",
                          "XDEV_PLUGIN_PATH entry 2 \"plugins\" is not an absolute path: ignored (only absolute "
                          "directories are searched)",
                          "XDEV_PLUGIN_PATH entry 4 is empty: ignored (the current directory is never searched for "
                          "plugins)",
                          "XDEV_PLUGIN_PATH entry 5 \"./here\" is not an absolute path: ignored (only absolute "
                          "directories are searched)",
                          "XDEV_PLUGIN_PATH entry 6 is empty: ignored (the current directory is never searched for "
                          "plugins)"));
}

TEST(SearchPath, EmptyValueMeansNoEntries) {
  const auto path = plugin::SearchPath::parse("");
  EXPECT_TRUE(path.empty());
  EXPECT_THAT(path.warnings(), IsEmpty());
}

TEST(SearchPath, InstalledDirectoryComesLast) {
  const auto path = plugin::SearchPath::parse("/opt/p", fs::path("/usr/lib/xdev/plugins"));
  EXPECT_THAT(paths_of(path), ElementsAre("/opt/p", "/usr/lib/xdev/plugins"));
  EXPECT_EQ(path.directories()[1].origin, plugin::SearchOrigin::installed);
  // Listed in XDEV_PLUGIN_PATH already: searched once, at the earlier place.
  const auto twice = plugin::SearchPath::parse("/usr/lib/xdev/plugins:/opt/p", fs::path("/usr/lib/xdev/plugins"));
  EXPECT_THAT(paths_of(twice), ElementsAre("/usr/lib/xdev/plugins", "/opt/p"));
}

TEST(SearchPath, FromTheEnvironment) {
  {
    xdev_test::ScopedEnv env("XDEV_PLUGIN_PATH", std::string("/opt/one:rel:/opt/two"));
    const auto path = plugin::search_path();
    EXPECT_THAT(paths_of(path), ElementsAre("/opt/one", "/opt/two"));  // no installed directory in a build tree
    EXPECT_THAT(path.warnings(), ElementsAre(HasSubstr("entry 2 \"rel\" is not an absolute path")));
    EXPECT_FALSE(plugin::installed_plugin_directory().has_value());
  }
  xdev_test::ScopedEnv unset("XDEV_PLUGIN_PATH", std::nullopt);
  EXPECT_TRUE(plugin::search_path().empty());
}

TEST(SearchPath, ProgramDirectoriesMustBeAbsolute) {
  const plugin::SearchPath path{{"/opt/a", "/opt/b"}};
  EXPECT_THAT(paths_of(path), ElementsAre("/opt/a", "/opt/b"));
  EXPECT_EQ(path.directories()[0].origin, plugin::SearchOrigin::program);
  try {
    const plugin::SearchPath bad{{"/opt/a", "plugins"}};
    ADD_FAILURE() << "a relative directory was accepted";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("plugin search directory 2 \"plugins\" is not an absolute path"));
  }
}

}  // namespace
