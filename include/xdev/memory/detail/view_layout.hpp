/// \file
/// `detail::ViewLayout`: where the elements of a window (`xdev::ArrayView`) are in its buffer, the
/// contiguous runs they make, and the checks of a copy between two windows. Depends on `Shape`
/// only, so that streams can take views without the array headers.
#pragma once

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
