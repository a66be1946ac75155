// A plugin whose memory is host memory (XDEV_PLUGIN_HOST_MEMORY, ABI 1.9), loaded as users load it:
// REF runs user C++ kernels through AnyDevice (parallel_for, parallel_reduce, on its own worker in
// stream order with its native ops), and shares arrays through DLPack both ways; a plugin whose
// memory is opaque (GOOD) refuses both, naming the device.
#include "plugin_test_support.hpp"
#include "support/error_of.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/any/parallel.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/ops/elementwise.hpp>

#if __has_include(<dlpack/dlpack.h>)
#include <xdev/any/dlpack.hpp>
#endif

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using xdev::AnyDevice;
using xdev_test::error_of;
using xdev_test::fixture_dir;
namespace fs = std::filesystem;

class HostMemoryPlugin : public ::testing::Test {
 protected:
  xdev::Registry reg{xdev::plugin::SearchPath(std::vector<fs::path>{fs::path(XDEV_TEST_PLUGIN_DIR)})};
  AnyDevice ref = reg.devices("REF").at(1);
};

TEST_F(HostMemoryPlugin, RefRunsCppKernelsInStreamOrderWithItsOwnOps) {
  ASSERT_TRUE(ref.host_accessible());
  ASSERT_TRUE(ref.runs_kernels());
  EXPECT_TRUE(ref.properties().host_accessible);
  auto a = xdev::empty<float>(ref, {1000});
  float* p = xdev::host_data(a);
  ASSERT_NE(p, nullptr);
  const auto s = ref.make_stream();
  std::vector<float> host(1000, 1.0F);
  s.copy_to_device(std::span<const float>(host), a.buffer());
  xdev::parallel_for(s, a.size(), [p](std::size_t i) { p[i] += static_cast<float>(i); });  // after the copy
  xdev::ops::scale(s, a, 2.0F);  // REF's native scale, after the kernel
  auto sum = xdev::parallel_reduce(
      s, a.size(), [p](std::size_t i) { return static_cast<double>(p[i]); }, xdev::Sum<double>{});
  EXPECT_DOUBLE_EQ(sum.get(), 2.0 * (1000.0 + 999.0 * 1000.0 / 2.0));
  auto mx = xdev::parallel_reduce(
      ref, a.size(), [p](std::size_t i) { return p[i]; }, xdev::Max<float>{});
  EXPECT_EQ(mx.get(), 2.0F * 1000.0F);
}

TEST_F(HostMemoryPlugin, AKernelsExceptionReachesItsFutureAndTheStreamGoesOn) {
  auto a = xdev::empty<std::int32_t>(ref, {8});
  std::int32_t* p = xdev::host_data(a);
  auto bad = xdev::parallel_for(ref, 8, [](std::size_t i) {
    if (i == 3) throw std::runtime_error("index 3 is cursed");
  });
  try {
    bad.get();
    ADD_FAILURE() << "the kernel's exception was lost";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("index 3 is cursed")) << "it arrives with its type";
  }
  xdev::parallel_for(ref, 8, [p](std::size_t i) { p[i] = static_cast<std::int32_t>(i); }).get();
  std::vector<std::int32_t> out(8);
  ref.copy_to_host(a, std::span<std::int32_t>(out)).get();
  EXPECT_THAT(out, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

TEST_F(HostMemoryPlugin, APluginWhoseMemoryIsOpaqueCannotRunACppKernelAndSaysSo) {
  xdev::Registry good_reg{xdev::plugin::SearchPath(std::vector<fs::path>{fixture_dir("good")})};
  const AnyDevice good = good_reg.devices("GOOD").at(0);
  EXPECT_FALSE(good.host_accessible());
  EXPECT_FALSE(good.runs_kernels());
  const auto e = error_of([&] { (void)xdev::parallel_for(good, 4, [](std::size_t) {}); });
  EXPECT_EQ(e.code(), xdev::errc::unimplemented);
  EXPECT_THAT(e.what(), HasSubstr("parallel_for: GOOD:0 cannot run a C++ kernel"));
  auto b = xdev::empty<float>(good, {2});
  EXPECT_THAT(error_of([&] { (void)xdev::host_data(b); }).what(),
              HasSubstr("host_data: the memory of GOOD:0 is not host-accessible"));
}

#if __has_include(<dlpack/dlpack.h>)
TEST_F(HostMemoryPlugin, DLPackRoundTripsThroughRefWithoutACopy) {
  auto a = xdev::empty<double>(ref, {2, 2});
  const std::vector<double> in{1, 2, 3, 4};
  ref.copy_to_device(std::span<const double>(in), a).get();
  const double* before = xdev::host_data(a);
  DLManagedTensor* t = xdev::to_dlpack(std::move(a));
  EXPECT_EQ(t->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(t->dl_tensor.device.device_id, 1);
  EXPECT_EQ(t->dl_tensor.data, before) << "exported in place";
  EXPECT_EQ(static_cast<const double*>(t->dl_tensor.data)[3], 4.0);

  xdev::AnyArray<double> back = xdev::from_dlpack<double>(t, ref);
  EXPECT_EQ(xdev::host_data(back), before) << "adopted in place";
  xdev::ops::scale(ref, back, 10.0).get();  // REF's native op on adopted memory
  std::vector<double> out(4);
  ref.copy_to_host(back, std::span<double>(out)).get();
  EXPECT_THAT(out, ElementsAre(10, 20, 30, 40));
}

TEST_F(HostMemoryPlugin, AnOpaquePluginNeitherExportsNorAdopts) {
  xdev::Registry good_reg{xdev::plugin::SearchPath(std::vector<fs::path>{fixture_dir("good")})};
  const AnyDevice good = good_reg.devices("GOOD").at(0);
  auto a = xdev::empty<double>(ref, {3});
  DLManagedTensor* t = xdev::to_dlpack(std::move(a));
  const auto e = error_of([&] { (void)xdev::from_dlpack<double>(t, good); });
  EXPECT_EQ(e.code(), xdev::errc::unimplemented);
  EXPECT_THAT(e.what(), HasSubstr("from_dlpack: the memory of GOOD:0 is not host memory"));
  t->deleter(t);  // refused: still the caller's
  auto g = xdev::empty<double>(good, {3});
  EXPECT_THAT(error_of([&] { (void)xdev::to_dlpack(std::move(g)); }).what(),
              HasSubstr("to_dlpack: the memory of GOOD:0 is not host-accessible"));
}
#endif

}  // namespace
