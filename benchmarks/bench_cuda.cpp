// The CUDA plugin (plugins/cuda) on the first GPU, against raw CUDA and cuBLAS called directly in
// the same run, on the same device:
//
// submit/latency: one `ops::scale` of 1024 floats through xdev (`.get()` on its future: submission,
//   the plugin boundary, the completion thread, the future) against the same kernel launched raw
//   (the plugin's own launcher, cuda_kernels.h) on a stream of the benchmark's, then
//   cudaStreamSynchronize. Goal: xdev at most 1.2x per operation. A third, diagnostic side
//   ("handoff") is the raw launch with its completion seen by another thread and passed on through
//   a std::future, the hand-off every asynchronous completion has. Two more diagnostic sides hand
//   each raw launch to a completion thread while the launches go on: "raw_polled" polls each
//   launch's event (as the plugin's completion thread does), "raw_written" spins on a page-locked
//   counter the stream writes after each launch (cuStreamWriteValue64: no driver call while it
//   waits). On an H100 they measured what the plugin's completion costs the submitting thread
//   (raw_polled vs raw_events) and whether a counter would cost less (it did not: the write
//   costs more than the event record saves); docs/cuda.md has the numbers. Three more split xdev's
//   cost by layer: "xdev_callback" (the last op completes into a callback the caller spins on,
//   not a future), "typed" (xdev's typed Device<xdev_cuda::Cuda>: the core without the plugin
//   boundary and AnyDevice) and "plugin_class" (the plugin's backend class called directly).
// submit/stream64: 64 such ops back to back on the default stream, waiting for the last, against 64
//   raw launches and one synchronize. Goal: at most 1.1x per operation. submit/stream1024: the
//   same with 1024 ops, where the in-flight bound (MaxInflight, XDEV_MAX_INFLIGHT) takes part.
// transfer/{to_device,to_host}/pinned/<bytes>: `copy_to_device` / `copy_to_host` between a
//   page-locked host block (cudaMallocHost) and an xdev array, against cudaMemcpyAsync between the
//   same kinds of memory + synchronize. Goal: xdev's bandwidth at least 0.95x at 64 MiB.
// transfer/{to_device,to_host}/pageable/<bytes>: the same from and to ordinary (pageable) memory,
//   through the plugin's pinned staging, against cudaMemcpyAsync from pageable memory (no goal).
// gemm/{f32,bf16}/<n>: `ops::gemm` of n x n x n floats, f32 and under autocast to bf16 (f32 data,
//   bf16 inputs, f32 accumulation), against cublasGemmEx called directly on the same f32 data
//   (CUBLAS_COMPUTE_32F, and CUBLAS_COMPUTE_32F_FAST_16BF for bf16: what a user of cuBLAS calls for
//   f32 data computed in bf16). Goal: at least 0.95x cuBLAS's speed at 4096. TFLOP/s are reported
//   as counters.
// all_reduce/mixed/<bytes>: `spmd::all_reduce(sum)` of one f32 array per device over a mesh of the
//   GPU and two host devices, against a memcpy of the same bytes; busbw is reported (no goal).
//
// The plugin is loaded from XDEV_PLUGIN_PATH when set, else from the build's plugins/ directory
// (XDEV_BENCH_PLUGIN_DIR); without a GPU
// every benchmark reports an error saying why.
#include "support/ratio.hpp"

#include "cuda_backend.hpp"
#include "cuda_kernels.h"

#include <xdev/any/any_device.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/core/detail/spin_mutex.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/autocast.hpp>
#include <xdev/ops/ops.hpp>
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/mesh.hpp>

#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <boost/asio/detached.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using xdev::AnyArray;
using xdev::AnyDevice;
namespace ops = xdev::ops;
namespace spmd = xdev::spmd;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

// The plugin's devices and the host backend's, from one registry over the build's plugins.
struct Devices {
  std::unique_ptr<xdev::Registry> registry;
  std::vector<AnyDevice> cuda;
  std::vector<AnyDevice> host;
  std::string error;
};

Devices& devices() {
  static Devices d = [] {
    Devices r;
    try {
      // XDEV_PLUGIN_PATH when set (a build carried to a GPU machine), else the build's plugins/.
      const char* env = std::getenv("XDEV_PLUGIN_PATH");
      r.registry = std::make_unique<xdev::Registry>(env != nullptr && *env != '\0'
                                                        ? xdev::plugin::SearchPath::parse(env)
                                                        : xdev::plugin::SearchPath({XDEV_BENCH_PLUGIN_DIR}));
      r.cuda = r.registry->devices("CUDA");
      r.host = r.registry->devices("HOST");
      if (r.cuda.empty()) r.error = "the CUDA plugin has no devices";
    } catch (const std::exception& e) {
      r.error = std::string("CUDA unavailable: ") + e.what();
    }
    return r;
  }();
  return d;
}

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorName(e));
}

void check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(call) + " failed: " + std::to_string(s));
}

// A thread that waits for events (polling) and fulfils a promise per event: the completion
// hand-off of an asynchronous runtime, without xdev.
class Handoff {
 public:
  Handoff() : thread_([this] { serve(); }) {}
  Handoff(const Handoff&) = delete;
  Handoff& operator=(const Handoff&) = delete;
  ~Handoff() {
    {
      std::lock_guard lk(m_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  // A future that becomes ready when `s` has run everything enqueued so far.
  std::future<void> wait_after(cudaStream_t s) {
    cudaEvent_t ev = nullptr;
    {
      std::lock_guard lk(m_);
      if (!events_.empty()) {
        ev = events_.back();
        events_.pop_back();
      }
    }
    if (ev == nullptr) check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    check(cudaEventRecord(ev, s), "cudaEventRecord");
    std::promise<void> p;
    auto f = p.get_future();
    {
      std::lock_guard lk(m_);
      queue_.push_back({ev, std::move(p)});
    }
    cv_.notify_one();
    return f;
  }

 private:
  void serve() {
    cudaSetDevice(0);
    std::unique_lock lk(m_);
    while (true) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto item = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      while (cudaEventQuery(item.first) == cudaErrorNotReady) {
      }
      item.second.set_value();
      lk.lock();
      events_.push_back(item.first);
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::pair<cudaEvent_t, std::promise<void>>> queue_;
  std::vector<cudaEvent_t> events_;
  bool stop_ = false;
  std::thread thread_;
};

// A thread that reports each operation's completion in order, as the plugin's completion thread
// does, by one of two means: polling the operation's event with cudaEventQuery (pausing about a
// microsecond between queries), or spinning on a host counter the stream writes after the
// operation (cuStreamWriteValue64 into page-locked memory: no driver call while it waits). The
// submitting thread publishes operations; `wait_all` waits until the thread has seen all of them.
// Diagnostic: what the completion thread's polling costs the thread that submits.
class Poller {
 public:
  enum class Mode { events, memory };
  explicit Poller(Mode mode) : mode_(mode) {
    for (auto& e : events_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    check(cudaHostAlloc(reinterpret_cast<void**>(&counter_), sizeof(std::uint64_t), cudaHostAllocMapped),
          "cudaHostAlloc");
    *counter_ = 0;
    check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_counter_), counter_, 0),
          "cudaHostGetDevicePointer");
    cudaDriverEntryPointQueryResult found{};
    check(cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", reinterpret_cast<void**>(&write_value_), 12000,
                                           cudaEnableDefault, &found),
          "cudaGetDriverEntryPointByVersion");
    if (found != cudaDriverEntryPointSuccess) throw std::runtime_error("cuStreamWriteValue64 is not available");
    thread_ = std::thread([this] { serve(); });
  }
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;
  ~Poller() {
    stop_.store(true);
    thread_.join();
    for (auto e : events_) cudaEventDestroy(e);
    cudaFreeHost(counter_);
  }

  // After an operation was enqueued on `s`: marks its completion and hands it to the thread.
  void publish(cudaStream_t s) {
    const std::uint64_t n = published_.load(std::memory_order_relaxed) + 1;
    if (mode_ == Mode::events)
      check(cudaEventRecord(events_[n % events_.size()], s), "cudaEventRecord");
    else if (write_value_(s, device_counter_, n, 0) != CUDA_SUCCESS)
      throw std::runtime_error("cuStreamWriteValue64 failed");
    published_.store(n, std::memory_order_release);
  }
  void wait_all() const {
    const std::uint64_t n = published_.load(std::memory_order_relaxed);
    while (completed_.load(std::memory_order_acquire) < n) xdev::detail::cpu_relax();
  }

 private:
  void serve() {
    cudaSetDevice(0);
    std::uint64_t next = 1;
    while (!stop_.load(std::memory_order_relaxed)) {
      if (published_.load(std::memory_order_acquire) < next) {
        xdev::detail::cpu_relax();
        continue;
      }
      if (mode_ == Mode::events) {
        while (cudaEventQuery(events_[next % events_.size()]) == cudaErrorNotReady) {
          const auto t = std::chrono::steady_clock::now();
          while (std::chrono::steady_clock::now() - t < std::chrono::microseconds(1)) xdev::detail::cpu_relax();
        }
      } else {
        while (std::atomic_ref<std::uint64_t>(*counter_).load(std::memory_order_acquire) < next)
          xdev::detail::cpu_relax();
      }
      completed_.store(next++, std::memory_order_release);
    }
  }

  using WriteValue = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  Mode mode_;
  std::array<cudaEvent_t, 4096> events_{};
  std::uint64_t* counter_ = nullptr;
  CUdeviceptr device_counter_ = 0;
  WriteValue write_value_ = nullptr;
  std::atomic<std::uint64_t> published_{0};
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Raw CUDA on the device xdev calls CUDA:0: a stream and a cuBLAS handle of the benchmark's own.
struct Raw {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  Handoff handoff;
  Poller polled{Poller::Mode::events};
  Poller written{Poller::Mode::memory};
  Raw() {
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cublasCreate(&blas), "cublasCreate");
    check(cublasSetStream(blas, stream), "cublasSetStream");
  }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;
  ~Raw() {
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
  }
};

Raw& raw() {
  static Raw r;
  return r;
}

// The plugin's backend class, used without xdev's core (`direct`) and as a typed xdev device
// without the plugin boundary and AnyDevice (`typed`): diagnostic layers of the submission cost.
struct Layers {
  xdev_cuda::Cuda direct;
  xdev::Runtime<xdev_cuda::Cuda> typed;
};

Layers& layers() {
  static Layers l;
  return l;
}

bool ready(benchmark::State& st) {
  if (!devices().error.empty()) {
    st.SkipWithError(devices().error.c_str());
    return false;
  }
  return true;
}

// Device memory of the benchmark's own: from cudaMalloc, or from the device's stream-ordered pool
// (cudaMallocAsync, where the plugin allocates) for the diagnostic sides.
struct DeviceBlock {
  explicit DeviceBlock(std::size_t bytes, bool pool = false) : pool(pool) {
    if (pool) {
      check(cudaMallocAsync(&p, bytes, nullptr), "cudaMallocAsync");
      check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
    } else {
      check(cudaMalloc(&p, bytes), "cudaMalloc");
    }
  }
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  ~DeviceBlock() {
    if (pool)
      cudaFreeAsync(p, nullptr);
    else
      cudaFree(p);
  }
  void* p = nullptr;
  bool pool;
};

struct PinnedBlock {
  explicit PinnedBlock(std::size_t bytes) { check(cudaMallocHost(&p, bytes), "cudaMallocHost"); }
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;
  ~PinnedBlock() { cudaFreeHost(p); }
  void* p = nullptr;
};

void submit(benchmark::State& st, std::int64_t per_wait) {
  if (!ready(st)) return;
  constexpr std::size_t n = 1024;
  const AnyDevice& dev = devices().cuda.at(0);
  auto x = xdev::empty<float>(dev, {static_cast<std::int64_t>(n)});
  ops::fill(dev, x, 1.0f).get();
  Raw& r = raw();
  DeviceBlock rx(n * sizeof(float));
  check(xdev_cuda::kernels::fill(rx.p, n, 4, 0x3F800000u, r.stream), "fill");
  check(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize");
  auto xdev_side = [&](std::int64_t calls) {
    for (std::int64_t c = 0; c < calls; ++c) {
      for (std::int64_t i = 0; i + 1 < per_wait; ++i) ops::scale(dev, x, 1.0f, boost::asio::detached);
      ops::scale(dev, x, 1.0f).get();
    }
  };
  // Diagnostic side: the same ops, the last one's completion a callback that sets a flag the
  // submitting thread spins on: xdev's submission and completion without the future's wait.
  auto callback_side = [&](std::int64_t calls) {
    for (std::int64_t c = 0; c < calls; ++c) {
      for (std::int64_t i = 0; i + 1 < per_wait; ++i) ops::scale(dev, x, 1.0f, boost::asio::detached);
      std::atomic<bool> done{false};
      ops::scale(dev, x, 1.0f, [&done](std::exception_ptr) { done.store(true, std::memory_order_release); });
      while (!done.load(std::memory_order_acquire)) xdev::detail::cpu_relax();
    }
  };
  // Diagnostic sides, the same ops through fewer layers: the plugin's backend class called
  // directly ("plugin_class"), and xdev's typed device over it, no plugin boundary, no AnyDevice
  // ("typed").
  Layers& l = layers();
  void* dx = l.direct.allocate(0, n * sizeof(float));
  auto direct_side = [&](std::int64_t calls) {
    for (std::int64_t c = 0; c < calls; ++c) {
      std::atomic<bool> done{false};
      for (std::int64_t i = 0; i < per_wait; ++i)
        l.direct.scale(0, xdev::ops::ScaleArgs<float, void*>{dx, n, 1.0f},
                       xdev::Completion([&done, last = i + 1 == per_wait](std::exception_ptr) {
                         if (last) done.store(true, std::memory_order_release);
                       }));
      while (!done.load(std::memory_order_acquire)) xdev::detail::cpu_relax();
    }
  };
  const auto tdev = l.typed.device(0);
  auto tx = xdev::empty<float>(tdev, {static_cast<std::int64_t>(n)});
  ops::fill(tdev, tx, 1.0f).get();
  auto typed_side = [&](std::int64_t calls) {
    for (std::int64_t c = 0; c < calls; ++c) {
      for (std::int64_t i = 0; i + 1 < per_wait; ++i) ops::scale(tdev, tx, 1.0f, boost::asio::detached);
      ops::scale(tdev, tx, 1.0f).get();
    }
  };
  auto raw_side = [&](std::int64_t calls) {
    for (std::int64_t c = 0; c < calls; ++c) {
      for (std::int64_t i = 0; i < per_wait; ++i)
        check(xdev_cuda::kernels::scale(XDEV_DTYPE_F32, rx.p, n, 1.0, r.stream), "scale");
      check(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize");
    }
  };
  // Diagnostic side: the raw launches, with the completion seen by another thread (polling an
  // event, as the plugin's completion thread does) and handed to the waiting one through a
  // std::future: the part of xdev's cost that any asynchronous completion has.
  auto handoff_side = [&](std::int64_t calls) {
    for (std::int64_t c = 0; c < calls; ++c) {
      for (std::int64_t i = 0; i < per_wait; ++i)
        check(xdev_cuda::kernels::scale(XDEV_DTYPE_F32, rx.p, n, 1.0, r.stream), "scale");
      r.handoff.wait_after(r.stream).get();
    }
  };
  // Diagnostic side: each raw launch followed by an event record, as the plugin records one per
  // operation to report its completion.
  std::vector<cudaEvent_t> events(static_cast<std::size_t>(per_wait));
  for (auto& e : events) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  auto events_side = [&](std::int64_t calls) {
    for (std::int64_t c = 0; c < calls; ++c) {
      for (std::int64_t i = 0; i < per_wait; ++i) {
        check(xdev_cuda::kernels::scale(XDEV_DTYPE_F32, rx.p, n, 1.0, r.stream), "scale");
        check(cudaEventRecord(events[static_cast<std::size_t>(i)], r.stream), "cudaEventRecord");
      }
      check(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize");
    }
  };
  // Diagnostic sides: each raw launch handed to a completion thread, which polls its event
  // ("raw_polled") or a host counter the stream writes ("raw_written"), while the launches go on.
  auto poller_side = [&](Poller& p) {
    return [&](std::int64_t calls) {
      for (std::int64_t c = 0; c < calls; ++c) {
        for (std::int64_t i = 0; i < per_wait; ++i) {
          check(xdev_cuda::kernels::scale(XDEV_DTYPE_F32, rx.p, n, 1.0, r.stream), "scale");
          p.publish(r.stream);
        }
        p.wait_all();
      }
    };
  };
  xdev_bench::run_interleaved(st,
                              {{"xdev", xdev_side},
                               {"raw", raw_side},
                               {"handoff", handoff_side},
                               {"raw_events", events_side},
                               {"xdev_callback", callback_side},
                               {"typed", typed_side},
                               {"plugin_class", direct_side},
                               {"raw_polled", poller_side(r.polled)},
                               {"raw_written", poller_side(r.written)}},
                              per_wait == 1 ? 200 : 10, static_cast<double>(per_wait));
  for (auto e : events) cudaEventDestroy(e);
  l.direct.deallocate(0, dx, n * sizeof(float));
}

void submit_latency(benchmark::State& st) {
  submit(st, 1);
}
void submit_stream64(benchmark::State& st) {
  submit(st, 64);
}
void submit_stream1024(benchmark::State& st) {
  submit(st, 1024);
}

void transfer(benchmark::State& st, bool to_device, bool pinned) {
  if (!ready(st)) return;
  const auto bytes = static_cast<std::size_t>(st.range(0));
  const AnyDevice& dev = devices().cuda.at(0);
  auto arr = xdev::empty<std::uint8_t>(dev, {static_cast<std::int64_t>(bytes)});
  std::vector<std::uint8_t> pageable;
  std::unique_ptr<PinnedBlock> locked;
  std::uint8_t* host = nullptr;
  if (pinned) {
    locked = std::make_unique<PinnedBlock>(bytes);
    host = static_cast<std::uint8_t*>(locked->p);
  } else {
    pageable.assign(bytes, 1);
    host = pageable.data();
  }
  std::memset(host, 1, bytes);
  Raw& r = raw();
  DeviceBlock block(bytes), pool_block(bytes, true);
  auto xdev_side = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) {
      if (to_device)
        dev.copy_to_device(std::span<const std::uint8_t>(host, bytes), arr).get();
      else
        dev.copy_to_host(arr, std::span<std::uint8_t>(host, bytes)).get();
    }
  };
  auto raw_on = [&](void* device_memory) {
    return [&, device_memory](std::int64_t calls) {
      for (std::int64_t i = 0; i < calls; ++i) {
        if (to_device)
          check(cudaMemcpyAsync(device_memory, host, bytes, cudaMemcpyHostToDevice, r.stream), "cudaMemcpyAsync");
        else
          check(cudaMemcpyAsync(host, device_memory, bytes, cudaMemcpyDeviceToHost, r.stream), "cudaMemcpyAsync");
        check(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize");
      }
    };
  };
  const std::int64_t chunk = bytes >= 16 * MiB ? 2 : 20;
  xdev_bench::run_interleaved(st, {{"xdev", xdev_side}, {"cuda", raw_on(block.p)}, {"cuda_pool", raw_on(pool_block.p)}},
                              chunk, 1, static_cast<double>(bytes));
}

void to_device_pinned(benchmark::State& st) {
  transfer(st, true, true);
}
void to_host_pinned(benchmark::State& st) {
  transfer(st, false, true);
}
void to_device_pageable(benchmark::State& st) {
  transfer(st, true, false);
}
void to_host_pageable(benchmark::State& st) {
  transfer(st, false, false);
}

void gemm(benchmark::State& st, xdev::DType compute) {
  if (!ready(st)) return;
  const auto n = static_cast<std::int64_t>(st.range(0));
  const auto count = static_cast<std::size_t>(n * n);
  const AnyDevice& dev = devices().cuda.at(0);
  std::vector<float> init(count);
  for (std::size_t i = 0; i < count; ++i) init[i] = static_cast<float>(i % 17) * 0.125f - 1.0f;
  auto a = xdev::empty<float>(dev, {n, n}), b = xdev::empty<float>(dev, {n, n}), c = xdev::empty<float>(dev, {n, n});
  dev.copy_to_device(std::span<const float>(init), a).get();
  dev.copy_to_device(std::span<const float>(init), b).get();
  Raw& r = raw();
  DeviceBlock ra(count * 4), rb(count * 4), rc(count * 4);
  DeviceBlock pa(count * 4, true), pb(count * 4, true), pc(count * 4, true);
  for (void* p : {ra.p, rb.p, pa.p, pb.p})
    check(cudaMemcpy(p, init.data(), count * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  const cublasComputeType_t type = compute == xdev::DType::bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
  const float one = 1.0f, zero = 0.0f;
  const int ni = static_cast<int>(n);
  auto xdev_side = [&](std::int64_t calls) {
    // Under autocast (the CUDA policy's key, bf16) when the bf16 figure runs.
    xdev::AutocastScope scope(xdev::AutocastKey::cuda, compute == xdev::DType::bf16);
    for (std::int64_t i = 0; i < calls; ++i) ops::gemm(dev, a, b, c).get();
  };
  auto raw_on = [&](const DeviceBlock& A, const DeviceBlock& B, const DeviceBlock& C) {
    return [&](std::int64_t calls) {
      for (std::int64_t i = 0; i < calls; ++i) {
        check(cublasGemmEx(r.blas, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, B.p, CUDA_R_32F, ni, A.p, CUDA_R_32F, ni,
                           &zero, C.p, CUDA_R_32F, ni, type, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
        check(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize");
      }
    };
  };
  auto raw_side = raw_on(ra, rb, rc);
  auto pool_side = raw_on(pa, pb, pc);
  xdev_side(1);  // warm-up: cuBLAS picks and loads its kernels
  raw_side(1);
  pool_side(1);
  xdev_bench::run_interleaved(st, {{"xdev", xdev_side}, {"cublas", raw_side}, {"cublas_pool", pool_side}}, 2);
  const double flop = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  st.counters["xdev_tflops"] = flop / st.counters["xdev_ns"] / 1e3;
  st.counters["cublas_tflops"] = flop / st.counters["cublas_ns"] / 1e3;
  st.counters["cublas_pool_tflops"] = flop / st.counters["cublas_pool_ns"] / 1e3;
}

void gemm_f32(benchmark::State& st) {
  gemm(st, xdev::DType::f32);
}
void gemm_bf16(benchmark::State& st) {
  gemm(st, xdev::DType::bf16);
}

void all_reduce_mixed(benchmark::State& st) {
  if (!ready(st)) return;
  const auto bytes = static_cast<std::size_t>(st.range(0));
  const std::size_t count = bytes / sizeof(float);
  std::vector<AnyDevice> members{devices().cuda.at(0)};
  for (const auto& h : devices().host) members.push_back(h);
  spmd::Mesh mesh(members, "data");
  std::vector<AnyArray<float>> arrays;
  std::vector<float> ones(count, 1.0f);
  for (const auto& d : mesh.devices()) {
    arrays.push_back(xdev::empty<float>(d, {static_cast<std::int64_t>(count)}));
    d.copy_to_device(std::span<const float>(ones), arrays.back()).get();
  }
  std::vector<float> src(count, 1.0f), dst(count);
  auto xdev_side = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i)
      spmd::all_reduce(mesh, "data", std::span<AnyArray<float>>(arrays), spmd::ReduceOp::sum).get();
  };
  auto memcpy_side = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) {
      std::memcpy(dst.data(), src.data(), bytes);
      benchmark::DoNotOptimize(dst.data());
    }
  };
  xdev_bench::run_interleaved(st, {{"xdev", xdev_side}, {"memcpy", memcpy_side}}, 2, 1, static_cast<double>(bytes));
  const double k = static_cast<double>(mesh.size());
  st.counters["busbw_GBps"] = static_cast<double>(bytes) * 2.0 * (k - 1.0) / k / st.counters["xdev_ns"];
  st.counters["devices"] = k;
}

[[maybe_unused]] const int registered = [] {
  using xdev_bench::Goal;
  using xdev_bench::Kind;
  benchmark::RegisterBenchmark("submit/latency", submit_latency)->UseManualTime();
  xdev_bench::add_ratio({.label = "submit/latency xdev/raw",
                         .benchmark = "submit/latency",
                         .subject = "xdev",
                         .baseline = "raw",
                         .goal = Goal::at_most,
                         .bound = 1.2,
                         .unit = "op"});
  xdev_bench::add_ratio({.label = "submit/latency xdev/handoff",
                         .benchmark = "submit/latency",
                         .subject = "xdev",
                         .baseline = "handoff",
                         .unit = "op"});
  benchmark::RegisterBenchmark("submit/stream64", submit_stream64)->UseManualTime();
  xdev_bench::add_ratio({.label = "submit/stream64 xdev/raw",
                         .benchmark = "submit/stream64",
                         .subject = "xdev",
                         .baseline = "raw",
                         .goal = Goal::at_most,
                         .bound = 1.1,
                         .unit = "op"});
  xdev_bench::add_ratio({.label = "submit/stream64 xdev/raw_events",
                         .benchmark = "submit/stream64",
                         .subject = "xdev",
                         .baseline = "raw_events",
                         .unit = "op"});
  for (const char* name : {"submit/latency", "submit/stream64"})
    for (const char* side : {"raw_polled", "raw_written", "xdev_callback", "typed", "plugin_class"})
      xdev_bench::add_ratio({.label = std::string(name) + " xdev/" + side,
                             .benchmark = name,
                             .subject = "xdev",
                             .baseline = side,
                             .unit = "op"});
  // Long enough for the in-flight bound to matter: run with XDEV_MAX_INFLIGHT=16, 64, 256, 1024 to
  // see what the CUDA plugin's MaxInflight<256> was chosen from (docs/cuda.md).
  benchmark::RegisterBenchmark("submit/stream1024", submit_stream1024)->UseManualTime();
  xdev_bench::add_ratio({.label = "submit/stream1024 xdev/raw",
                         .benchmark = "submit/stream1024",
                         .subject = "xdev",
                         .baseline = "raw",
                         .unit = "op"});
  for (bool pinned : {true, false})
    for (bool dir : {true, false}) {
      const std::string base =
          std::string(dir ? "transfer/to_device/" : "transfer/to_host/") + (pinned ? "pinned" : "pageable");
      for (std::size_t bytes : {1 * MiB, 64 * MiB}) {
        const std::string name = base + "/" + std::to_string(bytes);
        auto* fn = pinned ? (dir ? to_device_pinned : to_host_pinned) : (dir ? to_device_pageable : to_host_pageable);
        benchmark::RegisterBenchmark(base.c_str(), fn)->Arg(static_cast<std::int64_t>(bytes))->UseManualTime();
        const bool goal = pinned && bytes == 64 * MiB;
        xdev_bench::add_ratio({.label = name + " xdev/cuda",
                               .benchmark = name,
                               .subject = "xdev",
                               .baseline = "cuda",
                               .kind = Kind::speed,
                               .goal = goal ? Goal::at_least : Goal::none,
                               .bound = 0.95,
                               .unit = "copy"});
      }
    }
  for (const char* type : {"f32", "bf16"}) {
    const std::string base = std::string("gemm/") + type;
    for (std::int64_t n : {1024, 4096}) {
      const std::string name = base + "/" + std::to_string(n);
      benchmark::RegisterBenchmark(base.c_str(), std::string(type) == "f32" ? gemm_f32 : gemm_bf16)
          ->Arg(n)
          ->UseManualTime();
      xdev_bench::add_ratio({.label = name + " xdev/cublas",
                             .benchmark = name,
                             .subject = "xdev",
                             .baseline = "cublas",
                             .kind = Kind::speed,
                             .goal = n == 4096 ? Goal::at_least : Goal::none,
                             .bound = 0.95,
                             .unit = "gemm"});
    }
  }
  for (std::size_t bytes : {1 * MiB, 64 * MiB}) {
    benchmark::RegisterBenchmark("all_reduce/mixed", all_reduce_mixed)
        ->Arg(static_cast<std::int64_t>(bytes))
        ->UseManualTime();
    xdev_bench::add_ratio({.label = "all_reduce/mixed/" + std::to_string(bytes) + " xdev/memcpy",
                           .benchmark = "all_reduce/mixed/" + std::to_string(bytes),
                           .subject = "xdev",
                           .baseline = "memcpy",
                           .unit = "all_reduce"});
  }
  return 0;
}();

}  // namespace

XDEV_BENCHMARK_MAIN("--benchmark_repetitions=3", "--benchmark_min_time=0.2")
