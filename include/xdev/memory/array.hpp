/// \file
/// `xdev::Array<T, B>`: a buffer with a shape — what the portable operations take.
#pragma once

#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/memory/buffer.hpp>

#include <cstddef>
#include <string>
#include <utility>

namespace xdev {

/// A dense row-major N-dimensional array in device memory: a `Buffer<T, B>` of `shape.numel()`
/// elements and its `Shape`. Move-only, like the buffer it owns. `xdev::AnyArray<T>` is this
/// template over an erased buffer (`xdev::AnyBuffer<T>`, see <xdev/any/any_device.hpp>).
///
///     auto a = xdev::empty<float>(dev, {128, 64});
///     dev.copy_to_device(std::span<const float>(host), a.buffer()).get();
template <class T, class B>
class Array {
 public:
  using value_type = T;
  using backend_type = B;

  Array() = default;
  /// \throws xdev::error `errc::invalid_argument` when the buffer does not hold `shape.numel()` elements.
  Array(Buffer<T, B> buffer, Shape shape) : buffer_(std::move(buffer)), shape_(shape) {
    if (static_cast<std::size_t>(shape_.numel()) != buffer_.size())
      throw error(errc::invalid_argument, "array of shape " + to_string(shape_) + " needs " +
                                              std::to_string(shape_.numel()) + " elements, but the buffer holds " +
                                              std::to_string(buffer_.size()));
  }

  [[nodiscard]] const Shape& shape() const noexcept { return shape_; }
  [[nodiscard]] std::size_t rank() const noexcept { return shape_.rank(); }
  [[nodiscard]] std::size_t size() const noexcept { return buffer_.size(); }
  /// The device of the buffer: a `const Device<B>&`, or a `const AnyDevice&` for an `AnyArray<T>`.
  [[nodiscard]] decltype(auto) device() const noexcept { return buffer_.device(); }
  [[nodiscard]] Buffer<T, B>& buffer() noexcept { return buffer_; }
  [[nodiscard]] const Buffer<T, B>& buffer() const noexcept { return buffer_; }

  /// Reinterprets the same elements with another shape of the same element count.
  /// \throws xdev::error `errc::invalid_argument` naming both shapes when the counts differ.
  Array reshaped(Shape shape) && {
    if (shape.numel() != shape_.numel())
      throw error(errc::invalid_argument,
                  "cannot reshape " + to_string(shape_) + " to " + to_string(shape) + ": element counts differ");
    return Array(std::move(buffer_), shape);
  }

 private:
  Buffer<T, B> buffer_;
  Shape shape_;
};

/// A new array of `shape` on `dev`, contents unspecified.
/// \throws xdev::error `errc::out_of_memory` as `Device::allocate`.
template <class T, class B>
Array<T, B> empty(const Device<B>& dev, Shape shape) {
  return Array<T, B>(dev.template allocate<T>(static_cast<std::size_t>(shape.numel())), shape);
}

}  // namespace xdev
