/// \file
/// Part of xdev's op conformance suite (<xdev/testing/op_suite.hpp>): gemm. Include the
/// suite's header, not this one.
#pragma once

#include <xdev/testing/op_suite/common.hpp>

namespace xdev::testing::op_suite {

// ---- gemm -----------------------------------------------------------------------------------

struct GemmCase {
  std::size_t m, n, k;
};

// C = alpha op(A) op(B) + beta C on small integers: every result is exact, so the comparison is by
// value (only the sign of a zero may depend on the order of the additions). With `nan_c`, C starts
// as NaN (beta must then be 0: C is not read).
template <class T, class Dev>
void check_gemm_exact(const Dev& dev, GemmCase g, bool ta, bool tb, T alpha, T beta, bool nan_c) {
  const auto a = small_ints<T>(g.m * g.k, 13), b = small_ints<T>(g.k * g.n, 14);
  const auto c0 = nan_c ? std::vector<T>(g.m * g.n, std::numeric_limits<T>::quiet_NaN()) : small_ints<T>(g.m * g.n, 15);
  auto A = [&](std::size_t i, std::size_t p) { return static_cast<double>(ta ? a[p * g.m + i] : a[i * g.k + p]); };
  auto Bm = [&](std::size_t p, std::size_t j) { return static_cast<double>(tb ? b[j * g.k + p] : b[p * g.n + j]); };
  std::vector<T> ref(g.m * g.n);
  for (std::size_t i = 0; i < g.m; ++i)
    for (std::size_t j = 0; j < g.n; ++j) {
      double acc = 0;
      for (std::size_t p = 0; p < g.k; ++p) acc += A(i, p) * Bm(p, j);
      double r = static_cast<double>(alpha) * acc;
      if (beta != T(0)) r += static_cast<double>(beta) * static_cast<double>(c0[i * g.n + j]);
      ref[i * g.n + j] = static_cast<T>(r);
    }
  auto da = to_device(dev, ta ? sh(g.k, g.m) : sh(g.m, g.k), a);
  auto db = to_device(dev, tb ? sh(g.n, g.k) : sh(g.k, g.n), b);
  auto dc = to_device(dev, sh(g.m, g.n), c0);
  ops::gemm(dev, da, db, dc, {.trans_a = ta, .trans_b = tb, .alpha = alpha, .beta = beta}).get();
  EXPECT_TRUE(same_values(to_host(dc), ref))
      << "m=" << g.m << " n=" << g.n << " k=" << g.k << " trans_a=" << ta << " trans_b=" << tb << " alpha=" << alpha
      << " beta=" << beta << (nan_c ? " (C filled with NaN)" : "");
}

template <class T, class Dev>
void check_gemm_all(const Dev& dev) {
  const GemmCase cases[] = {{1, 1, 1}, {1, 7, 3}, {5, 1, 9}, {7, 5, 3}, {13, 17, 11}, {37, 70, 300}};
  struct AlphaBeta {
    T alpha, beta;
    bool nan_c;
  };
  const AlphaBeta abs[] = {{T(1), T(0), false}, {T(1.5), T(0), true}, {T(-1), T(1), false}, {T(0.5), T(-2), false}};
  for (const auto& g : cases)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (const auto& ab : abs) check_gemm_exact<T>(dev, g, ta, tb, ab.alpha, ab.beta, ab.nan_c);
}

XDEV_DEVICE_TEST_P(Ops, GemmAllTransposesAndScalarsF32) {
  check_gemm_all<float>(this->device());
}

XDEV_DEVICE_TEST_P(Ops, GemmAllTransposesAndScalarsF64) {
  check_gemm_all<double>(this->device());
}

// Full mantissas, within the error bound of a length-k dot product: (k + 4) eps (|alpha| sum |a b| + |beta c|).
template <class T, class Dev>
void check_gemm_noise(const Dev& dev, GemmCase g, bool ta, bool tb) {
  const T alpha = T(0.7), beta = T(-1.3);
  const auto a = noise<T>(g.m * g.k, 16), b = noise<T>(g.k * g.n, 17), c0 = noise<T>(g.m * g.n, 18);
  auto da = to_device(dev, ta ? sh(g.k, g.m) : sh(g.m, g.k), a);
  auto db = to_device(dev, tb ? sh(g.n, g.k) : sh(g.k, g.n), b);
  auto dc = to_device(dev, sh(g.m, g.n), c0);
  ops::gemm(dev, da, db, dc, {.trans_a = ta, .trans_b = tb, .alpha = alpha, .beta = beta}).get();
  const auto c = to_host(dc);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < g.m; ++i)
    for (std::size_t j = 0; j < g.n; ++j) {
      double acc = 0, mag = 0;
      for (std::size_t p = 0; p < g.k; ++p) {
        const double prod = static_cast<double>(ta ? a[p * g.m + i] : a[i * g.k + p]) *
                            static_cast<double>(tb ? b[j * g.k + p] : b[p * g.n + j]);
        acc += prod;
        mag += std::fabs(prod);
      }
      const double ref =
          static_cast<double>(alpha) * acc + static_cast<double>(beta) * static_cast<double>(c0[i * g.n + j]);
      const double tol = static_cast<double>(g.k + 4) * std::numeric_limits<T>::epsilon() *
                         (std::fabs(static_cast<double>(alpha)) * mag +
                          std::fabs(static_cast<double>(beta) * static_cast<double>(c0[i * g.n + j])));
      if (!(std::fabs(static_cast<double>(c[i * g.n + j]) - ref) <= tol) && bad++ < 3)
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << c[i * g.n + j] << ", expected " << ref << " +- " << tol;
    }
  EXPECT_EQ(bad, 0u) << "m=" << g.m << " n=" << g.n << " k=" << g.k << " trans_a=" << ta << " trans_b=" << tb;
}

XDEV_DEVICE_TEST_P(Ops, GemmFullMantissasWithinTheErrorBound) {
  const auto dev = this->device();
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_gemm_noise<float>(dev, {64, 33, 129}, ta, tb);
      check_gemm_noise<double>(dev, {29, 65, 257}, ta, tb);
    }
}

XDEV_DEVICE_TEST_P(Ops, GemmWithAlphaZeroOrEmptyDepthOnlyScalesC) {
  const auto dev = this->device();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto a = to_device(dev, {3, 4}, std::vector<float>(12, nan));  // not read when alpha == 0
  auto b = to_device(dev, {4, 2}, std::vector<float>(8, nan));
  auto c = to_device(dev, {3, 2}, std::vector<float>{1, 2, 3, 4, 5, 6});
  ops::gemm(dev, a, b, c, {.alpha = 0.0f, .beta = 2.0f}).get();
  EXPECT_EQ(to_host(c), (std::vector<float>{2, 4, 6, 8, 10, 12}));

  auto a0 = empty<float>(dev, {3, 0});
  auto b0 = empty<float>(dev, {0, 2});
  ops::gemm(dev, a0, b0, c, {.beta = 0.5f}).get();  // k == 0: C = beta C
  EXPECT_EQ(to_host(c), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  auto cn = to_device(dev, {3, 2}, std::vector<float>(6, nan));
  ops::gemm(dev, a0, b0, cn).get();  // beta == 0: C = 0, NaNs gone
  EXPECT_EQ(to_host(cn), std::vector<float>(6, 0.0f));
}

XDEV_DEVICE_TEST_P(Ops, GemmShapeErrorsNameTheShapes) {
  const auto dev = this->device();
  auto a = to_device(dev, {2, 3}, std::vector<double>(6, 1.0));
  auto b = to_device(dev, {2, 3}, std::vector<double>(6, 1.0));
  auto c = to_device(dev, {2, 2}, std::vector<double>(4, 7.0));
  auto v = to_device(dev, sh(4), std::vector<double>(4, 7.0));
  auto c3 = to_device(dev, {3, 3}, std::vector<double>(9, 7.0));
  dev.synchronize();
  const auto before = dev.execution_stats().submitted;
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::gemm(dev, a, b, c); },
               {"gemm", "inner dimensions differ", "[2, 3]"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::gemm(dev, a, b, c, {.trans_a = true, .trans_b = true}); },
               {"op(a) is [3, 2] but op(b) is [3, 2]", "(a [2, 3], b [2, 3])"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::gemm(dev, a, b, v, {.trans_b = true}); },
               {"c must be 2-D", "[4]"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::gemm(dev, a, b, c3, {.trans_b = true}); },
               {"c has shape [3, 3]", "[2, 2]"});
  EXPECT_EQ(dev.execution_stats().submitted, before);
  EXPECT_TRUE(same_bits(to_host(c), std::vector<double>(4, 7.0)));
  EXPECT_TRUE(same_bits(to_host(c3), std::vector<double>(9, 7.0)));
}

}  // namespace xdev::testing::op_suite
