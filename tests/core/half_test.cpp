#include <xdev/core/half.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using xdev::bf16;
using xdev::f16;

// --- Compile-time facts.

static_assert(std::is_trivially_copyable_v<f16> && std::is_trivially_copyable_v<bf16>);
static_assert(std::is_trivially_default_constructible_v<f16> && std::is_standard_layout_v<f16>);
static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2 && alignof(f16) == 2);
static_assert(!std::is_convertible_v<float, f16> && !std::is_convertible_v<f16, float>);  // explicit both ways
static_assert(xdev::dtype_of<f16> == xdev::DType::f16 && xdev::dtype_of<bf16> == xdev::DType::bf16);

static_assert(xdev::to_f16(1.0f).bits == 0x3C00);
static_assert(xdev::to_f16(-2.0f).bits == 0xC000);
static_assert(xdev::to_f16(0.1f).bits == 0x2E66);
static_assert(xdev::to_f16(65504.0f).bits == 0x7BFF);         // largest finite
static_assert(xdev::to_f16(65519.996f).bits == 0x7BFF);       // just below the threshold
static_assert(xdev::to_f16(65520.0f).bits == 0x7C00);         // the tie goes to "even" 2^16: inf
static_assert(xdev::to_f16(0x1p-24f).bits == 0x0001);         // smallest subnormal
static_assert(xdev::to_f16(0x1p-25f).bits == 0x0000);         // tie with 0: even
static_assert(xdev::to_f16(0x1.000002p-25f).bits == 0x0001);  // just above the tie
static_assert(xdev::to_f16(0x1.8p-24f).bits == 0x0002);       // 1.5 units: tie, to even 2
static_assert(xdev::to_f16(0x1p-14f).bits == 0x0400);         // smallest normal
static_assert(xdev::to_f16(0x1.ff8p-15f).bits == 0x03FF);     // largest subnormal
static_assert(xdev::to_f16(0x1.ffcp-15f).bits == 0x0400);     // tie: up into the normals
static_assert(xdev::to_f16(-0.0f).bits == 0x8000);            // sign of zero kept
static_assert(xdev::to_f16(std::numeric_limits<float>::infinity()).bits == 0x7C00);
static_assert(xdev::to_f16(std::numeric_limits<float>::denorm_min()).bits == 0x0000);
static_assert((xdev::to_f16(std::numeric_limits<float>::quiet_NaN()).bits & 0x7E00) == 0x7E00);

static_assert(xdev::to_bf16(1.0f).bits == 0x3F80);
static_assert(xdev::to_bf16(3.140625f).bits == 0x4049);
static_assert(xdev::to_bf16(std::bit_cast<float>(0x3F808000u)).bits == 0x3F80);  // tie, even stays
static_assert(xdev::to_bf16(std::bit_cast<float>(0x3F818000u)).bits == 0x3F82);  // tie, odd rounds up
static_assert(xdev::to_bf16(std::numeric_limits<float>::max()).bits == 0x7F80);  // overflows to inf
static_assert(xdev::to_bf16(-0.0f).bits == 0x8000);

static_assert(xdev::to_float(f16::from_bits(0x3C00)) == 1.0f);
static_assert(xdev::to_float(f16::from_bits(0x0001)) == 0x1p-24f);
static_assert(xdev::to_float(f16::from_bits(0x7BFF)) == 65504.0f);
static_assert(xdev::to_float(bf16::from_bits(0x4049)) == 3.140625f);
static_assert(float(f16(0.5f)) == 0.5f && float(bf16(0.5f)) == 0.5f);
static_assert(f16(1.0f) == f16(1.0f) && f16(1.0f) < f16(2.0f) && bf16(-1.0f) < bf16(0.0f));
static_assert(f16::from_bits(0x8000) == f16::from_bits(0x0000));                  // -0 == +0 as values
static_assert(!xdev::same_bits(f16::from_bits(0x8000), f16::from_bits(0x0000)));  // but not as bits

// --- References, computed differently from the library: from the definition of the formats,
// with double arithmetic, and by searching the sorted table of all finite values for the nearest.

struct Format {
  const char* name;
  int exponent_bits;
  int fraction_bits;
  std::uint16_t max_finite;  // bit pattern of the largest finite value
};
constexpr Format binary16{"f16", 5, 10, 0x7BFF};
constexpr Format bfloat16{"bf16", 8, 7, 0x7F7F};

// The value of a non-negative finite pattern, from the definition: (fraction / 2^p) * 2^(1 - bias)
// for subnormals, (1 + fraction / 2^p) * 2^(e - bias) for normals.
double value_of(const Format& f, std::uint16_t bits) {
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const int e = bits >> f.fraction_bits;
  const int fraction = bits & ((1 << f.fraction_bits) - 1);
  if (e == 0) return std::ldexp(double(fraction), 1 - bias - f.fraction_bits);
  return std::ldexp(double(fraction + (1 << f.fraction_bits)), e - bias - f.fraction_bits);
}

// Every finite non-negative value in increasing order; the index is the bit pattern.
std::vector<double> finite_table(const Format& f) {
  std::vector<double> t;
  for (unsigned b = 0; b <= f.max_finite; ++b) t.push_back(value_of(f, static_cast<std::uint16_t>(b)));
  return t;
}

// Round-to-nearest-even of a (non-NaN) float by table search; returns the bit pattern.
std::uint16_t reference_round(const Format& f, const std::vector<double>& table, float x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(double(x));
  const std::uint16_t inf = static_cast<std::uint16_t>(f.max_finite + 1);
  // The overflow threshold: halfway between the largest finite value and the next power of two
  // (what the next value would be with a wider exponent); the tie goes to the "even" power of two.
  const double next = table.back() + (table.back() - table[f.max_finite - 1]);
  if (a >= (table.back() + next) / 2) return sign | inf;
  if (a >= table.back()) return sign | f.max_finite;  // above it, but below the threshold
  const auto hi = static_cast<std::uint16_t>(std::lower_bound(table.begin(), table.end(), a) - table.begin());
  if (table[hi] == a || hi == 0) return sign | hi;
  const auto lo = static_cast<std::uint16_t>(hi - 1);
  const double below = a - table[lo], above = table[hi] - a;  // exact in double
  if (below < above) return sign | lo;
  if (above < below) return sign | hi;
  return sign | ((lo & 1) ? hi : lo);
}

template <class H>
std::uint16_t round_bits(float x) {
  if constexpr (std::is_same_v<H, f16>)
    return xdev::to_f16(x).bits;
  else
    return xdev::to_bf16(x).bits;
}

template <class H>
void expect_all_patterns_round_trip(const Format& f) {
  const std::uint16_t exponent_mask = static_cast<std::uint16_t>(((1 << f.exponent_bits) - 1) << f.fraction_bits);
  const std::uint16_t quiet_bit = static_cast<std::uint16_t>(1 << (f.fraction_bits - 1));
  int failures = 0;
  for (unsigned b = 0; b <= 0xFFFF && failures < 10; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float x = xdev::to_float(H::from_bits(bits));
    const std::uint16_t back = round_bits<H>(x);
    const bool is_nan = (bits & exponent_mask) == exponent_mask && (bits & (exponent_mask - 1) & ~exponent_mask);
    if (is_nan) {
      // Stays a NaN, quiet, with its sign and payload.
      if (!std::isnan(x) || back != (bits | quiet_bit)) {
        ADD_FAILURE() << f.name << " NaN " << std::hex << bits << " -> " << back;
        ++failures;
      }
      continue;
    }
    // to_float is exact: compare with the value from the definition.
    const double expected =
        (bits & 0x8000 ? -1 : 1) * ((bits & exponent_mask) == exponent_mask ? std::numeric_limits<double>::infinity()
                                                                            : value_of(f, bits & 0x7FFF));
    if (double(x) != expected || std::signbit(x) != bool(bits & 0x8000) || back != bits) {
      ADD_FAILURE() << f.name << " pattern 0x" << std::hex << bits << ": to_float " << x << ", back 0x" << back;
      ++failures;
    }
  }
}

TEST(Half, EveryF16PatternRoundTripsThroughFloat) {
  expect_all_patterns_round_trip<f16>(binary16);
}

TEST(Half, EveryBf16PatternRoundTripsThroughFloat) {
  expect_all_patterns_round_trip<bf16>(bfloat16);
}

// Floats on which rounding is decided: every tie between adjacent finite values (which must go to
// the even one), the floats just either side of each tie, the overflow threshold and its
// neighbours, the extremes of the float range, and zeros.
std::vector<float> boundary_floats(const std::vector<double>& table) {
  std::vector<float> out;
  auto push_around = [&](double v) {
    const auto f = static_cast<float>(v);  // exact for every midpoint used here
    out.push_back(f);
    out.push_back(std::nextafter(f, 0.0f));
    out.push_back(std::nextafter(f, std::numeric_limits<float>::infinity()));
  };
  for (std::size_t i = 0; i + 1 < table.size(); ++i) {
    push_around(table[i]);
    push_around((table[i] + table[i + 1]) / 2);
  }
  const double next = table.back() + (table.back() - table[table.size() - 2]);
  push_around(table.back());
  push_around((table.back() + next) / 2);
  push_around(next);
  for (float v : {0.0f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()})
    push_around(v);
  const std::size_t n = out.size();
  for (std::size_t i = 0; i < n; ++i) out.push_back(-out[i]);
  return out;
}

template <class H>
void expect_rounding_matches_reference(const Format& f) {
  const std::vector<double> table = finite_table(f);
  std::vector<float> inputs = boundary_floats(table);
  for (std::uint64_t b = 0; b <= 0xFFFFFFFFu; b += 4097) inputs.push_back(std::bit_cast<float>(std::uint32_t(b)));
  int failures = 0;
  std::size_t checked = 0;
  for (float x : inputs) {
    if (std::isnan(x)) {
      const float back = f.exponent_bits == 5 ? xdev::to_float(xdev::to_f16(x)) : xdev::to_float(xdev::to_bf16(x));
      EXPECT_TRUE(std::isnan(back) && std::signbit(back) == std::signbit(x));
      continue;
    }
    const std::uint16_t got = round_bits<H>(x);
    const std::uint16_t want = reference_round(f, table, x);
    ++checked;
    if (got != want && ++failures <= 10)
      ADD_FAILURE() << f.name << ": float 0x" << std::hex << std::bit_cast<std::uint32_t>(x) << " (" << x
                    << ") rounds to 0x" << got << ", reference 0x" << want;
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked, 1'000'000u);
}

TEST(Half, F16RoundingMatchesNearestEvenReference) {
  expect_rounding_matches_reference<f16>(binary16);
}

TEST(Half, Bf16RoundingMatchesNearestEvenReference) {
  expect_rounding_matches_reference<bf16>(bfloat16);
}

TEST(Half, NanStaysQuietNanWithItsSign) {
  for (std::uint32_t nan_bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0x7FA00000u}) {
    const float x = std::bit_cast<float>(nan_bits);
    const f16 h = xdev::to_f16(x);
    const bf16 b = xdev::to_bf16(x);
    EXPECT_EQ(h.bits & 0x7E00, 0x7E00) << std::hex << nan_bits;  // exponent all ones and quiet bit
    EXPECT_EQ(b.bits & 0x7FC0, 0x7FC0) << std::hex << nan_bits;
    EXPECT_EQ(bool(h.bits & 0x8000), bool(nan_bits >> 31));
    EXPECT_EQ(bool(b.bits & 0x8000), bool(nan_bits >> 31));
    EXPECT_TRUE(std::isnan(xdev::to_float(h)) && std::isnan(xdev::to_float(b)));
    EXPECT_FALSE(h == h);                // IEEE: NaN is not equal to itself...
    EXPECT_TRUE(xdev::same_bits(h, h));  // ...but has the same bits
    EXPECT_FALSE(b == b);
    EXPECT_TRUE(xdev::same_bits(b, b));
  }
}

TEST(Half, ValueInitializedIsPositiveZero) {
  EXPECT_EQ(f16{}.bits, 0);
  EXPECT_EQ(bf16{}.bits, 0);
}

}  // namespace
