/// \file
/// The host (CPU) compute kernels of the portable operations: plain functions over raw host
/// pointers, used by the host backend and by the CPU fallback of every other backend.
///
/// Every kernel takes a `Parallel` (a worker pool, possibly none) and splits large inputs over it;
/// small inputs run on the calling thread without touching the pool. Kernels keep no pointer past
/// their return (`gemm` keeps per-thread packing buffers of its own for later calls). Pointers may
/// be null when the matching count is 0.
///
///     boost::asio::thread_pool pool(2);
///     const xdev::ops::host::Parallel par{&pool, 2};
///     std::vector<float> a(m * k), b(k * n), c(m * n);
///     xdev::ops::host::gemm(par, false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n,
///                           xdev::DType::f32);
///     float total = xdev::ops::host::sum(par, c.data(), c.size());
///
/// Determinism: `sum`, `sum_axis`, `dot`, `gemm`, `rng` and every element-wise kernel give
/// bit-identical results for a given input whatever the pool and its number of workers: work is cut
/// into pieces whose boundaries depend only on the problem size, and partial results are combined
/// in a fixed order. (`gemm` may differ between machines: it picks the widest vector instructions
/// the CPU has.)
#pragma once

#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/half.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/policy/policies.hpp>
#include <xdev/random/stream.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/// Defined to 1 when the x86-64 GEMM micro-kernels (SSE2, AVX2+FMA, AVX-512F) are compiled in.
#define XDEV_DETAIL_HOST_X86 1
/// Compiles one function for a given instruction set, whatever the flags of the translation unit;
/// such a function only runs after a CPU check (`detail::best_gemm_isa`).
#define XDEV_DETAIL_TARGET(isa) __attribute__((target(isa)))
#else
#define XDEV_DETAIL_HOST_X86 0
#endif

namespace xdev::ops::host {

/// Where kernels may run in parallel: a pool (null: everything runs serially on the calling
/// thread) and how many workers it has. A kernel uses at most `workers` threads at once: the
/// calling thread and up to `workers - 1` of the pool's, so a caller outside the pool does not
/// oversubscribe a pool sized to the machine.
struct Parallel {
  boost::asio::thread_pool* pool = nullptr;  ///< the pool to post helpers to; null for serial
  std::size_t workers = 1;                   ///< threads the pool has (0 and 1 mean serial)
};

namespace detail {

// The state one parallel_for shares with the helpers it posted. Helpers hold it by shared_ptr, so
// a helper that runs after the call returned still finds valid counters; it then claims no chunk
// and never touches `body`, which may be gone.
struct ForState {
  std::size_t n = 0;
  std::uint32_t chunks = 0;
  void* body = nullptr;
  void (*call)(void*, std::size_t, std::size_t) = nullptr;
  std::atomic<std::uint32_t> next{0};
  std::atomic<std::uint32_t> done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error{};

  [[nodiscard]] std::size_t begin(std::uint32_t i) const noexcept {
    const std::size_t q = n / chunks, r = n % chunks;
    return i * q + std::min<std::size_t>(i, r);
  }

  // Claims and runs chunks until none is left. Never waits for anything.
  void work() noexcept {
    for (;;) {
      const std::uint32_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= chunks) return;
      if (!failed.load(std::memory_order_relaxed)) {
        try {
          call(body, begin(i), begin(i + 1));
        } catch (...) {
          if (!failed.exchange(true, std::memory_order_acq_rel)) error = std::current_exception();
        }
      }
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) done.notify_all();
    }
  }

  // Waits until every chunk is done. Only chunks someone has claimed (and is running) can be
  // outstanding here, because the caller ran work() until no chunk was left.
  void wait() noexcept {
    for (std::uint32_t d = done.load(std::memory_order_acquire); d != chunks; d = done.load(std::memory_order_acquire))
      done.wait(d, std::memory_order_acquire);
  }
};

// Most chunks per worker: enough for dynamic load balancing, few enough that chunks stay large.
inline constexpr std::size_t chunks_per_worker = 4;

// The pool part of `parallel_for`, not a template (so the pool's handler machinery is instantiated
// once, not once per body): runs `chunks` (>= 2) chunks of [0, n) by `call(body, begin, end)` on
// the calling thread and up to `workers - 1` helpers posted to `pool`.
inline void run_chunks(boost::asio::thread_pool& pool, std::size_t workers, std::size_t n, std::uint32_t chunks,
                       void* body, void (*call)(void*, std::size_t, std::size_t)) {
  auto state = std::make_shared<ForState>();
  state->n = n;
  state->chunks = chunks;
  state->body = body;
  state->call = call;
  const std::size_t helpers = std::min<std::size_t>(workers - 1, chunks - 1);
  for (std::size_t h = 0; h < helpers; ++h) {
    try {
      boost::asio::post(pool, [state] { state->work(); });
    } catch (...) {  // could not post (out of memory): the threads already asked, and this one, do it all
      break;
    }
  }
  state->work();
  state->wait();
  if (state->error) std::rethrow_exception(state->error);
}

}  // namespace detail

/// Runs `f(begin, end)` on disjoint chunks covering [0, n), each of at least `grain` items (a
/// `grain` of 0 counts as 1), on the calling thread and up to `par.workers - 1` pool threads, and
/// returns when every chunk is done. Runs `f(0, n)` inline, posting nothing, when there is no
/// pool, one worker, or `n <= grain`. `f` must be safe to call concurrently on disjoint ranges.
///
/// Safe from inside the pool, even when every pool thread is inside a `parallel_for` on it: the
/// caller claims chunks itself from a shared counter and only waits for chunks other threads have
/// already claimed and are running; helpers that start after all chunks were claimed return at
/// once. So a pool thread never waits for work queued behind it.
///
/// \throws the first exception a chunk threw, after every running chunk finished; chunks not yet
/// started when a chunk throws are skipped.
template <class F>
void parallel_for(const Parallel& par, std::size_t n, std::size_t grain, F&& f) {
  if (n == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  const std::size_t workers = par.pool == nullptr ? 1 : par.workers;
  if (workers <= 1 || n <= grain) {
    f(std::size_t{0}, n);
    return;
  }
  const std::size_t max_chunks = std::min<std::size_t>(workers, std::size_t{1} << 16) * detail::chunks_per_worker;
  const auto chunks = static_cast<std::uint32_t>(std::min(n / grain, max_chunks));
  if (chunks <= 1) {
    f(std::size_t{0}, n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  detail::run_chunks(*par.pool, workers, n, chunks, const_cast<void*>(static_cast<const void*>(std::addressof(f))),
                     [](void* body, std::size_t b, std::size_t e) { (*static_cast<Fn*>(body))(b, e); });
}

namespace detail {

template <class T>
inline constexpr bool is_half = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

template <class T>
inline constexpr bool is_float = std::is_same_v<T, float> || std::is_same_v<T, double>;

/// Element types of `dot`, `gemm` and `rng`: float and double.
template <class T>
concept FloatData = is_float<T>;

/// Element types of `sum` and `sum_axis`: every dtype but bool.
template <class T>
concept SummableData = HasDType<T> && !std::is_same_v<T, bool>;

/// Index types of `gather`.
template <class I>
concept GatherIndex = std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>;

// Elements processed per parallel chunk, at least, by element-wise kernels and reductions.
inline constexpr std::size_t elementwise_grain = std::size_t{1} << 16;

// `a + b` as the portable ops define it: IEEE for floating point; computed in float and rounded
// once for f16/bf16; modulo 2^bits for integers (no signed overflow); `or` for bool.
template <class T>
constexpr T add(T a, T b) noexcept {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else if constexpr (is_half<T>) {
    return T(to_float(a) + to_float(b));
  } else {
    return a + b;
  }
}

// `a * b`, with the same conventions as `add` (`and` for bool).
template <class T>
constexpr T mul(T a, T b) noexcept {
  if constexpr (std::is_same_v<T, bool>) {
    return a && b;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else if constexpr (is_half<T>) {
    return T(to_float(a) * to_float(b));
  } else {
    return a * b;
  }
}

// The smaller of `a` and `b` as the portable ops define it: `(b < a) ? b : a`, so `a` wins ties
// (-0.0 and +0.0 included) and a NaN `a` propagates, as with std::min. f16/bf16 compare through
// float, like their `<=>`; the result is one of the inputs, bit for bit. For bool, `and`.
template <class T>
constexpr T min(T a, T b) noexcept {
  if constexpr (is_half<T>)
    return to_float(b) < to_float(a) ? b : a;
  else
    return b < a ? b : a;
}

// The larger: `(a < b) ? b : a`, with the same conventions as `min` (for bool, `or`).
template <class T>
constexpr T max(T a, T b) noexcept {
  if constexpr (is_half<T>)
    return to_float(a) < to_float(b) ? b : a;
  else
    return a < b ? b : a;
}

// `y + alpha * x`; for f16/bf16 computed in float and rounded once.
template <class T>
constexpr T axpy_one(T alpha, T x, T y) noexcept {
  if constexpr (is_half<T>)
    return T(to_float(y) + to_float(alpha) * to_float(x));
  else
    return add(y, mul(alpha, x));
}

// out[i] = op(a[i], b[i]) in blocks of 64 bytes through local arrays: the fixed-size inner loop,
// fully unrolled, is vectorized even by g++ -O2 (whose cost model skips loops of unknown count),
// and the local copies make `out == a` (or `b`) safe.
template <class T, class Op>
void map2(const T* a, const T* b, T* out, std::size_t n, Op op) noexcept {
  constexpr std::size_t w = std::max<std::size_t>(64 / sizeof(T), 8);
  std::size_t i = 0;
  for (; i + w <= n; i += w) {
    T ta[w], tb[w], r[w];
    std::memcpy(ta, a + i, sizeof ta);
    std::memcpy(tb, b + i, sizeof tb);
#pragma GCC unroll 64
    for (std::size_t j = 0; j < w; ++j) r[j] = op(ta[j], tb[j]);
    std::memcpy(out + i, r, sizeof r);
  }
  for (; i < n; ++i) out[i] = op(a[i], b[i]);
}

}  // namespace detail

/// `x[i] = value` for i < n.
template <class T>
void fill(const Parallel& par, T* x, std::size_t n, T value) {
  parallel_for(par, n, detail::elementwise_grain,
               [=](std::size_t b, std::size_t e) { std::fill(x + b, x + e, value); });
}

/// `x[i] = x[i] * alpha` for i < n (see `binary` for the arithmetic of each dtype).
template <class T>
void scale(const Parallel& par, T* x, std::size_t n, T alpha) {
  parallel_for(par, n, detail::elementwise_grain, [=](std::size_t b, std::size_t e) {
    detail::map2(x + b, x + b, x + b, e - b, [alpha](T v, T) { return detail::mul(v, alpha); });
  });
}

/// `y[i] = y[i] + alpha * x[i]` for i < n. For f16/bf16 each result is computed in float and
/// rounded once; integers wrap modulo 2^bits; for bool, `y || (alpha && x)`. `x` and `y` must not
/// overlap unless they are equal.
template <class T>
void axpy(const Parallel& par, T alpha, const T* x, T* y, std::size_t n) {
  parallel_for(par, n, detail::elementwise_grain, [=](std::size_t b, std::size_t e) {
    detail::map2(x + b, y + b, y + b, e - b, [alpha](T xv, T yv) { return detail::axpy_one(alpha, xv, yv); });
  });
}

/// `out[i] = a[i] op b[i]` for i < n. `out` may be `a` or `b` (it must not partially overlap them).
/// Arithmetic per dtype: IEEE for f32 and f64; for f16 and bf16 computed in float and rounded once
/// to nearest even (which is the correctly rounded result); integers wrap modulo 2^bits (no
/// undefined signed overflow); for bool, `add` is `or` and `mul` is `and`.
///
/// `min` and `max` select, they do not round: `min(a, b) = (b < a) ? b : a` and
/// `max(a, b) = (a < b) ? b : a`, element-wise, as `std::min` / `std::max` do. So the result is
/// always one of the inputs bit for bit; on a tie (-0.0 against +0.0 included) it is `a`; a NaN in
/// `a` propagates and a NaN in `b` does not (every comparison with NaN is false). f16 and bf16
/// compare their values (through float, as their `<=>` does); for bool, `min` is `and` and `max`
/// is `or`.
/// \throws xdev::error `errc::invalid_argument` for an unknown `BinaryOp` value.
template <class T>
void binary(const Parallel& par, BinaryOp op, const T* a, const T* b, T* out, std::size_t n) {
  switch (op) {
    case BinaryOp::add:
      return parallel_for(par, n, detail::elementwise_grain, [=](std::size_t s, std::size_t e) {
        detail::map2(a + s, b + s, out + s, e - s, [](T u, T v) { return detail::add(u, v); });
      });
    case BinaryOp::mul:
      return parallel_for(par, n, detail::elementwise_grain, [=](std::size_t s, std::size_t e) {
        detail::map2(a + s, b + s, out + s, e - s, [](T u, T v) { return detail::mul(u, v); });
      });
    case BinaryOp::min:
      return parallel_for(par, n, detail::elementwise_grain, [=](std::size_t s, std::size_t e) {
        detail::map2(a + s, b + s, out + s, e - s, [](T u, T v) { return detail::min(u, v); });
      });
    case BinaryOp::max:
      return parallel_for(par, n, detail::elementwise_grain, [=](std::size_t s, std::size_t e) {
        detail::map2(a + s, b + s, out + s, e - s, [](T u, T v) { return detail::max(u, v); });
      });
  }
  throw error(errc::invalid_argument, "binary: unknown BinaryOp value " + std::to_string(static_cast<int>(op)) +
                                          "; accepted: add (0), mul (1), min (2), max (3)");
}

// ---------------------------------------------------------------------------------------------
// Rounding to narrower floating-point types.

namespace detail {

// `d` rounded to a float with "round to odd": truncated toward zero, and if that lost anything,
// the last bit set. Rounding the result once more to a type at least 2 bits narrower than float
// (f16: 11 bits, bf16: 8 bits; float has 24) gives exactly the correctly rounded (nearest-even)
// value of `d` — unlike rounding to nearest twice, which can round a tie the wrong way.
inline float to_float_round_to_odd(double d) noexcept {
  const float f = static_cast<float>(d);
  if (d != d || static_cast<double>(f) == d) return f;  // NaN, or exact (zeros, infinities included)
  auto bits = std::bit_cast<std::uint32_t>(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --bits;  // rounded away from zero: step back
  return std::bit_cast<float>(bits | 1u);
}

// `v` as a double with round to odd (exact when |v| < 2^53), so that a later round to odd and a
// final round to nearest even round `v` correctly once.
inline double to_double_round_to_odd(std::int64_t v) noexcept {
  const std::uint64_t mag = v < 0 ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  if (mag < (std::uint64_t{1} << 53)) return static_cast<double>(v);
  const int shift = std::bit_width(mag) - 53;
  std::uint64_t kept = mag >> shift;
  if ((mag & ((std::uint64_t{1} << shift) - 1)) != 0) kept |= 1;
  const double r = std::ldexp(static_cast<double>(kept), shift);
  return v < 0 ? -r : r;
}

/// A double rounded to the nearest f16, ties to even — one correct rounding, not two (see
/// `to_float_round_to_odd`). NaNs keep their sign and stay quiet NaNs.
inline f16 to_f16(double d) noexcept {
  return xdev::to_f16(to_float_round_to_odd(d));
}

/// A double rounded to the nearest bf16, ties to even, with one correct rounding.
inline bf16 to_bf16(double d) noexcept {
  return xdev::to_bf16(to_float_round_to_odd(d));
}

// How matrix inputs are rounded before they are multiplied (autocast).
enum class Rounding : std::uint8_t { none, to_f32, to_f16, to_bf16 };

template <Rounding R, class T>
inline T round_input(T x) noexcept {
  if constexpr (R == Rounding::none) {
    return x;
  } else if constexpr (R == Rounding::to_f32) {
    return static_cast<T>(static_cast<float>(x));
  } else if constexpr (R == Rounding::to_f16) {
    if constexpr (std::is_same_v<T, float>)
      return to_float(xdev::to_f16(x));
    else
      return static_cast<T>(to_float(detail::to_f16(x)));
  } else {
    if constexpr (std::is_same_v<T, float>)
      return to_float(xdev::to_bf16(x));
    else
      return static_cast<T>(to_float(detail::to_bf16(x)));
  }
}

// The rounding `compute` asks for on data of type T: to `compute` when it is a narrower floating
// type, none when it is T or wider.
template <class T>
Rounding rounding_for(DType compute, const char* op) {
  switch (compute) {
    case DType::f16:
      return Rounding::to_f16;
    case DType::bf16:
      return Rounding::to_bf16;
    case DType::f32:
      return std::is_same_v<T, float> ? Rounding::none : Rounding::to_f32;
    case DType::f64:
      return Rounding::none;
    default:
      break;
  }
  throw error(errc::invalid_argument, std::string(op) + ": compute dtype " + std::string(name_of(compute)) +
                                          " is not accepted for " + std::string(name_of(dtype_of<T>)) +
                                          " data; accepted: f16, bf16, f32, f64");
}

// Calls f(std::integral_constant<Rounding, r>{}) for the run-time value r.
template <class F>
decltype(auto) with_rounding(Rounding r, F&& f) {
  switch (r) {
    case Rounding::to_f32:
      return f(std::integral_constant<Rounding, Rounding::to_f32>{});
    case Rounding::to_f16:
      return f(std::integral_constant<Rounding, Rounding::to_f16>{});
    case Rounding::to_bf16:
      return f(std::integral_constant<Rounding, Rounding::to_bf16>{});
    case Rounding::none:
      break;
  }
  return f(std::integral_constant<Rounding, Rounding::none>{});
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Reductions.

namespace detail {

// The type sums accumulate in: float for f16, bf16 and f32; double for f64; the unsigned type of
// the same width for integers (their sums wrap modulo 2^bits, which is associative: any order
// gives the same result).
template <class T>
struct accumulator {
  using type = T;
};
template <class T>
requires std::is_integral_v<T>
struct accumulator<T> {
  using type = std::make_unsigned_t<T>;
};
template <>
struct accumulator<f16> {
  using type = float;
};
template <>
struct accumulator<bf16> {
  using type = float;
};
template <class T>
using accumulator_t = typename accumulator<T>::type;

template <class T>
inline accumulator_t<T> widen(T x) noexcept {
  if constexpr (is_half<T>)
    return to_float(x);
  else
    return static_cast<accumulator_t<T>>(x);
}

template <class T>
inline T narrow(accumulator_t<T> a) noexcept {
  if constexpr (is_half<T>)
    return T(a);
  else
    return static_cast<T>(a);
}

// Floating-point sums are pairwise: a leaf of up to `leaf` elements is summed by 16 independent
// accumulators (a vectorizable loop; each accumulator adds leaf/16 values), which are then added
// pairwise; longer ranges are split in two halves at a multiple of 16, recursively. The error bound
// grows like eps * (leaf/16 + log2 n) instead of eps * n for a running sum. The accumulation is
// in the accumulator type of T (float for f32): pairwise summation, not a wider type, is what
// keeps the error small.
inline constexpr std::size_t sum_lanes = 16;
inline constexpr std::size_t sum_leaf = 256;
// Ranges are first cut into blocks of this many elements whose partial sums are then added
// pairwise: the cut depends only on n, so the result does not depend on the number of threads.
inline constexpr std::size_t sum_block = std::size_t{1} << 14;

// Sum of load(begin + i) for i < n, n <= sum_leaf, by sum_lanes accumulators.
template <class A, class Load>
inline A leaf_sum(const Load& load, std::size_t begin, std::size_t n) noexcept {
  constexpr std::size_t w = sum_lanes;
  if (n < w) {
    A s = 0;
    for (std::size_t i = 0; i < n; ++i) s += load(begin + i);
    return s;
  }
  A acc[w];
#pragma GCC unroll 16
  for (std::size_t j = 0; j < w; ++j) acc[j] = load(begin + j);
  std::size_t i = w;
  for (; i + w <= n; i += w)
#pragma GCC unroll 16  // unrolled, the accumulators stay in registers (and g++ -O2 vectorizes)
    for (std::size_t j = 0; j < w; ++j) acc[j] += load(begin + i + j);
  for (std::size_t j = 0; i + j < n; ++j) acc[j] += load(begin + i + j);
  for (std::size_t half = w / 2; half > 0; half /= 2)
    for (std::size_t j = 0; j < half; ++j) acc[j] += acc[j + half];
  return acc[0];
}

// The leaf of a plain sum: leaf_sum over `load`.
template <class A, class Load>
struct LoadLeaf {
  const Load& load;
  A operator()(std::size_t begin, std::size_t n) const noexcept { return leaf_sum<A>(load, begin, n); }
};

// Pairwise sum of the leaves [begin, begin + n): `leaf(b, m)` sums elements [b, b + m), m <= sum_leaf.
// Ranges longer than a leaf are split in two at a multiple of 16, recursively.
template <class A, class Leaf>
A pairwise_sum(const Leaf& leaf, std::size_t begin, std::size_t n) noexcept {
  if (n <= sum_leaf) return leaf(begin, n);
  const std::size_t m = n / 2 / sum_lanes * sum_lanes;
  return pairwise_sum<A>(leaf, begin, m) + pairwise_sum<A>(leaf, begin + m, n - m);
}

// Sum of the elements [0, n) of `leaf`: block partials (in parallel), then their pairwise sum. The
// same blocks and the same combination whatever `par` is.
template <class A, class Leaf>
A blocked_sum(const Parallel& par, std::size_t n, const Leaf& leaf) {
  if (n <= sum_block) return pairwise_sum<A>(leaf, 0, n);
  const std::size_t blocks = (n + sum_block - 1) / sum_block;
  std::vector<A> partial(blocks);
  parallel_for(par, blocks, elementwise_grain / sum_block, [&](std::size_t b, std::size_t e) {
    for (std::size_t k = b; k < e; ++k)
      partial[k] = pairwise_sum<A>(leaf, k * sum_block, std::min(sum_block, n - k * sum_block));
  });
  const auto load = [&partial](std::size_t i) { return partial[i]; };
  return pairwise_sum<A>(LoadLeaf<A, decltype(load)>{load}, 0, blocks);
}

// Rows of a leaf in sum_axis (a running sum over at most this many rows), and the width of the
// tiles of the inner dimension it works on.
inline constexpr std::size_t axis_leaf_rows = 16;
inline constexpr std::size_t axis_tile = 256;

// acc[0, w) = pairwise sum over `count` rows (stride `stride`) of x[r * stride + i], i < w.
// `tmp` has room for w * (levels of recursion) accumulators.
template <class T, class A>
void pairwise_rows(const T* x, std::size_t count, std::size_t stride, std::size_t w, A* acc, A* tmp) noexcept {
  if (count <= axis_leaf_rows) {
    for (std::size_t i = 0; i < w; ++i) acc[i] = widen(x[i]);
    for (std::size_t r = 1; r < count; ++r) {
      const T* row = x + r * stride;
      if (w == axis_tile) {  // a full tile: a constant count, which g++ -O2 vectorizes too
        for (std::size_t i = 0; i < axis_tile; ++i) acc[i] += widen(row[i]);
      } else {
        for (std::size_t i = 0; i < w; ++i) acc[i] += widen(row[i]);
      }
    }
    return;
  }
  const std::size_t h = count / 2;
  pairwise_rows(x, h, stride, w, acc, tmp);
  pairwise_rows(x + h * stride, count - h, stride, w, tmp, tmp + w);
  for (std::size_t i = 0; i < w; ++i) acc[i] += tmp[i];
}

}  // namespace detail

/// The sum of x[0, n) (0 for n = 0). Floating-point sums are pairwise in the accumulator type —
/// float for f16, bf16 and f32 (not double: the pairwise order is what bounds the error, to about
/// eps * (16 + log2 n), so 10^7 times 0.1f sums with a relative error below 1e-6, where a running
/// float sum is off by 9%), double for f64 — and the result is rounded once to T. Integer sums wrap
/// modulo 2^bits. The result is the same for any `par`.
template <detail::SummableData T>
T sum(const Parallel& par, const T* x, std::size_t n) {
  using A = detail::accumulator_t<T>;
  const auto load = [x](std::size_t i) { return detail::widen(x[i]); };
  return detail::narrow<T>(detail::blocked_sum<A>(par, n, detail::LoadLeaf<A, decltype(load)>{load}));
}

/// Sums `x`, viewed as a row-major [outer, axis, inner] array, over its middle axis into `out`, a
/// row-major [outer, inner] array: `out[o, i] = sum over a of x[o, a, i]`. Accuracy as for `sum`:
/// pairwise along the axis (with `inner == 1`, each row is summed exactly as `sum` would). The
/// result is the same for any `par`. `out` must not overlap `x`.
template <detail::SummableData T>
void sum_axis(const Parallel& par, const T* x, std::size_t outer, std::size_t axis, std::size_t inner, T* out) {
  using A = detail::accumulator_t<T>;
  if (outer == 0 || inner == 0) return;
  if (axis == 0) {
    fill(par, out, outer * inner, detail::narrow<T>(A{0}));
    return;
  }
  if (inner == 1) {
    if (outer == 1 || axis > detail::sum_block * 4) {  // long rows: each row in parallel
      for (std::size_t o = 0; o < outer; ++o) out[o] = sum(par, x + o * axis, axis);
      return;
    }
    parallel_for(par, outer, std::max<std::size_t>(1, detail::elementwise_grain / axis),
                 [=](std::size_t b, std::size_t e) {
                   for (std::size_t o = b; o < e; ++o) out[o] = sum(Parallel{}, x + o * axis, axis);
                 });
    return;
  }
  const std::size_t tiles = (inner + detail::axis_tile - 1) / detail::axis_tile;
  const std::size_t levels = static_cast<std::size_t>(std::bit_width(axis)) + 1;
  const std::size_t grain =
      std::max<std::size_t>(1, detail::elementwise_grain / (axis * std::min(inner, detail::axis_tile)));
  parallel_for(par, outer * tiles, grain, [=](std::size_t b, std::size_t e) {
    std::vector<A> buf(detail::axis_tile * (levels + 1));
    for (std::size_t t = b; t < e; ++t) {
      const std::size_t o = t / tiles, i0 = (t % tiles) * detail::axis_tile;
      const std::size_t w = std::min(detail::axis_tile, inner - i0);
      detail::pairwise_rows(x + o * axis * inner + i0, axis, inner, w, buf.data(), buf.data() + detail::axis_tile);
      for (std::size_t i = 0; i < w; ++i) out[o * inner + i0 + i] = detail::narrow<T>(buf[i]);
    }
  });
}

/// The dot product sum of x[i] * y[i] (0 for n = 0), summed pairwise like `sum` (same for any
/// `par`). `compute` is the autocast type: f16 or bf16 round every input to it first (to nearest
/// even, through `xdev::to_f16` / `to_bf16`; from double with one correct rounding), then products
/// and their sum are computed in T (f32 for float data, as autocast specifies; f64 for double data,
/// where the rounded inputs are exact too). `compute == dtype_of<T>` (or wider) means full
/// precision; f32 on double data rounds the inputs to float.
/// \throws xdev::error `errc::invalid_argument` when `compute` is not a floating-point type.
template <detail::FloatData T>
T dot(const Parallel& par, const T* x, const T* y, std::size_t n, DType compute) {
  return detail::with_rounding(detail::rounding_for<T>(compute, "dot"), [&](auto r) {
    constexpr detail::Rounding R = decltype(r)::value;
    if constexpr (R == detail::Rounding::none) {
      const auto load = [x, y](std::size_t i) { return x[i] * y[i]; };
      return detail::blocked_sum<T>(par, n, detail::LoadLeaf<T, decltype(load)>{load});
    } else {
      // Each leaf rounds its inputs into local arrays first and then sums plain products: rounding
      // inside the accumulation loop is miscompiled by g++ 12's SLP vectorizer (the double ->
      // float -> double round trip of Rounding::to_f32 is dropped at -O2 and -O3).
      const auto leaf = [x, y](std::size_t begin, std::size_t m) {
        T rx[detail::sum_leaf], ry[detail::sum_leaf];
        for (std::size_t i = 0; i < m; ++i) rx[i] = detail::round_input<R>(x[begin + i]);
        for (std::size_t i = 0; i < m; ++i) ry[i] = detail::round_input<R>(y[begin + i]);
        const auto load = [&rx, &ry](std::size_t i) { return rx[i] * ry[i]; };
        return detail::leaf_sum<T>(load, 0, m);
      };
      return detail::blocked_sum<T>(par, n, leaf);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// GEMM.

namespace detail {

// A block of 64-byte-aligned memory that each thread keeps for reuse (GEMM packing buffers), so
// that repeated calls neither allocate nor page-fault.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { release(); }

  // At least `bytes` bytes; the contents are unspecified. \throws std::bad_alloc.
  void* get(std::size_t bytes) {
    if (bytes > capacity_) {
      release();
      data_ = ::operator new (bytes, std::align_val_t{64});
      capacity_ = bytes;
    }
    return data_;
  }

 private:
  void release() noexcept {
    if (data_ != nullptr) ::operator delete (data_, std::align_val_t{64});
    data_ = nullptr;
    capacity_ = 0;
  }
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
};

// Packed panels of A (one per thread computing a block of C) and of B (one per thread calling
// gemm, shared by its helpers).
inline ScratchBuffer& gemm_buffer_a() {
  thread_local ScratchBuffer b;
  return b;
}
inline ScratchBuffer& gemm_buffer_b() {
  thread_local ScratchBuffer b;
  return b;
}

// Micro-kernel contract, for every kernel type K below: with `pa` an MR x kc panel of A packed
// column by column (pa[p * MR + i] = A(i, p)) and `pb` a kc x NR panel of B packed row by row
// (pb[p * NR + j] = B(p, j)), `K::kernel(kc, pa, pb, c, ldc, alpha, beta)` sets the MR x NR tile
// c[i * ldc + j] = alpha * (A B)(i, j) + beta * c[i * ldc + j], without reading c when beta == 0.
// Blocking: K::kc (depth of a packed panel; a kc x NR panel of B stays in L1), K::mc (rows of a
// packed block of A, kept in L2), K::nc (columns of a packed panel of B, kept in L3).

// Portable kernel: plain loops over a tile of accumulators, vectorized by the compiler as it can.
template <class T>
struct PortableKernel {
  using value_type = T;
  static constexpr std::size_t mr = 4, nr = 8, kc = 256, mc = 128, nc = 16384 / sizeof(T);
  static void kernel(std::size_t kc_, const T* pa, const T* pb, T* c, std::size_t ldc, T alpha, T beta) noexcept {
    T acc[mr][nr] = {};
    for (std::size_t p = 0; p < kc_; ++p, pa += mr, pb += nr) {
#pragma GCC unroll 8
      for (std::size_t i = 0; i < mr; ++i)
#pragma GCC unroll 16
        for (std::size_t j = 0; j < nr; ++j) acc[i][j] += pa[i] * pb[j];
    }
    for (std::size_t i = 0; i < mr; ++i)
      for (std::size_t j = 0; j < nr; ++j)
        c[i * ldc + j] = beta == T(0) ? alpha * acc[i][j] : alpha * acc[i][j] + beta * c[i * ldc + j];
  }
};

#if XDEV_DETAIL_HOST_X86

// Asks for the MR rows of a C tile (first and last element of each) while the kernel computes, so
// that its update does not wait for them at the end (measured: about 10% at n = 1024 and 2048).
template <std::size_t MR, std::size_t NR, class T>
inline void prefetch_tile(const T* c, std::size_t ldc) noexcept {
  for (std::size_t i = 0; i < MR; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + NR - 1), _MM_HINT_T0);
  }
}

// x86-64 baseline: SSE2, 4 x 8 floats (8 accumulators of 4 lanes).
struct Sse2F32 {
  using value_type = float;
  static constexpr std::size_t mr = 4, nr = 8, kc = 256, mc = 128, nc = 4096;
  static void kernel(std::size_t kc_, const float* pa, const float* pb, float* c, std::size_t ldc, float alpha,
                     float beta) noexcept {
    prefetch_tile<mr, nr>(c, ldc);
    __m128 acc[mr][2];
#pragma GCC unroll 8
    for (std::size_t i = 0; i < mr; ++i) acc[i][0] = acc[i][1] = _mm_setzero_ps();
    for (std::size_t p = 0; p < kc_; ++p, pa += mr, pb += nr) {
      const __m128 b0 = _mm_loadu_ps(pb), b1 = _mm_loadu_ps(pb + 4);
#pragma GCC unroll 8
      for (std::size_t i = 0; i < mr; ++i) {
        const __m128 a = _mm_set1_ps(pa[i]);
        acc[i][0] = _mm_add_ps(acc[i][0], _mm_mul_ps(a, b0));
        acc[i][1] = _mm_add_ps(acc[i][1], _mm_mul_ps(a, b1));
      }
    }
    const __m128 va = _mm_set1_ps(alpha), vb = _mm_set1_ps(beta);
#pragma GCC unroll 8
    for (std::size_t i = 0; i < mr; ++i)
#pragma GCC unroll 2
      for (std::size_t j = 0; j < 2; ++j) {
        float* cp = c + i * ldc + 4 * j;
        __m128 r = _mm_mul_ps(va, acc[i][j]);
        if (beta != 0.0f) r = _mm_add_ps(r, _mm_mul_ps(vb, _mm_loadu_ps(cp)));
        _mm_storeu_ps(cp, r);
      }
  }
};

// x86-64 baseline: SSE2, 4 x 4 doubles.
struct Sse2F64 {
  using value_type = double;
  static constexpr std::size_t mr = 4, nr = 4, kc = 256, mc = 128, nc = 2048;
  static void kernel(std::size_t kc_, const double* pa, const double* pb, double* c, std::size_t ldc, double alpha,
                     double beta) noexcept {
    prefetch_tile<mr, nr>(c, ldc);
    __m128d acc[mr][2];
#pragma GCC unroll 8
    for (std::size_t i = 0; i < mr; ++i) acc[i][0] = acc[i][1] = _mm_setzero_pd();
    for (std::size_t p = 0; p < kc_; ++p, pa += mr, pb += nr) {
      const __m128d b0 = _mm_loadu_pd(pb), b1 = _mm_loadu_pd(pb + 2);
#pragma GCC unroll 8
      for (std::size_t i = 0; i < mr; ++i) {
        const __m128d a = _mm_set1_pd(pa[i]);
        acc[i][0] = _mm_add_pd(acc[i][0], _mm_mul_pd(a, b0));
        acc[i][1] = _mm_add_pd(acc[i][1], _mm_mul_pd(a, b1));
      }
    }
    const __m128d va = _mm_set1_pd(alpha), vb = _mm_set1_pd(beta);
#pragma GCC unroll 8
    for (std::size_t i = 0; i < mr; ++i)
#pragma GCC unroll 2
      for (std::size_t j = 0; j < 2; ++j) {
        double* cp = c + i * ldc + 2 * j;
        __m128d r = _mm_mul_pd(va, acc[i][j]);
        if (beta != 0.0) r = _mm_add_pd(r, _mm_mul_pd(vb, _mm_loadu_pd(cp)));
        _mm_storeu_pd(cp, r);
      }
  }
};

// AVX2 + FMA: 6 x 16 floats (12 accumulators of 8 lanes, 2 loads of B and 6 broadcasts of A per
// step: 15 of the 16 vector registers).
struct Avx2F32 {
  using value_type = float;
  static constexpr std::size_t mr = 6, nr = 16, kc = 256, mc = 192, nc = 4096;
  XDEV_DETAIL_TARGET("avx2,fma")
  static void kernel(std::size_t kc_, const float* pa, const float* pb, float* c, std::size_t ldc, float alpha,
                     float beta) noexcept {
    prefetch_tile<mr, nr>(c, ldc);
    __m256 acc[mr][2];
#pragma GCC unroll 8
    for (std::size_t i = 0; i < mr; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (std::size_t p = 0; p < kc_; ++p, pa += mr, pb += nr) {
      const __m256 b0 = _mm256_loadu_ps(pb), b1 = _mm256_loadu_ps(pb + 8);
#pragma GCC unroll 8
      for (std::size_t i = 0; i < mr; ++i) {
        const __m256 a = _mm256_broadcast_ss(pa + i);
        acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
      }
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 8
    for (std::size_t i = 0; i < mr; ++i)
#pragma GCC unroll 2
      for (std::size_t j = 0; j < 2; ++j) {
        float* cp = c + i * ldc + 8 * j;
        __m256 r = _mm256_mul_ps(va, acc[i][j]);
        if (beta != 0.0f) r = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cp), r);
        _mm256_storeu_ps(cp, r);
      }
  }
};

// AVX2 + FMA: 6 x 8 doubles.
struct Avx2F64 {
  using value_type = double;
  static constexpr std::size_t mr = 6, nr = 8, kc = 256, mc = 96, nc = 2048;
  XDEV_DETAIL_TARGET("avx2,fma")
  static void kernel(std::size_t kc_, const double* pa, const double* pb, double* c, std::size_t ldc, double alpha,
                     double beta) noexcept {
    prefetch_tile<mr, nr>(c, ldc);
    __m256d acc[mr][2];
#pragma GCC unroll 8
    for (std::size_t i = 0; i < mr; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_pd();
    for (std::size_t p = 0; p < kc_; ++p, pa += mr, pb += nr) {
      const __m256d b0 = _mm256_loadu_pd(pb), b1 = _mm256_loadu_pd(pb + 4);
#pragma GCC unroll 8
      for (std::size_t i = 0; i < mr; ++i) {
        const __m256d a = _mm256_broadcast_sd(pa + i);
        acc[i][0] = _mm256_fmadd_pd(a, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_pd(a, b1, acc[i][1]);
      }
    }
    const __m256d va = _mm256_set1_pd(alpha), vb = _mm256_set1_pd(beta);
#pragma GCC unroll 8
    for (std::size_t i = 0; i < mr; ++i)
#pragma GCC unroll 2
      for (std::size_t j = 0; j < 2; ++j) {
        double* cp = c + i * ldc + 4 * j;
        __m256d r = _mm256_mul_pd(va, acc[i][j]);
        if (beta != 0.0) r = _mm256_fmadd_pd(vb, _mm256_loadu_pd(cp), r);
        _mm256_storeu_pd(cp, r);
      }
  }
};

// AVX-512F: 12 x 32 floats (24 accumulators of 16 lanes; 27 of the 32 vector registers).
struct Avx512F32 {
  using value_type = float;
  static constexpr std::size_t mr = 12, nr = 32, kc = 192, mc = 384, nc = 4096;
  XDEV_DETAIL_TARGET("avx512f")
  static void kernel(std::size_t kc_, const float* pa, const float* pb, float* c, std::size_t ldc, float alpha,
                     float beta) noexcept {
    prefetch_tile<mr, nr>(c, ldc);
    __m512 acc[mr][2];
#pragma GCC unroll 16
    for (std::size_t i = 0; i < mr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (std::size_t p = 0; p < kc_; ++p, pa += mr, pb += nr) {
      const __m512 b0 = _mm512_loadu_ps(pb), b1 = _mm512_loadu_ps(pb + 16);
#pragma GCC unroll 16
      for (std::size_t i = 0; i < mr; ++i) {
        const __m512 a = _mm512_set1_ps(pa[i]);
        acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
      }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
    for (std::size_t i = 0; i < mr; ++i)
#pragma GCC unroll 2
      for (std::size_t j = 0; j < 2; ++j) {
        float* cp = c + i * ldc + 16 * j;
        __m512 r = _mm512_mul_ps(va, acc[i][j]);
        if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cp), r);
        _mm512_storeu_ps(cp, r);
      }
  }
};

// AVX-512F: 12 x 16 doubles.
struct Avx512F64 {
  using value_type = double;
  static constexpr std::size_t mr = 12, nr = 16, kc = 192, mc = 192, nc = 2048;
  XDEV_DETAIL_TARGET("avx512f")
  static void kernel(std::size_t kc_, const double* pa, const double* pb, double* c, std::size_t ldc, double alpha,
                     double beta) noexcept {
    prefetch_tile<mr, nr>(c, ldc);
    __m512d acc[mr][2];
#pragma GCC unroll 16
    for (std::size_t i = 0; i < mr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_pd();
    for (std::size_t p = 0; p < kc_; ++p, pa += mr, pb += nr) {
      const __m512d b0 = _mm512_loadu_pd(pb), b1 = _mm512_loadu_pd(pb + 8);
#pragma GCC unroll 16
      for (std::size_t i = 0; i < mr; ++i) {
        const __m512d a = _mm512_set1_pd(pa[i]);
        acc[i][0] = _mm512_fmadd_pd(a, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_pd(a, b1, acc[i][1]);
      }
    }
    const __m512d va = _mm512_set1_pd(alpha), vb = _mm512_set1_pd(beta);
#pragma GCC unroll 16
    for (std::size_t i = 0; i < mr; ++i)
#pragma GCC unroll 2
      for (std::size_t j = 0; j < 2; ++j) {
        double* cp = c + i * ldc + 8 * j;
        __m512d r = _mm512_mul_pd(va, acc[i][j]);
        if (beta != 0.0) r = _mm512_fmadd_pd(vb, _mm512_loadu_pd(cp), r);
        _mm512_storeu_pd(cp, r);
      }
  }
};

#endif  // XDEV_DETAIL_HOST_X86

/// The GEMM micro-kernel families, from the most portable to the widest.
enum class GemmIsa : std::uint8_t {
  portable,  ///< plain C++ loops (any CPU)
  sse2,      ///< x86-64 baseline
  avx2,      ///< AVX2 + FMA
  avx512,    ///< AVX-512F
};

/// The widest kernel family this CPU (and OS) supports, detected once.
inline GemmIsa best_gemm_isa() noexcept {
#if XDEV_DETAIL_HOST_X86
  static const GemmIsa best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return GemmIsa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return GemmIsa::avx2;
    return GemmIsa::sse2;
  }();
  return best;
#else
  return GemmIsa::portable;
#endif
}

/// True when kernels of family `isa` can run on this CPU.
inline bool gemm_isa_supported(GemmIsa isa) noexcept {
  return static_cast<int>(isa) <= static_cast<int>(best_gemm_isa());
}

constexpr std::size_t ceil_div(std::size_t a, std::size_t b) noexcept {
  return (a + b - 1) / b;
}
constexpr std::size_t round_up(std::size_t a, std::size_t b) noexcept {
  return ceil_div(a, b) * b;
}

// The operands of one gemm call.
template <class T>
struct GemmProblem {
  bool trans_a, trans_b;
  std::size_t m, n, k;
  T alpha;
  const T* a;
  std::size_t lda;
  const T* b;
  std::size_t ldb;
  T beta;
  T* c;
  std::size_t ldc;
};

// Packs rows [i0, i0 + rows) x depth [p0, p0 + kc) of op(A) as MR-row panels, zero padded.
template <std::size_t MR, Rounding R, class T>
void pack_a(const GemmProblem<T>& g, std::size_t i0, std::size_t rows, std::size_t p0, std::size_t kc, T* dst) {
  for (std::size_t s = 0; s < rows; s += MR, dst += kc * MR) {
    const std::size_t mr = std::min(MR, rows - s);
    const std::size_t r0 = i0 + s;
    if (!g.trans_a) {  // A(i, p) = a[i * lda + p]: MR row streams
      if (mr == MR) {
        const T* src[MR];
        for (std::size_t i = 0; i < MR; ++i) src[i] = g.a + (r0 + i) * g.lda + p0;
        for (std::size_t p = 0; p < kc; ++p)
          for (std::size_t i = 0; i < MR; ++i) dst[p * MR + i] = round_input<R>(src[i][p]);
      } else {
        for (std::size_t p = 0; p < kc; ++p)
          for (std::size_t i = 0; i < MR; ++i)
            dst[p * MR + i] = i < mr ? round_input<R>(g.a[(r0 + i) * g.lda + p0 + p]) : T(0);
      }
    } else {  // A(i, p) = a[p * lda + i]: MR contiguous values per step
      for (std::size_t p = 0; p < kc; ++p) {
        const T* src = g.a + (p0 + p) * g.lda + r0;
        if (mr == MR) {
          for (std::size_t i = 0; i < MR; ++i) dst[p * MR + i] = round_input<R>(src[i]);
        } else {
          for (std::size_t i = 0; i < MR; ++i) dst[p * MR + i] = i < mr ? round_input<R>(src[i]) : T(0);
        }
      }
    }
  }
}

// Packs NR-column panels [s0, s1) of columns [j0, j0 + cols) x depth [p0, p0 + kc) of op(B), zero
// padded; panel s goes to dst + s * kc * NR.
template <std::size_t NR, Rounding R, class T>
void pack_b(const GemmProblem<T>& g, std::size_t j0, std::size_t cols, std::size_t p0, std::size_t kc, std::size_t s0,
            std::size_t s1, T* dst) {
  const std::size_t full_end = std::max(s0, std::min(s1, cols / NR));  // [s0, full_end): full panels
  if (!g.trans_b) {  // B(p, j) = b[p * ldb + j]: each row of B read once, left to right
    for (std::size_t p = 0; p < kc; ++p) {
      const T* src = g.b + (p0 + p) * g.ldb + j0;
      for (std::size_t s = s0; s < full_end; ++s) {
        T* d = dst + (s * kc + p) * NR;
        for (std::size_t j = 0; j < NR; ++j) d[j] = round_input<R>(src[s * NR + j]);
      }
      if (full_end < s1) {  // the last, partial panel
        const std::size_t nr = cols - full_end * NR;
        T* d = dst + (full_end * kc + p) * NR;
        for (std::size_t j = 0; j < NR; ++j) d[j] = j < nr ? round_input<R>(src[full_end * NR + j]) : T(0);
      }
    }
    return;
  }
  for (std::size_t s = s0; s < s1; ++s) {  // B(p, j) = b[j * ldb + p]: NR column streams
    T* d = dst + s * kc * NR;
    const std::size_t c0 = j0 + s * NR;
    const std::size_t nr = std::min(NR, cols - s * NR);
    for (std::size_t j = 0; j < NR; ++j) {
      if (j < nr) {
        const T* src = g.b + (c0 + j) * g.ldb + p0;
        for (std::size_t p = 0; p < kc; ++p) d[p * NR + j] = round_input<R>(src[p]);
      } else {
        for (std::size_t p = 0; p < kc; ++p) d[p * NR + j] = T(0);
      }
    }
  }
}

// C = beta * C (C = 0 when beta == 0, without reading C): gemm with alpha == 0 or k == 0.
template <class T>
void gemm_scale_c(const Parallel& par, const GemmProblem<T>& g) {
  parallel_for(par, g.m, std::max<std::size_t>(1, elementwise_grain / g.n), [&g](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      T* row = g.c + i * g.ldc;
      if (g.beta == T(0))
        std::fill(row, row + g.n, T(0));
      else
        for (std::size_t j = 0; j < g.n; ++j) row[j] *= g.beta;
    }
  });
}

// The blocked GEMM (Goto / BLIS): for each panel of NC columns and each depth block of KC, B is
// packed once into the calling thread's buffer (in parallel), then blocks of C — MC rows, possibly
// split into column groups when there are few row blocks — are computed in parallel, each task
// packing its own rows of A. Block boundaries depend only on m, n, k and the kernel (the number of
// workers only changes how many row blocks a range of MR-row panels is cut into, never the order
// of the arithmetic of any element of C), so results do not depend on `par`.
template <class K, Rounding R>
void gemm_blocked(const Parallel& par, const GemmProblem<typename K::value_type>& g) {
  using T = typename K::value_type;
  constexpr std::size_t MR = K::mr, NR = K::nr;
  const std::size_t workers = par.pool == nullptr ? 1 : std::max<std::size_t>(1, par.workers);

  const std::size_t k_blocks = ceil_div(g.k, K::kc);
  const std::size_t kc_max = ceil_div(g.k, k_blocks);  // balanced: no thin last block
  const std::size_t n_panels = ceil_div(g.n, K::nc);
  const std::size_t nc_max = round_up(ceil_div(g.n, n_panels), NR);
  const std::size_t m_panels = ceil_div(g.m, MR);
  std::size_t row_blocks = ceil_div(g.m, K::mc);
  if (workers > 1) row_blocks = std::min(round_up(row_blocks, workers), m_panels);
  const std::size_t mc = round_up(ceil_div(g.m, row_blocks), MR);
  row_blocks = ceil_div(g.m, mc);

  T* const bbuf = static_cast<T*>(gemm_buffer_b().get(kc_max * nc_max * sizeof(T)));

  for (std::size_t jc = 0; jc < g.n; jc += nc_max) {
    const std::size_t nc = std::min(nc_max, g.n - jc);
    const std::size_t n_strips = ceil_div(nc, NR);
    // Few row blocks for many workers: also split the columns (each group packs its rows of A again).
    std::size_t groups = 1;
    if (workers > 1 && row_blocks < 2 * workers)
      groups = std::max<std::size_t>(1, std::min(ceil_div(2 * workers, row_blocks), n_strips / 4));
    for (std::size_t pc = 0; pc < g.k; pc += kc_max) {
      const std::size_t kc = std::min(kc_max, g.k - pc);
      const T beta = pc == 0 ? g.beta : T(1);
      parallel_for(par, n_strips, std::max<std::size_t>(1, 32768 / (kc * NR)),
                   [&](std::size_t s0, std::size_t s1) { pack_b<NR, R>(g, jc, nc, pc, kc, s0, s1, bbuf); });
      parallel_for(par, row_blocks * groups, 1, [&](std::size_t t0, std::size_t t1) {
        for (std::size_t t = t0; t < t1; ++t) {
          const std::size_t ib = t / groups, grp = t % groups;
          const std::size_t i0 = ib * mc, rows = std::min(mc, g.m - i0);
          T* const abuf = static_cast<T*>(gemm_buffer_a().get(round_up(rows, MR) * kc * sizeof(T)));
          pack_a<MR, R>(g, i0, rows, pc, kc, abuf);
          const std::size_t s_begin = grp * n_strips / groups, s_end = (grp + 1) * n_strips / groups;
          for (std::size_t s = s_begin; s < s_end; ++s) {
            const std::size_t j0 = jc + s * NR, nr = std::min(NR, g.n - j0);
            const T* pb = bbuf + s * kc * NR;
            for (std::size_t q = 0; q < rows; q += MR) {
              const std::size_t mr = std::min(MR, rows - q);
              const T* pa = abuf + q * kc;
              T* cp = g.c + (i0 + q) * g.ldc + j0;
              if (mr == MR && nr == NR) {
                K::kernel(kc, pa, pb, cp, g.ldc, g.alpha, beta);
              } else {  // an edge tile: compute the whole tile aside, then update the part inside C
                alignas(64) T tile[MR * NR];
                K::kernel(kc, pa, pb, tile, NR, T(1), T(0));
                for (std::size_t i = 0; i < mr; ++i)
                  for (std::size_t j = 0; j < nr; ++j) {
                    T& cv = cp[i * g.ldc + j];
                    cv = beta == T(0) ? g.alpha * tile[i * NR + j] : g.alpha * tile[i * NR + j] + beta * cv;
                  }
              }
            }
          }
        }
      });
    }
  }
}

template <class T, Rounding R>
void gemm_dispatch(GemmIsa isa, const Parallel& par, const GemmProblem<T>& g) {
#if XDEV_DETAIL_HOST_X86
  constexpr bool is_f32 = std::is_same_v<T, float>;
  switch (isa) {
    case GemmIsa::avx512:
      return gemm_blocked<std::conditional_t<is_f32, Avx512F32, Avx512F64>, R>(par, g);
    case GemmIsa::avx2:
      return gemm_blocked<std::conditional_t<is_f32, Avx2F32, Avx2F64>, R>(par, g);
    case GemmIsa::sse2:
      return gemm_blocked<std::conditional_t<is_f32, Sse2F32, Sse2F64>, R>(par, g);
    case GemmIsa::portable:
      break;
  }
#else
  (void)isa;
#endif
  gemm_blocked<PortableKernel<T>, R>(par, g);
}

/// `gemm` with a chosen kernel family (for tests and benchmarks; `gemm` uses `best_gemm_isa()`).
/// \throws xdev::error `errc::unimplemented` when this CPU cannot run `isa`, and what `gemm` throws.
template <FloatData T>
void gemm_with(GemmIsa isa, const Parallel& par, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
               std::size_t k, T alpha, const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c,
               std::size_t ldc, DType compute) {
  const Rounding rounding = rounding_for<T>(compute, "gemm");
  if (!gemm_isa_supported(isa))
    throw error(errc::unimplemented, "gemm: this CPU cannot run the requested kernel family");
  if (m == 0 || n == 0) return;
  const GemmProblem<T> g{trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
  if (k == 0 || alpha == T(0)) return gemm_scale_c(par, g);
  with_rounding(rounding, [&](auto r) { gemm_dispatch<T, decltype(r)::value>(isa, par, g); });
}

}  // namespace detail

/// Row-major `C = alpha * op(A) * op(B) + beta * C`, as BLAS `?gemm` with row-major storage:
/// `op(A)` is m x k (A is stored m x k with row stride `lda`, or k x m when `trans_a`), `op(B)` is
/// k x n (stored k x n, or n x k when `trans_b`), C is m x n with row stride `ldc`. With
/// `beta == 0`, C is only written (NaNs in it do not propagate); with `alpha == 0` or `k == 0`, A
/// and B are not read. `compute` as for `dot`: f16/bf16 round each element of A and B to that
/// type while packing (autocast), products and sums are in T.
///
/// Cache-blocked (packed panels of A and B in 64-byte-aligned per-thread buffers, which each
/// thread keeps for later calls: up to ~4 MiB for B on a calling thread, ~0.3 MiB for A on each
/// thread) with a register-blocked micro-kernel chosen once for the CPU — AVX-512F (12 x 32 floats
/// / 12 x 16 doubles), AVX2 + FMA (6 x 16 / 6 x 8) or SSE2 — compiled for those instruction sets
/// with function attributes, so no `-march` flag is needed. Blocks of C are spread over `par`; the
/// result does not depend on `par`.
/// \throws xdev::error `errc::invalid_argument` when `compute` is not a floating-point type.
template <detail::FloatData T>
void gemm(const Parallel& par, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
          const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc, DType compute) {
  detail::gemm_with(detail::best_gemm_isa(), par, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                    compute);
}

// ---------------------------------------------------------------------------------------------
// Gather.

namespace detail {

template <std::size_t N>
struct uint_of_size;
template <>
struct uint_of_size<1> {
  using type = std::uint8_t;
};
template <>
struct uint_of_size<2> {
  using type = std::uint16_t;
};
template <>
struct uint_of_size<4> {
  using type = std::uint32_t;
};
template <>
struct uint_of_size<8> {
  using type = std::uint64_t;
};

// Output columns the dense lowering handles at once (kept in a local buffer of bit patterns).
inline constexpr std::size_t dense_gather_tile = 512;

}  // namespace detail

/// `out[i, :] = table[index[i], :]` for i < n, with `table` rows x cols and `out` n x cols, both
/// row-major and contiguous. `I` is `std::int32_t` or `std::int64_t`.
///
/// Every index is checked before anything is written. `dense` selects the lowering:
/// - sparse (`false`): each output row is a copy of its table row (`std::memcpy`), O(n * cols);
/// - dense (`true`): the lowering of hardware that gathers by streaming the whole table (see
///   `DenseGather`): for each output row, every table row is visited and selected with a
///   branch-free bitwise select on the element bit patterns, O(n * rows * cols). Selecting bits (not
///   multiplying by a one-hot row, which would turn -0.0 into +0.0 and spread NaN * 0) makes the
///   result bit-identical to the sparse lowering, NaN payloads and signed zeros included.
/// \throws xdev::error `errc::invalid_argument` for the first (lowest-position) index outside
/// [0, rows): "gather: index <v> at position <i> is out of range for a table of <rows> rows";
/// `out` is then untouched.
template <HasDType T, detail::GatherIndex I>
void gather(const Parallel& par, const T* table, std::size_t rows, std::size_t cols, const I* index, std::size_t n,
            T* out, bool dense) {
  std::atomic<std::size_t> first_bad{n};
  parallel_for(par, n, detail::elementwise_grain, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const I v = index[i];
      if (v < 0 || static_cast<std::make_unsigned_t<I>>(v) >= rows) {
        std::size_t seen = first_bad.load(std::memory_order_relaxed);
        while (i < seen && !first_bad.compare_exchange_weak(seen, i, std::memory_order_relaxed)) {
        }
        return;
      }
    }
  });
  if (const std::size_t i = first_bad.load(); i < n)
    throw error(errc::invalid_argument, "gather: index " + std::to_string(index[i]) + " at position " +
                                            std::to_string(i) + " is out of range for a table of " +
                                            std::to_string(rows) + " rows");
  if (n == 0 || cols == 0) return;
  const std::size_t row_bytes = cols * sizeof(T);
  if (!dense) {
    parallel_for(par, n, std::max<std::size_t>(1, detail::elementwise_grain / cols), [=](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i)
        std::memcpy(out + i * cols, table + static_cast<std::size_t>(index[i]) * cols, row_bytes);
    });
    return;
  }
  using U = typename detail::uint_of_size<sizeof(T)>::type;
  parallel_for(par, n, std::max<std::size_t>(1, detail::elementwise_grain / std::max<std::size_t>(1, rows * cols)),
               [=](std::size_t b, std::size_t e) {
                 U acc[detail::dense_gather_tile];
                 for (std::size_t i = b; i < e; ++i) {
                   const auto want = static_cast<std::size_t>(index[i]);
                   for (std::size_t c0 = 0; c0 < cols; c0 += detail::dense_gather_tile) {
                     const std::size_t w = std::min(detail::dense_gather_tile, cols - c0);
                     std::fill(acc, acc + w, U{0});
                     for (std::size_t r = 0; r < rows; ++r) {
                       const U mask = static_cast<U>(U{0} - static_cast<U>(r == want));  // all ones or zero
                       const T* src = table + r * cols + c0;
                       for (std::size_t j = 0; j < w; ++j) {
                         U bits;
                         std::memcpy(&bits, src + j, sizeof bits);
                         acc[j] = static_cast<U>((bits & mask) | (acc[j] & static_cast<U>(~mask)));
                       }
                     }
                     std::memcpy(out + i * cols + c0, acc, w * sizeof(T));
                   }
                 }
               });
}

// ---------------------------------------------------------------------------------------------
// Conversion.

namespace detail {

// float or double to an integer type: truncation toward zero, saturated at the type's limits,
// NaN to 0 (a plain C++ conversion would be undefined there).
template <class D, class F>
D float_to_int(F x) noexcept {
  if (x != x) return D{0};
  constexpr F lo = static_cast<F>(std::numeric_limits<D>::min());                 // 0 or -2^(bits-1): exact
  constexpr F hi = static_cast<F>(std::numeric_limits<D>::max() / 2 + 1) * F(2);  // 2^digits: exact
  if (x <= lo) return std::numeric_limits<D>::min();
  if (x >= hi) return std::numeric_limits<D>::max();
  return static_cast<D>(x);
}

/// One element of `convert`: see there for the rules.
template <class D, class S>
D convert_one(S x) noexcept {
  if constexpr (std::is_same_v<S, D>) {
    return x;
  } else if constexpr (std::is_same_v<D, bool>) {
    if constexpr (is_half<S>)
      return to_float(x) != 0.0f;
    else
      return x != S(0);
  } else if constexpr (std::is_same_v<S, bool>) {
    if constexpr (is_half<D>)
      return D(x ? 1.0f : 0.0f);
    else
      return static_cast<D>(x ? 1 : 0);
  } else if constexpr (is_half<S>) {
    return convert_one<D>(to_float(x));  // exact
  } else if constexpr (is_half<D>) {
    if constexpr (std::is_same_v<S, float>) {
      if constexpr (std::is_same_v<D, f16>)
        return xdev::to_f16(x);
      else
        return xdev::to_bf16(x);
    } else {
      double d;
      if constexpr (std::is_same_v<S, double>)
        d = x;
      else
        d = to_double_round_to_odd(static_cast<std::int64_t>(x));  // exact but for |i64| >= 2^53
      if constexpr (std::is_same_v<D, f16>)
        return detail::to_f16(d);
      else
        return detail::to_bf16(d);
    }
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    return float_to_int<D>(x);
  } else {
    return static_cast<D>(x);  // int -> int (modulo 2^bits), int -> float (nearest), float <-> double
  }
}

// `dst[i] = convert_one<D>(src[i])` for i < n: one piece of `convert` between different dtypes.
template <class S, class D>
void convert_piece(const void* src, void* dst, std::size_t n) noexcept {
  const S* s = static_cast<const S*>(src);
  D* d = static_cast<D*>(dst);
  for (std::size_t i = 0; i < n; ++i) d[i] = convert_one<D>(s[i]);
}

using ConvertPiece = void (*)(const void*, void*, std::size_t) noexcept;

// Calls `f(std::type_identity<T>{})` for the element type of `t` (one of the 8 dtypes).
template <class F>
decltype(auto) with_element_type(DType t, F&& f) {
  switch (t) {
    case DType::bool_:
      return f(std::type_identity<bool>{});
    case DType::u8:
      return f(std::type_identity<std::uint8_t>{});
    case DType::i32:
      return f(std::type_identity<std::int32_t>{});
    case DType::i64:
      return f(std::type_identity<std::int64_t>{});
    case DType::f16:
      return f(std::type_identity<f16>{});
    case DType::bf16:
      return f(std::type_identity<bf16>{});
    case DType::f32:
      return f(std::type_identity<float>{});
    case DType::f64:
      break;
  }
  return f(std::type_identity<double>{});
}

// The piece converting `s` to `d`, two different dtypes.
inline ConvertPiece convert_piece_for(DType s, DType d) noexcept {
  return with_element_type(s, [d]<class S>(std::type_identity<S>) {
    return with_element_type(d, []<class D>(std::type_identity<D>) -> ConvertPiece {
      if constexpr (std::is_same_v<S, D>)
        return nullptr;  // not asked: the same dtype is a copy
      else
        return &convert_piece<S, D>;
    });
  });
}

inline bool is_dtype(DType t) noexcept {
  return static_cast<unsigned>(t) <= static_cast<unsigned>(DType::f64);
}

}  // namespace detail

/// `dst[i] = D(src[i])` for i < n, for every pair of bool, uint8_t, int32_t, int64_t, f16, bf16,
/// float and double. The rules, everywhere the same (they are XLA's `convert`, made total):
/// - to f16 / bf16: round to nearest, ties to even, once: from float with `xdev::to_f16` /
///   `to_bf16`; from double and from integers with one correct rounding of the exact value (no
///   double rounding through float: the value is first rounded to float with round-to-odd, which
///   makes the final rounding exact); between f16 and bf16 through float (exact, then one rounding);
/// - to float / double: IEEE conversion (round to nearest even; exact from f16, bf16, u8, i32 to
///   double);
/// - floating to integer: truncation toward zero, saturated at the integer's limits, NaN to 0;
/// - integer to integer: modulo 2^bits (two's complement), as C++ does;
/// - to bool: `x != 0` (NaN is true); from bool: 0 or 1.
/// `src` and `dst` must not overlap (unless S and D are the same type and src == dst).
/// This overload takes the dtypes at run time (`src` holds `n` elements of `s`, `dst` of `d`): one
/// function for every pair, which the typed overload below and the erased dispatch (`AnyDevice`,
/// the CPU fallback, the host backend) share.
/// \throws xdev::error `errc::invalid_argument` when `s` or `d` is not a dtype.
inline void convert(const Parallel& par, DType s, const void* src, DType d, void* dst, std::size_t n) {
  if (!detail::is_dtype(s) || !detail::is_dtype(d))
    throw error(errc::invalid_argument, "convert: dtype value " +
                                            std::to_string(static_cast<unsigned>(detail::is_dtype(s) ? d : s)) +
                                            " is not a dtype");
  const std::size_t ss = size_of(s), ds = size_of(d);
  if (s == d) {
    if (src == dst) return;
    parallel_for(par, n, detail::elementwise_grain, [=](std::size_t b, std::size_t e) {
      std::memcpy(static_cast<std::byte*>(dst) + b * ss, static_cast<const std::byte*>(src) + b * ss, (e - b) * ss);
    });
    return;
  }
  const detail::ConvertPiece piece = detail::convert_piece_for(s, d);
  parallel_for(par, n, detail::elementwise_grain, [=](std::size_t b, std::size_t e) {
    piece(static_cast<const std::byte*>(src) + b * ss, static_cast<std::byte*>(dst) + b * ds, e - b);
  });
}

/// `convert` between element types known at compile time (it runs the overload above).
template <HasDType S, HasDType D>
void convert(const Parallel& par, const S* src, D* dst, std::size_t n) {
  convert(par, dtype_of<S>, src, dtype_of<D>, dst, n);
}

// ---------------------------------------------------------------------------------------------
// Random numbers.

/// Fills out[0, n) with element `offset`, `offset + 1`, ... of the counter-based stream
/// (algorithm `a`, `seed`) as <xdev/random/stream.hpp> defines it: uniform on [0, 1)
/// (`random::fill_uniform`) or, with `normal`, `mean + stddev * z` for standard normal z
/// (`random::fill_normal`). T is float or double. Value j consumes raw outputs from position
/// `offset + random::raw_outputs_per_value<T> * j`; chunks filled in parallel start at their own
/// position, so the result is the same for any `par`.
/// \throws xdev::error `errc::invalid_argument` for an unknown algorithm or, with `normal`, a
/// negative or NaN `stddev` (before anything is written).
template <detail::FloatData T>
void rng(const Parallel& par, T* out, std::size_t n, RngAlgorithm a, std::uint64_t seed, std::uint64_t offset,
         bool normal, T mean, T stddev) {
  // An empty fill validates the algorithm (and stddev) before any chunk runs.
  if (normal)
    random::fill_normal(a, seed, offset, std::span<T>{}, mean, stddev);
  else
    random::fill_uniform(a, seed, offset, std::span<T>{});
  constexpr std::uint64_t per_value = random::raw_outputs_per_value<T>;
  // A normal pair cut by a chunk boundary is computed by both chunks, each keeping its half.
  parallel_for(par, n, std::size_t{1} << 14, [=](std::size_t b, std::size_t e) {
    const std::uint64_t pos = offset + per_value * static_cast<std::uint64_t>(b);
    const std::span<T> part(out + b, e - b);
    if (normal)
      random::fill_normal(a, seed, pos, part, mean, stddev);
    else
      random::fill_uniform(a, seed, pos, part);
  });
}

}  // namespace xdev::ops::host
