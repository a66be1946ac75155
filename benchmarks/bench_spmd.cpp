// SPMD on four host devices: what placing an array on a mesh and reducing over it cost, against
// copies measured in the same run.
//
// mark_sharding/<bytes>: an f32 array of [rows, 256] split ('data', None) over a mesh of 4 host
// devices, from host memory, by `spmd::mark_sharding(span, shape, sharding)` (side
// `mark_sharding`) and from the same memory as an array on the SPMD virtual device
// (`mark_sharding_vd`), against one `std::memcpy` of the whole array into a preallocated block (`memcpy`) and the naive
// path (`naive`): copy the whole array to every device, then cut each device's rows out of its
// copy with a copy within the device. Every side that touches a device counts the bytes it moved
// (TransferStats, summed over the devices): mark_sharding must move exactly the array's size, the
// naive path four times that from the host plus once within the devices; a side that moves any
// other amount fails the benchmark (an exact byte count, never a time).
//
// all_reduce/n<k>/automatic/<bytes>: `spmd::all_reduce(sum)` of one f32 array per device over 2 or
// 4 host devices with the default algorithm (shared memory: host devices' memory is host memory),
// against a memcpy of the same bytes, and at 4 KiB against one `execute(noop)` round trip on one
// device (`execute_noop`: the latency goal). Figures as nccl-tests defines them: algbw = S / t for
// S bytes per rank, busbw = algbw * 2(k-1)/k. all_reduce/n<k>/algorithms/<bytes> runs the ring,
// direct and shared-memory algorithms, forced, side by side (and the memcpy).
//
// At the sizes with a bandwidth goal, a third side, `traffic_floor`, is what the memory system
// allows the shared-memory all_reduce: that algorithm reads every element of the k arrays once and
// writes it back once, in place (2·k·S bytes), on the host's cores. The floor does the same to k·S
// bytes of its own (each element multiplied by a 1 the compiler cannot see) with as many threads
// as the all_reduce can run at once (k, at most the host's cores), each its own slice.
// `all_reduce/traffic_floor` near 1 says the all_reduce runs at the memory's speed whatever
// busbw/memcpy reads: busbw counts 2(k-1)/k·S of that traffic, one thread's memcpy moves 2·S.
//
// Every all_reduce side also reports `<prefix>allocs_per_call`: the heap allocations (calls of the
// global `operator new`, on any thread, while the side ran) per collective, from a counting
// replacement of `operator new` in this benchmark. No goal: what issue 21's "no allocation per
// call in steady state" has left (the plan, the run and its completion; see benchmarks/README.md).
#include "support/ratio.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/async/device_queue.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/detail/copy.hpp>
#include <xdev/spmd/mesh.hpp>
#include <xdev/spmd/partition_spec.hpp>
#include <xdev/spmd/placement.hpp>
#include <xdev/spmd/sharding.hpp>
#include <xdev/spmd/virtual_device.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

std::atomic<std::uint64_t> heap_allocations{0};

// Counting replacements of the global allocation functions (the aligned ones are left alone). g++
// pairs the free() in these with new-expressions it sees and warns, wrongly: they are a matched set.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  heap_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  heap_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

using Host = xdev::backends::Host;
using xdev::AnyArray;
using xdev::AnyDevice;
using xdev::Shape;
namespace spmd = xdev::spmd;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr std::size_t mesh_devices = 4;
constexpr std::int64_t columns = 256;

xdev::Runtime<Host>& runtime() {
  static xdev::Runtime<Host> rt({}, Host::Options{.devices = mesh_devices});
  return rt;
}

// The first `n` devices of the runtime.
std::vector<AnyDevice> host_devices(std::size_t n) {
  std::vector<AnyDevice> out;
  for (std::size_t i = 0; i < n; ++i) out.emplace_back(runtime().device(i));
  return out;
}

std::string size_label(std::size_t n) {
  return n >= MiB ? std::to_string(n / MiB) + "MiB" : std::to_string(n / KiB) + "KiB";
}

// ---- bytes moved ---------------------------------------------------------------------------------

// Bytes that entered the memory of a set of devices, by origin, summed over the devices.
struct Moved {
  std::size_t from_host = 0;
  std::size_t from_peer = 0;
  std::size_t within = 0;
  std::uint64_t allocations = 0;  // heap allocations while the side ran (any thread)
  std::int64_t calls = 0;         // the side's calls

  [[nodiscard]] std::size_t total() const noexcept { return from_host + from_peer + within; }
  friend Moved operator-(Moved a, const Moved& b) noexcept {
    return {a.from_host - b.from_host, a.from_peer - b.from_peer, a.within - b.within, a.allocations - b.allocations,
            a.calls - b.calls};
  }
  Moved& operator+=(const Moved& o) noexcept {
    from_host += o.from_host;
    from_peer += o.from_peer;
    within += o.within;
    allocations += o.allocations;
    calls += o.calls;
    return *this;
  }
};

Moved moved_so_far(const std::vector<AnyDevice>& devices) {
  Moved m;
  for (const auto& d : devices) {
    const xdev::TransferStats s = d.transfer_stats();
    m += Moved{s.bytes_from_host, s.bytes_from_peer, s.bytes_within, 0, 0};
  }
  return m;
}

// A side that adds the bytes its calls move on `devices`, its heap allocations and its calls to
// `tally`. The statistics are read before and after each chunk, inside its timing: a few atomic
// loads per device.
xdev_bench::Side counted(std::string name, std::function<void(std::int64_t)> run, const std::vector<AnyDevice>& devices,
                         Moved& tally) {
  return {std::move(name), [run = std::move(run), &devices, &tally](std::int64_t calls) {
            Moved before = moved_so_far(devices);
            before.allocations = heap_allocations.load(std::memory_order_relaxed);
            run(calls);
            Moved after = moved_so_far(devices);
            after.allocations = heap_allocations.load(std::memory_order_relaxed);
            after.calls = calls;
            tally += after - before;
          }};
}

// ---- one benchmark's data at a time ----------------------------------------------------------------

// The data of the benchmark that ran last, kept while the same benchmark runs again (Google
// Benchmark calls it several times per repetition) and freed, with every device's cached blocks,
// before another one builds its own: memory stays bounded by the largest single benchmark (about
// 3.5 GiB for mark_sharding at 512 MiB), whatever order random interleaving picks.
struct Slot {
  std::string key;
  std::shared_ptr<void> data;
};

Slot& slot() {
  runtime();  // constructed first, so destroyed after the data
  static Slot s;
  return s;
}

template <class F, class Make>
F& fixture(const std::string& key, Make&& make) {
  Slot& s = slot();
  if (s.key != key) {
    s.data.reset();
    s.key.clear();
    for (const auto& d : host_devices(mesh_devices)) d.release_cached_memory();
    s.data = std::forward<Make>(make)();
    s.key = key;
  }
  return *static_cast<F*>(s.data.get());
}

// ---- mark_sharding ---------------------------------------------------------------------------------

constexpr std::size_t sharding_sizes[] = {1 * MiB, 16 * MiB, 128 * MiB, 512 * MiB};

// The naive placement: the whole array to every device, then each device copies its own rows out
// of its copy into the shard (a region copy within the device). Same result as mark_sharding.
spmd::ShardedArray<float> replicate_then_slice(std::span<const float> src, const Shape& shape,
                                               const spmd::Sharding& sharding) {
  const spmd::Mesh& mesh = sharding.mesh();
  const spmd::IndexBox whole = spmd::detail::full_box(shape);
  std::vector<AnyArray<float>> full, shards;
  full.reserve(mesh.size());
  shards.reserve(mesh.size());
  for (std::size_t i = 0; i < mesh.size(); ++i) {
    full.push_back(xdev::empty<float>(mesh.device(i), shape));
    shards.push_back(xdev::empty<float>(mesh.device(i), sharding.shard_shape(shape, i)));
  }
  std::vector<xdev::Future<void>> pending;
  for (std::size_t i = 0; i < mesh.size(); ++i) {
    const AnyDevice& dev = mesh.device(i);
    pending.push_back(dev.copy_to_device(src, full[i]));
    const spmd::IndexBox box = sharding.shard_box(shape, i);
    std::vector<spmd::detail::CopyRegion> regions;
    spmd::detail::for_each_run(box, whole, box, [&](std::size_t s, std::size_t d, std::size_t n) {
      regions.push_back({dev, full[i].buffer().native_handle(), s * sizeof(float), dev,
                         shards[i].buffer().native_handle(), d * sizeof(float), n * sizeof(float)});
    });
    // On the same default stream as the copy above, so it starts once the copy is complete.
    pending.push_back(spmd::detail::submit_copies(dev, std::move(regions)));
  }
  for (auto& f : pending) f.get();
  return spmd::ShardedArray<float>(shape, sharding, std::move(shards));
}

// Every side reads the same host block, the array placed on the virtual device (through
// `host` for the sides that take a span), so that none finds it in a cache the others did not
// warm: at 1 and 16 MiB it fits in the last-level cache. `uneven` drops one row, so that the
// rows do not divide over the devices and the last shard is one row shorter.
struct ShardingData {
  ShardingData(std::size_t bytes, bool uneven)
      : mesh(host_devices(mesh_devices), "data"),
        shape{static_cast<std::int64_t>(bytes / (columns * sizeof(float))) - (uneven ? 1 : 0), columns},
        sharding(mesh, {"data", spmd::replicated}),
        vd(mesh),
        placed(vd.empty<float>(shape)),
        host(spmd::VirtualDevice::host_data(placed), static_cast<std::size_t>(shape.numel())),
        memcpy_dst(host.size(), 0.0f) {
    std::fill(host.begin(), host.end(), 1.0f);
    // Every side once: page faults and first allocations land here, not in a measurement.
    (void)spmd::mark_sharding(std::span<const float>(host), shape, sharding).get();
    (void)spmd::mark_sharding(placed, vd.sharding(sharding.spec())).get();
    (void)replicate_then_slice(host, shape, sharding);
  }
  spmd::Mesh mesh;
  Shape shape;
  spmd::Sharding sharding;
  spmd::VirtualDevice vd;
  AnyArray<float> placed;
  std::span<float> host;  // placed's memory
  std::vector<float> memcpy_dst;
};

// Sides alternate every call (at 1 MiB, about 25-300 us each).
void bench_mark_sharding(benchmark::State& st, bool uneven) {
  auto& f = fixture<ShardingData>(
      (uneven ? "mark_sharding_uneven/" : "mark_sharding/") + std::to_string(st.range(0)),
      [&] { return std::make_shared<ShardingData>(static_cast<std::size_t>(st.range(0)), uneven); });
  const std::size_t bytes = f.host.size_bytes();  // the array's size: one row less when uneven
  const spmd::Sharding vd_sharding = f.vd.sharding(f.sharding.spec());
  const std::vector<AnyDevice>& devices = f.mesh.devices();

  Moved by_span, by_vd, by_naive;
  auto from_span = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i)
      (void)spmd::mark_sharding(std::span<const float>(f.host), f.shape, f.sharding).get();
  };
  auto from_vd = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) (void)spmd::mark_sharding(f.placed, vd_sharding).get();
  };
  auto naive = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) (void)replicate_then_slice(f.host, f.shape, f.sharding);
  };
  auto plain_memcpy = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) {
      std::memcpy(f.memcpy_dst.data(), f.host.data(), bytes);
      benchmark::ClobberMemory();
    }
  };
  xdev_bench::run_interleaved(st,
                              {counted("mark_sharding", from_span, devices, by_span),
                               {"memcpy", plain_memcpy},
                               counted("naive", naive, devices, by_naive),
                               counted("mark_sharding_vd", from_vd, devices, by_vd)},
                              1, 1, double(bytes));

  const auto calls = static_cast<std::size_t>(st.iterations());
  auto report = [&](const std::string& name, const Moved& m) {
    const double per_call = double(m.total()) / double(calls);
    st.counters[name + "_moved"] =
        benchmark::Counter(per_call, benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
    st.counters[name + "_moved_x"] = per_call / double(bytes);
  };
  report("mark_sharding", by_span);
  report("mark_sharding_vd", by_vd);
  report("naive", by_naive);
  const std::size_t devs = devices.size();
  auto exact = [&](const Moved& m, std::size_t from_host, std::size_t within) {
    return m.from_host == calls * from_host && m.from_peer == 0 && m.within == calls * within;
  };
  // Uneven shards are not padded: still exactly the array's bytes.
  if (!exact(by_span, bytes, 0) || !exact(by_vd, bytes, 0))
    st.SkipWithError("mark_sharding did not move exactly the array's bytes from the host (see *_moved)");
  else if (!exact(by_naive, devs * bytes, bytes))
    st.SkipWithError("the naive path did not move 4x the array from the host and 1x within the devices");
}

// ---- all_reduce ------------------------------------------------------------------------------------

constexpr std::size_t reduce_sizes[] = {4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB};
constexpr std::size_t latency_bytes = 4 * KiB;  // the size of the latency figure
// The sizes with a bandwidth goal: busbw at least half of one core's memcpy bandwidth.
constexpr std::size_t bandwidth_goal_sizes[] = {16 * MiB, 256 * MiB};
constexpr double bandwidth_goal = 0.5;
constexpr std::size_t compare_sizes[] = {64 * KiB, 1 * MiB, 16 * MiB};
constexpr std::size_t ranks_tried[] = {2, 4};

const char* name_of(spmd::CollectiveAlgorithm a) {
  switch (a) {
    case spmd::CollectiveAlgorithm::ring:
      return "ring";
    case spmd::CollectiveAlgorithm::direct:
      return "direct";
    case spmd::CollectiveAlgorithm::shared_memory:
      return "shared_memory";
    case spmd::CollectiveAlgorithm::automatic:
      break;
  }
  return "automatic";
}

// What `automatic` runs on host devices (the documented rule: their memory is host memory).
constexpr spmd::CollectiveAlgorithm automatic_pick = spmd::CollectiveAlgorithm::shared_memory;

// all_reduce's latency goal: at most this many `execute(noop)` round trips.
constexpr double latency_goal = 3.0;

// One f32 array of `bytes` per device of a `ranks`-device mesh, and the memcpy baseline's blocks.
struct ReduceData {
  ReduceData(std::size_t ranks, std::size_t bytes)
      : mesh(host_devices(ranks), "data"), src(bytes / sizeof(float), 1.0f), dst(bytes / sizeof(float), 0.0f) {
    for (const auto& d : mesh.devices()) {
      arrays.push_back(xdev::empty<float>(d, Shape{static_cast<std::int64_t>(src.size())}));
      d.copy_to_device(std::span<const float>(src), arrays.back()).get();
    }
  }
  void all_reduce(spmd::CollectiveAlgorithm algorithm) {
    spmd::all_reduce(mesh, "data", std::span<AnyArray<float>>(arrays), spmd::ReduceOp::sum, {.algorithm = algorithm})
        .get();
  }
  // Runs `algorithm` once if it has not run on these arrays yet: its temporaries are then
  // allocated and touched, and come from the allocator's cache in the measurement.
  void warm_up(spmd::CollectiveAlgorithm algorithm) {
    if (std::find(warmed.begin(), warmed.end(), algorithm) != warmed.end()) return;
    all_reduce(algorithm);
    warmed.push_back(algorithm);
  }
  spmd::Mesh mesh;
  std::vector<AnyArray<float>> arrays;  // the sums grow each call (to inf, at full speed on x86)
  std::vector<float> src;
  std::vector<float> dst;
  std::vector<spmd::CollectiveAlgorithm> warmed;
  // The traffic floor's k·S bytes, read and written in place (made on first use, at the goal sizes).
  std::vector<float> floor_data;
};

// The threads the shared-memory all_reduce over `ranks` host devices runs on at once.
std::size_t floor_threads(std::size_t ranks) {
  return std::max<std::size_t>(1, std::min<std::size_t>(ranks, std::thread::hardware_concurrency()));
}

// One pass of the traffic floor: every element of `f.floor_data` read and written back in place
// by `threads` threads, each a contiguous slice.
void traffic_floor_pass(ReduceData& f, std::size_t threads) {
  float one = 1.0f;
  benchmark::DoNotOptimize(one);
  float* data = f.floor_data.data();
  const std::size_t n = f.floor_data.size();
  std::vector<std::thread> passes;
  passes.reserve(threads);
  for (std::size_t t = 0; t < threads; ++t)
    passes.emplace_back([data, one, from = n * t / threads, to = n * (t + 1) / threads] {
      for (std::size_t i = from; i < to; ++i) data[i] *= one;
    });
  for (auto& p : passes) p.join();
  benchmark::ClobberMemory();
}

ReduceData& reduce_data(std::size_t ranks, std::size_t bytes) {
  return fixture<ReduceData>("all_reduce/" + std::to_string(ranks) + "/" + std::to_string(bytes),
                             [&] { return std::make_shared<ReduceData>(ranks, bytes); });
}

// Sides alternate every call from 256 KiB up, every 256 KiB below (4 KiB: 64 calls of each).
std::int64_t reduce_chunk(std::size_t bytes) {
  return static_cast<std::int64_t>(std::max<std::size_t>(1, 256 * KiB / bytes));
}

// busbw's factor for all_reduce over k ranks (nccl-tests).
double bus_factor(std::size_t ranks) {
  return 2.0 * double(ranks - 1) / double(ranks);
}

// For a side `name` already timed: `<name>_bus_ns`, the time per S bytes of bus traffic (so that
// memcpy_ns / <name>_bus_ns is busbw / memcpy bandwidth), its algbw and busbw (bytes/s, 1000-based
// like nccl-tests' GB/s), and the bytes each rank received from peers and copied within itself
// per call, as multiples of S.
void reduce_counters(benchmark::State& st, const std::string& prefix, const std::string& name, std::size_t ranks,
                     std::size_t bytes, const Moved& m, std::int64_t chunk) {
  const double ns = st.counters.at(name + "_ns").value;
  const double algbw = double(bytes) / (ns * 1e-9);
  st.counters[name + "_bus_ns"] = ns / bus_factor(ranks);
  st.counters[prefix + "algbw"] = benchmark::Counter(algbw, benchmark::Counter::kDefaults, benchmark::Counter::kIs1000);
  st.counters[prefix + "busbw"] =
      benchmark::Counter(algbw * bus_factor(ranks), benchmark::Counter::kDefaults, benchmark::Counter::kIs1000);
  const double per_rank_call = double(st.iterations()) * double(chunk) * double(ranks) * double(bytes);
  st.counters[prefix + "peer_x"] = double(m.from_peer) / per_rank_call;
  st.counters[prefix + "within_x"] = double(m.within) / per_rank_call;
  if (m.calls > 0) st.counters[prefix + "allocs_per_call"] = double(m.allocations) / double(m.calls);
}

void memcpy_counter(benchmark::State& st, std::size_t bytes) {
  st.counters["memcpy_bw"] = benchmark::Counter(double(bytes) / (st.counters.at("memcpy_ns").value * 1e-9),
                                                benchmark::Counter::kDefaults, benchmark::Counter::kIs1000);
}

// all_reduce with the default algorithm against a memcpy of S bytes.
void all_reduce_automatic(benchmark::State& st, std::size_t ranks) {
  const auto bytes = static_cast<std::size_t>(st.range(0));
  ReduceData& f = reduce_data(ranks, bytes);
  f.warm_up(automatic_pick);
  Moved moved;
  auto reduce = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) f.all_reduce(spmd::CollectiveAlgorithm::automatic);
  };
  auto plain_memcpy = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) {
      std::memcpy(f.dst.data(), f.src.data(), bytes);
      benchmark::ClobberMemory();
    }
  };
  // One host task on one device and back: what the latency goal is measured in.
  const AnyDevice& first = f.mesh.device(0);
  auto execute_noop = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) first.execute([] {}).get();
  };
  const std::int64_t chunk = reduce_chunk(bytes);
  std::vector<xdev_bench::Side> sides{counted("all_reduce", reduce, f.mesh.devices(), moved), {"memcpy", plain_memcpy}};
  if (bytes == latency_bytes) sides.push_back({"execute_noop", execute_noop});
  if (std::find(std::begin(bandwidth_goal_sizes), std::end(bandwidth_goal_sizes), bytes) !=
      std::end(bandwidth_goal_sizes)) {
    if (f.floor_data.empty()) f.floor_data.assign(ranks * bytes / sizeof(float), 1.0f);
    sides.push_back({"traffic_floor", [&f, threads = floor_threads(ranks)](std::int64_t calls) {
                       for (std::int64_t i = 0; i < calls; ++i) traffic_floor_pass(f, threads);
                     }});
  }
  xdev_bench::run_interleaved(st, sides, chunk, 1, double(bytes));
  reduce_counters(st, "", "all_reduce", ranks, bytes, moved, chunk);
  memcpy_counter(st, bytes);
}

// The three algorithms forced, side by side, and the memcpy.
void all_reduce_algorithms(benchmark::State& st, std::size_t ranks) {
  const auto bytes = static_cast<std::size_t>(st.range(0));
  ReduceData& f = reduce_data(ranks, bytes);
  f.warm_up(spmd::CollectiveAlgorithm::ring);
  f.warm_up(spmd::CollectiveAlgorithm::direct);
  f.warm_up(spmd::CollectiveAlgorithm::shared_memory);
  Moved by_ring, by_direct, by_shared;
  auto with = [&](spmd::CollectiveAlgorithm a) {
    return [&f, a](std::int64_t calls) {
      for (std::int64_t i = 0; i < calls; ++i) f.all_reduce(a);
    };
  };
  auto plain_memcpy = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) {
      std::memcpy(f.dst.data(), f.src.data(), bytes);
      benchmark::ClobberMemory();
    }
  };
  const std::int64_t chunk = reduce_chunk(bytes);
  xdev_bench::run_interleaved(
      st,
      {counted("ring", with(spmd::CollectiveAlgorithm::ring), f.mesh.devices(), by_ring),
       counted("direct", with(spmd::CollectiveAlgorithm::direct), f.mesh.devices(), by_direct),
       counted("shared", with(spmd::CollectiveAlgorithm::shared_memory), f.mesh.devices(), by_shared),
       {"memcpy", plain_memcpy}},
      chunk, 1, double(bytes));
  reduce_counters(st, "ring_", "ring", ranks, bytes, by_ring, chunk);
  reduce_counters(st, "direct_", "direct", ranks, bytes, by_direct, chunk);
  reduce_counters(st, "shared_", "shared", ranks, bytes, by_shared, chunk);
  memcpy_counter(st, bytes);
}

// Sizes from 128 MiB up run a fixed number of iterations per repetition (each iteration runs every
// side once: about a second at 512 MiB), whatever --benchmark_min_time says.
std::int64_t fixed_iterations(std::size_t bytes) {
  return bytes >= 512 * MiB ? 2 : bytes >= 128 * MiB ? 3 : 0;
}

void register_one(const std::string& name, std::function<void(benchmark::State&)> fn, std::size_t bytes) {
  auto* b =
      benchmark::RegisterBenchmark(name.c_str(), std::move(fn))->UseManualTime()->Arg(static_cast<std::int64_t>(bytes));
  if (const std::int64_t n = fixed_iterations(bytes)) b->Iterations(n);
}

[[maybe_unused]] const int registered = [] {
  for (const std::size_t n : sharding_sizes) {
    register_one(
        "mark_sharding", [](benchmark::State& st) { bench_mark_sharding(st, false); }, n);
    if (n <= 16 * MiB) {
      register_one(
          "mark_sharding_uneven", [](benchmark::State& st) { bench_mark_sharding(st, true); }, n);
      xdev_bench::add_ratio(
          {.label = "mark_sharding " + size_label(n) + " less a row (uneven shards) time " + "mark_sharding/memcpy",
           .benchmark = "mark_sharding_uneven/" + std::to_string(n),
           .subject = "mark_sharding",
           .baseline = "memcpy",
           .unit = "array"});
    }
    const std::string bench = "mark_sharding/" + std::to_string(n);
    const std::string what = "mark_sharding " + size_label(n) + " time ";
    xdev_bench::add_ratio({.label = what + "mark_sharding/memcpy",
                           .benchmark = bench,
                           .subject = "mark_sharding",
                           .baseline = "memcpy",
                           .unit = "array"});
    xdev_bench::add_ratio({.label = what + "mark_sharding/naive",
                           .benchmark = bench,
                           .subject = "mark_sharding",
                           .baseline = "naive",
                           .unit = "array"});
    xdev_bench::add_ratio({.label = what + "mark_sharding_vd/mark_sharding",
                           .benchmark = bench,
                           .subject = "mark_sharding_vd",
                           .baseline = "mark_sharding",
                           .unit = "array"});
  }
  for (const std::size_t k : ranks_tried) {
    const std::string base = "all_reduce/n" + std::to_string(k);
    for (const std::size_t n : reduce_sizes) {
      register_one(
          base + "/automatic", [k](benchmark::State& st) { all_reduce_automatic(st, k); }, n);
      const bool goal = std::find(std::begin(bandwidth_goal_sizes), std::end(bandwidth_goal_sizes), n) !=
                        std::end(bandwidth_goal_sizes);
      xdev_bench::add_ratio({.label = "all_reduce n=" + std::to_string(k) + " " + size_label(n) + " automatic (" +
                                      name_of(automatic_pick) + ") busbw/memcpy",
                             .benchmark = base + "/automatic/" + std::to_string(n),
                             .subject = "all_reduce_bus",
                             .baseline = "memcpy",
                             .kind = xdev_bench::Kind::speed,
                             .goal = goal ? xdev_bench::Goal::at_least : xdev_bench::Goal::none,
                             .bound = goal ? bandwidth_goal : 0.0,
                             .unit = "S"});
      if (goal)
        xdev_bench::add_ratio({.label = "all_reduce n=" + std::to_string(k) + " " + size_label(n) +
                                        " time all_reduce/traffic_floor (2kS bytes, " +
                                        std::to_string(floor_threads(k)) + " threads)",
                               .benchmark = base + "/automatic/" + std::to_string(n),
                               .subject = "all_reduce",
                               .baseline = "traffic_floor",
                               .unit = "op"});
      if (n == latency_bytes)
        xdev_bench::add_ratio(
            {.label = "all_reduce n=" + std::to_string(k) + " " + size_label(n) + " latency all_reduce/execute_noop",
             .benchmark = base + "/automatic/" + std::to_string(n),
             .subject = "all_reduce",
             .baseline = "execute_noop",
             .goal = xdev_bench::Goal::at_most,
             .bound = latency_goal,
             .unit = "op"});
    }
    for (const std::size_t n : compare_sizes) {
      register_one(
          base + "/algorithms", [k](benchmark::State& st) { all_reduce_algorithms(st, k); }, n);
      const std::string what = "all_reduce n=" + std::to_string(k) + " " + size_label(n) + " time ";
      xdev_bench::add_ratio({.label = what + "ring/direct",
                             .benchmark = base + "/algorithms/" + std::to_string(n),
                             .subject = "ring",
                             .baseline = "direct",
                             .unit = "op"});
      xdev_bench::add_ratio({.label = what + "shared/ring",
                             .benchmark = base + "/algorithms/" + std::to_string(n),
                             .subject = "shared",
                             .baseline = "ring",
                             .unit = "op"});
    }
  }
  return 0;
}();

}  // namespace

XDEV_BENCHMARK_MAIN("--benchmark_repetitions=5", "--benchmark_enable_random_interleaving=true",
                    "--benchmark_min_time=0.2")
