// How capability policies and op dispatch change the portable ops, each on a backend made for it
// (tests/support/test_targets.hpp): DenseGather, RngDefault, SupportedDTypes, Autocast through the
// CPU fallback, and "a backend's member runs the op, else the fallback does".
#include <xdev/backends/host.hpp>
#include <xdev/core/half.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/autocast.hpp>
#include <xdev/ops/ops.hpp>
#include <xdev/random/stream.hpp>
#include <xdev/testing/arrays.hpp>

#include "support/error_of.hpp"
#include "support/test_targets.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using ::testing::HasSubstr;
using xdev::testing::same_bits;
using xdev::testing::to_device;
using xdev::testing::to_host;
namespace ops = xdev::ops;

xdev::Shape sh(std::size_t n) {
  return xdev::Shape{static_cast<std::int64_t>(n)};
}
xdev::Shape sh(std::size_t m, std::size_t n) {
  return xdev::Shape{static_cast<std::int64_t>(m), static_cast<std::int64_t>(n)};
}

// The change of metric `name` while this object lives.
class MetricDelta {
 public:
  explicit MetricDelta(std::string name) : name_(std::move(name)), start_(xdev::metrics::value(name_)) {}
  [[nodiscard]] std::uint64_t value() const { return xdev::metrics::value(name_) - start_; }

 private:
  std::string name_;
  std::uint64_t start_;
};

using xdev_test::expect_error;

// ---- DenseGather ----------------------------------------------------------------------------

// A table of `rows` x 5 floats whose first rows hold -0.0 and NaNs with payloads (a one-hot
// multiply would turn -0.0 into +0.0 and lose the payloads; the lowerings must copy bits).
std::vector<float> special_table(std::size_t rows) {
  std::vector<float> t(rows * 5);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(i % 97) * 0.37f - 11.0f;
  const std::pair<std::size_t, float> special[] = {
      {1, -0.0f}, {2, std::bit_cast<float>(0x7FC0BEEFu)}, {8, std::bit_cast<float>(0xFFC00123u)}, {19 * 5 + 4, -0.0f}};
  for (const auto& [i, v] : special)
    if (i < t.size()) t[i] = v;
  return t;
}

struct GatherRun {
  std::vector<float> out;
  std::uint64_t dense, sparse;
};

template <class B, class I>
GatherRun run_gather(const xdev::Device<B>& dev, std::size_t rows, const std::vector<I>& index) {
  const MetricDelta dense("gather.dense"), sparse("gather.sparse");
  auto table = to_device(dev, sh(rows, 5), special_table(rows));
  auto idx = to_device(dev, sh(index.size()), index);
  auto out = xdev::empty<float>(dev, sh(index.size(), 5));
  ops::gather(dev, table, idx, out).get();
  return {to_host(out), dense.value(), sparse.value()};
}

template <class I>
std::vector<float> gather_reference(std::size_t rows, const std::vector<I>& index) {
  const auto t = special_table(rows);
  std::vector<float> out(index.size() * 5);
  for (std::size_t i = 0; i < index.size(); ++i)
    std::memcpy(&out[i * 5], &t[static_cast<std::size_t>(index[i]) * 5], 5 * sizeof(float));
  return out;
}

TEST(DenseGatherPolicy, AtMostFactorTimesTenRowsIsDenseAboveIsSparseWithBitIdenticalResults) {
  using B = xdev_test::DenseGather2Backend;
  static_assert(xdev::Device<B>::capability_set.dense_gather_factor == 2);
  xdev::Runtime<B> rt({}, 1);
  const auto dev = rt.device(0);
  const std::vector<std::int32_t> idx{19, 0, 1, 19, 3, 0};  // valid in both tables
  const auto at20 = run_gather(dev, 20, idx);
  EXPECT_EQ(at20.dense, 1u);
  EXPECT_EQ(at20.sparse, 0u);
  const auto at21 = run_gather(dev, 21, idx);
  EXPECT_EQ(at21.dense, 0u);
  EXPECT_EQ(at21.sparse, 1u);
  ASSERT_EQ(at20.out.size(), at21.out.size());
  EXPECT_EQ(std::memcmp(at20.out.data(), at21.out.data(), at20.out.size() * sizeof(float)), 0)
      << "the dense and the sparse lowering must give the same bits";
  EXPECT_TRUE(same_bits(at20.out, gather_reference(20, idx)));

  const std::vector<std::int64_t> idx64{20, 19, 1, 2};
  const auto at21_64 = run_gather(dev, 21, idx64);
  EXPECT_EQ(at21_64.sparse, 1u);
  EXPECT_TRUE(same_bits(at21_64.out, gather_reference(21, idx64)));
  const auto at20_64 = run_gather(dev, 20, std::vector<std::int64_t>{19, 1, 2});
  EXPECT_EQ(at20_64.dense, 1u);
  EXPECT_TRUE(same_bits(at20_64.out, gather_reference(20, std::vector<std::int64_t>{19, 1, 2})));
}

TEST(DenseGatherPolicy, ZeroMeansNeverDense) {
  using B = xdev_test::ManualBackend;  // no DenseGather policy: the default, DenseGather<0>
  static_assert(xdev::Device<B>::capability_set.dense_gather_factor == 0);
  xdev::Runtime<B> rt({}, 1, B::Mode::inline_completion);
  const auto one_row = run_gather(rt.device(0), 1, std::vector<std::int32_t>{0, 0});
  EXPECT_EQ(one_row.dense, 0u);
  EXPECT_EQ(one_row.sparse, 1u);
  EXPECT_TRUE(same_bits(one_row.out, gather_reference(1, std::vector<std::int32_t>{0, 0})));
}

TEST(DenseGatherPolicy, HostIsDenseUpTo81920Rows) {
  using Host = xdev::backends::Host;
  static_assert(xdev::Device<Host>::capability_set.dense_gather_factor == 8192);
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  const std::vector<std::int64_t> idx{81919, 0, 1, 2, 81919};
  const auto dense = run_gather(rt.device(0), 81920, idx);
  const auto sparse = run_gather(rt.device(0), 81921, idx);
  EXPECT_EQ(dense.dense, 1u);
  EXPECT_EQ(sparse.sparse, 1u);
  EXPECT_EQ(std::memcmp(dense.out.data(), sparse.out.data(), dense.out.size() * sizeof(float)), 0);
  EXPECT_TRUE(same_bits(dense.out, gather_reference(81920, idx)));
}

// ---- RngDefault -----------------------------------------------------------------------------

TEST(RngDefaultPolicy, ChoosesTheGeneratorOfCallsThatNameNone) {
  using B = xdev_test::ThreeFryBackend;
  static_assert(xdev::Device<B>::capability_set.rng_default == xdev::RngAlgorithm::three_fry);
  xdev::Runtime<B> rt({}, 1);
  xdev::Runtime<xdev::backends::Host> host({}, xdev::backends::Host::Options{.devices = 1, .threads = 2});
  const auto dev = rt.device(0);
  const auto hdev = host.device(0);
  dev.manual_seed(11);
  hdev.manual_seed(11);
  auto out = xdev::empty<float>(dev, sh(1000));
  auto hout = xdev::empty<float>(hdev, sh(1000));
  ops::rng_uniform(dev, out).get();
  ops::rng_uniform(hdev, hout).get();
  std::vector<float> threefry(1000), philox(1000);
  xdev::random::fill_uniform(xdev::RngAlgorithm::three_fry, 11, 0, std::span<float>(threefry));
  xdev::random::fill_uniform(xdev::RngAlgorithm::philox, 11, 0, std::span<float>(philox));
  EXPECT_TRUE(same_bits(to_host(out), threefry));
  EXPECT_TRUE(same_bits(to_host(hout), philox));
  EXPECT_FALSE(same_bits(threefry, philox)) << "the policy must change the numbers";

  // A call that names its generator gets that one, whatever the policy.
  ops::rng_uniform(dev, out, {.algorithm = xdev::RngAlgorithm::philox, .seed = 11}).get();
  EXPECT_TRUE(same_bits(to_host(out), philox));

  auto z = xdev::empty<double>(dev, sh(99));
  ops::rng_normal(dev, z, 2.0, 0.5).get();  // continues the device stream at raw output 1000
  std::vector<double> rz(99);
  xdev::random::fill_normal(xdev::RngAlgorithm::three_fry, 11, 1000, std::span<double>(rz), 2.0, 0.5);
  EXPECT_TRUE(same_bits(to_host(z), rz));
}

// ---- SupportedDTypes ------------------------------------------------------------------------

TEST(SupportedDTypesPolicy, AnUnsupportedDTypeIsUnimplementedNamingOpDTypeAndDeviceAndRunsNothing) {
  using B = xdev_test::F32OnlyBackend;
  static_assert(!xdev::Device<B>::capability_set.supports(xdev::DType::f64));
  xdev::Runtime<B> rt({}, 1);
  const auto dev = rt.device(0);
  auto x64 = xdev::empty<double>(dev, sh(4));  // memory holds bytes; ops check the dtype
  auto m64 = xdev::empty<double>(dev, sh(2, 2));
  auto f = to_device(dev, sh(4), std::vector<float>(4, 7.0f));
  auto table = to_device(dev, sh(2, 2), std::vector<float>(4, 1.0f));
  auto out = to_device(dev, sh(2, 2), std::vector<float>(4, 7.0f));
  auto idx = xdev::empty<std::int32_t>(dev, sh(2));
  dev.synchronize();
  const auto before = dev.execution_stats().submitted;
  const auto unimplemented = xdev::errc::unimplemented;
  expect_error(unimplemented, [&] { (void)ops::fill(dev, x64, 1.0); }, {"fill", "dtype f64", "F32ONLY:0"});
  expect_error(unimplemented, [&] { (void)ops::scale(dev, x64, 2.0); }, {"scale", "dtype f64", "F32ONLY:0"});
  expect_error(unimplemented, [&] { (void)ops::sum(dev, x64); }, {"sum", "dtype f64", "F32ONLY:0"});
  expect_error(unimplemented, [&] { (void)ops::gemm(dev, m64, m64, m64); }, {"gemm", "dtype f64", "F32ONLY:0"});
  expect_error(unimplemented, [&] { (void)ops::rng_normal(dev, x64); }, {"rng_normal", "dtype f64", "F32ONLY:0"});
  expect_error(unimplemented, [&] { (void)ops::convert(dev, f, x64); }, {"convert", "dtype f64", "F32ONLY:0"});
  expect_error(unimplemented, [&] { (void)ops::gather(dev, table, idx, out); }, {"gather", "dtype i32", "F32ONLY:0"});
  EXPECT_EQ(dev.execution_stats().submitted, before);
  EXPECT_TRUE(same_bits(to_host(out), std::vector<float>(4, 7.0f)));

  ops::fill(dev, f, 2.0f).get();  // f32 is supported
  EXPECT_EQ(to_host(f), std::vector<float>(4, 2.0f));
}

// ---- Autocast through the fallback ------------------------------------------------------------

// See <xdev/testing/op_suite.hpp>, autocast_inputs: rounded inputs are multiples of 1/16 in [1, 2), so the f32
// reference is exact in any order and matches bit for bit.
std::vector<float> autocast_inputs(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<float> v(n);
  for (auto& x : v)
    x = (g() % 2 ? -1.0f : 1.0f) *
        (static_cast<float>(16 + g() % 16) / 16.0f + static_cast<float>(1 + g() % 1023) * 0x1p-22f);
  return v;
}

TEST(AutocastPolicy, TheCpuFallbackRoundsToTheDevicesAutocastDType) {
  using B = xdev_test::NpuAutocastBackend;  // Autocast<npu, f16>, no op members
  xdev::Runtime<B> rt({}, 1);
  const auto dev = rt.device(0);
  constexpr std::size_t m = 5, n = 3, k = 64;
  const auto a = autocast_inputs(m * k, 31), b = autocast_inputs(k * n, 32);
  std::vector<float> rounded(m * n), full(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      float r = 0, f = 0;
      for (std::size_t p = 0; p < k; ++p) {
        r += xdev::to_float(xdev::to_f16(a[i * k + p])) * xdev::to_float(xdev::to_f16(b[p * n + j]));
        f += a[i * k + p] * b[p * n + j];
      }
      rounded[i * n + j] = r;
      full[i * n + j] = f;
    }
  auto da = to_device(dev, sh(m, k), a);
  auto db = to_device(dev, sh(k, n), b);
  auto dc = xdev::empty<float>(dev, sh(m, n));
  auto row = to_device(dev, sh(k), std::vector<float>(a.begin(), a.begin() + k));
  auto col = to_device(dev, sh(k), std::vector<float>(b.begin(), b.begin() + k));
  const MetricDelta fallbacks("fallback.gemm");
  {
    xdev::AutocastScope npu(xdev::AutocastKey::npu);
    ops::gemm(dev, da, db, dc).get();
    EXPECT_TRUE(same_bits(to_host(dc), rounded));
    float dot_ref = 0;
    for (std::size_t p = 0; p < k; ++p)
      dot_ref += xdev::to_float(xdev::to_f16(a[p])) * xdev::to_float(xdev::to_f16(b[p]));
    EXPECT_EQ(ops::dot(dev, row, col).get(), dot_ref);
  }
  {
    xdev::AutocastScope cpu(xdev::AutocastKey::cpu);  // the host's key, not this device's
    ops::gemm(dev, da, db, dc).get();
    const auto c = to_host(dc);
    for (std::size_t i = 0; i < c.size(); ++i) {
      EXPECT_NE(c[i], rounded[i]) << i;
      EXPECT_NEAR(c[i], full[i], 1e-3f) << i;
    }
  }
  EXPECT_EQ(fallbacks.value(), 2u);
}

// ---- device checks ------------------------------------------------------------------------

// KNOWN BUG, reported to the lead (not fixed here): an array of another runtime's device with the
// same ordinal gets the self-contradictory message "x is on HOST:0, not on HOST:0". The proposed
// fix in ops::detail::check_array says "of another runtime"; this test FAILS until it lands.
TEST(DeviceChecks, AnArrayOfAnotherRuntimeIsNamedAsSuch) {
  using Host = xdev::backends::Host;
  xdev::Runtime<Host> r1({}, Host::Options{.devices = 1, .threads = 2});
  xdev::Runtime<Host> r2({}, Host::Options{.devices = 1, .threads = 2});
  auto x = xdev::empty<float>(r1.device(0), sh(4));
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::fill(r2.device(0), x, 1.0f); },
               {"fill", "x is on HOST:0 of another runtime, not on HOST:0"});
  EXPECT_EQ(r2.device(0).execution_stats().submitted, 0u);
}

TEST(RngOptionsChecks, AnOffsetWithoutASeedIsRejectedInsteadOfIgnored) {
  using Host = xdev::backends::Host;
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  auto x = xdev::empty<float>(dev, sh(4));
  expect_error(xdev::errc::invalid_argument, [&] { (void)ops::rng_uniform(dev, x, {.offset = 8}); },
               {"rng_uniform", "RngOptions::offset=8", "needs RngOptions::seed"});
  EXPECT_EQ(dev.generator().offset(), 0u);  // the device's stream was not advanced
  EXPECT_EQ(dev.execution_stats().submitted, 0u);
}

// ---- dispatch: member first, then the fallback ----------------------------------------------------

TEST(OpDispatch, ABackendMemberRunsItsOpAndOpsWithoutAMemberFallBack) {
  using B = xdev_test::FillMemberBackend;
  xdev::Runtime<B> rt({}, 1);
  const auto dev = rt.device(0);
  auto x = to_device(dev, sh(5), std::vector<double>(5, 0.0));
  const MetricDelta fill_fallbacks("fallback.fill"), scale_fallbacks("fallback.scale");
  ops::fill(dev, x, 1.25).get();
  EXPECT_EQ(rt.backend().fills.load(), 1);
  EXPECT_EQ(fill_fallbacks.value(), 0u);
  ops::scale(dev, x, 2.0).get();
  EXPECT_EQ(scale_fallbacks.value(), 1u);
  EXPECT_EQ(rt.backend().fills.load(), 1);
  EXPECT_EQ(to_host(x), std::vector<double>(5, 2.5));
}

}  // namespace
