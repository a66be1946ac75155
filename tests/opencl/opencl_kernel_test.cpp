// User kernels (<xdev/any/kernel.hpp>) on the OPENCL plugin, loaded through the registry as users
// load it: the docs' fused a*x+b with clamp on every device, stream order with ops and tokens, 2-D
// ranges with work-groups, the compiler's log in a build failure, a signature that disagrees with
// the declared parameters, and the launch checks that refuse before anything is submitted; devices
// that run no source kernels (HOST, REF) say so.
//
// Without an OpenCL driver the tests skip with the reason, unless XDEV_TEST_DEVICES lists OPENCL.
#include <xdev/any/any_device.hpp>
#include <xdev/any/kernel.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/elementwise.hpp>
#include <xdev/plugin/loader.hpp>
#include <xdev/plugin/plugin_backend.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <future>
#include <span>
#include <string>
#include <vector>

#include "opencl_plugin_devices.hpp"
#include "support/error_of.hpp"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using xdev::AnyDevice;
using xdev::KernelParam;
using xdev_test::error_of;
namespace fs = std::filesystem;

// The docs' example (docs/kernels.md): y = clamp(a * x + b, lo, hi).
xdev::Kernel axpb_clamp() {
  return xdev::Kernel(
      {.source = R"CL(
      __kernel void axpb_clamp(__global float* y, __global const float* x, float a, float b, float lo, float hi) {
        const size_t i = get_global_id(0);
        y[i] = clamp(a * x[i] + b, lo, hi);
      })CL",
       .entry = "axpb_clamp",
       .params = {KernelParam::buffer<float>(), KernelParam::buffer<float>(), KernelParam::scalar<float>(),
                  KernelParam::scalar<float>(), KernelParam::scalar<float>(), KernelParam::scalar<float>()}});
}

using UserKernel = xdev_test::OpenCLPluginDevices;

// A kernel on windows (views): the pointer starts at the window's first element, and nothing
// outside the window changes. Rows of 1024 floats start at multiples of 4 KiB, which any OpenCL
// device's sub-buffer alignment divides.
TEST_F(UserKernel, AKernelOnAWindowStartsAtItsFirstElementAndNothingAroundItChanges) {
  const xdev::Kernel add_x({.source = "__kernel void add_x(__global float* y, __global const float* x) {"
                                      "  const size_t i = get_global_id(0); y[i] += x[i]; }",
                            .entry = "add_x",
                            .params = {KernelParam::buffer<float>(), KernelParam::buffer<float>()}});
  constexpr std::int64_t rows = 6, cols = 1024;
  std::vector<float> init(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < init.size(); ++i) init[i] = static_cast<float>(i / cols);  // row r holds r
  for (const AnyDevice& dev : devices) {
    auto a = xdev::empty<float>(dev, {rows, cols});
    dev.copy_to_device(std::span<const float>(init), a).get();
    const auto& ca = a;
    // rows 1-2 += rows 4-5 (a const window as the input)
    add_x.launch(dev, {2 * cols}, {xdev::slice(a, {1, 3}), xdev::slice(ca, {4, 6})}).get();
    std::vector<float> out(init.size());
    dev.copy_to_host(a, std::span<float>(out)).get();
    const std::vector<float> want_rows{0.0F, 1.0F + 4.0F, 2.0F + 5.0F, 3.0F, 4.0F, 5.0F};
    for (std::size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(out[i], want_rows[i / cols]) << dev.name() << " at element " << i;
  }
}

TEST_F(UserKernel, AWindowOffTheDevicesSubBufferAlignmentIsNamedThroughTheToken) {
  const xdev::Kernel k({.source = "__kernel void k(__global float* y) { y[get_global_id(0)] = 1.0f; }",
                        .entry = "k",
                        .params = {KernelParam::buffer<float>()}});
  const AnyDevice& dev = devices.front();
  auto a = xdev::empty<float>(dev, {64});
  const std::vector<float> zeros(64, 0.0F);
  dev.copy_to_device(std::span<const float>(zeros), a).get();
  auto f = k.launch(dev, {4}, {xdev::slice(a, {1, 5})});  // byte 4: no device aligns a sub-buffer there
  const auto e = error_of([&] { f.get(); });
  EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), HasSubstr("argument 0 is a window at byte 4 of its array"));
  EXPECT_THAT(e.what(), HasSubstr("CL_DEVICE_MEM_BASE_ADDR_ALIGN"));
  std::vector<float> out(64);
  dev.copy_to_host(a, std::span<float>(out)).get();
  EXPECT_EQ(out, zeros) << "nothing ran";
  EXPECT_EQ(error_of([&] {
              (void)k.launch(dev, {1}, {xdev::slice(a, {3, 3})});
            }).code(),
            xdev::errc::invalid_argument)
      << "an empty window, refused before anything is submitted";
}

// The same plugin as a plugin of ABI 1.9 would give it (its table's layout is the same): its
// kernels take whole arrays only, so xdev refuses a window rather than hand it a launch whose
// offsets it would not read; a whole array still runs.
TEST_F(UserKernel, APluginOfAbi19RefusesAWindowAndStillRunsWholeArrays) {
  const auto lib = xdev::plugin::load(fs::path(XDEV_TEST_PLUGIN_DIR) / "libxdev_plugin_opencl.so");
  xdev_plugin_api table = lib->api();
  table.abi_minor = 9;
  xdev::Runtime<xdev::plugin::PluginBackend> rt({}, &table, lib);
  const AnyDevice dev(rt.device(0));
  const xdev::Kernel k({.source = "__kernel void k(__global float* y) { y[get_global_id(0)] = 1.0f; }",
                        .entry = "k",
                        .params = {KernelParam::buffer<float>()}});
  auto a = xdev::empty<float>(dev, {2, 1024});
  auto f = k.launch(dev, {1024}, {xdev::slice(a, {1, 2})});
  const auto e = error_of([&] { f.get(); });
  EXPECT_EQ(e.code(), xdev::errc::unimplemented);
  EXPECT_THAT(e.what(), HasSubstr("OPENCL: kernel argument 0 is a window (at byte 4096 of its array), but this plugin "
                                  "(ABI 1.9) takes whole arrays only"));
  k.launch(dev, {2048}, {a}).get();
  std::vector<float> out(2048);
  dev.copy_to_host(a, std::span<float>(out)).get();
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return v == 1.0F; }));
}

TEST_F(UserKernel, TheFusedAxpbWithClampRunsOnEveryDevice) {
  const xdev::Kernel k = axpb_clamp();
  constexpr std::size_t n = 1000;
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) / 100.0F - 5.0F;  // [-5, 5)
  for (const AnyDevice& dev : devices) {
    auto xd = xdev::empty<float>(dev, {n});
    auto yd = xdev::empty<float>(dev, {n});
    dev.copy_to_device(std::span<const float>(x), xd).get();
    k.launch(dev, {n}, {yd, xd, 2.0F, 1.0F, -3.0F, 4.0F}).get();
    std::vector<float> y(n);
    dev.copy_to_host(yd, std::span<float>(y)).get();
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_FLOAT_EQ(y[i], std::clamp(2.0F * x[i] + 1.0F, -3.0F, 4.0F)) << dev.name() << " at " << i;
  }
}

TEST_F(UserKernel, LaunchesRunInStreamOrderWithOpsAndTakeEveryToken) {
  const AnyDevice& dev = devices.back();
  const xdev::Kernel k = axpb_clamp();
  const auto s = dev.make_stream();
  const std::vector<float> x{1, 2, 3, 4};
  auto xd = xdev::empty<float>(dev, {4});
  auto yd = xdev::empty<float>(dev, {4});
  s.copy_to_device(std::span<const float>(x), xd.buffer());
  k.launch(s, {4}, {yd, xd, 1.0F, 1.0F, 0.0F, 100.0F});  // y = x + 1, after the copy
  xdev::ops::scale(s, yd, 10.0F);                        // then the plugin's own op
  std::promise<void> called;
  k.launch(s, {4}, {xd, yd, 1.0F, -5.0F, 0.0F, 42.0F}, [&](std::exception_ptr ep) {  // x = min(y - 5, 42)
    if (ep)
      called.set_exception(ep);
    else
      called.set_value();
  });
  called.get_future().get();
  std::vector<float> out(4);
  s.copy_to_host(xd.buffer(), std::span<float>(out)).get();
  EXPECT_THAT(out, ElementsAre(15.0F, 25.0F, 35.0F, 42.0F));
}

TEST_F(UserKernel, TwoDimensionalRangesAndWorkGroups) {
  const xdev::Kernel index2d({.source = R"CL(
      __kernel void index2d(__global long* out, long cols) {
        out[get_global_id(0) * cols + get_global_id(1)] = (long)(get_global_id(0) * 100 + get_global_id(1));
      })CL",
                              .entry = "index2d",
                              .params = {KernelParam::buffer<std::int64_t>(), KernelParam::scalar<std::int64_t>()}});
  const AnyDevice& dev = devices.front();
  auto out = xdev::empty<std::int64_t>(dev, {4, 6});
  index2d.launch(dev.default_stream(), {4, 6}, {2, 3}, {out, std::int64_t{6}}).get();
  std::vector<std::int64_t> host(24);
  dev.copy_to_host(out, std::span<std::int64_t>(host)).get();
  EXPECT_EQ(host[0], 0);
  EXPECT_EQ(host[6 + 5], 105);
  EXPECT_EQ(host[23], 305);
}

TEST_F(UserKernel, ABuildFailureCarriesTheCompilerLogEveryTime) {
  const xdev::Kernel broken({.source = "__kernel void broken(__global float* y) { y[0] = undeclared_name; }",
                             .entry = "broken",
                             .params = {KernelParam::buffer<float>()}});
  const AnyDevice& dev = devices.front();
  auto y = xdev::empty<float>(dev, {1});
  // Written first: the check below computes 0 * y + 7, which an uninitialized NaN would make NaN,
  // and clamp(NaN, 0, 10) is 0 on PoCL (the test failed whenever the allocation held one).
  const float zero = 0.0F;
  dev.copy_to_device(std::span<const float>(&zero, 1), y).get();
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto e = error_of([&] { broken.launch(dev, {1}, {y}).get(); });
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(dev.name() + ": kernel \"broken\" does not build (CL_BUILD_PROGRAM_FAILURE"));
    EXPECT_THAT(e.what(), HasSubstr("undeclared_name")) << "the compiler's log";
  }
  // The stream goes on.
  axpb_clamp().launch(dev, {1}, {y, y, 0.0F, 7.0F, 0.0F, 10.0F}).get();
  float v = 0;
  dev.copy_to_host(y, std::span<float>(&v, 1)).get();
  EXPECT_EQ(v, 7.0F);
}

TEST_F(UserKernel, ASignatureThatDisagreesWithTheParametersIsNamed) {
  const AnyDevice& dev = devices.front();
  auto f = xdev::empty<float>(dev, {4});
  auto d = xdev::empty<double>(dev, {4});
  const char* source = "__kernel void twice(__global float* y, __global const float* x) { y[0] = 2 * x[0]; }";
  const xdev::Kernel wrong_type(
      {.source = source, .entry = "twice", .params = {KernelParam::buffer<float>(), KernelParam::buffer<double>()}});
  EXPECT_THAT(
      error_of([&] {
        wrong_type.launch(dev, {1}, {f, d}).get();
      }).what(),
      HasSubstr(
          "kernel \"twice\": argument 1 (x) is `float*` in the source, declared f64 buffer: the element types differ"));
  const xdev::Kernel wrong_kind(
      {.source = source, .entry = "twice", .params = {KernelParam::buffer<float>(), KernelParam::scalar<float>()}});
  EXPECT_THAT(error_of([&] {
                wrong_kind.launch(dev, {1}, {f, 1.0F}).get();
              }).what(),
              HasSubstr("argument 1 (x) is `float*` in the source, declared f32 scalar"));
  const xdev::Kernel wrong_count({.source = source, .entry = "twice", .params = {KernelParam::buffer<float>()}});
  EXPECT_THAT(error_of([&] { wrong_count.launch(dev, {1}, {f}).get(); }).what(),
              HasSubstr("kernel \"twice\" takes 2 arguments in the source, but 1 parameters are declared"));
  const xdev::Kernel wrong_name(
      {.source = source, .entry = "thrice", .params = {KernelParam::buffer<float>(), KernelParam::buffer<float>()}});
  EXPECT_THAT(error_of([&] {
                wrong_name.launch(dev, {1}, {f, f}).get();
              }).what(),
              HasSubstr("the source has no __kernel function named \"thrice\""));
}

TEST_F(UserKernel, TheLaunchIsCheckedBeforeAnythingIsSubmitted) {
  const xdev::Kernel k = axpb_clamp();
  const AnyDevice& dev = devices.front();
  auto x = xdev::empty<float>(dev, {8});
  auto i = xdev::empty<std::int32_t>(dev, {8});
  const auto refused = [&](auto&& f, const std::string& what) {
    const auto e = error_of(f);
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(what));
  };
  const std::string on = "Kernel \"axpb_clamp\" on " + dev.name() + ": ";
  refused([&] { (void)k.launch(dev, {8}, {x, x, 1.0F}); }, on + "3 arguments for 6 parameters");
  refused(
      [&] {
        (void)k.launch(dev, {8}, {x, x, 1.0, 1.0F, 0.0F, 1.0F});
      },
      on + "argument 2 (f64 scalar) does not match parameter 2 (f32 scalar)");
  refused(
      [&] {
        (void)k.launch(dev, {8}, {x, i, 1.0F, 1.0F, 0.0F, 1.0F});
      },
      on + "argument 1 (i32 buffer) does not match parameter 1 (f32 buffer)");
  refused([&] { (void)k.launch(dev, {}, {x, x, 1.0F, 1.0F, 0.0F, 1.0F}); }, "the global range {} must have 1 to 3");
  refused([&] { (void)k.launch(dev, {1, 1, 1, 8}, {x, x, 1.0F, 1.0F, 0.0F, 1.0F}); }, "must have 1 to 3 extents");
  refused(
      [&] {
        (void)k.launch(dev.default_stream(), {8}, {3}, {x, x, 1.0F, 1.0F, 0.0F, 1.0F});
      },
      "the work-group {3} does not divide the global range {8}");
  if (devices.size() > 1) {
    auto other = xdev::empty<float>(devices[1], {8});
    refused(
        [&] {
          (void)k.launch(dev, {8}, {x, other, 1.0F, 1.0F, 0.0F, 1.0F});
        },
        "argument 1 is an array of " + devices[1].name() + ", not of the launch's device");
  }
  // An empty range runs nothing and completes.
  k.launch(dev, {0}, {x, x, 1.0F, 1.0F, 0.0F, 1.0F}).get();
}

TEST_F(UserKernel, AnotherLanguageOrABoolScalarIsRefusedByThePlugin) {
  const AnyDevice& dev = devices.front();
  auto x = xdev::empty<float>(dev, {1});
  const xdev::Kernel cuda({.language = "CUDA",
                           .source = "__global__ void k(float* x) {}",
                           .entry = "k",
                           .params = {KernelParam::buffer<float>()}});
  const auto e = error_of([&] { (void)cuda.launch(dev, {1}, {x}); });
  EXPECT_EQ(e.code(), xdev::errc::unimplemented);
  EXPECT_THAT(e.what(), HasSubstr("OPENCL compiles kernels in \"OpenCL C\", not \"CUDA\""));
  const xdev::Kernel flag({.source = "__kernel void flag(__global float* x, uchar b) {}",
                           .entry = "flag",
                           .params = {KernelParam::buffer<float>(), KernelParam::scalar<bool>()}});
  EXPECT_THAT(error_of([&] {
                (void)flag.launch(dev, {1}, {x, std::uint8_t{1}});
              }).what(),
              HasSubstr("parameter 1 is a bool scalar, which OpenCL C kernels cannot take"));
}

TEST(UserKernelElsewhere, DevicesThatRunNoSourceKernelsSaySoAndTheSourceIsChecked) {
  xdev::Registry reg{xdev::plugin::SearchPath(std::vector<fs::path>{fs::path(XDEV_TEST_PLUGIN_DIR)})};
  const xdev::Kernel k = axpb_clamp();
  const AnyDevice ref = reg.devices("REF").at(0);
  auto x = xdev::empty<float>(ref, {1});
  const auto e = error_of([&] { (void)k.launch(ref, {1}, {x, x, 1.0F, 1.0F, 0.0F, 1.0F}); });
  EXPECT_EQ(e.code(), xdev::errc::unimplemented);
  EXPECT_THAT(e.what(), HasSubstr("REF: the plugin does not run kernels given as source"));
  const AnyDevice host = reg.devices("HOST").at(0);
  auto h = xdev::empty<float>(host, {1});
  EXPECT_THAT(error_of([&] {
                (void)k.launch(host, {1}, {h, h, 1.0F, 1.0F, 0.0F, 1.0F});
              }).what(),
              HasSubstr("HOST:0 does not run kernels given as source"));

  const auto bad = [](xdev::KernelSource s, const std::string& what) {
    const auto err = error_of([&] { (void)xdev::Kernel(std::move(s)); });
    EXPECT_EQ(err.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(err.what(), HasSubstr(what));
  };
  bad({.source = "", .entry = "k"}, "the source is empty");
  bad({.source = "x", .entry = "2k"}, "the entry must be the kernel function's name, a C identifier");
  bad({.language = "", .source = "x", .entry = "k"}, "no language");
}

}  // namespace
