/// \file
/// Copies between any two devices of a mesh, possibly of different runtimes or backends (for
/// xdev's SPMD layer; users copy with `AnyStream::copy`).
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/detail/join.hpp>
#include <xdev/async/device_queue.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/detail/hooks.hpp>
#include <xdev/core/error.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <exception>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

namespace xdev::spmd::detail {

/// One contiguous run of bytes to copy from one device's buffer to another's.
struct CopyRegion {
  AnyDevice src;
  xdev::detail::erased_handle src_handle;
  std::size_t src_offset = 0;
  AnyDevice dst;
  xdev::detail::erased_handle dst_handle;
  std::size_t dst_offset = 0;
  std::size_t bytes = 0;
};

/// The regions of one copy operation: up to two held in place (a ring step copies one or two), more
/// on the heap. An operation's record holds its regions, so a ring's copies allocate nothing for
/// them.
class CopyRegions {
 public:
  CopyRegions() = default;
  CopyRegions(std::initializer_list<CopyRegion> regions) {
    for (const auto& r : regions) push_back(r);
  }
  /// Takes a list built elsewhere (a placement's regions per shard).
  CopyRegions(std::vector<CopyRegion> regions)  // NOLINT(google-explicit-constructor): a list of regions
      : heap_(std::move(regions)), spilled_(true) {}

  void push_back(CopyRegion r) {
    if (!spilled_ && size_ < in_place_count) {
      in_place_[size_++] = std::move(r);
      return;
    }
    if (!spilled_) {
      heap_.reserve(size_ + 1);
      for (std::size_t i = 0; i < size_; ++i) heap_.push_back(std::move(in_place_[i]));
      spilled_ = true;
    }
    heap_.push_back(std::move(r));
  }
  [[nodiscard]] std::size_t size() const noexcept { return spilled_ ? heap_.size() : size_; }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  [[nodiscard]] const CopyRegion& operator[](std::size_t i) const noexcept {
    return spilled_ ? heap_[i] : in_place_[i];
  }
  [[nodiscard]] const CopyRegion* begin() const noexcept { return spilled_ ? heap_.data() : in_place_.data(); }
  [[nodiscard]] const CopyRegion* end() const noexcept { return begin() + size(); }

 private:
  static constexpr std::size_t in_place_count = 2;
  std::array<CopyRegion, in_place_count> in_place_{};
  std::size_t size_ = 0;  // in place, until spilled
  std::vector<CopyRegion> heap_;
  bool spilled_ = false;
};

/// Starts one region's copy on the backends (no queue, no in-flight slot: the caller submitted the
/// work that calls this) and calls `done` exactly once. Devices of one runtime copy directly
/// (`copy_between`); devices of different runtimes go through a host staging buffer (device→host,
/// then host→device), kept alive by the completions. Counts the bytes in both devices'
/// `TransferStats` (a host-routed copy as to-host on the source and from-host on the destination).
inline void start_copy(const CopyRegion& r, Completion done) {
  if (r.bytes == 0) {
    done(nullptr);
    return;
  }
  if (r.src.same_runtime(r.dst)) {
    xdev::detail::note_copy(*r.src.queue(), *r.dst.queue(), r.bytes);
    r.dst.model().copy_between(r.src.ordinal(), r.src_handle, r.src_offset, r.dst.ordinal(), r.dst_handle, r.dst_offset,
                               r.bytes, r.dst.keep_alive(r.src.keep_alive(std::move(done))));
    return;
  }
  auto staging = std::shared_ptr<std::byte[]>(new std::byte[r.bytes]);
  // Both legs share one completion: the second leg's may be lost when its start throws, and the
  // catch below must still be able to report (calling `done` at most once either way).
  struct Once {
    std::atomic<bool> fired{false};
    Completion done;
    void operator()(std::exception_ptr ep) {
      if (!fired.exchange(true, std::memory_order_acq_rel)) done(std::move(ep));
    }
  };
  auto once = std::make_shared<Once>();
  once->done = std::move(done);
  r.src.queue()->note_transfer(TransferDirection::to_host, r.bytes);
  r.src.model().copy_to_host(
      r.src_handle, r.src_offset, staging.get(), r.bytes, r.src.keep_alive([r, staging, once](std::exception_ptr ep) {
        if (ep) {
          (*once)(std::move(ep));
          return;
        }
        try {
          r.dst.queue()->note_transfer(TransferDirection::from_host, r.bytes);
          r.dst.model().copy_to_device(
              staging.get(), r.dst_handle, r.dst_offset, r.bytes,
              r.dst.keep_alive([staging, once](std::exception_ptr ep2) { (*once)(std::move(ep2)); }));
        } catch (...) {
          (*once)(std::current_exception());
        }
      }));
}

/// Starts every region at once and calls `done` once, when all have completed, with the first
/// error any of them reported (the others still complete: nothing is left running on a buffer
/// after `done`). A region whose start throws ends the starting (`detail::start_parts`).
inline void start_copies(const CopyRegions& regions, Completion done) {
  xdev::detail::start_parts(
      regions.size(), [&](std::size_t i, Completion part) { start_copy(regions[i], std::move(part)); },
      std::move(done));
}

/// Submits the copy of `regions` as one operation on `queue_device`'s default stream (in order
/// after the work before it there, counting against its in-flight bound); completes through
/// `token` with `void(std::exception_ptr)` when every region is copied. The caller orders the
/// copy after the work that produced the sources on other devices.
template <class Token = const use_future_t&>
auto submit_copies(const AnyDevice& queue_device, CopyRegions regions, Token&& token = use_future) {
  std::uint64_t bytes = 0;
  for (const auto& r : regions) bytes += r.bytes;
  auto launch = [regions = std::move(regions)](Completion done) { start_copies(regions, std::move(done)); };
  // Host-ordered (`false`): the regions may use other devices' queues.
  return xdev::detail::submit<void>(
      queue_device.queue(), queue_device.queue()->default_chain(), nullptr,
      xdev::detail::queue_ordered(
          std::move(launch), false, nullptr,
          xdev::detail::activity_tag{tools::Category::transfer, "copy_regions", nullptr, bytes}),
      std::forward<Token>(token));
}

}  // namespace xdev::spmd::detail
