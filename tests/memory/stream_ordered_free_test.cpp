// Stream-ordered frees: dropping a buffer while work that uses it is queued or running does not
// hand its memory to the next allocation before that work is over (as CUDA's stream-ordered
// allocator and `record_stream` guarantee).
#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/memory/buffer.hpp>
#include <xdev/ops/elementwise.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <future>
#include <optional>
#include <thread>

namespace {

using Host = xdev::backends::Host;
constexpr std::size_t n = std::size_t{1} << 16;

TEST(StreamOrderedFree, ADroppedBufferIsNotReusedWhileQueuedWorkStillWritesIt) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  std::promise<void> open_gate;
  auto gate = open_gate.get_future().share();
  auto slow = dev.execute([gate] { gate.wait(); });  // holds the stream
  std::optional<xdev::Array<float, Host>> dropped(xdev::empty<float>(dev, xdev::Shape{n}));
  auto fill = xdev::ops::fill(dev, *dropped, 1.0f);  // queued behind the slow task
  dropped.reset();                                   // dropped with its fill still to run
  EXPECT_EQ(dev.memory_stats().bytes_in_use, n * sizeof(float)) << "freed before the work using it ran";

  auto fresh = dev.allocate<float>(n);  // the same size: the cache would hand out the same block
  std::fill_n(fresh.host_data(), n, 2.0f);
  open_gate.set_value();
  slow.get();
  fill.get();
  dev.synchronize();
  EXPECT_TRUE(std::all_of(fresh.host_data(), fresh.host_data() + n, [](float v) { return v == 2.0f; }))
      << "the fill of the dropped buffer overwrote a new allocation";
  EXPECT_EQ(dev.memory_stats().bytes_in_use, n * sizeof(float)) << "the dropped buffer was never freed";
}

TEST(StreamOrderedFree, ADropOnAnIdleDeviceFreesAtOnce) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1});
  auto dev = rt.device(0);
  { auto b = dev.allocate<float>(n); }
  EXPECT_EQ(dev.memory_stats().bytes_in_use, 0u);
}

// A device that never goes idle still frees: the free waits only for work submitted before it.
TEST(StreamOrderedFree, AFreeDoesNotWaitForWorkSubmittedAfterIt) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  auto other = dev.make_stream();
  std::promise<void> first_gate, later_gate;
  auto g1 = first_gate.get_future().share();
  auto g2 = later_gate.get_future().share();
  auto before = dev.execute([g1] { g1.wait(); });
  { auto b = dev.allocate<float>(n); }
  auto after = other.execute([g2] { g2.wait(); });  // still running when the earlier work ends
  EXPECT_EQ(dev.memory_stats().bytes_in_use, n * sizeof(float));
  first_gate.set_value();
  before.get();
  EXPECT_EQ(dev.memory_stats().bytes_in_use, 0u) << "the free waited for work submitted after it";
  later_gate.set_value();
  after.get();
}

// Work is counted without a lock while no free is parked, and under the lock while one is; the
// count moves between the two as frees are parked and run. Several threads dropping buffers
// behind their own queued work at once must never see a dropped buffer's work write a new one.
TEST(StreamOrderedFree, ConcurrentDropsBehindQueuedWorkNeverLetTheWorkWriteANewAllocation) {
  constexpr std::size_t small = 256;
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  std::atomic<int> overwritten{0};
  auto run = [&](int seed) {
    auto stream = dev.make_stream();
    for (int i = 0; i < 300; ++i) {
      auto busy = stream.execute([] { std::this_thread::yield(); });  // something queued first
      std::optional<xdev::Array<float, Host>> dropped(xdev::empty<float>(dev, xdev::Shape{small}));
      auto fill = xdev::ops::fill(stream, *dropped, 1.0f);
      dropped.reset();
      auto fresh = dev.allocate<float>(small);
      std::fill_n(fresh.host_data(), small, float(seed));
      busy.get();
      fill.get();
      if (!std::all_of(fresh.host_data(), fresh.host_data() + small, [&](float v) { return v == float(seed); }))
        overwritten.fetch_add(1);
    }
  };
  std::thread other(run, 2);
  run(3);
  other.join();
  dev.synchronize();
  EXPECT_EQ(overwritten.load(), 0) << "a dropped buffer's fill wrote memory handed to a new allocation";
  EXPECT_EQ(dev.memory_stats().bytes_in_use, 0u) << "a dropped buffer was never freed";
}

// A copy between two devices runs on one device's stream; the other device's buffer dropped while
// the copy waits is held for it all the same.
TEST(StreamOrderedFree, ABufferOnThePeerOfACopyIsHeldUntilTheCopyRan) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 2, .threads = 2});
  auto d0 = rt.device(0);
  auto d1 = rt.device(1);
  std::promise<void> open_gate;
  auto gate = open_gate.get_future().share();
  auto slow = d0.execute([gate] { gate.wait(); });  // holds d0's default stream
  std::optional<xdev::Buffer<float, Host>> src(d1.allocate<float>(n));
  std::fill_n(src->host_data(), n, 5.0f);
  auto dst = d0.allocate<float>(n);
  auto copy = d0.copy(*src, dst);  // on d0's stream, behind the slow task; reads d1's memory
  src.reset();
  EXPECT_EQ(d1.memory_stats().bytes_in_use, n * sizeof(float)) << "freed before the copy reading it ran";
  auto fresh = d1.allocate<float>(n);
  std::fill_n(fresh.host_data(), n, 9.0f);
  open_gate.set_value();
  slow.get();
  copy.get();
  EXPECT_TRUE(std::all_of(dst.host_data(), dst.host_data() + n, [](float v) { return v == 5.0f; }))
      << "the copy read a new allocation instead of its source";
  EXPECT_EQ(d1.memory_stats().bytes_in_use, n * sizeof(float));
}

}  // namespace
