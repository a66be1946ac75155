// Submission: an empty host function through xdev (`dev.execute(f, token)`) against the same
// function posted with raw Boost.Asio to the same `asio::thread_pool` (the host backend's), with the same
// kind of completion (a callback, or a future).
//
//   batch:   submit `batch_size` functions, then wait for all; the figure is time per operation.
//   latency: submit one function and wait for it (one round trip to a worker and back).
//
// All configurations of one benchmark run interleaved (xdev_bench::run_interleaved): a batch, or
// 64 round trips, of each in turn.
//
// xdev runs with two runtimes: `unbounded` (RuntimeOptions::max_inflight = 1<<20, so the throttle
// never blocks, as raw Asio never does) and `default` (the Host capability MaxInflight<64>, or
// XDEV_MAX_INFLIGHT). `backend_direct` calls Host::execute itself (no throttle, stream order or
// completion token): the difference between it and xdev is xdev's submission layer, the difference
// between it and raw Asio is the host backend's.
//
// `hooks_off` compares two copies of xdev built as libraries of their own (support/submit_side.cpp),
// each running callback_batch's `xdev_unbounded` submissions: with the profiler hooks compiled in
// (and no listener installed, as in every program that does not trace) and compiled out
// (XDEV_NO_PROFILER_HOOKS). `hooks/plain` is what the hooks cost when nobody listens (goal <= 1.02).
// Each copy runs its own worker pool, and the copy created first in the process measured 4-20 %
// slower than the others whatever it was, so each side has two copies, created in the order
// hooks, plain, plain, hooks after an unmeasured one (see hooks_off).
//
// The batch benchmarks also count heap allocations (every call of the global `operator new`, on
// any thread, while a side runs) and report them per operation: `<side>_allocs_per_op`, with the
// goals of at most one per callback submission and two per future submission in steady state.
#include "support/countdown.hpp"
#include "support/ratio.hpp"

#include <xdev/async/tokens.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {
std::atomic<std::uint64_t> heap_allocations{0};
}  // namespace

// support/submit_side.cpp, built twice
extern "C" void* xdev_bench_hooks_create();
extern "C" void xdev_bench_hooks_destroy(void* p);
extern "C" void xdev_bench_hooks_callback_batches(void* p, std::int64_t batches, int batch_size);
extern "C" void* xdev_bench_plain_create();
extern "C" void xdev_bench_plain_destroy(void* p);
extern "C" void xdev_bench_plain_callback_batches(void* p, std::int64_t batches, int batch_size);

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

namespace {

namespace asio = boost::asio;
using Host = xdev::backends::Host;

// Heap allocations made while each side ran, per operation.
class AllocTally {
 public:
  // `f` with its allocations counted under `side`.
  std::function<void(std::int64_t)> counted(const std::string& side, std::function<void(std::int64_t)> f,
                                            double ops_per_call) {
    return [this, side, f = std::move(f), ops_per_call](std::int64_t n) {
      const std::uint64_t before = heap_allocations.load(std::memory_order_relaxed);
      f(n);
      tallies_[side].allocs += heap_allocations.load(std::memory_order_relaxed) - before;
      tallies_[side].ops += double(n) * ops_per_call;
    };
  }
  void report(benchmark::State& st) const {
    for (const auto& [side, t] : tallies_)
      if (t.ops > 0) st.counters[side + "_allocs_per_op"] = double(t.allocs) / t.ops;
  }

 private:
  struct tally {
    std::uint64_t allocs = 0;
    double ops = 0;
  };
  std::map<std::string, tally> tallies_;
};

constexpr int batch_size = 1024;
constexpr std::int64_t latency_chunk = 64;  // round trips per chunk

enum class Config { unbounded, default_bound };

xdev::RuntimeOptions options(Config c) {
  xdev::RuntimeOptions o;
  if (c == Config::unbounded) o.max_inflight = std::size_t{1} << 20;
  return o;
}

using xdev_bench::Countdown;

// Raw Asio with xdev's completion shape: the handler gets the exception the function threw.
template <class F, class Handler>
void post_with_callback(asio::thread_pool& pool, F f, Handler h) {
  asio::post(pool, [f = std::move(f), h = std::move(h)]() mutable {
    std::exception_ptr ep;
    try {
      f();
    } catch (...) {
      ep = std::current_exception();
    }
    h(std::move(ep));
  });
}

// The configurations under test, alive together so that their chunks can interleave. Raw Asio
// posts to the worker pool of the runtime it is compared with (`raw_asio`: the unbounded
// runtime's host backend, `raw_asio_default`: the default runtime's): the same threads, so that
// the comparison is not also one between two pools' states in the OS scheduler (with two pools of
// idle threads, which one wakes faster flipped from run to run, and one-at-a-time round trips
// moved by +-60 to 85%).
struct Fixture {
  xdev::Runtime<Host> unbounded{options(Config::unbounded)};
  xdev::Runtime<Host> default_bound{options(Config::default_bound)};
  asio::thread_pool& raw = xdev::backends::detail::worker_pool(unbounded.backend());
  asio::thread_pool& raw_default = xdev::backends::detail::worker_pool(default_bound.backend());
  xdev::Device<Host> dev_unbounded = unbounded.device(0);
  xdev::Device<Host> dev_default = default_bound.device(0);

  bool check(benchmark::State& st) const {
    if (dev_unbounded.max_inflight() == (std::size_t{1} << 20)) return true;
    st.SkipWithError("the unbounded runtime did not get max_inflight = 1<<20");
    return false;
  }
};

// --- callback, batch: n batches of batch_size submissions, each batch waited for as a whole.

void callback_batch(benchmark::State& st) {
  Fixture fx;
  if (!fx.check(st)) return;
  Countdown done;
  auto on_done = [&done](std::exception_ptr) { done.count_down(); };
  auto through_xdev = [&](const xdev::Device<Host>& dev) {
    return [&, dev](std::int64_t n) {
      for (std::int64_t b = 0; b < n; ++b) {
        done.reset(batch_size);
        for (int i = 0; i < batch_size; ++i) dev.execute([] {}, on_done);
        done.wait();
      }
    };
  };
  auto raw_on = [&](asio::thread_pool& pool) {
    return [&](std::int64_t n) {
      for (std::int64_t b = 0; b < n; ++b) {
        done.reset(batch_size);
        for (int i = 0; i < batch_size; ++i)
          post_with_callback(
              pool, [] {}, on_done);
        done.wait();
      }
    };
  };
  auto backend_direct = [&](std::int64_t n) {
    Host& backend = fx.unbounded.backend();
    for (std::int64_t b = 0; b < n; ++b) {
      done.reset(batch_size);
      for (int i = 0; i < batch_size; ++i) backend.execute(0, xdev::HostTask([] {}), xdev::Completion(on_done));
      done.wait();
    }
  };
  AllocTally tally;
  xdev_bench::run_interleaved(
      st,
      {{"xdev_unbounded", tally.counted("xdev_unbounded", through_xdev(fx.dev_unbounded), batch_size)},
       {"xdev_default", tally.counted("xdev_default", through_xdev(fx.dev_default), batch_size)},
       {"raw_asio", tally.counted("raw_asio", raw_on(fx.raw), batch_size)},
       {"raw_asio_default", tally.counted("raw_asio_default", raw_on(fx.raw_default), batch_size)},
       {"backend_direct", tally.counted("backend_direct", backend_direct, batch_size)}},
      1, batch_size);
  st.SetItemsProcessed(st.iterations() * batch_size);
  tally.report(st);
}

// --- hooks off: what the profiler hooks cost when nobody listens

// Two copies of each side (support/submit_side.cpp), created in the order hooks, plain, plain,
// hooks after one copy that is never measured: the first copy created in the process measured
// 4-20 % slower than the others whatever it was (so it is the unmeasured one), and the order
// balances what creation order does beyond that. `hooks_ns` and `plain_ns` are the geometric
// means of each side's two copies; the copies' own figures stay in the output. Nine repetitions
// of a second each: at the default 0.2 s the ratio's noise was +-1.6-6.9 %, wider than the
// distance to its goal; at a second it is +-0.9-1.0 %.
void hooks_off(benchmark::State& st) {
  using Handle = std::unique_ptr<void, void (*)(void*)>;
  const Handle unmeasured(xdev_bench_plain_create(), &xdev_bench_plain_destroy);
  const Handle hooks_1(xdev_bench_hooks_create(), &xdev_bench_hooks_destroy);
  const Handle plain_1(xdev_bench_plain_create(), &xdev_bench_plain_destroy);
  const Handle plain_2(xdev_bench_plain_create(), &xdev_bench_plain_destroy);
  const Handle hooks_2(xdev_bench_hooks_create(), &xdev_bench_hooks_destroy);
  auto hooks = [](void* side) {
    return [side](std::int64_t n) { xdev_bench_hooks_callback_batches(side, n, batch_size); };
  };
  auto plain = [](void* side) {
    return [side](std::int64_t n) { xdev_bench_plain_callback_batches(side, n, batch_size); };
  };
  xdev_bench::run_interleaved(st,
                              {{"hooks_1", hooks(hooks_1.get())},
                               {"plain_1", plain(plain_1.get())},
                               {"plain_2", plain(plain_2.get())},
                               {"hooks_2", hooks(hooks_2.get())}},
                              1, batch_size);
  const auto mean = [&](const char* a, const char* b) {
    return std::sqrt(st.counters[a].value * st.counters[b].value);
  };
  st.counters["hooks_ns"] = mean("hooks_1_ns", "hooks_2_ns");
  st.counters["plain_ns"] = mean("plain_1_ns", "plain_2_ns");
  st.SetItemsProcessed(st.iterations() * batch_size);
}

// --- future, batch

void future_batch(benchmark::State& st) {
  Fixture fx;
  if (!fx.check(st)) return;
  auto through_xdev = [&](const xdev::Device<Host>& dev) {
    return [dev](std::int64_t n) {
      std::vector<xdev::Future<void>> futures;  // what xdev::use_future returns, kept as is (not sliced)
      futures.reserve(batch_size);
      for (std::int64_t b = 0; b < n; ++b) {
        futures.clear();
        for (int i = 0; i < batch_size; ++i) futures.push_back(dev.execute([] {}, xdev::use_future));
        for (auto& f : futures) f.get();
      }
    };
  };
  auto raw_on = [&](asio::thread_pool& pool) {
    return [&pool](std::int64_t n) {
      std::vector<std::future<void>> futures;
      futures.reserve(batch_size);
      for (std::int64_t b = 0; b < n; ++b) {
        futures.clear();
        for (int i = 0; i < batch_size; ++i) futures.push_back(asio::post(pool, asio::use_future([] {})));
        for (auto& f : futures) f.get();
      }
    };
  };
  AllocTally tally;
  xdev_bench::run_interleaved(
      st,
      {{"xdev_unbounded", tally.counted("xdev_unbounded", through_xdev(fx.dev_unbounded), batch_size)},
       {"xdev_default", tally.counted("xdev_default", through_xdev(fx.dev_default), batch_size)},
       {"raw_asio", tally.counted("raw_asio", raw_on(fx.raw), batch_size)},
       {"raw_asio_default", tally.counted("raw_asio_default", raw_on(fx.raw_default), batch_size)}},
      1, batch_size);
  st.SetItemsProcessed(st.iterations() * batch_size);
  tally.report(st);
}

// --- callback, one round trip at a time

void callback_latency(benchmark::State& st) {
  Fixture fx;
  if (!fx.check(st)) return;
  Countdown done;
  auto on_done = [&done](std::exception_ptr) { done.count_down(); };
  auto through_xdev = [&](const xdev::Device<Host>& dev) {
    return [&, dev](std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) {
        done.reset(1);
        dev.execute([] {}, on_done);
        done.wait();
      }
    };
  };
  auto raw_on = [&](asio::thread_pool& pool) {
    return [&](std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) {
        done.reset(1);
        post_with_callback(
            pool, [] {}, on_done);
        done.wait();
      }
    };
  };
  xdev_bench::run_interleaved(st,
                              {{"xdev_unbounded", through_xdev(fx.dev_unbounded)},
                               {"xdev_default", through_xdev(fx.dev_default)},
                               {"raw_asio", raw_on(fx.raw)},
                               {"raw_asio_default", raw_on(fx.raw_default)}},
                              latency_chunk);
}

// --- future, one round trip at a time

void future_latency(benchmark::State& st) {
  Fixture fx;
  if (!fx.check(st)) return;
  auto through_xdev = [&](const xdev::Device<Host>& dev) {
    return [dev](std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) dev.execute([] {}, xdev::use_future).get();
    };
  };
  auto raw_on = [&](asio::thread_pool& pool) {
    return [&pool](std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) asio::post(pool, asio::use_future([] {})).get();
    };
  };
  xdev_bench::run_interleaved(st,
                              {{"xdev_unbounded", through_xdev(fx.dev_unbounded)},
                               {"xdev_default", through_xdev(fx.dev_default)},
                               {"raw_asio", raw_on(fx.raw)},
                               {"raw_asio_default", raw_on(fx.raw_default)}},
                              latency_chunk);
}

void add_ratio(const std::string& group, const std::string& subject, const std::string& baseline, bool with_goal,
               const std::string& unit, double bound = 1.5) {
  xdev_bench::add_ratio({.label = group + ' ' + subject + '/' + baseline,
                         .benchmark = "submit/" + group,
                         .subject = subject,
                         .baseline = baseline,
                         .kind = xdev_bench::Kind::cost,
                         .goal = with_goal ? xdev_bench::Goal::at_most : xdev_bench::Goal::none,
                         .bound = bound,
                         .unit = unit});
}

[[maybe_unused]] const int registered = [] {
  benchmark::RegisterBenchmark("submit/callback_batch", callback_batch)->UseManualTime();
  benchmark::RegisterBenchmark("submit/hooks_off", hooks_off)->UseManualTime()->MinTime(1.0)->Repetitions(9);
  benchmark::RegisterBenchmark("submit/future_batch", future_batch)->UseManualTime();
  benchmark::RegisterBenchmark("submit/callback_latency", callback_latency)->UseManualTime();
  benchmark::RegisterBenchmark("submit/future_latency", future_latency)->UseManualTime();
  for (const char* group : {"callback_batch", "future_batch", "callback_latency", "future_latency"}) {
    const std::string unit = std::string_view(group).ends_with("latency") ? "round trip" : "op";
    // A batch of futures is what a training step's host loop does: its goal is the tighter one.
    const double bound = std::string_view(group) == "future_batch" ? 1.2 : 1.5;
    add_ratio(group, "xdev_unbounded", "raw_asio", true, unit, bound);
    add_ratio(group, "xdev_default", "raw_asio_default", true, unit, bound);
  }
  for (const char* side : {"xdev_unbounded", "xdev_default", "raw_asio", "raw_asio_default"}) {
    const bool xdev_side = std::string_view(side).starts_with("xdev");
    xdev_bench::add_figure({.label = std::string("callback_batch ") + side + " heap allocations/op",
                            .benchmark = "submit/callback_batch",
                            .counter = std::string(side) + "_allocs_per_op",
                            .goal = xdev_side ? xdev_bench::Goal::at_most : xdev_bench::Goal::none,
                            .bound = 1});
    xdev_bench::add_figure({.label = std::string("future_batch ") + side + " heap allocations/op",
                            .benchmark = "submit/future_batch",
                            .counter = std::string(side) + "_allocs_per_op",
                            .goal = xdev_side ? xdev_bench::Goal::at_most : xdev_bench::Goal::none,
                            .bound = 2});
  }
  // Where the batch cost sits: the host backend alone against raw Asio, xdev's layer over the backend.
  // What the profiler hooks cost with no listener installed: the same submissions with the hooks compiled out.
  add_ratio("hooks_off", "hooks", "plain", true, "op", 1.02);
  add_ratio("callback_batch", "backend_direct", "raw_asio", false, "op");
  add_ratio("callback_batch", "xdev_unbounded", "backend_direct", false, "op");
  return 0;
}();

}  // namespace

XDEV_BENCHMARK_MAIN("--benchmark_repetitions=5", "--benchmark_enable_random_interleaving=true",
                    "--benchmark_min_time=0.2")
