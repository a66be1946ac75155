// xdev::spmd::IndexBox and xdev::spmd::Sharding: box arithmetic, the sharding's validation against
// a mesh and an array shape, the block every device holds (axis order, multi-axis dimensions,
// replication), that the blocks tile the array, and the run decomposition the transfer code uses,
// checked against an element-by-element mapping.
#include <xdev/spmd/sharding.hpp>

#include <xdev/any/any_device.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "support/error_of.hpp"

namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Host = xdev::backends::Host;
using xdev::AnyDevice;
using xdev::Shape;
using xdev::spmd::IndexBox;
using xdev::spmd::Mesh;
using xdev::spmd::PartitionSpec;
using xdev::spmd::replicated;
using xdev::spmd::Sharding;
using CopyRun = std::tuple<std::size_t, std::size_t, std::size_t>;  // src offset, dst offset, count

using xdev_test::expect_error;

std::vector<CopyRun> runs_of(const IndexBox& region, const IndexBox& src, const IndexBox& dst) {
  std::vector<CopyRun> out;
  xdev::spmd::detail::for_each_run(region, src, dst,
                                   [&](std::size_t s, std::size_t d, std::size_t n) { out.emplace_back(s, d, n); });
  return out;
}

// ---- IndexBox ---------------------------------------------------------------------------------

TEST(IndexBox, ExtentsShapeAndCount) {
  const IndexBox b({0, 2}, {4, 8});
  EXPECT_EQ(b.rank(), 2U);
  EXPECT_EQ(b.begin(1), 2);
  EXPECT_EQ(b.end(1), 8);
  EXPECT_EQ(b.extent(0), 4);
  EXPECT_EQ(b.extent(1), 6);
  EXPECT_THAT(b.begins(), ElementsAre(0, 2));
  EXPECT_THAT(b.ends(), ElementsAre(4, 8));
  EXPECT_EQ(b.shape(), (Shape{4, 6}));
  EXPECT_EQ(b.numel(), 24);
  EXPECT_FALSE(b.empty());
  EXPECT_TRUE(IndexBox({1, 3}, {1, 5}).empty());
  EXPECT_EQ(b.to_string(), "[0:4, 2:8]");
  std::ostringstream os;
  os << IndexBox({3}, {3});
  EXPECT_EQ(os.str(), "[3:3]");
}

TEST(IndexBox, RankZeroHoldsOneIndex) {
  const IndexBox scalar;
  EXPECT_EQ(scalar.rank(), 0U);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_FALSE(scalar.empty());
  EXPECT_EQ(scalar.to_string(), "[]");
  EXPECT_EQ(scalar.shape(), Shape{});
  EXPECT_EQ(xdev::spmd::detail::full_box(Shape{}), scalar);
}

TEST(IndexBox, RejectsMalformedBounds) {
  using xdev::errc;
  expect_error(errc::invalid_argument, [] { IndexBox({0, 0}, {4}); }, {"index box has 2 begins but 1 ends"});
  expect_error(errc::invalid_argument,
               [] {
                 IndexBox({0, 5}, {4, 3});
               },
               {"index box range 5:3 in dimension 1 is invalid; it needs 0 <= begin <= end"});
  expect_error(errc::invalid_argument, [] { IndexBox({-1}, {3}); }, {"range -1:3 in dimension 0"});
  expect_error(errc::invalid_argument,
               [] {
                 IndexBox({0, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
               },
               {"rank 9 exceeds the maximum rank 8"});
  expect_error(errc::invalid_argument, [] { (void)IndexBox({0}, {4}).extent(1); },
               {"dimension 1 is out of range for index box [0:4] of rank 1"});
}

TEST(IndexBox, IntersectAndContains) {
  const IndexBox a({0, 0}, {4, 8});
  const IndexBox b({2, 4}, {6, 12});
  EXPECT_EQ(a.intersect(b), IndexBox({2, 4}, {4, 8}));
  EXPECT_EQ(b.intersect(a), IndexBox({2, 4}, {4, 8}));
  EXPECT_EQ(a.intersect(a), a);

  const IndexBox disjoint = a.intersect(IndexBox({4, 0}, {8, 8}));
  EXPECT_TRUE(disjoint.empty());
  EXPECT_EQ(disjoint.rank(), 2U);
  EXPECT_EQ(disjoint, IndexBox({0, 0}, {0, 0})) << "empty boxes of one rank are equal";
  EXPECT_NE(disjoint, IndexBox({0}, {0})) << "but not across ranks";
  EXPECT_NE(a, b);

  EXPECT_TRUE(a.contains(IndexBox({1, 1}, {3, 8})));
  EXPECT_FALSE(a.contains(b));
  EXPECT_TRUE(a.contains(disjoint)) << "every box contains an empty one";
  EXPECT_TRUE(a.contains({3, 7}));
  EXPECT_FALSE(a.contains({4, 7}));
  EXPECT_FALSE(a.contains({0, 8}));

  expect_error(xdev::errc::invalid_argument, [&] { (void)a.intersect(IndexBox({0}, {1})); },
               {"IndexBox::intersect of boxes of different ranks: [0:4, 0:8] and [0:1]"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)a.contains({1}); },
               {"index of 1 entries tested against box [0:4, 0:8] of rank 2"});
}

TEST(IndexBox, FullBoxCoversTheShape) {
  EXPECT_EQ(xdev::spmd::detail::full_box(Shape{8, 6}), IndexBox({0, 0}, {8, 6}));
}

// ---- Sharding ---------------------------------------------------------------------------------

class ShardingTest : public ::testing::Test {
 protected:
  std::vector<AnyDevice> devices(std::size_t n) {
    std::vector<AnyDevice> out;
    for (std::size_t i = 0; i < n; ++i) out.emplace_back(rt.device(i));
    return out;
  }
  Mesh line(std::size_t n, std::string axis = "data") { return Mesh(devices(n), std::move(axis)); }
  // (x, y): devices 0..3 at (0,0) (0,1) (1,0) (1,1).
  Mesh square() { return Mesh(devices(4), {2, 2}, {"x", "y"}); }

  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 8, .threads = 2}};
};

TEST_F(ShardingTest, RejectsAnAxisTheMeshDoesNotHave) {
  expect_error(
      xdev::errc::invalid_argument,
      [&] {
        Sharding(square(), {"x", "modl"});
      },
      {"PartitionSpec ('x', 'modl') uses axis 'modl', which the mesh does not have; the mesh's axes are 'x', 'y'",
       "Mesh(x=2, y=2: HOST:0 HOST:1 HOST:2 HOST:3)"});
  expect_error(xdev::errc::invalid_argument, [&] { Sharding(Mesh(), {}); }, {"a Sharding needs a non-empty mesh"});
}

TEST_F(ShardingTest, RejectsASpecLongerThanTheArray) {
  const Sharding s(line(2, "a"), {"a", replicated, replicated});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 s.validate({8, 4});
               },
               {"rank mismatch: spec ('a', None, None) has 3 dimensions but the array [8, 4] has rank 2",
                "Sharding(Mesh(a=2: HOST:0 HOST:1), ('a', None, None))"});
  EXPECT_THROW((void)s.shard_box({8, 4}, 0), xdev::error);
  EXPECT_THROW((void)s.shard_boxes({8, 4}), xdev::error);
  EXPECT_THROW((void)s.shard_shape({8, 4}), xdev::error);
}

TEST_F(ShardingTest, AnExtentThatDoesNotDivideGivesShorterLastShards) {
  const Sharding rows(line(4), {"data", replicated});
  EXPECT_THAT(rows.shard_boxes({10, 3}), ElementsAre(IndexBox({0, 0}, {3, 3}), IndexBox({3, 0}, {6, 3}),
                                                     IndexBox({6, 0}, {9, 3}), IndexBox({9, 0}, {10, 3})));
  EXPECT_THAT(rows.shard_boxes({5, 3}), ElementsAre(IndexBox({0, 0}, {2, 3}), IndexBox({2, 0}, {4, 3}),
                                                    IndexBox({4, 0}, {5, 3}), IndexBox({5, 0}, {5, 3})))
      << "ceil(5 / 4) = 2 rows each: the last shard is empty";
  EXPECT_TRUE(rows.shard_box({5, 3}, 3).empty());
  EXPECT_THAT(rows.shard_boxes({0, 3}), Each(IndexBox({0, 0}, {0, 3})));
  EXPECT_EQ(rows.shard_shape({10, 3}, 1), (Shape{3, 3}));
  EXPECT_EQ(rows.shard_shape({10, 3}, 3), (Shape{1, 3}));
  EXPECT_FALSE(rows.is_even({10, 3}));
  EXPECT_TRUE(rows.is_even({8, 3}));
  EXPECT_TRUE(rows.is_even({8, 5})) << "the replicated dimension never splits";
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 (void)rows.shard_shape({10, 3});
               },
               {"the shards of [10, 3] differ in shape: dimension 0 of extent 10 is split into 4 blocks of at most 3",
                "shard_shape(global, device)"});

  // Two axes on one dimension: 12 over 8 blocks of 2, the last two empty.
  const Sharding s(Mesh(devices(8), {2, 4}, {"data", "model"}), {replicated, {"data", "model"}});
  EXPECT_NO_THROW(s.validate({3, 12}));
  const auto boxes = s.shard_boxes({3, 12});
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_EQ(boxes[i], IndexBox({0, 2 * static_cast<std::int64_t>(i)}, {3, 2 * static_cast<std::int64_t>(i) + 2}));
  EXPECT_TRUE(boxes[6].empty());
  EXPECT_TRUE(boxes[7].empty());
}

TEST_F(ShardingTest, UnevenBoxesTileTheArrayExactlyOnce) {
  const Mesh m(devices(6), {2, 3}, {"x", "y"});
  for (const auto& spec :
       {PartitionSpec{"x", "y"}, PartitionSpec{{"x", "y"}}, PartitionSpec{{"y", "x"}, replicated}, PartitionSpec{"y"}})
    for (const Shape& shape : {Shape{7, 5}, Shape{1, 1}, Shape{13, 2}, Shape{6, 3}}) {
      const Sharding s(m, spec);
      std::vector<int> held(static_cast<std::size_t>(shape.numel()), 0);
      for (const auto& box : s.shard_boxes(shape))
        for (std::int64_t r = box.begin(0); r < box.end(0); ++r)
          for (std::int64_t c = box.begin(1); c < box.end(1); ++c) ++held[static_cast<std::size_t>(r * shape[1] + c)];
      EXPECT_THAT(held, Each(static_cast<int>(s.replication_factor()))) << s << " on " << shape;
    }
}

TEST_F(ShardingTest, RowsOverFourDevices) {
  const Sharding s(line(4), {"data", replicated});
  const Shape global{8, 6};
  EXPECT_EQ(s.shard_shape(global), (Shape{2, 6}));
  EXPECT_THAT(s.shard_boxes(global), ElementsAre(IndexBox({0, 0}, {2, 6}), IndexBox({2, 0}, {4, 6}),
                                                 IndexBox({4, 0}, {6, 6}), IndexBox({6, 0}, {8, 6})));
  EXPECT_EQ(s.shard_box(global, 3), IndexBox({6, 0}, {8, 6}));
  EXPECT_EQ(s.shard_count(0), 4);
  EXPECT_EQ(s.shard_count(1), 1);
  EXPECT_EQ(s.shard_count(5), 1) << "past the spec: replicated";
  EXPECT_EQ(s.shard_index(2, 0), 2);
  EXPECT_EQ(s.shard_index(2, 1), 0);
  EXPECT_EQ(s.replication_factor(), 1U);
  EXPECT_FALSE(s.is_fully_replicated());
  expect_error(xdev::errc::invalid_argument, [&] { (void)s.shard_box(global, 4); },
               {"mesh device index 4 is out of range"});
}

TEST_F(ShardingTest, ColumnsOverFourDevices) {
  const Sharding s(line(4), {replicated, "data"});
  EXPECT_EQ(s.shard_shape({6, 8}), (Shape{6, 2}));
  EXPECT_THAT(s.shard_boxes({6, 8}), ElementsAre(IndexBox({0, 0}, {6, 2}), IndexBox({0, 2}, {6, 4}),
                                                 IndexBox({0, 4}, {6, 6}), IndexBox({0, 6}, {6, 8})));
}

TEST_F(ShardingTest, AShortSpecLeavesTrailingDimensionsWhole) {
  const Sharding shorter(line(4), {"data"});
  const Sharding longer(line(4), {"data", replicated});
  EXPECT_EQ(shorter.shard_boxes({8, 6}), longer.shard_boxes({8, 6}));
  EXPECT_EQ(shorter.shard_shape({8, 6, 5}), (Shape{2, 6, 5}));
  EXPECT_NE(shorter, longer) << "equality compares the specs themselves";
}

TEST_F(ShardingTest, TwoAxesOnOneDimensionAreRowMajorFirstAxisOutermost) {
  const Sharding xy(square(), {{"x", "y"}, replicated});
  // Device (x, y) holds block x*2 + y.
  EXPECT_THAT(xy.shard_boxes({8, 2}), ElementsAre(IndexBox({0, 0}, {2, 2}), IndexBox({2, 0}, {4, 2}),
                                                  IndexBox({4, 0}, {6, 2}), IndexBox({6, 0}, {8, 2})));
  EXPECT_EQ(xy.shard_count(0), 4);

  const Sharding yx(square(), {{"y", "x"}, replicated});
  // Device (x, y) holds block y*2 + x: devices 1 and 2 swap.
  EXPECT_THAT(yx.shard_boxes({8, 2}), ElementsAre(IndexBox({0, 0}, {2, 2}), IndexBox({4, 0}, {6, 2}),
                                                  IndexBox({2, 0}, {4, 2}), IndexBox({6, 0}, {8, 2})));
  EXPECT_EQ(xy.replication_factor(), 1U);
}

TEST_F(ShardingTest, EachDimensionFollowsItsOwnAxis) {
  const Sharding s(square(), {"y", "x"});
  const Shape global{4, 6};
  EXPECT_EQ(s.shard_shape(global), (Shape{2, 3}));
  // Rows follow y, columns follow x.
  EXPECT_EQ(s.shard_box(global, 0), IndexBox({0, 0}, {2, 3}));  // (x=0, y=0)
  EXPECT_EQ(s.shard_box(global, 1), IndexBox({2, 0}, {4, 3}));  // (x=0, y=1)
  EXPECT_EQ(s.shard_box(global, 2), IndexBox({0, 3}, {2, 6}));  // (x=1, y=0)
  EXPECT_EQ(s.shard_box(global, 3), IndexBox({2, 3}, {4, 6}));  // (x=1, y=1)
}

TEST_F(ShardingTest, FullyReplicated) {
  for (const auto& spec : {PartitionSpec{}, PartitionSpec{replicated, replicated}}) {
    const Sharding s(square(), spec);
    EXPECT_TRUE(s.is_fully_replicated()) << s;
    EXPECT_EQ(s.replication_factor(), 4U);
    EXPECT_EQ(s.shard_shape({5, 3}), (Shape{5, 3}));
    for (const auto& box : s.shard_boxes({5, 3})) EXPECT_EQ(box, IndexBox({0, 0}, {5, 3}));
  }
  // An axis of size 1 splits nothing.
  const Sharding trivial(Mesh(devices(4), {1, 4}, {"a", "b"}), {"a"});
  EXPECT_TRUE(trivial.is_fully_replicated());
  EXPECT_EQ(trivial.replication_factor(), 4U);
  EXPECT_EQ(trivial.shard_shape({3}), Shape{3});
}

TEST_F(ShardingTest, ReplicationFactorCountsUnusedAxes) {
  const Mesh mesh(devices(8), {2, 4}, {"data", "model"});
  EXPECT_EQ(Sharding(mesh, {"data", replicated}).replication_factor(), 4U);
  EXPECT_EQ(Sharding(mesh, {"model"}).replication_factor(), 2U);
  EXPECT_EQ(Sharding(mesh, {{"data", "model"}}).replication_factor(), 1U);
  EXPECT_EQ(Sharding(mesh, {"data", "model"}).replication_factor(), 1U);
  EXPECT_EQ(Sharding(mesh, {}).replication_factor(), 8U);
  EXPECT_FALSE(Sharding(mesh, {"model"}).is_fully_replicated());
}

TEST_F(ShardingTest, BlocksTileTheArrayReplicationFactorTimes) {
  const Mesh m24(devices(8), {2, 4}, {"data", "model"});
  const Mesh m222(devices(8), {2, 2, 2}, {"a", "b", "c"});
  const std::vector<std::pair<Sharding, Shape>> cases{
      {Sharding(m24, {"data", replicated}), Shape{4, 6}},
      {Sharding(m24, {replicated, "model"}), Shape{3, 8}},
      {Sharding(m24, {"model", "data"}), Shape{8, 4}},
      {Sharding(m24, {{"model", "data"}, replicated}), Shape{16, 3}},
      {Sharding(m24, {}), Shape{3, 5}},
      {Sharding(m222, {"c", replicated, {"b", "a"}}), Shape{4, 3, 8}},
      {Sharding(m222, {replicated, "b"}), Shape{2, 6, 5}},
      {Sharding(m222, {"a"}), Shape{2}},
  };
  for (const auto& [s, global] : cases) {
    SCOPED_TRACE(s.to_string() + " over " + xdev::to_string(global));
    const auto boxes = s.shard_boxes(global);
    ASSERT_EQ(boxes.size(), s.mesh().size());
    // Count how often each element is held, walking every box element by element.
    std::vector<std::size_t> held(static_cast<std::size_t>(global.numel()), 0);
    for (const auto& box : boxes) {
      EXPECT_EQ(box.shape(), s.shard_shape(global));
      xdev::spmd::detail::for_each_run(box, xdev::spmd::detail::full_box(global), box,
                                       [&](std::size_t src, std::size_t, std::size_t n) {
                                         for (std::size_t i = 0; i < n; ++i) ++held[src + i];
                                       });
    }
    for (std::size_t i = 0; i < held.size(); ++i)
      ASSERT_EQ(held[i], s.replication_factor()) << "element " << i << " is held " << held[i] << " times";
  }
}

TEST_F(ShardingTest, PrintsMeshAndSpec) {
  const Sharding s(line(4), {"data", replicated});
  EXPECT_EQ(s.to_string(), "Sharding(Mesh(data=4: HOST:0 HOST:1 HOST:2 HOST:3), ('data', None))");
  std::ostringstream os;
  os << s;
  EXPECT_EQ(os.str(), s.to_string());
}

TEST_F(ShardingTest, EqualityComparesMeshAndSpec) {
  EXPECT_EQ(Sharding(square(), {"x"}), Sharding(square(), {"x"}));
  EXPECT_NE(Sharding(square(), {"x"}), Sharding(square(), {"y"}));
  EXPECT_NE(Sharding(square(), {"x"}), Sharding(Mesh(devices(4), {2, 2}, {"x", "z"}), {"x"}));
  EXPECT_EQ(Sharding(square(), {"x"}).mesh(), square());
  EXPECT_EQ(Sharding(square(), {"x"}).spec(), PartitionSpec{"x"});
}

// ---- for_each_run -----------------------------------------------------------------------------

TEST(ForEachRun, WholeConsecutiveRowsAreOneRun) {
  using xdev::spmd::detail::full_box;
  // Rows 2..4 of an [8, 8] host array into a [2, 8] shard.
  EXPECT_THAT(runs_of(IndexBox({2, 0}, {4, 8}), full_box({8, 8}), IndexBox({2, 0}, {4, 8})),
              ElementsAre(CopyRun{16, 0, 16}));
  // And back: the shard's rows into the host array.
  EXPECT_THAT(runs_of(IndexBox({2, 0}, {4, 8}), IndexBox({2, 0}, {4, 8}), full_box({8, 8})),
              ElementsAre(CopyRun{0, 16, 16}));
  // A whole box of rank 3 is one run.
  EXPECT_THAT(runs_of(full_box({2, 3, 4}), full_box({2, 3, 4}), full_box({2, 3, 4})), ElementsAre(CopyRun{0, 0, 24}));
  // Whole trailing planes merge although the leading dimension is partial.
  EXPECT_THAT(runs_of(IndexBox({1, 0, 0}, {2, 3, 4}), full_box({2, 3, 4}), IndexBox({1, 0, 0}, {2, 3, 4})),
              ElementsAre(CopyRun{12, 0, 12}));
}

TEST(ForEachRun, AColumnSplitGivesOneRunPerRow) {
  using xdev::spmd::detail::full_box;
  EXPECT_THAT(runs_of(IndexBox({0, 2}, {4, 4}), full_box({4, 4}), IndexBox({0, 2}, {4, 4})),
              ElementsAre(CopyRun{2, 0, 2}, CopyRun{6, 2, 2}, CopyRun{10, 4, 2}, CopyRun{14, 6, 2}));
  // A region inside both a row block and a column block: whole in neither.
  EXPECT_THAT(runs_of(IndexBox({2, 2}, {4, 4}), IndexBox({2, 0}, {4, 4}), IndexBox({0, 2}, {4, 4})),
              ElementsAre(CopyRun{2, 4, 2}, CopyRun{6, 6, 2}));
}

TEST(ForEachRun, EmptyAndScalarRegions) {
  EXPECT_TRUE(runs_of(IndexBox({2, 0}, {2, 4}), IndexBox({0, 0}, {4, 4}), IndexBox({0, 0}, {4, 4})).empty());
  EXPECT_THAT(runs_of(IndexBox(), IndexBox(), IndexBox()), ElementsAre(CopyRun{0, 0, 1}));
}

TEST(ForEachRun, RejectsARegionOutsideABox) {
  expect_error(
      xdev::errc::invalid_argument,
      [] {
        (void)runs_of(IndexBox({0, 0}, {4, 4}), IndexBox({0, 0}, {4, 4}), IndexBox({0, 0}, {2, 4}));
      },
      {"copy region [0:4, 0:4] is not inside both the source box [0:4, 0:4] and the destination box [0:2, 0:4]"});
  EXPECT_THROW((void)runs_of(IndexBox({0}, {1}), IndexBox({0, 0}, {1, 1}), IndexBox({0}, {1})), xdev::error);
}

// Row-major offset of `index` in a dense buffer holding exactly `box`.
std::size_t offset_in(const IndexBox& box, const std::vector<std::int64_t>& index) {
  std::size_t off = 0;
  for (std::size_t d = 0; d < box.rank(); ++d)
    off = off * static_cast<std::size_t>(box.extent(d)) + static_cast<std::size_t>(index[d] - box.begin(d));
  return off;
}

// A random sub-box of `outer` (possibly empty when `allow_empty`).
IndexBox random_box_in(std::mt19937& rng, const IndexBox& outer, bool allow_empty) {
  std::vector<std::int64_t> lo(outer.rank()), hi(outer.rank());
  for (std::size_t d = 0; d < outer.rank(); ++d) {
    // Often the whole range, so that dimensions merge.
    if (rng() % 3 == 0) {
      lo[d] = outer.begin(d);
      hi[d] = outer.end(d);
      continue;
    }
    const auto e = outer.extent(d);
    const auto a = outer.begin(d) + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(e + 1));
    const auto b = outer.begin(d) + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(e + 1));
    lo[d] = std::min(a, b);
    hi[d] = std::max(a, b);
    if (!allow_empty && lo[d] == hi[d]) {
      if (hi[d] < outer.end(d))
        ++hi[d];
      else
        --lo[d];
    }
  }
  return IndexBox(lo, hi);
}

TEST(ForEachRun, MatchesAnElementByElementMapping) {
  std::mt19937 rng(7);
  int nonempty = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t rank = 1 + rng() % 4;
    std::vector<std::int64_t> zeros(rank, 0), extents(rank);
    for (auto& e : extents) e = 1 + static_cast<std::int64_t>(rng() % 5);
    const IndexBox global(zeros, extents);
    // Two overlapping boxes (both contain a common seed box) and a region inside their overlap.
    const IndexBox seed = random_box_in(rng, global, false);
    IndexBox src = random_box_in(rng, global, false), dst = random_box_in(rng, global, false);
    std::vector<std::int64_t> lo(rank), hi(rank);
    for (std::size_t d = 0; d < rank; ++d) {
      lo[d] = std::min(src.begin(d), seed.begin(d));
      hi[d] = std::max(src.end(d), seed.end(d));
    }
    src = IndexBox(lo, hi);
    for (std::size_t d = 0; d < rank; ++d) {
      lo[d] = std::min(dst.begin(d), seed.begin(d));
      hi[d] = std::max(dst.end(d), seed.end(d));
    }
    dst = IndexBox(lo, hi);
    const IndexBox region = random_box_in(rng, src.intersect(dst), trial % 10 == 0);
    SCOPED_TRACE("region " + region.to_string() + " src " + src.to_string() + " dst " + dst.to_string());

    // Expected: every element of the region in row-major order, as (src offset, dst offset).
    std::vector<std::pair<std::size_t, std::size_t>> expected;
    if (!region.empty()) {
      std::vector<std::int64_t> idx(region.begins().begin(), region.begins().end());
      for (;;) {
        expected.emplace_back(offset_in(src, idx), offset_in(dst, idx));
        std::size_t d = rank;
        while (d > 0 && ++idx[d - 1] == region.end(d - 1)) {
          idx[d - 1] = region.begin(d - 1);
          --d;
        }
        if (d == 0) break;
      }
    }

    const auto runs = runs_of(region, src, dst);
    std::vector<std::pair<std::size_t, std::size_t>> actual;
    for (std::size_t r = 0; r < runs.size(); ++r) {
      const auto [s, d, n] = runs[r];
      ASSERT_GT(n, 0U);
      for (std::size_t i = 0; i < n; ++i) actual.emplace_back(s + i, d + i);
      if (r > 0) {
        const auto [ps, pd, pn] = runs[r - 1];
        EXPECT_LT(pd, d) << "runs in increasing destination order";
        EXPECT_FALSE(ps + pn == s && pd + pn == d) << "run " << r << " continues run " << r - 1 << ": not maximal";
      }
    }
    EXPECT_EQ(actual, expected);
    nonempty += region.empty() ? 0 : 1;
  }
  EXPECT_GT(nonempty, 300);
}

}  // namespace
