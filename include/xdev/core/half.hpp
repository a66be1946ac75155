/// \file
/// `xdev::f16` (IEEE 754 binary16) and `xdev::bf16` (bfloat16): 16-bit floating point storage types.
///
/// Both are plain 16-bit patterns (`bits`) that convert to and from `float`; arithmetic happens in
/// `float`. Nothing here depends on the compiler's `_Float16` or `__bf16`, so the bit patterns and
/// the rounding are the same on every compiler and target, and every conversion is `constexpr`.
///
///     xdev::f16 h = xdev::to_f16(0.1f);      // rounded to nearest, ties to even: bits 0x2E66
///     float x = xdev::to_float(h);           // exact: 0.0999755859375f
///     xdev::bf16 b{1.0f};                    // explicit constructor, same rounding
#pragma once

#include <xdev/core/dtype.hpp>

#include <bit>
#include <compare>
#include <cstdint>
#include <type_traits>

namespace xdev {

/// IEEE 754 binary16: 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits. Range ±65504,
/// smallest normal 2^-14, smallest subnormal 2^-24.
///
/// A trivially copyable 16-bit value whose only member is its bit pattern. Conversions from `float`
/// round to nearest, ties to even; conversions to `float` are exact. `==` and `<=>` compare the
/// values as IEEE does (`NaN != NaN`, `-0 == +0`); `same_bits` compares the patterns.
struct f16 {
  std::uint16_t bits;  ///< the binary16 bit pattern

  /// Leaves `bits` uninitialized, like `float`; `f16{}` is +0.
  f16() = default;
  /// Rounds `value` to the nearest f16 (see `to_f16`).
  constexpr explicit f16(float value) noexcept;
  /// The exact value as a float (see `to_float`).
  constexpr explicit operator float() const noexcept;

  /// The f16 whose bit pattern is `bits`.
  [[nodiscard]] static constexpr f16 from_bits(std::uint16_t bits) noexcept {
    f16 h{};
    h.bits = bits;
    return h;
  }
};

/// bfloat16: the top half of a binary32 float — 1 sign bit, 8 exponent bits (bias 127), 7 fraction
/// bits. Same range as `float`, about 3 significant decimal digits.
///
/// A trivially copyable 16-bit value whose only member is its bit pattern. Conversions from `float`
/// round to nearest, ties to even; conversions to `float` are exact. `==` and `<=>` compare the
/// values as IEEE does; `same_bits` compares the patterns.
struct bf16 {
  std::uint16_t bits;  ///< the bfloat16 bit pattern (the high 16 bits of the float it stands for)

  /// Leaves `bits` uninitialized, like `float`; `bf16{}` is +0.
  bf16() = default;
  /// Rounds `value` to the nearest bf16 (see `to_bf16`).
  constexpr explicit bf16(float value) noexcept;
  /// The exact value as a float (see `to_float`).
  constexpr explicit operator float() const noexcept;

  /// The bf16 whose bit pattern is `bits`.
  [[nodiscard]] static constexpr bf16 from_bits(std::uint16_t bits) noexcept {
    bf16 h{};
    h.bits = bits;
    return h;
  }
};

static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2);
static_assert(std::is_trivially_copyable_v<f16> && std::is_trivially_copyable_v<bf16>);

/// Rounds a float to the nearest f16, ties to even. Magnitudes from 65520 (halfway between the
/// largest finite f16, 65504, and 2^16) up round to infinity; magnitudes below 2^-14 become
/// subnormals, rounded the same way, and those at most 2^-25 become zero (of the input's sign).
/// A NaN stays a NaN: quiet, with its sign and the top 9 bits of its payload.
[[nodiscard]] constexpr f16 to_f16(float value) noexcept {
  const auto x = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t a = x & 0x7FFF'FFFFu;  // magnitude
  if (a > 0x7F80'0000u)                      // NaN: set the quiet bit, keep what fits of the payload
    return f16::from_bits(static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x03FFu)));
  if (a >= 0x477F'F000u)  // >= 65520 (including infinity): rounds past the largest finite f16
    return f16::from_bits(static_cast<std::uint16_t>(sign | 0x7C00u));
  if (a >= 0x3880'0000u) {  // >= 2^-14: normal. Rebias the exponent (127 -> 15), drop 13 bits, round.
    const std::uint32_t truncated = (a >> 13) - (112u << 10);
    const std::uint32_t rest = a & 0x1FFFu;
    const std::uint32_t up = rest > 0x1000u || (rest == 0x1000u && (truncated & 1u)) ? 1u : 0u;
    return f16::from_bits(static_cast<std::uint16_t>(sign | (truncated + up)));  // a carry bumps the exponent
  }
  // Subnormal f16 (or zero): the result is round(|value| * 2^24) units of 2^-24.
  const std::uint32_t exponent = a >> 23;        // biased; |value| = significand * 2^(exponent - 150)
  const std::uint32_t shift = 126u - exponent;   // >= 14 here; |value| * 2^24 = significand >> shift
  if (shift > 24u) return f16::from_bits(sign);  // below 2^-25 (float subnormals included): zero
  const std::uint32_t significand = (a & 0x007F'FFFFu) | 0x0080'0000u;
  const std::uint32_t truncated = significand >> shift;
  const std::uint32_t rest = significand & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  const std::uint32_t up = rest > half || (rest == half && (truncated & 1u)) ? 1u : 0u;
  return f16::from_bits(static_cast<std::uint16_t>(sign | (truncated + up)));  // may become 2^-14, correctly
}

/// Rounds a float to the nearest bf16, ties to even. Magnitudes at or above the halfway point
/// between the largest finite bf16 and 2^128 round to infinity; subnormals round like normals.
/// A NaN stays a NaN: quiet, with its sign and the top 6 bits of its payload.
[[nodiscard]] constexpr bf16 to_bf16(float value) noexcept {
  const auto x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7FFF'FFFFu) > 0x7F80'0000u) return bf16::from_bits(static_cast<std::uint16_t>((x >> 16) | 0x0040u));
  // Adding 0x7FFF, plus 1 when the kept part is odd, carries into bit 16 exactly when the dropped
  // half is above the tie, or at the tie with an odd kept part. A carry out of the largest finite
  // pattern lands on infinity, as it should.
  const std::uint32_t rounded = x + 0x7FFFu + ((x >> 16) & 1u);
  return bf16::from_bits(static_cast<std::uint16_t>(rounded >> 16));
}

/// The value of an f16 as a float (exact: every f16 is a float). A NaN keeps its sign and payload.
[[nodiscard]] constexpr float to_float(f16 h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t exponent = (h.bits >> 10) & 0x1Fu;
  const std::uint32_t fraction = h.bits & 0x03FFu;
  if (exponent == 0x1Fu) return std::bit_cast<float>(sign | 0x7F80'0000u | (fraction << 13));  // inf, NaN
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (fraction << 13));
  if (fraction == 0) return std::bit_cast<float>(sign);  // ±0
  // Subnormal: fraction * 2^-24 with its leading 1 at bit p is 2^(p - 24) * 1.xxx, a normal float.
  const auto p = static_cast<std::uint32_t>(std::bit_width(fraction)) - 1u;
  return std::bit_cast<float>(sign | ((p + 103u) << 23) | ((fraction << (23u - p)) & 0x007F'FFFFu));
}

/// The value of a bf16 as a float (exact: a bf16 is the top half of a float).
[[nodiscard]] constexpr float to_float(bf16 h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h.bits) << 16);
}

constexpr f16::f16(float value) noexcept : bits(to_f16(value).bits) {}
constexpr f16::operator float() const noexcept {
  return to_float(*this);
}
constexpr bf16::bf16(float value) noexcept : bits(to_bf16(value).bits) {}
constexpr bf16::operator float() const noexcept {
  return to_float(*this);
}

/// True when the two values have the same bit pattern (so a NaN is the same as itself, and -0 is
/// not the same as +0) — unlike `==`, which compares values.
[[nodiscard]] constexpr bool same_bits(f16 a, f16 b) noexcept {
  return a.bits == b.bits;
}
/// True when the two values have the same bit pattern; see `same_bits(f16, f16)`.
[[nodiscard]] constexpr bool same_bits(bf16 a, bf16 b) noexcept {
  return a.bits == b.bits;
}

/// Compares values as IEEE does (through float): `NaN != NaN`, `-0 == +0`.
[[nodiscard]] constexpr bool operator==(f16 a, f16 b) noexcept {
  return to_float(a) == to_float(b);
}
/// Orders values as IEEE does (through float): unordered when either is a NaN.
[[nodiscard]] constexpr std::partial_ordering operator<=>(f16 a, f16 b) noexcept {
  return to_float(a) <=> to_float(b);
}
/// Compares values as IEEE does (through float): `NaN != NaN`, `-0 == +0`.
[[nodiscard]] constexpr bool operator==(bf16 a, bf16 b) noexcept {
  return to_float(a) == to_float(b);
}
/// Orders values as IEEE does (through float): unordered when either is a NaN.
[[nodiscard]] constexpr std::partial_ordering operator<=>(bf16 a, bf16 b) noexcept {
  return to_float(a) <=> to_float(b);
}

/// `dtype_of<f16>` is `DType::f16`.
template <>
struct dtype_traits<f16> {
  static constexpr DType value = DType::f16;
};
/// `dtype_of<bf16>` is `DType::bf16`.
template <>
struct dtype_traits<bf16> {
  static constexpr DType value = DType::bf16;
};

}  // namespace xdev
