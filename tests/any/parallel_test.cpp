// User C++ kernels through AnyDevice (<xdev/any/parallel.hpp>): parallel_for and parallel_reduce on
// a backend that launches kernels (HOST), on one whose memory is host-accessible but that has no
// launch (one host task in device order), and the clear error on a device that can run neither;
// the reducers; tokens, stream order and a kernel's exception.
#include <xdev/any/any_device.hpp>
#include <xdev/any/parallel.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/parallel_for.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <stdexcept>
#include <vector>

#include "support/error_of.hpp"
#include "support/test_targets.hpp"

namespace {

using ::testing::HasSubstr;
using xdev::AnyDevice;
using xdev::backends::Host;

// ManualBackend (no launch) whose memory it says is host memory: kernels run as one host task.
class HostMemoryBackend : public xdev_test::PolicyBackend<xdev::Capabilities<>> {
 public:
  static constexpr std::string_view name = "HOSTMEM";
  using PolicyBackend::PolicyBackend;
  [[nodiscard]] void* host_address(memory_handle h) const noexcept { return h; }
};
static_assert(xdev::concepts::HostAccessibleBackend<HostMemoryBackend>);
static_assert(!xdev::concepts::LaunchableBackend<HostMemoryBackend>);

using xdev_test::error_of;

class AnyParallel : public ::testing::Test {
 protected:
  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 1, .threads = 2}};
  AnyDevice dev{rt.device(0)};
};

TEST_F(AnyParallel, ParallelForTouchesEveryIndexOnceInStreamOrder) {
  ASSERT_TRUE(dev.runs_kernels());
  auto a = xdev::empty<std::int32_t>(dev, {10000});
  std::int32_t* p = xdev::host_data(a);
  const auto s = dev.make_stream();
  std::vector<std::int32_t> host(10000, 5);
  s.copy_to_device(std::span<const std::int32_t>(host), a.buffer());
  xdev::parallel_for(s, a.size(), [p](std::size_t i) { p[i] += static_cast<std::int32_t>(i); });  // after the copy
  auto f = xdev::parallel_for(s, a.size(), [p](std::size_t i) { p[i] *= 2; });
  f.get();
  for (std::size_t i = 0; i < host.size(); ++i) ASSERT_EQ(p[i], 2 * (5 + static_cast<std::int32_t>(i))) << i;
  // A callback token, and an empty range.
  std::promise<void> done;
  xdev::parallel_for(
      dev, 0, [](std::size_t) { FAIL() << "no index in an empty range"; },
      [&](std::exception_ptr ep) { ep ? done.set_exception(ep) : done.set_value(); });
  done.get_future().get();
}

TEST_F(AnyParallel, ParallelReduceGivesSumMinMaxAndAReducerOfYourOwn) {
  auto a = xdev::empty<double>(dev, {4097});
  double* p = xdev::host_data(a);
  xdev::parallel_for(dev, a.size(), [p](std::size_t i) {
    p[i] = static_cast<double>((i * 7919) % 4097) - 100.0;
  }).get();
  auto v = [p](std::size_t i) { return p[i]; };
  const double sum = xdev::parallel_reduce(dev, a.size(), v, xdev::Sum<double>{}).get();
  double expected = 0;
  for (std::size_t i = 0; i < a.size(); ++i) expected += p[i];
  EXPECT_DOUBLE_EQ(sum, expected);
  EXPECT_EQ(xdev::parallel_reduce(dev, a.size(), v, xdev::Min<double>{}).get(), -100.0);
  EXPECT_EQ(xdev::parallel_reduce(dev, a.size(), v, xdev::Max<double>{}).get(), 4096.0 - 100.0);
  auto product = xdev::parallel_reduce(
      dev, 20, [](std::size_t i) { return static_cast<std::int64_t>(i % 3 + 1); },
      xdev::Reducer{std::int64_t{1}, std::multiplies<>{}});
  std::int64_t want = 1;
  for (std::size_t i = 0; i < 20; ++i) want *= static_cast<std::int64_t>(i % 3 + 1);
  EXPECT_EQ(product.get(), want);
  EXPECT_EQ(xdev::parallel_reduce(dev, 0, v, xdev::Min<double>{}).get(), std::numeric_limits<double>::infinity())
      << "an empty range gives the identity";
  EXPECT_EQ(xdev::parallel_reduce(
                dev, 0, [](std::size_t) { return 1; }, xdev::Max<int>{})
                .get(),
            std::numeric_limits<int>::lowest());
}

TEST_F(AnyParallel, AFloatingSumIsTheSameBitsEveryTime) {
  auto a = xdev::empty<float>(dev, {100003});
  float* p = xdev::host_data(a);
  xdev::parallel_for(dev, a.size(), [p](std::size_t i) { p[i] = 1.0f / static_cast<float>(i + 1); }).get();
  auto v = [p](std::size_t i) { return p[i]; };
  const float first = xdev::parallel_reduce(dev, a.size(), v, xdev::Sum<float>{}).get();
  for (int run = 0; run < 20; ++run) {
    const float again = xdev::parallel_reduce(dev, a.size(), v, xdev::Sum<float>{}).get();
    ASSERT_EQ(std::memcmp(&first, &again, sizeof first), 0) << "run " << run << ": " << first << " vs " << again;
  }
}

TEST_F(AnyParallel, AKernelsExceptionFailsItsOperationOnly) {
  auto f = xdev::parallel_for(dev, 1000, [](std::size_t i) {
    if (i == 500) throw std::runtime_error("index 500 is bad");
  });
  EXPECT_THROW(
      {
        try {
          f.get();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "index 500 is bad");
          throw;
        }
      },
      std::runtime_error);
  auto r = xdev::parallel_reduce(
      dev, 10, [](std::size_t i) -> int { return i == 3 ? throw std::runtime_error("three") : 1; }, xdev::Sum<int>{});
  EXPECT_THROW(r.get(), std::runtime_error);
  EXPECT_EQ(xdev::parallel_reduce(
                dev, 10, [](std::size_t) { return 1; }, xdev::Sum<int>{})
                .get(),
            10);
}

TEST(AnyParallelBackends, AHostAccessibleBackendWithoutLaunchRunsTheRangeAsOneHostTask) {
  xdev::Runtime<HostMemoryBackend> rt;
  AnyDevice dev(rt.device(0));
  EXPECT_TRUE(dev.host_accessible());
  EXPECT_TRUE(dev.runs_kernels());
  auto a = xdev::empty<float>(dev, {257});
  float* p = xdev::host_data(a);
  ASSERT_NE(p, nullptr);
  xdev::parallel_for(dev, a.size(), [p](std::size_t i) { p[i] = static_cast<float>(i); }).get();
  EXPECT_EQ(xdev::parallel_reduce(
                dev, a.size(), [p](std::size_t i) { return p[i]; }, xdev::Sum<float>{})
                .get(),
            256.0f * 257.0f / 2.0f);
}

TEST_F(AnyParallel, AKernelWritesAStridedWindowThroughHostDataOfTheViewAndNothingAroundIt) {
  auto a = xdev::empty<std::int32_t>(dev, {4, 6});
  std::vector<std::int32_t> zeros(a.size(), 0);
  dev.copy_to_device(std::span<const std::int32_t>(zeros), a.buffer()).get();
  auto box = xdev::slice(a, {1, 3}, {2, 5});  // rows 1-2, columns 2-4
  std::int32_t* p = xdev::host_data(box);
  ASSERT_EQ(p, xdev::host_data(a) + 8);
  const auto cols = static_cast<std::size_t>(box.shape()[1]);
  xdev::parallel_for(dev, box.size(), [p, cols, s0 = box.stride(0), s1 = box.stride(1)](std::size_t k) {
    const auto i = static_cast<std::int64_t>(k / cols);
    const auto j = static_cast<std::int64_t>(k % cols);
    p[i * s0 + j * s1] = static_cast<std::int32_t>(10 * i + j + 1);
  }).get();
  std::vector<std::int32_t> host(a.size());
  dev.copy_to_host(a.buffer(), std::span<std::int32_t>(host)).get();
  const std::vector<std::int32_t> want{0, 0, 0,  0,  0,  0, 0, 0, 1, 2, 3, 0,  //
                                       0, 0, 11, 12, 13, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(host, want);
  const auto& ca = a;
  const std::int32_t* cp = xdev::host_data(xdev::slice(ca, {3, 4}));
  EXPECT_EQ(cp, xdev::host_data(a) + 18);
  EXPECT_EQ(xdev::host_data(xdev::slice(a, {0, 0})), nullptr) << "an empty window";
  EXPECT_EQ(error_of([] { (void)xdev::host_data(xdev::AnyArrayView<float>{}); }).code(), xdev::errc::invalid_argument);
}

TEST(AnyParallelBackends, ADeviceThatCannotRunAKernelIsAClearErrorAndNothingIsSubmitted) {
  xdev::Runtime<xdev_test::F32OnlyBackend> rt;
  AnyDevice dev(rt.device(0));
  EXPECT_FALSE(dev.runs_kernels());
  const auto before = dev.execution_stats();
  const auto e = error_of([&] { (void)xdev::parallel_for(dev, 10, [](std::size_t) {}); });
  EXPECT_EQ(e.code(), xdev::errc::unimplemented);
  EXPECT_THAT(e.what(), HasSubstr("parallel_for: F32ONLY:0 cannot run a C++ kernel"));
  const auto r = error_of([&] {
    (void)xdev::parallel_reduce(
        dev.default_stream(), 10, [](std::size_t) { return 1.0f; }, xdev::Sum<float>{});
  });
  EXPECT_THAT(r.what(), HasSubstr("parallel_reduce: F32ONLY:0"));
  EXPECT_EQ(dev.execution_stats().submitted, before.submitted) << "nothing was submitted";
  auto a = xdev::empty<float>(dev, {4});
  EXPECT_THAT(error_of([&] { (void)xdev::host_data(a); }).what(), HasSubstr("F32ONLY:0 is not host-accessible"));
  EXPECT_THAT(error_of([&] {
                (void)xdev::host_data(xdev::slice(a, {1, 3}));
              }).what(),
              HasSubstr("F32ONLY:0 is not host-accessible"));
  EXPECT_EQ(error_of([] { (void)xdev::parallel_for(AnyDevice{}, 1, [](std::size_t) {}); }).code(),
            xdev::errc::invalid_argument);
}

TEST(TypedParallel, ParallelReduceOnATypedDevice) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto n = xdev::parallel_reduce(
      rt.device(0), 1000, [](std::size_t i) { return static_cast<long>(i); }, xdev::Sum<long>{});
  EXPECT_EQ(n.get(), 999L * 1000L / 2L);
  static_assert(xdev::ReducerType<xdev::Sum<float>> && xdev::ReducerType<xdev::Max<int>>);
}

}  // namespace
