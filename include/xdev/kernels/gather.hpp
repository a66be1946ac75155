/// \file
/// The host `gather`: sparse (row copies) and dense (the streaming lowering of `DenseGather`),
/// bit-identical to each other.
#pragma once

#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/kernels/detail/element_types.hpp>
#include <xdev/kernels/parallel.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace xdev::kernels {

namespace detail {

template <std::size_t N>
struct uint_of_size;
template <>
struct uint_of_size<1> {
  using type = std::uint8_t;
};
template <>
struct uint_of_size<2> {
  using type = std::uint16_t;
};
template <>
struct uint_of_size<4> {
  using type = std::uint32_t;
};
template <>
struct uint_of_size<8> {
  using type = std::uint64_t;
};

// Output columns the dense lowering handles at once (kept in a local buffer of bit patterns).
inline constexpr std::size_t dense_gather_tile = 512;

// The work of `gather` for elements of `Size` bytes: only the size matters (rows are copied and
// selected as bit patterns), so the eight dtypes share four instantiations.
template <std::size_t Size, GatherIndex I>
void gather_bits(const Parallel& par, const std::byte* table, std::size_t rows, std::size_t cols, const I* index,
                 std::size_t n, std::byte* out, bool dense) {
  std::atomic<std::size_t> first_bad{n};
  parallel_for(par, n, elementwise_grain, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const I v = index[i];
      if (v < 0 || static_cast<std::make_unsigned_t<I>>(v) >= rows) {
        std::size_t seen = first_bad.load(std::memory_order_relaxed);
        while (i < seen && !first_bad.compare_exchange_weak(seen, i, std::memory_order_relaxed)) {
        }
        return;
      }
    }
  });
  if (const std::size_t i = first_bad.load(); i < n)
    throw error(errc::invalid_argument, "gather: index " + std::to_string(index[i]) + " at position " +
                                            std::to_string(i) + " is out of range for a table of " +
                                            std::to_string(rows) + " rows");
  if (n == 0 || cols == 0) return;
  const std::size_t row_bytes = cols * Size;
  if (!dense) {
    parallel_for(par, n, std::max<std::size_t>(1, elementwise_grain / cols), [=](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i)
        std::memcpy(out + i * row_bytes, table + static_cast<std::size_t>(index[i]) * row_bytes, row_bytes);
    });
    return;
  }
  using U = typename uint_of_size<Size>::type;
  parallel_for(par, n, std::max<std::size_t>(1, elementwise_grain / std::max<std::size_t>(1, rows * cols)),
               [=](std::size_t b, std::size_t e) {
                 U acc[dense_gather_tile];
                 for (std::size_t i = b; i < e; ++i) {
                   const auto want = static_cast<std::size_t>(index[i]);
                   for (std::size_t c0 = 0; c0 < cols; c0 += dense_gather_tile) {
                     const std::size_t w = std::min(dense_gather_tile, cols - c0);
                     std::fill(acc, acc + w, U{0});
                     for (std::size_t r = 0; r < rows; ++r) {
                       const U mask = static_cast<U>(U{0} - static_cast<U>(r == want));  // all ones or zero
                       const std::byte* src = table + (r * cols + c0) * Size;
                       for (std::size_t j = 0; j < w; ++j) {
                         U bits;
                         std::memcpy(&bits, src + j * Size, Size);
                         acc[j] = static_cast<U>((bits & mask) | (acc[j] & static_cast<U>(~mask)));
                       }
                     }
                     std::memcpy(out + (i * cols + c0) * Size, acc, w * Size);
                   }
                 }
               });
}

}  // namespace detail

/// `out[i, :] = table[index[i], :]` for i < n, with `table` rows x cols and `out` n x cols, both
/// row-major and contiguous. `I` is `std::int32_t` or `std::int64_t`.
///
/// Every index is checked before anything is written. `dense` selects the lowering:
/// - sparse (`false`): each output row is a copy of its table row (`std::memcpy`), O(n * cols);
/// - dense (`true`): the lowering of hardware that gathers by streaming the whole table (see
///   `DenseGather`): for each output row, every table row is visited and selected with a
///   branch-free bitwise select on the element bit patterns, O(n * rows * cols). Selecting bits (not
///   multiplying by a one-hot row, which would turn -0.0 into +0.0 and spread NaN * 0) makes the
///   result bit-identical to the sparse lowering, NaN payloads and signed zeros included.
/// \throws xdev::error `errc::invalid_argument` for the first (lowest-position) index outside
/// [0, rows): "gather: index <v> at position <i> is out of range for a table of <rows> rows";
/// `out` is then untouched.
template <HasDType T, detail::GatherIndex I>
void gather(const Parallel& par, const T* table, std::size_t rows, std::size_t cols, const I* index, std::size_t n,
            T* out, bool dense) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::gather_bits<sizeof(T)>(par, reinterpret_cast<const std::byte*>(table), rows, cols, index, n,
                                 reinterpret_cast<std::byte*>(out), dense);
}

}  // namespace xdev::kernels
