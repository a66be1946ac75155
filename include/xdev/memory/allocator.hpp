/// \file
/// `xdev::DeviceAllocator<B>`: a device's caching allocator with statistics and an optional limit.
#pragma once

#include <xdev/backend/concepts.hpp>
#include <xdev/core/detail/hooks.hpp>
#include <xdev/core/detail/node_cache.hpp>
#include <xdev/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

namespace xdev {

/// Memory statistics of one device, in bytes unless stated.
struct MemoryStats {
  std::size_t bytes_in_use = 0;       ///< held by live buffers
  std::size_t peak_bytes_in_use = 0;  ///< highest `bytes_in_use` since creation or the last `reset_peak`
  std::size_t bytes_reserved = 0;     ///< obtained from the backend: in use plus cached for reuse
  std::size_t allocation_count = 0;   ///< live allocations
  std::size_t total_allocations = 0;  ///< allocations served since creation (from the cache or the backend)
  std::optional<std::size_t> limit;   ///< at most this many bytes in use; none = only the device's own size

  friend bool operator==(const MemoryStats&, const MemoryStats&) = default;
  friend std::ostream& operator<<(std::ostream& os, const MemoryStats& s) {
    os << "{in_use=" << s.bytes_in_use << ", peak=" << s.peak_bytes_in_use << ", reserved=" << s.bytes_reserved
       << ", allocations=" << s.allocation_count << ", total_allocations=" << s.total_allocations << ", limit=";
    if (s.limit)
      os << *s.limit;
    else
      os << "none";
    return os << '}';
  }
};

/// Serves a device's allocations from the backend and keeps freed blocks for reuse by requests of
/// the same size (the steady state of a training loop then never calls the backend). A request that
/// would take `bytes_in_use` over the limit is `errc::out_of_memory`; before giving up, the
/// allocator returns its cached blocks to the backend and retries once. Thread-safe.
template <concepts::Backend B>
class DeviceAllocator {
 public:
  using handle_type = typename B::memory_handle;

  DeviceAllocator(B& backend, std::size_t ordinal, std::string device_name, std::optional<std::size_t> limit)
      : backend_(&backend), ordinal_(ordinal), name_(std::move(device_name)) {
    stats_.limit = limit;
  }
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;
  ~DeviceAllocator() { release_cached(); }

  /// A block of `bytes` bytes (0 gives a null handle without calling the backend).
  /// \throws xdev::error `errc::out_of_memory` naming the device, the request, the bytes in use and the limit.
  handle_type allocate(std::size_t bytes) {
    if (bytes == 0) return handle_type{};
    std::unique_lock lk(m_);
    if (stats_.limit && (bytes > *stats_.limit || stats_.bytes_in_use > *stats_.limit - bytes))
      throw error(errc::out_of_memory, "out of memory on " + name_ + ": requested " + std::to_string(bytes) +
                                           " bytes with " + std::to_string(stats_.bytes_in_use) + " in use; limit " +
                                           std::to_string(*stats_.limit) + " bytes");
    handle_type h{};
    if (auto it = cache_.find(bytes); it != cache_.end()) {
      h = it->second;
      nodes_.erase(cache_, it);
    } else {
      if (stats_.limit && stats_.bytes_reserved + bytes > *stats_.limit) release_cached_locked();
      h = allocate_from_backend(bytes);
      stats_.bytes_reserved += bytes;
    }
    stats_.bytes_in_use += bytes;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    ++stats_.allocation_count;
    ++stats_.total_allocations;
    const std::size_t in_use = stats_.bytes_in_use;
    lk.unlock();  // listeners run outside the lock (one may allocate)
    tools::detail::instant(tools::Category::allocation, "allocate", name_, bytes, in_use);
    return h;
  }

  /// Returns a block obtained from `allocate(bytes)` to the cache.
  void deallocate(handle_type h, std::size_t bytes) noexcept {
    if (bytes == 0) return;
    std::size_t in_use = 0;
    {
      std::lock_guard lk(m_);
      stats_.bytes_in_use -= bytes;
      in_use = stats_.bytes_in_use;
      --stats_.allocation_count;
      try {
        nodes_.insert(cache_, bytes, h);
      } catch (...) {  // no room to remember it: give it straight back
        stats_.bytes_reserved -= bytes;
        backend_->deallocate(ordinal_, h, bytes);
      }
    }
    tools::detail::instant(tools::Category::free, "free", name_, bytes, in_use);
  }

  /// Gives every cached block back to the backend.
  void release_cached() noexcept {
    std::lock_guard lk(m_);
    release_cached_locked();
  }

  [[nodiscard]] MemoryStats stats() const {
    std::lock_guard lk(m_);
    return stats_;
  }

  /// Sets the peak to the bytes in use now.
  void reset_peak() {
    std::lock_guard lk(m_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

  /// Sets or clears the limit. Lowering it below the bytes in use is allowed: later requests fail
  /// until enough is freed.
  void set_limit(std::optional<std::size_t> limit) {
    std::lock_guard lk(m_);
    stats_.limit = limit;
    if (limit && stats_.bytes_reserved > *limit) release_cached_locked();
  }

 private:
  handle_type allocate_from_backend(std::size_t bytes) {
    try {
      return backend_->allocate(ordinal_, bytes);
    } catch (const error& e) {
      if (e.condition() != errc::out_of_memory || cache_.empty()) throw;
    }
    release_cached_locked();  // the device itself is full: give back what we hold, then try again
    return backend_->allocate(ordinal_, bytes);
  }

  void release_cached_locked() noexcept {
    for (auto& [bytes, h] : cache_) {
      backend_->deallocate(ordinal_, h, bytes);
      stats_.bytes_reserved -= bytes;
    }
    cache_.clear();
  }

  B* backend_;
  std::size_t ordinal_;
  std::string name_;
  mutable std::mutex m_;
  MemoryStats stats_;
  std::multimap<std::size_t, handle_type> cache_;
  // The nodes of blocks taken from the cache, for the next ones given back: a steady state of
  // allocations and frees of the same sizes then allocates no host memory either.
  detail::NodeCache<std::multimap<std::size_t, handle_type>> nodes_;
};

}  // namespace xdev
