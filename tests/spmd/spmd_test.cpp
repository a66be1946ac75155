// Turning SPMD on: XDEV_USE_SPMD and use_spmd make the virtual device the current device, and the
// device count becomes the mesh's size.
#include <xdev/spmd/spmd.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

using ::testing::HasSubstr;

// Restores XDEV_USE_SPMD and SPMD's state after each test.
class SpmdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = std::getenv("XDEV_USE_SPMD")) saved_ = v;
    ::unsetenv("XDEV_USE_SPMD");
    xdev::spmd::disable_spmd();
  }
  void TearDown() override {
    xdev::spmd::disable_spmd();
    if (saved_)
      ::setenv("XDEV_USE_SPMD", saved_->c_str(), 1);
    else
      ::unsetenv("XDEV_USE_SPMD");
  }
  // "Off" after disable_spmd means: until the environment is consulted again.
  static void follow_environment() { xdev::spmd::detail::GlobalSpmd::get().explicit_on.reset(); }

  std::optional<std::string> saved_;
};

TEST_F(SpmdTest, OffByDefaultTheCurrentDeviceIsAPhysicalOne) {
  follow_environment();
  EXPECT_FALSE(xdev::spmd::is_spmd());
  EXPECT_NE(xdev::accelerator::current_device().type_name(), "SPMD");
  try {
    (void)xdev::spmd::virtual_device();
    FAIL() << "SPMD is off";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::unavailable);
    EXPECT_THAT(e.what(), HasSubstr("XDEV_USE_SPMD=1"));
  }
}

TEST_F(SpmdTest, EnvironmentVariableMakesTheVirtualDeviceCurrent) {
  ::setenv("XDEV_USE_SPMD", "1", 1);
  follow_environment();
  const auto physical = xdev::accelerator::devices().size();
  EXPECT_TRUE(xdev::spmd::is_spmd());
  auto dev = xdev::accelerator::current_device();
  EXPECT_EQ(dev.name(), "SPMD:0");
  EXPECT_EQ(xdev::accelerator::device_count(), physical);  // the mesh's size, not 1
  auto vd = xdev::spmd::virtual_device();
  EXPECT_EQ(vd.device(), dev);
  EXPECT_EQ(vd.mesh().axis_names(), std::vector<std::string>{"data"});
  EXPECT_EQ(vd.mesh().devices(), xdev::accelerator::devices());
  EXPECT_EQ(vd.logical_device_count(), 1u);
  ::setenv("XDEV_USE_SPMD", "0", 1);
  EXPECT_FALSE(xdev::spmd::is_spmd());
  EXPECT_NE(xdev::accelerator::current_device().type_name(), "SPMD");
}

TEST_F(SpmdTest, MalformedEnvironmentVariableIsNamed) {
  ::setenv("XDEV_USE_SPMD", "yes", 1);
  follow_environment();
  try {
    (void)xdev::accelerator::current_device();
    FAIL() << "XDEV_USE_SPMD=yes is malformed";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("XDEV_USE_SPMD=\"yes\""));
    EXPECT_THAT(e.what(), HasSubstr("use 1"));
  }
  EXPECT_THROW((void)xdev::spmd::is_spmd(), xdev::error);
}

TEST_F(SpmdTest, ExplicitMeshAndAThreadsOwnCurrentDeviceWin) {
  xdev::Runtime<xdev::backends::Host> rt({}, xdev::backends::Host::Options{.devices = 6, .threads = 2});
  std::vector<xdev::AnyDevice> devs;
  for (auto d : rt.devices()) devs.emplace_back(d);
  xdev::spmd::use_spmd(xdev::spmd::Mesh(devs, {2, 3}, {"data", "model"}));
  EXPECT_TRUE(xdev::spmd::is_spmd());
  EXPECT_EQ(xdev::accelerator::device_count(), 6u);
  EXPECT_EQ(xdev::accelerator::current_device().name(), "SPMD:0");
  {
    xdev::accelerator::DeviceGuard guard(devs[4]);
    EXPECT_EQ(xdev::accelerator::current_device(), devs[4]);
  }
  std::thread([&] { EXPECT_EQ(xdev::accelerator::current_device().name(), "SPMD:0"); }).join();
  xdev::spmd::disable_spmd();
  EXPECT_NE(xdev::accelerator::current_device().type_name(), "SPMD");
}

TEST_F(SpmdTest, DataOnTheCurrentVirtualDeviceReachesTheMeshThroughMarkSharding) {
  xdev::Runtime<xdev::backends::Host> rt({}, xdev::backends::Host::Options{.devices = 2, .threads = 2});
  std::vector<xdev::AnyDevice> devs;
  for (auto d : rt.devices()) devs.emplace_back(d);
  xdev::spmd::use_spmd(xdev::spmd::Mesh(devs, "data"));
  auto vd = xdev::spmd::virtual_device();
  std::vector<std::int32_t> host{1, 2, 3, 4, 5, 6};
  auto x = vd.place(std::span<const std::int32_t>(host), {6});
  auto xs = xdev::spmd::mark_sharding(x, vd.sharding({"data"})).get();
  EXPECT_EQ(xs.shard(1).device(), devs[1]);
  EXPECT_EQ(xdev::spmd::to_host(xs).get(), host);
}

TEST_F(SpmdTest, SynchronizingTheVirtualDeviceWaitsForTheWholeMeshAndRaisesItsErrors) {
  xdev::Runtime<xdev::backends::Host> rt({}, xdev::backends::Host::Options{.devices = 3, .threads = 2});
  std::vector<xdev::AnyDevice> devs;
  for (auto d : rt.devices()) devs.emplace_back(d);
  xdev::spmd::use_spmd(xdev::spmd::Mesh(devs, "data"));
  std::atomic<bool> ran{false};
  {
    auto dropped = devs[2].execute([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ran = true;
      throw xdev::error(xdev::errc::internal, "device 2 failed quietly");
    });
  }
  try {
    xdev::accelerator::synchronize();
    FAIL() << "the dropped error on HOST:2 must surface";
  } catch (const xdev::error& e) {
    EXPECT_THAT(e.what(), HasSubstr("device 2 failed quietly"));
  }
  EXPECT_TRUE(ran);
  xdev::accelerator::synchronize();  // raised once, then gone
}

}  // namespace
