/// \file
/// The pieces of view transfers (`start_runs`, `start_run_pairs`, `start_regions`), through `detail::start_parts`
/// (<xdev/backend/detail/join.hpp>, included for the code that fans in with `Join` from here).
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/backend/detail/join.hpp>
#include <xdev/backend/strided_region.hpp>
#include <xdev/memory/detail/view_layout.hpp>

#include <cstddef>
#include <numeric>
#include <utility>

namespace xdev::detail {

/// One part per contiguous run of a view's `layout` (a `detail::ViewLayout`, elements of `elem`
/// bytes), through `start_parts`: `copy(buffer_byte_offset, host_byte_offset, bytes, part_done)`
/// starts the run's transfer; the host side is dense, in the view's row-major order.
template <class Layout, class Copy>
void start_runs(const Layout& layout, std::size_t elem, Copy&& copy, Completion done) {
  const std::size_t run = layout.run_length() * elem;
  start_parts(
      layout.run_count(),
      [&](std::size_t r, Completion part) { copy(layout.run_offset(r) * elem, r * run, run, std::move(part)); },
      std::move(done));
}

/// One part per piece common to two views' runs (`detail::ViewLayout`s of equal shape, elements
/// of `elem` bytes), through `start_parts`: `copy(src_byte_offset, dst_byte_offset, bytes,
/// part_done)` starts a device-to-device transfer of one piece. A piece is as long as the greatest
/// common divisor of the two run lengths, so it never crosses a run of either view: one piece when
/// both are contiguous, one per row of the strided one when the other is contiguous.
template <class Layout, class Copy>
void start_run_pairs(const Layout& src, const Layout& dst, std::size_t elem, Copy&& copy, Completion done) {
  const std::size_t s_run = src.run_length(), d_run = dst.run_length();
  const std::size_t piece = std::gcd(s_run, d_run);
  start_parts(
      piece == 0 ? 0 : src.numel() / piece,
      [&](std::size_t p, Completion part) {
        const std::size_t first = p * piece;  // the piece's first element, in row-major order
        copy((src.run_offset(first / s_run) + first % s_run) * elem,
             (dst.run_offset(first / d_run) + first % d_run) * elem, piece * elem, std::move(part));
      },
      std::move(done));
}

/// One part per pair of strided regions of two windows of one shape (their `PairPlan`, elements
/// of `elem` bytes), through `start_parts`: `copy(src_region, dst_region, part_done)` starts the
/// pair's device-to-device copy.
template <class Copy>
void start_region_pairs(const ViewLayout& src, const ViewLayout& dst, std::size_t elem, Copy&& copy, Completion done) {
  const PairPlan plan(src, dst, elem);
  start_parts(
      plan.count(),
      [&](std::size_t i, Completion part) {
        const PairPlan::Pair p = plan.pair(i);
        copy(p.src, p.dst, std::move(part));
      },
      std::move(done));
}

/// One part per strided region of a window's `layout` (its `RegionPlan`, elements of `elem`
/// bytes), through `start_parts`: `copy(region, host_byte_offset, part_done)` starts the region's
/// transfer; the host side is dense, in the window's row-major order.
template <class Copy>
void start_regions(const ViewLayout& layout, std::size_t elem, Copy&& copy, Completion done) {
  const RegionPlan plan(layout, elem);
  start_parts(
      plan.count(),
      [&](std::size_t i, Completion part) { copy(plan.region(i), i * plan.region_bytes(), std::move(part)); },
      std::move(done));
}

/// A window's transfer with dense host memory: `plain(byte_offset, host_byte_offset, bytes, part)`
/// once for a contiguous window; else `strided(region, host_byte_offset, part)` per strided region.
template <class Plain, class Strided>
void start_view_transfer(const ViewLayout& l, std::size_t elem, Plain&& plain, Strided&& strided, Completion done) {
  if (l.run_count() <= 1)
    start_runs(l, elem, plain, std::move(done));
  else
    start_regions(l, elem, strided, std::move(done));
}

/// A copy between two windows of one shape: `plain(src_byte_offset, dst_byte_offset, bytes, part)`
/// once when both are contiguous; else `strided(src_region, dst_region, part)` per pair of regions.
template <class Plain, class Strided>
void start_view_copy(const ViewLayout& src, const ViewLayout& dst, std::size_t elem, Plain&& plain, Strided&& strided,
                     Completion done) {
  if (src.run_count() <= 1 && dst.run_count() <= 1)
    start_run_pairs(src, dst, elem, plain, std::move(done));
  else
    start_region_pairs(src, dst, elem, strided, std::move(done));
}

}  // namespace xdev::detail
