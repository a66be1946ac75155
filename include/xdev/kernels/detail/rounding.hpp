/// \file
/// Rounding to narrower floating-point types with one correct rounding, and the input rounding of
/// autocast (shared by `dot`, `gemm` and `convert`).
#pragma once

#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/half.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

namespace xdev::kernels {

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

}  // namespace xdev::kernels
