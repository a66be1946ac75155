// The OPENCL plugin's devices as users load them (the registry over the build's plugins/): their
// type (CL_DEVICE_TYPE) reaches `properties()` through the ABI 1.13 field, as REF's does.
//
// Without an OpenCL driver the tests skip with the reason, unless XDEV_TEST_DEVICES lists OPENCL.
#include <xdev/any/any_device.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/backend/device_properties.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "opencl_plugin_devices.hpp"

namespace {

using PluginDevices = xdev_test::OpenCLPluginDevices;

TEST_F(PluginDevices, TheDeviceTypeComesThroughTheAbi) {
  for (const xdev::AnyDevice& dev : devices) {
    const xdev::DeviceProperties p = dev.properties();
    EXPECT_NE(p.type, xdev::DeviceType::unknown) << dev.name() << ": the plugin fills CL_DEVICE_TYPE in";
    const char* in_description = p.type == xdev::DeviceType::cpu   ? "(CPU)"
                                 : p.type == xdev::DeviceType::gpu ? "(GPU)"
                                                                   : "(accelerator)";
    EXPECT_NE(dev.description().find(in_description), std::string::npos)
        << dev.name() << " is a " << p.type << ": " << dev.description();
  }
  const std::vector<xdev::AnyDevice> ref = reg.devices("REF");
  ASSERT_FALSE(ref.empty());
  EXPECT_EQ(ref.front().properties().type, xdev::DeviceType::cpu);
}

}  // namespace
