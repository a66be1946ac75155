// The CUDA plugin: how CUDA and cuBLAS failures are reported and its configuration is checked (these
// run everywhere); then, on a GPU, the backend on its own (devices, capabilities, memory limits)
// and through AnyDevice (transfers from pageable and page-locked memory, stream order of pageable
// copies and host tasks, native streams, events between streams, completion modes, a kernel fault).
// The op conformance suite runs in cuda_op_suite.cpp.
//
// Without a GPU the device tests skip with the reason, unless XDEV_TEST_DEVICES lists CUDA: then
// they fail.
#include "cuda_backend.hpp"
#include "support/scoped_env.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/ops/ops.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/detached.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

using ::testing::HasSubstr;
using xdev_cuda::Cuda;

bool cuda_required() {
  const char* v = std::getenv("XDEV_TEST_DEVICES");
  return v != nullptr && (std::string(",") + v + ",").find(",CUDA,") != std::string::npos;
}

using xdev_test::ScopedEnv;

// Strided windows go to CUDA in pitched copies (cudaMemcpy2DAsync, cudaMemcpy3DPeerAsync), so the
// plugin's table carries the ABI 1.11 strided entries; the op suite's
// `WindowsTransferAndCopyExactlyTheirElements` runs them on a GPU.
static_assert(xdev::concepts::StridedTransfers<Cuda>);
static_assert(xdev::concepts::StridedCopies<Cuda>);

// A kernel that writes to an address no allocation covers leaves the CUDA context unusable for the
// rest of the process: the operation fails with errc::unavailable and CUDA's message, and so does
// every later call, at once. Run in a child process of its own (a death test in the threadsafe
// style re-executes this binary), since no other test could use the GPU after it.
// It comes first in this file, before this process made a CUDA context of its own: with the other
// tests' context held here, the child's could not be made on an H100 machine ("cudaSetDevice
// failed: cudaErrorMemoryAllocation").
// The fault scenario, run in the child: 0 when everything was reported as it should be, else a
// code naming what went wrong (3: a hang). With `host_tasks`, the stream is first held by a host
// task until the faulting fill and a second host task are queued behind it (so the device cannot be
// lost before they are): the stream never reaches that second task, whose host function never
// runs, and it must fail instead of waiting forever.
int fault_scenario(bool host_tasks) {
  int code = 0;
  {
    Cuda b;
    // A completion as a future.
    auto completion = [](std::promise<void>& p) {
      return xdev::Completion([&p](std::exception_ptr ep) {
        if (ep)
          p.set_exception(ep);
        else
          p.set_value();
      });
    };
    auto lost = [](std::future<void>& f, const char* what) {
      if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) std::_Exit(3);  // a hang
      try {
        f.get();
        return 4;  // the fault went unreported
      } catch (const xdev::error& e) {
        if (e.code() != xdev::errc::unavailable || std::string(e.what()).find(what) == std::string::npos) {
          std::fprintf(stderr, "unexpected failure: %s\n", e.what());
          return 5;
        }
      }
      return 0;
    };
    std::promise<void> hold, held_done, fill_done, behind_done;
    auto held = held_done.get_future();
    auto fill = fill_done.get_future();
    auto behind = behind_done.get_future();
    std::atomic<bool> behind_ran{false};
    if (host_tasks) {
      b.execute(
          0, [release = hold.get_future().share()] { release.wait(); }, completion(held_done));
    }
    b.fill(0, xdev::ops::FillArgs<float, void*>{reinterpret_cast<void*>(0x100), 1 << 20, 1.0f}, completion(fill_done));
    if (host_tasks) {
      b.execute(
          0, [&behind_ran] { behind_ran = true; }, completion(behind_done));
      hold.set_value();
      if (held.wait_for(std::chrono::seconds(20)) != std::future_status::ready) std::_Exit(3);
      held.get();
    }
    code = lost(fill, "cudaErrorIllegalAddress");
    if (code == 0 && host_tasks) {
      code = lost(behind, "CUDA:0 is lost");
      if (code == 0 && behind_ran) code = 8;  // a task ran behind the fault
    }
    try {
      b.allocate(0, 16);
      if (code == 0) code = 6;  // the lost device still allocated
    } catch (const xdev::error& e) {
      if (e.code() != xdev::errc::unavailable || std::string(e.what()).find("CUDA:0 is lost") == std::string::npos)
        code = 7;
    }
  }
  return code;
}

void expect_fault_reported(const char* completion_mode, bool host_tasks) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    if (cuda_required()) FAIL() << "CUDA is required (XDEV_TEST_DEVICES) but no device is there";
    GTEST_SKIP() << "no CUDA device";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv("XDEV_CUDA_COMPLETION", completion_mode, 1);
        std::exit(fault_scenario(host_tasks));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(CudaFault, AnIllegalAddressMarksTheDeviceLostAndNothingHangs) {
  expect_fault_reported("poll", false);
}

// A stream stops at a sticky error and never runs a host function behind it: the operation's
// completion comes from the completion thread's health check instead (this hung until 2026-11).
TEST(CudaFault, AndSoWithHostFunctionCompletions) {
  expect_fault_reported("host_func", false);
}

// A host task queued behind the fault fails with the device lost and never runs (it hung).
TEST(CudaFault, AHostTaskBehindTheFaultFailsInsteadOfHanging) {
  expect_fault_reported("poll", true);
}
TEST(CudaFault, AHostTaskBehindTheFaultFailsWithHostFunctionCompletionsToo) {
  expect_fault_reported("host_func", true);
}

// The plugin loads in any process, GPU or not (CI has none): the dynamic loader once refused it
// everywhere ("cannot allocate memory in static TLS block") after one of xdev's thread_locals was
// given the initial-exec model, which puts the plugin's whole TLS, the static CUDA runtime's 8 KiB
// included, into the loader's small static surplus.
TEST(CudaPlugin, LoadsInAnyProcess) {
  const auto& found = xdev::Registry::global().discovery();
  const xdev::plugin::Candidate* cuda = nullptr;
  for (const auto& c : found.candidates)
    if (c.path.filename() == "libxdev_plugin_cuda.so") cuda = &c;
  ASSERT_NE(cuda, nullptr) << "libxdev_plugin_cuda.so is not in the plugin search path (XDEV_PLUGIN_PATH)";
  EXPECT_EQ(cuda->status, xdev::plugin::CandidateStatus::loaded) << cuda->reason;
  EXPECT_EQ(cuda->name, "CUDA");
}

TEST(CudaErrors, StatusesAreReportedByNameWithTheCall) {
  const auto oom = xdev_cuda::cuda_failure("CUDA:1", "cudaMallocAsync", cudaErrorMemoryAllocation);
  EXPECT_EQ(oom.code(), xdev::errc::out_of_memory);
  EXPECT_THAT(oom.what(), HasSubstr("CUDA:1: cudaMallocAsync failed: cudaErrorMemoryAllocation (2)"));
  const auto fault = xdev_cuda::cuda_failure("CUDA:0: gemm", "the operation", cudaErrorIllegalAddress);
  EXPECT_EQ(fault.code(), xdev::errc::unavailable);
  EXPECT_THAT(fault.what(), HasSubstr("cudaErrorIllegalAddress"));
  EXPECT_TRUE(xdev_cuda::cuda_sticky(cudaErrorIllegalAddress));
  EXPECT_TRUE(xdev_cuda::cuda_sticky(cudaErrorLaunchFailure));
  EXPECT_FALSE(xdev_cuda::cuda_sticky(cudaErrorMemoryAllocation));
  EXPECT_FALSE(xdev_cuda::cuda_sticky(cudaErrorInvalidValue));
  EXPECT_EQ(xdev_cuda::cuda_errc(cudaErrorNoDevice), xdev::errc::unavailable);
  EXPECT_EQ(xdev_cuda::cuda_errc(cudaErrorInsufficientDriver), xdev::errc::unavailable);
  EXPECT_EQ(xdev_cuda::cuda_errc(cudaErrorInvalidValue), xdev::errc::invalid_argument);
  EXPECT_EQ(xdev_cuda::cuda_errc(cudaErrorNotSupported), xdev::errc::internal);
}

TEST(CudaErrors, CublasStatusesAreReportedByName) {
  const auto e = xdev_cuda::cublas_failure("CUDA:0: gemm", "cublasGemmEx", CUBLAS_STATUS_ALLOC_FAILED);
  EXPECT_EQ(e.code(), xdev::errc::out_of_memory);
  EXPECT_THAT(e.what(), HasSubstr("CUDA:0: gemm: cublasGemmEx failed: CUBLAS_STATUS_ALLOC_FAILED (3)"));
  EXPECT_EQ(xdev_cuda::cublas_failure("", "x", CUBLAS_STATUS_NOT_SUPPORTED).code(), xdev::errc::unimplemented);
  EXPECT_EQ(xdev_cuda::cublas_failure("", "x", CUBLAS_STATUS_INVALID_VALUE).code(), xdev::errc::invalid_argument);
  EXPECT_EQ(xdev_cuda::cublas_status_name(static_cast<cublasStatus_t>(999)), "unknown cuBLAS status");
}

// Checked before the devices are looked at: the same error with or without a GPU.
TEST(CudaConfig, AMalformedCompletionModeIsRejectedNamingTheVariable) {
  ScopedEnv env("XDEV_CUDA_COMPLETION", "spin");
  try {
    Cuda b;
    FAIL() << "accepted XDEV_CUDA_COMPLETION=spin";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("XDEV_CUDA_COMPLETION=\"spin\""));
    EXPECT_THAT(e.what(), HasSubstr("accepted: poll, host_func"));
  }
}

TEST(CudaConfig, TheDeviceShareOfALocalProcess) {
  using xdev::plugin::device_share;
  EXPECT_EQ(device_share(8, 0, 1), std::make_pair(std::size_t{0}, std::size_t{8}));
  EXPECT_EQ(device_share(8, 1, 4), std::make_pair(std::size_t{2}, std::size_t{4}));
  EXPECT_EQ(device_share(1, 3, 4), std::make_pair(std::size_t{0}, std::size_t{1}));  // shared
  xdev::plugin::ClientOptions o;
  o.local_rank = 1;
  o.local_world_size = 2;
  EXPECT_EQ(device_share(3, o), std::make_pair(std::size_t{1}, std::size_t{3}));
}

// ---- the backend on its own ------------------------------------------------------------------

class CudaBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      backend_ = std::make_unique<Cuda>();
    } catch (const xdev::error& e) {
      if (cuda_required()) FAIL() << "CUDA is required (XDEV_TEST_DEVICES) but unavailable: " << e.what();
      GTEST_SKIP() << "no CUDA device: " << e.what();
    }
  }
  Cuda& b() { return *backend_; }
  std::unique_ptr<Cuda> backend_;
};

TEST_F(CudaBackend, DevicesAndCapabilitiesComeFromTheDevice) {
  ASSERT_GE(b().device_count(), 1u);
  std::size_t smallest = 0;
  for (std::size_t i = 0; i < b().device_count(); ++i) {
    const auto& info = b().device_info(i);
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.multiprocessors, 0);
    EXPECT_GT(info.total_memory, 0u);
    smallest = smallest == 0 ? info.total_memory : std::min(smallest, info.total_memory);
    const std::string d = b().device_description(i);
    EXPECT_THAT(d, HasSubstr(info.name + ", compute capability " + std::to_string(info.major) + "."));
    EXPECT_THAT(d, HasSubstr(std::to_string(info.multiprocessors) + " multiprocessors"));
    EXPECT_THAT(d, HasSubstr("free"));
  }
  const auto caps = b().runtime_capabilities();
  EXPECT_EQ(caps.memory_per_device, smallest);
  EXPECT_EQ(caps.priority, 200);
  EXPECT_TRUE(caps.supports(xdev::DType::f64) && caps.supports(xdev::DType::bf16));
  EXPECT_EQ(caps.rng_default, xdev::RngAlgorithm::philox);
  if (std::getenv("XDEV_CUDA_COMPLETION") == nullptr) {
    EXPECT_EQ(b().completion_mode(), xdev_cuda::CompletionMode::poll);
  }
}

TEST_F(CudaBackend, AnAllocationBeyondTheDeviceIsOutOfMemoryAndTheDeviceStaysUsable) {
  const std::size_t too_much = b().device_info(0).total_memory * 2;
  try {
    b().allocate(0, too_much);
    FAIL() << "allocated twice the device's memory";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::out_of_memory);
    EXPECT_THAT(e.what(), HasSubstr("CUDA:0 cannot allocate " + std::to_string(too_much) + " bytes"));
  }
  void* p = b().allocate(0, 1 << 20);
  EXPECT_NE(p, nullptr);
  b().deallocate(0, p, 1 << 20);
}

TEST_F(CudaBackend, ADeviceOutOfRangeIsAnInvalidArgument) {
  try {
    b().allocate(b().device_count(), 16);
    FAIL();
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("does not exist"));
  }
}

// ---- through AnyDevice -----------------------------------------------------------------------

class CudaDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      devices_ = xdev::Registry::global().devices("CUDA");
    } catch (const std::exception& e) {
      if (cuda_required()) FAIL() << "CUDA is required (XDEV_TEST_DEVICES) but unavailable: " << e.what();
      GTEST_SKIP() << "no CUDA device: " << e.what();
    }
    ASSERT_FALSE(devices_.empty());
  }
  const xdev::AnyDevice& dev() const { return devices_.front(); }
  std::vector<xdev::AnyDevice> devices_;
};

// Page-locked host memory for one test.
template <class T>
struct Pinned {
  explicit Pinned(std::size_t n) : n(n) {
    if (cudaMallocHost(reinterpret_cast<void**>(&p), n * sizeof(T)) != cudaSuccess) p = nullptr;
  }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  ~Pinned() { cudaFreeHost(p); }
  std::span<T> span() { return {p, n}; }
  T* p = nullptr;
  std::size_t n;
};

TEST_F(CudaDevice, TransfersRoundTripFromPageableAndPageLockedMemory) {
  for (std::size_t n : {std::size_t{1}, std::size_t{4097}, std::size_t{3} << 20}) {
    std::vector<std::int32_t> src(n), back(n, -1);
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<std::int32_t>(i * 2654435761u);
    auto a = xdev::empty<std::int32_t>(dev(), {static_cast<std::int64_t>(n)});
    dev().copy_to_device(std::span<const std::int32_t>(src), a).get();
    dev().copy_to_host(a, std::span<std::int32_t>(back)).get();
    EXPECT_EQ(back, src) << "pageable, n=" << n;

    Pinned<std::int32_t> pin_src(n), pin_back(n);
    ASSERT_NE(pin_src.p, nullptr);
    ASSERT_NE(pin_back.p, nullptr);
    std::copy(src.begin(), src.end(), pin_src.p);
    std::fill(pin_back.p, pin_back.p + n, -1);
    auto b = xdev::empty<std::int32_t>(dev(), {static_cast<std::int64_t>(n)});
    dev().copy_to_device(std::span<const std::int32_t>(pin_src.span()), b).get();
    dev().copy_to_host(b, pin_back.span()).get();
    EXPECT_TRUE(std::equal(src.begin(), src.end(), pin_back.p)) << "page-locked, n=" << n;
  }
}

// A pageable copy reads and writes host memory in stream order: the second upload reads what the
// download before it wrote, though nothing waits in between.
TEST_F(CudaDevice, PageableCopiesTouchHostMemoryInStreamOrder) {
  constexpr std::size_t n = 1 << 20;
  std::vector<float> first(n), middle(n, 0.0f), last(n, 0.0f);
  for (std::size_t i = 0; i < n; ++i) first[i] = static_cast<float>(i % 1000) + 0.5f;
  auto a = xdev::empty<float>(dev(), {static_cast<std::int64_t>(n)});
  auto b = xdev::empty<float>(dev(), {static_cast<std::int64_t>(n)});
  const auto s = dev().make_stream();
  ASSERT_TRUE(s.uses_native_queue());
  s.copy_to_device(std::span<const float>(first), a.buffer(), boost::asio::detached);
  s.copy_to_host(a.buffer(), std::span<float>(middle), boost::asio::detached);
  s.copy_to_device(std::span<const float>(middle), b.buffer(), boost::asio::detached);
  s.copy_to_host(b.buffer(), std::span<float>(last)).get();
  EXPECT_EQ(last, first);
}

// A host task holds back the stream's later work until it has run.
TEST_F(CudaDevice, AHostTaskHoldsBackTheWorkAfterIt) {
  std::vector<float> value(1, 0.0f);
  auto a = xdev::empty<float>(dev(), {1});
  const auto s = dev().make_stream();
  s.execute(
      [&value] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        value[0] = 7.0f;
      },
      boost::asio::detached);
  s.copy_to_device(std::span<const float>(value), a.buffer(), boost::asio::detached);
  std::vector<float> back(1, 0.0f);
  s.copy_to_host(a.buffer(), std::span<float>(back)).get();
  EXPECT_EQ(back[0], 7.0f);
}

TEST_F(CudaDevice, SixtyFourOpsOnAStreamRunInOrder) {
  constexpr std::int64_t n = 4096;
  auto x = xdev::empty<float>(dev(), {n});
  const auto s = dev().make_stream();
  ASSERT_TRUE(s.uses_native_queue());
  xdev::ops::fill(s, x, 1.0f, boost::asio::detached);
  for (int i = 0; i < 63; ++i) xdev::ops::scale(s, x, 2.0f, boost::asio::detached);
  std::vector<float> back(static_cast<std::size_t>(n));
  s.copy_to_host(x.buffer(), std::span<float>(back)).get();
  for (float v : back) ASSERT_EQ(v, 9223372036854775808.0f);  // 2^63
}

TEST_F(CudaDevice, AnEventOrdersWorkAcrossStreams) {
  constexpr std::int64_t n = 1 << 22;
  auto x = xdev::empty<float>(dev(), {n});
  const auto producer = dev().make_stream();
  const auto consumer = dev().make_stream();
  ASSERT_TRUE(producer.has_markers()) << "CUDA events as native markers (ABI 1.6)";
  // The producer is held by a host task, so its event is surely pending when the consumer waits.
  producer.execute([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }, boost::asio::detached);
  xdev::ops::fill(producer, x, 3.0f, boost::asio::detached);
  for (int i = 0; i < 8; ++i) xdev::ops::scale(producer, x, 0.5f, boost::asio::detached);
  const auto native = xdev::metrics::counter("stream.wait.native").value();
  consumer.wait(producer.record());
  std::vector<float> back(static_cast<std::size_t>(n));
  consumer.copy_to_host(x.buffer(), std::span<float>(back)).get();
  EXPECT_EQ(xdev::metrics::counter("stream.wait.native").value(), native + 1)
      << "the consumer's wait was not a cudaStreamWaitEvent on the producer's event";
  EXPECT_EQ(back.front(), 3.0f / 256.0f);
  EXPECT_EQ(back.back(), 3.0f / 256.0f);
}

TEST_F(CudaDevice, AGatherWithAnIndexOutOfRangeFailsAndLeavesTheOutputAlone) {
  auto table = xdev::empty<float>(dev(), {4, 3});
  xdev::ops::fill(dev(), table, 1.0f).get();
  std::vector<std::int64_t> idx{0, 3, 9, 1};
  auto index = xdev::empty<std::int64_t>(dev(), {4});
  dev().copy_to_device(std::span<const std::int64_t>(idx), index).get();
  auto out = xdev::empty<float>(dev(), {4, 3});
  xdev::ops::fill(dev(), out, -1.0f).get();
  try {
    xdev::ops::gather(dev(), table, index, out).get();
    FAIL() << "gathered row 9 of 4";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("index 9 at position 2 is out of range for a table of 4 rows"));
  }
  std::vector<float> back(12);
  dev().copy_to_host(out, std::span<float>(back)).get();
  for (float v : back) EXPECT_EQ(v, -1.0f);
}

// The other completion mode gives the same results (host functions instead of polled events),
// and 64 operations queued at once complete in order.
TEST(CudaCompletion, HostFunctionCompletionsDeliverTheSameResults) {
  ScopedEnv env("XDEV_CUDA_COMPLETION", "host_func");
  std::unique_ptr<Cuda> b;
  try {
    b = std::make_unique<Cuda>();
  } catch (const xdev::error& e) {
    if (cuda_required()) FAIL() << "CUDA is required (XDEV_TEST_DEVICES) but unavailable: " << e.what();
    GTEST_SKIP() << "no CUDA device: " << e.what();
  }
  EXPECT_EQ(b->completion_mode(), xdev_cuda::CompletionMode::host_func);
  constexpr std::size_t n = 1000;
  void* x = b->allocate(0, n * sizeof(double));
  std::vector<std::promise<void>> done(3);
  auto completion = [&](std::size_t i) {
    return xdev::Completion([&done, i](std::exception_ptr ep) {
      if (ep)
        done[i].set_exception(ep);
      else
        done[i].set_value();
    });
  };
  b->fill(0, xdev::ops::FillArgs<double, void*>{x, n, 1.5}, completion(0));
  double total = 0;
  b->sum(0, xdev::ops::SumArgs<double, void*>{x, n, &total}, completion(1));
  done[0].get_future().get();
  done[1].get_future().get();
  EXPECT_EQ(total, 1500.0);
  // 64 scalings queued at once complete in order.
  std::vector<int> order;
  std::mutex m;
  std::promise<void> last;
  for (int i = 0; i < 64; ++i)
    b->scale(0, xdev::ops::ScaleArgs<double, void*>{x, n, 2.0}, xdev::Completion([&, i](std::exception_ptr ep) {
               std::lock_guard lk(m);
               order.push_back(ep ? -1 : i);
               if (i == 63) last.set_value();
             }));
  last.get_future().get();
  for (int i = 0; i < 64; ++i) ASSERT_EQ(order.at(static_cast<std::size_t>(i)), i);
  b->sum(0, xdev::ops::SumArgs<double, void*>{x, n, &total}, completion(2));
  done[2].get_future().get();
  EXPECT_EQ(total, 1500.0 * 18446744073709551616.0);  // 2^64
  b->deallocate(0, x, n * sizeof(double));
}

}  // namespace
