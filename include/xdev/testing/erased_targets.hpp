/// \file
/// Ready-made device test targets that give erased devices (`xdev::AnyDevice`), apart from the
/// harness (<xdev/testing/device_test.hpp>), which needs only the typed stack. `AnyHostTarget` runs
/// a suite through the erased path on the host backend; <xdev/testing/plugin_targets.hpp> adds the
/// plugins' targets.
///
///     XDEV_INSTANTIATE_OP_SUITE(erased, xdev::testing::Targets<xdev::testing::AnyHostTarget>);
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/testing/device_test.hpp>

#include <string>
#include <vector>

namespace xdev::testing {

/// The host backend's 2 devices as `AnyDevice`s, a target named "ANYHOST" (its own runtime, not
/// `HostTarget`'s): runs a suite through the erased path. Always available.
struct AnyHostTarget {
  static std::string name() { return "ANYHOST"; }
  /// \throws xdev::error as `Runtime` (a malformed `XDEV_MAX_INFLIGHT`), which fails the test.
  static std::vector<AnyDevice> devices(std::string& /*why_unavailable*/) {
    static Runtime<backends::Host> rt({}, backends::Host::Options{.devices = 2});
    return {rt.device(0), rt.device(1)};
  }
};

static_assert(concepts::AnyDeviceTestTarget<AnyHostTarget>);

}  // namespace xdev::testing
