// Kernels on windows (<xdev/any/kernel.hpp>) with an in-process backend: what xdev hands a backend
// that takes windows (`kernel_arg_offsets`: the byte offset of each window), and the refusal, through
// the token, on one that does not. The OpenCL plugin's side is tests/opencl/opencl_kernel_test.cpp.
#include <xdev/any/any_device.hpp>
#include <xdev/any/kernel.hpp>
#include <xdev/backend/user_kernel.hpp>
#include <xdev/device/runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>

#include "support/error_of.hpp"
#include "support/test_targets.hpp"

namespace {

using ::testing::HasSubstr;
using xdev::AnyDevice;
using xdev::KernelParam;
using xdev_test::error_of;

// "Runs" a kernel by keeping the launch it was handed (there is no compiler here).
template <bool Windows>
class RecordingKernels : public xdev_test::PolicyBackend<xdev::Capabilities<>> {
 public:
  static constexpr std::string_view name = Windows ? "WINDOWS" : "WHOLE";
  static constexpr bool kernel_arg_offsets = Windows;
  using PolicyBackend::PolicyBackend;
  using kernel_handle = std::uint64_t;

  kernel_handle create_kernel(const xdev::KernelSource&) { return 1; }
  void launch_kernel(std::size_t, kernel_handle, xdev::KernelLaunchArgs<memory_handle> a, xdev::Completion done) {
    {
      std::lock_guard lk(m_);
      last_ = std::move(a);
    }
    done(nullptr);
  }
  void destroy_kernel(kernel_handle) noexcept {}

  std::optional<xdev::KernelLaunchArgs<memory_handle>> last() {
    std::lock_guard lk(m_);
    return last_;
  }

 private:
  std::mutex m_;
  std::optional<xdev::KernelLaunchArgs<memory_handle>> last_;
};
static_assert(xdev::concepts::RunsSourceKernels<RecordingKernels<true>>);
static_assert(xdev::takes_kernel_arg_offsets<RecordingKernels<true>>);
static_assert(!xdev::takes_kernel_arg_offsets<RecordingKernels<false>>, "declared false: whole arrays only");
static_assert(!xdev::takes_kernel_arg_offsets<xdev_test::ManualBackend>, "not declared: whole arrays only");

const xdev::Kernel& kernel() {
  static const xdev::Kernel k(
      {.source = "__kernel void k(__global float* y, __global float* x, int n) {}",
       .entry = "k",
       .params = {KernelParam::buffer<float>(), KernelParam::buffer<float>(), KernelParam::scalar<std::int32_t>()}});
  return k;
}

TEST(KernelWindows, ABackendThatTakesWindowsGetsEachWindowsByteOffset) {
  xdev::Runtime<RecordingKernels<true>> rt;
  const AnyDevice dev(rt.device(0));
  auto a = xdev::empty<float>(dev, {4, 8});
  const auto& ca = a;
  kernel().launch(dev, {8}, {xdev::slice(a, {2, 3}), xdev::slice(ca, xdev::all, {3, 5}), std::int32_t{5}}).get();
  const auto got = rt.backend().last();
  ASSERT_TRUE(got);
  ASSERT_EQ(got->args.size(), 3u);
  EXPECT_EQ(got->args[0].offset, 2 * 8 * sizeof(float)) << "row 2";
  EXPECT_EQ(got->args[1].offset, 3 * sizeof(float)) << "a strided window starts at its first element";
  EXPECT_EQ(got->args[0].memory, got->args[1].memory) << "both windows of the same allocation";
  EXPECT_EQ(got->args[2].scalar_bits, 5u);
  EXPECT_EQ(got->args[2].offset, 0u);
  kernel().launch(dev, {8}, {a, a, std::int32_t{1}}).get();
  EXPECT_EQ(rt.backend().last()->args[0].offset, 0u) << "a whole array";
}

TEST(KernelWindows, ABackendThatTakesWholeArraysRefusesAWindowThroughTheTokenAndRunsNothing) {
  xdev::Runtime<RecordingKernels<false>> rt;
  const AnyDevice dev(rt.device(0));
  auto a = xdev::empty<float>(dev, {4, 8});
  auto f = kernel().launch(dev, {8}, {a, xdev::slice(a, {1, 2}), std::int32_t{0}});
  const auto e = error_of([&] { f.get(); });
  EXPECT_EQ(e.code(), xdev::errc::unimplemented);
  EXPECT_THAT(e.what(), HasSubstr("WHOLE"));
  EXPECT_THAT(e.what(), HasSubstr("kernel argument 1 is a window (at byte 32 of its array), but this backend's "
                                  "kernels take whole arrays only"));
  EXPECT_FALSE(rt.backend().last()) << "nothing was launched";
  kernel().launch(dev, {8}, {a, a, std::int32_t{0}}).get();
  EXPECT_TRUE(rt.backend().last());
  EXPECT_EQ(error_of([&] {
              (void)kernel().launch(dev, {8}, {xdev::slice(a, {1, 1}), a, std::int32_t{0}});
            }).code(),
            xdev::errc::invalid_argument)
      << "an empty window, refused before anything is submitted";
}

}  // namespace
