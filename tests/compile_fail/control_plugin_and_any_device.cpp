// expect-success
// The positive control of the plugin and AnyDevice cases: the same backend with a handle that fits
// is a plugin and erases to an AnyDevice.
#include "complete_backend.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/plugin/define.hpp>

XDEV_DEFINE_PLUGIN(CompleteBackend<xdev::Capabilities<>>);

xdev::AnyDevice erase(xdev::Runtime<CompleteBackend<xdev::Capabilities<>>>& rt) {
  return rt.device(0);
}
