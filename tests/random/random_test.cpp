#include <xdev/random/philox.hpp>
#include <xdev/random/stream.hpp>
#include <xdev/random/threefry.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numbers>
#include <span>
#include <string>
#include <vector>

namespace {

using ::testing::HasSubstr;
using xdev::RngAlgorithm;
using xdev::random::Philox4x32;
using xdev::random::Philox4x32R;
using xdev::random::Threefry2x32;
using xdev::random::Threefry2x32R;

// --- Known-answer vectors.
//
// Published by D. E. Shaw Research with Random123 (file kat_vectors, "nameNxW R CTR KEY
// EXPECTED"), as carried verbatim by DEShawResearch/Random123-Boost,
// libs/random/test/test_philox.cpp and libs/random/test/test_threefry.cpp ("cut-and-pasted from
// the kat_vectors file in the original Random123 distribution"). The three standard inputs per
// generator: all zeros, all ones, and the hexadecimal digits of pi.

struct PhiloxKat {
  Philox4x32::counter ctr;
  Philox4x32::key key;
  Philox4x32::counter expected;
};

constexpr std::array<PhiloxKat, 3> philox4x32_10_kats{{
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
}};

constexpr std::array<PhiloxKat, 3> philox4x32_7_kats{{
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}},
}};

// From the generated known-answer file girving/random123-manual, examples/kat_vectors (single
// bits set in counter and key): they pin down which counter and key word is which.
constexpr std::array<PhiloxKat, 3> philox4x32_10_word_order_kats{{
    {{0x00000001, 0x00000000, 0x00000000, 0x00000000},
     {0x00000001, 0x00000000},
     {0xac08141b, 0xdfc5ccbe, 0x79c07a47, 0xa7f66093}},
    {{0x00000000, 0x00000001, 0x00000000, 0x00000000},
     {0x00000001, 0x00000000},
     {0x833ff8dc, 0x225c963c, 0x232b88b3, 0x0b334b07}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0x00000000, 0x00000001},
     {0x126514c3, 0xd1898b69, 0xda2707b3, 0x6e6fb436}},
}};

struct ThreefryKat {
  Threefry2x32::counter ctr;
  Threefry2x32::key key;
  Threefry2x32::counter expected;
};

constexpr std::array<ThreefryKat, 3> threefry2x32_20_kats{{
    {{0x00000000, 0x00000000}, {0x00000000, 0x00000000}, {0x6b200159, 0x99ba4efe}},
    {{0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0x1cb996fc, 0xbb002be7}},
    {{0x243f6a88, 0x85a308d3}, {0x13198a2e, 0x03707344}, {0xc4923a9c, 0x483df7a0}},
}};

constexpr std::array<ThreefryKat, 3> threefry2x32_13_kats{{
    {{0x00000000, 0x00000000}, {0x00000000, 0x00000000}, {0x9d1c5ec6, 0x8bd50731}},
    {{0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0xfd36d048, 0x2d17272c}},
    {{0x243f6a88, 0x85a308d3}, {0x13198a2e, 0x03707344}, {0xba3e4725, 0xf27d669e}},
}};

// The Random123 kat_vectors lines for 32 rounds, as quoted ("from random123/tests/kat_vectors") by
// the OCaml port KaroshiBee/randii, tests/kat2x32.ml; the 13- and 20-round lines there agree with
// the ones above.
constexpr std::array<ThreefryKat, 3> threefry2x32_32_kats{{
    {{0x00000000, 0x00000000}, {0x00000000, 0x00000000}, {0xcee3d47e, 0xa23dfd5c}},
    {{0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0x6e2fe0d0, 0xb1b76f82}},
    {{0x243f6a88, 0x85a308d3}, {0x13198a2e, 0x03707344}, {0xe2827716, 0xc3c05cdf}},
}};

template <class G, std::size_t N, class Kat>
constexpr bool all_match(const std::array<Kat, N>& kats) {
  for (const Kat& k : kats)
    if (G::generate(k.ctr, k.key) != k.expected) return false;
  return true;
}

// Evaluated by the compiler: the generators are constexpr and exact.
static_assert(all_match<Philox4x32>(philox4x32_10_kats));
static_assert(all_match<Philox4x32R<7>>(philox4x32_7_kats));
static_assert(all_match<Philox4x32>(philox4x32_10_word_order_kats));
static_assert(all_match<Threefry2x32>(threefry2x32_20_kats));
static_assert(all_match<Threefry2x32R<13>>(threefry2x32_13_kats));
static_assert(all_match<Threefry2x32R<32>>(threefry2x32_32_kats));
static_assert(Philox4x32::rounds == 10 && Threefry2x32::rounds == 20);

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

template <class G, std::size_t N, class Kat>
void expect_kats(const std::array<Kat, N>& kats) {
  for (const Kat& k : kats) {
    // Through a volatile copy so the run-time path (not constant folding) is what is checked.
    volatile std::uint32_t first_word = k.ctr[0];
    auto ctr = k.ctr;
    ctr[0] = first_word;
    const auto out = G::generate(ctr, k.key);
    for (std::size_t i = 0; i < out.size(); ++i)
      EXPECT_EQ(hex(out[i]), hex(k.expected[i])) << "counter word 0 " << hex(k.ctr[0]) << ", output word " << i;
  }
}

TEST(Philox4x32, MatchesPublishedKnownAnswers) {
  expect_kats<Philox4x32>(philox4x32_10_kats);
  expect_kats<Philox4x32R<7>>(philox4x32_7_kats);
  expect_kats<Philox4x32>(philox4x32_10_word_order_kats);
}

TEST(Threefry2x32, MatchesPublishedKnownAnswers) {
  expect_kats<Threefry2x32>(threefry2x32_20_kats);
  expect_kats<Threefry2x32R<13>>(threefry2x32_13_kats);
  expect_kats<Threefry2x32R<32>>(threefry2x32_32_kats);
}

// --- The stream definition.

constexpr std::array<RngAlgorithm, 2> algorithms{RngAlgorithm::philox, RngAlgorithm::three_fry};

TEST(RandomStream, KeyIsTheSeedLowWordFirst) {
  static_assert(xdev::random::key_of(0x0123456789abcdefULL) == std::array<std::uint32_t, 2>{0x89abcdef, 0x01234567});
}

TEST(RandomStream, RawOutputsAreGeneratorBlocksInCounterOrder) {
  using xdev::random::raw_output;
  // Seed 0, block 0: the all-zero known answers, word by word.
  for (std::uint64_t n = 0; n < 4; ++n)
    EXPECT_EQ(raw_output(RngAlgorithm::philox, 0, n), philox4x32_10_kats[0].expected[n]);
  for (std::uint64_t n = 0; n < 2; ++n)
    EXPECT_EQ(raw_output(RngAlgorithm::three_fry, 0, n), threefry2x32_20_kats[0].expected[n]);
  // Seed 1 = key {1, 0}: block 1 is counter {1, 0, 0, 0}, block 2^32 is counter {0, 1, 0, 0}.
  for (std::uint64_t n = 0; n < 4; ++n) {
    EXPECT_EQ(raw_output(RngAlgorithm::philox, 1, 4 + n), philox4x32_10_word_order_kats[0].expected[n]);
    EXPECT_EQ(raw_output(RngAlgorithm::philox, 1, (std::uint64_t{4} << 32) + n),
              philox4x32_10_word_order_kats[1].expected[n]);
  }
  // The same in general, at compile time.
  static_assert(raw_output(RngAlgorithm::philox, 0xa4093822'00000007ULL, 4 * 0x12345678'9abcdefULL + 3) ==
                Philox4x32::generate({0x89abcdef, 0x01234567, 0, 0}, {0x00000007, 0xa4093822})[3]);
  static_assert(raw_output(RngAlgorithm::three_fry, 0x03707344'13198a2eULL, 2 * 0x05a308d3'243f6a88ULL + 1) ==
                Threefry2x32::generate({0x243f6a88, 0x05a308d3}, {0x13198a2e, 0x03707344})[1]);
}

TEST(RandomStream, FillBitsEqualsRawOutputEverywhere) {
  for (RngAlgorithm a : algorithms) {
    for (std::uint64_t offset : {0ULL, 1ULL, 2ULL, 3ULL, 4097ULL, 0xffffffffULL, 0x7fffffff'fffffff0ULL}) {
      std::vector<std::uint32_t> out(300);
      xdev::random::fill_bits(a, 99, offset, out);
      for (std::size_t j = 0; j < out.size(); ++j)
        ASSERT_EQ(out[j], xdev::random::raw_output(a, 99, offset + j)) << a << " offset " << offset << " j " << j;
    }
  }
}

TEST(RandomStream, EveryInstructionSetVariantGivesTheSameBits) {
  // The batch kernels are compiled for several instruction sets and picked at run time; every
  // variant this CPU can run must produce the generic variant's bits.
  using xdev::random::detail::Isa;
  const Isa detected = xdev::random::detail::detected_isa();
  std::vector<std::uint32_t> generic(5000), other(5000);
  for (const Isa isa : {Isa::avx2, Isa::avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(detected)) continue;
    for (std::uint64_t offset : std::array<std::uint64_t, 3>{0, 3, ~std::uint64_t{0} - 1000}) {
      xdev::random::detail::fill_bits<Philox4x32>(11, offset, generic.data(), generic.size(), Isa::generic);
      xdev::random::detail::fill_bits<Philox4x32>(11, offset, other.data(), other.size(), isa);
      EXPECT_EQ(generic, other) << "philox, isa " << static_cast<int>(isa) << ", offset " << offset;
      xdev::random::detail::fill_bits<Threefry2x32>(11, offset, generic.data(), generic.size(), Isa::generic);
      xdev::random::detail::fill_bits<Threefry2x32>(11, offset, other.data(), other.size(), isa);
      EXPECT_EQ(generic, other) << "threefry, isa " << static_cast<int>(isa) << ", offset " << offset;
    }
  }
  RecordProperty("kernel_isa", static_cast<int>(detected));  // 0 generic, 1 AVX2, 2 AVX-512
}

TEST(RandomStream, PositionsWrapModulo2To64) {
  for (RngAlgorithm a : algorithms) {
    const std::uint64_t start = ~std::uint64_t{0} - 9;  // 2^64 - 10
    std::vector<std::uint32_t> across(200), from_zero(190);
    xdev::random::fill_bits(a, 7, start, across);
    xdev::random::fill_bits(a, 7, 0, from_zero);
    for (std::size_t j = 0; j < 10; ++j) EXPECT_EQ(across[j], xdev::random::raw_output(a, 7, start + j));
    EXPECT_TRUE(std::equal(from_zero.begin(), from_zero.end(), across.begin() + 10)) << a;
  }
}

// --- Slice independence: any slice of a fill, generated on its own, equals that part of the whole.

// Uneven chunk sizes, crossing block, batch and internal buffer boundaries.
constexpr std::array<std::size_t, 14> chunk_sizes{1, 2, 3, 5, 7, 13, 63, 64, 65, 511, 1023, 1024, 1025, 2049};
constexpr std::size_t slice_total = 10007;
constexpr std::array<std::uint64_t, 7> slice_offsets{
    0, 1, 2, 3, 5, 0xffffffff - 3, ~std::uint64_t{0} - 4096};  // the last wraps around 2^64

template <class T, class Fill>
void expect_slices_match(Fill fill, std::uint64_t per_value) {
  for (RngAlgorithm a : algorithms) {
    for (std::uint64_t offset : slice_offsets) {
      std::vector<T> whole(slice_total), pieces(slice_total);
      fill(a, offset, std::span<T>(whole));
      std::size_t start = 0;
      for (std::size_t i = 0; start < slice_total; ++i) {
        const std::size_t n = std::min(chunk_sizes[i % chunk_sizes.size()], slice_total - start);
        fill(a, offset + per_value * start, std::span<T>(pieces).subspan(start, n));
        start += n;
      }
      // Bitwise: the slices must be the very same values, not merely close ones.
      EXPECT_EQ(std::memcmp(whole.data(), pieces.data(), slice_total * sizeof(T)), 0)
          << a << " offset " << offset << " sizeof(T) " << sizeof(T);
      // And a chunking in the other direction (large first), starting at an odd value index.
      std::vector<T> tail(slice_total - 3);
      fill(a, offset + per_value * 3, std::span<T>(tail));
      EXPECT_EQ(std::memcmp(whole.data() + 3, tail.data(), tail.size() * sizeof(T)), 0) << a << " offset " << offset;
    }
  }
}

TEST(RandomStream, BitsSlicesEqualTheWhole) {
  expect_slices_match<std::uint32_t>(
      [](RngAlgorithm a, std::uint64_t off, std::span<std::uint32_t> out) { xdev::random::fill_bits(a, 5, off, out); },
      1);
}

TEST(RandomStream, UniformSlicesEqualTheWhole) {
  expect_slices_match<float>(
      [](RngAlgorithm a, std::uint64_t off, std::span<float> out) { xdev::random::fill_uniform(a, 5, off, out); },
      xdev::random::raw_outputs_per_value<float>);
  expect_slices_match<double>(
      [](RngAlgorithm a, std::uint64_t off, std::span<double> out) { xdev::random::fill_uniform(a, 5, off, out); },
      xdev::random::raw_outputs_per_value<double>);
}

TEST(RandomStream, NormalSlicesEqualTheWhole) {
  expect_slices_match<float>([](RngAlgorithm a, std::uint64_t off,
                                std::span<float> out) { xdev::random::fill_normal(a, 5, off, out, 0.5f, 2.0f); },
                             xdev::random::raw_outputs_per_value<float>);
  expect_slices_match<double>([](RngAlgorithm a, std::uint64_t off,
                                 std::span<double> out) { xdev::random::fill_normal(a, 5, off, out, 0.5, 2.0); },
                              xdev::random::raw_outputs_per_value<double>);
}

// --- Values from their raw outputs, as documented.

TEST(RandomStream, UniformValuesFollowTheDocumentedMapping) {
  using xdev::random::raw_output;
  for (RngAlgorithm a : algorithms) {
    std::vector<float> f(100);
    std::vector<double> d(100);
    xdev::random::fill_uniform(a, 3, 11, f);
    xdev::random::fill_uniform(a, 3, 11, d);
    for (std::size_t j = 0; j < f.size(); ++j) {
      EXPECT_EQ(f[j], static_cast<float>(raw_output(a, 3, 11 + j) >> 8) / 16777216.0f);
      const std::uint64_t w = raw_output(a, 3, 11 + 2 * j) | std::uint64_t{raw_output(a, 3, 12 + 2 * j)} << 32;
      EXPECT_EQ(d[j], std::ldexp(static_cast<double>(w >> 11), -53));
    }
  }
  static_assert(xdev::random::to_uniform_float(0xffffffff) == 1.0f - 0x1p-24f);
  static_assert(xdev::random::to_uniform_float(0xff) == 0.0f);
  static_assert(xdev::random::to_uniform_double(0xffffffff, 0xffffffff) == 1.0 - 0x1p-53);
  static_assert(xdev::random::to_uniform_double(0x7ff, 0) == 0.0);
  static_assert(xdev::random::raw_outputs_per_value<float> == 1 && xdev::random::raw_outputs_per_value<double> == 2);
}

TEST(RandomStream, NormalPairsFollowTheDocumentedMapping) {
  using xdev::random::raw_output;
  for (RngAlgorithm a : algorithms) {
    std::vector<double> z(6);
    xdev::random::fill_normal(a, 8, 40, std::span<double>(z));
    for (std::size_t pair = 0; pair < 3; ++pair) {
      const std::uint64_t p = 40 + 4 * pair;
      const std::uint64_t w1 = raw_output(a, 8, p) | std::uint64_t{raw_output(a, 8, p + 1)} << 32;
      const std::uint64_t w2 = raw_output(a, 8, p + 2) | std::uint64_t{raw_output(a, 8, p + 3)} << 32;
      const double u1 = std::ldexp(static_cast<double>((w1 >> 11) + 1), -53);
      const double u2 = std::ldexp(static_cast<double>(w2 >> 11), -53);
      const double r = std::sqrt(-2.0 * std::log(u1));
      EXPECT_NEAR(z[2 * pair], r * std::cos(2 * std::numbers::pi * u2), 1e-12);
      EXPECT_NEAR(z[2 * pair + 1], r * std::sin(2 * std::numbers::pi * u2), 1e-12);
    }
    std::vector<float> zf(4);
    xdev::random::fill_normal(a, 8, 40, std::span<float>(zf));
    for (std::size_t pair = 0; pair < 2; ++pair) {
      const std::uint64_t p = 40 + 2 * pair;
      const double u1 = std::ldexp(static_cast<double>((raw_output(a, 8, p) >> 8) + 1), -24);
      const double u2 = std::ldexp(static_cast<double>(raw_output(a, 8, p + 1) >> 8), -24);
      const double r = std::sqrt(-2.0 * std::log(u1));
      EXPECT_NEAR(zf[2 * pair], r * std::cos(2 * std::numbers::pi * u2), 1e-5);
      EXPECT_NEAR(zf[2 * pair + 1], r * std::sin(2 * std::numbers::pi * u2), 1e-5);
    }
  }
}

TEST(RandomStream, BoxMullerIsFiniteAtTheExtremes) {
  // The smallest u1 (all raw bits 0) gives the largest radius; u1 is never 0, so never log(0).
  const std::uint32_t zeros[4] = {0, 0, 0, 0};
  const std::uint32_t ones[4] = {~0u, ~0u, ~0u, ~0u};
  for (const std::uint32_t* raw : {zeros, ones}) {
    const auto [f0, f1] = xdev::random::detail::box_muller(raw, 0.0f);
    const auto [d0, d1] = xdev::random::detail::box_muller(raw, 0.0);
    EXPECT_TRUE(std::isfinite(f0) && std::isfinite(f1) && std::isfinite(d0) && std::isfinite(d1));
  }
  const auto [f0, f1] = xdev::random::detail::box_muller(zeros, 0.0f);
  EXPECT_NEAR(f0, std::sqrt(2 * 24 * std::log(2.0)), 1e-5);  // u1 = 2^-24, u2 = 0: cos 0 = 1
  EXPECT_EQ(f1, 0.0f);
  const auto [d0, d1] = xdev::random::detail::box_muller(zeros, 0.0);
  EXPECT_NEAR(d0, std::sqrt(2 * 53 * std::log(2.0)), 1e-12);
  EXPECT_EQ(d1, 0.0);
}

// --- Distributions (bounds many standard errors wide: a correct generator essentially never fails).

constexpr std::size_t draws = 1'000'000;

TEST(RandomStream, UniformFloatsAreInZeroOneWithMeanOneHalf) {
  for (RngAlgorithm a : algorithms) {
    std::vector<float> x(draws);
    xdev::random::fill_uniform(a, 2024, 0, x);
    double sum = 0;
    std::array<int, 100> bins{};
    for (float v : x) {
      ASSERT_GE(v, 0.0f);
      ASSERT_LT(v, 1.0f);
      sum += v;
      ++bins[static_cast<std::size_t>(v * 100)];
    }
    EXPECT_NEAR(sum / draws, 0.5, 0.002) << a;                   // standard error 0.00029
    for (int count : bins) EXPECT_NEAR(count, 10000, 800) << a;  // standard error 99.5
  }
}

TEST(RandomStream, UniformDoublesAreInZeroOneWithMeanOneHalf) {
  for (RngAlgorithm a : algorithms) {
    std::vector<double> x(draws);
    xdev::random::fill_uniform(a, 2024, 0, x);
    double sum = 0;
    for (double v : x) {
      ASSERT_GE(v, 0.0);
      ASSERT_LT(v, 1.0);
      sum += v;
    }
    EXPECT_NEAR(sum / draws, 0.5, 0.002) << a;
  }
}

template <class T>
void expect_standard_normal(RngAlgorithm a) {
  std::vector<T> z(draws);
  xdev::random::fill_normal(a, 77, 0, std::span<T>(z));
  double sum = 0, sum_sq = 0;
  std::size_t beyond_1 = 0;
  for (T v : z) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sum_sq += double(v) * v;
    beyond_1 += std::fabs(v) > 1;
  }
  const double mean = sum / draws;
  const double sd = std::sqrt(sum_sq / draws - mean * mean);
  EXPECT_LT(std::fabs(mean), 0.01) << a;  // standard error 0.001
  EXPECT_NEAR(sd, 1.0, 0.01) << a;        // standard error 0.0007
  // P(|z| > 1) = 0.3173 for a normal; standard error 0.00047.
  EXPECT_NEAR(double(beyond_1) / draws, 0.3173, 0.005) << a;
}

TEST(RandomStream, NormalsHaveMeanZeroAndStddevOne) {
  for (RngAlgorithm a : algorithms) {
    expect_standard_normal<float>(a);
    expect_standard_normal<double>(a);
  }
}

TEST(RandomStream, NormalMeanAndStddevScaleTheStandardNormal) {
  std::vector<double> z(1001), y(1001);
  xdev::random::fill_normal(RngAlgorithm::philox, 4, 10, std::span<double>(z));
  xdev::random::fill_normal(RngAlgorithm::philox, 4, 10, std::span<double>(y), -3.0, 0.25);
  for (std::size_t i = 0; i < z.size(); ++i) EXPECT_DOUBLE_EQ(y[i], -3.0 + 0.25 * z[i]);
  std::vector<float> c(5);
  xdev::random::fill_normal(RngAlgorithm::three_fry, 4, 10, std::span<float>(c), 1.5f, 0.0f);
  for (float v : c) EXPECT_EQ(v, 1.5f);
}

// --- Seeds, algorithms and errors.

TEST(RandomStream, DifferentSeedsGiveDifferentStreams) {
  const std::array<std::uint64_t, 6> seeds{0, 1, 2, std::uint64_t{1} << 32, std::uint64_t{1} << 63, ~std::uint64_t{0}};
  for (RngAlgorithm a : algorithms) {
    std::vector<std::vector<std::uint32_t>> streams;
    for (std::uint64_t s : seeds) {
      streams.emplace_back(1000);
      xdev::random::fill_bits(a, s, 0, streams.back());
    }
    for (std::size_t i = 0; i < streams.size(); ++i)
      for (std::size_t j = i + 1; j < streams.size(); ++j) {
        std::size_t same = 0;
        for (std::size_t k = 0; k < 1000; ++k) same += streams[i][k] == streams[j][k];
        EXPECT_LE(same, 2u) << a << " seeds " << seeds[i] << " and " << seeds[j];
      }
  }
  std::vector<std::uint32_t> p(1000), t(1000);
  xdev::random::fill_bits(RngAlgorithm::philox, 9, 0, p);
  xdev::random::fill_bits(RngAlgorithm::three_fry, 9, 0, t);
  EXPECT_NE(p, t);
}

TEST(RandomStream, UnknownAlgorithmIsInvalidArgument) {
  const auto bad = static_cast<RngAlgorithm>(7);
  std::vector<float> x(4);
  try {
    xdev::random::fill_uniform(bad, 1, 0, x);
    FAIL() << "no exception";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("7"));
    EXPECT_THAT(e.what(), HasSubstr("philox, three_fry"));
  }
  std::vector<std::uint32_t> b(4);
  EXPECT_THROW(xdev::random::fill_bits(bad, 1, 0, b), xdev::error);
  EXPECT_THROW((void)xdev::random::raw_output(bad, 1, 0), xdev::error);
}

TEST(RandomStream, NegativeOrNanStddevIsInvalidArgument) {
  std::vector<float> x(4);
  try {
    xdev::random::fill_normal(RngAlgorithm::philox, 1, 0, std::span<float>(x), 0.0f, -1.0f);
    FAIL() << "no exception";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("stddev -1"));
  }
  std::vector<double> y(4);
  EXPECT_THROW(xdev::random::fill_normal(RngAlgorithm::philox, 1, 0, std::span<double>(y), 0.0,
                                         std::numeric_limits<double>::quiet_NaN()),
               xdev::error);
}

TEST(RandomStream, EmptySpansAreFine) {
  for (RngAlgorithm a : algorithms) {
    xdev::random::fill_bits(a, 1, 5, std::span<std::uint32_t>());
    xdev::random::fill_uniform(a, 1, 5, std::span<float>());
    xdev::random::fill_normal(a, 1, 5, std::span<double>());
  }
}

}  // namespace
