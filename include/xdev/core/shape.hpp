/// \file
/// `xdev::Shape`: the extents of an N-dimensional array, stored inline.
#pragma once

#include <xdev/core/error.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>

namespace xdev {

/// Extents of an array of rank 0 to `Shape::max_rank`, stored inline (no allocation).
///
///     xdev::Shape s{2, 3};   // s.rank() == 2, s.numel() == 6, to_string(s) == "[2, 3]"
class Shape {
 public:
  static constexpr std::size_t max_rank = 8;
  using value_type = std::int64_t;

 private:
  // Defined before the constructors that use them: clang 14 cannot constant-evaluate a call to a
  // member template defined later in the class.
  template <class It>
  constexpr void assign(It first, It last) {
    const auto n = static_cast<std::size_t>(last - first);
    if (n > max_rank)
      throw error(errc::invalid_argument,
                  "shape of rank " + std::to_string(n) + " exceeds the maximum rank " + std::to_string(max_rank));
    for (std::size_t i = 0; first != last; ++first, ++i) {
      if (*first < 0)
        throw error(errc::invalid_argument,
                    "shape extent " + std::to_string(*first) + " at dimension " + std::to_string(i) + " is negative");
      dims_[i] = *first;
    }
    rank_ = n;
  }
  constexpr std::size_t normalize(std::ptrdiff_t i) const {
    const auto r = static_cast<std::ptrdiff_t>(rank_);
    if (i < -r || i >= r)
      throw error(errc::invalid_argument,
                  "dimension " + std::to_string(i) + " is out of range for a shape of rank " + std::to_string(r));
    return static_cast<std::size_t>(i < 0 ? i + r : i);
  }

 public:
  constexpr Shape() noexcept = default;

  /// \throws xdev::error `errc::invalid_argument` for a negative extent or more than `max_rank` extents.
  constexpr Shape(std::initializer_list<value_type> extents) { assign(extents.begin(), extents.end()); }

  /// \throws xdev::error as for the initializer-list constructor.
  constexpr explicit Shape(std::span<const value_type> extents) { assign(extents.begin(), extents.end()); }

  [[nodiscard]] constexpr std::size_t rank() const noexcept { return rank_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return numel() == 0; }

  /// Number of elements: the product of the extents (1 for rank 0).
  [[nodiscard]] constexpr std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (std::size_t i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }

  /// Extent of dimension `i`; negative `i` counts from the back.
  /// \throws xdev::error `errc::invalid_argument` when `i` is out of range.
  [[nodiscard]] constexpr value_type operator[](std::ptrdiff_t i) const { return dims_[normalize(i)]; }
  [[nodiscard]] constexpr value_type& operator[](std::ptrdiff_t i) { return dims_[normalize(i)]; }

  [[nodiscard]] constexpr const value_type* begin() const noexcept { return dims_.data(); }
  [[nodiscard]] constexpr const value_type* end() const noexcept { return dims_.data() + rank_; }
  [[nodiscard]] constexpr std::span<const value_type> extents() const noexcept { return {begin(), end()}; }

  friend constexpr bool operator==(const Shape& a, const Shape& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

  /// "[2, 3]"; "[]" for a scalar.
  friend std::string to_string(const Shape& s) {
    std::string out = "[";
    for (std::size_t i = 0; i < s.rank_; ++i) {
      if (i) out += ", ";
      out += std::to_string(s.dims_[i]);
    }
    return out + "]";
  }
  friend std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << to_string(s); }

 private:
  std::array<value_type, max_rank> dims_{};
  std::size_t rank_ = 0;
};

/// "[2, 3]"; "[]" for a scalar. (Declared here too so that `xdev::to_string(s)` finds it.)
std::string to_string(const Shape& s);

}  // namespace xdev
