// xdev's op conformance suite (<xdev/testing/op_suite.hpp>) on the reference plugin, through
// Runtime<PluginBackend>: REF's own ops and, for what it leaves out, xdev's CPU fallback.
#include <xdev/device/runtime.hpp>
#include <xdev/plugin/plugin_backend.hpp>
#include <xdev/testing/device_test.hpp>
#include <xdev/testing/op_suite.hpp>

#include <string>

#include "plugin_abi_support.hpp"

namespace plugin_abi_test {

/// REF, loaded from its absolute path once per process.
struct RefTarget {
  using backend = xdev::plugin::PluginBackend;
  static std::string name() { return "REF"; }
  static xdev::Runtime<backend>* runtime(std::string& /*why_unavailable*/) {
    static const Loaded ref = load(ref_plugin);
    static xdev::Runtime<backend> rt({}, ref.api, ref.library);
    return &rt;
  }
};

}  // namespace plugin_abi_test

XDEV_INSTANTIATE_OP_SUITE(ref_plugin, xdev::testing::Targets<plugin_abi_test::RefTarget>);
