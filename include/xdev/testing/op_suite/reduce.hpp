/// \file
/// Part of xdev's op conformance suite (<xdev/testing/op_suite.hpp>): the reductions (sum, sum along an axis, dot).
/// Include the suite's header, not this one.
#pragma once

#include <xdev/testing/op_suite/common.hpp>

namespace xdev::testing::op_suite {

// ---- reductions -----------------------------------------------------------------------------

template <class T, class Dev>
void check_sum_exact(const Dev& dev) {
  for (std::size_t n : {0u, 1u, 17u, 1000u, 16385u, 100003u}) {
    const auto v = small_ints<T>(n, static_cast<unsigned>(n));
    double exact = 0;
    for (T x : v) exact += static_cast<double>(x);
    auto x = to_device(dev, sh(n), v);
    EXPECT_EQ(ops::sum(dev, x).get(), static_cast<T>(exact)) << "n = " << n;
  }
}

XDEV_DEVICE_TEST_P(Ops, SumOfIntegersIsExact) {
  check_sum_exact<float>(this->device());
  check_sum_exact<double>(this->device());
}

// The pairwise sum's accuracy: a running f32 sum of 10^7 times 0.1f is off by about 9%.
XDEV_DEVICE_TEST_P(Ops, SumOfTenMillionTenthsIsAccurate) {
  const auto dev = this->device();
  constexpr std::size_t n = 10'000'000;
  auto x = empty<float>(dev, sh(n));
  ops::fill(dev, x, 0.1f).get();
  const double exact = static_cast<double>(n) * static_cast<double>(0.1f);
  const float got = ops::sum(dev, x).get();
  EXPECT_LT(std::fabs(static_cast<double>(got) - exact) / exact, 1e-6) << "sum = " << got << ", exact = " << exact;
}

template <class T, class Dev>
void check_sum_axes(const Dev& dev, std::vector<std::int64_t> dims) {
  ASSERT_EQ(dims.size(), 3u);
  const auto d0 = static_cast<std::size_t>(dims[0]), d1 = static_cast<std::size_t>(dims[1]),
             d2 = static_cast<std::size_t>(dims[2]);
  const auto v = small_ints<T>(d0 * d1 * d2, 8, 100);
  auto x = to_device(dev, {dims[0], dims[1], dims[2]}, v);
  auto at = [&](std::size_t i, std::size_t j, std::size_t k) { return v[(i * d1 + j) * d2 + k]; };
  for (std::ptrdiff_t axis : {0, 1, 2, -1, -2, -3}) {
    const std::size_t ax = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
    std::vector<std::int64_t> out_dims;
    for (std::size_t i = 0; i < 3; ++i)
      if (i != ax) out_dims.push_back(dims[i]);
    std::vector<T> ref(v.size() / (ax == 0 ? d0 : ax == 1 ? d1 : d2), T(0));
    for (std::size_t i = 0; i < d0; ++i)
      for (std::size_t j = 0; j < d1; ++j)
        for (std::size_t k = 0; k < d2; ++k)
          ref[ax == 0 ? j * d2 + k : ax == 1 ? i * d2 + k : i * d1 + j] += at(i, j, k);  // (i, j, k) without `ax`
    auto out = to_device(dev, xdev::Shape(std::span<const std::int64_t>(out_dims)), std::vector<T>(ref.size(), T(-1)));
    ops::sum(dev, x, axis, out).get();
    EXPECT_TRUE(same_values(to_host(out), ref)) << "shape " << to_string(x.shape()) << ", axis " << axis;
  }
}

XDEV_DEVICE_TEST_P(Ops, SumAlongEachAxis) {
  const auto dev = this->device();
  check_sum_axes<float>(dev, {3, 4, 5});
  check_sum_axes<double>(dev, {3, 4, 5});
  check_sum_axes<float>(dev, {2, 37, 3});    // more rows than one pairwise leaf
  check_sum_axes<double>(dev, {4, 1, 300});  // a unit axis, and a wide inner dimension
  check_sum_axes<float>(dev, {1, 1000, 1});
}

XDEV_DEVICE_TEST_P(Ops, SumAlongTheOnlyAxisGivesAScalarArray) {
  const auto dev = this->device();
  auto x = to_device(dev, sh(5), std::vector<double>{1, 2, 3, 4, 5.5});
  auto out = to_device(dev, xdev::Shape{}, std::vector<double>{0});
  ops::sum(dev, x, -1, out).get();
  EXPECT_EQ(to_host(out), std::vector<double>{15.5});
}

XDEV_DEVICE_TEST_P(Ops, SumAxisErrorsNameTheShapes) {
  const auto dev = this->device();
  auto x = to_device(dev, {3, 4, 5}, std::vector<float>(60, 1.0f));
  auto out = to_device(dev, {5, 3}, std::vector<float>(15, 7.0f));
  dev.synchronize();
  const auto before = dev.execution_stats().submitted;
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::sum(dev, x, 1, out); },
               {"sum", "out has shape [5, 3]", "[3, 4, 5]", "axis 1", "[3, 5]"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::sum(dev, x, 3, out); },
               {"sum", "axis 3 is out of range", "[3, 4, 5]"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::sum(dev, x, -4, out); }, {"axis -4"});
  EXPECT_EQ(dev.execution_stats().submitted, before);
  EXPECT_TRUE(same_bits(to_host(out), std::vector<float>(15, 7.0f)));
}

template <class T, class Dev>
void check_dot(const Dev& dev) {
  for (std::size_t n : {0u, 1u, 3u, 1000u, 70001u}) {
    // Integers: exact in any order.
    const auto xi = small_ints<T>(n, 9), yi = small_ints<T>(n, 10);
    double exact = 0;
    for (std::size_t i = 0; i < n; ++i) exact += static_cast<double>(xi[i]) * static_cast<double>(yi[i]);
    auto dxi = to_device(dev, sh(n), xi);
    auto dyi = to_device(dev, sh(n), yi);
    EXPECT_EQ(ops::dot(dev, dxi, dyi).get(), static_cast<T>(exact)) << "n = " << n;

    // Full mantissas: within the pairwise error bound (32 + log2 n) eps * sum |x y|.
    const auto x = noise<T>(n, 11), y = noise<T>(n, 12);
    double ref = 0, mag = 0;
    for (std::size_t i = 0; i < n; ++i) {
      ref += static_cast<double>(x[i]) * static_cast<double>(y[i]);
      mag += std::fabs(static_cast<double>(x[i]) * static_cast<double>(y[i]));
    }
    auto dx = to_device(dev, sh(n), x);
    auto dy = to_device(dev, sh(n), y);
    const double tol = (32 + std::log2(static_cast<double>(n) + 1)) * std::numeric_limits<T>::epsilon() * mag;
    EXPECT_NEAR(static_cast<double>(ops::dot(dev, dx, dy).get()), ref, tol) << "n = " << n;
  }
}

XDEV_DEVICE_TEST_P(Ops, Dot) {
  check_dot<float>(this->device());
  check_dot<double>(this->device());
}

}  // namespace xdev::testing::op_suite
