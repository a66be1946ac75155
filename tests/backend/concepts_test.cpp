#include <xdev/backend/concepts.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>

#include "support/manual_backend.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <span>
#include <vector>

namespace {

using xdev_test::ManualBackend;

// Each requirement is its own named concept, so a partial backend can be diagnosed piece by piece.
struct OnlyNamed {
  static constexpr std::string_view name = "X";
};
static_assert(xdev::concepts::HasName<OnlyNamed>);
static_assert(!xdev::concepts::HasCapabilities<OnlyNamed>);
static_assert(!xdev::concepts::Backend<OnlyNamed>);

struct WrongAllocate : ManualBackend {
  int* allocate(std::size_t);  // hides the base's allocate with the wrong signature
};
static_assert(!xdev::concepts::Allocates<WrongAllocate>);
static_assert(!xdev::concepts::Backend<WrongAllocate>);

struct ThrowingDeallocate : ManualBackend {
  void deallocate(std::size_t, memory_handle, std::size_t);  // not noexcept
};
static_assert(!xdev::concepts::Allocates<ThrowingDeallocate>);

static_assert(xdev::concepts::Backend<ManualBackend>);
static_assert(!xdev::concepts::HostAccessibleBackend<ManualBackend>);
static_assert(xdev::concepts::Backend<xdev::backends::Host>);
static_assert(xdev::concepts::HostAccessibleBackend<xdev::backends::Host>);
static_assert(xdev::check_backend<xdev::backends::Host>());

TEST(CustomBackend, UsableThroughDeviceLikeTheBuiltInOne) {
  xdev::Runtime<ManualBackend> rt({}, 3, ManualBackend::Mode::inline_completion);
  ASSERT_EQ(rt.device_count(), 3u);
  xdev::Device<ManualBackend> dev = rt.device(2);
  EXPECT_EQ(dev.name(), "MANUAL:2");
  EXPECT_EQ(dev.max_inflight(), 4u);  // from its MaxInflight<4> policy
  static_assert(xdev::Device<ManualBackend>::capabilities::priority == 5);

  std::vector<int> in(100);
  std::iota(in.begin(), in.end(), 0);
  auto a = dev.allocate<int>(in.size());
  auto b = rt.device(0).allocate<int>(in.size());
  dev.copy_to_device(std::span<const int>(in), a).get();
  dev.copy(a, b).get();  // across two devices of the backend
  std::vector<int> out(in.size());
  rt.device(0).copy_to_host(b, std::span<int>(out)).get();
  EXPECT_EQ(out, in);
  EXPECT_EQ(dev.execute([] { return 7; }).get(), 7);
}

}  // namespace
