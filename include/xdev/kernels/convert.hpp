/// \file
/// The host `convert` between every pair of dtypes (XLA's `convert`, made total).
#pragma once

#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/half.hpp>
#include <xdev/kernels/detail/element_types.hpp>
#include <xdev/kernels/detail/rounding.hpp>
#include <xdev/kernels/parallel.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace xdev::kernels {

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

}  // namespace xdev::kernels
