/// \file
/// Reductions on the host: `sum`, `sum_axis` and `dot`, pairwise and independent of the pool.
#pragma once

#include <xdev/core/dtype.hpp>
#include <xdev/kernels/detail/element_types.hpp>
#include <xdev/kernels/detail/rounding.hpp>
#include <xdev/kernels/elementwise.hpp>
#include <xdev/kernels/parallel.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <vector>

namespace xdev::kernels {

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

}  // namespace xdev::kernels
