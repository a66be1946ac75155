// xdev's op conformance suite through AnyDevice: ANYHOST (the host backend's devices, erased: its
// own op members behind the erased dispatch) and ANYFALLBACK (ManualBackend erased: every op
// through the erased dispatch and then the CPU fallback).
#include <xdev/any/any_device.hpp>
#include <xdev/testing/device_test.hpp>
#include <xdev/testing/erased_targets.hpp>
#include <xdev/testing/op_suite.hpp>

#include "support/test_targets.hpp"

#include <string>
#include <vector>

namespace xdev_test {

// FallbackTarget's 2 devices (ManualBackend, completing inline), erased.
struct AnyFallbackTarget {
  static std::string name() { return "ANYFALLBACK"; }
  static std::vector<xdev::AnyDevice> devices(std::string& why_unavailable) {
    auto* rt = FallbackTarget::runtime(why_unavailable);
    if (rt == nullptr) return {};
    return {rt->device(0), rt->device(1)};
  }
};

}  // namespace xdev_test

XDEV_INSTANTIATE_OP_SUITE(any, xdev::testing::Targets<xdev::testing::AnyHostTarget, xdev_test::AnyFallbackTarget>);
