/// \file
/// Part of xdev's op conformance suite (<xdev/testing/op_suite.hpp>): ops on windows of arrays
/// (`xdev::slice`). Include the suite's header, not this one.
#pragma once

#include <xdev/memory/array_view.hpp>
#include <xdev/testing/op_suite/common.hpp>

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

}  // namespace xdev::testing::op_suite
