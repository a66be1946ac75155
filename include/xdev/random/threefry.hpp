/// \file
/// `xdev::random::Threefry2x32`: the Threefry2x32-20 counter-based generator (Salmon, Moraes, Dror
/// and Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC 2011; the Threefish cipher of Skein
/// reduced to two 32-bit words), bit-for-bit as in Random123.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace xdev::random {

namespace detail {

inline constexpr std::uint32_t threefry_parity = 0x1BD1'1BDAu;  // Skein key-schedule parity
// Rotation of word 1 in round r is threefry2x32_rotation[r % 8].
inline constexpr std::array<unsigned, 8> threefry2x32_rotation{13, 15, 26, 6, 17, 29, 16, 24};

template <unsigned N>
[[gnu::always_inline]] constexpr std::uint32_t rotl32(std::uint32_t x) noexcept {
  static_assert(N > 0 && N < 32);
  return (x << N) | (x >> (32u - N));
}

// Round `R` (0-based) of Threefry2x32, followed by a key injection after every fourth round.
// Everything is a compile-time constant but the data, so the rounds unroll into straight-line
// code, and a loop of them over independent blocks vectorizes (add, shift, or, xor).
template <unsigned R>
[[gnu::always_inline]] constexpr void threefry2x32_round(std::uint32_t& x0, std::uint32_t& x1,
                                                         const std::uint32_t (&ks)[3]) noexcept {
  x0 += x1;
  x1 = rotl32<threefry2x32_rotation[R % 8]>(x1);
  x1 ^= x0;
  if constexpr (R % 4 == 3) {
    constexpr unsigned s = R / 4 + 1;  // injection number
    x0 += ks[s % 3];
    x1 += ks[(s + 1) % 3] + s;
  }
}

// All `Rounds` rounds on (x0, x1), which already hold counter + key.
template <unsigned... R>
constexpr void threefry2x32_rounds(std::uint32_t& x0, std::uint32_t& x1, const std::uint32_t (&ks)[3],
                                   std::integer_sequence<unsigned, R...>) noexcept {
  (threefry2x32_round<R>(x0, x1, ks), ...);
}

}  // namespace detail

/// Threefry2x32 with `Rounds` rounds (at most 32): a bijection of a 64-bit counter under a 64-bit
/// key. `Threefry2x32` (20 rounds) is the generator xdev uses; other round counts exist for the
/// published known-answer vectors (which include 13 and 32 rounds).
template <unsigned Rounds>
struct Threefry2x32R {
  static_assert(Rounds >= 1 && Rounds <= 32, "xdev::random::Threefry2x32R<Rounds>: Rounds must be in [1, 32]");

  using counter = std::array<std::uint32_t, 2>;  ///< two 32-bit words, word 0 first
  using key = std::array<std::uint32_t, 2>;      ///< two 32-bit words, word 0 first
  static constexpr unsigned rounds = Rounds;
  static constexpr std::size_t words = 2;  ///< 32-bit outputs per call

  /// The two output words for counter `c` under key `k`; equals Random123's
  /// `threefry2x32_R(Rounds, c, k)`, e.g. `generate({0, 0}, {0, 0})` is `{0x6b200159, 0x99ba4efe}`
  /// for 20 rounds.
  [[nodiscard]] static constexpr counter generate(counter c, key k) noexcept {
    const std::uint32_t ks[3] = {k[0], k[1], detail::threefry_parity ^ k[0] ^ k[1]};
    std::uint32_t x0 = c[0] + ks[0];
    std::uint32_t x1 = c[1] + ks[1];
    detail::threefry2x32_rounds(x0, x1, ks, std::make_integer_sequence<unsigned, Rounds>{});
    return {x0, x1};
  }
};

/// Threefry2x32-20: two 32-bit outputs per 64-bit counter, 64-bit key, 20 rounds. Passes
/// TestU01's BigCrush; outputs match Random123's published known-answer vectors.
///
///     auto out = xdev::random::Threefry2x32::generate({1, 0}, {seed_lo, seed_hi});
using Threefry2x32 = Threefry2x32R<20>;

}  // namespace xdev::random
