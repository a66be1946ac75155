// What the OpenCL plugin tests that load the plugin as users do share: whether OPENCL is required
// (XDEV_TEST_DEVICES lists it: then a missing device fails instead of skipping), and a fixture with
// a registry over the build's plugins/ directory and its OPENCL devices.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/core/error.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace xdev_test {

inline bool opencl_required() {
  const char* v = std::getenv("XDEV_TEST_DEVICES");
  return v != nullptr && (std::string(",") + v + ",").find(",OPENCL,") != std::string::npos;
}

/// A registry over the build's plugins (XDEV_TEST_PLUGIN_DIR) and its OPENCL devices; each test
/// skips with the reason when there are none (fails when OPENCL is required).
class OpenCLPluginDevices : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      devices = reg.devices("OPENCL");
    } catch (const xdev::error& e) {
      if (opencl_required()) FAIL() << "OPENCL is required (XDEV_TEST_DEVICES) but unavailable: " << e.what();
      GTEST_SKIP() << "no OpenCL device: " << e.what();
    }
    ASSERT_FALSE(devices.empty());
  }
  xdev::Registry reg{
      xdev::plugin::SearchPath(std::vector<std::filesystem::path>{std::filesystem::path(XDEV_TEST_PLUGIN_DIR)})};
  std::vector<xdev::AnyDevice> devices;
};

}  // namespace xdev_test
