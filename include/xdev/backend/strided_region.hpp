/// \file
/// `xdev::StridedRegion`: a strided window of an allocation, in bytes, as a transfer of a
/// non-contiguous `ArrayView` hands it to a backend that takes one in a single call
/// (`concepts::StridedTransfers`: `clEnqueueReadBufferRect`, `cudaMemcpy3DAsync`).
#pragma once

#include <cstddef>

namespace xdev {

/// `slices` slices of `rows` rows of `row_bytes` contiguous bytes each, in an allocation: row r of
/// slice s starts `offset + s * slice_pitch + r * row_pitch` bytes into it. The host side of the
/// transfer is dense: that row is at byte `(s * rows + r) * row_bytes` of the host memory.
///
/// xdev passes `row_pitch >= row_bytes`, `slice_pitch >= rows * row_pitch`, and a region of more
/// than one row (a contiguous window goes through the plain transfer). A view of more than three
/// strided dimensions becomes several regions, one call each.
struct StridedRegion {
  std::size_t offset = 0;       ///< bytes from the allocation's start to row 0 of slice 0
  std::size_t row_bytes = 0;    ///< contiguous bytes per row
  std::size_t rows = 1;         ///< rows per slice
  std::size_t row_pitch = 0;    ///< bytes from one row's start to the next row's
  std::size_t slices = 1;       ///< slices
  std::size_t slice_pitch = 0;  ///< bytes from one slice's start to the next slice's

  /// The bytes the region holds (and the host side's size).
  [[nodiscard]] constexpr std::size_t bytes() const noexcept { return row_bytes * rows * slices; }
  /// Where row `r` (counting over every slice, `r < rows * slices`) starts in the allocation.
  [[nodiscard]] constexpr std::size_t row_offset(std::size_t r) const noexcept {
    return offset + (r / rows) * slice_pitch + (r % rows) * row_pitch;
  }
};

}  // namespace xdev
