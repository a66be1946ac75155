// Views (`xdev::slice`) on devices whose memory the host cannot address: a strided box and rows of
// an OPENCL array (PoCL) and of a REF plugin array go to and from the host (OPENCL: one rect
// transfer per strided region; REF: one offset transfer per contiguous run); window-to-window
// copies inside the device; and ops on windows at an offset: in the device through the plugin's
// op windows (ABI 1.12: on OpenCL a sub-buffer at the multiple of the device's base alignment at
// or below the offset, plus the rest as a kernel argument; a moved address on REF).
#include "opencl/opencl_plugin_devices.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/memory/array_view.hpp>
#include <xdev/ops/ops.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

// Every op through the CPU fallback so far, whichever op.
std::uint64_t all_fallbacks() {
  std::uint64_t n = 0;
  for (const auto& [name, value] : xdev::metrics::snapshot())
    if (name.rfind("fallback.", 0) == 0) n += value;
  return n;
}

// Ops on rows of a [6, 64] float array (rows of 256 bytes, a multiple of PoCL's 128-byte base
// alignment): they run in the device, write their window and nothing around it. Then windows at
// element 1 (4 bytes in), which OpenCL cannot start a sub-buffer at: they run in the device too
// (OPENCL: a sub-buffer at the multiple below and the offset as a kernel argument; REF: a moved
// address), never through the CPU fallback.
void check_ops_on_windows(const xdev::AnyDevice& dev) {
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
  EXPECT_EQ(xdev::metrics::value("fallback.scale"), scales) << "a window at element 1 went through the fallback";
  std::fill(want.begin() + 5 * cols + 1, want.end(), -1.0f);
  dev.copy_to_host(f, std::span<float>(got)).get();
  EXPECT_EQ(got, want);
}

// Every op on windows that start between two multiples of the base alignment (elements 1, 3, 5,
// ... of an array), in place and out of place, against references computed here: each writes its
// window only, and with `in_device` runs there (no `fallback.*` counter moves; REF has no member
// for some of these ops, which then run through the fallback at any offset).
void check_ops_at_unaligned_offsets(const xdev::AnyDevice& dev, bool in_device) {
  SCOPED_TRACE(dev.name());
  namespace ops = xdev::ops;
  constexpr std::int64_t n = 100;
  std::vector<float> v(n);
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i % 7 - 3);
  auto x = xdev::empty<float>(dev, {n});
  dev.copy_to_device(std::span<const float>(v), x).get();
  const auto before = all_fallbacks();
  const auto window = [](xdev::AnyArray<float>& a, std::int64_t from, std::int64_t to) {
    return xdev::slice(a, {from, to});
  };
  const auto host = [&](const xdev::AnyArray<float>& a) {
    std::vector<float> h(static_cast<std::size_t>(a.size()));
    dev.copy_to_host(a, std::span<float>(h)).get();
    return h;
  };
  std::vector<float> want = v;

  ops::fill(dev, window(x, 1, 9), 5.0f).get();  // elements 1..8
  std::fill(want.begin() + 1, want.begin() + 9, 5.0f);
  ops::scale(dev, window(x, 3, 40), -2.0f).get();
  for (std::size_t i = 3; i < 40; ++i) want[i] *= -2.0f;
  ops::add(dev, window(x, 5, 25), window(x, 51, 71), window(x, 27, 47)).get();  // three offsets
  for (std::size_t i = 0; i < 20; ++i) want[27 + i] = want[5 + i] + want[51 + i];
  ops::mul(dev, window(x, 61, 81), window(x, 61, 81), window(x, 61, 81)).get();  // in place
  for (std::size_t i = 61; i < 81; ++i) want[i] *= want[i];
  ops::axpy(dev, 3.0f, window(x, 1, 11), window(x, 89, 99)).get();
  for (std::size_t i = 0; i < 10; ++i) want[89 + i] += 3.0f * want[1 + i];
  EXPECT_EQ(host(x), want);

  float sum = 0.0f, dot = 0.0f;
  for (std::size_t i = 7; i < 93; ++i) sum += want[i];
  for (std::size_t i = 0; i < 30; ++i) dot += want[3 + i] * want[65 + i];
  EXPECT_EQ(ops::sum(dev, xdev::slice(std::as_const(x), {7, 93})).get(), sum);
  EXPECT_EQ(ops::dot(dev, xdev::slice(std::as_const(x), {3, 33}), xdev::slice(std::as_const(x), {65, 95})).get(), dot);

  // Matrices at unaligned offsets: rows 1-3 of a [20, 5] array (element 5) times rows 3-7 of a
  // [10, 2] one (element 6), into rows 1-3 of another [10, 2] (element 2); that matrix's column
  // sums into a 1-D window at element 41; a gather from rows 2-6 of the [20, 5] array.
  auto m = xdev::empty<float>(dev, {20, 5});
  dev.copy_to_device(std::span<const float>(want), m).get();
  auto bm = xdev::empty<float>(dev, {10, 2});
  dev.copy_to_device(std::span<const float>(want).first(20), bm).get();
  auto c = xdev::empty<float>(dev, {10, 2});
  ops::fill(dev, c, 0.5f).get();
  std::vector<float> want_c(20, 0.5f);
  const auto cm = [&](std::size_t i, std::size_t j) { return want[i * 5 + j]; };
  ops::gemm(dev, xdev::slice(std::as_const(m), {1, 4}), xdev::slice(std::as_const(bm), {3, 8}), xdev::slice(c, {1, 4}))
      .get();
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 2; ++j) {
      float s = 0.0f;
      for (std::size_t k = 0; k < 5; ++k) s += cm(1 + i, k) * want[(3 + k) * 2 + j];
      want_c[(1 + i) * 2 + j] = s;
    }
  EXPECT_EQ(host(c), want_c) << "gemm";

  auto out = xdev::empty<float>(dev, {n});
  ops::fill(dev, out, 0.5f).get();
  std::vector<float> want_out(n, 0.5f);
  ops::sum(dev, xdev::slice(std::as_const(m), {1, 4}), 0, xdev::slice(out, {41, 46})).get();
  for (std::size_t j = 0; j < 5; ++j) want_out[41 + j] = cm(1, j) + cm(2, j) + cm(3, j);
  ops::convert(dev, xdev::slice(std::as_const(x), {9, 14}), xdev::slice(out, {61, 66})).get();  // one dtype: a copy
  for (std::size_t i = 0; i < 5; ++i) want_out[61 + i] = want[9 + i];
  ops::exp(dev, xdev::slice(std::as_const(x), {3, 6}), xdev::slice(out, {51, 54})).get();
  const auto got_out = host(out);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(got_out[51 + i], std::exp(want[3 + i]), 1e-5f * std::exp(want[3 + i])) << "exp " << i;
    want_out[51 + i] = got_out[51 + i];  // OpenCL's exp is within a few ulps
  }
  EXPECT_EQ(got_out, want_out) << "sum along an axis, convert, exp";

  auto h = xdev::empty<xdev::f16>(dev, {n});
  ops::fill(dev, h, xdev::f16(0.0f)).get();
  ops::convert(dev, xdev::slice(std::as_const(x), {1, 6}), xdev::slice(h, {3, 8})).get();
  std::vector<xdev::f16> got_h(n);
  dev.copy_to_host(h, std::span<xdev::f16>(got_h)).get();
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(static_cast<float>(got_h[3 + i]), want[1 + i]) << "f32 to f16 " << i;
  EXPECT_EQ(static_cast<float>(got_h[2]), 0.0f);
  EXPECT_EQ(static_cast<float>(got_h[8]), 0.0f);

  const std::vector<std::int32_t> idx{4, 0, 2, 2};
  auto index = xdev::empty<std::int32_t>(dev, {8});
  ops::fill(dev, index, std::int32_t{0}).get();
  dev.copy_to_device(std::span<const std::int32_t>(idx), xdev::slice(index, {3, 7})).get();
  auto g = xdev::empty<float>(dev, {10, 5});
  ops::fill(dev, g, 0.0f).get();
  ops::gather(dev, xdev::slice(std::as_const(m), {2, 7}), xdev::slice(std::as_const(index), {3, 7}),
              xdev::slice(g, {1, 5}))
      .get();
  std::vector<float> want_g(50, 0.0f);
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t j = 0; j < 5; ++j) want_g[(1 + r) * 5 + j] = cm(2 + static_cast<std::size_t>(idx[r]), j);
  EXPECT_EQ(host(g), want_g) << "gather";

  auto r = xdev::empty<float>(dev, {n});
  auto whole = xdev::empty<float>(dev, {10});
  ops::fill(dev, r, 9.0f).get();
  ops::rng_uniform(dev, xdev::slice(r, {7, 17}), {.seed = 42}).get();
  ops::rng_uniform(dev, whole, {.seed = 42}).get();
  const auto got_r = host(r), got_whole = host(whole);
  EXPECT_TRUE(std::equal(got_whole.begin(), got_whole.end(), got_r.begin() + 7));
  EXPECT_EQ(got_r[6], 9.0f);
  EXPECT_EQ(got_r[17], 9.0f);

  if (in_device) {
    EXPECT_EQ(all_fallbacks(), before) << "an op on a window at an unaligned offset went through the CPU fallback";
  }
}

TEST_F(PluginViews, OpsOnWindowsAtAnyOffsetRunInTheDeviceOnOpenCL) {
  check_ops_on_windows(devices.at(0));
  check_ops_at_unaligned_offsets(devices.at(0), true);
}

TEST_F(PluginViews, OpsOnWindowsAtAnyOffsetRunInTheDeviceOnTheReferencePlugin) {
  check_ops_on_windows(reg.devices("REF").at(0));
  check_ops_at_unaligned_offsets(reg.devices("REF").at(0), false);
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
