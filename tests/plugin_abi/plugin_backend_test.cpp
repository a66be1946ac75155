// xdev::plugin::PluginBackend (<xdev/plugin/plugin_backend.hpp>): a Runtime<PluginBackend> over
// the tables of REF and ABITEST, and over altered copies of REF's table that break the rules.
#include <xdev/any/any_device.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/core/tools.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/ops.hpp>
#include <xdev/plugin/plugin_backend.hpp>
#include <xdev/testing/arrays.hpp>
#include <xdev/testing/expect_error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include "plugin_abi_support.hpp"
#include "ref_backend.hpp"

namespace {

using plugin_abi_test::load;
using xdev::plugin::PluginBackend;
using xdev::testing::to_device;
using xdev::testing::to_host;
using Runtime = xdev::Runtime<PluginBackend>;
using xdev::testing::expect_error;

std::map<std::string, std::uint64_t> fallbacks() {
  std::map<std::string, std::uint64_t> out;
  for (const auto& [name, v] : xdev::metrics::snapshot())
    if (name.rfind("fallback.", 0) == 0) out.emplace(name, v);
  return out;
}

std::uint64_t delta(const std::map<std::string, std::uint64_t>& before,
                    const std::map<std::string, std::uint64_t>& after, const std::string& name) {
  const auto b = before.find(name);
  const auto a = after.find(name);
  return (a == after.end() ? 0 : a->second) - (b == before.end() ? 0 : b->second);
}

TEST(PluginBackend, RoundTripThroughTheReferencePlugin) {
  const auto ref = load(plugin_abi_test::ref_plugin);
  Runtime rt({}, ref.api, ref.library);
  static_assert(xdev::concepts::Backend<PluginBackend>);
  ASSERT_EQ(rt.device_count(), 2u);
  const auto dev = rt.device(0);
  EXPECT_EQ(dev.name(), "REF:0");
  EXPECT_EQ(rt.device(1).name(), "REF:1");
  EXPECT_EQ(rt.backend().runtime_name(), "REF");
  EXPECT_EQ(rt.backend().runtime_capabilities(), xdev_ref::Ref::capabilities::set);
  EXPECT_EQ(xdev::capabilities_of(dev), xdev_ref::Ref::capabilities::set);
  if (std::getenv("XDEV_MAX_INFLIGHT") == nullptr) {
    EXPECT_EQ(dev.max_inflight(), 16u);
  }
  EXPECT_EQ(rt.backend().version(), "1.0.0");
  EXPECT_EQ(rt.backend().platform(), xdev_ref::Ref::plugin_platform);

  // Memory and transfers, both directions and across devices.
  std::vector<float> v(1000);
  std::iota(v.begin(), v.end(), 1.0f);
  auto x = to_device(dev, {1000}, v);
  EXPECT_EQ(to_host(x), v);
  auto y = to_device(rt.device(1), {1000}, std::vector<float>(1000, 0.0f));
  xdev::ops::copy(dev, x, y).get();
  EXPECT_EQ(to_host(y), v);

  // Native ops: no fallback runs.
  const auto before = fallbacks();
  auto a = to_device(dev, {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  auto b = to_device(dev, {3, 2}, std::vector<float>{1, 0, 0, 1, 1, 1});
  auto c = to_device(dev, {2, 2}, std::vector<float>(4, 0.0f));
  xdev::ops::gemm(dev, a, b, c).get();
  EXPECT_EQ(to_host(c), (std::vector<float>{4, 5, 10, 11}));
  xdev::ops::fill(dev, x, 2.0f).get();
  xdev::ops::scale(dev, x, 1.5f).get();
  EXPECT_EQ(xdev::ops::sum(dev, x).get(), 3000.0f);
  auto z = to_device(dev, {1000}, std::vector<float>(1000, 1.0f));
  xdev::ops::axpy(dev, 2.0f, x, z).get();  // z = 1 + 2 * 3
  EXPECT_EQ(xdev::ops::dot(dev, x, z).get(), 21000.0f);
  xdev::ops::add(dev, x, z, z).get();
  xdev::ops::mul(dev, x, z, z).get();
  EXPECT_EQ(to_host(z), std::vector<float>(1000, 30.0f));
  auto w = xdev::empty<float>(dev, {1000});
  xdev::ops::minimum(dev, x, z, w).get();
  EXPECT_EQ(to_host(w), std::vector<float>(1000, 3.0f));
  xdev::ops::maximum(dev, x, z, w).get();
  EXPECT_EQ(to_host(w), std::vector<float>(1000, 30.0f));
  auto i = to_device(dev, {4}, std::vector<std::int32_t>{0, 0, 0, 0});
  xdev::ops::fill(dev, i, std::int32_t{-5}).get();
  EXPECT_EQ(to_host(i), std::vector<std::int32_t>(4, -5));
  EXPECT_EQ(fallbacks(), before) << "REF runs fill, scale, axpy, add, mul, minimum, maximum, sum, dot and gemm itself";

  // What REF leaves out runs through xdev's CPU fallback, each counted once.
  auto row = to_device(dev, {3}, std::vector<float>(3, 0.0f));
  xdev::ops::sum(dev, a, 0, row).get();
  EXPECT_EQ(to_host(row), (std::vector<float>{5, 7, 9}));
  auto idx = to_device(dev, {2}, std::vector<std::int32_t>{1, 0});
  auto gathered = to_device(dev, {2, 3}, std::vector<float>(6, 0.0f));
  xdev::ops::gather(dev, a, idx, gathered).get();
  EXPECT_EQ(to_host(gathered), (std::vector<float>{4, 5, 6, 1, 2, 3}));
  auto h = xdev::empty<double>(dev, {2, 3});
  xdev::ops::convert(dev, a, h).get();
  EXPECT_EQ(to_host(h), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  xdev::ops::rng_uniform(dev, row, {.seed = 1}).get();
  auto s = to_device(dev, {2}, std::vector<double>{1.5, 2.5});
  xdev::ops::scale(dev, s, 2.0).get();  // f64 is native too
  EXPECT_EQ(to_host(s), (std::vector<double>{3, 5}));
  const auto after = fallbacks();
  EXPECT_EQ(delta(before, after, "fallback.sum"), 1u);
  EXPECT_EQ(delta(before, after, "fallback.gather"), 1u);
  EXPECT_EQ(delta(before, after, "fallback.convert"), 1u);
  EXPECT_EQ(delta(before, after, "fallback.rng_uniform"), 1u);
  EXPECT_EQ(delta(before, after, "fallback.scale"), 0u);
  rt.synchronize();
}

TEST(PluginBackend, ImplementsFollowsTheOpDtypesOfThePlugin) {
  const auto ref = load(plugin_abi_test::ref_plugin);
  const PluginBackend b(ref.api, ref.library);
  using xdev::DType;
  using xdev::ops::OpKind;
  EXPECT_TRUE(b.implements(OpKind::fill, DType::i32, DType::i32));
  EXPECT_TRUE(b.implements(OpKind::fill, DType::bf16, DType::bf16));
  EXPECT_TRUE(b.implements(OpKind::gemm, DType::f64, DType::f64));
  EXPECT_FALSE(b.implements(OpKind::scale, DType::f16, DType::f16));
  EXPECT_FALSE(b.implements(OpKind::gather, DType::f32, DType::i32));
  EXPECT_FALSE(b.implements(OpKind::convert, DType::f32, DType::bf16));
  EXPECT_FALSE(b.implements(static_cast<OpKind>(99), DType::f32, DType::f32));
  EXPECT_EQ(b.op_dtypes(OpKind::fill), 0xFFu);
  EXPECT_EQ(b.op_dtypes(OpKind::rng), 0u);
  // REF is built with this xdev's headers: it reports this ABI minor and takes every binary operator.
  EXPECT_EQ(b.abi_minor(), unsigned{XDEV_ABI_MINOR});
  using xdev::ops::BinaryOp;
  for (BinaryOp op : {BinaryOp::add, BinaryOp::mul, BinaryOp::min, BinaryOp::max})
    EXPECT_TRUE(b.implements_binary(op)) << xdev::ops::name_of(op);
  EXPECT_FALSE(b.implements_binary(static_cast<BinaryOp>(4)));
  static_assert(xdev::concepts::DeclaresBinaryOps<PluginBackend>);
}

// REF's table as a plugin of ABI 1.1 would give it (the layout is the same): its binary entry is
// never sent min or max, which run through xdev's CPU fallback; add and mul stay native. The same
// through an AnyDevice, whose erased path ends in the same dispatch.
TEST(PluginBackend, ATableOfAbi11GetsMinimumAndMaximumThroughTheFallback) {
  const auto ref = load(plugin_abi_test::ref_plugin);
  xdev_plugin_api t = *ref.api;
  t.abi_minor = 1;
  Runtime rt({}, &t, ref.library);
  EXPECT_EQ(rt.backend().abi_minor(), 1u);
  EXPECT_FALSE(rt.backend().implements_binary(xdev::ops::BinaryOp::min));
  EXPECT_FALSE(rt.backend().implements_binary(xdev::ops::BinaryOp::max));
  EXPECT_TRUE(rt.backend().implements_binary(xdev::ops::BinaryOp::add));
  const auto check = [](const auto& dev) {
    auto a = to_device(dev, {4}, std::vector<double>{1, -2, 3, -0.0});
    auto b = to_device(dev, {4}, std::vector<double>{0, -1, 3, 0.0});
    auto out = to_device(dev, {4}, std::vector<double>(4, 9.0));
    const auto before = fallbacks();
    xdev::ops::minimum(dev, a, b, out).get();
    EXPECT_EQ(to_host(out), (std::vector<double>{0, -2, 3, -0.0}));
    EXPECT_TRUE(std::signbit(to_host(out)[3])) << "minimum(-0.0, +0.0) is a";
    xdev::ops::maximum(dev, a, b, out).get();
    EXPECT_EQ(to_host(out), (std::vector<double>{1, -1, 3, -0.0}));
    xdev::ops::add(dev, a, b, out).get();
    xdev::ops::mul(dev, a, b, out).get();
    const auto after = fallbacks();
    EXPECT_EQ(delta(before, after, "fallback.minimum"), 1u);
    EXPECT_EQ(delta(before, after, "fallback.maximum"), 1u);
    EXPECT_EQ(delta(before, after, "fallback.add"), 0u);
    EXPECT_EQ(delta(before, after, "fallback.mul"), 0u);
  };
  check(rt.device(0));
  check(xdev::AnyDevice(rt.device(1)));
  rt.synchronize();

  // The same table at its real minor: every operator native.
  Runtime current({}, ref.api, ref.library);
  const auto dev = current.device(0);
  auto a = to_device(dev, {2}, std::vector<double>{1, 2});
  auto out = to_device(dev, {2}, std::vector<double>(2, 0.0));
  const auto before = fallbacks();
  xdev::ops::minimum(dev, a, a, out).get();
  xdev::ops::maximum(dev, a, a, out).get();
  EXPECT_EQ(fallbacks(), before);
  current.synchronize();
}

TEST(PluginBackend, AnOpThatFailsInThePluginReachesTheFutureWithItsCodeAndMessage) {
  const auto abi = load(plugin_abi_test::abi_plugin);
  Runtime rt({}, abi.api, abi.library);
  const auto dev = rt.device(0);
  EXPECT_EQ(dev.name(), "ABITEST:0");
  auto x = to_device(dev, {4}, std::vector<std::int32_t>{1, 2, 3, 4});
  // Thrown inside the entry (the entry returns the error) ...
  expect_error(xdev::errc::unavailable, [&] { xdev::ops::fill(dev, x, 13).get(); },
               {"ABITEST: fill: ABITEST refuses to fill with 13"});
  // ... or reported through the completion: the same error either way.
  expect_error(xdev::errc::cancelled, [&] { xdev::ops::fill(dev, x, 14).get(); },
               {"ABITEST: fill: fill with 14 was cancelled"});
  expect_error(xdev::errc::internal, [&] { xdev::ops::fill(dev, x, 15).get(); }, {"ABITEST: fill: fill 15 exploded"});
  expect_error(xdev::errc::out_of_memory, [&] { xdev::ops::fill(dev, x, 16).get(); }, {"ABITEST: fill: "});
  expect_error(xdev::errc::internal, [&] { xdev::ops::fill(dev, x, 17).get(); },
               {"ABITEST: fill: the backend destroyed the completion of an operation without calling it"});
  xdev::ops::fill(dev, x, 18).get();  // completed, then threw: the completion's success stands
  EXPECT_EQ(to_host(x), (std::vector<std::int32_t>{1, 2, 3, 4})) << "no failed fill wrote anything";
  xdev::ops::fill(dev, x, 9).get();
  EXPECT_EQ(to_host(x), std::vector<std::int32_t>(4, 9));
  expect_error(xdev::errc::out_of_memory, [&] { (void)rt.backend().allocate(0, 0xBAD); },
               {"ABITEST: allocate: std::bad_alloc"});
  rt.synchronize();
}

TEST(PluginBackend, DeviceTimesAPluginReportsReachTheProfilerHooks) {
  struct Ends final : xdev::tools::Listener {
    void end(const xdev::tools::Activity& a, const std::exception_ptr&) override {
      if (a.category != xdev::tools::Category::op) return;
      std::lock_guard lk(m);
      times.emplace_back(a.device_begin, a.device_end);
    }
    std::mutex m;
    std::vector<std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::time_point>> times;
  };
  const auto abi = load(plugin_abi_test::abi_plugin);
  Runtime rt({}, abi.api, abi.library);
  const auto dev = rt.device(0);
  auto x = to_device(dev, {4}, std::vector<std::int32_t>{1, 2, 3, 4});
  auto ends = std::make_shared<Ends>();
  const auto subscription = xdev::tools::add_listener(ends);
  xdev::ops::fill(dev, x, 20).get();  // the plugin reports 1000.001 s to 1000.003 s
  xdev::ops::fill(dev, x, 9).get();   // it reports nothing
  std::lock_guard lk(ends->m);
  ASSERT_EQ(ends->times.size(), 2u);
  const auto base = std::chrono::steady_clock::time_point(std::chrono::seconds(1000));
  EXPECT_EQ(ends->times[0].first, base + std::chrono::milliseconds(1));
  EXPECT_EQ(ends->times[0].second, base + std::chrono::milliseconds(3));
  EXPECT_EQ(ends->times[1].second, std::chrono::steady_clock::time_point{})
      << "the times of one op leaked into the next";
}

struct TaskError : std::runtime_error {
  using std::runtime_error::runtime_error;
  int detail = 42;
};

TEST(PluginBackend, AnExceptionOfAHostTaskRunByThePluginKeepsItsType) {
  for (const char* path : {plugin_abi_test::ref_plugin, plugin_abi_test::abi_plugin}) {
    const auto p = load(path);
    Runtime rt({}, p.api, p.library);
    const auto dev = rt.device(0);
    EXPECT_EQ(dev.execute([] { return 7; }).get(), 7);
    try {
      dev.execute([]() -> int { throw TaskError("the task failed"); }).get();
      ADD_FAILURE() << "the task's exception was lost";
    } catch (const TaskError& e) {
      EXPECT_STREQ(e.what(), "the task failed");
      EXPECT_EQ(e.detail, 42);
    }
    rt.synchronize();
  }
}

TEST(PluginBackend, ClientOptionsReachThePlugin) {
  const auto abi = load(plugin_abi_test::abi_plugin);
  Runtime rt({}, abi.api, abi.library, xdev::plugin::ClientOptions{.max_inflight = 5, .local_world_size = 2});
  EXPECT_EQ(rt.backend().runtime_capabilities().max_inflight, 5u);
  EXPECT_EQ(rt.backend().options().local_world_size, 2u);
  if (std::getenv("XDEV_MAX_INFLIGHT") == nullptr) {
    EXPECT_EQ(rt.device(0).max_inflight(), 5u);
  }
}

// ---- altered copies of REF's table ----------------------------------------------------------

// Entries that tests put into copies of REF's table.
struct AlteredRef {
  static inline xdev_capabilities small_caps{};
  struct Larger {
    xdev_capabilities caps;
    std::uint64_t newer_field;
  };
  static inline Larger larger_caps{};

  static xdev_status small_capabilities(void*, const xdev_capabilities** out, xdev_error*) {
    small_caps = xdev::plugin::detail::to_c(xdev_ref::Ref::capabilities::set);
    small_caps.struct_size = 32;
    *out = &small_caps;
    return XDEV_OK;
  }
  static xdev_status larger_capabilities(void*, const xdev_capabilities** out, xdev_error*) {
    larger_caps.caps = xdev::plugin::detail::to_c(xdev_ref::Ref::capabilities::set);
    larger_caps.caps.max_inflight = 3;
    larger_caps.caps.struct_size = sizeof(Larger);
    *out = &larger_caps.caps;
    return XDEV_OK;
  }
  // Completes at once, then returns an error: against the rules, but tolerated.
  static xdev_status fill_completes_then_fails(void*, std::uint64_t, const xdev_fill_args*, const xdev_completion* done,
                                               xdev_error* err) {
    done->complete(done->context, XDEV_OK, nullptr);
    err->set(err->context, XDEV_ERR_INTERNAL, "and then failed");
    return XDEV_ERR_INTERNAL;
  }
  // Fails with a status that is no xdev::errc.
  static xdev_status fill_fails_oddly(void*, std::uint64_t, const xdev_fill_args*, const xdev_completion*,
                                      xdev_error*) {
    return 77;
  }
};

TEST(PluginBackend, ACapabilitiesStructSmallerThanV11IsRejectedALargerOneAccepted) {
  const auto ref = load(plugin_abi_test::ref_plugin);
  xdev_plugin_api t = *ref.api;
  t.capabilities = &AlteredRef::small_capabilities;
  expect_error(xdev::errc::incompatible_abi, [&] { PluginBackend b(&t, ref.library); },
               {"xdev_capabilities from plugin REF: expected at least " + std::to_string(sizeof(xdev_capabilities)) +
                " bytes, got 32"});
  t.capabilities = &AlteredRef::larger_capabilities;
  const PluginBackend b(&t, ref.library);
  EXPECT_EQ(b.runtime_capabilities().max_inflight, 3u);
}

TEST(PluginBackend, ANullRequiredEntryIsUnimplementedNamingIt) {
  const auto ref = load(plugin_abi_test::ref_plugin);
  xdev_plugin_api t = *ref.api;
  t.copy_between = nullptr;
  Runtime rt({}, &t, ref.library);
  auto a = to_device(rt.device(0), {4}, std::vector<float>(4, 1.0f));
  auto b = to_device(rt.device(1), {4}, std::vector<float>(4, 0.0f));
  expect_error(xdev::errc::unimplemented, [&] { xdev::ops::copy(rt.device(0), a, b).get(); },
               {"REF: copy_between: the plugin does not provide this entry"});
  t.create = nullptr;
  expect_error(xdev::errc::unimplemented, [&] { PluginBackend bad(&t, ref.library); }, {"REF: create"});
  rt.synchronize();
}

TEST(PluginBackend, APluginThatCompletesAndReturnsAnErrorIsNotDoubleFreed) {
  const auto ref = load(plugin_abi_test::ref_plugin);
  xdev_plugin_api t = *ref.api;
  t.fill = &AlteredRef::fill_completes_then_fails;
  {
    Runtime rt({}, &t, ref.library);
    auto x = xdev::empty<float>(rt.device(0), {8});
    xdev::ops::fill(rt.device(0), x, 1.0f).get();  // the completion's success is the result
    rt.synchronize();
  }
  t.fill = &AlteredRef::fill_fails_oddly;
  Runtime rt({}, &t, ref.library);
  auto x = xdev::empty<float>(rt.device(0), {8});
  expect_error(xdev::errc::internal, [&] { xdev::ops::fill(rt.device(0), x, 1.0f).get(); },
               {"REF: fill: failed with status 77", "no XDEV_ERR_* code"});
  rt.synchronize();
}

TEST(PluginBackend, TheLibraryStaysLoadedUntilTheLastObjectFromItIsGone) {
  const std::filesystem::path marker =
      std::filesystem::temp_directory_path() / ("xdev_abi_marker_" + std::to_string(::getpid()));
  std::filesystem::remove(marker);
  ASSERT_EQ(::setenv("XDEV_ABI_TEST_MARKER", marker.c_str(), 1), 0);
  ASSERT_FALSE(plugin_abi_test::is_loaded(plugin_abi_test::abi_plugin)) << "another test left ABITEST loaded";
  {
    auto abi = load(plugin_abi_test::abi_plugin);
    auto rt = std::make_unique<Runtime>(xdev::RuntimeOptions{}, abi.api, std::move(abi.library));
    abi = {};  // only the runtime holds the library now
    EXPECT_TRUE(plugin_abi_test::is_loaded(plugin_abi_test::abi_plugin));
    {
      auto x = to_device(rt->device(0), {4}, std::vector<std::int32_t>{1, 2, 3, 4});
      xdev::ops::fill(rt->device(0), x, 5).get();
    }
    EXPECT_TRUE(plugin_abi_test::is_loaded(plugin_abi_test::abi_plugin));
    rt.reset();
  }
  EXPECT_FALSE(plugin_abi_test::is_loaded(plugin_abi_test::abi_plugin));
  std::ifstream in(marker);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "destroyed\nunloaded\n") << "destroy runs, then the library is unloaded";
  ::unsetenv("XDEV_ABI_TEST_MARKER");
  std::filesystem::remove(marker);
}

// A plugin may complete an op inside the entry that started it and only then return through its
// own frames. The host, woken by the completion, must not destroy the backend and unload the
// library until that thread is out of the plugin's code (it once returned into unmapped memory).
TEST(PluginBackend, TheBackendOutlivesAThreadStillInsideAnEntryAfterItsCompletion) {
  const std::filesystem::path marker =
      std::filesystem::temp_directory_path() / ("xdev_abi_linger_" + std::to_string(::getpid()));
  std::filesystem::remove(marker);
  ASSERT_EQ(::setenv("XDEV_ABI_TEST_MARKER", marker.c_str(), 1), 0);
  {
    auto abi = load(plugin_abi_test::abi_plugin);
    auto backend = std::make_unique<xdev::plugin::PluginBackend>(abi.api, std::move(abi.library));
    abi = {};
    const auto h = backend->allocate(0, 16);
    std::promise<void> completed;
    std::thread caller([&] {
      xdev::ops::FillArgs<std::int32_t, std::uint64_t> a{h, 4, 19};
      backend->run_op(0, a, xdev::Completion([&](std::exception_ptr) { completed.set_value(); }));
    });
    completed.get_future().get();  // the op completed; `caller` is still inside the plugin's fill
    backend->deallocate(0, h, 16);
    backend.reset();  // must wait for `caller` to leave the entry
    caller.join();
  }
  std::ifstream in(marker);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "fill 19 returned\ndestroyed\nunloaded\n");
  ::unsetenv("XDEV_ABI_TEST_MARKER");
  std::filesystem::remove(marker);
}

}  // namespace
