/// \file
/// `detail::ViewLayout`: where the elements of a window (`xdev::ArrayView`) are in its buffer, the
/// contiguous runs they make, the strided regions a backend copies in one call each
/// (`RegionPlan`, `PairPlan`), and the checks of a copy between two windows. Depends on `Shape` (and the
/// backend's `StridedRegion`) only, so that streams can take views without the array headers.
#pragma once

#include <xdev/backend/strided_region.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace xdev::detail {

/// Where a view's elements are in its buffer: element `(i0, ..., ik)` of the view is buffer element
/// `offset + i0 * strides[0] + ... + ik * strides[k]`. Copyable and small, for the transfer's launch
/// to keep.
struct ViewLayout {
  std::size_t offset = 0;
  Shape shape;
  std::array<std::int64_t, Shape::max_rank> strides{};

  /// The layout of a whole row-major array of `s`: offset 0, dense strides.
  [[nodiscard]] static ViewLayout dense(const Shape& s) {
    ViewLayout l;
    l.shape = s;
    std::int64_t stride = 1;
    for (std::size_t d = s.rank(); d-- > 0;) {
      l.strides[d] = stride;
      stride *= s[static_cast<std::ptrdiff_t>(d)];
    }
    return l;
  }

  [[nodiscard]] std::size_t numel() const noexcept { return static_cast<std::size_t>(shape.numel()); }

  /// How many trailing dimensions are laid out densely (each stride the product of the extents
  /// after it), so that their elements form one contiguous run; dimensions of extent 1 never break
  /// a run.
  [[nodiscard]] std::size_t dense_tail(std::size_t& run) const noexcept {
    run = 1;
    std::size_t d = shape.rank();
    while (d > 0) {
      const auto extent = shape[static_cast<std::ptrdiff_t>(d - 1)];
      if (extent != 1 && strides[d - 1] != static_cast<std::int64_t>(run)) break;
      run *= static_cast<std::size_t>(extent);
      --d;
    }
    return shape.rank() - d;
  }

  /// Elements per contiguous run (the whole view when it is contiguous; 0 when it is empty).
  [[nodiscard]] std::size_t run_length() const noexcept {
    if (numel() == 0) return 0;
    std::size_t run = 1;
    (void)dense_tail(run);
    return run;
  }
  /// Number of contiguous runs the view's elements make, in row-major order.
  [[nodiscard]] std::size_t run_count() const noexcept {
    const std::size_t run = run_length();
    return run == 0 ? 0 : numel() / run;
  }

  /// The buffer element where contiguous run `r` (of `run_count()`, in the view's row-major
  /// order, so that the runs' host counterparts are consecutive) starts.
  [[nodiscard]] std::size_t run_offset(std::size_t r) const noexcept {
    std::size_t run = 1;
    const std::size_t outer = shape.rank() - dense_tail(run);
    std::int64_t at = static_cast<std::int64_t>(offset);
    for (std::size_t d = outer; d-- > 0;) {  // r's index over the outer dimensions, last fastest
      const auto extent = static_cast<std::size_t>(shape[static_cast<std::ptrdiff_t>(d)]);
      at += static_cast<std::int64_t>(r % extent) * strides[d];
      r /= extent;
    }
    return static_cast<std::size_t>(at);
  }
};

/// Whether two windows onto one buffer share an element (walking both runs in buffer order, which
/// is their row-major order: a view's strides decrease with its dimensions).
/// Two windows of one shape as pairs of strided regions (`StridedRegion`, in bytes) with the same
/// rows: the dense tail common to both makes the rows; the two innermost other dimensions (after
/// dropping those of extent 1 and merging those that line up in both windows) the rows and
/// slices of each pair; and every dimension further out one pair per index. Pair i holds the
/// elements from `i * region_bytes()` on, in row-major order.
class PairPlan {
 public:
  struct Pair {
    StridedRegion src, dst;
  };

  PairPlan(const ViewLayout& s, const ViewLayout& d, std::size_t elem) {
    if (s.numel() == 0) return;
    const std::size_t rank = s.shape.rank();
    std::size_t run = 1, dim = rank;
    for (; dim > 0; --dim) {
      const auto e = static_cast<std::size_t>(s.shape[static_cast<std::ptrdiff_t>(dim - 1)]);
      const auto r = static_cast<std::int64_t>(run);
      if (e != 1 && (s.strides[dim - 1] != r || d.strides[dim - 1] != r)) break;
      run *= e;
    }
    // The other dimensions, innermost first: extent and byte strides in both windows.
    std::array<std::size_t, Shape::max_rank> ext{}, sp{}, dp{};
    std::size_t n = 0;
    for (std::size_t k = dim; k-- > 0;) {
      const auto e = static_cast<std::size_t>(s.shape[static_cast<std::ptrdiff_t>(k)]);
      const auto ps = static_cast<std::size_t>(s.strides[k]) * elem, pd = static_cast<std::size_t>(d.strides[k]) * elem;
      if (e == 1) continue;
      if (n > 0 && sp[n - 1] * ext[n - 1] == ps && dp[n - 1] * ext[n - 1] == pd) {
        ext[n - 1] *= e;  // lines up with the dimension inside it in both: one longer dimension
        continue;
      }
      ext[n] = e;
      sp[n] = ps;
      dp[n] = pd;
      ++n;
    }
    const auto first = [&](std::size_t offset, const std::array<std::size_t, Shape::max_rank>& pitch) {
      StridedRegion r;
      r.offset = offset * elem;
      r.row_bytes = run * elem;
      r.rows = n > 0 ? ext[0] : 1;
      r.row_pitch = n > 0 ? pitch[0] : r.row_bytes;
      r.slices = n > 1 ? ext[1] : 1;
      r.slice_pitch = n > 1 ? pitch[1] : r.rows * r.row_pitch;
      return r;
    };
    first_ = {first(s.offset, sp), first(d.offset, dp)};
    count_ = 1;
    for (std::size_t k = 2; k < n; ++k) {
      outer_[outer_n_++] = {ext[k], sp[k], dp[k]};
      count_ *= ext[k];
    }
  }

  /// The number of pairs (0 for empty windows).
  [[nodiscard]] std::size_t count() const noexcept { return count_; }
  /// The bytes of each region.
  [[nodiscard]] std::size_t region_bytes() const noexcept { return first_.src.bytes(); }
  /// Pair `i`, `i < count()`.
  [[nodiscard]] Pair pair(std::size_t i) const noexcept {
    Pair p = first_;
    for (std::size_t k = 0; k < outer_n_; ++k) {  // innermost of the outer dimensions first
      const std::size_t at = i % outer_[k].extent;
      p.src.offset += at * outer_[k].src_pitch;
      p.dst.offset += at * outer_[k].dst_pitch;
      i /= outer_[k].extent;
    }
    return p;
  }

 private:
  struct Outer {
    std::size_t extent = 0, src_pitch = 0, dst_pitch = 0;
  };
  Pair first_{};
  std::size_t count_ = 0;
  std::array<Outer, Shape::max_rank> outer_{};
  std::size_t outer_n_ = 0;
};

/// A window as strided regions against dense memory of its shape (the host side of a transfer):
/// the `src` side of the `PairPlan` of the window and a dense row-major layout.
class RegionPlan {
 public:
  RegionPlan(const ViewLayout& l, std::size_t elem) : pairs_(l, ViewLayout::dense(l.shape), elem) {}

  /// The number of regions (0 for an empty window).
  [[nodiscard]] std::size_t count() const noexcept { return pairs_.count(); }
  /// The bytes of each region.
  [[nodiscard]] std::size_t region_bytes() const noexcept { return pairs_.region_bytes(); }
  /// Region `i`, `i < count()`.
  [[nodiscard]] StridedRegion region(std::size_t i) const noexcept { return pairs_.pair(i).src; }

 private:
  PairPlan pairs_;
};

[[nodiscard]] inline bool views_overlap(const ViewLayout& a, const ViewLayout& b) noexcept {
  const std::size_t na = a.run_count(), nb = b.run_count(), la = a.run_length(), lb = b.run_length();
  for (std::size_t i = 0, j = 0; i < na && j < nb;) {
    const std::size_t ai = a.run_offset(i), bj = b.run_offset(j);
    if (ai < bj + lb && bj < ai + la) return true;
    if (ai + la <= bj + lb)
      ++i;
    else
      ++j;
  }
  return false;
}

/// The checks of a device-to-device copy between two windows: equal shapes, and no shared element
/// when both are windows onto one buffer (`same_buffer`).
/// \throws xdev::error `errc::invalid_argument` naming the shapes, or the overlap.
inline void check_view_copy(const ViewLayout& src, const ViewLayout& dst, bool same_buffer) {
  if (src.shape != dst.shape)
    throw error(errc::invalid_argument, "copy: the source window has shape " + to_string(src.shape) +
                                            " but the destination window has shape " + to_string(dst.shape));
  if (same_buffer && views_overlap(src, dst))
    throw error(errc::invalid_argument,
                "copy: the source and destination windows share elements of one array (offsets " +
                    std::to_string(src.offset) + " and " + std::to_string(dst.offset) +
                    "); a copy between overlapping windows is not supported, copy through another array");
}

}  // namespace xdev::detail
