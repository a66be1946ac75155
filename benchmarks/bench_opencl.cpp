// The OPENCL plugin (plugins/opencl) on the first OpenCL device, against baselines measured in the
// same run:
//
// submit/latency: one `ops::scale` of 1024 floats through xdev (`.get()` on its future: submission,
//   the plugin boundary, the event callback, the future) against the same kernel (`scale_f32`, built
//   from the same source on the same device) enqueued with raw OpenCL calls: three clSetKernelArg,
//   clEnqueueNDRangeKernel, clWaitForEvents. Goal: xdev at most 1.2x per operation.
// submit/stream64: 64 such ops back to back on the default stream, waiting for the last, against 64
//   raw enqueues and one clFinish. The plugin has native queues (ABI 1.5), so xdev hands each op
//   to the stream's command queue as soon as it holds an in-flight slot, as raw OpenCL does. Goal:
//   xdev at most 1.2x per operation. A third side, `events`, enqueues the same 64 kernels raw, each
//   with what the plugin adds inside OpenCL to learn of its completion (a profiling queue, an event
//   and a callback that reads the device times, a flush): xdev/events is what xdev's own path costs
//   beyond the runtime's (no goal). Each side's CPU time on the submitting thread per op is reported
//   too (`<side>_cpu_ns`, ratios `thread CPU xdev/raw` and `xdev/events`, no goal): with the
//   runtime's workers starved for work, that thread's time bounds the stream's rate.
// gemm/f32/1024: `ops::gemm` of 1024x1024x1024 floats on OPENCL against the same call on the host
//   backend; both GFLOP/s are reported as counters (opencl_gflops, host_gflops).
// transfer/{to_device,to_host}/<bytes>: `copy_to_device` / `copy_to_host` of an OPENCL array
//   against `std::memcpy` between two host blocks of the same size.
// transfer/columns_to_host/<rows>: a block of 64 columns of a [rows, 256] float OPENCL array to the
//   host (one `clEnqueueReadBufferRect` through the plugin's strided entry, ABI 1.11; before it,
//   one read per row) against a contiguous array of the same bytes. Goal at 4096 rows: at most
//   2x (row by row it was 68x), so that the rect path cannot regress unnoticed.
// ops/scale_window/<floats>/<at>: `ops::scale` on the window [at, at + floats) of a float OPENCL
//   array against the same op on a whole array of the same size. At element 256 (byte 1024, a
//   multiple of PoCL's base alignment) the window is a sub-buffer through the plugin's op windows
//   (ABI 1.12); at element 1 (byte 4) a sub-buffer from byte 0 and the offset as a kernel argument.
//   Goal: at most 1.5x for both (through the CPU fallback, which staged the window to the host and
//   back: 4.1x and 6.0x).
//
// The plugin is loaded from the build's plugins/ directory (XDEV_BENCH_PLUGIN_DIR); without an
// OpenCL device every benchmark reports an error saying why.
#include "support/ratio.hpp"

#include "kernels.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/ops/ops.hpp>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <benchmark/benchmark.h>

#include <boost/asio/detached.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using xdev::AnyArray;
using xdev::AnyDevice;
namespace ops = xdev::ops;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

// The plugin's devices and the host backend's, from one registry over the build's plugins.
struct Devices {
  std::unique_ptr<xdev::Registry> registry;
  std::vector<AnyDevice> opencl;
  AnyDevice host;
  std::string error;
};

Devices& devices() {
  static Devices d = [] {
    Devices r;
    try {
      r.registry = std::make_unique<xdev::Registry>(xdev::plugin::SearchPath({XDEV_BENCH_PLUGIN_DIR}));
      r.opencl = r.registry->devices("OPENCL");
      r.host = r.registry->devices("HOST").at(0);
      if (r.opencl.empty()) r.error = "the OPENCL plugin has no devices";
    } catch (const std::exception& e) {
      r.error = std::string("OPENCL unavailable: ") + e.what();
    }
    return r;
  }();
  return d;
}

void check(cl_int err, const char* call) {
  if (err != CL_SUCCESS) throw std::runtime_error(std::string(call) + " failed: " + std::to_string(err));
}

// The same kernels built with raw OpenCL on the first device of the first platform (the device
// the plugin calls OPENCL:0 when no filter is set).
struct Raw {
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  cl_command_queue profiled = nullptr;  // with CL_QUEUE_PROFILING_ENABLE, as the plugin's queues
  cl_program program = nullptr;
  cl_kernel scale = nullptr;

  Raw() {
    cl_platform_id platform = nullptr;
    check(clGetPlatformIDs(1, &platform, nullptr), "clGetPlatformIDs");
    cl_device_id device = nullptr;
    check(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, nullptr), "clGetDeviceIDs");
    cl_int err = CL_SUCCESS;
    context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
    check(err, "clCreateContext");
    queue = clCreateCommandQueue(context, device, 0, &err);
    check(err, "clCreateCommandQueue");
    profiled = clCreateCommandQueue(context, device, CL_QUEUE_PROFILING_ENABLE, &err);
    check(err, "clCreateCommandQueue");
    const char* source = xdev_opencl::kernels::program_source();
    program = clCreateProgramWithSource(context, 1, &source, nullptr, &err);
    check(err, "clCreateProgramWithSource");
    check(clBuildProgram(program, 1, &device, "-cl-std=CL1.2 -DXDEV_FP64=1", nullptr, nullptr), "clBuildProgram");
    scale = clCreateKernel(program, "scale_f32", &err);
    check(err, "clCreateKernel");
    // The byte offset that comes with each buffer argument (kernels.hpp, XDEV_BUF): always 0 here,
    // so set once, as a user of this kernel would.
    const cl_ulong at = 0;
    check(clSetKernelArg(scale, 1, sizeof at, &at), "clSetKernelArg");
  }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;
  ~Raw() {
    clReleaseKernel(scale);
    clReleaseProgram(program);
    clReleaseCommandQueue(profiled);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
  }

  // One scale of `n` floats on the profiling queue, told of its completion as the plugin is: an event
  // per command whose callback reads the device's start and end times and releases it, and a flush.
  void run_scale_notified(cl_mem x, cl_ulong n, float alpha) {
    check(clSetKernelArg(scale, 0, sizeof x, &x), "clSetKernelArg");
    check(clSetKernelArg(scale, 2, sizeof n, &n), "clSetKernelArg");
    check(clSetKernelArg(scale, 3, sizeof alpha, &alpha), "clSetKernelArg");
    const std::size_t global = n;
    cl_event ev = nullptr;
    check(clEnqueueNDRangeKernel(profiled, scale, 1, nullptr, &global, nullptr, 0, nullptr, &ev),
          "clEnqueueNDRangeKernel");
    const auto told = [](cl_event e, cl_int, void* user) {
      cl_ulong start = 0, end = 0;
      clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
      clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
      static_cast<std::atomic<cl_ulong>*>(user)->fetch_add(end - start, std::memory_order_relaxed);
      clReleaseEvent(e);
    };
    check(clSetEventCallback(ev, CL_COMPLETE, told, &device_ns), "clSetEventCallback");
    check(clFlush(profiled), "clFlush");
  }
  std::atomic<cl_ulong> device_ns{0};  // what the notified commands' callbacks read

  // One scale of `n` floats: arguments, enqueue; with `wait`, flush and wait for its event.
  void run_scale(cl_mem x, cl_ulong n, float alpha, bool wait) {
    check(clSetKernelArg(scale, 0, sizeof x, &x), "clSetKernelArg");
    check(clSetKernelArg(scale, 2, sizeof n, &n), "clSetKernelArg");
    check(clSetKernelArg(scale, 3, sizeof alpha, &alpha), "clSetKernelArg");
    const std::size_t global = n;
    cl_event ev = nullptr;
    check(clEnqueueNDRangeKernel(queue, scale, 1, nullptr, &global, nullptr, 0, nullptr, wait ? &ev : nullptr),
          "clEnqueueNDRangeKernel");
    if (wait) {
      check(clWaitForEvents(1, &ev), "clWaitForEvents");
      clReleaseEvent(ev);
    }
  }
};

Raw* raw() {
  static std::unique_ptr<Raw> r = [] {
    try {
      return std::make_unique<Raw>();
    } catch (const std::exception&) {
      return std::unique_ptr<Raw>();
    }
  }();
  return r.get();
}

bool ready(benchmark::State& st) {
  if (!devices().error.empty()) {
    st.SkipWithError(devices().error.c_str());
    return false;
  }
  return true;
}

void submit(benchmark::State& st, std::int64_t per_wait) {
  if (!ready(st)) return;
  Raw* r = raw();
  if (r == nullptr) {
    st.SkipWithError("raw OpenCL setup failed");
    return;
  }
  constexpr std::size_t n = 1024;
  const AnyDevice& dev = devices().opencl.at(0);
  auto x = xdev::empty<float>(dev, {static_cast<std::int64_t>(n)});
  ops::fill(dev, x, 1.0f).get();
  // The same values as xdev's side: left uninitialized, the raw buffer held whatever the driver's
  // allocation did (on PoCL, often denormals and NaNs, which made the raw kernel twice as slow and
  // the ratio meaningless).
  std::vector<float> ones(n, 1.0f);
  cl_int err = CL_SUCCESS;
  cl_mem rx =
      clCreateBuffer(r->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(float), ones.data(), &err);
  check(err, "clCreateBuffer");
  auto xdev_side = [&](std::int64_t calls) {
    for (std::int64_t c = 0; c < calls; ++c) {
      for (std::int64_t i = 0; i + 1 < per_wait; ++i) ops::scale(dev, x, 1.0f, boost::asio::detached);
      ops::scale(dev, x, 1.0f).get();
    }
  };
  auto raw_side = [&](std::int64_t calls) {
    for (std::int64_t c = 0; c < calls; ++c) {
      if (per_wait == 1) {
        r->run_scale(rx, n, 1.0f, true);
      } else {
        for (std::int64_t i = 0; i < per_wait; ++i) r->run_scale(rx, n, 1.0f, false);
        check(clFinish(r->queue), "clFinish");
      }
    }
  };
  // A stream's rate is bound by the thread that submits to it: each side's CPU time per op too.
  const bool stream = per_wait > 1;
  std::vector<xdev_bench::Side> sides{{"xdev", xdev_side, stream}, {"raw", raw_side, stream}};
  if (stream) {
    // What telling the host of every command's completion costs in the runtime itself.
    sides.push_back({"events",
                     [&](std::int64_t calls) {
                       for (std::int64_t c = 0; c < calls; ++c) {
                         for (std::int64_t i = 0; i < per_wait; ++i) r->run_scale_notified(rx, n, 1.0f);
                         check(clFinish(r->profiled), "clFinish");
                       }
                     },
                     true});
  }
  xdev_bench::run_interleaved(st, sides, per_wait == 1 ? 50 : 2, static_cast<double>(per_wait));
  clReleaseMemObject(rx);
}

void submit_latency(benchmark::State& st) {
  submit(st, 1);
}
void submit_stream64(benchmark::State& st) {
  submit(st, 64);
}

void gemm(benchmark::State& st) {
  if (!ready(st)) return;
  const auto n = static_cast<std::int64_t>(st.range(0));
  std::vector<float> init(static_cast<std::size_t>(n * n));
  for (std::size_t i = 0; i < init.size(); ++i) init[i] = static_cast<float>(i % 17) * 0.125f - 1.0f;
  struct Operands {
    AnyArray<float> a, b, c;
  };
  auto make = [&](const AnyDevice& d) {
    Operands o{xdev::empty<float>(d, {n, n}), xdev::empty<float>(d, {n, n}), xdev::empty<float>(d, {n, n})};
    d.copy_to_device(std::span<const float>(init), o.a).get();
    d.copy_to_device(std::span<const float>(init), o.b).get();
    return o;
  };
  const AnyDevice& cl = devices().opencl.at(0);
  const AnyDevice& host = devices().host;
  auto on_cl = make(cl);
  auto on_host = make(host);
  ops::gemm(cl, on_cl.a, on_cl.b, on_cl.c).get();  // warm-up (the runtime's first launch compiles)
  auto cl_side = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) ops::gemm(cl, on_cl.a, on_cl.b, on_cl.c).get();
  };
  auto host_side = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) ops::gemm(host, on_host.a, on_host.b, on_host.c).get();
  };
  xdev_bench::run_interleaved(st, {{"opencl", cl_side}, {"host", host_side}}, 1);
  const double flop = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  st.counters["opencl_gflops"] = flop / st.counters["opencl_ns"];
  st.counters["host_gflops"] = flop / st.counters["host_ns"];
}

void transfer(benchmark::State& st, bool to_device) {
  if (!ready(st)) return;
  const auto bytes = static_cast<std::size_t>(st.range(0));
  const AnyDevice& dev = devices().opencl.at(0);
  std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes);
  auto arr = xdev::empty<std::uint8_t>(dev, {static_cast<std::int64_t>(bytes)});
  std::vector<std::uint8_t> host(bytes, 2);
  auto xdev_side = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) {
      if (to_device)
        dev.copy_to_device(std::span<const std::uint8_t>(host), arr).get();
      else
        dev.copy_to_host(arr, std::span<std::uint8_t>(host)).get();
    }
  };
  auto memcpy_side = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) {
      std::memcpy(dst.data(), src.data(), bytes);
      benchmark::DoNotOptimize(dst.data());
    }
  };
  const std::int64_t chunk = bytes >= 16 * MiB ? 1 : static_cast<std::int64_t>(std::max<std::size_t>(1, MiB / bytes));
  xdev_bench::run_interleaved(st, {{"xdev", xdev_side}, {"memcpy", memcpy_side}}, chunk, 1, static_cast<double>(bytes));
}

void to_device(benchmark::State& st) {
  transfer(st, true);
}
void to_host(benchmark::State& st) {
  transfer(st, false);
}

void columns_to_host(benchmark::State& st) {
  if (!ready(st)) return;
  const std::int64_t rows = st.range(0);
  constexpr std::int64_t cols = 256, block = 64;
  const AnyDevice& dev = devices().opencl.at(0);
  auto wide = xdev::empty<float>(dev, {rows, cols});
  auto dense = xdev::empty<float>(dev, {rows, block});
  std::vector<float> init(static_cast<std::size_t>(rows * cols), 1.0f);
  dev.copy_to_device(std::span<const float>(init), wide).get();
  dev.copy_to_device(std::span<const float>(init.data(), static_cast<std::size_t>(rows * block)), dense).get();
  std::vector<float> out(static_cast<std::size_t>(rows * block));
  const auto window = xdev::slice(wide, xdev::all, {64, 64 + block});
  auto strided = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) dev.copy_to_host(window, std::span<float>(out)).get();
  };
  auto contiguous = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) dev.copy_to_host(dense, std::span<float>(out)).get();
  };
  xdev_bench::run_interleaved(st, {{"strided", strided}, {"contiguous", contiguous}}, 1, 1,
                              static_cast<double>(out.size() * sizeof(float)));
}

void scale_window(benchmark::State& st) {
  if (!ready(st)) return;
  const std::int64_t floats = st.range(0), at = st.range(1);
  const AnyDevice& dev = devices().opencl.at(0);
  auto wide = xdev::empty<float>(dev, {at + floats});
  auto whole = xdev::empty<float>(dev, {floats});
  ops::fill(dev, wide, 1.0f).get();
  ops::fill(dev, whole, 1.0f).get();
  const auto window = xdev::slice(wide, {at, at + floats});
  auto on_window = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) ops::scale(dev, window, 1.0f).get();
  };
  auto on_array = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) ops::scale(dev, whole, 1.0f).get();
  };
  xdev_bench::run_interleaved(st, {{"window", on_window}, {"array", on_array}}, 8);
}

[[maybe_unused]] const int registered = [] {
  using xdev_bench::Goal;
  benchmark::RegisterBenchmark("submit/latency", submit_latency)->UseManualTime();
  xdev_bench::add_ratio({.label = "submit/latency xdev/raw",
                         .benchmark = "submit/latency",
                         .subject = "xdev",
                         .baseline = "raw",
                         .goal = Goal::at_most,
                         .bound = 1.2,
                         .unit = "op"});
  benchmark::RegisterBenchmark("submit/stream64", submit_stream64)->UseManualTime();
  xdev_bench::add_ratio({.label = "submit/stream64 xdev/raw",
                         .benchmark = "submit/stream64",
                         .subject = "xdev",
                         .baseline = "raw",
                         .kind = xdev_bench::Kind::cost,
                         .goal = xdev_bench::Goal::at_most,
                         .bound = 1.2,
                         .unit = "op"});
  xdev_bench::add_ratio({.label = "submit/stream64 xdev/events",
                         .benchmark = "submit/stream64",
                         .subject = "xdev",
                         .baseline = "events",
                         .unit = "op"});
  // The submitting thread's CPU time per op (no goal): what bounds the stream's rate here, and
  // steadier between runs than the elapsed time.
  for (const char* baseline : {"raw", "events"}) {
    xdev_bench::add_ratio({.label = std::string("submit/stream64 thread CPU xdev/") + baseline,
                           .benchmark = "submit/stream64",
                           .subject = "xdev_cpu",
                           .baseline = std::string(baseline) + "_cpu",
                           .unit = "op"});
  }
  for (std::int64_t n : {256, 1024}) {
    const std::string name = "gemm/f32/" + std::to_string(n);
    benchmark::RegisterBenchmark("gemm/f32", gemm)->Arg(n)->UseManualTime();
    xdev_bench::add_ratio(
        {.label = name + " opencl/host", .benchmark = name, .subject = "opencl", .baseline = "host", .unit = "gemm"});
  }
  for (std::size_t bytes : {64 * KiB, 1 * MiB, 64 * MiB}) {
    for (bool dir : {true, false}) {
      const std::string base = dir ? "transfer/to_device" : "transfer/to_host";
      const std::string name = base + "/" + std::to_string(bytes);
      benchmark::RegisterBenchmark(base.c_str(), dir ? to_device : to_host)
          ->Arg(static_cast<std::int64_t>(bytes))
          ->UseManualTime();
      xdev_bench::add_ratio(
          {.label = name + " xdev/memcpy", .benchmark = name, .subject = "xdev", .baseline = "memcpy", .unit = "copy"});
    }
  }
  for (std::int64_t rows : {64, 4096}) {
    const std::string name = "transfer/columns_to_host/" + std::to_string(rows);
    benchmark::RegisterBenchmark("transfer/columns_to_host", columns_to_host)->Arg(rows)->UseManualTime();
    xdev_bench::Ratio spec{.label = name + " strided/contiguous",
                           .benchmark = name,
                           .subject = "strided",
                           .baseline = "contiguous",
                           .unit = "copy"};
    if (rows == 4096) spec.goal = Goal::at_most, spec.bound = 2.0;
    xdev_bench::add_ratio(spec);
  }
  for (std::int64_t floats : {64 * 1024, 1024 * 1024}) {
    for (std::int64_t at : {256, 1}) {  // a multiple of PoCL's base alignment, and between two
      const std::string name = "ops/scale_window/" + std::to_string(floats) + "/" + std::to_string(at);
      benchmark::RegisterBenchmark("ops/scale_window", scale_window)->Args({floats, at})->UseManualTime();
      xdev_bench::add_ratio({.label = name + " window/array",
                             .benchmark = name,
                             .subject = "window",
                             .baseline = "array",
                             .goal = Goal::at_most,
                             .bound = 1.5,
                             .unit = "op"});
    }
  }
  return 0;
}();

}  // namespace

XDEV_BENCHMARK_MAIN("--benchmark_repetitions=3", "--benchmark_min_time=0.2")
