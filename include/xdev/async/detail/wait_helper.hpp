/// \file
/// `xdev::detail::wait_helper`: how a thread about to wait for a future can run the work itself.
#pragma once

#include <cstdint>
#include <memory>

namespace xdev::detail {

// Work queued for a thread of its own (a distributed session's collectives thread) can be run
// by the thread that waits for its future instead, which then needs no wake-up by that thread.
// `run(context, ticket)` runs the queued work up to and including the one `ticket` names, unless
// it has started already; it returns at once when it cannot help (it never runs the work out of
// order). `context` is weak: a helper of a queue that is gone does nothing.
struct wait_helper {
  void (*run)(void* context, std::uint64_t ticket) = nullptr;
  std::weak_ptr<void> context;
  std::uint64_t ticket = 0;

  void operator()() const {
    if (run == nullptr) return;
    if (const std::shared_ptr<void> c = context.lock()) run(c.get(), ticket);
  }
};

}  // namespace xdev::detail
