/// \file
/// Host memory a device reads and writes fast (`torch.Tensor.pin_memory`, SYCL's `malloc_host`,
/// `cudaHostAlloc`): `xdev::pinned<T>(device, n)` gives a `PinnedBuffer<T>` of `n` elements that the
/// device's backend may back with page-locked or device-mapped memory (the OpenCL plugin: a mapped
/// `CL_MEM_ALLOC_HOST_PTR` buffer; the CUDA plugin: `cudaHostAlloc`). Transfers from and to it
/// then take the backend's fast path (a direct DMA instead of a staged copy). Where the backend has
/// no such memory (the host backend, REF) it is ordinary, 64-byte-aligned host memory, and
/// `backend_allocated()` says so.
///
///     auto staging = xdev::pinned<float>(dev, n);
///     std::copy(batch.begin(), batch.end(), staging.begin());
///     dev.copy_to_device(staging.span(), x);   // the fast path
///
/// The memory is released after the work submitted to the device before the buffer was dropped (as
/// device buffers are), so a transfer still in flight never reads freed memory.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/core/error.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <utility>

namespace xdev {

/// `n` elements of host memory for transfers with one device (see the file comment). Move-only;
/// its elements are uninitialised.
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() noexcept = default;
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : device_(std::move(o.device_)),
        data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        backend_(o.backend_) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      device_ = std::move(o.device_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      backend_ = o.backend_;
    }
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { release(); }

  [[nodiscard]] T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] T* begin() const noexcept { return data_; }
  [[nodiscard]] T* end() const noexcept { return data_ + size_; }
  [[nodiscard]] T& operator[](std::size_t i) const noexcept { return data_[i]; }
  [[nodiscard]] std::span<T> span() const noexcept { return {data_, size_}; }
  /// The device the memory is for.
  [[nodiscard]] const AnyDevice& device() const noexcept { return device_; }
  /// True when the backend allocated it (page-locked or device-mapped memory); false for ordinary
  /// host memory, on a backend without pinned memory.
  [[nodiscard]] bool backend_allocated() const noexcept { return backend_; }

 private:
  template <class U>
  friend PinnedBuffer<U> pinned(const AnyDevice& device, std::size_t n);

  PinnedBuffer(AnyDevice device, T* data, std::size_t n, bool backend) noexcept
      : device_(std::move(device)), data_(data), size_(n), backend_(backend) {}

  void release() noexcept {
    if (data_ == nullptr) return;
    device_.model().deallocate_pinned({data_, backend_}, size_ * sizeof(T));
    data_ = nullptr;
    size_ = 0;
  }

  AnyDevice device_;
  T* data_ = nullptr;
  std::size_t size_ = 0;
  bool backend_ = false;
};

/// `n` elements of pinned host memory for transfers with `device` (see the file comment).
/// \throws xdev::error `errc::invalid_argument` for a handle of no device or a size that overflows;
///         `errc::out_of_memory` naming the device and the size when neither the backend nor the
///         system can provide it.
template <class T>
[[nodiscard]] PinnedBuffer<T> pinned(const AnyDevice& device, std::size_t n) {
  if (!device.valid()) throw error(errc::invalid_argument, "pinned: the handle names no device");
  if (n > static_cast<std::size_t>(-1) / sizeof(T))
    throw error(errc::invalid_argument, "pinned: " + std::to_string(n) + " elements overflow the address space");
  if (n == 0) return PinnedBuffer<T>(device, nullptr, 0, false);
  const detail::PinnedBlock b = device.model().allocate_pinned(n * sizeof(T));
  return PinnedBuffer<T>(device, static_cast<T*>(b.data), n, b.backend);
}

}  // namespace xdev
