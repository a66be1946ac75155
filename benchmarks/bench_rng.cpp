// Counter-based generation: throughput of xdev::random::fill_bits (Philox4x32-10, Threefry2x32-20)
// against std::mt19937 producing the same number of 32-bit values into a vector, and of
// fill_uniform / fill_normal (Philox, float) against std::uniform_real_distribution<float> and
// std::normal_distribution<float> driven by std::mt19937.
//
// One call of a side writes `n` values into its own pre-allocated, pre-touched vector. The xdev
// sides advance their stream offset from call to call and the mt19937 sides keep their engine, so
// no call repeats the previous one's work. The sides of a comparison run interleaved inside one
// benchmark (xdev_bench::run_interleaved), so they see the same machine state, and each repetition
// yields its own ratio. Sizes: 64 Ki values (256 KiB of u32, cache-resident: the generators' own
// speed, where the goal applies) and 1 Mi values (4 MiB: with memory traffic, for information).
#include "support/ratio.hpp"

#include <xdev/random/stream.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using xdev::RngAlgorithm;

constexpr std::uint64_t seed = 0x243f6a8885a308d3;
constexpr std::int64_t small = std::int64_t{1} << 16;  // values: 256 KiB of u32
constexpr std::int64_t large = std::int64_t{1} << 20;  // 4 MiB

template <class T>
std::vector<T> touched(std::size_t n) {
  std::vector<T> v(n, T{1});
  benchmark::DoNotOptimize(v.data());
  return v;
}

// A side that fills `out` from an xdev stream, advancing the offset by what each call consumed.
template <class T, class Fill>
xdev_bench::Side xdev_side(const char* name, std::vector<T>& out, Fill fill) {
  return {name, [&out, fill, offset = std::uint64_t{0}](std::int64_t calls) mutable {
            for (std::int64_t c = 0; c < calls; ++c) {
              fill(offset, std::span<T>(out));
              offset += out.size() * xdev::random::raw_outputs_per_value<T>;
              benchmark::DoNotOptimize(out.data());
              benchmark::ClobberMemory();
            }
          }};
}

// A side that fills `out` with `draw()` element by element, the way std::mt19937 is used.
template <class T, class Draw>
xdev_bench::Side std_side(const char* name, std::vector<T>& out, Draw draw) {
  return {name, [&out, draw](std::int64_t calls) mutable {
            for (std::int64_t c = 0; c < calls; ++c) {
              for (T& v : out) v = draw();
              benchmark::DoNotOptimize(out.data());
              benchmark::ClobberMemory();
            }
          }};
}

// --- Raw 32-bit outputs: Philox, Threefry and mt19937 side by side.

void bits(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  auto p = touched<std::uint32_t>(n), t = touched<std::uint32_t>(n), m = touched<std::uint32_t>(n);
  std::mt19937 gen(static_cast<std::uint32_t>(seed));
  xdev_bench::run_interleaved(st,
                              {xdev_side("philox", p,
                                         [](std::uint64_t off, std::span<std::uint32_t> out) {
                                           xdev::random::fill_bits(RngAlgorithm::philox, seed, off, out);
                                         }),
                               xdev_side("threefry", t,
                                         [](std::uint64_t off, std::span<std::uint32_t> out) {
                                           xdev::random::fill_bits(RngAlgorithm::three_fry, seed, off, out);
                                         }),
                               std_side("mt19937", m, [&gen] { return static_cast<std::uint32_t>(gen()); })},
                              1, double(n), double(n * sizeof(std::uint32_t)));
}

// --- Uniform floats on [0, 1).

void uniform(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  auto p = touched<float>(n), m = touched<float>(n);
  std::mt19937 gen(static_cast<std::uint32_t>(seed));
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  xdev_bench::run_interleaved(st,
                              {xdev_side("philox", p,
                                         [](std::uint64_t off, std::span<float> out) {
                                           xdev::random::fill_uniform(RngAlgorithm::philox, seed, off, out);
                                         }),
                               std_side("mt19937", m, [&gen, &dist] { return dist(gen); })},
                              1, double(n), double(n * sizeof(float)));
}

// --- Standard normal floats.

void normal(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  auto p = touched<float>(n), m = touched<float>(n);
  std::mt19937 gen(static_cast<std::uint32_t>(seed));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  xdev_bench::run_interleaved(st,
                              {xdev_side("philox", p,
                                         [](std::uint64_t off, std::span<float> out) {
                                           xdev::random::fill_normal(RngAlgorithm::philox, seed, off, out);
                                         }),
                               std_side("mt19937", m, [&gen, &dist] { return dist(gen); })},
                              1, double(n), double(n * sizeof(float)));
}

std::string size_label(std::int64_t n) {
  return n >= (1 << 20) ? std::to_string(n >> 20) + "Mi" : std::to_string(n >> 10) + "Ki";
}

void add_ratio(const std::string& what, std::int64_t n, const char* subject, const char* baseline,
               xdev_bench::Goal goal, double bound) {
  xdev_bench::add_ratio({.label = what + ' ' + size_label(n) + ' ' + subject + '/' + baseline,
                         .benchmark = "rng/" + what + '/' + std::to_string(n),
                         .subject = subject,
                         .baseline = baseline,
                         .kind = xdev_bench::Kind::speed,
                         .goal = goal,
                         .bound = bound,
                         .unit = "value"});
}

[[maybe_unused]] const int registered = [] {
  using xdev_bench::Goal;
  for (std::int64_t n : {small, large}) {
    benchmark::RegisterBenchmark("rng/bits", bits)->Arg(n)->UseManualTime();
    benchmark::RegisterBenchmark("rng/uniform", uniform)->Arg(n)->UseManualTime();
    benchmark::RegisterBenchmark("rng/normal", normal)->Arg(n)->UseManualTime();
    // The goal is for the cache-resident size, where the generators alone are measured.
    const Goal goal = n == small ? Goal::at_least : Goal::none;
    add_ratio("bits", n, "philox", "mt19937", goal, 2.0);
    add_ratio("bits", n, "threefry", "mt19937", goal, 2.0);
    add_ratio("uniform", n, "philox", "mt19937", Goal::none, 0);
    add_ratio("normal", n, "philox", "mt19937", Goal::none, 0);
  }
  return 0;
}();

}  // namespace

XDEV_BENCHMARK_MAIN("--benchmark_repetitions=9", "--benchmark_enable_random_interleaving=true",
                    "--benchmark_min_time=0.2")
