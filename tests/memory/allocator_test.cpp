#include <xdev/device/runtime.hpp>
#include <xdev/memory/allocator.hpp>
#include <xdev/memory/buffer.hpp>

#include "support/manual_backend.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

namespace {

using ::testing::HasSubstr;
using xdev_test::ManualBackend;

class Allocator : public ::testing::Test {
 protected:
  xdev::Runtime<ManualBackend> rt{{}, 2, ManualBackend::Mode::inline_completion};
  xdev::Device<ManualBackend> dev = rt.device(0);
};

TEST_F(Allocator, StatisticsFollowBuffers) {
  {
    auto a = dev.allocate<float>(100);
    auto b = dev.allocate<double>(10);
    auto s = dev.memory_stats();
    EXPECT_EQ(s.bytes_in_use, 480u);
    EXPECT_EQ(s.peak_bytes_in_use, 480u);
    EXPECT_EQ(s.bytes_reserved, 480u);
    EXPECT_EQ(s.allocation_count, 2u);
    EXPECT_EQ(s.total_allocations, 2u);
  }
  auto s = dev.memory_stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.peak_bytes_in_use, 480u);
  EXPECT_EQ(s.bytes_reserved, 480u);  // cached for reuse
  EXPECT_EQ(s.allocation_count, 0u);
  dev.reset_peak_memory_stats();
  EXPECT_EQ(dev.memory_stats().peak_bytes_in_use, 0u);
  // The other device is untouched.
  EXPECT_EQ(rt.device(1).memory_stats(), xdev::MemoryStats{});
}

TEST_F(Allocator, SameSizeRequestsReuseCachedBlocks) {
  for (int i = 0; i < 10; ++i) (void)dev.allocate<float>(256);
  EXPECT_EQ(rt.backend().backend_allocations(), 1u);
  EXPECT_EQ(dev.memory_stats().total_allocations, 10u);
  dev.release_cached_memory();
  EXPECT_EQ(dev.memory_stats().bytes_reserved, 0u);
  EXPECT_EQ(rt.backend().bytes_used(), 0u);
}

// The cache keeps the records of blocks it handed out for the next blocks given back: a block
// still comes back only to a request of its own size, whichever sizes the records held before.
TEST_F(Allocator, ACachedBlockServesOnlyItsOwnSizeWhileTheCacheReusesItsRecords) {
  const std::size_t sizes[] = {64, 4096, 256, 64, 1024, 4096};
  std::map<std::byte*, std::size_t> size_of;  // every block the backend made, by handle
  for (int round = 0; round < 50; ++round) {
    std::vector<xdev::Buffer<std::byte, ManualBackend>> live;
    // A different order every round, so that each size is given back into records of the others.
    for (std::size_t i = 0; i < std::size(sizes); ++i) {
      const std::size_t bytes = sizes[(i + static_cast<std::size_t>(round)) % std::size(sizes)];
      live.push_back(dev.allocate<std::byte>(bytes));
      const auto at = size_of.emplace(live.back().native_handle(), bytes).first;
      ASSERT_EQ(at->second, bytes) << "round " << round << ": a block of " << at->second
                                   << " bytes served a request of " << bytes;
    }
    if (round % 2 == 1) std::reverse(live.begin(), live.end());  // freed in the other order too
  }
  // Six blocks in all: one per live request of each size, reused ever after.
  EXPECT_EQ(rt.backend().backend_allocations(), std::size(sizes));
  EXPECT_EQ(dev.memory_stats().bytes_reserved, 64u + 4096 + 256 + 64 + 1024 + 4096);
}

TEST_F(Allocator, ExceedingTheLimitIsOutOfMemoryNamingDeviceRequestAndLimit) {
  dev.set_memory_limit(1000);
  auto a = dev.allocate<std::byte>(600);
  try {
    (void)dev.allocate<std::byte>(500);
    FAIL() << "allocation beyond the limit succeeded";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::out_of_memory);
    EXPECT_THAT(e.what(), HasSubstr("MANUAL:0"));
    EXPECT_THAT(e.what(), HasSubstr("requested 500 bytes"));
    EXPECT_THAT(e.what(), HasSubstr("600 in use"));
    EXPECT_THAT(e.what(), HasSubstr("limit 1000"));
  }
  // Nothing was lost: the failed request left the statistics as they were.
  EXPECT_EQ(dev.memory_stats().bytes_in_use, 600u);
  EXPECT_EQ(dev.memory_stats().allocation_count, 1u);
  auto b = dev.allocate<std::byte>(400);  // exactly up to the limit is fine
  EXPECT_EQ(dev.memory_stats().bytes_in_use, 1000u);
  EXPECT_EQ(dev.memory_stats().limit, 1000u);
}

TEST_F(Allocator, CachedBlocksAreReleasedToMakeRoomUnderTheLimit) {
  dev.set_memory_limit(1000);
  (void)dev.allocate<std::byte>(800);  // freed at once, stays cached
  EXPECT_EQ(dev.memory_stats().bytes_reserved, 800u);
  auto b = dev.allocate<std::byte>(900);  // different size: the cache must give way
  EXPECT_EQ(dev.memory_stats().bytes_reserved, 900u);
}

TEST(AllocatorDeviceFull, BackendOutOfMemoryReleasesCacheAndRetries) {
  xdev::Runtime<ManualBackend> rt({}, 1, ManualBackend::Mode::inline_completion, /*capacity=*/1000);
  auto dev = rt.device(0);
  (void)dev.allocate<std::byte>(700);                             // cached after this line
  auto b = dev.allocate<std::byte>(600);                          // backend full until the cache is returned
  EXPECT_THROW((void)dev.allocate<std::byte>(500), xdev::error);  // really full now
  EXPECT_EQ(dev.memory_stats().bytes_in_use, 600u);
}

TEST_F(Allocator, ZeroElementsAllocateNothing) {
  auto b = dev.allocate<float>(0);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(dev.memory_stats().total_allocations, 0u);
}

TEST_F(Allocator, OverflowingElementCountIsOutOfMemory) {
  EXPECT_THROW((void)dev.allocate<double>(std::size_t(-1) / 4), xdev::error);
}

TEST_F(Allocator, BufferIsMoveOnlyAndKnowsItsDevice) {
  static_assert(!std::is_copy_constructible_v<xdev::Buffer<float, ManualBackend>>);
  static_assert(std::is_nothrow_move_constructible_v<xdev::Buffer<float, ManualBackend>>);
  auto a = rt.device(1).allocate<float>(8);
  EXPECT_EQ(a.device(), rt.device(1));
  EXPECT_EQ(a.size(), 8u);
  EXPECT_EQ(a.size_bytes(), 32u);
  auto b = std::move(a);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(b.size(), 8u);
  EXPECT_EQ(rt.device(1).memory_stats().allocation_count, 1u);
  b = rt.device(1).allocate<float>(4);  // move-assignment frees the old block
  EXPECT_EQ(rt.device(1).memory_stats().allocation_count, 1u);
  EXPECT_EQ(rt.device(1).memory_stats().bytes_in_use, 16u);
  b.reset();
  EXPECT_EQ(rt.device(1).memory_stats().bytes_in_use, 0u);
}

}  // namespace
