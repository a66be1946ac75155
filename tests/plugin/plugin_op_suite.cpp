// xdev's op conformance suite on every plugin of XDEV_PLUGIN_PATH, through AnyDevice: in the build,
// the plugins/ directory (REF), with PLUGIN0 required by XDEV_TEST_DEVICES so that the suite
// cannot pass by skipping. Further targets skip when fewer plugins are present.
#include <xdev/testing/op_suite.hpp>
#include <xdev/testing/plugin_targets.hpp>

XDEV_INSTANTIATE_OP_SUITE(
    plugins,
    xdev::testing::Targets<xdev::testing::DiscoveredPluginTarget<0>, xdev::testing::DiscoveredPluginTarget<1>>);
