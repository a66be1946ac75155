/// \file
/// Part of xdev's op conformance suite (<xdev/testing/op_suite.hpp>): ops on windows of arrays
/// (`xdev::slice`). Include the suite's header, not this one.
#pragma once

#include <xdev/memory/array_view.hpp>
#include <xdev/testing/op_suite/common.hpp>

#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

namespace xdev::testing::op_suite {

// ---- windows --------------------------------------------------------------------------------

/// Ops on windows of a [6, 32] float array (rows of 128 bytes, so a row starts where OpenCL starts
/// a sub-buffer on PoCL), and on one at element 1 of a row, which no sub-buffer can start at.
/// Whichever way the backend runs them (its member on a moved handle or on a window it opened, or
/// the CPU fallback staging the window), each op reads and writes its window and nothing else.
XDEV_DEVICE_TEST_P(Ops, OpsOnWindowsTouchOnlyTheirWindow) {
  const auto dev = this->device();
  constexpr std::size_t rows = 6, cols = 32;
  std::vector<float> ref = small_ints<float>(rows * cols, 21);
  auto a = to_device(dev, sh(rows, cols), ref);
  auto at = [&](std::size_t r, std::size_t c) -> float& { return ref[r * cols + c]; };

  ops::scale(dev, xdev::slice(a, {1, 3}), 2.0f).get();
  for (std::size_t r = 1; r < 3; ++r)
    for (std::size_t c = 0; c < cols; ++c) at(r, c) *= 2.0f;
  ops::add(dev, xdev::slice(a, {0, 1}), xdev::slice(a, {1, 2}), xdev::slice(a, {4, 5})).get();
  for (std::size_t c = 0; c < cols; ++c) at(4, c) = at(0, c) + at(1, c);
  ops::axpy(dev, -3.0f, xdev::slice(a, {2, 3}, {1, cols}), xdev::slice(a, {5, 6}, {1, cols})).get();
  for (std::size_t c = 1; c < cols; ++c) at(5, c) += -3.0f * at(2, c);
  EXPECT_TRUE(same_bits(to_host(a), ref));

  float sum = 0.0f, dot = 0.0f;
  for (std::size_t c = 0; c < cols; ++c) sum += at(2, c) + at(3, c);
  for (std::size_t c = 1; c < cols; ++c) dot += at(4, c) * at(5, c);
  EXPECT_EQ(ops::sum(dev, xdev::slice(std::as_const(a), {2, 4})).get(), sum);  // small integers: exact
  EXPECT_EQ(
      ops::dot(dev, xdev::slice(std::as_const(a), {4, 5}, {1, cols}), xdev::slice(std::as_const(a), {5, 6}, {1, cols}))
          .get(),
      dot);

  // c[2:4, :] = a[1:3, :] x b, with c's other rows kept.
  const std::vector<float> bv = small_ints<float>(cols * 4, 22);
  auto b = to_device(dev, sh(cols, 4), bv);
  std::vector<float> cref(8 * 4, 5.0f);
  auto c = to_device(dev, sh(8, 4), cref);
  ops::gemm(dev, xdev::slice(std::as_const(a), {1, 3}), b, xdev::slice(c, {2, 4})).get();
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      float s = 0.0f;
      for (std::size_t k = 0; k < cols; ++k) s += at(1 + i, k) * bv[k * 4 + j];
      cref[(2 + i) * 4 + j] = s;
    }
  EXPECT_TRUE(same_bits(to_host(c), cref));
  EXPECT_TRUE(same_bits(to_host(a), ref)) << "the inputs of sum, dot and gemm must not change";
}

/// Transfers of windows and copies between them (docs/views.md) on a [3, 4, 8] float array: a box
/// (a strided region of 2 slices of 2 rows) to and from the host, one element of every row, a copy
/// between windows of one array whose rows interleave, one into a window of another array, and,
/// with a second device, one into a window there. Whichever way the backend moves them (its
/// strided hooks, `concepts::StridedTransfers` / `concepts::StridedCopies`, or one transfer per
/// row), each moves its window's elements in row-major order and touches nothing else.
XDEV_DEVICE_TEST_P(Ops, WindowsTransferAndCopyExactlyTheirElements) {
  const auto dev = this->device();
  constexpr std::size_t n0 = 3, n1 = 4, n2 = 8;
  const xdev::Shape shape{std::int64_t{n0}, std::int64_t{n1}, std::int64_t{n2}};
  std::vector<float> ref(n0 * n1 * n2);
  std::iota(ref.begin(), ref.end(), 1.0f);
  auto a = to_device(dev, shape, ref);
  auto at = [&](std::size_t i, std::size_t j, std::size_t k) -> float& { return ref[(i * n1 + j) * n2 + k]; };
  const auto& ca = std::as_const(a);

  std::vector<float> box(2 * 2 * 5, -1.0f), want;
  for (std::size_t i = 1; i < 3; ++i)
    for (std::size_t j = 1; j < 3; ++j)
      for (std::size_t k = 2; k < 7; ++k) want.push_back(at(i, j, k));
  dev.copy_to_host(xdev::slice(ca, {1, 3}, {1, 3}, {2, 7}), std::span<float>(box)).get();
  EXPECT_TRUE(same_bits(box, want)) << "a[1:3, 1:3, 2:7] to the host";

  std::vector<float> column(n0 * n1, -1.0f);
  want.clear();
  for (std::size_t i = 0; i < n0; ++i)
    for (std::size_t j = 0; j < n1; ++j) want.push_back(at(i, j, 5));
  dev.copy_to_host(xdev::slice(ca, xdev::all, xdev::all, {5, 6}), std::span<float>(column)).get();
  EXPECT_TRUE(same_bits(column, want)) << "a[:, :, 5] to the host";

  std::vector<float> in(2 * 2 * 5);
  std::iota(in.begin(), in.end(), 1000.0f);
  dev.copy_to_device(std::span<const float>(in), xdev::slice(a, {0, 2}, {2, 4}, {1, 6})).get();
  for (std::size_t i = 0, v = 0; i < 2; ++i)
    for (std::size_t j = 2; j < 4; ++j)
      for (std::size_t k = 1; k < 6; ++k) at(i, j, k) = in[v++];
  EXPECT_TRUE(same_bits(to_host(a), ref)) << "the host into a[0:2, 2:4, 1:6]";

  dev.copy(xdev::slice(ca, xdev::all, {0, 1}, {0, 6}), xdev::slice(a, xdev::all, {3, 4}, {2, 8})).get();
  for (std::size_t i = 0; i < n0; ++i)
    for (std::size_t k = 0; k < 6; ++k) at(i, 3, 2 + k) = at(i, 0, k);
  EXPECT_TRUE(same_bits(to_host(a), ref)) << "a[:, 0, 0:6] into a[:, 3, 2:8]";

  std::vector<float> bref(n0 * n1 * 4, 0.5f);
  auto b = to_device(dev, xdev::Shape{std::int64_t{n0}, std::int64_t{n1}, 4}, bref);
  dev.copy(xdev::slice(ca, {0, 2}, xdev::all, {4, 8}), xdev::slice(b, {1, 3})).get();
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < n1; ++j)
      for (std::size_t k = 0; k < 4; ++k) bref[((1 + i) * n1 + j) * 4 + k] = at(i, j, 4 + k);
  EXPECT_TRUE(same_bits(to_host(b), bref)) << "a[0:2, :, 4:8] into b[1:3]";
  EXPECT_TRUE(same_bits(to_host(a), ref)) << "the source of the copies must not change";

  if (this->device_count() < 2) return;
  const auto d1 = this->device(1);
  std::vector<float> cref(n0 * n1 * n2, 0.25f);
  auto c = to_device(d1, shape, cref);
  dev.copy(xdev::slice(ca, {1, 3}, {0, 3}, {2, 5}), xdev::slice(c, {0, 2}, {1, 4}, {5, 8})).get();
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 3; ++k) cref[(i * n1 + 1 + j) * n2 + 5 + k] = at(1 + i, j, 2 + k);
  EXPECT_TRUE(same_bits(to_host(c), cref)) << "a[1:3, 0:3, 2:5] into c[0:2, 1:4, 5:8] on the second device";
}

}  // namespace xdev::testing::op_suite
