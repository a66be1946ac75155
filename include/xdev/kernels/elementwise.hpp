/// \file
/// Element-wise host kernels: `fill`, `scale`, `axpy`, `binary` (add, mul, min, max) and `exp`, with the
/// arithmetic every backend must match (docs/ops.md).
#pragma once

#include <xdev/core/error.hpp>
#include <xdev/core/half.hpp>
#include <xdev/core/op_kind.hpp>
#include <xdev/kernels/detail/element_types.hpp>
#include <xdev/kernels/parallel.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

namespace xdev::kernels {

namespace detail {
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
void binary(const Parallel& par, ops::BinaryOp op, const T* a, const T* b, T* out, std::size_t n) {
  switch (op) {
    case ops::BinaryOp::add:
      return parallel_for(par, n, detail::elementwise_grain, [=](std::size_t s, std::size_t e) {
        detail::map2(a + s, b + s, out + s, e - s, [](T u, T v) { return detail::add(u, v); });
      });
    case ops::BinaryOp::mul:
      return parallel_for(par, n, detail::elementwise_grain, [=](std::size_t s, std::size_t e) {
        detail::map2(a + s, b + s, out + s, e - s, [](T u, T v) { return detail::mul(u, v); });
      });
    case ops::BinaryOp::min:
      return parallel_for(par, n, detail::elementwise_grain, [=](std::size_t s, std::size_t e) {
        detail::map2(a + s, b + s, out + s, e - s, [](T u, T v) { return detail::min(u, v); });
      });
    case ops::BinaryOp::max:
      return parallel_for(par, n, detail::elementwise_grain, [=](std::size_t s, std::size_t e) {
        detail::map2(a + s, b + s, out + s, e - s, [](T u, T v) { return detail::max(u, v); });
      });
  }
  throw error(errc::invalid_argument, "binary: unknown BinaryOp value " + std::to_string(static_cast<int>(op)) +
                                          "; accepted: add (0), mul (1), min (2), max (3)");
}

/// `out[i] = e^x[i]` for i < n, for float, double, f16 and bf16: `std::exp` for float and double;
/// f16 and bf16 computed in float and rounded once to nearest even. `out` may be `x`.
template <class T>
requires std::is_same_v<T, float> || std::is_same_v<T, double> || detail::is_half<T>
void exp(const Parallel& par, const T* x, T* out, std::size_t n) {
  parallel_for(par, n, detail::elementwise_grain, [=](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      if constexpr (detail::is_half<T>)
        out[i] = T(std::exp(to_float(x[i])));
      else
        out[i] = std::exp(x[i]);
    }
  });
}

}  // namespace xdev::kernels
