// xdev's op conformance suite on the plugins of the build's plugins/ directory, through AnyDevice:
// REF (the reference plugin) and OPENCL (the OpenCL plugin, on whatever OpenCL driver is installed:
// PoCL in CI). CMake lists each plugin it built and can run in XDEV_TEST_DEVICES, so that the suite
// cannot pass by skipping it; an absent one skips with the reason.
#include <xdev/testing/op_suite.hpp>
#include <xdev/testing/plugin_targets.hpp>

namespace {
struct Ref {
  static constexpr const char* value = "REF";
};
struct OpenCL {
  static constexpr const char* value = "OPENCL";
};
}  // namespace

// DiscoveredPluginTarget<N>, the by-position form of PluginTarget: the N-th plugin of the search
// path, or unavailable with the reason.
TEST(DiscoveredPluginTarget, IsTheNthPluginOfTheSearchPathOrSaysWhyNot) {
  EXPECT_EQ(xdev::testing::DiscoveredPluginTarget<0>::name(), "PLUGIN0");
  std::string why;
  const auto first = xdev::testing::DiscoveredPluginTarget<0>::devices(why);
  const auto plugins = xdev::Registry::global().discovery().plugins();
  ASSERT_FALSE(plugins.empty()) << "the build's plugins/ directory (XDEV_PLUGIN_PATH) has no plugin";
  if (first.empty())  // that plugin cannot run here (OPENCL without a driver): the reason names it
    EXPECT_THAT(why, ::testing::HasSubstr("plugin " + std::string(plugins[0]->name())));
  else
    EXPECT_EQ(first[0].type_name(), plugins[0]->name());

  why.clear();
  EXPECT_TRUE(xdev::testing::DiscoveredPluginTarget<1000>::devices(why).empty());
  EXPECT_THAT(why, ::testing::HasSubstr("plugin #1000 does not exist: " + std::to_string(plugins.size()) +
                                        " plugin(s) found in the search path"));
}

XDEV_INSTANTIATE_OP_SUITE(
    plugins, xdev::testing::Targets<xdev::testing::PluginTarget<Ref>, xdev::testing::PluginTarget<OpenCL>>);
