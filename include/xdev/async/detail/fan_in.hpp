/// \file
/// `detail::start_parts`: one operation made of several backend calls (the runs of a strided
/// view's transfer), completed once when all of them have.
#pragma once

#include <xdev/backend/completion.hpp>

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <utility>

namespace xdev::detail {

/// Calls `start(i, part_done)` for i in [0, parts) and `done` once, after every started part has
/// completed and the loop has returned, with the first error reported (a part whose start throws
/// counts as completed with that error, and the parts after it are not started). Waiting for the
/// loop too means `done` never runs while this thread is still inside a backend's call: after
/// `done`, the operation's runtime may be destroyed.
template <class Start>
void start_parts(std::size_t parts, Start&& start, Completion done) {
  struct Join {
    std::atomic<std::size_t> left;
    std::mutex m;
    std::exception_ptr first;
    Completion done;
    void arrive(std::exception_ptr ep) {
      if (ep) {
        std::lock_guard lk(m);
        if (!first) first = std::move(ep);
      }
      if (left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
      std::exception_ptr e;
      {
        std::lock_guard lk(m);
        e = std::move(first);
      }
      auto d = std::move(done);
      d(std::move(e));
    }
  };
  auto join = std::make_shared<Join>();
  join->left.store(parts + 1, std::memory_order_relaxed);  // + 1: this loop
  join->done = std::move(done);
  std::size_t i = 0;
  try {
    for (; i < parts; ++i) start(i, Completion([join](std::exception_ptr ep) { join->arrive(std::move(ep)); }));
  } catch (...) {
    // The part that threw never calls its completion, and the rest are not started.
    join->left.fetch_sub(parts - i - 1, std::memory_order_acq_rel);
    join->arrive(std::current_exception());
  }
  join->arrive(nullptr);
}

}  // namespace xdev::detail
