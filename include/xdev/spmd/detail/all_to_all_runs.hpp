/// \file
/// Where `spmd::all_to_all` copies from and to: the contiguous runs of each block, found by
/// placing the input, the output and the block in one frame (internal to the SPMD collectives).
#pragma once

#include <xdev/core/shape.hpp>
#include <xdev/spmd/sharding.hpp>

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace xdev::spmd::detail {

/// For all_to_all over a group of `k` with inputs of shape `s`, split along `sa` and concatenated
/// along `ca`: block j (along `sa`) of member q's input lands at position q along `ca` of member
/// j's output. Calls `f(q, src_offset, dst_offset, count)` (in elements) for every contiguous run
/// that member `j` receives, for every q in order. The three boxes share one frame, shifted so
/// that no bound is negative (docs/spmd.md).
template <class F>
void for_each_all_to_all_run(const Shape& s, std::size_t k, std::size_t j, std::size_t sa, std::size_t ca, F&& f) {
  const std::size_t rank = s.rank();
  const auto block = s[sa] / static_cast<Shape::value_type>(k);
  const auto kk = static_cast<Shape::value_type>(k), jj = static_cast<Shape::value_type>(j);
  for (std::size_t q = 0; q < k; ++q) {
    const auto qq = static_cast<Shape::value_type>(q);
    std::vector<Shape::value_type> sb(rank, 0), se(rank), db(rank, 0), de(rank), rb(rank, 0), re(rank);
    for (std::size_t d = 0; d < rank; ++d) se[d] = de[d] = re[d] = s[d];
    if (sa != ca) {
      const auto extent = s[ca];
      sb[ca] = qq * extent, se[ca] = sb[ca] + extent;  // the input, placed at q along ca
      db[sa] = jj * block, de[sa] = db[sa] + block;    // the output, which is block j along sa
      de[ca] = kk * extent;
      rb[sa] = jj * block, re[sa] = rb[sa] + block;
      rb[ca] = qq * extent, re[ca] = rb[ca] + extent;
    } else {
      sb[sa] = (kk + qq - jj) * block, se[sa] = sb[sa] + s[sa];
      db[sa] = kk * block, de[sa] = db[sa] + s[sa];
      rb[sa] = (kk + qq) * block, re[sa] = rb[sa] + block;
    }
    using Span = std::span<const Shape::value_type>;
    for_each_run(IndexBox(Span(rb), Span(re)), IndexBox(Span(sb), Span(se)), IndexBox(Span(db), Span(de)),
                 [&](std::size_t src, std::size_t dst, std::size_t n) { f(q, src, dst, n); });
  }
}

}  // namespace xdev::spmd::detail
