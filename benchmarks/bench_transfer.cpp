// Transfers: host->device and device->host bandwidth of `dev.copy_to_device(...).get()` and
// `dev.copy_to_host(...).get()` on the host backend, against `std::memcpy` between the very same
// two memory blocks (the device buffer of the host backend is host memory). The ratio is xdev's
// bandwidth over memcpy's: what the asynchronous submission (a worker thread, a future) leaves of
// the copy itself. Small sizes are reported for information; the goal applies from 1 MiB up.
//
// A third side, `asio_post`, posts the same memcpy to the host backend's own worker pool with
// `asio::use_future` and waits: the price of any asynchronous copy on a thread pool (a worker
// wake-up and a future), without xdev. asio_post/memcpy and xdev/asio_post are printed for
// information: they separate the cost of asynchrony itself from xdev's own overhead.
#include "support/ratio.hpp"

#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/buffer.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using Host = xdev::backends::Host;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr std::size_t sizes[] = {4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB};
constexpr std::size_t goal_from = 1 * MiB;

xdev::Runtime<Host>& runtime() {
  static xdev::Runtime<Host> rt;
  return rt;
}

// The blocks of one size, made and touched once (so no page fault lands in a measurement) and kept
// for every benchmark of that size: a host source, a host destination and a device buffer.
struct Blocks {
  explicit Blocks(std::size_t n)
      : host_src(n, std::byte{1}), host_dst(n, std::byte{2}), device(runtime().device(0).allocate<std::byte>(n)) {
    std::memset(device.host_data(), 3, n);
  }
  std::vector<std::byte> host_src;
  std::vector<std::byte> host_dst;
  xdev::Buffer<std::byte, Host> device;
};

Blocks& blocks(std::size_t n) {
  runtime();  // constructed first, so destroyed after the buffers
  static std::map<std::size_t, std::unique_ptr<Blocks>> all;
  auto& b = all[n];
  if (!b) b = std::make_unique<Blocks>(n);
  return *b;
}

enum class Direction { to_device, to_host };

// One benchmark per direction and size: xdev, memcpy and asio_post interleaved, in chunks of about
// a mebibyte (at least one copy). The benchmark's own time and bytes_per_second are xdev's; the
// baselines' are the counters memcpy_* and asio_post_*.
void transfer(benchmark::State& st, Direction dir) {
  const auto n = static_cast<std::size_t>(st.range(0));
  Blocks& b = blocks(n);
  const xdev::Device<Host> dev = b.device.device();
  boost::asio::thread_pool& pool = xdev::backends::detail::worker_pool(runtime().backend());
  const bool to_device = dir == Direction::to_device;
  void* dst = to_device ? static_cast<void*>(b.device.host_data()) : b.host_dst.data();
  const void* src = to_device ? static_cast<const void*>(b.host_src.data()) : b.device.host_data();

  auto through_xdev = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) {
      if (to_device)
        dev.copy_to_device(std::span<const std::byte>(b.host_src), b.device).get();
      else
        dev.copy_to_host(b.device, std::span<std::byte>(b.host_dst)).get();
    }
  };
  auto plain_memcpy = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i) {
      std::memcpy(dst, src, n);
      benchmark::ClobberMemory();
    }
  };
  auto asio_post = [&](std::int64_t calls) {
    for (std::int64_t i = 0; i < calls; ++i)
      boost::asio::post(pool, boost::asio::use_future([dst, src, n] { std::memcpy(dst, src, n); })).get();
  };
  const auto chunk = static_cast<std::int64_t>(std::max<std::size_t>(1, MiB / n));
  xdev_bench::run_interleaved(st, {{"xdev", through_xdev}, {"memcpy", plain_memcpy}, {"asio_post", asio_post}}, chunk,
                              1, double(n));
}

std::string size_label(std::size_t n) {
  return n >= MiB ? std::to_string(n / MiB) + "MiB" : std::to_string(n / KiB) + "KiB";
}

[[maybe_unused]] const int registered = [] {
  for (const auto& [dir, name] :
       {std::pair{Direction::to_device, "to_device"}, std::pair{Direction::to_host, "to_host"}}) {
    const std::string base = std::string("transfer/") + name;
    auto* b = benchmark::RegisterBenchmark(base.c_str(), transfer, dir)->UseManualTime();
    for (const std::size_t n : sizes) b->Arg(static_cast<std::int64_t>(n));
    for (const std::size_t n : sizes) {
      const std::string bench = base + '/' + std::to_string(n);
      const std::string what = std::string(name) + ' ' + size_label(n) + " bandwidth ";
      xdev_bench::add_ratio({.label = what + "xdev/memcpy",
                             .benchmark = bench,
                             .subject = "xdev",
                             .baseline = "memcpy",
                             .kind = xdev_bench::Kind::speed,
                             .goal = n >= goal_from ? xdev_bench::Goal::at_least : xdev_bench::Goal::none,
                             .bound = 0.9,
                             .unit = "copy"});
      // For information: the ceiling of any copy made asynchronous on a pool, and xdev against it.
      xdev_bench::add_ratio({.label = what + "asio_post/memcpy",
                             .benchmark = bench,
                             .subject = "asio_post",
                             .baseline = "memcpy",
                             .kind = xdev_bench::Kind::speed,
                             .unit = "copy"});
      xdev_bench::add_ratio({.label = what + "xdev/asio_post",
                             .benchmark = bench,
                             .subject = "xdev",
                             .baseline = "asio_post",
                             .kind = xdev_bench::Kind::speed,
                             .unit = "copy"});
    }
  }
  return 0;
}();

}  // namespace

XDEV_BENCHMARK_MAIN("--benchmark_repetitions=5", "--benchmark_enable_random_interleaving=true",
                    "--benchmark_min_time=0.2")
