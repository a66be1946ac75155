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

XDEV_INSTANTIATE_OP_SUITE(
    plugins, xdev::testing::Targets<xdev::testing::PluginTarget<Ref>, xdev::testing::PluginTarget<OpenCL>>);
