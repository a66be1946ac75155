// Views (`xdev::slice`) on devices whose memory the host cannot address: a strided box and rows of
// an OPENCL array (PoCL) and of a REF plugin array go to and from the host (OPENCL: one rect
// transfer per strided region; REF: one offset transfer per contiguous run); window-to-window
// copies inside the device; and ops on windows at an offset: in the device through the plugin's
// op windows (ABI 1.12: an OpenCL sub-buffer where the offset is a multiple of the device's base
// alignment, a moved address on REF), else through the CPU fallback, which stages only the window.
#include "opencl/opencl_plugin_devices.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/memory/array_view.hpp>
#include <xdev/ops/ops.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace {

using PluginViews = xdev_test::OpenCLPluginDevices;

// Writes a box into an iota matrix on `dev`, then reads back the whole array, a box and rows.
void check_views_on(const xdev::AnyDevice& dev) {
  SCOPED_TRACE(dev.name());
  constexpr std::int64_t rows = 9, cols = 13;
  auto a = xdev::empty<std::int32_t>(dev, {rows, cols});
  std::vector<std::int32_t> v(rows * cols);
  std::iota(v.begin(), v.end(), 0);
  dev.copy_to_device(std::span<const std::int32_t>(v), a).get();

  std::vector<std::int32_t> patch(4 * 5);
  std::iota(patch.begin(), patch.end(), 1000);
  dev.copy_to_device(std::span<const std::int32_t>(patch), xdev::slice(a, {2, 6}, {7, 12})).get();
  for (std::int64_t r = 2; r < 6; ++r)
    for (std::int64_t c = 7; c < 12; ++c)
      v[static_cast<std::size_t>(r * cols + c)] = 1000 + static_cast<std::int32_t>((r - 2) * 5 + c - 7);

  std::vector<std::int32_t> all(v.size());
  dev.copy_to_host(a, std::span<std::int32_t>(all)).get();
  EXPECT_EQ(all, v);

  std::vector<std::int32_t> box(3 * 6), expected_box;
  dev.copy_to_host(xdev::slice(a, {1, 4}, {6, 12}), std::span<std::int32_t>(box)).get();
  for (std::int64_t r = 1; r < 4; ++r)
    for (std::int64_t c = 6; c < 12; ++c) expected_box.push_back(v[static_cast<std::size_t>(r * cols + c)]);
  EXPECT_EQ(box, expected_box);

  std::vector<std::int32_t> tail(2 * cols);
  dev.copy_to_host(xdev::slice(a, {7}), std::span<std::int32_t>(tail)).get();
  EXPECT_EQ(tail, std::vector<std::int32_t>(v.end() - 2 * cols, v.end()));

  // Device to device, window to window: the box into the top-left corner of a second array (one
  // offset copy per row, inside the device), and column 0 of `a` into its column 1 (interleaved
  // windows that share no element).
  auto b = xdev::empty<std::int32_t>(dev, {4, 8});
  const std::vector<std::int32_t> minus(4 * 8, -1);
  dev.copy_to_device(std::span<const std::int32_t>(minus), b).get();
  dev.copy(xdev::slice(a, {1, 4}, {6, 12}), xdev::slice(b, {0, 3}, {0, 6})).get();
  std::vector<std::int32_t> got(4 * 8), expected_b = minus;
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t c = 0; c < 6; ++c) expected_b[r * 8 + c] = expected_box[r * 6 + c];
  dev.copy_to_host(b, std::span<std::int32_t>(got)).get();
  EXPECT_EQ(got, expected_b);
  dev.copy(xdev::slice(a, xdev::all, {0, 1}), xdev::slice(a, xdev::all, {1, 2})).get();
  for (std::int64_t r = 0; r < rows; ++r)
    v[static_cast<std::size_t>(r * cols + 1)] = v[static_cast<std::size_t>(r * cols)];
  dev.copy_to_host(a, std::span<std::int32_t>(all)).get();
  EXPECT_EQ(all, v);

  // Ops on rows of a float array: row 1-2 scaled, row 3 = row 0 + row 1; rows around untouched.
  auto f = xdev::empty<float>(dev, {5, 8});
  xdev::ops::fill(dev, f, 1.0f).get();
  xdev::ops::scale(dev, xdev::slice(f, {1, 3}), 3.0f).get();
  xdev::ops::add(dev, xdev::slice(f, {0, 1}), xdev::slice(f, {1, 2}), xdev::slice(f, {3, 4})).get();
  EXPECT_EQ(xdev::ops::sum(dev, xdev::slice(f, {1, 4})).get(), 8 * (3.0f + 3.0f + 4.0f));
  std::vector<float> fs(5 * 8), expected_f(5 * 8, 1.0f);
  std::fill(expected_f.begin() + 8, expected_f.begin() + 24, 3.0f);
  std::fill(expected_f.begin() + 24, expected_f.begin() + 32, 4.0f);
  dev.copy_to_host(f, std::span<float>(fs)).get();
  EXPECT_EQ(fs, expected_f);
}

// A box of a rank-4 array (three strided dimensions: one region per index of the outermost),
// written and read back, and the elements around it untouched.
void check_rank4_box_on(const xdev::AnyDevice& dev) {
  SCOPED_TRACE(dev.name());
  auto a = xdev::empty<float>(dev, {3, 4, 5, 6});
  std::vector<float> v(a.size());
  std::iota(v.begin(), v.end(), 0.0f);
  dev.copy_to_device(std::span<const float>(v), a).get();
  const auto box = xdev::slice(a, {1, 3}, {0, 4}, {1, 4}, {2, 5});
  std::vector<float> got(box.size()), want;
  dev.copy_to_host(box, std::span<float>(got)).get();
  for (std::size_t i = 1; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      for (std::size_t k = 1; k < 4; ++k)
        for (std::size_t l = 2; l < 5; ++l) want.push_back(v[((i * 4 + j) * 5 + k) * 6 + l]);
  EXPECT_EQ(got, want);
  std::vector<float> patch(box.size());
  std::iota(patch.begin(), patch.end(), -1000.0f);
  dev.copy_to_device(std::span<const float>(patch), box).get();
  std::vector<float> all(v.size());
  dev.copy_to_host(a, std::span<float>(all)).get();
  std::size_t p = 0;
  for (std::size_t e = 0; e < v.size(); ++e) {
    const std::size_t l = e % 6, k = e / 6 % 5, i = e / 120;
    const bool inside = i >= 1 && i < 3 && k >= 1 && k < 4 && l >= 2 && l < 5;
    EXPECT_EQ(all[e], inside ? patch[p++] : v[e]) << e;
  }
  EXPECT_EQ(p, patch.size());
}

std::uint64_t fallbacks(std::initializer_list<const char*> ops) {
  std::uint64_t n = 0;
  for (const char* op : ops) n += xdev::metrics::value(std::string("fallback.") + op);
  return n;
}

// Ops on rows of a [6, 64] float array (rows of 256 bytes, a multiple of PoCL's 128-byte base
// alignment): they run in the device, write their window and nothing around it. Then a window at
// element 1 (4 bytes in), which OpenCL cannot start a sub-buffer at: `every_offset` says whether
// the device runs it anyway (REF moves its address) or stages it through the fallback (OPENCL).
void check_ops_on_windows(const xdev::AnyDevice& dev, bool every_offset) {
  SCOPED_TRACE(dev.name());
  constexpr std::int64_t cols = 64;
  auto f = xdev::empty<float>(dev, {6, cols});
  xdev::ops::fill(dev, f, 1.0f).get();
  const auto before = fallbacks({"fill", "scale", "add", "sum", "axpy", "dot"});
  xdev::ops::scale(dev, xdev::slice(f, {1, 3}), 3.0f).get();
  xdev::ops::add(dev, xdev::slice(f, {0, 1}), xdev::slice(f, {1, 2}), xdev::slice(f, {3, 4})).get();
  xdev::ops::axpy(dev, 2.0f, xdev::slice(f, {3, 4}), xdev::slice(f, {4, 5})).get();
  EXPECT_EQ(xdev::ops::sum(dev, xdev::slice(f, {1, 4})).get(), cols * (3.0f + 3.0f + 4.0f));
  EXPECT_EQ(xdev::ops::dot(dev, xdev::slice(f, {2, 3}), xdev::slice(f, {4, 5})).get(), cols * 3.0f * 9.0f);
  EXPECT_EQ(fallbacks({"fill", "scale", "add", "sum", "axpy", "dot"}), before)
      << "an op on an aligned window went through the CPU fallback";
  std::vector<float> got(6 * cols), want(6 * cols, 1.0f);
  const auto row = [&](std::size_t r, float x) {
    std::fill(want.begin() + static_cast<std::ptrdiff_t>(r * cols),
              want.begin() + static_cast<std::ptrdiff_t>((r + 1) * cols), x);
  };
  row(1, 3.0f), row(2, 3.0f), row(3, 4.0f), row(4, 9.0f);
  dev.copy_to_host(f, std::span<float>(got)).get();
  EXPECT_EQ(got, want);

  const auto scales = xdev::metrics::value("fallback.scale");
  xdev::ops::scale(dev, xdev::slice(f, {5, 6}, {1, cols}), -1.0f).get();
  EXPECT_EQ(xdev::metrics::value("fallback.scale"), scales + (every_offset ? 0 : 1));
  std::fill(want.begin() + 5 * cols + 1, want.end(), -1.0f);
  dev.copy_to_host(f, std::span<float>(got)).get();
  EXPECT_EQ(got, want);
}

TEST_F(PluginViews, OpsOnAlignedWindowsRunInTheDeviceOnOpenCLOthersThroughTheFallback) {
  check_ops_on_windows(devices.at(0), false);
}

TEST_F(PluginViews, OpsOnWindowsAtAnyOffsetRunInTheDeviceOnTheReferencePlugin) {
  check_ops_on_windows(reg.devices("REF").at(0), true);
}

TEST_F(PluginViews, ABoxOfARankFourArrayTransfersOnOpenCLAndTheReferencePlugin) {
  check_rank4_box_on(devices.at(0));
  check_rank4_box_on(reg.devices("REF").at(0));
}

TEST_F(PluginViews, AStridedBoxAndRowsTransferOnOpenCL) {
  check_views_on(devices.at(0));
}

TEST_F(PluginViews, AStridedBoxAndRowsTransferOnTheReferencePlugin) {
  check_views_on(reg.devices("REF").at(0));
}

}  // namespace
