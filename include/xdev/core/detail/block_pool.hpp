/// \file
/// `detail::block_pool`: recycled memory for the small objects every submission creates (its
/// operation record, a future's shared state), so that the steady-state submission path does not
/// go to the global heap. Like Asio's recycling allocator, but shared by all threads: a submission
/// allocates on the submitting thread and its completion frees on a worker, so a per-thread cache
/// would never be hit.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <new>

namespace xdev::detail {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool block_pool_enabled = false;  // let AddressSanitizer see every use after free
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool block_pool_enabled = false;
#else
inline constexpr bool block_pool_enabled = true;
#endif
#else
inline constexpr bool block_pool_enabled = true;
#endif

/// Size classes of 64 to 1024 bytes, each a free list behind its own mutex, holding at most
/// `max_cached` blocks (what a device with a deep queue recycles; more goes back to the heap).
/// Larger or over-aligned requests go straight to the heap.
///
/// One pool per module (a plugin has its own). The pool object lives in static storage and is
/// never destroyed, so that work finishing during static destruction can still free into it; at
/// exit, or when a plugin is unloaded, its caches are emptied and it stops caching (`drain`), so
/// an unloaded plugin leaves no block behind.
class block_pool {
 public:
  static constexpr std::size_t min_block = 64;
  static constexpr std::size_t class_count = 5;  // 64, 128, 256, 512, 1024
  static constexpr std::size_t max_block = min_block << (class_count - 1);
  static constexpr std::size_t max_cached = 4096;

  static block_pool& instance() {
    alignas(block_pool) static unsigned char storage[sizeof(block_pool)];
    static block_pool* const p = ::new (static_cast<void*>(storage)) block_pool;
    static const drain_at_exit drain{p};  // destroyed before anything constructed earlier
    return *p;
  }

  [[nodiscard]] void* allocate(std::size_t bytes) {
    if (!block_pool_enabled || bytes > max_block || draining_.load(std::memory_order_acquire))
      return ::operator new(bytes);
    bucket& b = buckets_[class_of(bytes)];
    {
      std::lock_guard lk(b.m);
      if (free_block* f = b.head) {
        b.head = f->next;
        --b.count;
        return f;
      }
    }
    return ::operator new(block_size(class_of(bytes)));
  }

  void deallocate(void* p, std::size_t bytes) noexcept {
    if (!block_pool_enabled || bytes > max_block) {
      ::operator delete(p);
      return;
    }
    const std::size_t c = class_of(bytes);
    bucket& b = buckets_[c];
    {
      std::lock_guard lk(b.m);
      if (b.count < max_cached && !draining_.load(std::memory_order_relaxed)) {
        b.head = ::new (p) free_block{b.head};
        ++b.count;
        return;
      }
    }
    ::operator delete(p);
  }

 private:
  struct free_block {
    free_block* next;
  };
  struct bucket {
    std::mutex m;
    free_block* head = nullptr;
    std::size_t count = 0;
  };

  static constexpr std::size_t block_size(std::size_t c) noexcept { return min_block << c; }
  static std::size_t class_of(std::size_t bytes) noexcept {
    std::size_t c = 0;
    while (block_size(c) < bytes) ++c;
    return c;
  }

  // Gives every cached block back to the heap and stops caching.
  void drain() noexcept {
    draining_.store(true, std::memory_order_release);
    for (bucket& b : buckets_) {
      std::lock_guard lk(b.m);
      while (free_block* f = b.head) {
        b.head = f->next;
        ::operator delete(static_cast<void*>(f));
      }
      b.count = 0;
    }
  }

  struct drain_at_exit {
    block_pool* pool;
    ~drain_at_exit() { pool->drain(); }
  };

  block_pool() = default;
  bucket buckets_[class_count];
  std::atomic<bool> draining_{false};
};

/// A standard allocator over `block_pool` (for `std::allocate_shared`, `std::promise`, Asio's
/// associated allocator).
template <class T>
struct pool_allocator {
  using value_type = T;
  pool_allocator() noexcept = default;
  template <class U>
  pool_allocator(const pool_allocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor): rebind

  [[nodiscard]] T* allocate(std::size_t n) {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
      return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{alignof(T)}));
    else
      return static_cast<T*>(block_pool::instance().allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
      ::operator delete (p, std::align_val_t{alignof(T)});
    else
      block_pool::instance().deallocate(p, n * sizeof(T));
  }
  template <class U>
  friend bool operator==(const pool_allocator&, const pool_allocator<U>&) noexcept {
    return true;
  }
};

}  // namespace xdev::detail
