/// \file
/// The CPU fallback: an op a backend does not implement runs on the host (copy in, compute, copy out).
#pragma once

#include <xdev/async/detail/join.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/core/detail/unique_function.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/kernels/parallel.hpp>
#include <xdev/kernels/thread_pool.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace xdev::ops::detail {

/// Worker threads of the CPU fallback, shared by every backend in the process, as a lease: every
/// fallback op holds one from its launch to its destruction, and this function's static holds one
/// until exit. A backend thread hands a fallback's compute to the pool and may still be inside
/// asio's post (which wakes a worker after unlocking) when the op has already completed; the op's
/// lease is released only after that thread let go of the op, so the pool is destroyed after every
/// post into it has returned, even when that is after the static's release at exit (a backend owned
/// by a static destroyed later: the registry's).
inline std::shared_ptr<kernels::ThreadPool> fallback_pool() {
  // A start that fails (no memory, no thread) throws and is tried again next time.
  static const std::shared_ptr<kernels::ThreadPool> pool(
      new kernels::ThreadPool(std::max<std::size_t>(2, std::thread::hardware_concurrency())),
      [](kernels::ThreadPool* p) {
        // The last lease can only be an op's once the static let go (at exit); released on one of
        // the pool's own workers, the pool cannot join that thread: it is left to the process's end.
        if (kernels::ThreadPool::current() != p) delete p;
      });
  return pool;
}

/// The pool for a fallback's host kernel: the one it runs on (the fallback pool, whose lease its op
/// holds), so that no lease is taken per kernel.
inline kernels::Parallel fallback_parallel() {
  const std::size_t workers = std::max<std::size_t>(2, std::thread::hardware_concurrency());
  if (auto* running = kernels::ThreadPool::current()) return {&running->get(), workers};
  return {&fallback_pool()->get(), workers};
}

/// One device operand of a fallback op: what is copied in before and out after the host compute
/// (`bytes` from byte `offset` of `handle`'s memory: a window of an array stages only itself). A
/// window whose rows lie apart (`row_stride` bytes from row to row, `row_bytes` each; 0: one
/// block) is staged row by row, at the same places in the host copy: the memory between its rows
/// is neither read nor written (another stream may be writing it).
template <class H>
struct Staged {
  H handle;
  std::size_t bytes;
  bool read;
  bool written;
  std::size_t offset = 0;
  std::size_t row_bytes = 0;
  std::size_t row_stride = 0;
};

// Copies every read operand to host memory, one after another, runs `compute` on the fallback
// pool with a host pointer per operand, copies every written operand back, then calls `done`.
// Any failure (a transfer, the compute) ends the sequence at once with that error.
template <class B>
class Fallback : public std::enable_shared_from_this<Fallback<B>> {
 public:
  using H = typename B::memory_handle;
  using Compute = xdev::detail::unique_function<void(std::vector<std::byte*>&)>;

  Fallback(B& backend, std::size_t device, std::vector<Staged<H>> operands, Compute compute, Completion done)
      : backend_(&backend),
        device_(device),
        operands_(std::move(operands)),
        compute_(std::move(compute)),
        done_(std::move(done)) {
    for (const auto& o : operands_) {
      storage_.push_back(std::make_unique<std::byte[]>(std::max<std::size_t>(o.bytes, 1)));
      pointers_.push_back(storage_.back().get());
    }
  }

  void start() { copy_in(0); }

 private:
  void copy_in(std::size_t i) {
    while (i < operands_.size() && (!operands_[i].read || operands_[i].bytes == 0)) ++i;
    if (i == operands_.size()) return compute();
    step([&](Completion next) { transfer(i, false, std::move(next)); },
         [self = this->shared_from_this(), i] { self->copy_in(i + 1); });
  }

  void compute() {
    boost::asio::post(pool_->get(), [self = this->shared_from_this()] {
      // The error is delivered after its catch block has ended: delivered from inside it, the
      // waiter could read the exception and let go of it before this thread's catch released its
      // hold, so that this thread frees it, ordered only by libstdc++'s uninstrumented count (a
      // report TSan cannot see through; see cmake/tsan.supp).
      std::exception_ptr failure;
      try {
        self->compute_(self->pointers_);
      } catch (...) {
        failure = std::current_exception();
      }
      if (failure) return self->finish(std::move(failure));
      self->copy_out(0);
    });
  }

  void copy_out(std::size_t i) {
    while (i < operands_.size() && (!operands_[i].written || operands_[i].bytes == 0)) ++i;
    if (i == operands_.size()) return finish(nullptr);
    step([&](Completion next) { transfer(i, true, std::move(next)); },
         [self = this->shared_from_this(), i] { self->copy_out(i + 1); });
  }

  // Operand `i` to the device (`to_device`) or to the host. One with rows apart is one transfer per
  // row, all started at once and joined (`start_parts`): a chain of steps would nest one call per
  // row on a backend that completes inside its call.
  void transfer(std::size_t i, bool to_device, Completion next) {
    const Staged<H>& o = operands_[i];
    auto one = [&](std::size_t at, std::size_t bytes, Completion c) {
      if (to_device)
        backend_->copy_to_device(device_, pointers_[i] + at, o.handle, o.offset + at, bytes, std::move(c));
      else
        backend_->copy_to_host(device_, o.handle, o.offset + at, pointers_[i] + at, bytes, std::move(c));
    };
    if (o.row_stride == 0) return one(0, o.bytes, std::move(next));
    xdev::detail::start_parts(
        (o.bytes - o.row_bytes) / o.row_stride + 1,
        [&](std::size_t r, Completion part) { one(r * o.row_stride, o.row_bytes, std::move(part)); }, std::move(next));
  }

  // Runs one backend transfer; on success continues with `then`, on failure finishes. The next
  // step waits for two things: the transfer's completion and the call's return. A completion can
  // run on the backend's thread before the call has returned on this one; continuing from it at
  // once could finish the op, and let its runtime and backend be destroyed, while this thread is
  // still inside the backend's call.
  template <class Call, class Then>
  void step(Call&& call, Then then) {
    struct Join {
      explicit Join(Then t) : then(std::move(t)) {}
      std::atomic<int> arrived{0};
      std::exception_ptr ep;
      Then then;
    };
    auto join = std::make_shared<Join>(std::move(then));
    auto arrive = [self = this->shared_from_this()](const std::shared_ptr<Join>& j) {
      if (j->arrived.fetch_add(1, std::memory_order_acq_rel) == 0) return;  // the other party goes on
      if (j->ep) return self->finish(std::move(j->ep));
      j->then();
    };
    try {
      call(Completion([join, arrive](std::exception_ptr ep) mutable {
        join->ep = std::move(ep);
        arrive(join);
      }));
    } catch (...) {
      return finish(std::current_exception());  // the completion is never called
    }
    arrive(join);
  }

  void finish(std::exception_ptr ep) {
    if (finished_.exchange(true)) return;
    auto done = std::move(done_);
    done(std::move(ep));
  }

  std::shared_ptr<kernels::ThreadPool> pool_ = fallback_pool();  // first: released last
  B* backend_;
  std::size_t device_;
  std::vector<Staged<H>> operands_;
  Compute compute_;
  Completion done_;
  std::vector<std::unique_ptr<std::byte[]>> storage_;
  std::vector<std::byte*> pointers_;
  std::atomic<bool> finished_{false};
};

/// Runs `compute` through the CPU fallback and counts it in `fallback.<op>`.
template <class B>
void run_fallback(const char* op, B& backend, std::size_t device,
                  std::vector<Staged<typename B::memory_handle>> operands, typename Fallback<B>::Compute compute,
                  Completion done) {
  metrics::counter(std::string("fallback.") + op).add();
  note_multi_step_launch();  // the write-back comes from a completion, off any native queue
  std::make_shared<Fallback<B>>(backend, device, std::move(operands), std::move(compute), std::move(done))->start();
}

}  // namespace xdev::ops::detail
