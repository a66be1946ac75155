/// \file
/// `xdev::Buffer<T, B>`: device memory for `size()` elements of `T`, owned (RAII, move-only).
#pragma once

#include <xdev/backend/concepts.hpp>
#include <xdev/fwd.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace xdev {

/// Device memory for `size()` elements of `T` on one device; frees it when destroyed. Made by
/// `Device<B>::allocate<T>(n)`. Move-only; a moved-from buffer is empty and on no device.
///
/// Destroying a buffer returns its memory to the device at once: wait for work that uses it
/// (its future, `Device::synchronize()`) before the buffer goes.
template <class T, class B>
class Buffer {
  static_assert(std::is_trivially_copyable_v<T>, "xdev::Buffer<T, B>: T must be trivially copyable");

 public:
  using value_type = T;
  using backend_type = B;
  using handle_type = typename detail::memory_handle_of<B>::type;

  Buffer() noexcept = default;
  Buffer(Buffer&& o) noexcept
      : device_(std::exchange(o.device_, Device<B>{})),
        handle_(std::exchange(o.handle_, handle_type{})),
        size_(std::exchange(o.size_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = std::exchange(o.device_, Device<B>{});
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
  [[nodiscard]] const Device<B>& device() const noexcept { return device_; }
  /// The backend's handle (for backend-specific interop).
  [[nodiscard]] handle_type native_handle() const noexcept { return handle_; }

  /// Host pointer to the elements, for backends whose memory the host can address directly.
  [[nodiscard]] T* host_data() const noexcept requires concepts::HostAccessibleBackend<B> {
    return static_cast<T*>(device_.backend().host_address(handle_));
  }

  /// Frees the memory now; the buffer becomes empty.
  void reset() noexcept {
    if (size_ != 0) device_.release_memory(handle_, size_bytes());
    handle_ = handle_type{};
    size_ = 0;
  }

 private:
  friend class Device<B>;
  Buffer(Device<B> d, handle_type h, std::size_t n) noexcept : device_(d), handle_(h), size_(n) {}

  Device<B> device_{};
  handle_type handle_{};
  std::size_t size_ = 0;
};

}  // namespace xdev
