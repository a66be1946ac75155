// xdev's op conformance suite on the CUDA plugin (plugins/cuda), through AnyDevice, on every CUDA
// device. Without a GPU (or a driver) every test skips with the reason; XDEV_TEST_DEVICES=CUDA
// makes that a failure.
#include <xdev/testing/op_suite.hpp>
#include <xdev/testing/plugin_targets.hpp>

namespace {
struct Cuda {
  static constexpr const char* value = "CUDA";
};
}  // namespace

XDEV_INSTANTIATE_OP_SUITE(cuda, xdev::testing::Targets<xdev::testing::PluginTarget<Cuda>>);
