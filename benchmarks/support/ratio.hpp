/// \file
/// Ratio reporting for xdev's benchmarks: every figure is printed next to a baseline measured in the
/// same run, as a ratio, because absolute times on a shared machine mean little.
///
/// The sides of a comparison run inside one benchmark (`run_interleaved`), alternating short chunks
/// of each side, so that all of them see the same machine state within a millisecond; every
/// repetition of the benchmark then yields its own ratio. A benchmark file declares the ratios it
/// wants with `add_ratio` and ends with `XDEV_BENCHMARK_MAIN(default flags...)`; after Google
/// Benchmark's console table it prints one line per ratio, for example
///
///     ratio alloc_free device/direct = 1.004 (goal <= 1.02) met | device 36.1 ns/call, direct 35.9 ns/call,
///         noise +-0.6%, median of 9 reps
#pragma once

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev_bench {

/// One side of an interleaved comparison: `run(n)` performs `n` calls.
struct Side {
  std::string name{};                       ///< counters are named after it: `<name>_ns`, `<name>_bytes_per_second`
  std::function<void(std::int64_t)> run{};  ///< performs n calls
  /// Also set `<name>_cpu_ns`: the calling thread's CPU time per operation (its median chunk), for
  /// work whose rate is bound by that thread (a stream's submissions), where it moves less between
  /// runs than the elapsed time does. A ratio of two sides' CPU times names them `<name>_cpu`.
  bool thread_cpu = false;
};

namespace detail {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// `--xdev_side=NAME`: run only that side of each interleaved benchmark (empty: all of them).
inline std::string& only_side() {
  static std::string name;
  return name;
}

// The calling thread's CPU time so far, in nanoseconds.
inline double thread_cpu_ns() noexcept {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e9 + double(t.tv_nsec);
}

}  // namespace detail

/// Runs `sides` inside one benchmark, alternating chunks of `chunk` calls of each, starting each
/// iteration with the next side in turn (so no side always runs first). Chunks should take from
/// about 10 us (to dwarf the clock reads) to a few ms (to stay finer than the machine's phases).
///
/// Sets, per side, the counter `<name>_ns`: time per operation, where one call is `ops_per_call`
/// operations, from the side's median chunk (a chunk the machine interrupted, which on a shared
/// 2-core machine can take several times as long as its neighbours, does not move it; the mean
/// did, by up to +-32 % between repetitions); with `bytes_per_call`, also
/// `<name>_bytes_per_second`. The first side is the subject: its time is reported as the
/// benchmark's own (register with `->UseManualTime()`), and with `bytes_per_call` it is what
/// `SetBytesProcessed` describes.
///
/// With `--xdev_side=NAME` (run_main), only the side of that name runs, and its time is the
/// benchmark's: to profile one side without the others' samples (`perf record`). A benchmark
/// without such a side is skipped, naming the sides it has.
inline void run_interleaved(benchmark::State& st, const std::vector<Side>& sides, std::int64_t chunk,
                            double ops_per_call = 1, double bytes_per_call = 0) {
  using clock = std::chrono::steady_clock;
  std::vector<std::vector<double>> chunk_ns(sides.size());      // each chunk's time, per side
  std::vector<std::vector<double>> chunk_cpu_ns(sides.size());  // its thread CPU time, for `thread_cpu` sides
  std::size_t first = 0;
  std::size_t only = sides.size();  // the one side to run, or sides.size() for all
  if (const std::string& name = detail::only_side(); !name.empty()) {
    const auto it = std::find_if(sides.begin(), sides.end(), [&](const Side& s) { return s.name == name; });
    if (it == sides.end()) {
      std::string have;
      for (const Side& s : sides) have += (have.empty() ? "" : ", ") + s.name;
      st.SkipWithError(("--xdev_side=" + name + ": this benchmark has no such side (its sides: " + have + ")").c_str());
      return;
    }
    only = static_cast<std::size_t>(it - sides.begin());
  }
  for (auto _ : st) {
    double subject_seconds = 0;
    for (std::size_t k = 0; k < sides.size(); ++k) {
      const std::size_t i = (first + k) % sides.size();
      if (only != sides.size() && i != only) continue;
      const double cpu0 = sides[i].thread_cpu ? detail::thread_cpu_ns() : 0;
      const auto t0 = clock::now();
      sides[i].run(chunk);
      const double ns = std::chrono::duration<double, std::nano>(clock::now() - t0).count();
      if (sides[i].thread_cpu) chunk_cpu_ns[i].push_back(detail::thread_cpu_ns() - cpu0);
      chunk_ns[i].push_back(ns);  // outside the timed call, so a side's allocation count excludes it
      if (i == (only == sides.size() ? 0 : only)) subject_seconds = ns * 1e-9;
    }
    st.SetIterationTime(subject_seconds);
    first = (first + 1) % sides.size();
  }
  const double calls = double(st.iterations()) * double(chunk);
  for (std::size_t i = 0; i < sides.size(); ++i) {
    if (chunk_ns[i].empty()) continue;
    const double median_chunk = detail::median(std::move(chunk_ns[i]));
    st.counters[sides[i].name + "_ns"] = median_chunk / (double(chunk) * ops_per_call);
    if (!chunk_cpu_ns[i].empty())
      st.counters[sides[i].name + "_cpu_ns"] =
          detail::median(std::move(chunk_cpu_ns[i])) / (double(chunk) * ops_per_call);
    if (bytes_per_call > 0 && i > 0)
      st.counters[sides[i].name + "_bytes_per_second"] =
          benchmark::Counter(bytes_per_call * double(chunk) / (median_chunk * 1e-9), benchmark::Counter::kDefaults,
                             benchmark::Counter::kIs1024);
  }
  if (bytes_per_call > 0) st.SetBytesProcessed(static_cast<std::int64_t>(bytes_per_call * calls));
}

/// How a ratio is formed from the two sides' times.
enum class Kind {
  cost,   ///< subject time / baseline time: lower is better (1.0 = no overhead)
  speed,  ///< baseline time / subject time: higher is better (both sides do the same work)
};

/// What the ratio is expected to be.
enum class Goal { none, at_most, at_least };

/// One line of the ratio table: two sides of an interleaved benchmark.
struct Ratio {
  std::string label{};      ///< printed as `ratio <label> = ...`, e.g. "alloc_free device/direct"
  std::string benchmark{};  ///< registered name of the benchmark, with its arguments ("transfer/to_device/1048576")
  std::string subject{};    ///< side names, as given to run_interleaved
  std::string baseline{};
  Kind kind = Kind::cost;
  Goal goal = Goal::none;
  double bound = 0;         ///< the goal's bound
  std::string unit = "op";  ///< what one operation is, for the printout
};

/// A per-operation figure that is not a ratio (it does not depend on the machine's speed), such as
/// heap allocations per operation: one side's counter `<side>_<counter>`, with an absolute goal.
struct Figure {
  std::string label{};      ///< printed as `figure <label> = ...`
  std::string benchmark{};  ///< registered name of the benchmark
  std::string counter{};    ///< the counter's full name, e.g. "xdev_default_allocs_per_op"
  Goal goal = Goal::none;
  double bound = 0;
};

inline std::vector<Figure>& figures() {
  static std::vector<Figure> all;
  return all;
}

/// Adds a line to the figure table printed after the ratios.
inline void add_figure(Figure f) {
  figures().push_back(std::move(f));
}

inline std::vector<Ratio>& ratios() {
  static std::vector<Ratio> all;
  return all;
}

/// Adds a line to the ratio table printed after the benchmarks ran.
inline void add_ratio(Ratio r) {
  ratios().push_back(std::move(r));
}

namespace detail {

struct Samples {
  std::map<std::string, std::vector<double>> counters;  // each counter's value in each repetition
  std::string error;
};

// Coefficient of variation (stddev / mean) of the samples, 0 for fewer than two.
inline double cv(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= double(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / double(v.size() - 1)) / mean;
}

/// The console reporter, which also keeps every repetition's counters for the ratio table. When a
/// benchmark ran more than once, the console shows only its aggregates (mean, median, stddev, cv).
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  explicit CollectingReporter(OutputOptions opts) : ConsoleReporter(opts) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> shown;
    const bool has_aggregates =
        std::any_of(runs.begin(), runs.end(), [](const Run& r) { return r.run_type == Run::RT_Aggregate; });
    for (const Run& r : runs) {
      Samples& s = samples_[key(r)];
      if (r.error_occurred) {
        s.error = r.error_message;
        shown.push_back(r);
      } else if (r.run_type == Run::RT_Iteration) {
        for (const auto& [name, c] : r.counters) s.counters[name].push_back(c.value);
        if (!has_aggregates) shown.push_back(r);
      } else {
        shown.push_back(r);
      }
    }
    if (!shown.empty()) ConsoleReporter::ReportRuns(shown);
  }

  [[nodiscard]] const Samples* find(const std::string& name) const {
    auto it = samples_.find(name);
    return it == samples_.end() ? nullptr : &it->second;
  }

 private:
  static std::string key(const Run& r) {
    return r.run_name.args.empty() ? r.run_name.function_name : r.run_name.function_name + '/' + r.run_name.args;
  }
  std::map<std::string, Samples> samples_;
};

inline std::string format_time(double ns) {
  char buf[64];
  if (ns < 1e3)
    std::snprintf(buf, sizeof buf, "%.3g ns", ns);
  else if (ns < 1e6)
    std::snprintf(buf, sizeof buf, "%.3g us", ns / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3g ms", ns / 1e6);
  return buf;
}

// The console options Google Benchmark's own reporter would take from these flags (it does not
// export that computation): --benchmark_color (auto: only on a terminal) and
// --benchmark_counters_tabular; the last occurrence of a flag wins.
inline benchmark::ConsoleReporter::OutputOptions console_options(const std::vector<char*>& args) {
  std::string color = "auto";
  bool tabular = false;
  for (const char* a : args) {
    std::string_view v(a);
    if (v.starts_with("--benchmark_color=")) color = v.substr(18);
    if (v == "--benchmark_counters_tabular" || v == "--benchmark_counters_tabular=true") tabular = true;
    if (v == "--benchmark_counters_tabular=false") tabular = false;
  }
  bool use_color = false;
  if (color == "auto") {
    const char* term = std::getenv("TERM");
    use_color = isatty(fileno(stdout)) && term && std::string_view(term) != "dumb";
  } else {
    use_color = color == "true" || color == "yes" || color == "1" || color == "always";
  }
  int o = benchmark::ConsoleReporter::OO_None;
  if (use_color) o |= benchmark::ConsoleReporter::OO_Color;
  if (tabular) o |= benchmark::ConsoleReporter::OO_Tabular;
  return static_cast<benchmark::ConsoleReporter::OutputOptions>(o);
}

// Prints one ratio line; returns 1 when its goal is not met (or it could not be computed), else 0.
inline int print_ratio(const Ratio& r, const Samples* s) {
  auto series = [&](const std::string& k) -> const std::vector<double>* {
    if (!s) return nullptr;
    auto it = s->counters.find(k);
    return it == s->counters.end() || it->second.empty() ? nullptr : &it->second;
  };
  const auto* ts = series(r.subject + "_ns");
  const auto* tb = series(r.baseline + "_ns");
  if (!ts || !tb || ts->size() != tb->size()) {
    std::printf("ratio %s = n/a (%s %s)\n", r.label.c_str(), r.benchmark.c_str(),
                s && !s->error.empty() ? ("failed: " + s->error).c_str() : "did not report both sides");
    return r.goal == Goal::none ? 0 : 1;
  }
  std::vector<double> per_rep(ts->size());
  for (std::size_t i = 0; i < per_rep.size(); ++i)
    per_rep[i] = r.kind == Kind::cost ? (*ts)[i] / (*tb)[i] : (*tb)[i] / (*ts)[i];
  const double ratio = median(per_rep);
  const double noise = cv(per_rep);

  int missed = 0;
  char goal[64] = "";
  std::string verdict = " (no goal)";
  if (r.goal != Goal::none) {
    const bool met = r.goal == Goal::at_most ? ratio <= r.bound : ratio >= r.bound;
    missed = met ? 0 : 1;
    std::snprintf(goal, sizeof goal, " (goal %s %.2f)", r.goal == Goal::at_most ? "<=" : ">=", r.bound);
    verdict = met ? " met" : " NOT met";
    if (per_rep.size() > 1 && std::fabs(ratio - r.bound) < noise * ratio) verdict += " (within noise)";
  }
  char noise_text[32] = "n/a";
  if (per_rep.size() > 1) std::snprintf(noise_text, sizeof noise_text, "+-%.1f%%", 100 * noise);
  std::printf("ratio %s = %.3f%s%s | %s %s/%s, %s %s/%s, noise %s, median of %zu reps\n", r.label.c_str(), ratio, goal,
              verdict.c_str(), r.subject.c_str(), format_time(median(*ts)).c_str(), r.unit.c_str(), r.baseline.c_str(),
              format_time(median(*tb)).c_str(), r.unit.c_str(), noise_text, per_rep.size());
  return missed;
}

// Prints one figure line; returns 1 when its goal is not met (or it could not be read), else 0.
inline int print_figure(const Figure& f, const Samples* s) {
  const std::vector<double>* v = nullptr;
  if (s) {
    auto it = s->counters.find(f.counter);
    if (it != s->counters.end() && !it->second.empty()) v = &it->second;
  }
  if (!v) {
    std::printf("figure %s = n/a (%s did not report %s)\n", f.label.c_str(), f.benchmark.c_str(), f.counter.c_str());
    return f.goal == Goal::none ? 0 : 1;
  }
  const double value = median(*v);
  const double worst =
      f.goal == Goal::at_least ? *std::min_element(v->begin(), v->end()) : *std::max_element(v->begin(), v->end());
  int missed = 0;
  char goal[64] = "";
  const char* verdict = " (no goal)";
  if (f.goal != Goal::none) {
    const bool met = f.goal == Goal::at_most ? value <= f.bound : value >= f.bound;
    missed = met ? 0 : 1;
    std::snprintf(goal, sizeof goal, " (goal %s %.2f)", f.goal == Goal::at_most ? "<=" : ">=", f.bound);
    verdict = met ? " met" : " NOT met";
  }
  std::printf("figure %s = %.3f%s%s | worst rep %.3f, median of %zu reps\n", f.label.c_str(), value, goal, verdict,
              worst, v->size());
  return missed;
}

// Prints the ratio table, then the figure table; returns the number of goals not met.
inline int print_ratios(const CollectingReporter& rep) {
  int missed = 0;
  bool header = false;
  for (const Ratio& r : ratios()) {
    const Samples* s = rep.find(r.benchmark);
    if (!s) continue;  // filtered out
    if (!header) {
      std::printf(
          "\nRatios (per repetition, from sides interleaved within it; the median over repetitions, and their "
          "spread as noise):\n");
      header = true;
    }
    missed += print_ratio(r, s);
  }
  header = false;
  for (const Figure& f : figures()) {
    const Samples* s = rep.find(f.benchmark);
    if (!s) continue;
    if (!header) {
      std::printf("\nFigures (per operation, the median over repetitions):\n");
      header = true;
    }
    missed += print_figure(f, s);
  }
  return missed;
}

}  // namespace detail

/// The `main` of a benchmark executable. `defaults` are Google Benchmark flags put before the
/// user's own, which override them. Two extra flags: `--xdev_check_goals` makes the exit status 1
/// when a goal is not met (by default the table only reports); `--xdev_side=NAME` runs one side of
/// each interleaved benchmark alone (see `run_interleaved`), for a profiler, and then prints no
/// ratios (it cannot be combined with `--xdev_check_goals`). Exits with 1 when no benchmark
/// matches the filter, 2 on a malformed xdev flag.
inline int run_main(int argc, char** argv, std::vector<std::string> defaults) {
  bool check_goals = false;
  std::vector<char*> args{argv[0]};
  for (std::string& d : defaults) args.push_back(d.data());
  constexpr std::string_view side_flag = "--xdev_side=";
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    if (a == "--xdev_check_goals") {
      check_goals = true;
    } else if (a.starts_with(side_flag)) {
      detail::only_side() = a.substr(side_flag.size());
      if (detail::only_side().empty()) {
        std::fprintf(stderr, "%s: --xdev_side= needs a side's name (e.g. --xdev_side=xdev)\n", argv[0]);
        return 2;
      }
    } else {
      args.push_back(argv[i]);
    }
  }
  if (check_goals && !detail::only_side().empty()) {
    std::fprintf(stderr, "%s: --xdev_side runs one side alone, so no ratio is formed: it cannot check goals\n",
                 argv[0]);
    return 2;
  }
  detail::CollectingReporter reporter(detail::console_options(args));  // before Initialize consumes the flags
  int n = int(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  if (benchmark::RunSpecifiedBenchmarks(&reporter) == 0) {
    std::fprintf(stderr, "%s: no benchmark matches --benchmark_filter\n", argv[0]);
    benchmark::Shutdown();
    return 1;
  }
  if (!detail::only_side().empty()) {
    std::printf("\nNo ratios: --xdev_side=%s ran that side alone.\n", detail::only_side().c_str());
    benchmark::Shutdown();
    return 0;
  }
  const int missed = detail::print_ratios(reporter);
  if (missed) std::printf("%d goal(s) not met\n", missed);
  benchmark::Shutdown();
  return check_goals && missed ? 1 : 0;
}

}  // namespace xdev_bench

/// Defines `main` with the given default flags, e.g.
/// `XDEV_BENCHMARK_MAIN("--benchmark_repetitions=5", "--benchmark_min_time=0.2")`.
#define XDEV_BENCHMARK_MAIN(...)                              \
  int main(int argc, char** argv) {                           \
    return ::xdev_bench::run_main(argc, argv, {__VA_ARGS__}); \
  }
