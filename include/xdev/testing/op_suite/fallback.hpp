/// \file
/// Part of xdev's op conformance suite (<xdev/testing/op_suite.hpp>): the fallback accounting (one `fallback.<op>` per
/// op that falls back). Include the suite's header, not this one.
#pragma once

#include <xdev/testing/op_suite/common.hpp>

namespace xdev::testing::op_suite {

// ---- fallback accounting --------------------------------------------------------------------

// Whether backend B has the member of an op (`ops::has_native_op`, the trait the dispatch uses),
// by the op's member name. An op whose member is missing runs through the CPU fallback and counts
// in `fallback.<op>`.
template <class B>
std::map<std::string, bool> native_ops() {
  using H = typename B::memory_handle;
  using xdev::ops::has_native_op;
  return {{"fill", has_native_op<B, ops::FillArgs<float, H>>},
          {"scale", has_native_op<B, ops::ScaleArgs<float, H>>},
          {"axpy", has_native_op<B, ops::AxpyArgs<float, H>>},
          {"binary", has_native_op<B, ops::BinaryArgs<float, H>>},
          {"sum", has_native_op<B, ops::SumArgs<float, H>>},
          {"sum_axis", has_native_op<B, ops::SumAxisArgs<float, H>>},
          {"dot", has_native_op<B, ops::DotArgs<float, H>>},
          {"gemm", has_native_op<B, ops::GemmArgs<float, H>>},
          {"gather", has_native_op<B, ops::GatherArgs<float, std::int32_t, H>>},
          {"rng", has_native_op<B, ops::RngArgs<float, H>>},
          {"convert", has_native_op<B, ops::ConvertArgs<float, bf16, H>>}};
}

template <class B>
void check_fallback_counts(const xdev::Device<B>& dev) {
  const auto native = native_ops<B>();
  auto x = to_device(dev, {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  auto y = to_device(dev, {2, 3}, std::vector<float>(6, 1.0f));
  auto out = empty<float>(dev, {2, 3});
  auto row = empty<float>(dev, sh(3));
  auto sq = to_device(dev, {3, 3}, std::vector<float>(9, 1.0f));
  auto c = empty<float>(dev, {2, 3});
  auto idx = to_device(dev, sh(2), std::vector<std::int32_t>{1, 0});
  auto gathered = empty<float>(dev, {2, 3});
  auto half = empty<xdev::bf16>(dev, {2, 3});
  // Whether the backend runs an op with arguments like `args` itself: it has the member, and
  // `ops::runs_natively` (the dispatch's own decision: the `implements_binary` and `implements`
  // hooks, if any) accepts them.
  using H = typename B::memory_handle;
  auto natively = [&](const std::string& member, const auto& args) {
    return native.at(member) && xdev::ops::runs_natively(dev.backend(), args);
  };
  // Runs one op: `fallback.<op>` must grow by 1 when the backend does not run `member` itself
  // (else by 0), and every other fallback counter must stay.
  auto check = [&](const std::string& op, const std::string& member, const auto& args, auto&& run) {
    const std::uint64_t expected = natively(member, args) ? 0 : 1;
    const auto before = fallback_counters();
    run();
    const auto after = fallback_counters();
    for (const auto& [name, v] : after) {
      const auto it = before.find(name);
      const std::uint64_t delta = v - (it == before.end() ? 0 : it->second);
      EXPECT_EQ(delta, name == "fallback." + op ? expected : 0) << name << " after " << op;
    }
    if (expected != 0) {
      EXPECT_TRUE(after.contains("fallback." + op)) << op;
    }
  };
  namespace o = xdev::ops;
  check("fill", "fill", o::FillArgs<float, H>{}, [&] { o::fill(dev, out, 2.0f).get(); });
  check("scale", "scale", o::ScaleArgs<float, H>{}, [&] { o::scale(dev, out, 2.0f).get(); });
  check("axpy", "axpy", o::AxpyArgs<float, H>{}, [&] { o::axpy(dev, 2.0f, x, y).get(); });
  // `check` for one operator of the `binary` member.
  auto check_binary = [&](const std::string& op, o::BinaryOp bop, auto&& run) {
    o::BinaryArgs<float, H> args{};
    args.op = bop;
    check(op, "binary", args, run);
  };
  using Bop = o::BinaryOp;
  check_binary("add", Bop::add, [&] { o::add(dev, x, y, out).get(); });
  check_binary("mul", Bop::mul, [&] { o::mul(dev, x, y, out).get(); });
  check_binary("minimum", Bop::min, [&] { o::minimum(dev, x, y, out).get(); });
  check_binary("maximum", Bop::max, [&] { o::maximum(dev, x, y, out).get(); });
  check("sum", "sum", o::SumArgs<float, H>{}, [&] { (void)o::sum(dev, x).get(); });
  check("sum", "sum_axis", o::SumAxisArgs<float, H>{}, [&] { o::sum(dev, x, 0, row).get(); });
  check("dot", "dot", o::DotArgs<float, H>{}, [&] { (void)o::dot(dev, x, y).get(); });
  check("gemm", "gemm", o::GemmArgs<float, H>{}, [&] { o::gemm(dev, x, sq, c).get(); });
  check("gather", "gather", o::GatherArgs<float, std::int32_t, H>{}, [&] { o::gather(dev, x, idx, gathered).get(); });
  check("rng_uniform", "rng", o::RngArgs<float, H>{}, [&] { o::rng_uniform(dev, out).get(); });
  check("rng_normal", "rng", o::RngArgs<float, H>{}, [&] { o::rng_normal(dev, out).get(); });
  check("convert", "convert", o::ConvertArgs<float, bf16, H>{}, [&] { o::convert(dev, x, half).get(); });
  // A copy is a transfer, which every backend has: never a fallback.
  const auto before = fallback_counters();
  xdev::ops::copy(dev, x, out).get();
  EXPECT_EQ(fallback_counters(), before);
}

// Typed targets only: which ops run natively is read from the backend type, which an AnyDevice
// target does not name (tests/any checks the erased path's fallback accounting).
XDEV_DEVICE_TEST_P(Ops, EachOpCountsItsFallbackExactlyOnce) {
  if (!this->require(!TestFixture::erased, TypeParam::name() +
                                               " gives AnyDevices: this test reads which ops the backend type "
                                               "implements, and an AnyDevice target names no backend type"))
    return;
  if constexpr (!TestFixture::erased) check_fallback_counts<typename TestFixture::backend>(this->device());
}

}  // namespace xdev::testing::op_suite
