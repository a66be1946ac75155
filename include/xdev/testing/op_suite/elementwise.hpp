/// \file
/// Part of xdev's op conformance suite (<xdev/testing/op_suite.hpp>): the element-wise ops (fill, scale, axpy, add,
/// mul, minimum, maximum, combine, exp, copy) and streams. Include the suite's header, not this one.
#pragma once

#include <xdev/testing/op_suite/common.hpp>

namespace xdev::testing::op_suite {

// ---- element-wise ---------------------------------------------------------------------------

template <class T, class Dev>
void check_fill(const Dev& dev, T value) {
  for (std::size_t n : {0u, 1u, 1000u, 70001u}) {
    auto x = to_device(dev, sh(n), std::vector<T>(n, T{}));
    ops::fill(dev, x, value).get();
    EXPECT_TRUE(same_bits(to_host(x), std::vector<T>(n, value))) << "n = " << n;
  }
}

XDEV_DEVICE_TEST_P(Ops, Fill) {
  const auto dev = this->device();
  check_fill(dev, 1.5f);
  check_fill(dev, -0.0f);
  check_fill(dev, std::bit_cast<float>(0x7FC0BEEFu));  // a NaN with a payload, kept bit for bit
  check_fill(dev, -2.25);
  check_fill(dev, std::int32_t{-7});
  check_fill(dev, std::int64_t{1} << 40);
  check_fill(dev, std::uint8_t{200});
  check_fill(dev, xdev::f16(-0.5f));
  check_fill(dev, xdev::bf16(3.0f));
}

template <class T, class Dev>
void check_scale(const Dev& dev, T alpha) {
  for (std::size_t n : {1u, 999u, 70001u}) {
    const auto v = noise<T>(n, 1);
    auto x = to_device(dev, sh(n), v);
    ops::scale(dev, x, alpha).get();
    std::vector<T> ref(v);
    for (auto& e : ref) e = e * alpha;
    EXPECT_TRUE(same_bits(to_host(x), ref)) << "n = " << n << ", alpha = " << alpha;
  }
}

XDEV_DEVICE_TEST_P(Ops, Scale) {
  const auto dev = this->device();
  check_scale(dev, 3.1f);
  check_scale(dev, 0.0f);  // negative elements become -0.0
  check_scale(dev, -0.7);
}

template <class T, class Dev>
void check_axpy(const Dev& dev, T alpha) {
  for (std::size_t n : {1u, 999u, 70001u}) {
    const auto x = grid<T>(n, 2), y = grid<T>(n, 3);
    auto dx = to_device(dev, sh(n), x);
    auto dy = to_device(dev, sh(n), y);
    ops::axpy(dev, alpha, dx, dy).get();
    std::vector<T> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = y[i] + alpha * x[i];
    EXPECT_TRUE(same_bits(to_host(dy), ref)) << "n = " << n;
    EXPECT_TRUE(same_bits(to_host(dx), x)) << "x must not change";
  }
}

XDEV_DEVICE_TEST_P(Ops, Axpy) {
  const auto dev = this->device();
  check_axpy(dev, -1.75f);  // 3 significant bits: alpha * x is exact, only the sum rounds
  check_axpy(dev, 0.625);
}

template <class T, class Dev>
void check_binary(const Dev& dev) {
  for (std::size_t n : {1u, 17u, 70001u}) {
    const auto a = noise<T>(n, 4), b = noise<T>(n, 5);
    auto da = to_device(dev, sh(n), a);
    auto db = to_device(dev, sh(n), b);
    auto out = to_device(dev, sh(n), std::vector<T>(n, T(7)));
    std::vector<T> sum(n), prod(n);
    for (std::size_t i = 0; i < n; ++i) {
      sum[i] = a[i] + b[i];
      prod[i] = a[i] * b[i];
    }
    ops::add(dev, da, db, out).get();
    EXPECT_TRUE(same_bits(to_host(out), sum)) << "add, n = " << n;
    ops::mul(dev, da, db, out).get();
    EXPECT_TRUE(same_bits(to_host(out), prod)) << "mul, n = " << n;
    EXPECT_TRUE(same_bits(to_host(da), a));
    EXPECT_TRUE(same_bits(to_host(db), b));

    ops::mul(dev, da, db, da).get();  // out aliases a
    EXPECT_TRUE(same_bits(to_host(da), prod)) << "mul into a, n = " << n;
    ops::add(dev, da, db, db).get();  // out aliases b: b = a * b + b
    std::vector<T> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = prod[i] + b[i];
    EXPECT_TRUE(same_bits(to_host(db), ref)) << "add into b, n = " << n;
  }
}

XDEV_DEVICE_TEST_P(Ops, AddAndMul) {
  check_binary<float>(this->device());
  check_binary<double>(this->device());
}

// minimum and maximum select, they do not round: bit-exact against `(b < a) ? b : a` and
// `(a < b) ? b : a`, with negative values, ties (equal values, and -0.0 against +0.0, where `a`
// wins), and NaNs (one in `a` propagates, one in `b` does not).
template <class T, class Dev>
void check_min_max(const Dev& dev) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (std::size_t n : {1u, 17u, 70001u}) {
    auto a = noise<T>(n, 6), b = noise<T>(n, 7);
    for (std::size_t i = 0; i < n; ++i) {
      switch (i % 16) {
        case 3:
          b[i] = a[i];  // equal
          break;
        case 5:
          a[i] = T(-0.0);
          b[i] = T(0.0);
          break;
        case 7:
          a[i] = T(0.0);
          b[i] = T(-0.0);
          break;
        case 9:
          a[i] = -std::numeric_limits<T>::infinity();
          break;
        case 11:
          a[i] = nan;
          break;
        case 13:
          b[i] = nan;
          break;
        default:
          break;
      }
    }
    if (n == 1) a[0] = nan;  // the NaN in `a` is checked at every size
    std::vector<T> lo(n), hi(n);
    for (std::size_t i = 0; i < n; ++i) {
      lo[i] = (b[i] < a[i]) ? b[i] : a[i];
      hi[i] = (a[i] < b[i]) ? b[i] : a[i];
    }
    auto da = to_device(dev, sh(n), a);
    auto db = to_device(dev, sh(n), b);
    auto out = to_device(dev, sh(n), std::vector<T>(n, T(7)));
    ops::minimum(dev, da, db, out).get();
    const auto got_lo = to_host(out);
    EXPECT_TRUE(same_bits(got_lo, lo)) << "minimum, n = " << n;
    EXPECT_TRUE(std::isnan(got_lo[n == 1 ? 0 : 11])) << "a NaN in a must propagate, n = " << n;
    ops::maximum(dev, da, db, out).get();
    const auto got_hi = to_host(out);
    EXPECT_TRUE(same_bits(got_hi, hi)) << "maximum, n = " << n;
    EXPECT_TRUE(std::isnan(got_hi[n == 1 ? 0 : 11])) << "a NaN in a must propagate, n = " << n;
    if (n > 13) {
      EXPECT_TRUE(std::signbit(got_lo[5]) && std::signbit(got_hi[5])) << "minimum/maximum(-0.0, +0.0) is a";
      EXPECT_TRUE(!std::signbit(got_lo[7]) && !std::signbit(got_hi[7])) << "minimum/maximum(+0.0, -0.0) is a";
      EXPECT_EQ(got_lo[13], a[13]) << "a NaN in b does not propagate";
      EXPECT_EQ(got_hi[13], a[13]) << "a NaN in b does not propagate";
    }
    EXPECT_TRUE(same_bits(to_host(da), a));
    EXPECT_TRUE(same_bits(to_host(db), b));

    ops::minimum(dev, da, db, da).get();  // out aliases a
    EXPECT_TRUE(same_bits(to_host(da), lo)) << "minimum into a, n = " << n;
    ops::maximum(dev, da, db, db).get();  // out aliases b: b = max(min(a, b), b)
    std::vector<T> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = (lo[i] < b[i]) ? b[i] : lo[i];
    EXPECT_TRUE(same_bits(to_host(db), ref)) << "maximum into b, n = " << n;
  }
}

XDEV_DEVICE_TEST_P(Ops, MinimumAndMaximum) {
  check_min_max<float>(this->device());
  check_min_max<double>(this->device());
}

// `ops::combine` and `ops::scale` take every dtype: f32/f64 as `add`/`mul`/`minimum`/`maximum`
// and `scale`, the others through the CPU fallback, with the host kernels' arithmetic.
XDEV_DEVICE_TEST_P(Ops, CombineAndScaleTakeEveryDtype) {
  const auto dev = this->device();
  if (!this->require_dtype(xdev::DType::i32) || !this->require_dtype(xdev::DType::bf16)) return;
  using Bop = ops::BinaryOp;
  const std::vector<std::int32_t> a{2147483647, -5, 7, 0}, b{1, 3, -7, 0};
  auto x = to_device(dev, sh(4), a);
  auto y = to_device(dev, sh(4), b);
  auto out = to_device(dev, sh(4), std::vector<std::int32_t>(4));
  const auto before = fallback_counters();
  ops::combine(dev, Bop::add, x, y, out).get();
  EXPECT_EQ(to_host(out), (std::vector<std::int32_t>{-2147483647 - 1, -2, 0, 0}));  // wraps modulo 2^32
  ops::combine(dev, Bop::mul, x, y, out).get();
  EXPECT_EQ(to_host(out), (std::vector<std::int32_t>{2147483647, -15, -49, 0}));
  ops::combine(dev, Bop::min, x, y, out).get();
  EXPECT_EQ(to_host(out), (std::vector<std::int32_t>{1, -5, -7, 0}));
  ops::combine(dev, Bop::max, x, y, x).get();  // in place
  EXPECT_EQ(to_host(x), (std::vector<std::int32_t>{2147483647, 3, 7, 0}));
  ops::scale(dev, y, std::int32_t{-2}).get();
  EXPECT_EQ(to_host(y), (std::vector<std::int32_t>{-2, -6, 14, 0}));
  // Integers never reach a backend member: each call counted once, in its own op's counter.
  const auto after = fallback_counters();
  auto grew = [&](const std::string& name) { return after.at(name) - (before.contains(name) ? before.at(name) : 0); };
  EXPECT_EQ(grew("fallback.add"), 1u);
  EXPECT_EQ(grew("fallback.mul"), 1u);
  EXPECT_EQ(grew("fallback.minimum"), 1u);
  EXPECT_EQ(grew("fallback.maximum"), 1u);
  EXPECT_EQ(grew("fallback.scale"), 1u);

  // bf16 rounds once to nearest even, like the host kernels.
  auto h = to_device(dev, sh(2), std::vector<xdev::bf16>{xdev::bf16(1.0f), xdev::bf16(3.0f)});
  ops::scale(dev, h, xdev::bf16(0.5f)).get();
  EXPECT_EQ(to_host(h), (std::vector<xdev::bf16>{xdev::bf16(0.5f), xdev::bf16(1.5f)}));
  // f32 is `add` itself (the same result, the same dispatch).
  auto f = to_device(dev, sh(2), std::vector<float>{1.5f, -2.0f});
  auto g = to_device(dev, sh(2), std::vector<float>{0.25f, 8.0f});
  auto fo = empty<float>(dev, sh(2));
  ops::combine(dev, Bop::add, f, g, fo).get();
  EXPECT_EQ(to_host(fo), (std::vector<float>{1.75f, 6.0f}));
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::combine(dev, static_cast<Bop>(9), f, g, fo); },
               {"combine", "BinaryOp", "9"});
}

// `exp` of f32/f64 within 4 ulp of `std::exp` (OpenCL allows 3, the host is `std::exp` itself);
// f16/bf16 computed in float and rounded once: within one ulp of the dtype of the host's result.
template <class T, class Dev>
void check_exp(const Dev& dev) {
  std::vector<T> x;
  for (int i = -40; i <= 40; ++i) x.push_back(T(static_cast<float>(i) * 0.25f));
  x.push_back(T(0.0f));
  x.push_back(T(-0.0f));
  auto in = to_device(dev, sh(x.size()), x);
  auto out = empty<T>(dev, sh(x.size()));
  ops::exp(dev, in, out).get();
  const auto got = to_host(out);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T want = std::exp(x[i]);
      EXPECT_LE(std::abs(got[i] - want), 4 * std::numeric_limits<T>::epsilon() * want) << "exp(" << x[i] << ")";
    } else {
      const float want = xdev::to_float(T(std::exp(xdev::to_float(x[i]))));
      const float ulp = want * (std::is_same_v<T, xdev::f16> ? 0x1p-10f : 0x1p-7f);
      EXPECT_LE(std::abs(xdev::to_float(got[i]) - want), ulp) << "exp(" << xdev::to_float(x[i]) << ")";
    }
  }
  // In place, and a shape mismatch names both shapes before anything runs.
  ops::exp(dev, in, in).get();
  EXPECT_TRUE(to_host(in)[40] == T(1.0f)) << "exp(0) is exactly 1";
  auto wrong = empty<T>(dev, sh(3));
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::exp(dev, in, wrong); }, {"exp", "[83]", "[3]"});
}

XDEV_DEVICE_TEST_P(Ops, Exp) {
  const auto dev = this->device();
  check_exp<float>(dev);
  if (capabilities_of(dev).supports(xdev::DType::f64)) check_exp<double>(dev);
  if (capabilities_of(dev).supports(xdev::DType::f16)) check_exp<xdev::f16>(dev);
  if (capabilities_of(dev).supports(xdev::DType::bf16)) check_exp<xdev::bf16>(dev);
}

XDEV_DEVICE_TEST_P(Ops, Copy) {
  const auto dev = this->device();
  const auto v = noise<double>(5000, 6);
  auto src = to_device(dev, {50, 100}, v);
  auto dst = to_device(dev, {50, 100}, std::vector<double>(5000, 0.0));
  ops::copy(dev, src, dst).get();
  EXPECT_TRUE(same_bits(to_host(dst), v));

  const std::vector<xdev::f16> h{xdev::f16(1.0f), xdev::f16::from_bits(0x7E01), xdev::f16(-0.0f)};
  auto hs = to_device(dev, sh(3), h);
  auto hd = to_device(dev, sh(3), std::vector<xdev::f16>(3, xdev::f16(0.0f)));
  ops::copy(dev, hs, hd).get();
  EXPECT_TRUE(same_bits(to_host(hd), h));
}

XDEV_DEVICE_TEST_P(Ops, CopyAcrossDevices) {
  if (!this->require_devices(2)) return;
  const auto d0 = this->device(0), d1 = this->device(1);
  const auto v = noise<float>(4097, 7);
  auto a = to_device(d0, {17, 241}, v);
  auto b = to_device(d1, {17, 241}, std::vector<float>(v.size(), 0.0f));
  ops::copy(d0, a, b).get();  // submitted to the source's device
  EXPECT_TRUE(same_bits(to_host(b), v));
  EXPECT_EQ(b.device(), d1);

  auto c = to_device(d0, {17, 241}, std::vector<float>(v.size(), 0.0f));
  ops::copy(d0, b, c).get();  // submitted to the destination's device
  EXPECT_TRUE(same_bits(to_host(c), v));
}

XDEV_DEVICE_TEST_P(Ops, OpsAcceptAStream) {
  const auto dev = this->device();
  const auto s = dev.make_stream();
  auto x = to_device(dev, sh(1000), std::vector<float>(1000, 0.0f));
  ops::fill(s, x, 2.0f).get();
  ops::scale(s, x, 1.5f).get();
  EXPECT_EQ(ops::sum(s, x).get(), 3000.0f);
}

}  // namespace xdev::testing::op_suite
