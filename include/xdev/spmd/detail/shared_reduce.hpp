/// \file
/// The arithmetic of the shared-memory collectives: a block-wise reduction of host arrays into
/// several destinations, with the portable ops' arithmetic (internal to the SPMD collectives).
#pragma once

#include <xdev/core/half.hpp>
#include <xdev/core/op_kind.hpp>
#include <xdev/kernels/elementwise.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

namespace xdev::spmd::detail {

template <class T, class Op>
void reduce_host_blocks_with(bool mean, T* const* src, std::size_t nsrc, T* const* dst, std::size_t ndst, std::size_t n,
                             Op op) {
  constexpr std::size_t block = 8192 / sizeof(T) > 0 ? 8192 / sizeof(T) : 1;
  T acc[block];
  const bool scale = mean && nsrc > 1;
  T alpha{};
  if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    if constexpr (std::is_same_v<T, double>)
      alpha = 1.0 / static_cast<double>(nsrc);
    else
      alpha = T(static_cast<float>(1.0 / static_cast<double>(nsrc)));
  }
  for (std::size_t i = 0; i < n; i += block) {
    const std::size_t m = std::min(block, n - i);
    std::memcpy(acc, src[0] + i, m * sizeof(T));
    for (std::size_t q = 1; q < nsrc; ++q) kernels::detail::map2(acc, src[q] + i, acc, m, op);
    if (scale) kernels::detail::map2(acc, acc, acc, m, [alpha](T v, T) { return kernels::detail::mul(v, alpha); });
    for (std::size_t j = 0; j < ndst; ++j) std::memcpy(dst[j] + i, acc, m * sizeof(T));
  }
}

/// `dst[j][i] = src[0][i] op src[1][i] op ...` (in that order; for `mean` scaled by 1/nsrc as
/// `ops::scale` does) for every j < ndst and i < n. Sources may be destinations. Block by block
/// through a local accumulator, so each source is read once and each destination written once.
template <class T>
void reduce_host_blocks(ops::BinaryOp op, bool mean, T* const* src, std::size_t nsrc, T* const* dst, std::size_t ndst,
                        std::size_t n) {
  switch (op) {
    case ops::BinaryOp::add:
      return reduce_host_blocks_with(mean, src, nsrc, dst, ndst, n,
                                     [](T a, T b) { return kernels::detail::add(a, b); });
    case ops::BinaryOp::mul:
      return reduce_host_blocks_with(mean, src, nsrc, dst, ndst, n,
                                     [](T a, T b) { return kernels::detail::mul(a, b); });
    case ops::BinaryOp::min:
      return reduce_host_blocks_with(mean, src, nsrc, dst, ndst, n,
                                     [](T a, T b) { return kernels::detail::min(a, b); });
    case ops::BinaryOp::max:
      return reduce_host_blocks_with(mean, src, nsrc, dst, ndst, n,
                                     [](T a, T b) { return kernels::detail::max(a, b); });
  }
}

}  // namespace xdev::spmd::detail
