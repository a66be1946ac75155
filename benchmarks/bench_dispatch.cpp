// Typed dispatch: what a call through `xdev::Device<Host>` costs over the same call made directly on
// the object that does the work (the backend, or the device's allocator).
//
// "Direct" is what a user would write without the handle: a pointer to the backend (or to the
// allocator) kept in memory. The handle is kept in memory the same way, and both are re-read every
// call (benchmark::ClobberMemory), as when they are members of a long-lived object; otherwise the
// compiler would hoist the handle out of the loop and measure nothing. What remains is exactly the
// handle's price: the loads from runtime pointer and ordinal to the backend or device state, and
// whatever the forwarding function does besides forwarding.
//
// Each pair runs inside one benchmark, alternating chunks of calls of both sides, so that both see
// the same machine state; each repetition yields its own ratio, and the table shows their median.
#include "support/ratio.hpp"

#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/allocator.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

using Host = xdev::backends::Host;

// Calls per chunk: each benchmark alternates a chunk of calls through the handle with a chunk of
// direct calls (xdev_bench::run_interleaved), long enough (~10-50 us) to dwarf the clock reads.
constexpr std::int64_t tiny_chunk = 1 << 15;
constexpr std::int64_t alloc_chunk = 1 << 10;
// The allocation size of the alloc/free pair: served from the allocator's cache after the first.
constexpr std::size_t alloc_bytes = 4096;

xdev::Runtime<Host>& runtime() {
  static xdev::Runtime<Host> rt;
  return rt;
}

// --- backend().device_count(): a member of the backend reached through the handle.

void device_count(benchmark::State& st) {
  xdev::Device<Host> dev = runtime().device(0);
  Host* backend = &runtime().backend();
  benchmark::DoNotOptimize(&dev);  // escaped: every ClobberMemory forces a re-read
  benchmark::DoNotOptimize(&backend);
  auto through_device = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      benchmark::ClobberMemory();
      std::size_t c = dev.backend().device_count();
      benchmark::DoNotOptimize(c);
    }
  };
  auto direct = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      benchmark::ClobberMemory();
      std::size_t c = backend->device_count();
      benchmark::DoNotOptimize(c);
    }
  };
  xdev_bench::run_interleaved(st, {{"device", through_device}, {"direct", direct}}, tiny_chunk);
}

// --- Buffer::host_data(): buffer -> device handle -> backend().host_address(h).

void host_data(benchmark::State& st) {
  auto buf = runtime().device(0).allocate<float>(1024);
  Host* backend = &runtime().backend();
  Host::memory_handle h = buf.native_handle();
  benchmark::DoNotOptimize(&buf);
  benchmark::DoNotOptimize(&backend);
  benchmark::DoNotOptimize(&h);
  auto through_device = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      benchmark::ClobberMemory();
      float* p = buf.host_data();
      benchmark::DoNotOptimize(p);
    }
  };
  auto direct = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      benchmark::ClobberMemory();
      float* p = static_cast<float*>(backend->host_address(h));
      benchmark::DoNotOptimize(p);
    }
  };
  xdev_bench::run_interleaved(st, {{"device", through_device}, {"direct", direct}}, tiny_chunk);
}

// --- Device::allocate + Buffer destruction vs DeviceAllocator::allocate/deallocate on the same
// allocator (steady state: a cache hit under the allocator's mutex).

void alloc_free(benchmark::State& st) {
  xdev::Device<Host> dev = runtime().device(0);
  xdev::DeviceAllocator<Host>* alloc = &runtime().state(0).allocator;
  benchmark::DoNotOptimize(&dev);
  benchmark::DoNotOptimize(&alloc);
  auto through_device = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      benchmark::ClobberMemory();
      auto buf = dev.allocate<std::byte>(alloc_bytes);
      benchmark::DoNotOptimize(buf.native_handle());  // what the direct side keeps too
    }                                                 // ~Buffer returns the block to the device
  };
  auto direct = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      benchmark::ClobberMemory();
      Host::memory_handle h = alloc->allocate(alloc_bytes);
      benchmark::DoNotOptimize(h);
      alloc->deallocate(h, alloc_bytes);
    }
  };
  xdev_bench::run_interleaved(st, {{"device", through_device}, {"direct", direct}}, alloc_chunk);
}

// --- Device::memory_stats vs DeviceAllocator::stats.

void memory_stats(benchmark::State& st) {
  xdev::Device<Host> dev = runtime().device(0);
  xdev::DeviceAllocator<Host>* alloc = &runtime().state(0).allocator;
  benchmark::DoNotOptimize(&dev);
  benchmark::DoNotOptimize(&alloc);
  auto through_device = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      benchmark::ClobberMemory();
      xdev::MemoryStats s = dev.memory_stats();
      benchmark::DoNotOptimize(s);
    }
  };
  auto direct = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      benchmark::ClobberMemory();
      xdev::MemoryStats s = alloc->stats();
      benchmark::DoNotOptimize(s);
    }
  };
  xdev_bench::run_interleaved(st, {{"device", through_device}, {"direct", direct}}, alloc_chunk);
}

void add(const char* what, void (*fn)(benchmark::State&)) {
  const std::string name = std::string("dispatch/") + what;
  benchmark::RegisterBenchmark(name.c_str(), fn)->UseManualTime();
  xdev_bench::add_ratio({.label = std::string(what) + " device/direct",
                         .benchmark = name,
                         .subject = "device",
                         .baseline = "direct",
                         .goal = xdev_bench::Goal::at_most,
                         .bound = 1.02,
                         .unit = "call"});
}

[[maybe_unused]] const int registered = [] {
  add("device_count", device_count);
  add("host_data", host_data);
  add("alloc_free", alloc_free);
  add("memory_stats", memory_stats);
  return 0;
}();

}  // namespace

XDEV_BENCHMARK_MAIN("--benchmark_repetitions=9", "--benchmark_enable_random_interleaving=true",
                    "--benchmark_min_time=0.2")
