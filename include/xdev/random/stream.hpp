/// \file
/// Counter-based random streams: the definition of every random number xdev's `ops::rng_*` produce.
///
/// A stream is named by `(algorithm, seed, offset)`. Its raw output number `n` (a 32-bit word, for
/// any `n` in [0, 2^64)) is a pure function of the algorithm, the seed and `n`:
///
/// - key: `{seed & 0xffffffff, seed >> 32}` (low word first), for both generators;
/// - Philox4x32-10: block `b = n / 4`, counter `{b & 0xffffffff, b >> 32, 0, 0}`; raw output `n`
///   is word `n % 4` of `Philox4x32::generate(counter, key)`;
/// - Threefry2x32-20: block `b = n / 2`, counter `{b & 0xffffffff, b >> 32}`; raw output `n` is
///   word `n % 2` of `Threefry2x32::generate(counter, key)`.
///
/// `raw_output(a, seed, n)` computes exactly this, one word at a time. Positions are taken modulo
/// 2^64: a fill that runs past 2^64 - 1 continues at 0.
///
/// The `fill_*` functions write the values at consecutive positions starting at `offset`. Value `j`
/// of a fill depends only on the raw outputs at fixed positions next to `offset + c * j`, where `c`
/// (`raw_outputs_per_value<T>`: 1 for float, 2 for double; 1 for `fill_bits`) is the number of raw
/// outputs each value consumes. So any slice can be generated on its own: values `[a, b)` of a fill
/// at `offset` are the fill of length `b - a` at `offset + c * a`, and a stream consumed by
/// successive fills, each advancing the offset by `c * count`, is the same as one large fill.
///
///     std::vector<float> x(1000);
///     xdev::random::fill_uniform(xdev::RngAlgorithm::philox, 42, 0, x);
///     // the same 1000 values, in two independent pieces:
///     xdev::random::fill_uniform(xdev::RngAlgorithm::philox, 42, 0, std::span(x).first(300));
///     xdev::random::fill_uniform(xdev::RngAlgorithm::philox, 42, 300, std::span(x).subspan(300));
///
/// Portability: raw outputs and uniforms are integer arithmetic and exact conversions, so they are
/// the same bits on every compiler, platform and device that follows this definition. Normals use
/// the C++ library's `log`, `sqrt`, `cos` and `sin`, which may differ in the last bit or so between
/// libraries; within one build, slices still match the whole bit for bit.
///
/// Speed: blocks are generated in batches straight into the output (uniforms and normals through a
/// 4 KiB buffer on the stack) by loops the compiler vectorizes. On x86-64 with g++ or clang++ those
/// loops are also compiled for AVX2 and AVX-512 and the widest the CPU supports is picked at run
/// time; every variant produces the same bits.
#pragma once

#include <xdev/core/error.hpp>
#include <xdev/policy/policies.hpp>
#include <xdev/random/philox.hpp>
#include <xdev/random/threefry.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace xdev::random {

/// The generator key of a stream's seed: `{seed & 0xffffffff, seed >> 32}`.
[[nodiscard]] constexpr std::array<std::uint32_t, 2> key_of(std::uint64_t seed) noexcept {
  return {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
}

/// Raw 32-bit outputs consumed by one value of `T`: 1 for `std::uint32_t` (`fill_bits`) and float
/// (`fill_uniform`, `fill_normal`), 2 for double. After a fill of `count` values at `offset`, the
/// stream continues at `offset + raw_outputs_per_value<T> * count`.
template <class T>
requires std::is_same_v<T, std::uint32_t> || std::is_same_v<T, float> || std::is_same_v<T, double>
inline constexpr std::uint64_t raw_outputs_per_value = std::is_same_v<T, double> ? 2 : 1;

/// Maps a raw output to a float in [0, 1): its top 24 bits times 2^-24. Every result is a multiple
/// of 2^-24, each with probability 2^-24; the largest is 1 - 2^-24, never 1.
[[nodiscard]] constexpr float to_uniform_float(std::uint32_t raw) noexcept {
  // Through int32 (the value fits): a signed conversion is one instruction, also in vector form.
  return static_cast<float>(static_cast<std::int32_t>(raw >> 8)) * 0x1p-24f;
}

/// Maps two raw outputs to a double in [0, 1): the top 53 bits of the 64-bit word
/// `first | second << 32` (the two outputs in stream order, little-endian) times 2^-53. The
/// largest result is 1 - 2^-53, never 1.
[[nodiscard]] constexpr double to_uniform_double(std::uint32_t first, std::uint32_t second) noexcept {
  const std::uint64_t w = std::uint64_t{first} | (std::uint64_t{second} << 32);
  return static_cast<double>(static_cast<std::int64_t>(w >> 11)) * 0x1p-53;
}

namespace detail {

[[noreturn]] inline void throw_unknown_algorithm(RngAlgorithm a) {
  throw error(errc::invalid_argument,
              "unknown RngAlgorithm value " + std::to_string(static_cast<int>(a)) + "; accepted: philox, three_fry");
}

// 2^64 / words - 1: block numbers wrap with the positions, modulo 2^64.
template <class G>
inline constexpr std::uint64_t block_mask = ~std::uint64_t{0} / G::words;

template <class G>
constexpr typename G::counter counter_of(std::uint64_t block) noexcept {
  typename G::counter c{};
  c[0] = static_cast<std::uint32_t>(block);
  c[1] = static_cast<std::uint32_t>(block >> 32);
  return c;
}

template <class G>
constexpr typename G::counter block_at(std::array<std::uint32_t, 2> key, std::uint64_t block) noexcept {
  return G::generate(counter_of<G>(block & block_mask<G>), key);
}

// Blocks [block, block + B) of the stream, interleaved into out[0, B * words). The lanes are kept
// in separate arrays (structure of arrays) and each loop over them runs one round (Philox) or four
// (Threefry) on every lane: the compiler vectorizes each loop, and the independent lanes hide the
// latency of a round, which a lane-by-lane loop would expose (measured: up to 2x slower).
template <std::size_t B>
[[gnu::always_inline]] inline void philox_blocks(std::uint64_t block, std::array<std::uint32_t, 2> key,
                                                 std::uint32_t* out) noexcept {
  std::uint32_t x0[B], x1[B], x2[B], x3[B];
  for (std::size_t i = 0; i < B; ++i) {
    const std::uint64_t b = (block + i) & block_mask<Philox4x32>;
    x0[i] = static_cast<std::uint32_t>(b);
    x1[i] = static_cast<std::uint32_t>(b >> 32);
    x2[i] = 0;
    x3[i] = 0;
  }
  std::uint32_t k0 = key[0];
  std::uint32_t k1 = key[1];
  for (unsigned r = 0; r < Philox4x32::rounds; ++r) {
    if (r != 0) {
      k0 += philox_w0;
      k1 += philox_w1;
    }
    for (std::size_t i = 0; i < B; ++i) philox4x32_round(x0[i], x1[i], x2[i], x3[i], k0, k1);
  }
  for (std::size_t i = 0; i < B; ++i) {
    out[4 * i] = x0[i];
    out[4 * i + 1] = x1[i];
    out[4 * i + 2] = x2[i];
    out[4 * i + 3] = x3[i];
  }
}

// Rounds [4 G, 4 G + 4) on every lane.
template <unsigned G, std::size_t B>
[[gnu::always_inline]] inline void threefry_four_rounds(std::uint32_t (&x0)[B], std::uint32_t (&x1)[B],
                                                        const std::uint32_t (&ks)[3]) noexcept {
  for (std::size_t i = 0; i < B; ++i) {
    threefry2x32_round<4 * G>(x0[i], x1[i], ks);
    threefry2x32_round<4 * G + 1>(x0[i], x1[i], ks);
    threefry2x32_round<4 * G + 2>(x0[i], x1[i], ks);
    threefry2x32_round<4 * G + 3>(x0[i], x1[i], ks);
  }
}

template <std::size_t B, unsigned... G>
[[gnu::always_inline]] inline void threefry_blocks(std::uint64_t block, std::array<std::uint32_t, 2> key,
                                                   std::uint32_t* out, std::integer_sequence<unsigned, G...>) noexcept {
  const std::uint32_t ks[3] = {key[0], key[1], threefry_parity ^ key[0] ^ key[1]};
  std::uint32_t x0[B], x1[B];
  for (std::size_t i = 0; i < B; ++i) {
    const std::uint64_t b = (block + i) & block_mask<Threefry2x32>;
    x0[i] = static_cast<std::uint32_t>(b) + ks[0];
    x1[i] = static_cast<std::uint32_t>(b >> 32) + ks[1];
  }
  (threefry_four_rounds<G>(x0, x1, ks), ...);
  for (std::size_t i = 0; i < B; ++i) {
    out[2 * i] = x0[i];
    out[2 * i + 1] = x1[i];
  }
}

// Blocks per batch: 64 (256 raw outputs for Philox, 128 for Threefry). Smaller batches measured
// slower with g++ -O3 (Philox at 16 blocks: about 2x); larger ones gain nothing.
inline constexpr std::size_t batch_blocks = 64;

template <class G>
[[gnu::always_inline]] inline void generate_blocks(std::uint64_t block, std::array<std::uint32_t, 2> key,
                                                   std::uint32_t* out) noexcept {
  if constexpr (std::is_same_v<G, Philox4x32>) {
    philox_blocks<batch_blocks>(block, key, out);
  } else {
    static_assert(std::is_same_v<G, Threefry2x32> && Threefry2x32::rounds % 4 == 0);
    threefry_blocks<batch_blocks>(block, key, out, std::make_integer_sequence<unsigned, Threefry2x32::rounds / 4>{});
  }
}

// `count` consecutive batches starting at `block`. The kernels above are always inlined, so each
// instruction-set variant below is the same source compiled for wider vectors. All variants compute
// the same integers; only their speed differs.
template <class G>
[[gnu::always_inline]] inline void batches(std::uint64_t block, std::array<std::uint32_t, 2> key, std::uint32_t* out,
                                           std::size_t count) noexcept {
  for (std::size_t b = 0; b < count; ++b, block += batch_blocks, out += batch_blocks * G::words)
    generate_blocks<G>(block, key, out);
}

// Instruction sets the batch kernels are compiled for; the widest the CPU supports is used.
enum class Isa { generic, avx2, avx512 };

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// x86-64: baseline code has only SSE2, so the kernels are also compiled for AVX2 and AVX-512 and
// picked at run time (measured on an AVX-512 machine: Philox 3x, Threefry 5x the SSE2 speed).
template <class G>
[[gnu::target("avx2")]] inline void batches_avx2(std::uint64_t block, std::array<std::uint32_t, 2> key,
                                                 std::uint32_t* out, std::size_t count) noexcept {
  batches<G>(block, key, out, count);
}

template <class G>
[[gnu::target("avx2,avx512f,avx512vl,avx512bw,avx512dq")]] inline void batches_avx512(std::uint64_t block,
                                                                                      std::array<std::uint32_t, 2> key,
                                                                                      std::uint32_t* out,
                                                                                      std::size_t count) noexcept {
  batches<G>(block, key, out, count);
}

inline Isa detected_isa() noexcept {
  static const Isa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq"))
      return Isa::avx512;
    return __builtin_cpu_supports("avx2") ? Isa::avx2 : Isa::generic;
  }();
  return isa;
}

template <class G>
inline void generate_batches(Isa isa, std::uint64_t block, std::array<std::uint32_t, 2> key, std::uint32_t* out,
                             std::size_t count) noexcept {
  switch (isa) {
    case Isa::avx512:
      return batches_avx512<G>(block, key, out, count);
    case Isa::avx2:
      return batches_avx2<G>(block, key, out, count);
    case Isa::generic:
      break;
  }
  batches<G>(block, key, out, count);
}
#else
inline Isa detected_isa() noexcept {
  return Isa::generic;
}

template <class G>
inline void generate_batches(Isa, std::uint64_t block, std::array<std::uint32_t, 2> key, std::uint32_t* out,
                             std::size_t count) noexcept {
  batches<G>(block, key, out, count);
}
#endif

// Raw outputs [pos, pos + n) of the stream into out[0, n), with the batch kernels for `isa`.
template <class G>
void fill_bits(std::uint64_t seed, std::uint64_t pos, std::uint32_t* out, std::size_t n,
               Isa isa = detected_isa()) noexcept {
  constexpr std::size_t w = G::words;
  const auto key = key_of(seed);
  if (n == 0) return;
  if (const auto lane = static_cast<std::size_t>(pos % w); lane != 0) {  // the rest of a partial block
    const auto words = block_at<G>(key, pos / w);
    const std::size_t m = std::min(w - lane, n);
    std::copy_n(words.begin() + static_cast<std::ptrdiff_t>(lane), m, out);
    out += m;
    n -= m;
    pos += m;
  }
  std::uint64_t block = pos / w;
  constexpr std::size_t batch = batch_blocks * w;
  if (const std::size_t count = n / batch; count > 0) {
    generate_batches<G>(isa, block, key, out, count);
    block += count * batch_blocks;
    out += count * batch;
    n -= count * batch;
  }
  if (n >= batch / 8) {  // a sizeable rest: one more batch, of which the rest is kept
    std::uint32_t rest[batch];
    generate_batches<G>(isa, block, key, rest, 1);
    std::copy_n(rest, n, out);
    return;
  }
  for (; n > 0; ++block) {  // a few outputs: block by block
    const auto words = block_at<G>(key, block);
    const std::size_t m = std::min(w, n);
    std::copy_n(words.begin(), m, out);
    out += m;
    n -= m;
  }
}

// Raw outputs go through a small buffer on the stack on their way to a float or double.
inline constexpr std::size_t chunk_raw_outputs = 1024;

template <class G>
void fill_uniform(std::uint64_t seed, std::uint64_t pos, float* out, std::size_t n) noexcept {
  std::uint32_t raw[chunk_raw_outputs];
  while (n > 0) {
    const std::size_t m = std::min(n, chunk_raw_outputs);
    fill_bits<G>(seed, pos, raw, m);
    for (std::size_t i = 0; i < m; ++i) out[i] = to_uniform_float(raw[i]);
    pos += m;
    out += m;
    n -= m;
  }
}

template <class G>
void fill_uniform(std::uint64_t seed, std::uint64_t pos, double* out, std::size_t n) noexcept {
  std::uint32_t raw[chunk_raw_outputs];
  while (n > 0) {
    const std::size_t m = std::min(n, chunk_raw_outputs / 2);
    fill_bits<G>(seed, pos, raw, 2 * m);
    for (std::size_t i = 0; i < m; ++i) out[i] = to_uniform_double(raw[2 * i], raw[2 * i + 1]);
    pos += 2 * m;
    out += m;
    n -= m;
  }
}

// Box–Muller on the raw outputs of one pair: u1 in (0, 1] from the first half (so log(u1) is
// finite), u2 in [0, 1) from the second; returns (r cos 2 pi u2, r sin 2 pi u2), r = sqrt(-2 ln u1).
inline std::pair<float, float> box_muller(const std::uint32_t* raw, float) noexcept {
  const float u1 = static_cast<float>(static_cast<std::int32_t>((raw[0] >> 8) + 1)) * 0x1p-24f;
  const float u2 = to_uniform_float(raw[1]);
  const float r = std::sqrt(-2.0f * std::log(u1));
  const float theta = 2.0f * std::numbers::pi_v<float> * u2;
  return {r * std::cos(theta), r * std::sin(theta)};
}

inline std::pair<double, double> box_muller(const std::uint32_t* raw, double) noexcept {
  const std::uint64_t w = std::uint64_t{raw[0]} | (std::uint64_t{raw[1]} << 32);
  const double u1 = static_cast<double>(static_cast<std::int64_t>((w >> 11) + 1)) * 0x1p-53;
  const double u2 = to_uniform_double(raw[2], raw[3]);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * std::numbers::pi * u2;
  return {r * std::cos(theta), r * std::sin(theta)};
}

// Normals come in pairs. The value at position p (consuming raw outputs [p, p + c)) belongs to the
// pair whose raw outputs are [p & ~c, (p & ~c) + 2c): the first value of a pair (bit c of p clear)
// is the cosine branch, the second (bit c set) the sine branch. Whole pairs are computed into a
// buffer, always by the same loop, and the requested values copied out: a value computed for a
// slice is then bit for bit the value computed for the whole, even where the compiler would
// contract or vectorize differently in a separate code path for a half pair.
template <class G, class T>
void fill_normal(std::uint64_t seed, std::uint64_t pos, T* out, std::size_t n, T mean, T stddev) noexcept {
  constexpr std::uint64_t c = raw_outputs_per_value<T>;
  constexpr std::size_t pair_raw = 2 * c;
  constexpr std::size_t chunk_pairs = chunk_raw_outputs / pair_raw;
  std::uint32_t raw[chunk_raw_outputs];
  T z[2 * chunk_pairs];
  std::uint64_t start = pos & ~c;             // where the first pair's raw outputs begin
  std::size_t skip = (pos & c) != 0 ? 1 : 0;  // its first value lies before the fill
  while (n > 0) {
    const std::size_t pairs = std::min((skip + n + 1) / 2, chunk_pairs);
    fill_bits<G>(seed, start, raw, pairs * pair_raw);
    for (std::size_t i = 0; i < pairs; ++i) {
      const auto [z0, z1] = box_muller(raw + i * pair_raw, T{});
      z[2 * i] = z0;
      z[2 * i + 1] = z1;
    }
    const std::size_t m = std::min(2 * pairs - skip, n);
    for (std::size_t i = 0; i < m; ++i) out[i] = mean + stddev * z[skip + i];
    start += pairs * pair_raw;
    out += m;
    n -= m;
    skip = 0;
  }
}

template <class T>
void check_stddev(T stddev) {
  if (!(stddev >= 0))
    throw error(errc::invalid_argument,
                "normal distribution stddev " + std::to_string(stddev) + " is not accepted; it must be a number >= 0");
}

}  // namespace detail

/// Raw output number `n` of the stream `(a, seed)`, computed on its own (see the file comment for
/// the definition). The reference for every `fill_*` function; use `fill_bits` for many outputs.
/// \throws xdev::error `errc::invalid_argument` when `a` is not a known `RngAlgorithm`.
[[nodiscard]] constexpr std::uint32_t raw_output(RngAlgorithm a, std::uint64_t seed, std::uint64_t n) {
  const auto key = key_of(seed);
  switch (a) {
    case RngAlgorithm::philox:
      return detail::block_at<Philox4x32>(key, n / 4)[n % 4];
    case RngAlgorithm::three_fry:
      return detail::block_at<Threefry2x32>(key, n / 2)[n % 2];
  }
  detail::throw_unknown_algorithm(a);
}

/// Writes raw outputs `offset + j` of the stream `(a, seed)` to `out[j]`, for every `j`.
/// \throws xdev::error `errc::invalid_argument` when `a` is not a known `RngAlgorithm`.
inline void fill_bits(RngAlgorithm a, std::uint64_t seed, std::uint64_t offset, std::span<std::uint32_t> out) {
  switch (a) {
    case RngAlgorithm::philox:
      return detail::fill_bits<Philox4x32>(seed, offset, out.data(), out.size());
    case RngAlgorithm::three_fry:
      return detail::fill_bits<Threefry2x32>(seed, offset, out.data(), out.size());
  }
  detail::throw_unknown_algorithm(a);
}

/// Fills `out` with floats uniform on [0, 1): `out[j] = to_uniform_float(raw_output(a, seed,
/// offset + j))` — one raw output per value, its top 24 bits times 2^-24. Never returns 1.
/// \throws xdev::error `errc::invalid_argument` when `a` is not a known `RngAlgorithm`.
inline void fill_uniform(RngAlgorithm a, std::uint64_t seed, std::uint64_t offset, std::span<float> out) {
  switch (a) {
    case RngAlgorithm::philox:
      return detail::fill_uniform<Philox4x32>(seed, offset, out.data(), out.size());
    case RngAlgorithm::three_fry:
      return detail::fill_uniform<Threefry2x32>(seed, offset, out.data(), out.size());
  }
  detail::throw_unknown_algorithm(a);
}

/// Fills `out` with doubles uniform on [0, 1): `out[j] = to_uniform_double(r(offset + 2j),
/// r(offset + 2j + 1))` where `r(n) = raw_output(a, seed, n)` — two raw outputs per value, 53 bits
/// times 2^-53. Never returns 1.
/// \throws xdev::error `errc::invalid_argument` when `a` is not a known `RngAlgorithm`.
inline void fill_uniform(RngAlgorithm a, std::uint64_t seed, std::uint64_t offset, std::span<double> out) {
  switch (a) {
    case RngAlgorithm::philox:
      return detail::fill_uniform<Philox4x32>(seed, offset, out.data(), out.size());
    case RngAlgorithm::three_fry:
      return detail::fill_uniform<Threefry2x32>(seed, offset, out.data(), out.size());
  }
  detail::throw_unknown_algorithm(a);
}

/// Fills `out` with normally distributed floats, `mean + stddev * z`, `z` standard normal by the
/// Box–Muller transform. One raw output per value; values come in pairs: with
/// `r(n) = raw_output(a, seed, n)`, the two values at positions `p` and `p + 1`, `p` even, consume
/// raw outputs `p` and `p + 1`, as
/// `u1 = ((r(p) >> 8) + 1) * 2^-24` in (0, 1] (so `log(u1)` is finite) and
/// `u2 = (r(p + 1) >> 8) * 2^-24`, and are `sqrt(-2 ln u1) * cos(2 pi u2)` and
/// `sqrt(-2 ln u1) * sin(2 pi u2)`. Value `j` is at position `offset + j`; a fill that starts or ends
/// in the middle of a pair still yields that pair's value, so any slice matches the whole.
/// \throws xdev::error `errc::invalid_argument` when `a` is not a known `RngAlgorithm`, or when
/// `stddev` is negative or NaN.
inline void fill_normal(RngAlgorithm a, std::uint64_t seed, std::uint64_t offset, std::span<float> out,
                        float mean = 0.0f, float stddev = 1.0f) {
  detail::check_stddev(stddev);
  switch (a) {
    case RngAlgorithm::philox:
      return detail::fill_normal<Philox4x32>(seed, offset, out.data(), out.size(), mean, stddev);
    case RngAlgorithm::three_fry:
      return detail::fill_normal<Threefry2x32>(seed, offset, out.data(), out.size(), mean, stddev);
  }
  detail::throw_unknown_algorithm(a);
}

/// Fills `out` with normally distributed doubles, `mean + stddev * z`, by Box–Muller as for floats,
/// with two raw outputs per value: value `j` is at position `q = offset + 2j`; the two values at
/// positions `p` and `p + 2`, where `p` has bit 1 clear, consume raw outputs `p` to `p + 3`:
/// `u1 = ((w >> 11) + 1) * 2^-53` in (0, 1] with `w = r(p) | r(p + 1) << 32`, and
/// `u2 = to_uniform_double(r(p + 2), r(p + 3))`; they are the cosine and the sine branch. A fill at
/// an odd offset is well defined too (pairs then start at odd positions).
/// \throws xdev::error `errc::invalid_argument` when `a` is not a known `RngAlgorithm`, or when
/// `stddev` is negative or NaN.
inline void fill_normal(RngAlgorithm a, std::uint64_t seed, std::uint64_t offset, std::span<double> out,
                        double mean = 0.0, double stddev = 1.0) {
  detail::check_stddev(stddev);
  switch (a) {
    case RngAlgorithm::philox:
      return detail::fill_normal<Philox4x32>(seed, offset, out.data(), out.size(), mean, stddev);
    case RngAlgorithm::three_fry:
      return detail::fill_normal<Threefry2x32>(seed, offset, out.data(), out.size(), mean, stddev);
  }
  detail::throw_unknown_algorithm(a);
}

}  // namespace xdev::random
