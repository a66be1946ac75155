/// \file
/// The host random fill: the counter-based streams of <xdev/random/stream.hpp>, in parallel, the
/// same for any pool.
#pragma once

#include <xdev/kernels/detail/element_types.hpp>
#include <xdev/kernels/parallel.hpp>
#include <xdev/policy/policies.hpp>
#include <xdev/random/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace xdev::kernels {

/// Fills out[0, n) with element `offset`, `offset + 1`, ... of the counter-based stream
/// (algorithm `a`, `seed`) as <xdev/random/stream.hpp> defines it: uniform on [0, 1)
/// (`random::fill_uniform`) or, with `normal`, `mean + stddev * z` for standard normal z
/// (`random::fill_normal`). T is float or double. Value j consumes raw outputs from position
/// `offset + random::raw_outputs_per_value<T> * j`; chunks filled in parallel start at their own
/// position, so the result is the same for any `par`.
/// \throws xdev::error `errc::invalid_argument` for an unknown algorithm or, with `normal`, a
/// negative or NaN `stddev` (before anything is written).
template <detail::FloatData T>
void rng(const Parallel& par, T* out, std::size_t n, RngAlgorithm a, std::uint64_t seed, std::uint64_t offset,
         bool normal, T mean, T stddev) {
  // An empty fill validates the algorithm (and stddev) before any chunk runs.
  if (normal)
    random::fill_normal(a, seed, offset, std::span<T>{}, mean, stddev);
  else
    random::fill_uniform(a, seed, offset, std::span<T>{});
  constexpr std::uint64_t per_value = random::raw_outputs_per_value<T>;
  // A normal pair cut by a chunk boundary is computed by both chunks, each keeping its half.
  parallel_for(par, n, std::size_t{1} << 14, [=](std::size_t b, std::size_t e) {
    const std::uint64_t pos = offset + per_value * static_cast<std::uint64_t>(b);
    const std::span<T> part(out + b, e - b);
    if (normal)
      random::fill_normal(a, seed, pos, part, mean, stddev);
    else
      random::fill_uniform(a, seed, pos, part);
  });
}

}  // namespace xdev::kernels
