/// \file
/// `xdev::ArrayView<T, B>`: a window onto an array's elements (offset, extents, strides), never
/// owning; `xdev::slice` makes one. `AnyArrayView<T>` is the same template over an erased buffer.
#pragma once

#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/fwd.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/memory/buffer.hpp>
#include <xdev/memory/detail/view_layout.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

namespace xdev {

/// The indices [begin, end) along one dimension of a `slice`, within the dimension's extent. The
/// default `end`, `Range::to_end`, is the extent: `Range{2}` is "from 2 to the end" and `xdev::all`
/// (`Range{}`) the whole dimension.
struct Range {
  /// The `end` that means "to the end of the dimension".
  static constexpr std::int64_t to_end = std::numeric_limits<std::int64_t>::max();
  std::int64_t begin = 0;
  std::int64_t end = to_end;
};

/// Every index of a dimension: `slice(a, xdev::all, Range{0, 4})` is columns 0-3 of every row.
inline constexpr Range all{};

/// A window onto the elements of an `Array<T, B>` (or `AnyArray<T>`): rows [a, b), a column
/// block, a sub-box, in the spirit of `std::mdspan` / Kokkos `subview` / a PJRT buffer slice. It
/// holds the array's buffer by pointer, an element offset, its extents and its strides (in
/// elements); it owns nothing, and the array must outlive it and the work that uses it (and not be
/// moved: the view points at the array's buffer object). `T` may be `const` (a view made from a
/// `const` array), which transfers may read but not write.
///
///     auto a = xdev::empty<float>(dev, {1024, 512});
///     auto rows = xdev::slice(a, {128, 256});                   // rows 128-255, contiguous
///     auto box = xdev::slice(a, {0, 64}, {256, 512});           // a 64 x 256 sub-box, strided
///     std::vector<float> host(rows.size());
///     dev.copy_to_host(rows, host).get();                       // one transfer
///     dev.copy_to_device(std::span<const float>(patch), box).get();  // one transfer per row
///
/// Transfers take views (`Stream`, `Device`, `AnyStream`, `AnyDevice`): the host side is dense, in
/// the view's row-major order; a contiguous view is one backend transfer at its offset, a strided
/// one is one transfer per contiguous run (`run_count()`).
template <class T, class B>
class ArrayView {
  using buffer_type = Buffer<std::remove_const_t<T>, B>;

 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using backend_type = B;

  /// A view of no elements on no device.
  ArrayView() = default;
  /// The whole of `a`. From a non-`const` array for a view of non-`const` `T`.
  template <class U>
  requires std::is_same_v<std::remove_const_t<T>, U> ArrayView(Array<U, B>& a) : ArrayView(a.buffer(), a.shape()) {}
  template <class U>
  requires(std::is_same_v<T, const U>) ArrayView(const Array<U, B>& a) : ArrayView(a.buffer(), a.shape()) {}
  /// A `const` view of a non-`const` one.
  template <class U>
  requires(std::is_same_v<T, const U>) ArrayView(const ArrayView<U, B>& v) : buffer_(v.buffer_), layout_(v.layout_) {}

  [[nodiscard]] const Shape& shape() const noexcept { return layout_.shape; }
  [[nodiscard]] std::size_t rank() const noexcept { return layout_.shape.rank(); }
  /// Number of elements in the window.
  [[nodiscard]] std::size_t size() const noexcept { return layout_.numel(); }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size() * sizeof(value_type); }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  /// Offset of the first element in the array's buffer, in elements.
  [[nodiscard]] std::size_t offset() const noexcept { return layout_.offset; }
  /// Distance between consecutive indices of dimension `d` in the buffer, in elements.
  [[nodiscard]] std::int64_t stride(std::size_t d) const {
    check_dim(d, "stride");
    return layout_.strides[d];
  }
  /// Whether the window's elements are one contiguous block of the buffer, in row-major order.
  [[nodiscard]] bool is_contiguous() const noexcept { return layout_.run_count() <= 1; }
  /// Number of contiguous blocks the window's elements make (what a transfer of it costs in backend
  /// calls): 1 for rows of a row-major array, one per row for a column block.
  [[nodiscard]] std::size_t run_count() const noexcept { return layout_.run_count(); }
  /// The array's buffer (all of it, not only the window).
  /// \throws xdev::error `errc::invalid_argument` for a default-constructed view (of no array).
  [[nodiscard]] const buffer_type& buffer() const {
    if (buffer_ == nullptr)
      throw error(errc::invalid_argument, "a default-constructed ArrayView is a window onto no array");
    return *buffer_;
  }
  /// The device of the array: a `const Device<B>&`, or a `const AnyDevice&` for an `AnyArrayView`.
  /// \throws xdev::error as `buffer()`.
  [[nodiscard]] decltype(auto) device() const { return buffer().device(); }
  /// \throws xdev::error as `buffer()`.
  [[nodiscard]] auto native_handle() const { return buffer().native_handle(); }
  /// Host pointer to the window's first element, for backends whose memory the host addresses
  /// (`Buffer::host_data()` plus `offset()`); element (i, j, ...) is at `i * stride(0) + j *
  /// stride(1) + ...` from it, so a strided window is indexed through its strides. Null for an
  /// empty window. For an `AnyArrayView`: `xdev::host_data(view)` (<xdev/any/parallel.hpp>).
  /// \throws xdev::error as `buffer()`.
  [[nodiscard]] T* host_data() const requires concepts::HostAccessibleBackend<B> {
    const buffer_type& b = buffer();
    return empty() ? nullptr : b.host_data() + layout_.offset;
  }
  /// Where the elements are (for transfers): offset, shape and strides.
  [[nodiscard]] const detail::ViewLayout& layout() const noexcept { return layout_; }

  /// A window of this window: one `Range` per leading dimension (the others whole), each within
  /// this view's extent.
  /// \throws xdev::error `errc::invalid_argument` naming the dimension and the range when a range
  ///         is reversed, negative or past the extent, or there are more ranges than dimensions.
  [[nodiscard]] ArrayView slice(Range r0) const { return sliced(std::array{r0}); }
  [[nodiscard]] ArrayView slice(Range r0, Range r1) const { return sliced(std::array{r0, r1}); }
  [[nodiscard]] ArrayView slice(Range r0, Range r1, Range r2) const { return sliced(std::array{r0, r1, r2}); }
  [[nodiscard]] ArrayView slice(Range r0, Range r1, Range r2, Range r3) const {
    return sliced(std::array{r0, r1, r2, r3});
  }
  /// As `slice`, with the ranges in a span (any number up to the rank).
  [[nodiscard]] ArrayView sliced(std::span<const Range> ranges) const {
    if (ranges.size() > rank())
      throw error(errc::invalid_argument, "slice: " + std::to_string(ranges.size()) + " ranges for a view of shape " +
                                              to_string(shape()) + " (rank " + std::to_string(rank()) + ")");
    ArrayView out = *this;
    std::array<std::int64_t, Shape::max_rank> extents{};
    for (std::size_t d = 0; d < rank(); ++d) extents[d] = shape()[static_cast<std::ptrdiff_t>(d)];
    for (std::size_t d = 0; d < ranges.size(); ++d) {
      const Range r = ranges[d];
      const std::int64_t n = extents[d];
      const std::int64_t end = r.end == Range::to_end ? n : r.end;
      if (r.begin < 0 || end < r.begin || end > n)
        throw error(errc::invalid_argument, "slice: range [" + std::to_string(r.begin) + ", " +
                                                (r.end == Range::to_end ? std::string("end") : std::to_string(r.end)) +
                                                ") of dimension " + std::to_string(d) + " is outside [0, " +
                                                std::to_string(n) + ") of shape " + to_string(shape()));
      extents[d] = end - r.begin;
      out.layout_.offset += static_cast<std::size_t>(r.begin * layout_.strides[d]);
    }
    out.layout_.shape = Shape(std::span<const std::int64_t>(extents.data(), rank()));
    return out;
  }

 private:
  template <class, class>
  friend class ArrayView;

  ArrayView(const buffer_type& b, const Shape& s) : buffer_(&b), layout_(detail::ViewLayout::dense(s)) {}

  void check_dim(std::size_t d, const char* what) const {
    if (d >= rank())
      throw error(errc::invalid_argument, std::string(what) + ": dimension " + std::to_string(d) +
                                              " is out of range for a view of shape " + to_string(shape()));
  }

  const buffer_type* buffer_ = nullptr;
  detail::ViewLayout layout_{.offset = 0, .shape = Shape{0}, .strides = {1}};  // no elements
};

namespace detail {
/// The view `slice` makes of `A`: of `T` for an `Array<T, B>`, of `const T` for a `const` one,
/// the same view for a view.
template <class A>
struct view_of {};
template <class T, class B>
struct view_of<Array<T, B>> {
  using type = ArrayView<T, B>;
};
template <class T, class B>
struct view_of<const Array<T, B>> {
  using type = ArrayView<const T, B>;
};
template <class T, class B>
struct view_of<ArrayView<T, B>> {
  using type = ArrayView<T, B>;
};
template <class T, class B>
struct view_of<const ArrayView<T, B>> {
  using type = ArrayView<T, B>;
};
template <class V>
inline constexpr bool is_array_view = false;
template <class T, class B>
inline constexpr bool is_array_view<ArrayView<T, B>> = true;
/// An array (only as an lvalue: a view of a temporary array would dangle) or a view.
template <class A>
concept sliceable = requires {
  typename view_of<std::remove_reference_t<A>>::type;
}
&&(std::is_lvalue_reference_v<A> || is_array_view<std::remove_cvref_t<A>>);
}  // namespace detail

/// A window of `a` (an `Array`, `AnyArray` or a view of one): one `Range` per leading dimension,
/// the others whole. From a `const` array, a view of `const` elements.
///
///     xdev::slice(a, {2, 5})                 // rows 2-4
///     xdev::slice(a, xdev::all, {0, 8})      // columns 0-7 of every row
///
/// \throws xdev::error `errc::invalid_argument` as `ArrayView::slice`.
template <class A>
requires detail::sliceable<A&&>
[[nodiscard]] auto slice(A&& a, std::span<const Range> ranges) {
  using view = typename detail::view_of<std::remove_reference_t<A>>::type;
  return view(a).sliced(ranges);
}
template <class A>
requires detail::sliceable<A&&>
[[nodiscard]] auto slice(A&& a, Range r0) {
  return slice(std::forward<A>(a), std::span<const Range>(std::array{r0}));
}
template <class A>
requires detail::sliceable<A&&>
[[nodiscard]] auto slice(A&& a, Range r0, Range r1) {
  return slice(std::forward<A>(a), std::span<const Range>(std::array{r0, r1}));
}
template <class A>
requires detail::sliceable<A&&>
[[nodiscard]] auto slice(A&& a, Range r0, Range r1, Range r2) {
  return slice(std::forward<A>(a), std::span<const Range>(std::array{r0, r1, r2}));
}
template <class A>
requires detail::sliceable<A&&>
[[nodiscard]] auto slice(A&& a, Range r0, Range r1, Range r2, Range r3) {
  return slice(std::forward<A>(a), std::span<const Range>(std::array{r0, r1, r2, r3}));
}

}  // namespace xdev
