// The OpenCL backend on its own (no xdev runtime around it): device discovery and its filters, the
// multi-process device share, memory limits, transfers, host tasks, and how OpenCL failures are
// reported. The op conformance suite runs on the OPENCL plugin in tests/plugin (plugin_op_suite).
//
// Without an OpenCL driver every test skips with the reason, unless XDEV_TEST_DEVICES lists
// OPENCL (CTest does so when a driver is registered): then they fail.
#include "opencl_backend.hpp"
#include <xdev/core/metrics.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/elementwise.hpp>
#include "support/scoped_env.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

using ::testing::HasSubstr;
using xdev_opencl::OpenCL;

bool opencl_required() {
  const char* v = std::getenv("XDEV_TEST_DEVICES");
  return v != nullptr && (std::string(",") + v + ",").find(",OPENCL,") != std::string::npos;
}

using xdev_test::ScopedEnv;

// Calls `f(completion)` and waits for the completion: rethrows what it reports.
template <class F>
void run(F&& f) {
  std::promise<void> p;
  auto fut = p.get_future();
  f(xdev::Completion([&p](std::exception_ptr ep) {
    if (ep)
      p.set_exception(ep);
    else
      p.set_value();
  }));
  fut.get();
}

class OpenCLBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      backend_ = std::make_unique<OpenCL>();
    } catch (const xdev::error& e) {
      if (opencl_required()) FAIL() << "OPENCL is required (XDEV_TEST_DEVICES) but unavailable: " << e.what();
      GTEST_SKIP() << "no OpenCL device: " << e.what();
    }
  }
  OpenCL& b() { return *backend_; }
  std::unique_ptr<OpenCL> backend_;
};

TEST(OpenCLErrors, StatusCodesAreReportedByNameWithTheCall) {
  EXPECT_EQ(xdev_opencl::cl_error_name(CL_INVALID_BUFFER_SIZE), "CL_INVALID_BUFFER_SIZE");
  EXPECT_EQ(xdev_opencl::cl_error_name(CL_BUILD_PROGRAM_FAILURE), "CL_BUILD_PROGRAM_FAILURE");
  EXPECT_EQ(xdev_opencl::cl_error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
  EXPECT_EQ(xdev_opencl::cl_error_name(-12345), "unknown OpenCL error");

  const auto oom = xdev_opencl::cl_failure("OPENCL:1", "clEnqueueNDRangeKernel", CL_MEM_OBJECT_ALLOCATION_FAILURE);
  EXPECT_EQ(oom.code(), xdev::errc::out_of_memory);
  EXPECT_THAT(oom.what(), HasSubstr("OPENCL:1: clEnqueueNDRangeKernel failed: CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)"));
  EXPECT_EQ(xdev_opencl::cl_failure("", "clFinish", CL_OUT_OF_RESOURCES).code(), xdev::errc::out_of_memory);
  EXPECT_EQ(xdev_opencl::cl_failure("", "clGetPlatformIDs", -1001).code(), xdev::errc::unavailable);
  const auto other = xdev_opencl::cl_failure("OPENCL:0", "clSetKernelArg", -12345);
  EXPECT_EQ(other.code(), xdev::errc::internal);
  EXPECT_THAT(other.what(), HasSubstr("unknown OpenCL error (-12345)"));
}

TEST(OpenCLShare, EachLocalProcessTakesAContiguousBlockOrSharesWhenDevicesAreFew) {
  using xdev_opencl::share_of;
  EXPECT_EQ(share_of(4, 0, 1), std::make_pair(std::size_t{0}, std::size_t{4}));
  EXPECT_EQ(share_of(4, 0, 2), std::make_pair(std::size_t{0}, std::size_t{2}));
  EXPECT_EQ(share_of(4, 1, 2), std::make_pair(std::size_t{2}, std::size_t{4}));
  EXPECT_EQ(share_of(5, 1, 2), std::make_pair(std::size_t{2}, std::size_t{5}));
  EXPECT_EQ(share_of(3, 2, 3), std::make_pair(std::size_t{2}, std::size_t{3}));
  EXPECT_EQ(share_of(2, 3, 4), std::make_pair(std::size_t{1}, std::size_t{2}));  // fewer devices: shared
  EXPECT_EQ(share_of(1, 2, 4), std::make_pair(std::size_t{0}, std::size_t{1}));
}

TEST_F(OpenCLBackend, DevicesAndCapabilitiesComeFromTheDeviceQueries) {
  ASSERT_GE(b().device_count(), 1u);
  const auto caps = b().runtime_capabilities();
  bool all_fp64 = true, any_accelerator = false;
  std::size_t smallest = 0;
  for (std::size_t i = 0; i < b().device_count(); ++i) {
    const auto& info = b().device_info(i);
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.compute_units, 0u);
    EXPECT_GT(info.max_allocation, 0u);
    EXPECT_LE(info.max_allocation, info.global_memory);
    all_fp64 = all_fp64 && info.fp64;
    any_accelerator = any_accelerator || info.type_name() != "CPU";
    smallest = smallest == 0 ? info.global_memory : std::min<std::size_t>(smallest, info.global_memory);
    const std::string d = b().device_description(i);
    EXPECT_THAT(d, HasSubstr(info.platform + " / " + info.name));
    EXPECT_THAT(d, HasSubstr(std::to_string(info.compute_units) + " compute units"));
    EXPECT_THAT(d, HasSubstr(std::string("fp64 ") + (info.fp64 ? "yes" : "no")));
  }
  EXPECT_EQ(caps.memory_per_device, smallest);
  EXPECT_EQ(caps.supports(xdev::DType::f64), all_fp64);
  EXPECT_TRUE(caps.supports(xdev::DType::f16) && caps.supports(xdev::DType::bf16) && caps.supports(xdev::DType::i64));
  EXPECT_EQ(caps.priority, any_accelerator ? 100 : -150);
  EXPECT_EQ(caps.dense_gather_factor, 0u);
  EXPECT_EQ(caps.rng_default, xdev::RngAlgorithm::philox);
}

TEST_F(OpenCLBackend, PropertiesAreTheDeviceQueriesAndFreeMemoryIsUnknown) {
  for (std::size_t i = 0; i < b().device_count(); ++i) {
    const auto& info = b().device_info(i);
    const xdev::DeviceProperties p = b().device_properties(i);
    EXPECT_EQ(p.type, info.device_type()) << "CL_DEVICE_TYPE";
    EXPECT_NE(p.type, xdev::DeviceType::unknown) << info.type_name();
    EXPECT_EQ(p.name, info.name);
    EXPECT_FALSE(p.vendor.empty());
    EXPECT_EQ(p.vendor, info.vendor);
    EXPECT_EQ(p.driver_version, info.driver_version);
    EXPECT_THAT(p.architecture, ::testing::StartsWith("OpenCL "));
    EXPECT_EQ(p.compute_units, info.compute_units);
    EXPECT_GT(p.max_work_group_size, 0u);
    EXPECT_EQ(p.memory_total, info.global_memory);
    EXPECT_FALSE(p.memory_free.has_value()) << "OpenCL has no standard free-memory query";
  }
  EXPECT_THROW((void)b().device_properties(b().device_count()), std::out_of_range);
}

TEST_F(OpenCLBackend, AnAllocationAboveTheDeviceMaximumIsOutOfMemoryNamingDeviceAndSize) {
  const auto max = b().device_info(0).max_allocation;
  try {
    (void)b().allocate(0, static_cast<std::size_t>(max) + 1);
    FAIL() << "no exception";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::out_of_memory);
    EXPECT_THAT(e.what(), HasSubstr("OPENCL:0 cannot allocate " + std::to_string(max + 1) + " bytes"));
    EXPECT_THAT(e.what(), HasSubstr("maximum allocation of " + std::to_string(max)));
  }
  // Nothing was counted: a full-size allocation still fits.
  auto h = b().allocate(0, 1024);
  b().deallocate(0, h, 1024);
}

TEST_F(OpenCLBackend, TransfersRoundTripAndCrossDevices) {
  std::vector<float> in(1000), out(1000, -1.0f);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.5f;
  const std::size_t bytes = in.size() * sizeof(float);
  const std::size_t last = b().device_count() - 1;
  auto a = b().allocate(0, bytes);
  auto c = b().allocate(last, bytes);
  run([&](xdev::Completion d) { b().copy_to_device(0, in.data(), a, 0, bytes, std::move(d)); });
  run([&](xdev::Completion d) { b().copy_between(0, a, 0, last, c, 0, bytes, std::move(d)); });
  run([&](xdev::Completion d) { b().copy_to_host(last, c, 0, out.data(), bytes, std::move(d)); });
  EXPECT_EQ(out, in);
  // With offsets: the second half of `a` to the first half of `c`.
  run([&](xdev::Completion d) { b().copy_between(0, a, bytes / 2, last, c, 0, bytes / 2, std::move(d)); });
  run([&](xdev::Completion d) { b().copy_to_host(last, c, 0, out.data(), bytes / 2, std::move(d)); });
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 500, in.begin() + 500));
  // Zero bytes complete at once.
  run([&](xdev::Completion d) { b().copy_to_host(0, a, 0, out.data(), 0, std::move(d)); });
  b().deallocate(0, a, bytes);
  b().deallocate(last, c, bytes);
}

// Strided windows (`concepts::StridedTransfers`) go in one rect transfer each way; a region whose
// slice pitch is no multiple of its row pitch (which OpenCL refuses) goes one slice per call.
TEST_F(OpenCLBackend, StridedRegionsRoundTripThroughRectTransfers) {
  static_assert(xdev::concepts::StridedTransfers<OpenCL>);
  std::vector<std::int32_t> in(200);
  std::iota(in.begin(), in.end(), 0);
  const std::size_t bytes = in.size() * sizeof(std::int32_t);
  auto a = b().allocate(0, bytes);
  run([&](xdev::Completion d) { b().copy_to_device(0, in.data(), a, 0, bytes, std::move(d)); });
  // The elements of `r` of `in`, densely.
  const auto expect = [&](const xdev::StridedRegion& r) {
    std::vector<std::int32_t> out;
    for (std::size_t i = 0; i < r.rows * r.slices; ++i)
      for (std::size_t e = 0; e < r.row_bytes / 4; ++e) out.push_back(in[r.row_offset(i) / 4 + e]);
    return out;
  };
  // Columns [2, 5) of rows [1, 4) of slices [1, 3) of a [4, 5, 10] array; then the same rows with
  // a slice pitch of 31 elements (not a multiple of the row pitch).
  for (const xdev::StridedRegion r : {xdev::StridedRegion{(50 + 10 + 2) * 4, 12, 3, 40, 2, 200},
                                      xdev::StridedRegion{(10 + 2) * 4, 12, 3, 40, 3, 124}}) {
    std::vector<std::int32_t> got(r.bytes() / 4, -1);
    run([&](xdev::Completion d) { b().copy_to_host_strided(0, a, r, got.data(), std::move(d)); });
    EXPECT_EQ(got, expect(r)) << "slice pitch " << r.slice_pitch;
    // Negated back into place: exactly those elements change.
    std::vector<std::int32_t> neg(got.size());
    std::transform(got.begin(), got.end(), neg.begin(), [](std::int32_t x) { return -x - 1; });
    run([&](xdev::Completion d) { b().copy_to_device_strided(0, neg.data(), a, r, std::move(d)); });
    std::vector<std::int32_t> all(in.size());
    run([&](xdev::Completion d) { b().copy_to_host(0, a, 0, all.data(), bytes, std::move(d)); });
    std::vector<std::int32_t> want = in;
    for (std::size_t i = 0; i < r.rows * r.slices; ++i)
      for (std::size_t e = 0; e < r.row_bytes / 4; ++e)
        want[r.row_offset(i) / 4 + e] = -want[r.row_offset(i) / 4 + e] - 1;
    EXPECT_EQ(all, want) << "slice pitch " << r.slice_pitch;
    run([&](xdev::Completion d) { b().copy_to_device(0, in.data(), a, 0, bytes, std::move(d)); });
  }
  // Between windows: the first region of `a` into the same rows of a second buffer at other
  // pitches (one clEnqueueCopyBufferRect), and column 0 into column 9 of `a` itself (interleaved
  // rectangles: one copy per row).
  static_assert(xdev::concepts::StridedCopies<OpenCL>);
  auto c = b().allocate(0, bytes);
  std::vector<std::int32_t> minus(in.size(), -1);
  run([&](xdev::Completion d) { b().copy_to_device(0, minus.data(), c, 0, bytes, std::move(d)); });
  const xdev::StridedRegion from{(50 + 10 + 2) * 4, 12, 3, 40, 2, 200};
  const xdev::StridedRegion to{4, 12, 3, 16, 2, 64};  // [.., 4, 4]: columns [1, 4) of rows [0, 3)
  run([&](xdev::Completion d) { b().copy_between_strided(0, a, from, 0, c, to, std::move(d)); });
  std::vector<std::int32_t> got(in.size());
  run([&](xdev::Completion d) { b().copy_to_host(0, c, 0, got.data(), bytes, std::move(d)); });
  std::vector<std::int32_t> want = minus;
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t e = 0; e < 3; ++e) want[to.row_offset(i) / 4 + e] = in[from.row_offset(i) / 4 + e];
  EXPECT_EQ(got, want);
  const xdev::StridedRegion col0{0, 4, 20, 40, 1, 800}, col9{36, 4, 20, 40, 1, 800};
  run([&](xdev::Completion d) { b().copy_between_strided(0, a, col0, 0, a, col9, std::move(d)); });
  run([&](xdev::Completion d) { b().copy_to_host(0, a, 0, got.data(), bytes, std::move(d)); });
  want = in;
  for (std::size_t r = 0; r < 20; ++r) want[r * 10 + 9] = in[r * 10];
  EXPECT_EQ(got, want);
  b().deallocate(0, c, bytes);
  b().deallocate(0, a, bytes);
}

// Pinned host memory is a mapped CL_MEM_ALLOC_HOST_PTR buffer the backend keeps track of until it is
// given back; transfers take it as their host side directly.
TEST_F(OpenCLBackend, PinnedMemoryIsMappedTrackedAndGivenBack) {
  const std::size_t bytes = 4096;
  void* p = b().allocate_pinned(0, bytes);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(b().is_pinned(p));
  EXPECT_TRUE(b().is_pinned(static_cast<char*>(p) + bytes - 1));
  EXPECT_FALSE(b().is_pinned(static_cast<char*>(p) + bytes));
  std::vector<float> stack(4);
  EXPECT_FALSE(b().is_pinned(stack.data()));
  auto* f = static_cast<float*>(p);
  for (int i = 0; i < 1024; ++i) f[i] = static_cast<float>(i);
  auto a = b().allocate(0, bytes);
  run([&](xdev::Completion d) { b().copy_to_device(0, p, a, 0, bytes, std::move(d)); });
  std::vector<float> out(1024);
  run([&](xdev::Completion d) { b().copy_to_host(0, a, 0, out.data(), bytes, std::move(d)); });
  EXPECT_EQ(out[1023], 1023.0F);
  b().deallocate(0, a, bytes);
  b().deallocate_pinned(0, p, bytes);
  EXPECT_FALSE(b().is_pinned(p));
  void* kept = b().allocate_pinned(b().device_count() - 1, 64);  // not given back: released with the backend
  EXPECT_TRUE(b().is_pinned(kept));
}

// Profiling: each completion says when the device ran the submission, on the host's steady clock
// (within the calibration's microseconds of the host's own view of the call), just before it runs.
TEST_F(OpenCLBackend, EachCompletionSaysWhenTheDeviceRanTheWork) {
  using clock = std::chrono::steady_clock;
  std::vector<float> in(1 << 18, 1.0f);
  const std::size_t bytes = in.size() * sizeof(float);
  auto a = b().allocate(0, bytes);
  for (int i = 0; i < 3; ++i) {
    std::promise<std::optional<xdev::DeviceTimes>> reported;
    const auto handed = clock::now();
    b().copy_to_device(0, in.data(), a, 0, bytes, xdev::Completion([&](std::exception_ptr ep) {
                         if (ep) std::rethrow_exception(ep);
                         reported.set_value(xdev::detail::take_device_times());
                       }));
    const auto times = reported.get_future().get();
    const auto seen = clock::now();
    ASSERT_TRUE(times.has_value()) << "no device times reported (CL_QUEUE_PROFILING_ENABLE)";
    EXPECT_LE(times->begin, times->end);
    EXPECT_GE(times->begin, handed - std::chrono::milliseconds(2));
    EXPECT_LE(times->end, seen + std::chrono::milliseconds(2));
  }
  EXPECT_FALSE(xdev::detail::take_device_times().has_value()) << "times were left for another completion";
  b().deallocate(0, a, bytes);
}

// exp (ABI 1.4) is one of the OpenCL plugin's own kernels, for f32 and the half types: the op's
// member exists for them (so the plugin table reports them and xdev never takes the fallback).
TEST_F(OpenCLBackend, ExpRunsOnTheDeviceForF32F16AndBf16) {
  static_assert(xdev::ops::has_native_op<OpenCL, xdev::ops::ExpArgs<float, OpenCL::memory_handle>> &&
                xdev::ops::has_native_op<OpenCL, xdev::ops::ExpArgs<xdev::bf16, OpenCL::memory_handle>> &&
                xdev::ops::has_native_op<OpenCL, xdev::ops::ExpArgs<xdev::f16, OpenCL::memory_handle>> &&
                !xdev::ops::has_native_op<OpenCL, xdev::ops::ExpArgs<std::int32_t, OpenCL::memory_handle>>);
  const std::vector<float> in{-1.0f, 0.0f, 0.5f, 2.0f};
  std::vector<float> out(in.size(), -1.0f);
  const std::size_t bytes = in.size() * sizeof(float);
  auto x = b().allocate(0, bytes);
  run([&](xdev::Completion d) { b().copy_to_device(0, in.data(), x, 0, bytes, std::move(d)); });
  run([&](xdev::Completion d) {
    b().exp(0, xdev::ops::ExpArgs<float, OpenCL::memory_handle>{x, x, in.size()}, std::move(d));
  });
  run([&](xdev::Completion d) { b().copy_to_host(0, x, 0, out.data(), bytes, std::move(d)); });
  for (std::size_t i = 0; i < in.size(); ++i) EXPECT_NEAR(out[i], std::exp(in[i]), 4e-7f * std::exp(in[i])) << i;
  b().deallocate(0, x, bytes);
}

// Streams run on command queues of their own (concepts::NativeQueues, ABI 1.5): xdev hands each
// operation over without waiting for the one before it, so the queue alone must order them.
static_assert(xdev::concepts::NativeQueues<OpenCL>);

TEST_F(OpenCLBackend, AStreamOnItsOwnQueueRunsItsWorkInOrderHostTasksIncluded) {
  backend_.reset();  // the runtime makes its own
  xdev::Runtime<OpenCL> rt;
  auto dev = rt.device(0);
  auto s = dev.make_stream();
  EXPECT_TRUE(s.uses_native_queue());
  EXPECT_TRUE(dev.default_stream().uses_native_queue());
  constexpr std::size_t n = 4096;
  std::vector<float> staged(n, 0.0f);
  std::vector<float> out(n, -1.0f);
  auto x = xdev::empty<float>(dev, {static_cast<std::int64_t>(n)});
  (void)xdev::ops::fill(s, x, 1.0f);
  // The copy after this host task reads `staged` when the queue reaches it: only after the task.
  (void)s.execute([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::fill(staged.begin(), staged.end(), 3.0f);
  });
  (void)s.copy_to_device(std::span<const float>(staged), x.buffer());
  for (int i = 0; i < 10; ++i) (void)xdev::ops::scale(s, x, 2.0f);
  s.copy_to_host(x.buffer(), std::span<float>(out)).get();
  for (std::size_t i = 0; i < n; i += 511) EXPECT_EQ(out[i], 3072.0f) << i;
  s.synchronize();
}

// A stream keeps its command queue until it is destroyed; when the runtime goes first, xdev no
// longer calls destroy_queue (the backend is gone), so the backend must release the queue itself:
// a queue left behind would keep the device's context (and its memory) alive for good.
TEST_F(OpenCLBackend, TheQueueOfAStreamThatOutlivesItsRuntimeIsReleasedWithTheRuntime) {
  backend_.reset();
  std::optional<xdev::Runtime<OpenCL>> rt(std::in_place);
  auto s = rt->device(0).make_stream();
  ASSERT_TRUE(s.uses_native_queue());
  (void)s.execute([] {});
  s.synchronize();
  // The device's context, held by the test as well, to ask how many still hold it afterwards.
  cl_command_queue probe = rt->backend().create_queue(0);
  cl_context context = nullptr;
  ASSERT_EQ(clGetCommandQueueInfo(probe, CL_QUEUE_CONTEXT, sizeof context, &context, nullptr), CL_SUCCESS);
  rt->backend().destroy_queue(0, probe);
  ASSERT_EQ(clRetainContext(context), CL_SUCCESS);
  rt.reset();  // `s` is still alive, with its queue
  cl_uint holders = 0;
  EXPECT_EQ(clGetContextInfo(context, CL_CONTEXT_REFERENCE_COUNT, sizeof holders, &holders, nullptr), CL_SUCCESS);
  EXPECT_EQ(holders, 1u) << "something of the destroyed runtime still holds its OpenCL context";
  clReleaseContext(context);
}

// A stream waiting for another stream's event on the same device gets a barrier on the other
// queue's marker event (concepts::NativeMarkers, ABI 1.6): the device orders the two, not the host.
static_assert(xdev::concepts::NativeMarkers<OpenCL>);

TEST_F(OpenCLBackend, AWaitForAnotherStreamsEventIsABarrierOnItsMarker) {
  backend_.reset();
  xdev::Runtime<OpenCL> rt;
  auto dev = rt.device(0);
  auto producer = dev.make_stream();
  auto consumer = dev.make_stream();
  ASSERT_TRUE(producer.has_markers());
  constexpr std::size_t n = 4096;
  auto x = xdev::empty<float>(dev, {static_cast<std::int64_t>(n)});
  (void)xdev::ops::fill(producer, x, 1.0f).get();
  std::promise<void> open;
  auto gate = open.get_future().share();
  (void)producer.execute([gate] { gate.wait(); });  // holds the producer's queue
  (void)xdev::ops::fill(producer, x, 7.0f);
  const xdev::Event e = producer.record();
  const auto native_before = xdev::metrics::counter("stream.wait.native").value();
  consumer.wait(e);
  std::vector<float> out(n, -1.0f);
  auto read = consumer.copy_to_host(x.buffer(), std::span<float>(out));
  EXPECT_EQ(xdev::metrics::counter("stream.wait.native").value(), native_before + 1)
      << "the wait was not a barrier on the producer's marker";
  EXPECT_EQ(read.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout)
      << "the consumer read before the producer's event";
  open.set_value();
  read.get();
  // The event is set when the producer's record is delivered, which may come just after the
  // consumer's read (both completions come back from the device separately).
  EXPECT_TRUE(e.wait_for(std::chrono::seconds(10))) << "the event never became ready";
  for (std::size_t i = 0; i < n; i += 511) EXPECT_EQ(out[i], 7.0f) << i;
  producer.synchronize();
  consumer.synchronize();
}

TEST_F(OpenCLBackend, AFailedCallNamesTheDeviceTheCallAndTheStatus) {
  auto a = b().allocate(0, 64);
  std::vector<unsigned char> out(64);
  try {
    run([&](xdev::Completion d) { b().copy_to_host(0, a, 32, out.data(), 64, std::move(d)); });  // past the end
    FAIL() << "no exception";
  } catch (const xdev::error& e) {
    EXPECT_THAT(e.what(), HasSubstr("OPENCL:0: clEnqueueReadBuffer failed: CL_INVALID_VALUE (-30)"));
  }
  b().deallocate(0, a, 64);
}

// A command that fails after its submission (the runtime's status in the completion callback) is
// named by its device and op; the plugin joins that text only then (Pending::describe).
TEST_F(OpenCLBackend, ACommandThatFailsOnTheDeviceNamesTheDeviceAndTheOp) {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  ASSERT_EQ(clGetPlatformIDs(1, &platform, nullptr), CL_SUCCESS);
  ASSERT_EQ(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, nullptr), CL_SUCCESS);
  cl_int err = CL_SUCCESS;
  cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  const std::string label = "OPENCL:3";
  const auto fail = [&](std::unique_ptr<xdev_opencl::detail::Pending> p) {
    std::exception_ptr got;
    p->done = [&got](std::exception_ptr ep) { got = std::move(ep); };
    cl_event ev = clCreateUserEvent(context, &err);  // released by the callback, as a command's
    EXPECT_EQ(err, CL_SUCCESS);
    xdev_opencl::detail::on_complete(ev, CL_OUT_OF_RESOURCES, p.release());
    try {
      if (got) std::rethrow_exception(got);
      ADD_FAILURE() << "the failure was not reported";
    } catch (const xdev::error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto by_op = std::make_unique<xdev_opencl::detail::Pending>();
  by_op->device = &label;
  by_op->op = "scale";
  EXPECT_THAT(fail(std::move(by_op)), HasSubstr("OPENCL:3: scale: the command failed: CL_OUT_OF_RESOURCES (-5)"));
  auto described = std::make_unique<xdev_opencl::detail::Pending>();
  described->what = "OPENCL:3: copy to OPENCL:1";
  EXPECT_THAT(fail(std::move(described)),
              HasSubstr("OPENCL:3: copy to OPENCL:1: the command failed: CL_OUT_OF_RESOURCES (-5)"));
  clReleaseContext(context);
}

// The kernel names the ops launch by are joined at compile time from the op and its dtypes.
TEST(OpenCLKernelNames, AreTheOpFollowedByItsDtypes) {
  using xdev_opencl::detail::kernel_name;
  constexpr std::string_view scale = kernel_name<"scale_", float>;
  constexpr std::string_view exp = kernel_name<"exp_", xdev::bf16>;
  constexpr std::string_view convert = kernel_name<"convert_", xdev::f16, std::int64_t>;
  EXPECT_EQ(scale, "scale_f32");
  EXPECT_EQ(exp, "exp_bf16");
  EXPECT_EQ(convert, "convert_f16_i64");
  // One name, one address: what the per-device cache keys on.
  const char* once = kernel_name<"scale_", double>.c_str();
  const char* again = kernel_name<"scale_", double>.c_str();
  EXPECT_EQ(once, again);
}

TEST_F(OpenCLBackend, HostTasksRunAfterTheWorkQueuedBeforeThemOffTheCallingThread) {
  std::vector<int> in(1 << 20, 7), out(1 << 20, 0);
  const std::size_t bytes = in.size() * sizeof(int);
  auto a = b().allocate(0, bytes);
  std::promise<void> copied, ran;
  b().copy_to_device(0, in.data(), a, 0, bytes, [&](std::exception_ptr) { copied.set_value(); });
  std::thread::id task_thread;
  b().execute(
      0, [&] { task_thread = std::this_thread::get_id(); },
      [&](std::exception_ptr ep) { ep ? ran.set_exception(ep) : ran.set_value(); });
  ran.get_future().get();
  EXPECT_EQ(copied.get_future().wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_NE(task_thread, std::this_thread::get_id());
  // A task that throws reports its exception.
  std::promise<void> failed;
  b().execute(
      0, [] { throw xdev::error(xdev::errc::internal, "task failed on purpose"); },
      [&](std::exception_ptr ep) { ep ? failed.set_exception(ep) : failed.set_value(); });
  EXPECT_THROW(failed.get_future().get(), xdev::error);
  b().deallocate(0, a, bytes);
}

TEST_F(OpenCLBackend, TheDeviceTypeAndPlatformVariablesFilterTheDevices) {
  {
    ScopedEnv env("XDEV_OPENCL_DEVICE_TYPE", "tpu");
    try {
      OpenCL b2;
      FAIL() << "no exception";
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
      EXPECT_THAT(e.what(), HasSubstr("XDEV_OPENCL_DEVICE_TYPE=\"tpu\""));
      EXPECT_THAT(e.what(), HasSubstr("accepted: a comma-separated list of cpu, gpu, accelerator, all"));
    }
  }
  {
    ScopedEnv env("XDEV_OPENCL_PLATFORM", "no such platform");
    try {
      OpenCL b2;
      FAIL() << "no exception";
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.code(), xdev::errc::unavailable);
      EXPECT_THAT(e.what(), HasSubstr("found: " + b().device_info(0).name));
    }
  }
  const bool cpu = b().device_info(0).type_name() == "CPU";
  {
    ScopedEnv env("XDEV_OPENCL_DEVICE_TYPE", cpu ? "gpu, accelerator" : "cpu");
    std::size_t other = 0;
    for (std::size_t i = 0; i < b().device_count(); ++i) other += (b().device_info(i).type_name() == "CPU") != cpu;
    if (other == 0) {
      EXPECT_THROW(OpenCL{}, xdev::error);
    }
  }
  {
    ScopedEnv env("XDEV_OPENCL_DEVICE_TYPE", cpu ? "CPU" : "gpu,accelerator");
    ScopedEnv platform("XDEV_OPENCL_PLATFORM", b().device_info(0).platform.substr(0, 4).c_str());
    OpenCL b2;
    EXPECT_GE(b2.device_count(), 1u);
  }
}

TEST_F(OpenCLBackend, AKernelBuildFailureReportsTheOptionsAndTheCompilerLog) {
  // A macro that turns every `__global` qualifier of the kernels into an unknown identifier.
  ScopedEnv env("XDEV_OPENCL_BUILD_OPTIONS", "-D__global=xdev_no_such_qualifier");
  try {
    OpenCL broken;
    FAIL() << "no exception";
  } catch (const xdev::error& e) {
    EXPECT_THAT(e.what(), HasSubstr("OPENCL: compiling the kernels (-cl-std=CL1.2"));
    EXPECT_THAT(e.what(),
                HasSubstr("-D__global=xdev_no_such_qualifier) failed: clBuildProgram: CL_BUILD_PROGRAM_FAILURE"));
    EXPECT_THAT(e.what(), HasSubstr("--- build log for " + b().device_info(0).name));
  }
}

TEST_F(OpenCLBackend, EachLocalProcessGetsItsShareOfTheDevices) {
  const std::size_t n = b().device_count();
  std::size_t total = 0;
  for (std::uint32_t rank = 0; rank < 2; ++rank) {
    xdev::plugin::ClientOptions o;
    o.local_rank = rank;
    o.local_world_size = 2;
    OpenCL part(o);
    const auto [first, last] = xdev_opencl::share_of(n, rank, 2);
    EXPECT_EQ(part.device_count(), last - first);
    total += part.device_count();
  }
  if (n >= 2) {
    EXPECT_EQ(total, n);
  }
}

}  // namespace
