/// \file
/// The element-type sets the host kernels accept, and the chunk size of element-wise work.
#pragma once

#include <xdev/core/dtype.hpp>
#include <xdev/core/half.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace xdev::kernels {

namespace detail {

template <class T>
inline constexpr bool is_half = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

template <class T>
inline constexpr bool is_float = std::is_same_v<T, float> || std::is_same_v<T, double>;

/// Element types of `dot`, `gemm` and `rng`: float and double.
template <class T>
concept FloatData = is_float<T>;

/// Element types of `sum` and `sum_axis`: every dtype but bool.
template <class T>
concept SummableData = HasDType<T> && !std::is_same_v<T, bool>;

/// Index types of `gather`.
template <class I>
concept GatherIndex = std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>;

// Elements processed per parallel chunk, at least, by element-wise kernels and reductions.
inline constexpr std::size_t elementwise_grain = std::size_t{1} << 16;

}  // namespace detail

}  // namespace xdev::kernels
