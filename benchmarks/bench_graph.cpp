// Graph capture and replay (<xdev/any/graph.hpp>): one step of 64 small ops (`ops::scale` of 256
// floats), replayed from a captured graph, against the same 64 ops submitted one by one on the
// same stream (63 with `detached` tokens, the cheapest, and the last waited for), measured side by
// side in one run. Goal: replay at most 0.5x the time (CUDA graphs' reason to exist).
//
// graph/host: on a HOST device (no native queues: a replay starts each step when the one before it
//   completed, without the per-op submission: node, in-flight slot, token, handler).
// graph/opencl: on the first OPENCL device (native queues: a replay hands its 64 steps to the
//   stream's command queue back to back). Reports an error saying why without an OpenCL device.
//
// The plugins come from the build's plugins/ directory (XDEV_BENCH_PLUGIN_DIR).
#include "support/ratio.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/any/graph.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/ops/elementwise.hpp>

#include <benchmark/benchmark.h>

#include <boost/asio/detached.hpp>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>

namespace {

using xdev::AnyDevice;
namespace ops = xdev::ops;

constexpr int steps = 64;
constexpr std::int64_t elements = 256;

struct Devices {
  std::unique_ptr<xdev::Registry> registry;
  AnyDevice host;
  AnyDevice opencl;
  std::string opencl_error;
};

Devices& devices() {
  static Devices d = [] {
    Devices r;
    r.registry = std::make_unique<xdev::Registry>(xdev::plugin::SearchPath({XDEV_BENCH_PLUGIN_DIR}));
    r.host = r.registry->devices("HOST").at(0);
    try {
      r.opencl = r.registry->devices("OPENCL").at(0);
    } catch (const std::exception& e) {
      r.opencl_error = std::string("OPENCL unavailable: ") + e.what();
    }
    return r;
  }();
  return d;
}

void replay_vs_individual(benchmark::State& st, const AnyDevice& dev) {
  const auto s = dev.make_stream();
  auto x = xdev::empty<float>(dev, {elements});
  ops::fill(s, x, 1.0F).get();
  const xdev::Graph g = xdev::capture(s, [&] {
    for (int i = 0; i < steps; ++i) ops::scale(s, x, 1.0F);
  });
  g.replay().get();  // warm-up: the first launch of each kernel
  auto replay_side = [&](std::int64_t calls) {
    for (std::int64_t c = 0; c < calls; ++c) g.replay().get();
  };
  auto individual_side = [&](std::int64_t calls) {
    for (std::int64_t c = 0; c < calls; ++c) {
      for (int i = 0; i + 1 < steps; ++i) ops::scale(s, x, 1.0F, boost::asio::detached);
      ops::scale(s, x, 1.0F).get();
    }
  };
  xdev_bench::run_interleaved(st, {{"replay", replay_side}, {"individual", individual_side}}, 4,
                              static_cast<double>(steps));
}

void on_host(benchmark::State& st) {
  replay_vs_individual(st, devices().host);
}

void on_opencl(benchmark::State& st) {
  if (!devices().opencl.valid()) {
    st.SkipWithError(devices().opencl_error.c_str());
    return;
  }
  replay_vs_individual(st, devices().opencl);
}

[[maybe_unused]] const int registered = [] {
  for (const auto& [name, fn] : {std::pair{"graph/host", &on_host}, std::pair{"graph/opencl", &on_opencl}}) {
    benchmark::RegisterBenchmark(name, fn)->UseManualTime();
    xdev_bench::add_ratio({.label = std::string(name) + " replay/individual",
                           .benchmark = name,
                           .subject = "replay",
                           .baseline = "individual",
                           .kind = xdev_bench::Kind::cost,
                           .goal = xdev_bench::Goal::at_most,
                           .bound = 0.5,
                           .unit = "op"});
  }
  return 0;
}();

}  // namespace

XDEV_BENCHMARK_MAIN("--benchmark_repetitions=5", "--benchmark_min_time=0.2")
