/// \file
/// Part of xdev's op conformance suite (<xdev/testing/op_suite.hpp>): convert and parallel_for. Include the
/// suite's header, not this one.
#pragma once

#include <xdev/testing/op_suite/common.hpp>

namespace xdev::testing::op_suite {

// ---- conversion -----------------------------------------------------------------------------

template <class S, class D, class Dev>
void expect_convert(const Dev& dev, const std::vector<S>& src, const std::vector<D>& expected) {
  auto ds = to_device(dev, sh(src.size()), src);
  auto dd = empty<D>(dev, sh(src.size()));
  ops::convert(dev, ds, dd).get();
  EXPECT_TRUE(same_bits(to_host(dd), expected)) << xdev::dtype_of<S> << " -> " << xdev::dtype_of<D>;
}

XDEV_DEVICE_TEST_P(Ops, ConvertRoundsToNearestEvenAndSaturates) {
  const auto dev = this->device();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  using xdev::bf16;
  using xdev::f16;

  // f32 -> f16: ties to even, overflow to infinity, subnormals, NaN stays NaN.
  expect_convert<float, f16>(
      dev,
      {0.1f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65519.0f, 65520.0f, 0x1p-24f, 0x1p-25f, 3 * 0x1p-26f,
       -0.0f, inf, -inf},
      {f16::from_bits(0x2E66), f16::from_bits(0x3C00), f16::from_bits(0x3C02), f16::from_bits(0x7BFF),
       f16::from_bits(0x7BFF), f16::from_bits(0x7C00), f16::from_bits(0x0001), f16::from_bits(0x0000),
       f16::from_bits(0x0001), f16::from_bits(0x8000), f16::from_bits(0x7C00), f16::from_bits(0xFC00)});
  expect_convert<float, f16>(dev, {nan, -nan}, {xdev::to_f16(nan), xdev::to_f16(-nan)});
  // f32 -> bf16: ties to even, rounding up past the largest finite value gives infinity.
  expect_convert<float, bf16>(
      dev,
      {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, std::numeric_limits<float>::max(), -0.0f, 1e-40f},
      {bf16::from_bits(0x3F80), bf16::from_bits(0x3F82), bf16::from_bits(0x3F81), bf16::from_bits(0x7F80),
       bf16::from_bits(0x8000), xdev::to_bf16(1e-40f)});
  EXPECT_TRUE(std::isnan(xdev::to_float(xdev::to_bf16(nan))));
  expect_convert<float, bf16>(dev, {nan}, {xdev::to_bf16(nan)});
  // 16-bit floats widen exactly.
  expect_convert<f16, float>(dev, {f16::from_bits(0x0001), f16::from_bits(0x7BFF), f16::from_bits(0xFC00)},
                             {0x1p-24f, 65504.0f, -inf});
  expect_convert<bf16, float>(dev, {bf16::from_bits(0x3F81), bf16::from_bits(0x8000)}, {1.0f + 0x1p-7f, -0.0f});
  expect_convert<f16, bf16>(dev, {f16::from_bits(0x3C01)}, {bf16::from_bits(0x3F80)});  // 1 + 2^-10 -> 1
  // f64 and i64 -> bf16 / f16 round once, from the exact value (no double rounding through f32).
  expect_convert<double, bf16>(dev, {1.0 + 0x1p-8 + 0x1p-30, 0.1}, {bf16::from_bits(0x3F81), xdev::to_bf16(0.1f)});
  expect_convert<std::int64_t, bf16>(dev, {257, 259, -257},
                                     {bf16::from_bits(0x4380), bf16::from_bits(0x4382), bf16::from_bits(0xC380)});
  expect_convert<std::int64_t, f16>(dev, {2049, 2051, 70000},
                                    {f16::from_bits(0x6800), f16::from_bits(0x6802), f16::from_bits(0x7C00)});
  // Floating to integer: truncation toward zero, saturation, NaN to 0.
  expect_convert<float, std::int32_t>(dev, {1.9f, -1.9f, 3e9f, -3e9f, nan, -0.0f, 2147483520.0f},
                                      {1, -1, 2147483647, -2147483647 - 1, 0, 0, 2147483520});
  expect_convert<double, std::uint8_t>(dev, {300.5, -3.0, 255.9, 1.5}, {255, 0, 255, 1});
  expect_convert<double, std::int64_t>(
      dev, {1e19, -1e19, -2.5},
      {std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min(), -2});
  // Integer to floating: nearest, ties to even.
  expect_convert<std::int64_t, double>(
      dev,
      {0, -1, (std::int64_t{1} << 53) + 1, (std::int64_t{1} << 53) + 3, std::numeric_limits<std::int64_t>::max(),
       std::numeric_limits<std::int64_t>::min()},
      {0.0, -1.0, 0x1p53, 0x1p53 + 4, 0x1p63, -0x1p63});
  expect_convert<std::int32_t, float>(dev, {16777217, -16777219}, {16777216.0f, -16777220.0f});
  expect_convert<std::uint8_t, float>(dev, {0, 255}, {0.0f, 255.0f});
  // Between floating types and between integers.
  expect_convert<double, float>(dev, {0.1, 1e300, 1e-50, -1e300}, {0.1f, inf, 0.0f, -inf});
  expect_convert<float, double>(dev, {0.1f, -0.0f}, {static_cast<double>(0.1f), -0.0});
  expect_convert<std::int32_t, std::int64_t>(dev, {-5, 2147483647}, {-5, 2147483647});
  expect_convert<std::int64_t, std::int32_t>(dev, {(std::int64_t{1} << 32) + 5, -1}, {5, -1});
  // A size that spans several parallel chunks.
  const auto big = noise<float>(200001, 20);
  std::vector<xdev::bf16> big_ref(big.size());
  for (std::size_t i = 0; i < big.size(); ++i) big_ref[i] = xdev::to_bf16(big[i]);
  expect_convert<float, xdev::bf16>(dev, big, big_ref);
}

// ---- parallel_for ---------------------------------------------------------------------------

XDEV_DEVICE_TEST_P(Ops, ParallelForCoversTheRangeOnceAndReportsExceptions) {
  using B = typename TestFixture::backend;
  if (!this->require_launchable()) return;
  if constexpr (xdev::concepts::LaunchableBackend<B>) {
    const auto dev = this->device();
    constexpr std::size_t n = 100003;
    std::vector<std::atomic<int>> hits(n);
    xdev::parallel_for(dev, n, [&hits](std::size_t i) { hits[i].fetch_add(1, std::memory_order_relaxed); }).get();
    std::size_t wrong = 0;
    for (const auto& h : hits) wrong += h.load() != 1;
    EXPECT_EQ(wrong, 0u);

    if constexpr (xdev::concepts::HostAccessibleBackend<B>) {
      auto a = empty<std::int64_t>(dev, sh(n));
      xdev::parallel_for(dev, n, [p = a.buffer().host_data()](std::size_t i) {
        p[i] = static_cast<std::int64_t>(i) * 3;
      }).get();
      std::vector<std::int64_t> ref(n);
      for (std::size_t i = 0; i < n; ++i) ref[i] = static_cast<std::int64_t>(i) * 3;
      EXPECT_EQ(to_host(a), ref);
    }

    auto f = xdev::parallel_for(dev, 1000, [](std::size_t i) {
      if (i == 500) throw std::runtime_error("kernel failed at 500");
    });
    try {
      f.get();
      ADD_FAILURE() << "the kernel's exception was lost";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "kernel failed at 500");
    }
    xdev::parallel_for(dev, 0, [](std::size_t) { std::abort(); }).get();  // an empty range runs nothing
  }
}

}  // namespace xdev::testing::op_suite
