/// \file
/// `xdev::detail::RuntimeAnchor`: how a handle tells that its runtime has been destroyed without
/// touching the runtime's memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace xdev::detail {

/// A word outside every runtime that says whether one particular runtime is alive. A runtime takes
/// an anchor when it is made and lets go of it when it is destroyed; its handles (`Device<B>`, and
/// through it `Buffer`, `Array`, `Stream`) keep the anchor's address and the stamp it had, and
/// compare the two before they use the runtime. Anchors are never freed, and a stamp is never
/// given out twice (an anchor whose stamps run out is retired), so a handle of a runtime long gone
/// reads a valid word with another stamp: never the runtime's memory, never a false "alive".
struct RuntimeAnchor {
  std::atomic<std::uint32_t> stamp{0};  // odd while a runtime holds the anchor
  RuntimeAnchor* next_free = nullptr;   // guarded by the pool's mutex
};

/// The anchor of a handle that names no device: its stamp stays 2, never a live (odd) one, so
/// that checking a handle needs no test for null. Such a handle's own stamp is 0, which no
/// runtime is given, so it is recognised as naming no device whichever copy of `no_runtime` (one
/// per shared library, with hidden symbols) it points to.
inline constinit const RuntimeAnchor no_runtime{2};

/// The anchors of this process (of this copy of xdev, when several shared libraries each carry
/// one: a handle keeps the anchor's address, so the pool it came from does not matter). Made on
/// first use and never destroyed: a handle may be checked while the program exits.
class RuntimeAnchorPool {
 public:
  static RuntimeAnchorPool& instance() {
    static RuntimeAnchorPool* pool = new RuntimeAnchorPool;  // deliberately never deleted
    return *pool;
  }

  /// A free anchor, now odd (alive); returns its new stamp through `stamp`.
  /// \throws std::bad_alloc when a new block of anchors cannot be allocated.
  RuntimeAnchor* acquire(std::uint32_t& stamp) {
    std::lock_guard lk(m_);
    if (free_ == nullptr) grow();
    RuntimeAnchor* a = free_;
    free_ = a->next_free;
    a->next_free = nullptr;
    stamp = a->stamp.load(std::memory_order_relaxed) + 1;
    a->stamp.store(stamp, std::memory_order_release);
    return a;
  }

  /// Marks `a` dead (every handle holding its old stamp now sees it) and keeps it for reuse,
  /// unless its stamps are running out.
  void release(RuntimeAnchor* a) noexcept {
    const std::uint32_t dead = a->stamp.load(std::memory_order_relaxed) + 1;
    a->stamp.store(dead, std::memory_order_release);
    if (dead >= retire_at) return;  // retired, long before its stamps could come round again
    std::lock_guard lk(m_);
    a->next_free = free_;
    free_ = a;
  }

  /// An anchor whose stamp reaches this when it is let go of is never given out again.
  static constexpr std::uint32_t retire_at = 0xFFFF'FFF0u;

 private:
  RuntimeAnchorPool() = default;

  void grow() {
    constexpr std::size_t block = 64;
    blocks_.reserve(blocks_.size() + 1);  // may throw: nothing changed yet
    auto anchors = std::make_unique<RuntimeAnchor[]>(block);
    for (std::size_t i = block; i-- > 0;) {
      anchors[i].next_free = free_;
      free_ = &anchors[i];
    }
    blocks_.push_back(std::move(anchors));
  }

  std::mutex m_;
  RuntimeAnchor* free_ = nullptr;
  std::vector<std::unique_ptr<RuntimeAnchor[]>> blocks_;
};

/// A runtime's hold on an anchor, from its construction to its destruction.
class RuntimeAnchorLease {
 public:
  RuntimeAnchorLease() : anchor_(RuntimeAnchorPool::instance().acquire(stamp_)) {}
  RuntimeAnchorLease(const RuntimeAnchorLease&) = delete;
  RuntimeAnchorLease& operator=(const RuntimeAnchorLease&) = delete;
  ~RuntimeAnchorLease() { RuntimeAnchorPool::instance().release(anchor_); }

  [[nodiscard]] const RuntimeAnchor* anchor() const noexcept { return anchor_; }
  [[nodiscard]] std::uint32_t stamp() const noexcept { return stamp_; }

 private:
  std::uint32_t stamp_ = 0;
  RuntimeAnchor* anchor_;
};

}  // namespace xdev::detail
