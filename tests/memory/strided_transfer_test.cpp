// Transfers of strided windows: the regions a window makes (`detail::RegionPlan`), one backend
// call per region for a backend with `concepts::StridedTransfers` (typed, through AnyDevice, both
// directions), and one plain transfer per contiguous run for a backend without it.
#include <xdev/any/any_device.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/backend/strided_region.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/memory/array_view.hpp>
#include <xdev/memory/detail/view_layout.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

namespace {

using Host = xdev::backends::Host;
using xdev::Range;
using xdev::detail::RegionPlan;
using xdev::detail::ViewLayout;

ViewLayout layout(std::size_t offset, xdev::Shape shape, std::vector<std::int64_t> strides) {
  ViewLayout l;
  l.offset = offset;
  l.shape = shape;
  for (std::size_t d = 0; d < strides.size(); ++d) l.strides[d] = strides[d];
  return l;
}

// ---- the regions of a window -----------------------------------------------------------------

TEST(RegionPlan, AColumnBlockIsOneRegionWithOneRowPerArrayRow) {
  // Columns [1, 4) of an [8, 6] float array.
  const ViewLayout l = layout(1, {8, 3}, {6, 1});
  EXPECT_EQ(l.run_count(), 8u);  // strided: transfers take the regions
  const RegionPlan p(l, sizeof(float));
  ASSERT_EQ(p.count(), 1u);
  const xdev::StridedRegion r = p.region(0);
  EXPECT_EQ(r.offset, 4u);
  EXPECT_EQ(r.row_bytes, 12u);
  EXPECT_EQ(r.rows, 8u);
  EXPECT_EQ(r.row_pitch, 24u);
  EXPECT_EQ(r.slices, 1u);
  EXPECT_EQ(r.slice_pitch, 8u * 24u);
  EXPECT_EQ(p.region_bytes(), 8u * 12u);
  EXPECT_EQ(r.row_offset(5), 4u + 5u * 24u);
}

TEST(RegionPlan, ABoxOfARankThreeArrayIsRowsAndSlices) {
  // [1, 3) x [1, 4) x [2, 5) of a [4, 5, 6] array.
  const RegionPlan p(layout(38, {2, 3, 3}, {30, 6, 1}), sizeof(float));
  ASSERT_EQ(p.count(), 1u);
  const xdev::StridedRegion r = p.region(0);
  EXPECT_EQ(r.offset, 38u * 4u);
  EXPECT_EQ(r.row_bytes, 12u);
  EXPECT_EQ(r.rows, 3u);
  EXPECT_EQ(r.row_pitch, 24u);
  EXPECT_EQ(r.slices, 2u);
  EXPECT_EQ(r.slice_pitch, 120u);
  EXPECT_EQ(r.row_offset(4), 38u * 4u + 120u + 24u);  // slice 1, row 1
}

TEST(RegionPlan, DimensionsThatLineUpMergeAndExtentsOfOneDisappear) {
  // [0, 3) x [0, 4) x all x [2, 4) of a [3, 8, 5, 6] array: dimensions 1 and 2 line up and make
  // 20 rows, dimension 0 the slices. (Of a [3, 4, 5, 6] array all three would make 60 rows.)
  const RegionPlan all(layout(2, {3, 4, 5, 2}, {120, 30, 6, 1}), sizeof(float));
  EXPECT_EQ(all.region(0).rows, 60u);
  EXPECT_EQ(all.region(0).slices, 1u);
  const RegionPlan merged(layout(2, {3, 4, 5, 2}, {240, 30, 6, 1}), sizeof(float));
  ASSERT_EQ(merged.count(), 1u);
  EXPECT_EQ(merged.region(0).rows, 20u);
  EXPECT_EQ(merged.region(0).row_pitch, 24u);
  EXPECT_EQ(merged.region(0).slices, 3u);
  EXPECT_EQ(merged.region(0).slice_pitch, 960u);

  // Extents of 1 between strided dimensions change nothing.
  const RegionPlan ones(layout(1, {1, 8, 1, 3}, {48, 6, 6, 1}), sizeof(double));
  ASSERT_EQ(ones.count(), 1u);
  EXPECT_EQ(ones.region(0).rows, 8u);
  EXPECT_EQ(ones.region(0).row_pitch, 48u);
  EXPECT_EQ(ones.region(0).slices, 1u);
  EXPECT_EQ(ones.region(0).row_bytes, 24u);
}

TEST(RegionPlan, MoreThanTwoStridedDimensionsMakeOneRegionPerOuterIndex) {
  // [0, 3) x [1, 3) x [1, 4) x [2, 4) of a [3, 4, 5, 6] array.
  const RegionPlan p(layout(38, {3, 2, 3, 2}, {120, 30, 6, 1}), sizeof(float));
  ASSERT_EQ(p.count(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const xdev::StridedRegion r = p.region(i);
    EXPECT_EQ(r.offset, 38u * 4u + i * 480u) << i;
    EXPECT_EQ(r.rows, 3u);
    EXPECT_EQ(r.slices, 2u);
    EXPECT_EQ(r.slice_pitch, 120u);
  }
  EXPECT_EQ(p.region_bytes(), 2u * 3u * 2u * 4u);
}

TEST(PairPlan, TwoWindowsShareTheirCommonDenseTailAndKeepTheirOwnPitches) {
  // Columns [1, 4) of an [8, 6] array into a dense [8, 3] one: 8 rows of 3, pitches 24 and 12.
  const xdev::detail::PairPlan p(layout(1, {8, 3}, {6, 1}), layout(0, {8, 3}, {3, 1}), sizeof(float));
  ASSERT_EQ(p.count(), 1u);
  const auto pair = p.pair(0);
  EXPECT_EQ(pair.src.row_bytes, 12u);
  EXPECT_EQ(pair.dst.row_bytes, 12u);
  EXPECT_EQ(pair.src.rows, 8u);
  EXPECT_EQ(pair.src.row_pitch, 24u);
  EXPECT_EQ(pair.dst.row_pitch, 12u);
  EXPECT_EQ(pair.src.offset, 4u);
  EXPECT_EQ(pair.dst.offset, 0u);
  // A whole [4, 5, 6] array (one run) into rows [1, 6) of dimension 1 of a [4, 8, 6] one: the
  // tail common to both is 5 x 6 elements, so 4 rows of 120 bytes at pitches 120 and 192.
  const xdev::detail::PairPlan q(layout(0, {4, 5, 6}, {30, 6, 1}), layout(6, {4, 5, 6}, {48, 6, 1}), sizeof(float));
  ASSERT_EQ(q.count(), 1u);
  EXPECT_EQ(q.pair(0).src.row_bytes, 120u);
  EXPECT_EQ(q.pair(0).src.rows, 4u);
  EXPECT_EQ(q.pair(0).src.row_pitch, 120u);
  EXPECT_EQ(q.pair(0).dst.row_pitch, 192u);
  EXPECT_EQ(q.pair(0).dst.offset, 24u);
}

TEST(RegionPlan, ContiguousAndEmptyWindows) {
  const ViewLayout l = layout(12, {2, 6}, {6, 1});
  EXPECT_EQ(l.run_count(), 1u);  // contiguous: transfers take the plain path
  const RegionPlan rows(l, sizeof(float));
  EXPECT_EQ(rows.count(), 1u);
  EXPECT_EQ(rows.region(0).rows * rows.region(0).slices, 1u);
  EXPECT_EQ(rows.region_bytes(), 48u);
  const RegionPlan empty(layout(0, {0, 6}, {6, 1}), sizeof(float));
  EXPECT_EQ(empty.count(), 0u);
}

// ---- one call per region, or one per run ---------------------------------------------------------

// The host backend, counting the transfers it is asked for.
class CountingHost : public Host {
 public:
  CountingHost() : Host(Host::Options{.devices = 1, .threads = 2}) {}
  void copy_to_host(std::size_t d, memory_handle s, std::size_t at, void* dst, std::size_t n, xdev::Completion c) {
    ++plain;
    Host::copy_to_host(d, s, at, dst, n, std::move(c));
  }
  void copy_to_device(std::size_t d, const void* src, memory_handle h, std::size_t at, std::size_t n,
                      xdev::Completion c) {
    ++plain;
    Host::copy_to_device(d, src, h, at, n, std::move(c));
  }
  void copy_to_host_strided(std::size_t d, memory_handle s, const xdev::StridedRegion& r, void* dst,
                            xdev::Completion c) {
    ++strided;
    Host::copy_to_host_strided(d, s, r, dst, std::move(c));
  }
  void copy_to_device_strided(std::size_t d, const void* src, memory_handle h, const xdev::StridedRegion& r,
                              xdev::Completion c) {
    ++strided;
    Host::copy_to_device_strided(d, src, h, r, std::move(c));
  }
  void copy_between(std::size_t sd, memory_handle s, std::size_t from, std::size_t dd, memory_handle d, std::size_t to,
                    std::size_t n, xdev::Completion c) {
    ++plain;
    Host::copy_between(sd, s, from, dd, d, to, n, std::move(c));
  }
  void copy_between_strided(std::size_t sd, memory_handle s, const xdev::StridedRegion& sr, std::size_t dd,
                            memory_handle d, const xdev::StridedRegion& dr, xdev::Completion c) {
    ++strided;
    Host::copy_between_strided(sd, s, sr, dd, d, dr, std::move(c));
  }
  std::atomic<int> plain{0};
  std::atomic<int> strided{0};
};

// The same without the strided hook.
class RunsOnlyHost : public CountingHost {
 public:
  void copy_to_host_strided(std::size_t, memory_handle, const xdev::StridedRegion&, void*, xdev::Completion) = delete;
  void copy_to_device_strided(std::size_t, const void*, memory_handle, const xdev::StridedRegion&,
                              xdev::Completion) = delete;
  void copy_between_strided(std::size_t, memory_handle, const xdev::StridedRegion&, std::size_t, memory_handle,
                            const xdev::StridedRegion&, xdev::Completion) = delete;
};

static_assert(xdev::concepts::StridedTransfers<Host>);
static_assert(xdev::concepts::StridedTransfers<CountingHost>);
static_assert(!xdev::concepts::StridedTransfers<RunsOnlyHost>);
static_assert(xdev::concepts::StridedCopies<Host> && !xdev::concepts::StridedCopies<RunsOnlyHost>);

// [0, 1, 2, ...] in an array of `shape` on `dev`.
template <class Dev>
auto iota_array(const Dev& dev, xdev::Shape shape) {
  auto a = xdev::empty<float>(dev, shape);
  std::vector<float> v(a.size());
  std::iota(v.begin(), v.end(), 0.0f);
  dev.copy_to_device(std::span<const float>(v), a.buffer()).get();
  return a;
}

// The elements of the box [r0, r1) x [c0, c1) x [k0, k1) of an iota array of shape [R, C, K].
std::vector<float> iota_box(std::int64_t C, std::int64_t K, Range r, Range c, Range k) {
  std::vector<float> out;
  for (auto i = r.begin; i < r.end; ++i)
    for (auto j = c.begin; j < c.end; ++j)
      for (auto l = k.begin; l < k.end; ++l) out.push_back(static_cast<float>((i * C + j) * K + l));
  return out;
}

template <class B>
class StridedTransfers : public ::testing::Test {
 protected:
  xdev::Runtime<B> rt{};
  xdev::Device<B> dev = rt.device(0);
  B& backend() { return const_cast<B&>(dev.backend()); }
};
using Backends = ::testing::Types<CountingHost, RunsOnlyHost>;
TYPED_TEST_SUITE(StridedTransfers, Backends);

TYPED_TEST(StridedTransfers, ABoxGoesToTheHostInOneCallPerRegionOrOnePerRun) {
  constexpr bool hook = std::is_same_v<TypeParam, CountingHost>;
  auto a = iota_array(this->dev, {4, 5, 6});
  auto& b = this->backend();
  const Range r{1, 3}, c{1, 4}, k{2, 5};
  std::vector<float> out(2 * 3 * 3);
  b.plain = 0;
  this->dev.copy_to_host(xdev::slice(a, r, c, k), std::span<float>(out)).get();
  EXPECT_EQ(out, iota_box(5, 6, r, c, k));
  EXPECT_EQ(b.strided.load(), hook ? 1 : 0);
  EXPECT_EQ(b.plain.load(), hook ? 0 : 6);  // 2 x 3 runs of 3 elements

  // A contiguous window is one plain transfer either way.
  b.strided = 0;
  b.plain = 0;
  std::vector<float> rows(2 * 5 * 6);
  this->dev.copy_to_host(xdev::slice(a, {1, 3}), std::span<float>(rows)).get();
  EXPECT_EQ(rows, iota_box(5, 6, {1, 3}, {0, 5}, {0, 6}));
  EXPECT_EQ(b.strided.load(), 0);
  EXPECT_EQ(b.plain.load(), 1);
}

TYPED_TEST(StridedTransfers, WritingAColumnOfEverySliceChangesItAndNothingElse) {
  constexpr bool hook = std::is_same_v<TypeParam, CountingHost>;
  auto a = iota_array(this->dev, {3, 4, 5});
  auto& b = this->backend();
  b.plain = 0;
  const std::vector<float> patch{-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12};
  this->dev.default_stream()
      .copy_to_device(std::span<const float>(patch), xdev::slice(a, xdev::all, xdev::all, {3, 4}))
      .get();
  EXPECT_EQ(b.strided.load(), hook ? 1 : 0);
  EXPECT_EQ(b.plain.load(), hook ? 0 : 12);
  std::vector<float> all(60);
  this->dev.copy_to_host(a.buffer(), std::span<float>(all)).get();
  for (std::size_t i = 0; i < all.size(); ++i)
    EXPECT_EQ(all[i], i % 5 == 3 ? patch[i / 5] : static_cast<float>(i)) << "element " << i;
}

TYPED_TEST(StridedTransfers, ErasedWindowsMakeTheSameCallsThroughAnyDevice) {
  constexpr bool hook = std::is_same_v<TypeParam, CountingHost>;
  xdev::AnyDevice any(this->dev);
  auto a = iota_array(any, {3, 4, 5, 6});
  auto& b = this->backend();
  b.strided = 0;
  b.plain = 0;
  // [0, 3) x [1, 3) x [1, 4) x [2, 4): three regions of 2 x 3 rows of 2 elements.
  std::vector<float> out(3 * 2 * 3 * 2);
  any.copy_to_host(xdev::slice(a, xdev::all, {1, 3}, {1, 4}, {2, 4}), std::span<float>(out)).get();
  std::vector<float> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 1; j < 3; ++j)
      for (int k = 1; k < 4; ++k)
        for (int l = 2; l < 4; ++l) want.push_back(static_cast<float>(((i * 4 + j) * 5 + k) * 6 + l));
  EXPECT_EQ(out, want);
  EXPECT_EQ(b.strided.load(), hook ? 3 : 0);
  EXPECT_EQ(b.plain.load(), hook ? 0 : 18);

  // And back, on a stream of its own, into another array's same window.
  auto z = xdev::empty<float>(any, {3, 4, 5, 6});
  const std::vector<float> zero(z.size(), 0.0f);
  any.copy_to_device(std::span<const float>(zero), z).get();
  b.strided = 0;
  b.plain = 0;
  auto stream = any.make_stream();
  stream.copy_to_device(std::span<const float>(out), xdev::slice(z, xdev::all, {1, 3}, {1, 4}, {2, 4})).get();
  EXPECT_EQ(b.strided.load(), hook ? 3 : 0);
  EXPECT_EQ(b.plain.load(), hook ? 0 : 18);
  std::vector<float> all(z.size());
  any.copy_to_host(z, std::span<float>(all)).get();
  std::size_t set = 0;
  for (std::size_t e = 0; e < all.size(); ++e) {
    const std::size_t l = e % 6, k = e / 6 % 5, j = e / 30 % 4;
    const bool inside = j >= 1 && j < 3 && k >= 1 && k < 4 && l >= 2 && l < 4;
    if (inside) {
      ++set;
      EXPECT_EQ(all[e], static_cast<float>(e)) << e;
    } else {
      EXPECT_EQ(all[e], 0.0f) << e;
    }
  }
  EXPECT_EQ(set, out.size());
}

TYPED_TEST(StridedTransfers, AWindowCopiesIntoAnotherInOneCallPerPairOrOnePerRow) {
  constexpr bool hook = std::is_same_v<TypeParam, CountingHost>;
  auto a = iota_array(this->dev, {4, 5, 6});
  auto b = xdev::empty<float>(this->dev, {4, 8, 6});
  const std::vector<float> minus(b.size(), -1.0f);
  this->dev.copy_to_device(std::span<const float>(minus), b.buffer()).get();
  auto& c = this->backend();
  c.strided = 0;
  c.plain = 0;
  // A box of `a` into a box of `b`: one pair of regions (3 rows of 3, in 2 slices).
  this->dev.copy(xdev::slice(a, {1, 3}, {1, 4}, {2, 5}), xdev::slice(b, {0, 2}, {4, 7}, {0, 3})).get();
  EXPECT_EQ(c.strided.load(), hook ? 1 : 0);
  EXPECT_EQ(c.plain.load(), hook ? 0 : 6);
  std::vector<float> all(b.size());
  this->dev.copy_to_host(b.buffer(), std::span<float>(all)).get();
  const std::vector<float> box = iota_box(5, 6, {1, 3}, {1, 4}, {2, 5});
  std::size_t p = 0;
  for (std::size_t e = 0; e < all.size(); ++e) {
    const std::size_t l = e % 6, k = e / 6 % 8, i = e / 48;
    const bool inside = i < 2 && k >= 4 && k < 7 && l < 3;
    EXPECT_EQ(all[e], inside ? box[p++] : -1.0f) << e;
  }
  // Through AnyDevice, two columns of one array (interleaved windows): one pair, or a copy per row.
  xdev::AnyDevice any(this->dev);
  auto z = iota_array(any, {6, 4});
  c.strided = 0;
  c.plain = 0;
  any.copy(xdev::slice(z, xdev::all, {0, 1}), xdev::slice(z, xdev::all, {3, 4})).get();
  EXPECT_EQ(c.strided.load(), hook ? 1 : 0);
  EXPECT_EQ(c.plain.load(), hook ? 0 : 6);
  std::vector<float> zs(z.size());
  any.copy_to_host(z, std::span<float>(zs)).get();
  for (std::size_t e = 0; e < zs.size(); ++e)
    EXPECT_EQ(zs[e], e % 4 == 3 ? static_cast<float>(e - 3) : static_cast<float>(e)) << e;
}

}  // namespace
