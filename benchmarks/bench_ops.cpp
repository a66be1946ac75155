// Host compute kernels (xdev/kernels/).
//
// gemm: single-precision C = A B (square, row-major, no transposes) at 256, 512, 1024 and 2048:
// xdev's blocked gemm on a 2-worker pool (the calling thread and one pool thread) against OpenBLAS
// cblas_sgemm with openblas_set_num_threads(2), interleaved (goal: xdev >= 0.5 x OpenBLAS), and
// against a textbook triple loop (i, j, k with a running dot product) at 256, 512 and 1024 (one call
// per repetition at 1024; none at 2048, where it would take minutes). For information, also
// single-threaded xdev against single-threaded OpenBLAS at 1024, and double precision at 1024.
// Each side reports its GFLOP/s as a counter (`<side>_GFLOPs`, 2 n^3 flops per call).
//
// OpenBLAS picks its kernel from the CPU, unless OPENBLAS_CORETYPE names one, and sizes its blocks
// from OPENBLAS_L2_SIZE when set; both are printed at start with the core OpenBLAS reports, since
// they change its speed severalfold. Without OpenBLAS (the build did not find it), the OpenBLAS
// sides are left out and "OpenBLAS not found" is printed.
//
// axpy / sum: float bandwidth at 16 MiB and 128 MiB per array against std::memcpy. Bandwidth
// counts the bytes a side reads and writes: axpy 12 per element (x and y read, y written), sum 4,
// memcpy 2 per byte copied; the memcpy side copies as many bytes as give the same traffic (1.5x
// the array for axpy, 0.5x for sum), so the ratio of times is the ratio of bandwidths (goal >= 0.8).
// `xdev` runs on the 2-worker pool, `xdev_serial` on the calling thread alone (memcpy is one
// thread).
#include "support/ratio.hpp"

#include <xdev/kernels/convert.hpp>
#include <xdev/kernels/elementwise.hpp>
#include <xdev/kernels/gemm.hpp>
#include <xdev/kernels/reduce.hpp>
#include <xdev/kernels/rng_fill.hpp>

#include <boost/asio/thread_pool.hpp>

#include <benchmark/benchmark.h>

#if defined(XDEV_BENCH_HAVE_OPENBLAS)
#if defined(__clang__)  // cblas.h uses C99 _Complex, which clang's -Wpedantic reports in C++
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wc99-extensions"
#endif
#include <cblas.h>
#if defined(__clang__)
#pragma clang diagnostic pop
#endif
#endif

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

namespace host = xdev::kernels;

constexpr std::size_t workers = 2;  // the machine's cores; OpenBLAS gets as many threads

host::Parallel pool() {
  static boost::asio::thread_pool p(workers);
  return {&p, workers};
}

#if defined(XDEV_BENCH_HAVE_OPENBLAS)
constexpr bool have_openblas = true;
#else
constexpr bool have_openblas = false;
#endif

template <class T>
std::vector<T> random_matrix(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<T> dist(-1, 1);
  std::vector<T> v(n * n);
  for (T& x : v) x = dist(gen);
  return v;
}

template <class T>
struct Matrices {
  explicit Matrices(std::size_t n) : n(n), a(random_matrix<T>(n, 1)), b(random_matrix<T>(n, 2)), c(n * n, T(0)) {}
  std::size_t n;
  std::vector<T> a, b, c;
};

template <class T>
xdev_bench::Side xdev_gemm(const char* name, Matrices<T>& m, host::Parallel par) {
  return {name, [&m, par](std::int64_t calls) {
            for (std::int64_t i = 0; i < calls; ++i) {
              host::gemm(par, false, false, m.n, m.n, m.n, T(1), m.a.data(), m.n, m.b.data(), m.n, T(0), m.c.data(),
                         m.n, xdev::dtype_of<T>);
              benchmark::ClobberMemory();
            }
          }};
}

#if defined(XDEV_BENCH_HAVE_OPENBLAS)
template <class T>
xdev_bench::Side openblas_gemm(const char* name, Matrices<T>& m, int threads) {
  return {name, [&m, threads](std::int64_t calls) {
            openblas_set_num_threads(threads);
            const auto n = static_cast<int>(m.n);
            for (std::int64_t i = 0; i < calls; ++i) {
              if constexpr (std::is_same_v<T, float>)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, m.a.data(), n, m.b.data(), n,
                            0.0f, m.c.data(), n);
              else
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, m.a.data(), n, m.b.data(), n, 0.0,
                            m.c.data(), n);
              benchmark::ClobberMemory();
            }
          }};
}
#endif

// The textbook loop: c[i][j] = sum over k of a[i][k] * b[k][j], walking B down its columns.
xdev_bench::Side naive_gemm(Matrices<float>& m) {
  return {"naive", [&m](std::int64_t calls) {
            const std::size_t n = m.n;
            for (std::int64_t c = 0; c < calls; ++c) {
              for (std::size_t i = 0; i < n; ++i)
                for (std::size_t j = 0; j < n; ++j) {
                  float s = 0;
                  for (std::size_t k = 0; k < n; ++k) s += m.a[i * n + k] * m.b[k * n + j];
                  m.c[i * n + j] = s;
                }
              benchmark::ClobberMemory();
            }
          }};
}

// GFLOP/s of each side from its `<side>_ns` counter (time per call).
void add_gflops(benchmark::State& st, const std::vector<xdev_bench::Side>& sides, std::size_t n) {
  const double flops = 2.0 * double(n) * double(n) * double(n);
  for (const auto& s : sides) {
    const double ns = st.counters[s.name + "_ns"];
    if (ns > 0) st.counters[s.name + "_GFLOPs"] = flops / ns;
  }
}

void run_gemm(benchmark::State& st, std::vector<xdev_bench::Side> sides, std::size_t n) {
  xdev_bench::run_interleaved(st, sides, 1);
  add_gflops(st, sides, n);
}

// xdev (2 workers) against OpenBLAS (2 threads).
void gemm_vs_openblas(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  Matrices<float> m(n);
  std::vector<xdev_bench::Side> sides{xdev_gemm("xdev", m, pool())};
#if defined(XDEV_BENCH_HAVE_OPENBLAS)
  sides.push_back(openblas_gemm("openblas", m, int(workers)));
#endif
  run_gemm(st, sides, n);
}

// xdev (2 workers) against the triple loop.
void gemm_vs_naive(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  Matrices<float> m(n);
  run_gemm(st, {xdev_gemm("xdev", m, pool()), naive_gemm(m)}, n);
}

// One thread each: the kernels and blocking alone, without threading.
void gemm_single_thread(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  Matrices<float> m(n);
  std::vector<xdev_bench::Side> sides{xdev_gemm("xdev", m, host::Parallel{})};
#if defined(XDEV_BENCH_HAVE_OPENBLAS)
  sides.push_back(openblas_gemm("openblas", m, 1));
#endif
  run_gemm(st, sides, n);
}

void dgemm_vs_openblas(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  Matrices<double> m(n);
  std::vector<xdev_bench::Side> sides{xdev_gemm("xdev", m, pool())};
#if defined(XDEV_BENCH_HAVE_OPENBLAS)
  sides.push_back(openblas_gemm("openblas", m, int(workers)));
#endif
  run_gemm(st, sides, n);
}

// --- Bandwidth: axpy and sum against memcpy of the same traffic.

struct Arrays {
  explicit Arrays(std::size_t n) : x(n, 1.0f), y(n, 2.0f), src(n * 4 * 3 / 2, std::byte{1}), dst(src.size()) {}
  std::vector<float> x, y;
  std::vector<std::byte> src, dst;  // memcpy's blocks, sized for the largest traffic (axpy's)
};

Arrays& arrays(std::size_t n) {
  static std::vector<std::unique_ptr<Arrays>> all;
  for (auto& a : all)
    if (a->x.size() == n) return *a;
  all.push_back(std::make_unique<Arrays>(n));
  return *all.back();
}

xdev_bench::Side memcpy_side(Arrays& a, std::size_t bytes) {
  return {"memcpy", [&a, bytes](std::int64_t calls) {
            for (std::int64_t i = 0; i < calls; ++i) {
              std::memcpy(a.dst.data(), a.src.data(), bytes);
              benchmark::ClobberMemory();
            }
          }};
}

void axpy(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  Arrays& a = arrays(n);
  auto side = [&a, n](const char* name, host::Parallel par) {
    return xdev_bench::Side{name, [&a, n, par](std::int64_t calls) {
                              for (std::int64_t i = 0; i < calls; ++i) {
                                // alternating signs keep y bounded over any number of calls
                                host::axpy(par, i % 2 ? -0.5f : 0.5f, a.x.data(), a.y.data(), n);
                                benchmark::ClobberMemory();
                              }
                            }};
  };
  const std::size_t traffic = 3 * n * sizeof(float);
  xdev_bench::run_interleaved(st, {side("xdev", pool()), side("xdev_serial", {}), memcpy_side(a, traffic / 2)}, 1, 1,
                              double(traffic));
}

void sum(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  Arrays& a = arrays(n);
  auto side = [&a, n](const char* name, host::Parallel par) {
    return xdev_bench::Side{name, [&a, n, par](std::int64_t calls) {
                              for (std::int64_t i = 0; i < calls; ++i) {
                                float s = host::sum(par, a.x.data(), n);
                                benchmark::DoNotOptimize(s);
                              }
                            }};
  };
  const std::size_t traffic = n * sizeof(float);
  xdev_bench::run_interleaved(st, {side("xdev", pool()), side("xdev_serial", {}), memcpy_side(a, traffic / 2)}, 1, 1,
                              double(traffic));
}

void add_ratio(const std::string& label, const std::string& benchmark, const char* subject, const char* baseline,
               xdev_bench::Goal goal, double bound, const char* unit) {
  xdev_bench::add_ratio({.label = label,
                         .benchmark = benchmark,
                         .subject = subject,
                         .baseline = baseline,
                         .kind = xdev_bench::Kind::speed,
                         .goal = goal,
                         .bound = bound,
                         .unit = unit});
}

#if defined(XDEV_BENCH_HAVE_OPENBLAS)
const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}
#endif

// What decides OpenBLAS's speed on this machine, printed before the table.
void describe_openblas() {
  const char* isa = "portable";
  switch (host::detail::best_gemm_isa()) {
    case host::detail::GemmIsa::avx512:
      isa = "AVX-512F";
      break;
    case host::detail::GemmIsa::avx2:
      isa = "AVX2+FMA";
      break;
    case host::detail::GemmIsa::sse2:
      isa = "SSE2";
      break;
    case host::detail::GemmIsa::portable:
      break;
  }
  benchmark::AddCustomContext("xdev_gemm_kernel", isa);
  std::printf("xdev gemm kernel: %s\n", isa);
#if defined(XDEV_BENCH_HAVE_OPENBLAS)
  openblas_set_num_threads(int(workers));
  const std::string core = openblas_get_corename();
  std::printf("OpenBLAS %s: core %s, %d threads; OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s OPENBLAS_NUM_THREADS=%s\n",
              openblas_get_config(), core.c_str(), openblas_get_num_threads(), env_or("OPENBLAS_CORETYPE", "(unset)"),
              env_or("OPENBLAS_L2_SIZE", "(unset)"), env_or("OPENBLAS_NUM_THREADS", "(unset)"));
  benchmark::AddCustomContext("openblas_core", core);
  benchmark::AddCustomContext("OPENBLAS_CORETYPE", env_or("OPENBLAS_CORETYPE", "(unset)"));
  benchmark::AddCustomContext("OPENBLAS_L2_SIZE", env_or("OPENBLAS_L2_SIZE", "(unset)"));
#else
  std::printf("OpenBLAS not found: gemm is compared with the naive loop only\n");
  benchmark::AddCustomContext("openblas_core", "OpenBLAS not found");
#endif
  std::fflush(stdout);
}

constexpr std::int64_t MiB = 1 << 20;

[[maybe_unused]] const int registered = [] {
  using xdev_bench::Goal;
  describe_openblas();
  for (std::int64_t n : {256, 512, 1024, 2048}) {
    const std::string size = std::to_string(n);
    benchmark::RegisterBenchmark("gemm/f32", gemm_vs_openblas)->Arg(n)->UseManualTime();
    if (have_openblas)
      add_ratio("gemm f32 " + size + " xdev/openblas", "gemm/f32/" + size, "xdev", "openblas", Goal::at_least, 0.5,
                "gemm");
    if (n <= 1024) {
      auto* b = benchmark::RegisterBenchmark("gemm_naive/f32", gemm_vs_naive)->Arg(n)->UseManualTime();
      if (n == 1024) b->Iterations(1)->Repetitions(3);  // a naive call takes seconds here
      add_ratio("gemm f32 " + size + " xdev/naive", "gemm_naive/f32/" + size, "xdev", "naive", Goal::none, 0, "gemm");
    }
  }
  benchmark::RegisterBenchmark("gemm_1thread/f32", gemm_single_thread)->Arg(1024)->UseManualTime();
  benchmark::RegisterBenchmark("gemm/f64", dgemm_vs_openblas)->Arg(1024)->UseManualTime();
  if (have_openblas) {
    add_ratio("gemm f32 1024 one thread xdev/openblas", "gemm_1thread/f32/1024", "xdev", "openblas", Goal::none, 0,
              "gemm");
    add_ratio("gemm f64 1024 xdev/openblas", "gemm/f64/1024", "xdev", "openblas", Goal::none, 0, "gemm");
  }
  for (std::int64_t bytes : {16 * MiB, 128 * MiB}) {
    const std::int64_t n = bytes / std::int64_t{sizeof(float)};
    const std::string arg = std::to_string(n), label = std::to_string(bytes / MiB) + "MiB";
    benchmark::RegisterBenchmark("axpy/f32", axpy)->Arg(n)->UseManualTime();
    benchmark::RegisterBenchmark("sum/f32", sum)->Arg(n)->UseManualTime();
    for (const char* op : {"axpy", "sum"}) {
      const std::string bench = std::string(op) + "/f32/" + arg;
      add_ratio(std::string(op) + ' ' + label + " bandwidth xdev/memcpy", bench, "xdev", "memcpy", Goal::at_least, 0.8,
                "call");
      add_ratio(std::string(op) + ' ' + label + " bandwidth xdev_serial/memcpy", bench, "xdev_serial", "memcpy",
                Goal::none, 0, "call");
    }
  }
  return 0;
}();

}  // namespace

XDEV_BENCHMARK_MAIN("--benchmark_repetitions=5", "--benchmark_enable_random_interleaving=true",
                    "--benchmark_min_time=0.2")
