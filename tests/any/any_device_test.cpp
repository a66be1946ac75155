// xdev::AnyDevice: a value (copy, equality, hash, printing, erased vs typed), the owner it keeps
// alive, every completion token through it, kept errors, memory and random state shared with the
// typed device, ops on AnyArray, and a backend that describes itself at run time (its name,
// capabilities and per-dtype op support) seen through both the typed and the erased handle.
#include <xdev/any/any_device.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/autocast.hpp>
#include <xdev/ops/ops.hpp>
#include <xdev/random/stream.hpp>
#include <xdev/testing/arrays.hpp>

#include "support/error_of.hpp"
#include "support/manual_backend.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

namespace {

namespace asio = boost::asio;
using ::testing::HasSubstr;
using Host = xdev::backends::Host;
using xdev::AnyDevice;
using xdev_test::ManualBackend;

struct custom_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using xdev_test::expect_error;

// A shared_ptr<void> whose deleter sets `*released`: the owner an AnyDevice keeps alive.
std::shared_ptr<void> flag_owner(const std::shared_ptr<std::atomic<bool>>& released) {
  return std::shared_ptr<void>(new int(0), [released](int* p) {
    delete p;
    released->store(true);
  });
}

class AnyDeviceTest : public ::testing::Test {
 protected:
  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 3, .threads = 2}};
};

// ---- a value ----------------------------------------------------------------------------------

TEST_F(AnyDeviceTest, CopiesAreOnePointerAndCompareEqual) {
  static_assert(sizeof(AnyDevice) == sizeof(std::shared_ptr<void>));
  const AnyDevice a = rt.device(1);
  const AnyDevice b = a;  // NOLINT(performance-unnecessary-copy-initialization): the copy is the point
  EXPECT_TRUE(a.valid());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.ordinal(), 1u);
  EXPECT_NE(a, AnyDevice(rt.device(2)));
}

TEST_F(AnyDeviceTest, DevicesErasedSeparatelyAreEqualAndHashAlike) {
  const AnyDevice a = rt.device(1);
  const AnyDevice b = rt.device(1);  // another erasure of the same device
  EXPECT_EQ(a, b);
  EXPECT_EQ(std::hash<AnyDevice>{}(a), std::hash<AnyDevice>{}(b));
  std::unordered_set<AnyDevice> set{a, b, rt.device(0), rt.device(2), rt.device(0)};
  EXPECT_EQ(set.size(), 3u);
  xdev::Runtime<Host> other({}, Host::Options{.devices = 3, .threads = 2});
  EXPECT_NE(AnyDevice(other.device(1)), a) << "same name and ordinal, another runtime";
  EXPECT_FALSE(AnyDevice(other.device(1)).same_runtime(a));
  EXPECT_TRUE(AnyDevice(rt.device(0)).same_runtime(a));
}

TEST_F(AnyDeviceTest, ErasedEqualsTyped) {
  const auto typed = rt.device(2);
  const AnyDevice erased = typed;
  EXPECT_TRUE(erased == typed);
  EXPECT_TRUE(typed == erased);
  EXPECT_FALSE(erased == rt.device(1));
  EXPECT_EQ(std::hash<AnyDevice>{}(erased), std::hash<xdev::Device<Host>>{}(typed));
  ASSERT_NE(erased.target<Host>(), nullptr);
  EXPECT_EQ(*erased.target<Host>(), typed);
  EXPECT_EQ(erased.target<ManualBackend>(), nullptr);
}

TEST_F(AnyDeviceTest, PrintsItsNameAndTypeName) {
  const AnyDevice a = rt.device(2);
  std::ostringstream os;
  os << a;
  EXPECT_EQ(os.str(), "HOST:2");
  EXPECT_EQ(a.name(), rt.device(2).name());
  EXPECT_EQ(a.type_name(), "HOST");
  EXPECT_EQ(a.description(), "host memory, 2 worker threads shared by 3 devices") << "Host::device_description";
  EXPECT_EQ(a.description(), rt.device(2).description());
}

TEST_F(AnyDeviceTest, AnEmptyHandleNamesNoDeviceAndRefusesWork) {
  const AnyDevice none;
  EXPECT_FALSE(none.valid());
  EXPECT_EQ(none, AnyDevice{});
  EXPECT_NE(none, AnyDevice(rt.device(0)));
  EXPECT_FALSE(none == rt.device(0));
  EXPECT_EQ(AnyDevice(xdev::Device<Host>{}), none) << "an invalid typed device erases to an empty handle";
  std::ostringstream os;
  os << none;
  EXPECT_EQ(os.str(), "(no device)");
  EXPECT_EQ(none.description(), "");
  expect_error(xdev::errc::invalid_argument, [&] { none.synchronize(); }, {"empty"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)none.allocate<float>(4); }, {"empty"});
}

TEST_F(AnyDeviceTest, CapabilitySetEqualsTheTypedOne) {
  const AnyDevice a = rt.device(0);
  EXPECT_EQ(a.capability_set(), xdev::Device<Host>::capability_set);
  EXPECT_EQ(xdev::capabilities_of(a), xdev::capabilities_of(rt.device(0)));
  EXPECT_EQ(a.max_inflight(), rt.device(0).max_inflight());
}

// ---- state shared with the typed device ---------------------------------------------------------

TEST_F(AnyDeviceTest, MemoryGoesThroughTheDevicesAllocator) {
  const auto typed = rt.device(0);
  const AnyDevice a = typed;
  const auto before = typed.memory_stats();
  {
    auto buf = a.allocate<double>(100);
    EXPECT_EQ(buf.size(), 100u);
    EXPECT_EQ(buf.device(), a);
    EXPECT_EQ(a.memory_stats().bytes_in_use, before.bytes_in_use + 800);
    EXPECT_EQ(typed.memory_stats(), a.memory_stats());
  }
  EXPECT_EQ(a.memory_stats().bytes_in_use, before.bytes_in_use);
  a.set_memory_limit(1000);
  expect_error(xdev::errc::out_of_memory, [&] { (void)a.allocate<double>(200); }, {"HOST:0", "1600", "1000"});
  a.set_memory_limit(std::nullopt);
  a.release_cached_memory();
  EXPECT_EQ(a.memory_stats().bytes_reserved, a.memory_stats().bytes_in_use);
  a.reset_peak_memory_stats();
  EXPECT_EQ(a.memory_stats().peak_bytes_in_use, a.memory_stats().bytes_in_use);
}

TEST_F(AnyDeviceTest, RandomStreamIsTheTypedDevicesOne) {
  const AnyDevice a = rt.device(1);
  a.manual_seed(77);
  EXPECT_EQ(rt.device(1).generator().seed(), 77u);
  EXPECT_EQ(&a.generator(), &rt.device(1).generator());
  auto out = xdev::empty<float>(a, {100});
  xdev::ops::rng_uniform(a, out).get();
  EXPECT_EQ(rt.device(1).generator().offset(), 100u);
  std::vector<float> ref(100);
  xdev::random::fill_uniform(xdev::RngAlgorithm::philox, 77, 0, std::span<float>(ref));
  EXPECT_TRUE(xdev::testing::same_bits(xdev::testing::to_host(out), ref));
}

TEST_F(AnyDeviceTest, DefaultStreamAndQueueAreTheTypedDevicesOnes) {
  const AnyDevice a = rt.device(0);
  EXPECT_EQ(a.queue(), rt.device(0).queue());
  EXPECT_EQ(a.default_stream(), a.default_stream());
  EXPECT_FALSE(a.make_stream() == a.default_stream());
  const auto before = rt.device(0).execution_stats().submitted;
  a.execute([] {}).get();
  EXPECT_EQ(a.execution_stats().submitted, before + 1);
  EXPECT_EQ(rt.device(0).execution_stats().submitted, before + 1);
}

TEST_F(AnyDeviceTest, EventsOfAnErasedStreamGiveTheTimeBetweenThem) {
  const AnyDevice a = rt.device(1);
  auto s = a.make_stream();
  const xdev::Event start = s.record();
  s.execute([] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }).get();
  const xdev::Event end = s.record();
  end.wait();
  EXPECT_GE(start.elapsed_time(end), 30.0);
}

// ---- completion tokens --------------------------------------------------------------------------

TEST_F(AnyDeviceTest, FutureCarriesResultsAndErrors) {
  const AnyDevice a = rt.device(0);
  xdev::Future<int> f = a.execute([] { return 42; }, xdev::use_future);
  EXPECT_EQ(f.get(), 42);
  auto g = a.execute([]() -> int { throw custom_failure("bad kernel 17"); });
  try {
    (void)g.get();
    FAIL() << "no exception";
  } catch (const custom_failure& e) {
    EXPECT_STREQ(e.what(), "bad kernel 17");
  }
  EXPECT_NO_THROW(a.synchronize());

  const std::vector<int> in{1, 2, 3, 4};
  std::vector<int> out(4);
  auto buf = a.allocate<int>(4);
  a.copy_to_device(std::span<const int>(in), buf).get();
  a.copy_to_host(buf, std::span<int>(out)).get();
  EXPECT_EQ(out, in);
}

TEST_F(AnyDeviceTest, CallbackReceivesErrorAndValue) {
  const AnyDevice a = rt.device(0);
  std::promise<std::pair<bool, int>> p;
  a.execute([] { return 9; }, [&](std::exception_ptr e, int v) { p.set_value({e != nullptr, v}); });
  EXPECT_EQ(p.get_future().get(), std::make_pair(false, 9));

  auto x = xdev::testing::to_device(a, {3}, std::vector<double>{1, 2, 3.5});
  std::promise<double> q;
  xdev::ops::sum(a, x, [&](std::exception_ptr e, double v) { q.set_value(e ? -1.0 : v); });
  EXPECT_EQ(q.get_future().get(), 6.5);
}

asio::awaitable<float> erased_coroutine(AnyDevice dev) {
  const std::vector<float> in{1, 2, 3, 4};
  std::vector<float> out(4);
  auto x = xdev::empty<float>(dev, {4});
  co_await dev.copy_to_device(std::span<const float>(in), x, asio::use_awaitable);
  co_await xdev::ops::scale(dev, x, 2.0f, asio::use_awaitable);
  co_await dev.copy_to_host(x, std::span<float>(out), asio::use_awaitable);
  float total = co_await xdev::ops::sum(dev.make_stream(), x, asio::use_awaitable);
  try {
    co_await dev.execute([] { throw custom_failure("in coroutine"); }, asio::use_awaitable);
  } catch (const custom_failure&) {
    total += 1000;
  }
  co_return total + out[3];
}

TEST_F(AnyDeviceTest, AwaitableInACoroutine) {
  asio::io_context io;
  auto f = asio::co_spawn(io, erased_coroutine(rt.device(1)), xdev::use_future);
  io.run();
  EXPECT_EQ(f.get(), 20.0f + 1000.0f + 8.0f);
}

TEST_F(AnyDeviceTest, DeferredSubmitsOnlyWhenInvoked) {
  const AnyDevice a = rt.device(0);
  a.synchronize();
  const auto before = a.execution_stats().submitted;
  auto op = a.execute([] { return 5; }, asio::deferred);
  auto x = xdev::testing::to_device(a, {2}, std::vector<float>{1, 2});
  const auto after_copy = a.execution_stats().submitted;
  EXPECT_EQ(after_copy, before + 1) << "only the copy was submitted";
  auto fill = xdev::ops::fill(a, x, 3.0f, asio::deferred);
  EXPECT_EQ(a.execution_stats().submitted, after_copy);
  EXPECT_EQ(std::move(op)(xdev::use_future).get(), 5);
  std::move(fill)(xdev::use_future).get();
  EXPECT_EQ(xdev::testing::to_host(x), (std::vector<float>{3, 3}));
}

TEST_F(AnyDeviceTest, ADroppedFuturesErrorIsRaisedBySynchronize) {
  const AnyDevice a = rt.device(0);
  (void)a.execute([] { throw custom_failure("nobody listens"); });
  try {
    a.synchronize();
    FAIL() << "the error of a dropped future was lost";
  } catch (const custom_failure& e) {
    EXPECT_STREQ(e.what(), "nobody listens");
  }
  EXPECT_NO_THROW(a.synchronize());

  // The erased and the typed handle share the device: either one's synchronize raises it.
  (void)a.execute([] { throw custom_failure("seen by the typed handle"); });
  EXPECT_THROW(rt.device(0).synchronize(), custom_failure);
  EXPECT_NO_THROW(rt.device(1).synchronize());
}

// ---- the owner ----------------------------------------------------------------------------------

TEST_F(AnyDeviceTest, OwnerLivesAsLongAsACopyAnArrayOrAStream) {
  auto released = std::make_shared<std::atomic<bool>>(false);
  // unique_ptr rather than optional: g++ 12 at -O3 reports a std::optional<AnyDevice> reset
  // here as "may be used uninitialized" (a false positive that fails the release preset).
  auto dev = std::make_unique<AnyDevice>(rt.device(0), flag_owner(released));
  auto copy = std::make_unique<AnyDevice>(*dev);
  std::optional<xdev::AnyArray<float>> array = xdev::empty<float>(*dev, {8});
  std::optional<xdev::AnyStream> stream = dev->make_stream();
  EXPECT_NE(dev->owner(), nullptr);
  EXPECT_EQ(AnyDevice(rt.device(0)).owner(), nullptr);
  dev.reset();
  copy.reset();
  EXPECT_FALSE(*released) << "the array and the stream hold it";
  array.reset();
  EXPECT_FALSE(*released) << "the stream holds it";
  stream.reset();
  EXPECT_TRUE(*released);
}

TEST(AnyDeviceOwner, APendingOperationKeepsTheOwnerAlive) {
  // ManualBackend runs nothing by itself: the test completes each queued operation.
  xdev::Runtime<ManualBackend> rt({}, 1);
  auto released = std::make_shared<std::atomic<bool>>(false);
  xdev::Future<int> first, second;
  {
    const AnyDevice dev(rt.device(0), flag_owner(released));
    first = dev.execute([] { return 1; });   // reaches the backend
    second = dev.execute([] { return 2; });  // waits in the stream behind it
  }
  rt.backend().wait_queued(1);
  EXPECT_FALSE(*released) << "two operations are pending";
  ASSERT_TRUE(rt.backend().run_one());
  EXPECT_EQ(first.get(), 1);
  rt.backend().wait_queued(1);
  EXPECT_FALSE(*released) << "the second operation is pending";
  ASSERT_TRUE(rt.backend().run_one());
  EXPECT_EQ(second.get(), 2);
  EXPECT_TRUE(*released);
}

// ---- ops ----------------------------------------------------------------------------------------

TEST_F(AnyDeviceTest, OpsOnTheHostBackendRunItsMembersWithoutFallback) {
  const AnyDevice a = rt.device(0);
  auto x = xdev::testing::to_device(a, {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  auto y = xdev::empty<float>(a, {2, 3});
  auto h = xdev::empty<xdev::bf16>(a, {2, 3});
  const auto before = xdev::metrics::snapshot();
  xdev::ops::fill(a, y, 1.0f).get();
  xdev::ops::axpy(a.make_stream(), 2.0f, x, y).get();
  xdev::ops::convert(a, y, h).get();
  EXPECT_EQ(xdev::ops::dot(a, x, y).get(), 1 * 3 + 2 * 5 + 3 * 7 + 4 * 9 + 5 * 11 + 6 * 13.0f);
  for (const auto& [name, v] : xdev::metrics::snapshot()) {
    if (name.rfind("fallback.", 0) == 0) {
      EXPECT_EQ(v, before.contains(name) ? before.at(name) : 0) << name;
    }
  }
  EXPECT_EQ(xdev::testing::to_host(y), (std::vector<float>{3, 5, 7, 9, 11, 13}));
}

TEST(AnyDeviceOps, ABackendWithoutOpMembersFallsBackThroughTheErasedPath) {
  xdev::Runtime<ManualBackend> rt({}, 1, ManualBackend::Mode::inline_completion);
  const AnyDevice a = rt.device(0);
  static_assert(!xdev::concepts::DescribesDevices<ManualBackend>);
  EXPECT_EQ(a.description(), "") << "no device_description hook";
  auto x = xdev::empty<std::int64_t>(a, {5});
  const auto before = xdev::metrics::value("fallback.fill");
  const auto moved = a.transfer_stats().bytes_from_host;
  xdev::ops::fill(a, x, std::int64_t{-3}).get();
  EXPECT_EQ(xdev::metrics::value("fallback.fill"), before + 1);
  EXPECT_EQ(a.transfer_stats().bytes_from_host - moved, 5 * sizeof(std::int64_t))
      << "the fallback's copy back to the device counts in the device's transfers";
  EXPECT_EQ(xdev::testing::to_host(x), std::vector<std::int64_t>(5, -3));
}

TEST_F(AnyDeviceTest, ChecksRunBeforeSubmissionAsForTypedDevices) {
  const AnyDevice d0 = rt.device(0), d1 = rt.device(1);
  auto a = xdev::testing::to_device(d0, {2, 3}, std::vector<float>(6, 1.0f));
  auto b = xdev::testing::to_device(d0, {3, 2}, std::vector<float>(6, 1.0f));
  auto c = xdev::testing::to_device(d1, {2, 3}, std::vector<float>(6, 1.0f));
  d0.synchronize();
  const auto before = d0.execution_stats().submitted;
  expect_error(xdev::errc::invalid_argument, [&] { (void)xdev::ops::add(d0, a, b, a); }, {"[2, 3]", "[3, 2]"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)xdev::ops::add(d0, a, c, a); },
               {"b is on HOST:1, not on HOST:0"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)xdev::ops::gemm(d0, a, b, a); }, {"same array as a"});
  EXPECT_EQ(d0.execution_stats().submitted, before);
}

TEST_F(AnyDeviceTest, CopyBetweenRuntimesIsRejectedNamingBothDevices) {
  xdev::Runtime<ManualBackend> manual({}, 2, ManualBackend::Mode::inline_completion);
  const AnyDevice h = rt.device(0), m = manual.device(1);
  auto src = xdev::testing::to_device(h, {4}, std::vector<float>{1, 2, 3, 4});
  auto dst = xdev::empty<float>(m, {4});
  expect_error(xdev::errc::invalid_argument, [&] { (void)xdev::ops::copy(h, src, dst); },
               {"copy", "HOST:0", "MANUAL:1", "different runtimes"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)xdev::ops::copy(AnyDevice(rt.device(2)), src, dst); },
               {"copy", "HOST:0", "MANUAL:1", "HOST:2"});
  // Within one runtime, across devices: allowed.
  auto other = xdev::empty<float>(AnyDevice(rt.device(1)), {4});
  xdev::ops::copy(h, src, other).get();
  EXPECT_EQ(xdev::testing::to_host(other), (std::vector<float>{1, 2, 3, 4}));
}

// ---- a backend described at run time --------------------------------------------------------------

// ManualBackend (completing inline) whose name, capabilities and op support are chosen at run
// time, with a `fill` member of its own. Statically it is "DESCRIBED" with default capabilities.
class Described : public ManualBackend {
 public:
  static constexpr std::string_view name = "DESCRIBED";
  using capabilities = xdev::Capabilities<>;

  struct Config {
    std::string name;
    xdev::CapabilitySet capabilities;
    xdev::ops::OpKind refused_op = xdev::ops::OpKind::fill;
    xdev::DType refused_dtype = xdev::DType::i32;
  };

  explicit Described(Config c) : ManualBackend(2, Mode::inline_completion), config_(std::move(c)) {}

  std::string_view runtime_name() const noexcept { return config_.name; }
  xdev::CapabilitySet runtime_capabilities() const noexcept { return config_.capabilities; }
  // Returns something convertible to std::string (not std::string itself); device 1 cannot say.
  const char* device_description(std::size_t device) const {
    if (device == 1) throw xdev::error(xdev::errc::unavailable, config_.name + ":1 is asleep");
    return "a described device";
  }
  bool implements(xdev::ops::OpKind op, xdev::DType t, xdev::DType) const noexcept {
    return !(op == config_.refused_op && t == config_.refused_dtype);
  }

  template <class T>
  void fill(std::size_t, const xdev::ops::FillArgs<T, memory_handle>& a, xdev::Completion done) {
    fills.fetch_add(1);
    for (std::size_t i = 0; i < a.n; ++i) std::memcpy(a.x + i * sizeof(T), &a.value, sizeof(T));
    done(nullptr);
  }

  std::atomic<int> fills{0};

 private:
  Config config_;
};

static_assert(xdev::check_backend<Described>() && xdev::concepts::HasRuntimeName<Described> &&
              xdev::concepts::HasRuntimeCapabilities<Described> && xdev::concepts::DeclaresOps<Described> &&
              xdev::concepts::DescribesDevices<Described>);

xdev::CapabilitySet described_capabilities() {
  xdev::CapabilitySet c;
  c.max_inflight = 3;
  c.memory_per_device = 1 << 20;
  c.supported_dtypes = (1u << static_cast<unsigned>(xdev::DType::f32)) |
                       (1u << static_cast<unsigned>(xdev::DType::i32)) |
                       (1u << static_cast<unsigned>(xdev::DType::i64));
  c.rng_default = xdev::RngAlgorithm::three_fry;
  c.dense_gather_factor = 1;
  c.autocast_key = xdev::AutocastKey::npu;
  c.autocast_dtype = xdev::DType::f16;
  return c;
}

class DescribedTest : public ::testing::Test {
 protected:
  xdev::Runtime<Described> rt{{}, Described::Config{"RTNAME", described_capabilities()}};
};

TEST_F(DescribedTest, ItsRunTimeNameNamesItsDevices) {
  EXPECT_EQ(rt.name(), "RTNAME");
  EXPECT_EQ(rt.device(1).name(), "RTNAME:1");
  const AnyDevice a = rt.device(1);
  EXPECT_EQ(a.name(), "RTNAME:1");
  EXPECT_EQ(a.type_name(), "RTNAME");
  expect_error(xdev::errc::not_found, [&] { (void)rt.device(5); }, {"RTNAME:5 does not exist; RTNAME has 2"});
}

TEST_F(DescribedTest, ItsDeviceDescriptionDescribesItsDevices) {
  EXPECT_EQ(rt.device(0).description(), "a described device");
  EXPECT_EQ(AnyDevice(rt.device(0)).description(), "a described device");
  expect_error(xdev::errc::unavailable, [&] { (void)AnyDevice(rt.device(1)).description(); }, {"RTNAME:1 is asleep"});
}

TEST_F(DescribedTest, ItsRunTimeCapabilitiesAreInForce) {
  const auto caps = described_capabilities();
  const AnyDevice a = rt.device(0);
  EXPECT_EQ(xdev::capabilities_of(rt.device(0)), caps);
  EXPECT_EQ(a.capability_set(), caps);
  EXPECT_EQ(xdev::capabilities_of(a), caps);
  EXPECT_EQ(xdev::Device<Described>::capability_set, xdev::Capabilities<>::set) << "the static list, untouched";
  if (!xdev::getenv_string("XDEV_MAX_INFLIGHT")) {
    EXPECT_EQ(rt.device(0).max_inflight(), 3u);
    EXPECT_EQ(a.max_inflight(), 3u);
  }
  EXPECT_EQ(a.memory_stats().limit, std::optional<std::size_t>(1 << 20));
}

TEST_F(DescribedTest, AnUnsupportedDtypeIsRejectedNamingTheRunTimeName) {
  const AnyDevice a = rt.device(0);
  auto x = xdev::empty<double>(a, {4});
  const auto before = a.execution_stats().submitted;
  expect_error(xdev::errc::unimplemented, [&] { (void)xdev::ops::fill(a, x, 1.0); },
               {"fill: dtype f64 is not supported by RTNAME:0"});
  auto typed = xdev::empty<double>(rt.device(0), {4});
  expect_error(xdev::errc::unimplemented, [&] { (void)xdev::ops::fill(rt.device(0), typed, 1.0); },
               {"fill: dtype f64 is not supported by RTNAME:0"});
  EXPECT_EQ(a.execution_stats().submitted, before);
}

TEST_F(DescribedTest, ARefusedCombinationRunsTheFallbackAndOnlyThatOne) {
  const AnyDevice a = rt.device(0);
  auto& backend = rt.backend();
  auto f = xdev::empty<float>(a, {3});
  auto i = xdev::empty<std::int32_t>(a, {3});
  auto l = xdev::empty<std::int64_t>(a, {3});
  auto typed_i = xdev::empty<std::int32_t>(rt.device(0), {3});
  // (op, how to run it, whether the backend refuses it): the refused one counts in fallback.fill
  // and skips the member; the others run the member and count nothing.
  struct Case {
    const char* what;
    std::function<void()> run;
    bool refused;
  };
  const Case cases[] = {
      {"f32 through AnyDevice", [&] { xdev::ops::fill(a, f, 1.5f).get(); }, false},
      {"i32 through AnyDevice", [&] { xdev::ops::fill(a, i, 7).get(); }, true},
      {"i64 through AnyDevice", [&] { xdev::ops::fill(a, l, std::int64_t{8}).get(); }, false},
      {"i32 through Device<B>", [&] { xdev::ops::fill(rt.device(0), typed_i, 9).get(); }, true},
  };
  for (const auto& c : cases) {
    const auto fallbacks = xdev::metrics::value("fallback.fill");
    const int members = backend.fills.load();
    c.run();
    EXPECT_EQ(xdev::metrics::value("fallback.fill"), fallbacks + (c.refused ? 1 : 0)) << c.what;
    EXPECT_EQ(backend.fills.load(), members + (c.refused ? 0 : 1)) << c.what;
  }
  EXPECT_EQ(xdev::testing::to_host(f), std::vector<float>(3, 1.5f));
  EXPECT_EQ(xdev::testing::to_host(i), std::vector<std::int32_t>(3, 7));
  EXPECT_EQ(xdev::testing::to_host(l), std::vector<std::int64_t>(3, 8));
  EXPECT_EQ(xdev::testing::to_host(typed_i), std::vector<std::int32_t>(3, 9));
}

TEST_F(DescribedTest, RngDenseGatherAndAutocastFollowTheRunTimeCapabilities) {
  const AnyDevice a = rt.device(0);
  a.manual_seed(5);
  auto u = xdev::empty<float>(a, {64});
  xdev::ops::rng_uniform(a, u).get();
  std::vector<float> ref(64);
  xdev::random::fill_uniform(xdev::RngAlgorithm::three_fry, 5, 0, std::span<float>(ref));
  EXPECT_TRUE(xdev::testing::same_bits(xdev::testing::to_host(u), ref)) << "the run-time RngDefault is three_fry";

  // DenseGather factor 1: up to 10 rows dense, more sparse.
  auto idx = xdev::testing::to_device(a, {1}, std::vector<std::int32_t>{0});
  auto out = xdev::empty<float>(a, {1, 1});
  for (std::int64_t rows : {10, 11}) {
    auto table = xdev::testing::to_device(a, {rows, 1}, std::vector<float>(static_cast<std::size_t>(rows), 2.0f));
    const auto dense = xdev::metrics::value("gather.dense"), sparse = xdev::metrics::value("gather.sparse");
    xdev::ops::gather(a, table, idx, out).get();
    EXPECT_EQ(xdev::metrics::value("gather.dense"), dense + (rows == 10 ? 1 : 0)) << rows << " rows";
    EXPECT_EQ(xdev::metrics::value("gather.sparse"), sparse + (rows == 10 ? 0 : 1)) << rows << " rows";
  }

  // Autocast to f16 under the npu key: 1 + 2^-12 rounds to 1 in f16.
  auto x = xdev::testing::to_device(a, {1}, std::vector<float>{1.0f + 0x1p-12f});
  auto y = xdev::testing::to_device(a, {1}, std::vector<float>{1.0f});
  EXPECT_EQ(xdev::ops::dot(a, x, y).get(), 1.0f + 0x1p-12f);
  xdev::AutocastScope scope(xdev::AutocastKey::npu);
  EXPECT_EQ(xdev::ops::dot(a, x, y).get(), 1.0f);
}

TEST(DescribedRuntime, AnInvalidRunTimeInflightBoundIsRejectedNamingTheBackend) {
  if (xdev::getenv_string("XDEV_MAX_INFLIGHT")) GTEST_SKIP() << "XDEV_MAX_INFLIGHT overrides the capability";
  auto caps = described_capabilities();
  caps.max_inflight = 0;
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 xdev::Runtime<Described> rt({}, Described::Config{"ZERO", caps});
               },
               {"ZERO", "max_inflight=0"});
}

}  // namespace
