/// \file
/// `xdev::Buffer<T, B>`: device memory for `size()` elements of `T`, owned (RAII, move-only).
#pragma once

#include <xdev/backend/concepts.hpp>
#include <xdev/fwd.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace xdev {

namespace detail {

/// What a `Buffer<T, B>` needs from the device it lives on: the device handle type, the memory
/// handle type, and how to give the memory back. For a typed backend, `Device<B>` and its
/// allocator; <xdev/any/any_device.hpp> specializes it for the erased backend (`AnyBuffer<T>`:
/// an `AnyDevice` and its model).
template <class B>
struct buffer_device {
  using device_type = Device<B>;
  using handle_type = typename memory_handle_of<B>::type;
  static void release(const device_type& d, handle_type h, std::size_t bytes) noexcept { d.release_memory(h, bytes); }
};

}  // namespace detail

/// Device memory for `size()` elements of `T` on one device; frees it when destroyed. Made by
/// `Device<B>::allocate<T>(n)` (or `AnyDevice::allocate<T>(n)`: `AnyBuffer<T>` is
/// `Buffer<T, erased_backend>`, this same class over the erased device). Move-only; a moved-from
/// buffer is empty and on no device.
///
/// Destroying a buffer returns its memory to the device at once: wait for work that uses it
/// (its future, `Device::synchronize()`) before the buffer goes.
template <class T, class B>
class Buffer {
  static_assert(std::is_trivially_copyable_v<T>, "xdev::Buffer<T, B>: T must be trivially copyable");
  using device_traits = detail::buffer_device<B>;

 public:
  using value_type = T;
  using backend_type = B;
  /// `Device<B>`, or `AnyDevice` for an `AnyBuffer<T>`.
  using device_type = typename device_traits::device_type;
  using handle_type = typename device_traits::handle_type;

  Buffer() noexcept = default;
  Buffer(Buffer&& o) noexcept
      : device_(std::exchange(o.device_, device_type{})),
        handle_(std::exchange(o.handle_, handle_type{})),
        size_(std::exchange(o.size_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = std::exchange(o.device_, device_type{});
      handle_ = std::exchange(o.handle_, handle_type{});
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  /// Number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// The device that owns the memory.
  [[nodiscard]] const device_type& device() const noexcept { return device_; }
  /// The backend's handle (for backend-specific interop; erased for an `AnyBuffer`).
  [[nodiscard]] handle_type native_handle() const noexcept { return handle_; }

  /// Host pointer to the elements, for backends whose memory the host can address directly.
  [[nodiscard]] T* host_data() const noexcept requires concepts::HostAccessibleBackend<B> {
    return static_cast<T*>(device_.backend().host_address(handle_));
  }

  /// Frees the memory now; the buffer becomes empty.
  void reset() noexcept {
    if (size_ != 0) device_traits::release(device_, handle_, size_bytes());
    handle_ = handle_type{};
    size_ = 0;
  }

 private:
  friend device_type;
  Buffer(device_type d, handle_type h, std::size_t n) noexcept : device_(std::move(d)), handle_(h), size_(n) {}

  device_type device_{};
  handle_type handle_{};
  std::size_t size_ = 0;
};

}  // namespace xdev
