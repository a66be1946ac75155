/// \file
/// `xdev::random::Philox4x32`: the Philox4x32-10 counter-based generator (Salmon, Moraes, Dror and
/// Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC 2011), bit-for-bit as in Random123.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace xdev::random {

namespace detail {

inline constexpr std::uint32_t philox_m0 = 0xD251'1F53u;  // round multipliers
inline constexpr std::uint32_t philox_m1 = 0xCD9E'8D57u;
inline constexpr std::uint32_t philox_w0 = 0x9E37'79B9u;  // key increments: golden ratio, sqrt(3) - 1
inline constexpr std::uint32_t philox_w1 = 0xBB67'AE85u;

// One Philox4x32 round on the four words, in place. Kept scalar and branch-free so that a loop of
// it over independent blocks vectorizes (32x32 -> 64-bit multiplies).
[[gnu::always_inline]] constexpr void philox4x32_round(std::uint32_t& x0, std::uint32_t& x1, std::uint32_t& x2,
                                                       std::uint32_t& x3, std::uint32_t k0, std::uint32_t k1) noexcept {
  const std::uint64_t p0 = std::uint64_t{philox_m0} * x0;
  const std::uint64_t p1 = std::uint64_t{philox_m1} * x2;
  const auto y0 = static_cast<std::uint32_t>(p1 >> 32) ^ x1 ^ k0;
  const auto y1 = static_cast<std::uint32_t>(p1);
  const auto y2 = static_cast<std::uint32_t>(p0 >> 32) ^ x3 ^ k1;
  const auto y3 = static_cast<std::uint32_t>(p0);
  x0 = y0;
  x1 = y1;
  x2 = y2;
  x3 = y3;
}

// Rounds R... of Philox4x32 (0-based): the key is bumped before every round but the first.
template <unsigned... R>
constexpr void philox4x32_rounds(std::uint32_t& x0, std::uint32_t& x1, std::uint32_t& x2, std::uint32_t& x3,
                                 std::uint32_t k0, std::uint32_t k1, std::integer_sequence<unsigned, R...>) noexcept {
  (philox4x32_round(x0, x1, x2, x3, k0 + R * philox_w0, k1 + R * philox_w1), ...);
}

}  // namespace detail

/// Philox4x32 with `Rounds` rounds: a bijection of a 128-bit counter under a 64-bit key.
/// `Philox4x32` (10 rounds) is the generator xdev uses; other round counts exist for the
/// published known-answer vectors (which include 7 rounds) and for experiments.
template <unsigned Rounds>
struct Philox4x32R {
  static_assert(Rounds >= 1, "xdev::random::Philox4x32R<Rounds>: Rounds must be at least 1");

  using counter = std::array<std::uint32_t, 4>;  ///< four 32-bit words, word 0 first
  using key = std::array<std::uint32_t, 2>;      ///< two 32-bit words, word 0 first
  static constexpr unsigned rounds = Rounds;
  static constexpr std::size_t words = 4;  ///< 32-bit outputs per call

  /// The four output words for counter `c` under key `k`; equals Random123's
  /// `philox4x32_R(Rounds, c, k)`, e.g. `generate({0, 0, 0, 0}, {0, 0})` is
  /// `{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}` for 10 rounds.
  [[nodiscard]] static constexpr counter generate(counter c, key k) noexcept {
    detail::philox4x32_rounds(c[0], c[1], c[2], c[3], k[0], k[1], std::make_integer_sequence<unsigned, Rounds>{});
    return c;
  }
};

/// Philox4x32-10: four 32-bit outputs per 128-bit counter, 64-bit key, 10 rounds. Passes
/// TestU01's BigCrush; outputs match Random123's published known-answer vectors.
///
///     auto out = xdev::random::Philox4x32::generate({1, 0, 0, 0}, {seed_lo, seed_hi});
using Philox4x32 = Philox4x32R<10>;

}  // namespace xdev::random
