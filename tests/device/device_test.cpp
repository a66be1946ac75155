#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>

#include "support/manual_backend.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <range/v3/range/conversion.hpp>
#include <range/v3/view/filter.hpp>
#include <range/v3/view/reverse.hpp>
#include <range/v3/view/transform.hpp>

#include <chrono>
#include <cstdlib>
#include <future>
#include <iterator>
#include <numeric>
#include <ranges>
#include <sstream>
#include <thread>
#include <unordered_set>
#include <vector>

namespace {

using ::testing::HasSubstr;
using Host = xdev::backends::Host;
using xdev_test::ManualBackend;
using namespace std::chrono_literals;

TEST(Device, IsASmallCheapValue) {
  // The runtime's address, its anchor (whether it is alive), the ordinal and the anchor's stamp.
  static_assert(sizeof(xdev::Device<Host>) <= 3 * sizeof(void*));
  static_assert(std::is_trivially_copyable_v<xdev::Device<Host>>);
  static_assert(xdev::Device<Host>::capabilities::max_inflight == 64);
  static_assert(xdev::Device<Host>::capability_set == Host::capabilities::set);
}

TEST(Device, NameEqualityHashAndPrinting) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 3, .threads = 2});
  auto a = rt.device(1);
  auto b = rt.device(1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, rt.device(2));
  EXPECT_EQ(a.name(), "HOST:1");
  std::ostringstream os;
  os << a;
  EXPECT_EQ(os.str(), "HOST:1");
  std::unordered_set<xdev::Device<Host>> set{rt.device(0), rt.device(1), rt.device(2), b};
  EXPECT_EQ(set.size(), 3u);
  xdev::Runtime<Host> other({}, Host::Options{.devices = 3, .threads = 2});
  EXPECT_NE(other.device(1), a);  // same ordinal, another runtime
}

TEST(Device, HostDevicesCanTakeAnotherTypeName) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 2, .threads = 2, .name = "SPMD_TEST"});
  EXPECT_EQ(rt.device(1).name(), "SPMD_TEST:1");
  EXPECT_EQ(rt.name(), "SPMD_TEST");
  for (const char* bad : {"", "host", "1X", "A-B"}) {
    try {
      Host h(Host::Options{.devices = 1, .threads = 1, .name = bad});
      ADD_FAILURE() << "name \"" << bad << "\" was accepted";
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
      EXPECT_THAT(e.what(), ::testing::HasSubstr("Host::Options::name=\"" + std::string(bad) + "\""));
    }
  }
}

TEST(Device, EnumerationIsARange) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 4, .threads = 2});
  auto names = rt.devices() | ranges::views::transform([](auto d) { return d.name(); }) | ranges::to<std::vector>();
  EXPECT_EQ(names, (std::vector<std::string>{"HOST:0", "HOST:1", "HOST:2", "HOST:3"}));
}

// devices() is a random-access, sized view for range-v3 and for std::ranges alike.
using DeviceRange = decltype(std::declval<xdev::Runtime<Host>&>().devices());
static_assert(std::ranges::random_access_range<DeviceRange> && std::ranges::sized_range<DeviceRange> &&
              std::ranges::view<DeviceRange>);
static_assert(std::random_access_iterator<std::ranges::iterator_t<DeviceRange>>);
static_assert(ranges::random_access_range<DeviceRange> && ranges::sized_range<DeviceRange> &&
              ranges::view_<DeviceRange>);
static_assert(std::is_same_v<std::ranges::range_value_t<DeviceRange>, xdev::Device<Host>>);

TEST(Device, EnumerationIsARandomAccessView) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 4, .threads = 2});
  auto all = rt.devices();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_FALSE(all.empty());
  EXPECT_EQ(all[2], rt.device(2));
  EXPECT_EQ(all.end() - all.begin(), 4);
  EXPECT_EQ(*(all.begin() + 3), rt.device(3));
  EXPECT_EQ(all.begin()[1], rt.device(1));
  auto it = all.end();
  --it;
  EXPECT_EQ((*it).ordinal(), 3u);
  EXPECT_LT(all.begin(), it);
  // range-v3 adaptors on the prvalue (a view, so it may be piped without an lvalue).
  auto odd = rt.devices() | ranges::views::filter([](auto d) { return d.ordinal() % 2 == 1; }) |
             ranges::views::transform([](auto d) { return d.ordinal(); }) | ranges::to<std::vector>();
  EXPECT_EQ(odd, (std::vector<std::size_t>{1, 3}));
  auto backwards = rt.devices() | ranges::views::reverse | ranges::views::transform([](auto d) { return d.name(); }) |
                   ranges::to<std::vector>();
  EXPECT_EQ(backwards, (std::vector<std::string>{"HOST:3", "HOST:2", "HOST:1", "HOST:0"}));
#if !defined(__clang__)  // clang 14 cannot compile libstdc++ 12's view adaptors (any view's, not this one's)
  std::vector<std::size_t> even;
  for (auto d : rt.devices() | std::views::filter([](auto d) { return d.ordinal() % 2 == 0; }))
    even.push_back(d.ordinal());
  EXPECT_EQ(even, (std::vector<std::size_t>{0, 2}));
#endif
  EXPECT_EQ(std::ranges::distance(rt.devices()), 4);
}

TEST(Device, UnknownOrdinalIsNotFound) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 2, .threads = 2});
  try {
    (void)rt.device(2);
    FAIL();
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::not_found);
    EXPECT_THAT(e.what(), HasSubstr("HOST:2"));
    EXPECT_THAT(e.what(), HasSubstr("2 device(s)"));
  }
}

TEST(Device, TransfersInEveryDirection) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 2, .threads = 2});
  auto d0 = rt.device(0), d1 = rt.device(1);
  std::vector<double> in(1000), out(1000);
  std::iota(in.begin(), in.end(), 0.5);
  auto a = d0.allocate<double>(in.size());
  auto b = d1.allocate<double>(in.size());
  d0.copy_to_device(std::span<const double>(in), a).get();
  d1.copy(a, b).get();  // device to device, across devices
  d1.copy_to_host(b, std::span<double>(out)).get();
  EXPECT_EQ(out, in);
}

TEST(Device, TransferShapeMismatchIsRejectedBeforeAnythingRuns) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 2, .threads = 2});
  auto dev = rt.device(0);
  std::vector<float> small(3);
  auto buf = dev.allocate<float>(4);
  try {
    (void)dev.copy_to_device(std::span<const float>(small), buf);
    FAIL();
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("3 elements"));
    EXPECT_THAT(e.what(), HasSubstr("4"));
  }
  auto elsewhere = rt.device(1).allocate<float>(3);
  EXPECT_THROW((void)dev.copy_to_device(std::span<const float>(small), elsewhere), xdev::error);
  EXPECT_EQ(dev.execution_stats().submitted, 0u);
}

TEST(Runtime, ShutdownFinishesWorkInFlightAndThenRejectsSubmissions) {
  std::vector<std::future<int>> futures;
  std::atomic<int> ran{0};
  xdev::Device<Host> dev;
  {
    xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
    dev = rt.device(0);
    for (int i = 0; i < 50; ++i)
      futures.push_back(dev.execute([&, i] {
        std::this_thread::sleep_for(1ms);
        ++ran;
        return i;
      }));
    rt.shutdown();
    try {
      (void)dev.execute([] {});
      FAIL() << "submission after shutdown accepted";
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.code(), xdev::errc::unavailable);
      EXPECT_THAT(e.what(), HasSubstr("HOST:0"));
    }
  }
  EXPECT_EQ(ran.load(), 50);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(futures[i].get(), i);  // no future left broken
}

TEST(Runtime, SynchronizeWaitsForEveryDeviceBeforeRaisingAnError) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 2, .threads = 2});
  std::atomic<bool> slow_done{false};
  (void)rt.device(0).execute([] { throw std::runtime_error("fails fast"); });
  auto slow = rt.device(1).execute([&] {
    std::this_thread::sleep_for(50ms);
    slow_done = true;
  });
  EXPECT_THROW(rt.synchronize(), std::runtime_error);
  EXPECT_TRUE(slow_done) << "synchronize() raised before the other device had finished";
}

TEST(Runtime, ShutdownRejectsSubmissionsFromCoroutinesToo) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  rt.shutdown();
  // Work already running on a device thread counts as an async context: it must be refused too.
  boost::asio::thread_pool pool(1);
  auto f = boost::asio::post(pool, boost::asio::use_future([&] {
                               try {
                                 (void)dev.execute([] {}, [](std::exception_ptr) {});
                                 return false;
                               } catch (const xdev::error& e) {
                                 return e.code() == xdev::errc::unavailable;
                               }
                             }));
  EXPECT_TRUE(f.get());
  pool.join();
}

TEST(Runtime, DestroyingItWithWorkInFlightFinishesTheWork) {
  std::vector<std::future<void>> futures;
  std::atomic<int> ran{0};
  {
    xdev::Runtime<Host> rt({}, Host::Options{.devices = 2, .threads = 2});
    for (auto d : rt.devices())
      for (int i = 0; i < 20; ++i)
        futures.push_back(d.execute([&] {
          std::this_thread::sleep_for(1ms);
          ++ran;
        }));
  }
  EXPECT_EQ(ran.load(), 40);
  for (auto& f : futures) EXPECT_NO_THROW(f.get());
}

TEST(HostBackend, DeviceCountFromTheEnvironment) {
  ::setenv("XDEV_HOST_DEVICES", "3", 1);
  EXPECT_EQ(Host().device_count(), 3u);
  for (const char* bad : {"0", "-2", "two", "1025", "4 "}) {
    ::setenv("XDEV_HOST_DEVICES", bad, 1);
    try {
      Host h;
      FAIL() << "accepted XDEV_HOST_DEVICES=" << bad;
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
      EXPECT_THAT(e.what(), HasSubstr(std::string("XDEV_HOST_DEVICES=\"") + bad + "\""));
      EXPECT_THAT(e.what(), HasSubstr("[1, 1024]"));
    }
  }
  ::unsetenv("XDEV_HOST_DEVICES");
  EXPECT_EQ(Host().device_count(), 1u);
}

TEST(HostBackend, WorkerPoolSizedToTheMachine) {
  Host h;
  EXPECT_EQ(h.thread_count(), std::max<std::size_t>(2, std::thread::hardware_concurrency()));
  EXPECT_THROW(Host(Host::Options{.devices = 1, .threads = 0}), xdev::error);
}

TEST(HostBackend, MemoryIsHostAddressable) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto b = rt.device(0).allocate<int>(16);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.host_data()) % 64, 0u);
  b.host_data()[15] = 3;
  std::vector<int> out(16);
  rt.device(0).copy_to_host(b, std::span<int>(out)).get();
  EXPECT_EQ(out[15], 3);
}

TEST(HostBackend, SystemOutOfMemoryIsAnErrorNotACrash) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  try {
    (void)rt.device(0).allocate<std::byte>(std::size_t{1} << 62);
    FAIL();
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::out_of_memory);
    EXPECT_THAT(e.what(), HasSubstr("HOST:0"));
  }
}

}  // namespace
