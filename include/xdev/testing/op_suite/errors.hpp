/// \file
/// Part of xdev's op conformance suite (<xdev/testing/op_suite.hpp>): the errors every op reports before submitting.
/// Include the suite's header, not this one.
#pragma once

#include <xdev/testing/op_suite/common.hpp>

namespace xdev::testing::op_suite {

// ---- errors ---------------------------------------------------------------------------------

XDEV_DEVICE_TEST_P(Ops, ShapeMismatchNamesBothShapesAndRunsNothing) {
  const auto dev = this->device();
  auto a = to_device(dev, {2, 3}, std::vector<float>(6, 1.0f));
  auto b = to_device(dev, {3, 2}, std::vector<float>(6, 2.0f));
  auto out = to_device(dev, {2, 3}, std::vector<float>(6, 7.0f));
  auto out64 = to_device(dev, {3, 2}, std::vector<double>(6, 7.0));
  dev.synchronize();
  const auto before = dev.execution_stats().submitted;
  const auto fallbacks = fallback_counters();
  const std::initializer_list<std::string_view> both{"[2, 3]", "[3, 2]"};
  expect_error(
      xdev::errc::invalid_argument, [&] { (void)ops::add(dev, a, b, out); }, both);
  expect_error(
      xdev::errc::invalid_argument, [&] { (void)ops::mul(dev, a, b, out); }, both);
  expect_error(
      xdev::errc::invalid_argument, [&] { (void)ops::add(dev, a, a, b); }, both);
  expect_error(
      xdev::errc::invalid_argument, [&] { (void)ops::minimum(dev, a, b, out); }, both);
  expect_error(
      xdev::errc::invalid_argument, [&] { (void)ops::maximum(dev, a, a, b); }, both);
  expect_error(
      xdev::errc::invalid_argument, [&] { (void)ops::axpy(dev, 2.0f, b, out); }, both);
  expect_error(
      xdev::errc::invalid_argument, [&] { (void)ops::dot(dev, a, b); }, both);
  expect_error(
      xdev::errc::invalid_argument, [&] { (void)ops::copy(dev, b, out); }, both);
  expect_error(
      xdev::errc::invalid_argument, [&] { (void)ops::convert(dev, a, out64); }, both);
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::add(dev, a, b, out); }, {"add", "a has shape [2, 3]"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::minimum(dev, a, b, out); },
               {"minimum", "a has shape [2, 3]"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::maximum(dev, a, b, out); },
               {"maximum", "a has shape [2, 3]"});
  EXPECT_EQ(dev.execution_stats().submitted, before) << "a rejected op must not be submitted";
  EXPECT_EQ(fallback_counters(), fallbacks);
  EXPECT_TRUE(same_bits(to_host(out), std::vector<float>(6, 7.0f)));
  EXPECT_TRUE(same_bits(to_host(out64), std::vector<double>(6, 7.0)));
}

XDEV_DEVICE_TEST_P(Ops, ArrayOnAnotherDeviceNamesBothDevicesAndRunsNothing) {
  if (!this->require_devices(2)) return;
  const auto d0 = this->device(0), d1 = this->device(1);
  auto a1 = to_device(d1, sh(4), std::vector<float>(4, 1.0f));
  auto b0 = to_device(d0, sh(4), std::vector<float>(4, 2.0f));
  auto out0 = to_device(d0, sh(4), std::vector<float>(4, 7.0f));
  d0.synchronize();
  d1.synchronize();
  const auto before0 = d0.execution_stats().submitted, before1 = d1.execution_stats().submitted;
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::add(d0, a1, b0, out0); },
               {"add", "a is on " + d1.name(), d0.name()});
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::fill(d0, a1, 3.0f); },
               {"fill", "x is on " + d1.name(), d0.name()});
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::fill(d0.make_stream(), a1, 3.0f); },
               {d1.name(), d0.name()});
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::dot(d1, a1, b0); }, {"y is on " + d0.name(), d1.name()});
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::rng_uniform(d0, a1); }, {"out is on " + d1.name()});
  EXPECT_EQ(d0.execution_stats().submitted, before0);
  EXPECT_EQ(d1.execution_stats().submitted, before1);
  EXPECT_TRUE(same_bits(to_host(out0), std::vector<float>(4, 7.0f)));
  EXPECT_TRUE(same_bits(to_host(a1), std::vector<float>(4, 1.0f)));
}

// KNOWN BUG, reported to the lead (ops.hpp does not check aliasing; not fixed here): gemm whose
// `c` is `a` or `b`, and gather whose `out` is `table`, compute wrong results on the host backend
// (its kernels overwrite the output while still reading the input: 67055 of 90000 elements of a
// 300x300 gemm are wrong) but right ones through the CPU fallback (which stages every operand
// separately), so backends disagree. The proposed fix rejects such calls before submission with
// errc::invalid_argument; these two tests state that contract and FAIL until the fix lands.
XDEV_DEVICE_TEST_P(Ops, GemmOutputThatIsAnInputIsRejected) {
  const auto dev = this->device();
  const auto v = small_ints<double>(300 * 300, 25);
  auto a = to_device(dev, {300, 300}, v);
  auto b = to_device(dev, {300, 300}, v);
  dev.synchronize();
  const auto before = dev.execution_stats().submitted;
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::gemm(dev, a, b, a); }, {"gemm", "c", "same array as a"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::gemm(dev, a, b, b); }, {"gemm", "c", "same array as b"});
  dev.synchronize();
  EXPECT_EQ(dev.execution_stats().submitted, before);
  EXPECT_TRUE(same_bits(to_host(a), v));
}

XDEV_DEVICE_TEST_P(Ops, GatherOutputThatIsTheTableIsRejected) {
  const auto dev = this->device();
  auto t = to_device(dev, {4, 1}, std::vector<float>{0, 1, 2, 3});
  auto idx = to_device(dev, sh(4), std::vector<std::int32_t>{3, 2, 1, 0});
  dev.synchronize();
  const auto before = dev.execution_stats().submitted;
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::gather(dev, t, idx, t); },
               {"gather", "out", "same array as table"});
  dev.synchronize();
  EXPECT_EQ(dev.execution_stats().submitted, before);
  EXPECT_EQ(to_host(t), (std::vector<float>{0, 1, 2, 3}));
}

}  // namespace xdev::testing::op_suite
