// XDEV_DEFINE_PLUGIN (<xdev/plugin/define.hpp>), from the host's side of the C boundary: the
// generated tables of REF and ABITEST called directly, as a host written in C would.
#include <xdev/plugin/abi.h>
#include <xdev/any/any_device.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/plugin/detail/kernel_marshal.hpp>
#include <xdev/plugin/plugin_backend.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "plugin_abi_support.hpp"
#include "ref_backend.hpp"
#include "test_plugin/abi_test_backend.hpp"

namespace {

using plugin_abi_test::load;
using ::testing::HasSubstr;

// Records what a plugin reports through an xdev_completion.
struct Completions {
  std::mutex m;
  std::condition_variable cv;
  int calls = 0;
  xdev_status code = -1;
  std::string message;

  std::int64_t device_begin = 0, device_end = 0;

  xdev_completion c() { return {sizeof(xdev_completion), this, &Completions::complete, &Completions::times}; }
  static void times(void* context, std::int64_t begin_ns, std::int64_t end_ns) {
    auto* self = static_cast<Completions*>(context);
    std::lock_guard lk(self->m);
    self->device_begin = begin_ns;
    self->device_end = end_ns;
  }
  static void complete(void* context, xdev_status code, const char* message) {
    auto* self = static_cast<Completions*>(context);
    std::lock_guard lk(self->m);
    ++self->calls;
    self->code = code;
    self->message = message != nullptr ? message : "";
    self->cv.notify_all();
  }
  bool wait() {
    std::unique_lock lk(m);
    return cv.wait_for(lk, std::chrono::seconds(30), [&] { return calls > 0; });
  }
  int count() {
    std::lock_guard lk(m);
    return calls;
  }
};

// Records what a plugin reports through an xdev_error.
struct Errors {
  xdev_error c{sizeof(xdev_error), this, &Errors::set};
  int calls = 0;
  xdev_status code = XDEV_OK;
  std::string message;
  static void set(void* context, xdev_status code, const char* message) {
    auto* self = static_cast<Errors*>(context);
    ++self->calls;
    self->code = code;
    self->message = message;
  }
};

// A backend object of the plugin, destroyed at the end of the scope (which, for REF, joins its
// workers: every completion has been delivered by then).
struct Client {
  explicit Client(const xdev_plugin_api* api, const xdev_client_options* options = nullptr) : api(api) {
    Errors err;
    EXPECT_EQ(api->create(options, &backend, &err.c), XDEV_OK) << err.message;
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client() { api->destroy(backend); }
  const xdev_plugin_api* api;
  void* backend = nullptr;
};

xdev_fill_args fill_args(std::uint32_t dtype, xdev_memory x, std::uint64_t n, std::uint64_t bits) {
  xdev_fill_args a{};
  a.struct_size = sizeof a;
  a.dtype = dtype;
  a.x = x;
  a.n = n;
  a.value_bits = bits;
  return a;
}

std::vector<std::int32_t> read_i32(const Client& c, xdev_memory m, std::size_t n) {
  std::vector<std::int32_t> out(n);
  Completions done;
  Errors err;
  const xdev_completion dc = done.c();
  EXPECT_EQ(c.api->copy_to_host(c.backend, 0, m, 0, out.data(), n * 4, &dc, &err.c), XDEV_OK) << err.message;
  EXPECT_TRUE(done.wait());
  EXPECT_EQ(done.code, XDEV_OK) << done.message;
  return out;
}

TEST(DefinePlugin, TheTableDescribesTheBackend) {
  const auto ref = load(plugin_abi_test::ref_plugin);
  EXPECT_EQ(ref.api->struct_size, sizeof(xdev_plugin_api));
  EXPECT_EQ(ref.api->abi_major, unsigned{XDEV_ABI_MAJOR});
  EXPECT_EQ(ref.api->abi_minor, unsigned{XDEV_ABI_MINOR});
  EXPECT_STREQ(ref.api->name, "REF");
  EXPECT_STREQ(ref.api->version, "1.0.0");  // Ref::plugin_version
  EXPECT_EQ(std::string(ref.api->platform), xdev_ref::Ref::plugin_platform);
  static_assert(xdev::concepts::HostAccessibleBackend<xdev_ref::Ref>);
  EXPECT_EQ(ref.api->flags, XDEV_PLUGIN_HOST_MEMORY) << "REF's handles are host addresses (ABI 1.9)";

  const auto abi = load(plugin_abi_test::abi_plugin);
  EXPECT_EQ(abi.api->flags & XDEV_PLUGIN_HOST_MEMORY, 0u) << "ABITEST's handles are indices";
  EXPECT_STREQ(abi.api->name, "ABITEST");
  EXPECT_STREQ(abi.api->version, "9.9.9");  // the macro's options
  EXPECT_STREQ(abi.api->platform, "the plugin ABI tests");
}

// The user-kernel structs (ABI 1.9) arrive checked, as the generated entries read them: a backend's
// `create_kernel` and `launch_kernel` never see what xdev's own `Kernel` would have refused.
TEST(DefinePlugin, KernelStructsAreCheckedOnTheWayIn) {
  namespace d = xdev::plugin::detail;
  const auto ref = load(plugin_abi_test::ref_plugin);
  EXPECT_EQ(ref.api->create_kernel, nullptr) << "REF runs no source kernels: the entries are null";
  EXPECT_EQ(ref.api->launch_kernel, nullptr);
  EXPECT_EQ(ref.api->destroy_kernel, nullptr);

  const xdev_kernel_param params[2] = {{XDEV_KERNEL_ARG_BUFFER, XDEV_DTYPE_F32},
                                       {XDEV_KERNEL_ARG_SCALAR, XDEV_DTYPE_I64}};
  const char text[] = "__kernel void k(__global float* y, long n) {}";
  xdev_kernel_source src{sizeof src, "OpenCL C", text, sizeof text - 1, "k", "-w", 2, params};
  const xdev::KernelSource s = d::kernel_source_from(&src);
  EXPECT_EQ(s.source, text);
  EXPECT_EQ(s.options, "-w");
  EXPECT_EQ(s.params.at(1), xdev::KernelParam::scalar<std::int64_t>());
  auto refused = [](auto&& f, xdev::errc code, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "accepted";
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
  };
  xdev_kernel_source small = src;
  small.struct_size = 16;
  refused([&] { (void)d::kernel_source_from(&small); }, xdev::errc::incompatible_abi,
          "xdev_kernel_source: expected at least");
  xdev_kernel_param bad_params[1] = {{7, XDEV_DTYPE_F32}};
  xdev_kernel_source bad = src;
  bad.param_count = 1;
  bad.params = bad_params;
  refused([&] { (void)d::kernel_source_from(&bad); }, xdev::errc::invalid_argument, "parameter 0 has kind 7");
  bad_params[0] = {XDEV_KERNEL_ARG_BUFFER, 99};
  refused([&] { (void)d::kernel_source_from(&bad); }, xdev::errc::invalid_argument, "parameter 0 has dtype 99");

  const xdev_kernel_arg args[2] = {{0x1000, 0}, {0, 42}};
  xdev_kernel_launch l{sizeof l, 2, {8, 4, 0}, {2, 2, 0}, 2, args, nullptr};
  const auto a = d::kernel_launch_from<void*>(&l);
  EXPECT_EQ(a.global, (xdev::NDRange{8, 4}));
  EXPECT_EQ(a.local, (xdev::NDRange{2, 2}));
  EXPECT_EQ(a.args.at(0).memory, reinterpret_cast<void*>(0x1000));
  EXPECT_EQ(a.args.at(1).scalar_bits, 42u);
  EXPECT_EQ(a.args.at(0).offset, 0u) << "no offsets: whole arrays";
  // ABI 1.10: a window's offset arrives, and a 1.9 launch (without the field) is whole arrays.
  const std::uint64_t offsets[2] = {4096, 0};
  l.offsets = offsets;
  EXPECT_EQ(d::kernel_launch_from<void*>(&l).args.at(0).offset, 4096u);
  xdev_kernel_launch old = l;
  old.struct_size = d::kernel_launch_size_v1_9;
  EXPECT_EQ(d::kernel_launch_from<void*>(&old).args.at(0).offset, 0u) << "a 1.9 struct's offsets are not read";
  old.struct_size = d::kernel_launch_size_v1_9 - 1;
  refused([&] { (void)d::kernel_launch_from<void*>(&old); }, xdev::errc::incompatible_abi,
          "xdev_kernel_launch: expected at least");
  // The host's side: offsets are passed only when an argument is a window.
  xdev::KernelLaunchArgs<void*> host{xdev::NDRange{8}, {}, {{reinterpret_cast<void*>(0x1000), 0, 0}, {nullptr, 7, 0}}};
  std::vector<xdev_kernel_arg> c_args;
  std::vector<std::uint64_t> c_offsets;
  EXPECT_EQ(d::to_c(host, c_args, c_offsets).offsets, nullptr);
  host.args[0].offset = 256;
  const xdev_kernel_launch c = d::to_c(host, c_args, c_offsets);
  ASSERT_NE(c.offsets, nullptr);
  EXPECT_EQ(c.offsets[0], 256u);
  EXPECT_EQ(c.offsets[1], 0u);
  EXPECT_EQ(c.args[1].scalar_bits, 7u);
  l.offsets = nullptr;
  l.local[1] = 3;
  refused([&] { (void)d::kernel_launch_from<void*>(&l); }, xdev::errc::invalid_argument,
          "the work-group {2, 3} does not divide the range {8, 4}");
  l.dims = 4;
  refused([&] { (void)d::kernel_launch_from<void*>(&l); }, xdev::errc::invalid_argument, "4 dims, not 1 to 3");
  l.dims = 1;
  l.global[0] = 0;
  l.local[0] = 0;
  refused([&] { (void)d::kernel_launch_from<void*>(&l); }, xdev::errc::invalid_argument, "global extent 0 is 0");
}

// `describe_device` (ABI 1.3) is in the table when the backend has `device_description`: ABITEST
// has it, REF does not.
TEST(DefinePlugin, DescribeDeviceIsInTheTableWhenTheBackendDescribesItsDevices) {
  static_assert(xdev::concepts::DescribesDevices<abi_test::Backend>);
  static_assert(!xdev::concepts::DescribesDevices<xdev_ref::Ref>);
  const auto abi = load(plugin_abi_test::abi_plugin);
  ASSERT_NE(abi.api->describe_device, nullptr);
  {
    Client c(abi.api);
    Errors err;
    const char* first = nullptr;
    ASSERT_EQ(abi.api->describe_device(c.backend, 0, &first, &err.c), XDEV_OK) << err.message;
    ASSERT_NE(first, nullptr);
    EXPECT_STREQ(first, "ABITEST device 0: 4-byte handles, 0 blocks allocated");
    const char* again = nullptr;
    ASSERT_EQ(abi.api->describe_device(c.backend, 0, &again, &err.c), XDEV_OK) << err.message;
    EXPECT_EQ(again, first) << "the same text is the same string, kept by the client";

    xdev_memory x = 0;
    ASSERT_EQ(abi.api->allocate(c.backend, 0, 8, &x, &err.c), XDEV_OK) << err.message;
    const char* changed = nullptr;
    ASSERT_EQ(abi.api->describe_device(c.backend, 0, &changed, &err.c), XDEV_OK) << err.message;
    EXPECT_STREQ(changed, "ABITEST device 0: 4-byte handles, 1 blocks allocated") << "the backend is asked each time";
    EXPECT_STREQ(first, "ABITEST device 0: 4-byte handles, 0 blocks allocated")
        << "a text handed out stays valid while the backend lives";
    abi.api->deallocate(c.backend, 0, x, 8);

    Errors bad;
    const char* none = nullptr;
    EXPECT_EQ(abi.api->describe_device(c.backend, 1, &none, &bad.c), XDEV_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(bad.message, "describe_device: device 1 is out of range [0, 1)");
    EXPECT_EQ(none, nullptr);
    EXPECT_EQ(abi.api->describe_device(c.backend, 0, nullptr, &bad.c), XDEV_ERR_INVALID_ARGUMENT);

    // Concurrent callers (thread-safe: each gets a valid text).
    std::vector<std::thread> threads;
    std::vector<int> good(4, 0);
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 200; ++i) {
          Errors e;
          const char* text = nullptr;
          if (abi.api->describe_device(c.backend, 0, &text, &e.c) == XDEV_OK && text != nullptr &&
              std::string(text).rfind("ABITEST device 0: ", 0) == 0)
            ++good[static_cast<std::size_t>(t)];
        }
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(good, std::vector<int>(4, 200));
  }

  // Through the host: PluginBackend and an AnyDevice show the text.
  xdev::Runtime<xdev::plugin::PluginBackend> rt({}, abi.api, abi.library);
  EXPECT_EQ(rt.backend().device_description(0), "ABITEST device 0: 4-byte handles, 0 blocks allocated");
  EXPECT_EQ(xdev::AnyDevice(rt.device(0)).description(), "ABITEST device 0: 4-byte handles, 0 blocks allocated");
  EXPECT_EQ(rt.device(0).description(), rt.backend().device_description(0));

  // REF has no `device_description`: a null entry, and its devices have no description.
  const auto ref = load(plugin_abi_test::ref_plugin);
  EXPECT_EQ(ref.api->describe_device, nullptr);
  xdev::Runtime<xdev::plugin::PluginBackend> ref_rt({}, ref.api, ref.library);
  EXPECT_EQ(ref_rt.backend().device_description(1), "");
  EXPECT_EQ(xdev::AnyDevice(ref_rt.device(1)).description(), "");
}

TEST(DefinePlugin, OpEntriesAndOpDtypesFollowTheBackendsMembers) {
  const auto ref = load(plugin_abi_test::ref_plugin);
  const xdev_plugin_api& api = *ref.api;
  for (const void* present : {reinterpret_cast<const void*>(api.fill), reinterpret_cast<const void*>(api.scale),
                              reinterpret_cast<const void*>(api.axpy), reinterpret_cast<const void*>(api.binary),
                              reinterpret_cast<const void*>(api.sum), reinterpret_cast<const void*>(api.dot),
                              reinterpret_cast<const void*>(api.gemm), reinterpret_cast<const void*>(api.op_dtypes)})
    EXPECT_NE(present, nullptr);
  EXPECT_EQ(api.sum_axis, nullptr);
  EXPECT_EQ(api.gather, nullptr);
  EXPECT_EQ(api.rng, nullptr);
  EXPECT_EQ(api.convert, nullptr);

  Client c(ref.api);
  constexpr std::uint64_t floats = (1u << XDEV_DTYPE_F32) | (1u << XDEV_DTYPE_F64);
  EXPECT_EQ(api.op_dtypes(c.backend, XDEV_OP_FILL), 0xFFu) << "fill is a template over every dtype";
  for (std::uint32_t op : {XDEV_OP_SCALE, XDEV_OP_AXPY, XDEV_OP_BINARY, XDEV_OP_SUM, XDEV_OP_DOT, XDEV_OP_GEMM})
    EXPECT_EQ(api.op_dtypes(c.backend, op), floats) << "op " << op << " is constrained to floating point";
  for (std::uint32_t op : std::initializer_list<std::uint32_t>{XDEV_OP_SUM_AXIS, XDEV_OP_GATHER, XDEV_OP_RNG,
                                                               XDEV_OP_CONVERT, XDEV_OP_COUNT, 1000})
    EXPECT_EQ(api.op_dtypes(c.backend, op), 0u) << "op " << op;

  const auto abi = load(plugin_abi_test::abi_plugin);
  Client a(abi.api);
  EXPECT_EQ(abi.api->op_dtypes(a.backend, XDEV_OP_FILL), 1u << XDEV_DTYPE_I32) << "a non-template fill: i32 only";
  EXPECT_EQ(abi.api->scale, nullptr);
}

TEST(DefinePlugin, CapabilitiesComeFromTheTypedListOrTheRuntimeHook) {
  const auto ref = load(plugin_abi_test::ref_plugin);
  Client c(ref.api);
  const xdev_capabilities* caps = nullptr;
  Errors err;
  ASSERT_EQ(ref.api->capabilities(c.backend, &caps, &err.c), XDEV_OK);
  ASSERT_NE(caps, nullptr);
  EXPECT_EQ(caps->struct_size, sizeof(xdev_capabilities));
  EXPECT_EQ(xdev::plugin::detail::from_c(*caps, "REF"), xdev_ref::Ref::capabilities::set);
  EXPECT_EQ(caps->priority, -200);
  EXPECT_EQ(caps->max_inflight, 16u);

  // ABITEST has runtime_capabilities(): max_inflight from the client options, priority = the
  // number of times its initialize hook ran, which must be once however often the entry is called.
  const auto abi = load(plugin_abi_test::abi_plugin);
  const xdev_host_info host{sizeof(xdev_host_info), XDEV_ABI_MAJOR, XDEV_ABI_MINOR, "0.1.0", nullptr, nullptr};
  EXPECT_EQ(abi.api->initialize(&host, &err.c), XDEV_OK);
  EXPECT_EQ(abi.api->initialize(&host, &err.c), XDEV_OK);
  const xdev_client_options options = xdev::plugin::detail::to_c(xdev::plugin::ClientOptions{.max_inflight = 5});
  Client a(abi.api, &options);
  ASSERT_EQ(abi.api->capabilities(a.backend, &caps, &err.c), XDEV_OK);
  EXPECT_EQ(caps->max_inflight, 5u);
  EXPECT_EQ(caps->priority, 1) << "the initialize hook must run once";
  Client d(abi.api);  // no options: the defaults
  ASSERT_EQ(abi.api->capabilities(d.backend, &caps, &err.c), XDEV_OK);
  EXPECT_EQ(caps->max_inflight, 7u);
}

TEST(DefinePlugin, AnArgsStructSmallerThanThePluginKnowsIsRejectedALargerOneAccepted) {
  const auto ref = load(plugin_abi_test::ref_plugin);
  Completions rejected, accepted;
  {
    Client c(ref.api);  // destroyed at the end of this block, after delivering every completion
    Errors err;
    xdev_memory x = 0;
    ASSERT_EQ(ref.api->allocate(c.backend, 0, 64, &x, &err.c), XDEV_OK) << err.message;

    xdev_fill_args small = fill_args(XDEV_DTYPE_I32, x, 16, 7);
    small.struct_size = 16;
    const xdev_completion rc = rejected.c();
    EXPECT_EQ(ref.api->fill(c.backend, 0, &small, &rc, &err.c), XDEV_ERR_INCOMPATIBLE_ABI);
    EXPECT_EQ(err.calls, 1);
    EXPECT_EQ(err.code, XDEV_ERR_INCOMPATIBLE_ABI);
    EXPECT_EQ(err.message,
              "xdev_fill_args: expected at least " + std::to_string(sizeof(xdev_fill_args)) + " bytes, got 16");

    // A newer host's struct, with a field this plugin does not know: accepted, the extra ignored.
    struct {
      xdev_fill_args args;
      std::uint64_t field_of_a_newer_minor;
    } larger{fill_args(XDEV_DTYPE_I32, x, 16, 7), ~std::uint64_t{0}};
    larger.args.struct_size = sizeof larger;
    const xdev_completion ac = accepted.c();
    ASSERT_EQ(ref.api->fill(c.backend, 0, &larger.args, &ac, &err.c), XDEV_OK);
    ASSERT_TRUE(accepted.wait());
    EXPECT_EQ(accepted.code, XDEV_OK) << accepted.message;
    EXPECT_EQ(read_i32(c, x, 16), std::vector<std::int32_t>(16, 7));
    ref.api->deallocate(c.backend, 0, x, 64);
  }
  EXPECT_EQ(rejected.count(), 0) << "an entry that returns an error never completes";
  EXPECT_EQ(accepted.count(), 1);
}

TEST(DefinePlugin, EveryIncomingStructIsChecked) {
  const auto ref = load(plugin_abi_test::ref_plugin, false);
  Errors err;
  const xdev_host_info old_host{8, XDEV_ABI_MAJOR, XDEV_ABI_MINOR, "0.1.0", nullptr, nullptr};
  EXPECT_EQ(ref.api->initialize(&old_host, &err.c), XDEV_ERR_INCOMPATIBLE_ABI);
  EXPECT_THAT(err.message, HasSubstr("xdev_host_info: expected at least " + std::to_string(sizeof(xdev_host_info)) +
                                     " bytes, got 8"));
  const xdev_host_info other_major{sizeof(xdev_host_info), 2, 0, "9.0.0", nullptr, nullptr};
  EXPECT_EQ(ref.api->initialize(&other_major, &err.c), XDEV_ERR_INCOMPATIBLE_ABI);
  EXPECT_THAT(err.message, HasSubstr("ABI 2.0"));

  xdev_client_options options = xdev::plugin::detail::to_c(xdev::plugin::ClientOptions{});
  options.struct_size = 12;
  void* backend = nullptr;
  EXPECT_EQ(ref.api->create(&options, &backend, &err.c), XDEV_ERR_INCOMPATIBLE_ABI);
  EXPECT_EQ(err.message,
            "xdev_client_options: expected at least " + std::to_string(sizeof(xdev_client_options)) + " bytes, got 12");
  EXPECT_EQ(backend, nullptr);

  Client c(ref.api);
  xdev_memory x = 0;
  ASSERT_EQ(ref.api->allocate(c.backend, 0, 64, &x, &err.c), XDEV_OK);
  Completions done;
  xdev_completion old_completion = done.c();
  old_completion.struct_size = 8;
  const xdev_fill_args a = fill_args(XDEV_DTYPE_I32, x, 4, 1);
  EXPECT_EQ(ref.api->fill(c.backend, 0, &a, &old_completion, &err.c), XDEV_ERR_INCOMPATIBLE_ABI);
  EXPECT_EQ(err.message, "xdev_completion: expected at least " +
                             std::to_string(xdev::plugin::detail::completion_size_v1_1) + " bytes, got 8");

  const xdev_completion dc = done.c();
  const xdev_host_task old_task{4, nullptr, nullptr};
  EXPECT_EQ(ref.api->execute(c.backend, 0, &old_task, &dc, &err.c), XDEV_ERR_INCOMPATIBLE_ABI);
  EXPECT_THAT(err.message, HasSubstr("xdev_host_task: expected at least"));
  EXPECT_EQ(ref.api->fill(c.backend, 0, nullptr, &dc, &err.c), XDEV_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ref.api->fill(c.backend, 0, &a, nullptr, &err.c), XDEV_ERR_INVALID_ARGUMENT);
  xdev_fill_args bad_dtype = a;
  bad_dtype.dtype = 12;
  EXPECT_EQ(ref.api->fill(c.backend, 0, &bad_dtype, &dc, &err.c), XDEV_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(err.message, HasSubstr("dtype value 12"));
  xdev_scale_args half{sizeof(xdev_scale_args), XDEV_DTYPE_F16, x, 4, 0};
  EXPECT_EQ(ref.api->scale(c.backend, 0, &half, &dc, &err.c), XDEV_ERR_UNIMPLEMENTED);
  EXPECT_THAT(err.message, HasSubstr("scale is not implemented for f16"));
  ref.api->deallocate(c.backend, 0, x, 64);
  EXPECT_EQ(done.count(), 0);
}

// The generated `binary` entry decodes every XDEV_BINARY_* code to its operator, and fails an
// unknown one (never reading it as another operator) without completing.
TEST(DefinePlugin, TheBinaryEntryDecodesEveryOperatorAndRejectsAnUnknownOne) {
  const auto ref = load(plugin_abi_test::ref_plugin);
  const std::vector<float> a{-1.5f, 2.0f, 3.0f}, b{4.0f, -2.0f, 3.0f};
  std::vector<float> out(3);
  Client c(ref.api);
  Errors err;
  xdev_memory ma = 0, mb = 0, mo = 0;
  ASSERT_EQ(ref.api->allocate(c.backend, 0, 12, &ma, &err.c), XDEV_OK);
  ASSERT_EQ(ref.api->allocate(c.backend, 0, 12, &mb, &err.c), XDEV_OK);
  ASSERT_EQ(ref.api->allocate(c.backend, 0, 12, &mo, &err.c), XDEV_OK);
  const auto copy = [&](bool up, xdev_memory m, void* host) {
    Completions done;
    const xdev_completion dc = done.c();
    const xdev_status s = up ? ref.api->copy_to_device(c.backend, 0, host, m, 0, 12, &dc, &err.c)
                             : ref.api->copy_to_host(c.backend, 0, m, 0, host, 12, &dc, &err.c);
    ASSERT_EQ(s, XDEV_OK) << err.message;
    ASSERT_TRUE(done.wait());
  };
  copy(true, ma, const_cast<float*>(a.data()));
  copy(true, mb, const_cast<float*>(b.data()));
  const auto run = [&](std::uint32_t op, Completions& done, Errors& e) {
    xdev_binary_args args{};
    args.struct_size = sizeof args;
    args.dtype = XDEV_DTYPE_F32;
    args.op = op;
    args.a = ma;
    args.b = mb;
    args.out = mo;
    args.n = 3;
    const xdev_completion dc = done.c();
    return ref.api->binary(c.backend, 0, &args, &dc, &e.c);
  };
  struct Case {
    std::uint32_t op;
    std::vector<float> expected;
  };
  for (const Case& k : {Case{XDEV_BINARY_ADD, {2.5f, 0.0f, 6.0f}}, Case{XDEV_BINARY_MUL, {-6.0f, -4.0f, 9.0f}},
                        Case{XDEV_BINARY_MIN, {-1.5f, -2.0f, 3.0f}}, Case{XDEV_BINARY_MAX, {4.0f, 2.0f, 3.0f}}}) {
    Completions done;
    Errors e;
    ASSERT_EQ(run(k.op, done, e), XDEV_OK) << k.op << ": " << e.message;
    ASSERT_TRUE(done.wait());
    EXPECT_EQ(done.code, XDEV_OK) << done.message;
    copy(false, mo, out.data());
    EXPECT_EQ(out, k.expected) << "XDEV_BINARY_* code " << k.op;
  }
  for (std::uint32_t unknown : {4u, 255u, 0xFFFFFFFFu}) {
    Completions done;
    Errors e;
    EXPECT_EQ(run(unknown, done, e), XDEV_ERR_INVALID_ARGUMENT) << unknown;
    EXPECT_EQ(e.message,
              "binary: op " + std::to_string(unknown) + " is not an XDEV_BINARY_* value (0 add, 1 mul, 2 min, 3 max)");
    EXPECT_EQ(done.count(), 0) << "a failed entry never completes";
  }
  copy(false, mo, out.data());
  EXPECT_EQ(out, (std::vector<float>{4.0f, 2.0f, 3.0f})) << "a rejected call wrote nothing";
  for (xdev_memory m : {ma, mb, mo}) ref.api->deallocate(c.backend, 0, m, 12);
}

TEST(DefinePlugin, ExceptionsBecomeStatusCodesAndMessages) {
  const auto abi = load(plugin_abi_test::abi_plugin);
  Client c(abi.api);
  Errors err;
  xdev_memory x = 0;
  ASSERT_EQ(abi.api->allocate(c.backend, 0, 64, &x, &err.c), XDEV_OK);
  EXPECT_EQ(x, 1u) << "ABITEST's 4-byte handles travel as their bits";

  struct Case {
    std::uint64_t value;
    xdev_status code;
    const char* message;
  };
  for (const Case& k : {Case{13, XDEV_ERR_UNAVAILABLE, "ABITEST refuses to fill with 13"},  // xdev::error: its errc
                        Case{15, XDEV_ERR_INTERNAL, "fill 15 exploded"},                    // anything else: internal
                        Case{16, XDEV_ERR_OUT_OF_MEMORY, "std::bad_alloc"}}) {              // bad_alloc: out_of_memory
    Errors e;
    Completions done;
    const xdev_completion dc = done.c();
    const xdev_fill_args a = fill_args(XDEV_DTYPE_I32, x, 4, k.value);
    EXPECT_EQ(abi.api->fill(c.backend, 0, &a, &dc, &e.c), k.code) << k.value;
    EXPECT_EQ(e.calls, 1);
    EXPECT_EQ(e.message, k.message);
    EXPECT_EQ(done.count(), 0) << "a failed entry never completes";
  }
  xdev_memory none = 0;
  EXPECT_EQ(abi.api->allocate(c.backend, 0, 0xBAD, &none, &err.c), XDEV_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(none, 0u);
}

// ABI 1.12: a backend that moves its handles on (REF: `offset_handle`) or opens windows (OpenCL)
// has both op-window entries; one with neither (ABITEST: its handles are indices) has none. A
// window of REF memory is the address moved on; a null handle or output is refused.
TEST(DefinePlugin, OpWindowEntriesFollowTheBackend) {
  const auto abi = load(plugin_abi_test::abi_plugin);
  EXPECT_EQ(abi.api->open_window, nullptr);
  EXPECT_EQ(abi.api->close_window, nullptr);
  const auto ref = load(plugin_abi_test::ref_plugin);
  ASSERT_NE(ref.api->open_window, nullptr);
  ASSERT_NE(ref.api->close_window, nullptr);
  Client c(ref.api);
  Errors err;
  xdev_memory x = 0;
  ASSERT_EQ(ref.api->allocate(c.backend, 0, 64, &x, &err.c), XDEV_OK);
  xdev_memory w = 0;
  ASSERT_EQ(ref.api->open_window(c.backend, 0, x, 24, &w, &err.c), XDEV_OK);
  EXPECT_EQ(w, x + 24);
  ref.api->close_window(c.backend, 0, w);
  Errors null_memory, null_out;
  EXPECT_EQ(ref.api->open_window(c.backend, 0, 0, 24, &w, &null_memory.c), XDEV_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(null_memory.message, HasSubstr("memory handle is 0"));
  EXPECT_EQ(ref.api->open_window(c.backend, 0, x, 24, nullptr, &null_out.c), XDEV_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(null_out.message, HasSubstr("output pointer is null"));
  ref.api->deallocate(c.backend, 0, x, 64);
}

// ABI 1.11: a backend with `concepts::StridedTransfers` (ABITEST) has both strided entries; one
// without (REF) has neither. The region is checked on the way in.
TEST(DefinePlugin, StridedEntriesFollowTheBackendAndCheckTheRegion) {
  const auto ref = load(plugin_abi_test::ref_plugin);
  EXPECT_EQ(ref.api->copy_to_host_strided, nullptr);
  EXPECT_EQ(ref.api->copy_to_device_strided, nullptr);
  const auto abi = load(plugin_abi_test::abi_plugin);
  ASSERT_NE(abi.api->copy_to_host_strided, nullptr);
  ASSERT_NE(abi.api->copy_to_device_strided, nullptr);
  Client c(abi.api);
  Errors err;
  xdev_memory x = 0;
  ASSERT_EQ(abi.api->allocate(c.backend, 0, 6 * 4 * 4, &x, &err.c), XDEV_OK);
  // A [6, 4] int32 matrix 0..23; columns [1, 3) of rows 0..5, as 3 slices of 2 rows.
  std::vector<std::int32_t> all(24);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int32_t>(i);
  {
    Completions done;
    const xdev_completion dc = done.c();
    ASSERT_EQ(abi.api->copy_to_device(c.backend, 0, all.data(), x, 0, 96, &dc, &err.c), XDEV_OK);
    ASSERT_TRUE(done.wait());
  }
  const xdev_strided_region region{sizeof(xdev_strided_region), 4, 8, 2, 16, 3, 32};
  std::vector<std::int32_t> box(12, -1);
  Completions done;
  const xdev_completion dc = done.c();
  ASSERT_EQ(abi.api->copy_to_host_strided(c.backend, 0, x, &region, box.data(), &dc, &err.c), XDEV_OK) << err.message;
  ASSERT_TRUE(done.wait());
  EXPECT_EQ(box, (std::vector<std::int32_t>{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}));
  const std::vector<std::int32_t> minus{-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12};
  Completions wrote;
  const xdev_completion wc = wrote.c();
  ASSERT_EQ(abi.api->copy_to_device_strided(c.backend, 0, minus.data(), x, &region, &wc, &err.c), XDEV_OK);
  ASSERT_TRUE(wrote.wait());
  const std::vector<std::int32_t> after = read_i32(c, x, 24);
  for (std::size_t i = 0; i < 24; ++i) {
    const std::size_t col = i % 4;
    EXPECT_EQ(after[i], col == 1 || col == 2 ? minus[i / 4 * 2 + col - 1] : all[i]) << i;
  }

  for (const xdev_strided_region& bad :
       {xdev_strided_region{sizeof(xdev_strided_region) - 8, 4, 8, 2, 16, 3, 32},  // short
        xdev_strided_region{sizeof(xdev_strided_region), 4, 20, 2, 16, 3, 32},     // rows overlap
        xdev_strided_region{sizeof(xdev_strided_region), 4, 8, 2, 16, 3, 24}}) {   // slices overlap
    Errors e;
    Completions never;
    const xdev_completion nc = never.c();
    EXPECT_EQ(abi.api->copy_to_host_strided(c.backend, 0, x, &bad, box.data(), &nc, &e.c), XDEV_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(e.message, HasSubstr("strided region"));
    EXPECT_EQ(never.count(), 0);
  }
  Errors e;
  EXPECT_EQ(abi.api->copy_to_device_strided(c.backend, 0, minus.data(), x, nullptr, &dc, &e.c),
            XDEV_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(e.message, HasSubstr("strided region is null"));

  // Between windows: column 0 of the matrix into column 3, as 6 rows of one element; regions of
  // different rows are refused.
  EXPECT_EQ(ref.api->copy_between_strided, nullptr);
  ASSERT_NE(abi.api->copy_between_strided, nullptr);
  const xdev_strided_region col0{sizeof(xdev_strided_region), 0, 4, 6, 16, 1, 96};
  const xdev_strided_region col3{sizeof(xdev_strided_region), 12, 4, 6, 16, 1, 96};
  Completions moved;
  const xdev_completion mc = moved.c();
  ASSERT_EQ(abi.api->copy_between_strided(c.backend, 0, x, &col0, 0, x, &col3, &mc, &err.c), XDEV_OK);
  ASSERT_TRUE(moved.wait());
  const std::vector<std::int32_t> cols = read_i32(c, x, 24);
  for (std::size_t r = 0; r < 6; ++r) EXPECT_EQ(cols[r * 4 + 3], cols[r * 4]) << r;
  const xdev_strided_region five{sizeof(xdev_strided_region), 12, 4, 5, 16, 1, 80};
  Errors rows;
  EXPECT_EQ(abi.api->copy_between_strided(c.backend, 0, x, &col0, 0, x, &five, &mc, &rows.c),
            XDEV_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(rows.message, HasSubstr("do not have the same rows"));
}

TEST(DefinePlugin, TheCompletionIsCalledExactlyOnce) {
  const auto abi = load(plugin_abi_test::abi_plugin);
  Client c(abi.api);
  Errors err;
  xdev_memory x = 0;
  ASSERT_EQ(abi.api->allocate(c.backend, 0, 64, &x, &err.c), XDEV_OK);
  struct Case {
    std::uint64_t value;
    xdev_status code;
    const char* message;
  };
  for (const Case& k :
       {Case{14, XDEV_ERR_CANCELLED, "fill with 14 was cancelled"},  // completed with an exception
        Case{17, XDEV_ERR_INTERNAL, "the backend destroyed the completion of an operation without calling it"},
        Case{18, XDEV_OK, ""},  // completed, then threw: the completion stands
        Case{3, XDEV_OK, ""}}) {
    Errors e;
    Completions done;
    const xdev_completion dc = done.c();
    const xdev_fill_args a = fill_args(XDEV_DTYPE_I32, x, 4, k.value);
    EXPECT_EQ(abi.api->fill(c.backend, 0, &a, &dc, &e.c), XDEV_OK) << k.value << ": " << e.message;
    EXPECT_EQ(done.count(), 1) << k.value;
    EXPECT_EQ(done.code, k.code) << k.value;
    EXPECT_EQ(done.message, k.message) << k.value;
  }
  EXPECT_EQ(read_i32(c, x, 4), std::vector<std::int32_t>(4, 3));
}

// ABI 1.7: device times a backend reports reach the host's completion, in nanoseconds of the
// steady clock, before `complete`; a host of the 1.1 completion (no `device_times`) still works.
TEST(DefinePlugin, DeviceTimesReachACompletionThatHasTheFieldAndOnlyThat) {
  const auto abi = load(plugin_abi_test::abi_plugin);
  Client c(abi.api);
  Errors err;
  xdev_memory x = 0;
  ASSERT_EQ(abi.api->allocate(c.backend, 0, 64, &x, &err.c), XDEV_OK);
  const xdev_fill_args timed = fill_args(XDEV_DTYPE_I32, x, 4, 20);  // reported: 1000.001 s to 1000.003 s
  {
    Completions done;
    const xdev_completion dc = done.c();
    ASSERT_EQ(abi.api->fill(c.backend, 0, &timed, &dc, &err.c), XDEV_OK) << err.message;
    ASSERT_TRUE(done.wait());
    EXPECT_EQ(done.code, XDEV_OK);
    EXPECT_EQ(done.device_begin, 1'000'001'000'000);
    EXPECT_EQ(done.device_end, 1'000'003'000'000);
  }
  {
    Completions done;
    xdev_completion old = done.c();
    old.struct_size = xdev::plugin::detail::completion_size_v1_1;
    old.device_times = nullptr;  // beyond the struct an older xdev passes
    ASSERT_EQ(abi.api->fill(c.backend, 0, &timed, &old, &err.c), XDEV_OK) << err.message;
    ASSERT_TRUE(done.wait());
    EXPECT_EQ(done.code, XDEV_OK);
    EXPECT_EQ(done.device_end, 0) << "a field beyond the completion's struct_size was called";
  }
  EXPECT_EQ(read_i32(c, x, 4), std::vector<std::int32_t>(4, 20));
}

}  // namespace
