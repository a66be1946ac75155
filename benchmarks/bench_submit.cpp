// Submission: an empty host function through xdev (`dev.execute(f, token)`) against the same
// function posted with raw Boost.Asio to an `asio::thread_pool` of the same size, with the same
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
#include "support/countdown.hpp"
#include "support/ratio.hpp"

#include <xdev/async/use_future.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <future>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace asio = boost::asio;
using Host = xdev::backends::Host;

constexpr int batch_size = 1024;
constexpr std::int64_t latency_chunk = 64;  // round trips per chunk

// The same rule as Host's default pool size, so that both sides have as many workers.
std::size_t worker_threads() {
  return std::max<std::size_t>(2, std::thread::hardware_concurrency());
}

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

// The three configurations under test, alive together so that their chunks can interleave.
struct Fixture {
  xdev::Runtime<Host> unbounded{options(Config::unbounded)};
  xdev::Runtime<Host> default_bound{options(Config::default_bound)};
  asio::thread_pool raw{worker_threads()};
  xdev::Device<Host> dev_unbounded = unbounded.device(0);
  xdev::Device<Host> dev_default = default_bound.device(0);

  ~Fixture() { raw.join(); }
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
  auto raw = [&](std::int64_t n) {
    for (std::int64_t b = 0; b < n; ++b) {
      done.reset(batch_size);
      for (int i = 0; i < batch_size; ++i)
        post_with_callback(
            fx.raw, [] {}, on_done);
      done.wait();
    }
  };
  auto backend_direct = [&](std::int64_t n) {
    Host& backend = fx.unbounded.backend();
    for (std::int64_t b = 0; b < n; ++b) {
      done.reset(batch_size);
      for (int i = 0; i < batch_size; ++i) backend.execute(0, xdev::HostTask([] {}), xdev::Completion(on_done));
      done.wait();
    }
  };
  xdev_bench::run_interleaved(st,
                              {{"xdev_unbounded", through_xdev(fx.dev_unbounded)},
                               {"xdev_default", through_xdev(fx.dev_default)},
                               {"raw_asio", raw},
                               {"backend_direct", backend_direct}},
                              1, batch_size);
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
  auto raw = [&](std::int64_t n) {
    std::vector<std::future<void>> futures;
    futures.reserve(batch_size);
    for (std::int64_t b = 0; b < n; ++b) {
      futures.clear();
      for (int i = 0; i < batch_size; ++i) futures.push_back(asio::post(fx.raw, asio::use_future([] {})));
      for (auto& f : futures) f.get();
    }
  };
  xdev_bench::run_interleaved(st,
                              {{"xdev_unbounded", through_xdev(fx.dev_unbounded)},
                               {"xdev_default", through_xdev(fx.dev_default)},
                               {"raw_asio", raw}},
                              1, batch_size);
  st.SetItemsProcessed(st.iterations() * batch_size);
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
  auto raw = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      done.reset(1);
      post_with_callback(
          fx.raw, [] {}, on_done);
      done.wait();
    }
  };
  xdev_bench::run_interleaved(st,
                              {{"xdev_unbounded", through_xdev(fx.dev_unbounded)},
                               {"xdev_default", through_xdev(fx.dev_default)},
                               {"raw_asio", raw}},
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
  auto raw = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) asio::post(fx.raw, asio::use_future([] {})).get();
  };
  xdev_bench::run_interleaved(st,
                              {{"xdev_unbounded", through_xdev(fx.dev_unbounded)},
                               {"xdev_default", through_xdev(fx.dev_default)},
                               {"raw_asio", raw}},
                              latency_chunk);
}

void add_ratio(const std::string& group, const std::string& subject, const std::string& baseline, bool with_goal,
               const std::string& unit) {
  xdev_bench::add_ratio({.label = group + ' ' + subject + '/' + baseline,
                         .benchmark = "submit/" + group,
                         .subject = subject,
                         .baseline = baseline,
                         .kind = xdev_bench::Kind::cost,
                         .goal = with_goal ? xdev_bench::Goal::at_most : xdev_bench::Goal::none,
                         .bound = 1.5,
                         .unit = unit});
}

[[maybe_unused]] const int registered = [] {
  benchmark::RegisterBenchmark("submit/callback_batch", callback_batch)->UseManualTime();
  benchmark::RegisterBenchmark("submit/future_batch", future_batch)->UseManualTime();
  benchmark::RegisterBenchmark("submit/callback_latency", callback_latency)->UseManualTime();
  benchmark::RegisterBenchmark("submit/future_latency", future_latency)->UseManualTime();
  for (const char* group : {"callback_batch", "future_batch", "callback_latency", "future_latency"}) {
    const std::string unit = std::string_view(group).ends_with("latency") ? "round trip" : "op";
    add_ratio(group, "xdev_unbounded", "raw_asio", true, unit);
    add_ratio(group, "xdev_default", "raw_asio", true, unit);
  }
  // Where the batch cost sits: the host backend alone against raw Asio, xdev's layer over the backend.
  add_ratio("callback_batch", "backend_direct", "raw_asio", false, "op");
  add_ratio("callback_batch", "xdev_unbounded", "backend_direct", false, "op");
  return 0;
}();

}  // namespace

XDEV_BENCHMARK_MAIN("--benchmark_repetitions=5", "--benchmark_enable_random_interleaving=true",
                    "--benchmark_min_time=0.2")
