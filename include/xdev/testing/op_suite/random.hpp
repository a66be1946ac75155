/// \file
/// Part of xdev's op conformance suite (<xdev/testing/op_suite.hpp>): the random ops and the RngDefault policy. Include
/// the suite's header, not this one.
#pragma once

#include <xdev/testing/op_suite/common.hpp>

namespace xdev::testing::op_suite {

// ---- random numbers -------------------------------------------------------------------------

// Normals against the reference stream: raw bits and uniforms are exact integer arithmetic, but
// normals go through the math library's log, sqrt, cos and sin, which may differ in the last bits
// between libraries (an OpenCL device's from the C library's; see <xdev/random/stream.hpp>). So each
// value must be within 64 ulp of its size: |got - ref| <= 64 eps (|mean| + stddev + |ref - mean|).
// Within one backend, slices of a stream still match the whole bit for bit (checked separately).
template <class T>
::testing::AssertionResult near_normals(const std::vector<T>& got, const std::vector<T>& ref, T mean, T stddev) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << got.size() << " values, expected " << ref.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    const T tol = T(64) * std::numeric_limits<T>::epsilon() * (std::fabs(mean) + stddev + std::fabs(ref[i] - mean));
    if (!(std::fabs(got[i] - ref[i]) <= tol))
      return ::testing::AssertionFailure()
             << "value " << i << " is " << got[i] << ", the reference " << ref[i] << " (tolerance " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

template <class T, class Dev>
void check_rng_explicit(const Dev& dev, xdev::RngAlgorithm alg, bool normal) {
  for (std::size_t n : {1u, 1001u, 40000u})
    for (std::uint64_t offset : {0u, 7u}) {
      std::vector<T> ref(n);
      auto out = empty<T>(dev, sh(n));
      const ops::RngOptions opt{.algorithm = alg, .seed = 42, .offset = offset};
      if (normal) {
        xdev::random::fill_normal(alg, 42, offset, std::span<T>(ref), T(1.5), T(2));
        ops::rng_normal(dev, out, T(1.5), T(2), opt).get();
      } else {
        xdev::random::fill_uniform(alg, 42, offset, std::span<T>(ref));
        ops::rng_uniform(dev, out, opt).get();
      }
      EXPECT_TRUE(normal ? near_normals(to_host(out), ref, T(1.5), T(2)) : same_bits(to_host(out), ref))
          << name_of(alg) << (normal ? " normal" : " uniform") << " n=" << n << " offset=" << offset;
    }
}

XDEV_DEVICE_TEST_P(Ops, RngMatchesTheReferenceStream) {
  const auto dev = this->device();
  for (auto alg : {xdev::RngAlgorithm::philox, xdev::RngAlgorithm::three_fry})
    for (bool normal : {false, true}) {
      check_rng_explicit<float>(dev, alg, normal);
      check_rng_explicit<double>(dev, alg, normal);
    }
}

XDEV_DEVICE_TEST_P(Ops, RngDefaultGeneratorFollowsTheRngDefaultPolicy) {
  using B = typename TestFixture::backend;
  if constexpr (std::is_same_v<B, xdev::backends::Host>)
    static_assert(xdev::Device<B>::capability_set.rng_default == xdev::RngAlgorithm::philox);
  const auto dev = this->device();
  const auto alg = capabilities_of(dev).rng_default;
  dev.manual_seed(3);
  auto out = empty<float>(dev, sh(1000));
  ops::rng_uniform(dev, out).get();
  std::vector<float> ref(1000);
  xdev::random::fill_uniform(alg, 3, 0, std::span<float>(ref));
  EXPECT_TRUE(same_bits(to_host(out), ref));
}

XDEV_DEVICE_TEST_P(Ops, RngDeviceStreamAdvancesAcrossCallsAndManualSeedRestartsIt) {
  const auto dev = this->device();
  const auto alg = capabilities_of(dev).rng_default;
  dev.manual_seed(1234);
  auto u = empty<float>(dev, sh(100));
  auto z = empty<double>(dev, sh(51));
  auto w = empty<float>(dev, sh(10));
  ops::rng_uniform(dev, u).get();           // raw outputs [0, 100)
  ops::rng_normal(dev, z, 0.5, 3.0).get();  // [100, 202): two per double
  ops::rng_uniform(dev, w).get();           // [202, 212)
  EXPECT_EQ(dev.generator().seed(), 1234u);
  EXPECT_EQ(dev.generator().offset(), 212u);

  std::vector<float> ru(100), rw(10);
  std::vector<double> rz(51);
  xdev::random::fill_uniform(alg, 1234, 0, std::span<float>(ru));
  xdev::random::fill_normal(alg, 1234, 100, std::span<double>(rz), 0.5, 3.0);
  xdev::random::fill_uniform(alg, 1234, 202, std::span<float>(rw));
  const auto first = to_host(u);
  EXPECT_TRUE(same_bits(first, ru));
  EXPECT_TRUE(near_normals(to_host(z), rz, 0.5, 3.0));
  EXPECT_TRUE(same_bits(to_host(w), rw));

  // An explicit generator without a seed still continues the device's stream.
  const auto other = alg == xdev::RngAlgorithm::philox ? xdev::RngAlgorithm::three_fry : xdev::RngAlgorithm::philox;
  ops::rng_uniform(dev, w, {.algorithm = other}).get();
  xdev::random::fill_uniform(other, 1234, 212, std::span<float>(rw));
  EXPECT_TRUE(same_bits(to_host(w), rw));
  EXPECT_EQ(dev.generator().offset(), 222u);

  dev.manual_seed(1234);
  ops::rng_uniform(dev, u).get();
  EXPECT_TRUE(same_bits(to_host(u), first)) << "manual_seed restarts the stream at offset 0";
  EXPECT_EQ(dev.generator().offset(), 100u);
}

XDEV_DEVICE_TEST_P(Ops, RngWithAnExplicitSeedLeavesTheDeviceStreamAlone) {
  const auto dev = this->device();
  const auto alg = capabilities_of(dev).rng_default;
  dev.manual_seed(9);
  auto out = empty<double>(dev, sh(64));
  ops::rng_uniform(dev, out, {.seed = 5, .offset = 1000}).get();
  ops::rng_normal(dev, out, 0.0, 1.0, {.algorithm = xdev::RngAlgorithm::three_fry, .seed = 5}).get();
  EXPECT_EQ(dev.generator().seed(), 9u);
  EXPECT_EQ(dev.generator().offset(), 0u);
  ops::rng_uniform(dev, out).get();
  std::vector<double> ref(64);
  xdev::random::fill_uniform(alg, 9, 0, std::span<double>(ref));
  EXPECT_TRUE(same_bits(to_host(out), ref));
}

template <class T, class Dev>
void check_rng_halves(const Dev& d0, const Dev& d1, std::size_t n, std::size_t split) {
  constexpr std::uint64_t per_value = xdev::random::raw_outputs_per_value<T>;
  const auto alg = xdev::RngAlgorithm::three_fry;
  auto whole = empty<T>(d0, sh(n));
  auto first = empty<T>(d0, sh(split));
  auto second = empty<T>(d1, sh(n - split));
  ops::rng_normal(d0, whole, T(0), T(1), {.algorithm = alg, .seed = 77, .offset = 3}).get();
  ops::rng_normal(d0, first, T(0), T(1), {.algorithm = alg, .seed = 77, .offset = 3}).get();
  ops::rng_normal(d1, second, T(0), T(1), {.algorithm = alg, .seed = 77, .offset = 3 + per_value * split}).get();
  auto joined = to_host(first);
  const auto tail = to_host(second);
  joined.insert(joined.end(), tail.begin(), tail.end());
  EXPECT_TRUE(same_bits(joined, to_host(whole))) << "n=" << n << " split=" << split;
  std::vector<T> ref(n);
  xdev::random::fill_normal(alg, 77, 3, std::span<T>(ref));
  EXPECT_TRUE(near_normals(joined, ref, T(0), T(1)));
}

XDEV_DEVICE_TEST_P(Ops, RngHalvesOnTwoDevicesConcatenateToTheWholeStream) {
  if (!this->require_devices(2)) return;
  const auto d0 = this->device(0), d1 = this->device(1);
  check_rng_halves<float>(d0, d1, 1001, 500);  // splits a Box-Muller pair (odd offset + even split)
  check_rng_halves<float>(d0, d1, 1001, 501);
  check_rng_halves<double>(d0, d1, 40001, 20000);
}

}  // namespace xdev::testing::op_suite
