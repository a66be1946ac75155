// The virtual device's deferred transfer, mark_sharding, reshard and to_host: what moves where
// (per-device transfer statistics), all-or-nothing failure, and contents.
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/spmd/placement.hpp>

#include "spmd/placement_support.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

namespace {

using xdev_test::devices_of;
using xdev_test::FlakyHost;
using xdev_test::iota_floats;

using xdev::AnyDevice;
using xdev::Shape;
using xdev::spmd::Mesh;
using xdev::spmd::PartitionSpec;
using xdev::spmd::replicated;
using xdev::spmd::Sharding;
using xdev::spmd::VirtualDevice;
using Host = xdev::backends::Host;

// Bytes each device has received from the host / from peers since `before`.
struct TransferDelta {
  std::vector<xdev::TransferStats> before;
  explicit TransferDelta(const Mesh& m) {
    for (const auto& d : m.devices()) before.push_back(d.transfer_stats());
  }
  std::size_t from_host(const Mesh& m, std::size_t i) const {
    return m.device(i).transfer_stats().bytes_from_host - before[i].bytes_from_host;
  }
  std::size_t from_peer(const Mesh& m, std::size_t i) const {
    return m.device(i).transfer_stats().bytes_from_peer - before[i].bytes_from_peer;
  }
  std::size_t total_from_host(const Mesh& m) const {
    std::size_t n = 0;
    for (std::size_t i = 0; i < m.size(); ++i) n += from_host(m, i);
    return n;
  }
  std::size_t total_from_peer(const Mesh& m) const {
    std::size_t n = 0;
    for (std::size_t i = 0; i < m.size(); ++i) n += from_peer(m, i);
    return n;
  }
};

// The expected contents of shard `i`: the elements of its box, in row-major order.
std::vector<float> expected_shard(const std::vector<float>& global, const Shape& shape, const Sharding& s,
                                  std::size_t i) {
  const auto box = s.shard_box(shape, i);
  std::vector<float> out;
  const auto whole = xdev::spmd::detail::full_box(shape);
  out.resize(static_cast<std::size_t>(box.numel()));
  xdev::spmd::detail::for_each_run(box, whole, box, [&](std::size_t src, std::size_t dst, std::size_t n) {
    std::copy_n(global.begin() + static_cast<std::ptrdiff_t>(src), n, out.begin() + static_cast<std::ptrdiff_t>(dst));
  });
  return out;
}

std::vector<float> read_shard(const xdev::AnyArray<float>& a) {
  std::vector<float> out(a.size());
  a.device().copy_to_host(a, std::span<float>(out)).get();
  return out;
}

class ShardedArrayTest : public ::testing::Test {
 protected:
  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 4, .threads = 2}};
  Mesh mesh{devices_of(rt), "data"};
  Mesh mesh2d{devices_of(rt), {2, 2}, {"x", "y"}};
  VirtualDevice vd{mesh};
};

TEST_F(ShardedArrayTest, VirtualDeviceCountsThePhysicalDevicesAndOneLogical) {
  EXPECT_EQ(vd.device_count(), 4u);
  EXPECT_EQ(VirtualDevice::logical_device_count(), 1u);
  EXPECT_EQ(vd.device().name(), "SPMD:0");
  EXPECT_TRUE(VirtualDevice::is_virtual(vd.device()));
  EXPECT_FALSE(VirtualDevice::is_virtual(mesh.device(0)));
  EXPECT_EQ(vd.physical_devices(), mesh.devices());
}

TEST_F(ShardedArrayTest, PlacingDataMovesNothingToAnyDevice) {
  TransferDelta delta(mesh);
  const auto vd_before = vd.device().transfer_stats();
  auto global = iota_floats(64);
  auto x = vd.place(std::span<const float>(global), {8, 8});
  EXPECT_EQ(delta.total_from_host(mesh), 0u);
  EXPECT_EQ(delta.total_from_peer(mesh), 0u);
  EXPECT_EQ(vd.device().transfer_stats().transfers, vd_before.transfers);
  for (const auto& d : mesh.devices()) EXPECT_EQ(d.memory_stats().bytes_in_use, 0u) << d;
  EXPECT_EQ(vd.device().memory_stats().bytes_in_use, 64 * sizeof(float));
  EXPECT_EQ(std::vector<float>(VirtualDevice::host_data(x), VirtualDevice::host_data(x) + 64), global);
}

TEST_F(ShardedArrayTest, TiledShardingMovesExactlyTheArraySizeOnceEachShardToItsDevice) {
  const Shape shape{8, 6};
  auto global = iota_floats(48);
  auto x = vd.place(std::span<const float>(global), shape);
  TransferDelta delta(mesh);
  const auto s = vd.sharding({"data", replicated});
  auto xs = xdev::spmd::mark_sharding(x, s).get();
  EXPECT_EQ(delta.total_from_host(mesh), 48 * sizeof(float));
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(delta.from_host(mesh, i), 12 * sizeof(float)) << "device " << i;
    EXPECT_EQ(xs.shard(i).shape(), (Shape{2, 6}));
    EXPECT_EQ(xs.shard(i).device(), mesh.device(i));
    EXPECT_EQ(read_shard(xs.shard(i)), expected_shard(global, shape, s, i));
  }
  EXPECT_EQ(delta.total_from_peer(mesh), 0u);
  EXPECT_EQ(xs.shape(), shape);
  EXPECT_EQ(xs.dtype(), xdev::DType::f32);
}

TEST_F(ShardedArrayTest, ColumnShardsArePackedOnTheHostAndStillMoveOnlyTheirBytes) {
  const Shape shape{3, 8};
  auto global = iota_floats(24);
  TransferDelta delta(mesh);
  const Sharding s(mesh, {replicated, "data"});
  auto xs = xdev::spmd::mark_sharding(std::span<const float>(global), shape, s).get();
  EXPECT_EQ(delta.total_from_host(mesh), 24 * sizeof(float));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(read_shard(xs.shard(i)), expected_shard(global, shape, s, i));
  EXPECT_EQ(xdev::spmd::to_host(xs).get(), global);
}

TEST_F(ShardedArrayTest, FullyReplicatedShardingMovesTheArrayOncePerDevice) {
  auto global = iota_floats(40);
  auto x = vd.place(std::span<const float>(global), {5, 8});
  TransferDelta delta(mesh);
  auto xs = xdev::spmd::mark_sharding(x, vd.sharding({})).get();
  EXPECT_EQ(delta.total_from_host(mesh), 4 * 40 * sizeof(float));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(read_shard(xs.shard(i)), global);
}

TEST_F(ShardedArrayTest, TwoDimensionalMeshShardings) {
  const Shape shape{4, 8};
  auto global = iota_floats(32);
  for (const auto& spec : {PartitionSpec{"x", "y"}, PartitionSpec{"y", replicated}, PartitionSpec{{"x", "y"}},
                           PartitionSpec{replicated, {"y", "x"}}}) {
    const Sharding s(mesh2d, spec);
    TransferDelta delta(mesh2d);
    auto xs = xdev::spmd::mark_sharding(std::span<const float>(global), shape, s).get();
    EXPECT_EQ(delta.total_from_host(mesh2d), s.replication_factor() * 32 * sizeof(float)) << s;
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(read_shard(xs.shard(i)), expected_shard(global, shape, s, i)) << s;
    EXPECT_EQ(xdev::spmd::to_host(xs).get(), global) << s;
  }
}

TEST_F(ShardedArrayTest, NothingMovesBeforeMarkSharding) {
  auto global = iota_floats(16);
  TransferDelta delta(mesh);
  auto x = vd.place(std::span<const float>(global), {16});
  EXPECT_EQ(delta.total_from_host(mesh), 0u);
  auto xs = xdev::spmd::mark_sharding(x, vd.sharding({"data"})).get();
  EXPECT_EQ(delta.total_from_host(mesh), 16 * sizeof(float));
}

TEST_F(ShardedArrayTest, MarkShardingWaitsForWorkOnTheVirtualDevice) {
  auto x = vd.empty<float>({1024});
  xdev::ops::fill(vd.device(), x, 3.0f);  // not waited for here
  auto xs = xdev::spmd::mark_sharding(x, vd.sharding({"data"})).get();
  EXPECT_THAT(xdev::spmd::to_host(xs).get(), ::testing::Each(3.0f));
}

// The bytes that change owner between two tilings, counted element by element.
std::size_t bytes_changing_owner(const Shape& shape, const Sharding& from, const Sharding& to) {
  std::size_t n = 0;
  const auto rows = shape[0], cols = shape[1];
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      std::optional<std::size_t> old_owner, new_owner;
      for (std::size_t i = 0; i < from.mesh().size(); ++i) {
        const auto a = from.shard_box(shape, i);
        if (a.contains({r, c})) old_owner = i;
        const auto b = to.shard_box(shape, i);
        if (b.contains({r, c})) new_owner = i;
      }
      if (old_owner != new_owner) n += sizeof(float);
    }
  return n;
}

TEST_F(ShardedArrayTest, ReshardMovesOnlyTheBytesThatChangeOwnerDeviceToDevice) {
  const Shape shape{8, 8};
  auto global = iota_floats(64);
  const Sharding rows(mesh, {"data", replicated});
  const Sharding cols(mesh, {replicated, "data"});
  auto xs = xdev::spmd::mark_sharding(std::span<const float>(global), shape, rows).get();
  TransferDelta delta(mesh);
  auto ys = xdev::spmd::reshard(xs, cols).get();
  EXPECT_EQ(delta.total_from_host(mesh), 0u);
  EXPECT_EQ(delta.total_from_peer(mesh), bytes_changing_owner(shape, rows, cols));
  EXPECT_EQ(delta.total_from_peer(mesh), 48 * sizeof(float));  // each device keeps its 2x2 diagonal block
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(read_shard(ys.shard(i)), expected_shard(global, shape, cols, i));
  EXPECT_EQ(xdev::spmd::to_host(ys).get(), global);
  EXPECT_EQ(xdev::spmd::to_host(xs).get(), global);  // the source is unchanged
}

TEST_F(ShardedArrayTest, ReshardToTheSameOrALessSplitShardingMovesWhatIsMissingOnly) {
  const Shape shape{8, 4};
  auto global = iota_floats(32);
  const Sharding rows(mesh, {"data"});
  auto xs = xdev::spmd::mark_sharding(std::span<const float>(global), shape, rows).get();
  {
    TransferDelta delta(mesh);
    auto same = xdev::spmd::reshard(xs, rows).get();
    EXPECT_EQ(delta.total_from_peer(mesh), 0u);
    EXPECT_EQ(xdev::spmd::to_host(same).get(), global);
  }
  {
    TransferDelta delta(mesh);
    auto all = xdev::spmd::reshard(xs, Sharding(mesh, {})).get();
    EXPECT_EQ(delta.total_from_peer(mesh), 4 * 24 * sizeof(float));  // every device lacks 3 of 4 row blocks
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(read_shard(all.shard(i)), global);
    TransferDelta back(mesh);
    auto tiled = xdev::spmd::reshard(all, rows).get();  // every device already holds its part
    EXPECT_EQ(back.total_from_peer(mesh), 0u);
    EXPECT_EQ(xdev::spmd::to_host(tiled).get(), global);
  }
}

TEST_F(ShardedArrayTest, ReshardOntoAMeshOfAnotherRuntimeGoesThroughTheHost) {
  xdev::Runtime<Host> other({}, Host::Options{.devices = 2, .threads = 2});
  Mesh mesh_other(devices_of(other), "data");
  const Shape shape{4, 4};
  auto global = iota_floats(16);
  auto xs = xdev::spmd::mark_sharding(std::span<const float>(global), shape, Sharding(mesh, {"data"})).get();
  auto ys = xdev::spmd::reshard(xs, Sharding(mesh_other, {replicated, "data"})).get();
  EXPECT_EQ(ys.mesh(), mesh_other);
  EXPECT_EQ(xdev::spmd::to_host(ys).get(), global);
}

TEST_F(ShardedArrayTest, ValidationErrorsNameTheProblem) {
  auto global = iota_floats(10);
  auto x = vd.place(std::span<const float>(global), {10});
  try {
    (void)xdev::spmd::mark_sharding(x, vd.sharding({"data", replicated})).get();
    FAIL() << "a spec of two dimensions for an array of one";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("the array [10] has rank 1"));
  }
  auto on_device = xdev::empty<float>(mesh.device(0), {8});
  try {
    (void)xdev::spmd::mark_sharding(on_device, vd.sharding({"data"})).get();
    FAIL() << "not on a virtual device";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("HOST:0"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("virtual device"));
  }
  EXPECT_THROW((void)vd.place(std::span<const float>(global), {3, 3}), xdev::error);
  std::vector<xdev::AnyArray<float>> wrong;
  for (std::size_t i = 0; i < 4; ++i) wrong.push_back(xdev::empty<float>(mesh.device(3 - i), {2}));
  try {
    xdev::spmd::ShardedArray<float> bad({8}, Sharding(mesh, {"data"}), std::move(wrong));
    FAIL() << "shards on the wrong devices";
  } catch (const xdev::error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("shard 0 is on HOST:3"));
  }
  std::vector<xdev::AnyArray<float>> even;  // 10 rows give 3, 3, 3, 1: not four shards of 3
  for (std::size_t i = 0; i < 4; ++i) even.push_back(xdev::empty<float>(mesh.device(i), {3}));
  try {
    xdev::spmd::ShardedArray<float> bad({10}, Sharding(mesh, {"data"}), std::move(even));
    FAIL() << "the last shard of 10 rows over 4 devices has 1 row";
  } catch (const xdev::error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("shard 3 on HOST:3 has shape [3]"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("the block [9:10] of [10], of shape [1]"));
  }
  const xdev::spmd::ShardedArray<float> none;  // default-constructed: empty, and every operation says so
  EXPECT_FALSE(none.valid());
  EXPECT_THROW((void)xdev::spmd::all_gather(none, "data").get(), xdev::error);
  EXPECT_THROW((void)xdev::spmd::reshard(none, Sharding(mesh, {"data"})).get(), xdev::error);
  EXPECT_THROW((void)xdev::spmd::to_host(none).get(), xdev::error);
  auto xs = xdev::spmd::mark_sharding(x, vd.sharding({"data"})).get();
  try {
    (void)xdev::spmd::all_gather(xs, "model").get();
    FAIL() << "the mesh has no axis 'model'";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("has no axis 'model'"));
  }
}

// ---- uneven shards: the last shards along a dimension that does not divide are shorter ----------

TEST_F(ShardedArrayTest, UnevenRowsPlaceExactlyTheArraysBytesAndComeBackWhole) {
  const Shape shape{10, 3};  // 3, 3, 3, 1 rows
  auto global = iota_floats(30);
  auto x = vd.place(std::span<const float>(global), shape);
  TransferDelta delta(mesh);
  const auto s = vd.sharding({"data", replicated});
  auto xs = xdev::spmd::mark_sharding(x, s).get();
  EXPECT_EQ(delta.total_from_host(mesh), 30 * sizeof(float)) << "nothing padded, nothing twice";
  const std::int64_t rows[] = {3, 3, 3, 1};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(xs.shard(i).shape(), (Shape{rows[i], 3})) << i;
    EXPECT_EQ(delta.from_host(mesh, i), static_cast<std::size_t>(rows[i]) * 3 * sizeof(float)) << i;
    EXPECT_EQ(read_shard(xs.shard(i)), expected_shard(global, shape, s, i)) << i;
  }
  EXPECT_EQ(xs.shape(), shape);
  EXPECT_EQ(xdev::spmd::to_host(xs).get(), global);
}

TEST_F(ShardedArrayTest, ShardsPastTheEndAreEmptyAndEveryOperationSkipsThem) {
  const Shape shape{5, 2};  // 2, 2, 1, 0 rows
  auto global = iota_floats(10);
  TransferDelta delta(mesh);
  const Sharding s(mesh, {"data"});
  auto xs = xdev::spmd::mark_sharding(std::span<const float>(global), shape, s).get();
  EXPECT_EQ(delta.total_from_host(mesh), 10 * sizeof(float));
  EXPECT_EQ(xs.shard(3).shape(), (Shape{0, 2}));
  EXPECT_EQ(xs.shard(3).size(), 0u);
  EXPECT_EQ(mesh.device(3).memory_stats().bytes_in_use, 0u);
  EXPECT_EQ(xdev::spmd::to_host(xs).get(), global);
  auto empty = xdev::spmd::empty<float>(s, shape);
  EXPECT_EQ(empty.shard(2).shape(), (Shape{1, 2}));

  // Rows to columns and back: every element still lands once.
  const Sharding cols(mesh, {replicated, "data"});  // 2 columns over 4: 1, 1, 0, 0
  TransferDelta moved(mesh);
  auto ys = xdev::spmd::reshard(xs, cols).get();
  EXPECT_EQ(moved.total_from_peer(mesh), bytes_changing_owner(shape, s, cols));
  EXPECT_EQ(ys.shard(2).size(), 0u);
  EXPECT_EQ(ys.shard(1).shape(), (Shape{5, 1}));
  EXPECT_EQ(xdev::spmd::to_host(ys).get(), global);
  EXPECT_EQ(xdev::spmd::to_host(xdev::spmd::reshard(ys, s).get()).get(), global);
}

TEST_F(ShardedArrayTest, UnevenShardingsOnATwoDimensionalMeshRoundTrip) {
  const Shape shape{5, 7};
  auto global = iota_floats(35);
  for (const auto& spec : {PartitionSpec{"x", "y"}, PartitionSpec{{"x", "y"}}, PartitionSpec{replicated, {"y", "x"}},
                           PartitionSpec{"y", replicated}}) {
    const Sharding s(mesh2d, spec);
    TransferDelta delta(mesh2d);
    auto xs = xdev::spmd::mark_sharding(std::span<const float>(global), shape, s).get();
    EXPECT_EQ(delta.total_from_host(mesh2d), s.replication_factor() * 35 * sizeof(float)) << s;
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(read_shard(xs.shard(i)), expected_shard(global, shape, s, i)) << s;
    EXPECT_EQ(xdev::spmd::to_host(xs).get(), global) << s;
    for (const auto& to : {PartitionSpec{"y", "x"}, PartitionSpec{}, PartitionSpec{replicated, "x"}}) {
      auto ys = xdev::spmd::reshard(xs, Sharding(mesh2d, to)).get();
      EXPECT_EQ(xdev::spmd::to_host(ys).get(), global) << s << " to " << to;
    }
  }
}

TEST_F(ShardedArrayTest, AllGatherOfAShardedArrayMakesTheGatheredAxesWholeMovingOnlyWhatIsMissing) {
  const Shape shape{10, 3};
  auto global = iota_floats(30);
  const Sharding rows(mesh, {"data"});
  auto xs = xdev::spmd::mark_sharding(std::span<const float>(global), shape, rows).get();
  TransferDelta delta(mesh);
  auto whole = xdev::spmd::all_gather(xs, "data").get();
  EXPECT_EQ(whole.sharding(), Sharding(mesh, PartitionSpec{replicated}));
  // Each device lacks what the other three hold: 30 elements minus its own shard.
  EXPECT_EQ(delta.total_from_peer(mesh), (4 * 30 - 30) * sizeof(float));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(read_shard(whole.shard(i)), global) << i;

  // Over one axis of two: ("x", "y") on [5, 7] gathered over "y" keeps the rows split over "x".
  auto g2 =
      xdev::spmd::mark_sharding(std::span<const float>(global.data(), 30), Shape{5, 6}, Sharding(mesh2d, {"x", "y"}))
          .get();
  auto by_x = xdev::spmd::all_gather(g2, {"y"}).get();
  EXPECT_EQ(by_x.sharding().spec(), (PartitionSpec{"x", replicated}));
  EXPECT_EQ(by_x.shard(1).shape(), (Shape{3, 6}));
  EXPECT_EQ(by_x.shard(3).shape(), (Shape{2, 6}));
  EXPECT_EQ(xdev::spmd::to_host(by_x).get(), std::vector<float>(global.begin(), global.begin() + 30));
}

TEST(ShardedArrayFailure, OneFailedShardTransferFailsTheWholeOperationAndFreesEveryShard) {
  xdev::Runtime<FlakyHost> rt;
  Mesh mesh(devices_of(rt), "data");
  auto global = iota_floats(4096);
  std::vector<std::size_t> baseline;
  for (const auto& d : mesh.devices()) baseline.push_back(d.memory_stats().bytes_in_use);
  FlakyHost::failing_device = 2;
  try {
    (void)xdev::spmd::mark_sharding(std::span<const float>(global), {4096}, Sharding(mesh, {"data"})).get();
    FAIL() << "the transfer to FLAKY:2 fails";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::unavailable);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("FLAKY:2 lost its link"));
  }
  for (std::size_t i = 0; i < mesh.size(); ++i)
    EXPECT_EQ(mesh.device(i).memory_stats().bytes_in_use, baseline[i]) << mesh.device(i);
  FlakyHost::failing_device = std::size_t(-1);
  auto ok = xdev::spmd::mark_sharding(std::span<const float>(global), {4096}, Sharding(mesh, {"data"})).get();
  EXPECT_EQ(xdev::spmd::to_host(ok).get(), global);
}

TEST(ShardedArrayFailure, AnAllocationThatFailsFreesTheShardsAlreadyMade) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 4, .threads = 2});
  Mesh mesh(devices_of(rt), "data");
  mesh.device(3).set_memory_limit(100);
  auto global = iota_floats(1024);
  try {
    (void)xdev::spmd::mark_sharding(std::span<const float>(global), {1024}, Sharding(mesh, {"data"})).get();
    FAIL() << "HOST:3 cannot hold 1 KiB";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::out_of_memory);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("HOST:3"));
  }
  for (const auto& d : mesh.devices()) EXPECT_EQ(d.memory_stats().bytes_in_use, 0u) << d;
  for (const auto& d : mesh.devices()) EXPECT_EQ(d.transfer_stats().bytes_from_host, 0u) << d;
}

TEST(ShardedArrayFailure, AFailedReshardFreesItsNewShardsAndLeavesTheSourceIntact) {
  xdev::Runtime<FlakyHost> rt;
  xdev::Runtime<Host> other({}, Host::Options{.devices = 2, .threads = 2});
  Mesh mesh(devices_of(rt), "data");
  Mesh mesh_other(devices_of(other), "data");
  auto global = iota_floats(64);
  auto xs = xdev::spmd::mark_sharding(std::span<const float>(global), {64}, Sharding(mesh, {"data"})).get();
  // Back from the other runtime onto FLAKY goes through the host: FLAKY:1's host→device fails.
  auto ys = xdev::spmd::reshard(xs, Sharding(mesh_other, {"data"})).get();
  std::vector<std::size_t> baseline;
  for (const auto& d : mesh.devices()) baseline.push_back(d.memory_stats().bytes_in_use);
  FlakyHost::failing_device = 1;
  EXPECT_THROW((void)xdev::spmd::reshard(ys, Sharding(mesh, {})).get(), xdev::error);
  FlakyHost::failing_device = std::size_t(-1);
  for (std::size_t i = 0; i < mesh.size(); ++i) EXPECT_EQ(mesh.device(i).memory_stats().bytes_in_use, baseline[i]);
  EXPECT_EQ(xdev::spmd::to_host(ys).get(), global);
  EXPECT_EQ(xdev::spmd::to_host(xs).get(), global);
}

}  // namespace
