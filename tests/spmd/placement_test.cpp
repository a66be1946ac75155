// mark_sharding, reshard, all_gather and to_host as asynchronous operations: they return before
// their transfers run, complete after the work ahead of them, take every completion token, hand
// an rvalue source over, and report a transfer's failure through the token.
#include <xdev/spmd/placement.hpp>

#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include "spmd/placement_support.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <future>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using xdev_test::devices_of;
using xdev_test::FlakyHost;
using xdev_test::iota_floats;

namespace asio = boost::asio;
using xdev::AnyDevice;
using xdev::Shape;
using xdev::spmd::Mesh;
using xdev::spmd::replicated;
using xdev::spmd::ShardedArray;
using xdev::spmd::Sharding;
using xdev::spmd::VirtualDevice;
using Host = xdev::backends::Host;
using namespace std::chrono_literals;

// Holds a device's default stream busy until `open()`: everything submitted to it after waits.
class Gate {
 public:
  explicit Gate(const AnyDevice& dev) : held_(dev.execute([f = opened_.get_future().share()] { f.wait(); })) {}
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() { open(); }
  void open() {
    if (!open_.exchange(true)) {
      opened_.set_value();
      held_.get();
    }
  }

 private:
  std::promise<void> opened_;
  xdev::Future<void> held_;
  std::atomic<bool> open_{false};
};

template <class F>
bool ready(const F& f) {
  return f.wait_for(0s) == std::future_status::ready;
}

class Placement : public ::testing::Test {
 protected:
  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 4, .threads = 2}};
  Mesh mesh{devices_of(rt), "data"};
  VirtualDevice vd{mesh};
  Shape shape{10, 4};  // uneven over 4 devices: 3, 3, 3, 1 rows
  std::vector<float> global = iota_floats(40);
  Sharding rows{mesh, {"data", replicated}};
};

TEST_F(Placement, MarkShardingReturnsBeforeItsTransfersAndCompletesAfterTheWorkAheadOfThem) {
  Gate gate(mesh.device(2));
  auto f = xdev::spmd::mark_sharding(std::span<const float>(global), shape, rows);
  EXPECT_FALSE(ready(f)) << "the transfer to HOST:2 waits behind the work ahead of it";
  gate.open();
  auto xs = f.get();
  EXPECT_EQ(xdev::spmd::to_host(xs).get(), global);
}

TEST_F(Placement, MarkShardingFromTheVirtualDeviceStartsAfterTheWorkSubmittedThere) {
  auto x = vd.place(std::span<const float>(global), shape);
  Gate gate(vd.device());
  xdev::ops::fill(vd.device(), x, 7.0f);  // queued behind the gate
  auto f = xdev::spmd::mark_sharding(x, rows);
  EXPECT_FALSE(ready(f));
  EXPECT_EQ(mesh.device(0).transfer_stats().bytes_from_host, 0u) << "nothing moves before the fill ran";
  gate.open();
  EXPECT_THAT(xdev::spmd::to_host(f.get()).get(), ::testing::Each(7.0f));
}

TEST_F(Placement, AnRvalueSourceIsHandedOverAndFreedWhenThePlacementCompletes) {
  Gate gate(mesh.device(0));
  // The placed array is a temporary: the operation keeps it alive until its transfers ran.
  auto f = xdev::spmd::mark_sharding(vd.place(std::span<const float>(global), shape), rows);
  EXPECT_EQ(vd.device().memory_stats().bytes_in_use, global.size() * sizeof(float));
  gate.open();
  auto xs = f.get();
  EXPECT_EQ(vd.device().memory_stats().bytes_in_use, 0u);
  EXPECT_EQ(xdev::spmd::to_host(xs).get(), global);

  // reshard takes its source over the same way.
  Gate again(mesh.device(1));
  auto g = xdev::spmd::reshard(std::move(xs), Sharding(mesh, {replicated, "data"}));
  EXPECT_FALSE(ready(g));
  again.open();
  EXPECT_EQ(xdev::spmd::to_host(g.get()).get(), global);
}

TEST_F(Placement, ReshardAndAllGatherWaitForTheWorkOnTheOldShardsDevices) {
  auto xs = xdev::spmd::mark_sharding(std::span<const float>(global), shape, rows).get();
  Gate gate(mesh.device(3));
  auto f = xdev::spmd::reshard(xs, Sharding(mesh, {replicated, "data"}));
  auto g = xdev::spmd::all_gather(xs, "data");
  EXPECT_FALSE(ready(f));
  EXPECT_FALSE(ready(g));
  gate.open();
  EXPECT_EQ(xdev::spmd::to_host(f.get()).get(), global);
  auto whole = g.get();
  for (std::size_t i = 0; i < 4; ++i) {
    std::vector<float> back(global.size());
    mesh.device(i).copy_to_host(whole.shard(i), std::span<float>(back)).get();
    EXPECT_EQ(back, global) << i;
  }
}

TEST_F(Placement, ToHostIntoCallerMemoryCompletesAfterTheWorkAhead) {
  auto xs = xdev::spmd::mark_sharding(std::span<const float>(global), shape, Sharding(mesh, {replicated, "data"}))
                .get();  // columns: every shard unpacked through staging
  std::vector<float> back(global.size(), 0.0f);
  Gate gate(mesh.device(1));
  auto f = xdev::spmd::to_host(xs, std::span<float>(back));
  EXPECT_FALSE(ready(f));
  gate.open();
  f.get();
  EXPECT_EQ(back, global);
  std::vector<float> small(3);
  EXPECT_THROW((void)xdev::spmd::to_host(xs, std::span<float>(small)), xdev::error) << "wrong size: at the call";
}

TEST_F(Placement, CallbackTokensReceiveTheResult) {
  std::promise<ShardedArray<float>> placed;
  xdev::spmd::mark_sharding(std::span<const float>(global), shape, rows,
                            [&](std::exception_ptr ep, ShardedArray<float> xs) {
                              if (ep)
                                placed.set_exception(ep);
                              else
                                placed.set_value(std::move(xs));
                            });
  auto xs = placed.get_future().get();
  std::promise<std::vector<float>> read;
  xdev::spmd::to_host(xs, [&](std::exception_ptr ep, std::vector<float> v) {
    if (ep)
      read.set_exception(ep);
    else
      read.set_value(std::move(v));
  });
  EXPECT_EQ(read.get_future().get(), global);
  // Asio's own future and deferred tokens work too.
  auto viaasio = xdev::spmd::reshard(xs, Sharding(mesh, {}), asio::use_future);
  EXPECT_EQ(xdev::spmd::to_host(viaasio.get()).get(), global);
  auto later = xdev::spmd::to_host(xs, asio::deferred);  // nothing starts until it is launched
  EXPECT_EQ(std::move(later)(asio::use_future).get(), global);
}

TEST_F(Placement, AwaitableTokensInsideACoroutine) {
  asio::io_context io;
  const Sharding columns(mesh, {replicated, "data"});  // outside: g++ 12 miscompiles a braced spec in a coroutine
  auto body = [&]() -> asio::awaitable<std::vector<float>> {
    auto xs = co_await xdev::spmd::mark_sharding(std::span<const float>(global), shape, rows, asio::use_awaitable);
    auto cols = co_await xdev::spmd::reshard(xs, columns, asio::use_awaitable);
    co_return co_await xdev::spmd::to_host(cols, asio::use_awaitable);
  };
  auto f = asio::co_spawn(io, body(), asio::use_future);
  io.run();
  EXPECT_EQ(f.get(), global);
}

TEST(PlacementFailure, ATransferFailureReachesTheCallbackWithNoArrayAndEveryShardFreed) {
  xdev::Runtime<FlakyHost> rt;
  const Mesh mesh(devices_of(rt), "data");
  auto global = iota_floats(4096);
  FlakyHost::failing_device = 1;
  std::promise<std::pair<std::exception_ptr, bool>> got;
  xdev::spmd::mark_sharding(std::span<const float>(global), {4096}, Sharding(mesh, {"data"}),
                            [&](std::exception_ptr ep, ShardedArray<float> xs) {
                              got.set_value({ep, xs.valid()});
                            });
  auto [ep, valid] = got.get_future().get();
  FlakyHost::failing_device = std::size_t(-1);
  ASSERT_TRUE(ep);
  EXPECT_FALSE(valid);
  try {
    std::rethrow_exception(ep);
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::unavailable);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("FLAKY:1 lost its link"));
  }
  for (const auto& d : mesh.devices()) EXPECT_EQ(d.memory_stats().bytes_in_use, 0u) << d;
}

}  // namespace
