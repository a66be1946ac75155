// What erasure and the plugin boundary cost, each against a baseline measured in the same run:
//
// - dispatch: a call through `xdev::AnyDevice` vs the same call through a plain C++ virtual
//   function (the cheapest erasure a user could write by hand) and through the typed
//   `xdev::Device<Host>` (goal: AnyDevice <= 1.1x the virtual call).
// - submit: a batch of small ops (scale of 256 floats) on the reference backend, once as a plugin
//   (`libxdev_plugin_ref.so` through the C ABI) and once typed (`Device<xdev_ref::Ref>`, the same
//   backend compiled into the program): the price of the C boundary per submitted op.
// - load: discovery + load + initialize + unload of one plugin vs a bare dlopen/dlclose of the same
//   file; and discovery over a directory of 100 files that are not plugins (none may be loaded:
//   the benchmark fails if one is), reported per file against a stat() of each file.
#include "support/ratio.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/ops.hpp>
#include <xdev/plugin/loader.hpp>
#include <xdev/plugin/plugin_backend.hpp>

#include "../plugins/reference/ref_backend.hpp"

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Host = xdev::backends::Host;

constexpr std::int64_t call_chunk = 1 << 12;
constexpr std::int64_t submit_chunk = 64;
constexpr std::size_t op_elements = 256;

xdev::Runtime<Host>& host_runtime() {
  static xdev::Runtime<Host> rt;
  return rt;
}

// ---- dispatch --------------------------------------------------------------------------------

// The hand-written erasure a user would compare against: an interface and one implementation.
struct VirtualDevice {
  virtual ~VirtualDevice() = default;
  [[nodiscard]] virtual xdev::MemoryStats memory_stats() const = 0;
};
struct VirtualHost final : VirtualDevice {
  explicit VirtualHost(xdev::Device<Host> d) : dev(d) {}
  [[nodiscard]] xdev::MemoryStats memory_stats() const override { return dev.memory_stats(); }
  xdev::Device<Host> dev;
};

void dispatch(benchmark::State& st) {
  xdev::Device<Host> typed = host_runtime().device(0);
  xdev::AnyDevice any(typed);
  std::unique_ptr<VirtualDevice> virt = std::make_unique<VirtualHost>(typed);
  benchmark::DoNotOptimize(&typed);
  benchmark::DoNotOptimize(&any);
  benchmark::DoNotOptimize(&virt);
  auto loop = [&](auto&& call) {
    return [&, call](std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) {
        benchmark::ClobberMemory();
        xdev::MemoryStats s = call();
        benchmark::DoNotOptimize(s);
      }
    };
  };
  xdev_bench::run_interleaved(st,
                              {{"any", loop([&] { return any.memory_stats(); })},
                               {"virtual", loop([&] { return virt->memory_stats(); })},
                               {"typed", loop([&] { return typed.memory_stats(); })}},
                              call_chunk);
}

// ---- submission through the plugin vs typed ----------------------------------------------------

fs::path ref_plugin_file() {
  return fs::path(XDEV_BENCH_PLUGIN_DIR) / "libxdev_plugin_ref.so";
}

void submit(benchmark::State& st) {
  std::shared_ptr<xdev::plugin::Library> lib;
  try {
    lib = xdev::plugin::load(ref_plugin_file());
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  xdev::Runtime<xdev::plugin::PluginBackend> plugin_rt({}, &lib->api(), std::shared_ptr<void>(lib));
  xdev::Runtime<xdev_ref::Ref> typed_rt;
  auto pdev = plugin_rt.device(0);
  auto tdev = typed_rt.device(0);
  auto px = xdev::empty<float>(pdev, xdev::Shape{static_cast<std::int64_t>(op_elements)});
  auto tx = xdev::empty<float>(tdev, xdev::Shape{static_cast<std::int64_t>(op_elements)});
  xdev::ops::fill(pdev, px, 1.0f).get();
  xdev::ops::fill(tdev, tx, 1.0f).get();
  auto batch = [](auto& dev, auto& x) {
    return [&dev, &x](std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) xdev::ops::scale(dev, x, 1.0f, [](std::exception_ptr) {});
      dev.synchronize();
    };
  };
  xdev_bench::run_interleaved(st, {{"plugin", batch(pdev, px)}, {"typed", batch(tdev, tx)}}, submit_chunk);
}

// ---- discovery and loading ---------------------------------------------------------------------

void load_one(benchmark::State& st) {
  const fs::path file = ref_plugin_file();
  const xdev::plugin::SearchPath path({file.parent_path()});
  auto discover_and_load = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      auto lib = xdev::plugin::find("REF", path);  // unloaded again when `lib` dies
      benchmark::DoNotOptimize(lib.get());
    }
  };
  auto bare_dlopen = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      void* h = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
      benchmark::DoNotOptimize(h);
      if (h != nullptr) ::dlclose(h);
    }
  };
  xdev_bench::run_interleaved(st, {{"discover_load", discover_and_load}, {"dlopen", bare_dlopen}}, 4);
}

// A directory of 100 files that are not plugins: text, an executable copy, empty files, and
// shared libraries without the entry symbol (copies of Google Benchmark's own library).
fs::path junk_directory() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("xdev_bench_junk_" + std::to_string(::getpid()));
    fs::create_directories(d);
    for (int i = 0; i < 100; ++i) {
      const fs::path f = d / ("libjunk_" + std::to_string(i) + ".so");
      switch (i % 4) {
        case 0: {
          std::ofstream(f) << "not a library " << i << '\n';
          break;
        }
        case 1:
          std::ofstream{f};  // empty
          break;
        case 2:
          fs::copy_file("/proc/self/exe", f, fs::copy_options::overwrite_existing);
          break;
        default: {
          std::error_code ec;
          fs::copy_file(XDEV_BENCH_NON_PLUGIN_LIBRARY, f, fs::copy_options::overwrite_existing, ec);
          if (ec) std::ofstream(f) << "x";
        }
      }
    }
    return d;
  }();
  return dir;
}

void discover_junk(benchmark::State& st) {
  const fs::path dir = junk_directory();
  const xdev::plugin::SearchPath path({dir});
  bool loaded_any = false;
  auto discover = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      auto d = xdev::plugin::discover(path);
      if (!d.plugins().empty()) loaded_any = true;
      benchmark::DoNotOptimize(d);
    }
  };
  auto stat_each = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i)
      for (const auto& e : fs::directory_iterator(dir)) {
        struct stat s {};
        benchmark::DoNotOptimize(::stat(e.path().c_str(), &s));
      }
  };
  // Per file: one discovery looks at 100 files.
  xdev_bench::run_interleaved(st, {{"discover", discover}, {"stat", stat_each}}, 2, 100);
  if (loaded_any) st.SkipWithError("a file that is not a plugin was loaded");
  for (const auto& e : fs::directory_iterator(dir))
    if (xdev::plugin::detail::image_resident(e.path())) st.SkipWithError("a junk file is mapped into the process");
}

void add(const char* name, void (*fn)(benchmark::State&), const char* subject, const char* baseline,
         xdev_bench::Goal goal, double bound, const char* unit) {
  benchmark::RegisterBenchmark(name, fn)->UseManualTime();
  xdev_bench::add_ratio({.label = std::string(name) + " " + subject + "/" + baseline,
                         .benchmark = name,
                         .subject = subject,
                         .baseline = baseline,
                         .goal = goal,
                         .bound = bound,
                         .unit = unit});
}

[[maybe_unused]] const int registered = [] {
  using xdev_bench::Goal;
  add("dispatch", dispatch, "any", "virtual", Goal::at_most, 1.1, "call");
  // The same benchmark's third side, as its own line.
  xdev_bench::add_ratio({.label = "dispatch typed/virtual",
                         .benchmark = "dispatch",
                         .subject = "typed",
                         .baseline = "virtual",
                         .unit = "call"});
  add("submit", submit, "plugin", "typed", Goal::none, 0, "op");
  add("load_one", load_one, "discover_load", "dlopen", Goal::none, 0, "load");
  add("discover_junk", discover_junk, "discover", "stat", Goal::none, 0, "file");
  return 0;
}();

}  // namespace

XDEV_BENCHMARK_MAIN("--benchmark_repetitions=5", "--benchmark_min_time=0.2")
