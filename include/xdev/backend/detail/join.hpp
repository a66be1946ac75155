/// \file
/// `detail::Join`: one operation made of several pieces (the runs or rows of a strided view's
/// transfer, the regions of a placement, the markers of a mesh), completed once when all of them
/// have; `detail::start_parts`, a fixed number of pieces started in a loop. Over `Completion` only,
/// so that backends and the plugin bridge fan in with it too.
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/core/detail/block_pool.hpp>

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <utility>

namespace xdev::detail {

/// Counts the pieces of one operation's work and runs `then(first error)` once, on the thread
/// where the last piece completed. It starts with one count, held by the code that adds pieces
/// (`seal` drops it), so a piece that completes while others are still being added cannot end
/// the join early; every piece completes (or fails) before `then` runs, so nothing is left
/// running on a buffer that `then` frees.
class Join : public std::enable_shared_from_this<Join> {
 public:
  explicit Join(Completion then) : then_(std::move(then)) {}

  /// The completion handler of one piece: xdev's own, so it may run inside the call that
  /// submitted the piece (`completes_at_once`), which saves a thread hand-off.
  struct Arrival {
    using completes_at_once = void;
    std::shared_ptr<Join> join;
    void operator()(std::exception_ptr ep) const { join->arrive(std::move(ep)); }
  };

  /// One more piece; call the returned handler when it completes. A submission that throws has
  /// not taken its handler: call it with the exception yourself.
  [[nodiscard]] Arrival add() {
    left_.fetch_add(1, std::memory_order_relaxed);
    return Arrival{shared_from_this()};
  }

  /// Every piece has been added; `ep` says why adding stopped early, if it did.
  void seal(std::exception_ptr ep = nullptr) { arrive(std::move(ep)); }

  /// Submits one piece with `submit(Arrival)`; when that throws, the piece arrives with the
  /// exception and false is returned (add nothing more: seal).
  template <class Submit>
  bool submit(Submit&& submit) {
    Arrival a = add();
    try {
      std::forward<Submit>(submit)(Arrival(a));
      return true;
    } catch (...) {
      a(std::current_exception());
      return false;
    }
  }

 private:
  void arrive(std::exception_ptr ep) {
    if (ep) {
      std::lock_guard lk(m_);
      if (!first_) first_ = std::move(ep);
    }
    if (left_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::exception_ptr first;
    {
      std::lock_guard lk(m_);
      first = first_;
    }
    Completion then = std::move(then_);
    std::move(then)(std::move(first));
  }

  std::atomic<std::size_t> left_{1};
  std::mutex m_;
  std::exception_ptr first_;
  Completion then_;
};

/// Calls `start(i, part_done)` for i in [0, parts) and `done` once, after every started part has
/// completed and the loop has returned, with the first error reported (a part whose start throws
/// counts as completed with that error, and the parts after it are not started). Waiting for the
/// loop too means `done` never runs while this thread is still inside a backend's call: after
/// `done`, the operation's runtime may be destroyed.
template <class Start>
void start_parts(std::size_t parts, Start&& start, Completion done) {
  // From the pool the submissions' records come from: one per copy of a collective's step.
  auto join = std::allocate_shared<Join>(pool_allocator<Join>{}, std::move(done));
  for (std::size_t i = 0; i < parts; ++i)
    if (!join->submit([&](Join::Arrival a) { start(i, Completion(std::move(a))); })) break;
  join->seal();
}

}  // namespace xdev::detail
