/// \file
/// Part of xdev's op conformance suite (<xdev/testing/op_suite.hpp>): the Autocast policy. Include the
/// suite's header, not this one.
#pragma once

#include <xdev/testing/op_suite/common.hpp>

namespace xdev::testing::op_suite {

// ---- autocast -------------------------------------------------------------------------------

// Inputs whose rounding to f16 or bf16 is a multiple of 1/16 in [1, 2) (5 significant bits), with
// low mantissa bits that the rounding drops: every product of two rounded inputs (10 bits) and
// every partial sum of up to a few thousand of them is exact in f32, so the reference below (inputs
// rounded with xdev::to_bf16 / to_f16, accumulation in f32) matches bit for bit whatever order the
// device adds in. Without rounding, the dropped bits change the result.
inline std::vector<float> autocast_inputs(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<float> v(n);
  for (auto& x : v) {
    const float m = static_cast<float>(16 + g() % 16) / 16.0f;
    const float low = static_cast<float>(1 + g() % 1023) * 0x1p-22f;  // < 2^-12: below half an f16 ulp
    x = (g() % 2 ? -1.0f : 1.0f) * (m + low);
  }
  return v;
}

inline float round_to(xdev::DType t, float x) {
  return t == xdev::DType::bf16 ? xdev::to_float(xdev::to_bf16(x)) : xdev::to_float(xdev::to_f16(x));
}

// op(A) op(B) with inputs optionally rounded to `t`, accumulated in f32 in index order.
inline std::vector<float> gemm_reference(const std::vector<float>& a, const std::vector<float>& b, std::size_t m,
                                         std::size_t n, std::size_t k, std::optional<xdev::DType> t) {
  std::vector<float> c(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      float acc = 0;
      for (std::size_t p = 0; p < k; ++p)
        acc += (t ? round_to(*t, a[i * k + p]) : a[i * k + p]) * (t ? round_to(*t, b[p * n + j]) : b[p * n + j]);
      c[i * n + j] = acc;
    }
  return c;
}

XDEV_DEVICE_TEST_P(Ops, AutocastRoundsMatrixInputsOnlyInsideAMatchingScope) {
  const auto caps = capabilities_of(this->device());
  if (!this->require(caps.autocast_key != xdev::AutocastKey::none && caps.autocast_dtype != xdev::DType::f32,
                     TypeParam::name() + " has no Autocast policy (autocast key none)"))
    return;
  const auto key = caps.autocast_key;
  const auto other = key == xdev::AutocastKey::npu ? xdev::AutocastKey::cuda : xdev::AutocastKey::npu;
  const auto dev = this->device();
  constexpr std::size_t m = 9, n = 7, k = 200;
  const auto a = autocast_inputs(m * k, 21), b = autocast_inputs(k * n, 22);
  auto da = to_device(dev, sh(m, k), a);
  auto db = to_device(dev, sh(k, n), b);
  auto dc = empty<float>(dev, sh(m, n));
  auto x = to_device(dev, sh(k), std::vector<float>(a.begin(), a.begin() + k));
  auto y = to_device(dev, sh(k), std::vector<float>(b.begin(), b.begin() + k));
  const auto rounded = gemm_reference(a, b, m, n, k, caps.autocast_dtype);
  const auto rounded_dot =
      gemm_reference(std::vector<float>(a.begin(), a.begin() + k), std::vector<float>(b.begin(), b.begin() + k), 1, 1,
                     k, caps.autocast_dtype)[0];
  auto gemm = [&] {
    ops::gemm(dev, da, db, dc).get();
    return to_host(dc);
  };
  auto dot = [&] { return ops::dot(dev, x, y).get(); };
  auto expect_rounded = [&](const char* where) {
    EXPECT_TRUE(same_bits(gemm(), rounded)) << "gemm " << where;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(dot()), std::bit_cast<std::uint32_t>(rounded_dot)) << "dot " << where;
  };
  auto expect_full = [&](const char* where) {
    const auto c = gemm();
    const auto full = gemm_reference(a, b, m, n, k, std::nullopt);
    std::size_t same_as_rounded = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      same_as_rounded += c[i] == rounded[i];
      EXPECT_NEAR(c[i], full[i], 1e-4f * static_cast<float>(k) * 4) << "gemm " << where << " at " << i;
    }
    EXPECT_EQ(same_as_rounded, 0u) << "gemm " << where << " must use the inputs at full precision";
    EXPECT_NE(dot(), rounded_dot) << "dot " << where;
  };

  expect_full("outside any scope");
  {
    xdev::AutocastScope on(key);
    expect_rounded("inside a scope");
    {
      xdev::AutocastScope off(key, false);
      expect_full("inside a disabling scope");
      {
        xdev::AutocastScope again(key);
        expect_rounded("inside a scope nested in a disabling one");
      }
      expect_full("after the nested scope closed");
    }
    expect_rounded("after the disabling scope closed");

    // f64 matrix ops are never autocast.
    const std::vector<double> a64(a.begin(), a.end()), b64(b.begin(), b.end());
    auto da64 = to_device(dev, sh(m, k), a64);
    auto db64 = to_device(dev, sh(k, n), b64);
    auto dc64 = empty<double>(dev, sh(m, n));
    ops::gemm(dev, da64, db64, dc64).get();
    const auto c64 = to_host(dc64);
    EXPECT_NEAR(c64[0], static_cast<double>(gemm_reference(a, b, m, n, k, std::nullopt)[0]), 1e-3);
    EXPECT_NE(static_cast<float>(c64[0]), rounded[0]);
  }
  expect_full("after every scope closed");
  {
    xdev::AutocastScope unrelated(other);
    expect_full("inside a scope for another key");
  }
}

// Inputs with full mantissas: inside the scope the result is the rounded-input product within the
// f32 accumulation error (k + 2) eps sum |a~ b~|, since only the order of the additions may differ.
XDEV_DEVICE_TEST_P(Ops, AutocastAccumulatesInF32) {
  const auto caps = capabilities_of(this->device());
  if (!this->require(caps.autocast_key != xdev::AutocastKey::none && caps.autocast_dtype != xdev::DType::f32,
                     TypeParam::name() + " has no Autocast policy (autocast key none)"))
    return;
  const auto dev = this->device();
  constexpr std::size_t m = 16, n = 40, k = 333;
  const auto a = noise<float>(m * k, 23), b = noise<float>(k * n, 24);
  auto da = to_device(dev, sh(m, k), a);
  auto db = to_device(dev, sh(k, n), b);
  auto dc = empty<float>(dev, sh(m, n));
  {
    xdev::AutocastScope on(caps.autocast_key);
    ops::gemm(dev, da, db, dc).get();
  }
  const auto c = to_host(dc);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (std::size_t p = 0; p < k; ++p) {
        const double prod = static_cast<double>(round_to(caps.autocast_dtype, a[i * k + p])) *
                            static_cast<double>(round_to(caps.autocast_dtype, b[p * n + j]));
        ref += prod;
        mag += std::fabs(prod);
      }
      ASSERT_NEAR(static_cast<double>(c[i * n + j]), ref, (k + 2) * 0x1p-24 * mag) << i << ", " << j;
    }
}

}  // namespace xdev::testing::op_suite
