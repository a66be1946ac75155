/// \file
/// `detail::block_pool`: recycled memory for the small objects every submission creates (its
/// operation record, a future's shared state), so that the steady-state submission path does not
/// go to the global heap. Like Asio's recycling allocator, but shared by all threads: a submission
/// allocates on the submitting thread and its completion frees on a worker, so a per-thread cache
/// alone would never be hit. Each thread keeps a small magazine per size class in front of the
/// shared lists and trades blocks with them a batch at a time, so a block's trip from the
/// submitting thread to a worker and back costs a shared lock once per batch, not twice per block.
#pragma once

#include <xdev/core/detail/spin_mutex.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <utility>

#include <pthread.h>

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

/// Size classes of 64 to 1024 bytes, each a shared list of batches behind its own lock, holding at most
/// `max_cached` blocks (what a device with a deep queue recycles; more goes back to the heap), and
/// per thread a magazine of at most `magazine` blocks, traded with the shared list `batch` at a
/// time. Larger or over-aligned requests go straight to the heap.
///
/// One pool per module (a plugin has its own). The pool object lives in static storage and is
/// never destroyed, so that work finishing during static destruction can still free into it; at
/// exit, or when a plugin is unloaded, its caches are emptied and it stops caching (`drain`), so
/// an unloaded plugin leaves no block behind in the pool. A thread's magazines go back to the
/// shared lists when the thread ends, through a POSIX thread-specific key, not a `thread_local`
/// object with a destructor: the C++ runtime registers such a destructor with the module that
/// defines it, which keeps a plugin mapped until every thread that ever touched its pool has
/// ended (the main thread never does). The key is deleted when the pool drains; blocks still in
/// the magazines of running threads are then never freed (at most `magazine` per size class and
/// thread, once per exit or unload).
class block_pool {
 public:
  static constexpr std::size_t min_block = 64;
  static constexpr std::size_t class_count = 5;  // 64, 128, 256, 512, 1024
  static constexpr std::size_t max_block = min_block << (class_count - 1);
  static constexpr std::size_t max_cached = 4096;
  /// Blocks a thread keeps per size class, and how many it trades with the shared list at once.
  static constexpr std::size_t magazine = 64;
  static constexpr std::size_t batch = magazine / 2;

  static block_pool& instance() {
    alignas(block_pool) static unsigned char storage[sizeof(block_pool)];
    static block_pool* const p = ::new (static_cast<void*>(storage)) block_pool;
    static const drain_at_exit drain{p};  // destroyed before anything constructed earlier
    return *p;
  }

  [[nodiscard]] void* allocate(std::size_t bytes) {
    if (!block_pool_enabled || bytes > max_block || draining_.load(std::memory_order_acquire))
      return ::operator new(bytes);
    const std::size_t c = class_of(bytes);
    thread_cache& tc = local();
    if (!tc.dead) {
      if (tc.count[c] == 0) refill(tc, c);
      if (free_block* f = tc.head[c]) {
        tc.head[c] = f->next;
        --tc.count[c];
        return f;
      }
    }
    return ::operator new(block_size(c));
  }

  void deallocate(void* p, std::size_t bytes) noexcept {
    if (!block_pool_enabled || bytes > max_block || draining_.load(std::memory_order_acquire)) {
      ::operator delete(p);
      return;
    }
    const std::size_t c = class_of(bytes);
    thread_cache& tc = local();
    if (tc.dead) {  // this thread's cache is gone (it is exiting): straight to the shared list
      give_back(c, ::new (p) free_block{nullptr});
      return;
    }
    if (tc.count[c] == magazine) spill(tc, c);
    tc.head[c] = ::new (p) free_block{tc.head[c]};
    ++tc.count[c];
  }

 private:
  // A free block: linked through `next` in a magazine and within a batch. The first block of a
  // batch on a shared list also holds the batch's length and the next batch, so that trading a
  // batch with the shared list is one push or pop under its lock: walking a batch there (cold
  // memory, a cache miss per block) held the lock long enough for the other thread trading at the
  // same time to sleep on it in the kernel.
  struct free_block {
    free_block* next;
    free_block* next_batch = nullptr;
    std::size_t size = 1;
  };
  static_assert(sizeof(free_block) <= min_block);
  struct alignas(64) bucket {  // one cache line each: threads using different classes do not collide
    SpinMutex m;
    free_block* batches = nullptr;
    std::size_t count = 0;  // blocks in all batches
  };
  // A thread's magazines. Trivially destructible (no exit hook registered for it), so that it
  // stays usable while the thread's thread-local objects are destroyed; `flush_thread` empties it
  // after them and marks it dead.
  struct thread_cache {
    free_block* head[class_count];
    std::uint32_t count[class_count];
    bool armed;
    bool dead;
  };

  // The thread-specific key's destructor: the ending thread's magazines go to the shared lists.
  static void flush_thread(void* p) noexcept {
    auto* cache = static_cast<thread_cache*>(p);
    cache->dead = true;
    for (std::size_t c = 0; c < class_count; ++c) {
      if (cache->count[c] != 0) instance().give_back(c, cache->head[c]);
      cache->head[c] = nullptr;
      cache->count[c] = 0;
    }
  }

  thread_cache& local() noexcept {
    static thread_local thread_cache tc{};
    if (!tc.armed) [[unlikely]] {
      tc.armed = true;
      if (exit_key_ready_.load(std::memory_order_acquire)) pthread_setspecific(exit_key_, &tc);
    }
    return tc;
  }

  static constexpr std::size_t block_size(std::size_t c) noexcept { return min_block << c; }
  static std::size_t class_of(std::size_t bytes) noexcept {
    std::size_t c = 0;
    while (block_size(c) < bytes) ++c;
    return c;
  }

  // Fills the thread's empty magazine of class `c` with a batch from the shared list, if any.
  void refill(thread_cache& tc, std::size_t c) noexcept {
    bucket& b = buckets_[c];
    free_block* got = nullptr;
    {
      std::lock_guard lk(b.m);
      got = b.batches;
      if (got == nullptr) return;
      b.batches = got->next_batch;
      b.count -= got->size;
    }
    tc.head[c] = got;
    tc.count[c] = static_cast<std::uint32_t>(got->size);
  }

  // Moves `batch` blocks of the thread's full magazine to the shared list.
  void spill(thread_cache& tc, std::size_t c) noexcept {
    free_block* first = tc.head[c];
    free_block* last = first;
    for (std::size_t i = 1; i < batch; ++i) last = last->next;
    tc.head[c] = last->next;
    tc.count[c] -= static_cast<std::uint32_t>(batch);
    last->next = nullptr;
    give_back_batch(c, first, batch);
  }

  // Puts the blocks linked from `first` on the shared list of class `c`, in batches.
  void give_back(std::size_t c, free_block* first) noexcept {
    while (first != nullptr) {
      free_block* last = first;
      std::size_t k = 1;
      for (; k < batch && last->next != nullptr; ++k) last = last->next;
      free_block* rest = last->next;
      last->next = nullptr;
      give_back_batch(c, first, k);
      first = rest;
    }
  }

  // Puts one batch of `n` linked blocks on the shared list of class `c`; a batch that does not fit
  // (over `max_cached`, or the pool is draining) goes back to the heap.
  void give_back_batch(std::size_t c, free_block* first, std::size_t n) noexcept {
    bucket& b = buckets_[c];
    {
      std::lock_guard lk(b.m);
      if (b.count + n <= max_cached && !draining_.load(std::memory_order_relaxed)) {
        first->size = n;
        first->next_batch = b.batches;
        b.batches = first;
        b.count += n;
        return;
      }
    }
    free_list(first);
  }

  // Returns the blocks linked through `next` from `first` to the heap.
  static void free_list(free_block* first) noexcept {
    while (first) {
      free_block* f = first;
      first = f->next;
      ::operator delete(static_cast<void*>(f));
    }
  }

  // Gives every cached block back to the heap and stops caching. Blocks in the magazines of
  // threads still running stay there (see the class comment).
  void drain() noexcept {
    draining_.store(true, std::memory_order_release);
    if (exit_key_ready_.exchange(false)) pthread_key_delete(exit_key_);  // no flush_thread once unmapped
    for (bucket& b : buckets_) {
      free_block* batches = nullptr;
      {
        std::lock_guard lk(b.m);
        batches = std::exchange(b.batches, nullptr);
        b.count = 0;
      }
      while (free_block* f = batches) {
        batches = f->next_batch;
        free_list(f);
      }
    }
  }

  struct drain_at_exit {
    block_pool* pool;
    ~drain_at_exit() { pool->drain(); }
  };

  block_pool() noexcept { exit_key_ready_.store(pthread_key_create(&exit_key_, &flush_thread) == 0); }
  bucket buckets_[class_count];
  std::atomic<bool> draining_{false};
  pthread_key_t exit_key_{};
  std::atomic<bool> exit_key_ready_{false};  // without a key (none left), magazines stay to the end
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
