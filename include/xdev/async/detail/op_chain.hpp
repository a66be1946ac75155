/// \file
/// The in-order chain behind a `Stream`: each operation starts when the one before it completed.
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/core/detail/unique_function.hpp>

#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <utility>

namespace xdev::detail {

/// One queued operation: `start` launches it and must eventually call the completion it is
/// given exactly once; `done` then receives the outcome.
struct ChainOp {
  unique_function<void(Completion)> start;
  unique_function<void(std::exception_ptr)> done;
};

/// Runs operations one after another. An operation that completes inside its own `start`
/// (a synchronous backend) does not recurse into the next: the chain loops instead, so a long
/// queue never grows the stack.
class OpChain : public std::enable_shared_from_this<OpChain> {
 public:
  void push(ChainOp op) {
    {
      std::lock_guard lk(m_);
      q_.push_back(std::move(op));
      if (busy_) return;
      busy_ = true;
    }
    run_next();
  }

 private:
  enum class phase { idle, starting, running, completed_while_starting };

  void run_next() {
    std::unique_lock lk(m_);
    for (;;) {
      if (q_.empty()) {
        busy_ = false;
        phase_ = phase::idle;
        return;
      }
      ChainOp op = std::move(q_.front());
      q_.pop_front();
      phase_ = phase::starting;
      lk.unlock();
      op.start(Completion([self = shared_from_this(), done = std::move(op.done)](std::exception_ptr ep) mutable {
        // Delivered before the next operation starts, so a stream's completions arrive in order.
        done(std::move(ep));
        self->on_complete();
      }));
      lk.lock();
      if (phase_ != phase::completed_while_starting) {
        phase_ = phase::running;
        return;
      }
    }
  }

  void on_complete() {
    {
      std::lock_guard lk(m_);
      if (phase_ == phase::starting) {
        phase_ = phase::completed_while_starting;
        return;
      }
    }
    run_next();
  }

  std::mutex m_;
  std::deque<ChainOp> q_;
  bool busy_ = false;
  phase phase_ = phase::idle;
};

}  // namespace xdev::detail
