// Throttle: the throughput of many small submissions on a device bounded to 32 in-flight executions
// (a backend whose capabilities say MaxInflight<32>) against the same device effectively unbounded
// (RuntimeOptions::max_inflight = 1<<20). The bound exists so that a fast producer cannot exhaust
// device memory; the goal is that it costs at most 5% of throughput when the producer outruns the
// device, which is exactly when the submitting thread keeps blocking for a slot.
//
// Work sizes: `empty` (pure submission cost, the worst case for the throttle) and `spin_1us`
// (about a microsecond of work, a small kernel). Both devices run interleaved, a batch of 4096
// submissions each in turn (xdev_bench::run_interleaved).
#include "support/countdown.hpp"
#include "support/ratio.hpp"

#include <xdev/async/tokens.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/policy/capabilities.hpp>

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>

namespace {

using Host = xdev::backends::Host;

// The host backend as a device type whose capabilities state MaxInflight<32> (the only policy
// that matters here; the others take their defaults).
struct Host32 : Host {
  using capabilities = xdev::Capabilities<xdev::MaxInflight<32>>;
};
static_assert(xdev::check_backend<Host32>());

constexpr int submissions = 4096;

using xdev_bench::Countdown;

void spin_1us() {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(1);
  while (std::chrono::steady_clock::now() < end) {
  }
}

// n batches of `submissions` callback submissions on `dev`, each batch waited for as a whole.
template <class B>
auto submit_batches(const xdev::Device<B>& dev, Countdown& done, bool spin) {
  return [&done, dev, spin](std::int64_t n) {
    auto on_done = [&done](std::exception_ptr) { done.count_down(); };
    for (std::int64_t b = 0; b < n; ++b) {
      done.reset(submissions);
      for (int i = 0; i < submissions; ++i) {
        if (spin)
          dev.execute(spin_1us, on_done);
        else
          dev.execute([] {}, on_done);
      }
      done.wait();
    }
  };
}

void throttle(benchmark::State& st, bool spin) {
  xdev::Runtime<Host32> bounded;
  xdev::Runtime<Host> unbounded({.max_inflight = std::size_t{1} << 20});
  const xdev::Device<Host32> dev32 = bounded.device(0);
  const xdev::Device<Host> dev = unbounded.device(0);
  if (dev32.max_inflight() != 32) {
    st.SkipWithError(("in-flight bound is " + std::to_string(dev32.max_inflight()) +
                      ", expected the capability's 32 (is XDEV_MAX_INFLIGHT set?)")
                         .c_str());
    return;
  }
  Countdown done;
  const std::size_t waits_before = dev32.execution_stats().throttle_waits;
  xdev_bench::run_interleaved(
      st, {{"max_inflight_32", submit_batches(dev32, done, spin)}, {"unbounded", submit_batches(dev, done, spin)}}, 1,
      submissions);
  st.SetItemsProcessed(st.iterations() * submissions);
  st.counters["throttle_waits/op"] =
      double(dev32.execution_stats().throttle_waits - waits_before) / double(st.iterations() * submissions);
}

[[maybe_unused]] const int registered = [] {
  for (const bool spin : {false, true}) {
    const std::string work = spin ? "spin_1us" : "empty";
    benchmark::RegisterBenchmark(("throttle/" + work).c_str(), throttle, spin)->UseManualTime();
    xdev_bench::add_ratio({.label = work + " throughput max_inflight_32/unbounded",
                           .benchmark = "throttle/" + work,
                           .subject = "max_inflight_32",
                           .baseline = "unbounded",
                           .kind = xdev_bench::Kind::speed,
                           .goal = xdev_bench::Goal::at_least,
                           .bound = 0.95,
                           .unit = "op"});
  }
  return 0;
}();

}  // namespace

XDEV_BENCHMARK_MAIN("--benchmark_repetitions=5", "--benchmark_enable_random_interleaving=true",
                    "--benchmark_min_time=0.3")
