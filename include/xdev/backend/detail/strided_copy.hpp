/// \file
/// Transfers of a strided region (`StridedRegion`) between a device and dense host memory, and
/// copies between two regions of the same rows, decided once for typed devices, `AnyDevice`s and
/// the plugin bridge: the backend's strided hook (`concepts::StridedTransfers`,
/// `concepts::StridedCopies`), or one plain transfer per row.
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/backend/detail/join.hpp>
#include <xdev/backend/strided_region.hpp>

#include <cstddef>
#include <utility>

namespace xdev::detail {

/// Copies `region` of `h` on `device` densely to `dst` with one `copy_to_host` per row.
template <class B, class H>
void copy_rows_to_host(B& b, std::size_t device, const H& h, const StridedRegion& region, std::byte* dst,
                       Completion done) {
  start_parts(
      region.rows * region.slices,
      [&](std::size_t r, Completion part) {
        b.copy_to_host(device, h, region.row_offset(r), dst + r * region.row_bytes, region.row_bytes, std::move(part));
      },
      std::move(done));
}

/// Copies dense host memory `src` into `region` of `h` on `device` with one `copy_to_device` per row.
template <class B, class H>
void copy_rows_to_device(B& b, std::size_t device, const std::byte* src, const H& h, const StridedRegion& region,
                         Completion done) {
  start_parts(
      region.rows * region.slices,
      [&](std::size_t r, Completion part) {
        b.copy_to_device(device, src + r * region.row_bytes, h, region.row_offset(r), region.row_bytes,
                         std::move(part));
      },
      std::move(done));
}

/// Copies each row of `sr` of `sh` on `sd` to the same row of `dr` of `dh` on `dd` with one
/// `copy_between` per row.
template <class B, class H>
void copy_rows_between(B& b, std::size_t sd, const H& sh, const StridedRegion& sr, std::size_t dd, const H& dh,
                       const StridedRegion& dr, Completion done) {
  start_parts(
      sr.rows * sr.slices,
      [&](std::size_t r, Completion part) {
        b.copy_between(sd, sh, sr.row_offset(r), dd, dh, dr.row_offset(r), sr.row_bytes, std::move(part));
      },
      std::move(done));
}

/// Copies `region` of `h` on `device` densely to `dst`: the backend's `copy_to_host_strided`
/// when it has one, else one `copy_to_host` per row.
template <class B, class H>
void copy_region_to_host(B& b, std::size_t device, const H& h, const StridedRegion& region, std::byte* dst,
                         Completion done) {
  if constexpr (concepts::StridedTransfers<B>)
    b.copy_to_host_strided(device, h, region, dst, std::move(done));
  else
    copy_rows_to_host(b, device, h, region, dst, std::move(done));
}

/// Copies dense host memory `src` into `region` of `h` on `device`: the backend's
/// `copy_to_device_strided` when it has one, else one `copy_to_device` per row.
template <class B, class H>
void copy_region_to_device(B& b, std::size_t device, const std::byte* src, const H& h, const StridedRegion& region,
                           Completion done) {
  if constexpr (concepts::StridedTransfers<B>)
    b.copy_to_device_strided(device, src, h, region, std::move(done));
  else
    copy_rows_to_device(b, device, src, h, region, std::move(done));
}

/// Copies each row of `sr` of `sh` on `sd` to the same row of `dr` of `dh` on `dd`: the backend's
/// `copy_between_strided` when it has one, else one `copy_between` per row.
template <class B, class H>
void copy_region_between(B& b, std::size_t sd, const H& sh, const StridedRegion& sr, std::size_t dd, const H& dh,
                         const StridedRegion& dr, Completion done) {
  if constexpr (concepts::StridedCopies<B>)
    b.copy_between_strided(sd, sh, sr, dd, dh, dr, std::move(done));
  else
    copy_rows_between(b, sd, sh, sr, dd, dh, dr, std::move(done));
}

}  // namespace xdev::detail
