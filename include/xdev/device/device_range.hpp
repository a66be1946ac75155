/// \file
/// `xdev::DeviceRange<B>`: every device of one runtime, as a random-access view of `Device<B>`
/// values in ordinal order (what `Runtime<B>::devices()` returns).
///
/// A view for both range libraries: range-v3 pipelines (`rt.devices() | ranges::views::filter(...)`)
/// and `std::views` accept it as they accept an `iota | transform`, which is what it is, written out
/// so that naming a runtime does not compile range-v3's view machinery.
#pragma once

#include <xdev/device/device.hpp>

#include <range/v3/range_fwd.hpp>

#include <compare>
#include <cstddef>
#include <iterator>
#include <ranges>

namespace xdev {

template <class B>
class DeviceRange : public ranges::view_base {
 public:
  /// Yields `Device<B>` by value (a handle is three words), like `iota | transform` would.
  class iterator {
   public:
    using iterator_concept = std::random_access_iterator_tag;
    using iterator_category = std::input_iterator_tag;  // its reference is not a reference
    using value_type = Device<B>;
    using difference_type = std::ptrdiff_t;

    iterator() = default;
    iterator(Runtime<B>* runtime, std::size_t ordinal) noexcept : runtime_(runtime), ordinal_(ordinal) {}

    Device<B> operator*() const noexcept { return Device<B>(*runtime_, ordinal_); }
    Device<B> operator[](difference_type n) const noexcept { return *(*this + n); }

    iterator& operator++() noexcept { return ++ordinal_, *this; }
    iterator operator++(int) noexcept { return {runtime_, ordinal_++}; }
    iterator& operator--() noexcept { return --ordinal_, *this; }
    iterator operator--(int) noexcept { return {runtime_, ordinal_--}; }
    iterator& operator+=(difference_type n) noexcept {
      ordinal_ = static_cast<std::size_t>(static_cast<difference_type>(ordinal_) + n);
      return *this;
    }
    iterator& operator-=(difference_type n) noexcept { return *this += -n; }
    friend iterator operator+(iterator it, difference_type n) noexcept { return it += n; }
    friend iterator operator+(difference_type n, iterator it) noexcept { return it += n; }
    friend iterator operator-(iterator it, difference_type n) noexcept { return it -= n; }
    friend difference_type operator-(const iterator& a, const iterator& b) noexcept {
      return static_cast<difference_type>(a.ordinal_) - static_cast<difference_type>(b.ordinal_);
    }
    friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.ordinal_ == b.ordinal_; }
    friend std::strong_ordering operator<=>(const iterator& a, const iterator& b) noexcept {
      return a.ordinal_ <=> b.ordinal_;
    }

   private:
    Runtime<B>* runtime_ = nullptr;
    std::size_t ordinal_ = 0;
  };

  DeviceRange() = default;
  DeviceRange(Runtime<B>& runtime, std::size_t count) noexcept : runtime_(&runtime), count_(count) {}

  [[nodiscard]] iterator begin() const noexcept { return {runtime_, 0}; }
  [[nodiscard]] iterator end() const noexcept { return {runtime_, count_}; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  /// Device `i`, unchecked (as a view's subscript): `Runtime::device(i)` checks.
  [[nodiscard]] Device<B> operator[](std::size_t i) const noexcept { return Device<B>(*runtime_, i); }

 private:
  Runtime<B>* runtime_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace xdev

template <class B>
inline constexpr bool std::ranges::enable_view<xdev::DeviceRange<B>> = true;
