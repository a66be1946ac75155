#include <xdev/policy/capabilities.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

namespace {

using ::testing::HasSubstr;
using namespace xdev;

using Npu =
    Capabilities<DenseGather<8192>, RngDefault<RngAlgorithm::three_fry>, Autocast<AutocastKey::npu, DType::bf16>,
                 MaxInflight<32>, SupportedDTypes<DType::f32, DType::bf16, DType::i32>,
                 MemoryPerDevice<std::size_t{16} << 30>, CollectiveBackend<CollectiveKind::direct>, Priority<10>>;

TEST(Capabilities, GivenPoliciesAreReadable) {
  static_assert(Npu::dense_gather_factor == 8192);
  static_assert(Npu::rng_default == RngAlgorithm::three_fry);
  static_assert(Npu::autocast_key == AutocastKey::npu && Npu::autocast_dtype == DType::bf16);
  static_assert(Npu::max_inflight == 32);
  static_assert(Npu::supports(DType::bf16) && !Npu::supports(DType::f64));
  static_assert(Npu::memory_per_device == std::size_t{16} << 30);
  static_assert(Npu::collective_backend == CollectiveKind::direct);
  static_assert(Npu::priority == 10);
}

TEST(Capabilities, OmittedKindsTakeTheDocumentedDefaults) {
  using C = Capabilities<>;
  static_assert(C::dense_gather_factor == 0);
  static_assert(C::rng_default == RngAlgorithm::philox);
  static_assert(C::autocast_key == AutocastKey::none && C::autocast_dtype == DType::f32);
  static_assert(C::max_inflight == 32);
  static_assert(C::memory_per_device == 0);
  static_assert(C::collective_backend == CollectiveKind::ring);
  static_assert(C::priority == 0);
  for (DType t : all_dtypes) EXPECT_TRUE(C::supports(t)) << t;
  // The run-time defaults are the same values.
  static_assert(C::set == CapabilitySet{});
}

TEST(Capabilities, OrderOfPoliciesDoesNotMatter) {
  using A = Capabilities<MaxInflight<4>, DenseGather<2>>;
  using B = Capabilities<DenseGather<2>, MaxInflight<4>>;
  static_assert(A::set == B::set);
}

TEST(CapabilitySet, GeneratedAtCompileTimeFromTheList) {
  constexpr CapabilitySet s = Npu::set;
  static_assert(s.dense_gather_factor == 8192 && s.max_inflight == 32 && s.priority == 10);
  static_assert(s.supports(DType::i32) && !s.supports(DType::u8));
  EXPECT_NE(s, CapabilitySet{});
}

TEST(CapabilitySet, DenseGatherThreshold) {
  constexpr CapabilitySet s = Npu::set;
  static_assert(s.uses_dense_gather(81920) && !s.uses_dense_gather(81921));
  static_assert(!Capabilities<DenseGather<0>>::set.uses_dense_gather(1));
}

TEST(CapabilitySet, Prints) {
  std::ostringstream os;
  os << Npu::set;
  EXPECT_EQ(os.str(),
            "{dense_gather=8192, rng=three_fry, autocast=npu:bf16, max_inflight=32, dtypes=[i32,bf16,f32], "
            "memory=17179869184, collective=direct, priority=10}");
  EXPECT_EQ(to_string(Npu::set), os.str());
  EXPECT_THAT(to_string(CapabilitySet{}), HasSubstr("memory=unknown"));
}

}  // namespace
