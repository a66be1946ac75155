/// \file
/// How the entries of a plugin's table (<xdev/plugin/detail/plugin_table.hpp>) keep the calling
/// rules of the C ABI: every exception becomes a status and a message (`guarded`), and the host's
/// `xdev_completion` is called exactly once when an entry returns XDEV_OK and never when it
/// returns an error (`run_async`).
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/backend/completion.hpp>
#include <xdev/core/detail/block_pool.hpp>
#include <xdev/core/error.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <utility>

namespace xdev::plugin::detail {

/// Reports `f` through `err` (when the host gave a usable one) and returns its code.
inline xdev_status report(xdev_error* err, const Failure& f) noexcept {
  if (err != nullptr && err->struct_size >= sizeof(xdev_error) && err->set != nullptr)
    err->set(err->context, f.code, f.message.c_str());
  return f.code;
}

/// Runs `f()`; returns the failure of the exception it threw, if any.
template <class F>
std::optional<Failure> capture(F&& f) noexcept {
  try {
    std::forward<F>(f)();
    return std::nullopt;
  } catch (...) {
    return failure_of(std::current_exception());
  }
}

/// Runs `f()` and converts what it throws into a status and a message reported through `err`.
template <class F>
xdev_status guarded(xdev_error* err, F&& f) noexcept {
  if (auto failure = capture(std::forward<F>(f))) return report(err, *failure);
  return XDEV_OK;
}

/// The state shared by the `xdev::Completion` a backend receives and the entry that made it: the
/// host's `xdev_completion` is called at most once, and never when the entry returns an error.
/// While the entry runs, a completion the backend destroys uncalled only marks it dropped (the
/// entry may still fail); after the entry returned, dropping it reports `errc::internal`.
///
/// One per operation, touched by the submitting thread (the entry) and the completing one: its
/// state is one atomic word, it is counted by two references (the entry's and the completion's:
/// `release`), and it comes from the plugin's block pool. (So the abitest plugin's unloading test,
/// PluginBackend.TheLibraryStaysLoadedUntilTheLastObjectFromItIsGone, also checks that a plugin
/// whose pool the calling thread used still unloads.)
class CompletionState {
 public:
  /// `c` is the host's completion, of `c.struct_size` bytes (at least the 1.1 size): what this
  /// build knows beyond it reads as null. Starts with two references.
  explicit CompletionState(const xdev_completion& c) noexcept {
    std::memcpy(&c_, &c, std::min(c.struct_size, sizeof c_));
  }
  CompletionState(const CompletionState&) = delete;
  CompletionState& operator=(const CompletionState&) = delete;

  static void* operator new(std::size_t bytes) { return xdev::detail::block_pool::instance().allocate(bytes); }
  static void operator delete(void* p, std::size_t bytes) noexcept {
    xdev::detail::block_pool::instance().deallocate(p, bytes);
  }

  /// Drops one of the two references; the last frees the state.
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  /// The backend called its completion (after `report_device_times`, when it knows them).
  void complete(std::exception_ptr ep) noexcept {
    const auto times = xdev::detail::take_device_times();  // this call's, whatever happens next
    if ((state_.fetch_or(finished, std::memory_order_acq_rel) & finished) != 0) return;
    if (times && c_.device_times != nullptr) {
      const auto ns = [](std::chrono::steady_clock::time_point t) {
        return static_cast<std::int64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
      };
      c_.device_times(c_.context, ns(times->begin), ns(times->end));
    }
    if (!ep) return c_.complete(c_.context, XDEV_OK, nullptr);
    const Failure f = failure_of(std::move(ep));
    c_.complete(c_.context, f.code, f.message.c_str());
  }

  /// The backend destroyed its completion without calling it.
  void drop() noexcept {
    // In the call: only note it (the entry may still fail). After it: fail the operation.
    unsigned s = state_.load(std::memory_order_acquire);
    while ((s & finished) == 0) {
      const unsigned next = (s & in_call) != 0 ? s | dropped : s | finished;
      if (state_.compare_exchange_weak(s, next, std::memory_order_acq_rel)) {
        if ((next & finished) != 0) fire_dropped();
        return;
      }
    }
  }

  /// The backend's member returned normally.
  void returned() noexcept {
    unsigned s = state_.load(std::memory_order_acquire);
    for (;;) {
      unsigned next = s & ~in_call;
      if ((s & (finished | dropped)) == dropped) next |= finished;
      if (state_.compare_exchange_weak(s, next, std::memory_order_acq_rel)) {
        if ((s & finished) == 0 && (next & finished) != 0) fire_dropped();
        return;
      }
    }
  }

  /// The backend's member threw. True when the entry may return the error (the completion was not
  /// called and now never will be); false when the backend completed before throwing.
  bool threw() noexcept {
    const unsigned s = state_.fetch_or(finished, std::memory_order_acq_rel);
    state_.fetch_and(~in_call, std::memory_order_acq_rel);
    return (s & finished) == 0;
  }

 private:
  enum : unsigned { in_call = 1, finished = 2, dropped = 4 };

  void fire_dropped() noexcept {
    c_.complete(c_.context, XDEV_ERR_INTERNAL,
                "the backend destroyed the completion of an operation without calling it");
  }

  xdev_completion c_{};
  std::atomic<unsigned> state_{in_call};
  std::atomic<int> refs_{2};
};

/// The callable inside the `xdev::Completion` a backend receives: holds the completion's reference
/// to the state.
class CompletionHandle {
 public:
  explicit CompletionHandle(CompletionState* s) noexcept : s_(s) {}
  CompletionHandle(CompletionHandle&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  CompletionHandle& operator=(CompletionHandle&& o) noexcept {
    if (this != &o) {
      reset();
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  CompletionHandle(const CompletionHandle&) = delete;
  CompletionHandle& operator=(const CompletionHandle&) = delete;
  ~CompletionHandle() { reset(); }

  void operator()(std::exception_ptr ep) noexcept {
    if (CompletionState* s = std::exchange(s_, nullptr)) {
      s->complete(std::move(ep));
      s->release();
    }
  }

 private:
  void reset() noexcept {
    if (CompletionState* s = std::exchange(s_, nullptr)) {
      s->drop();
      s->release();
    }
  }

  CompletionState* s_;
};

/// Runs `f(Completion)` for an entry taking an `xdev_completion`, keeping the calling rule: the
/// host's completion is called exactly once when the entry returns XDEV_OK, never when it returns
/// an error.
template <class F>
xdev_status run_async(xdev_error* err, const xdev_completion* done, F&& f) noexcept {
  CompletionState* state = nullptr;  // with the entry's reference, once made
  auto failure = capture([&] {
    if (done == nullptr) throw error(errc::invalid_argument, "the completion is null");
    check_struct_size(done->struct_size, completion_size_v1_1, "xdev_completion");
    if (done->complete == nullptr) throw error(errc::invalid_argument, "xdev_completion::complete is null");
    state = new CompletionState(*done);
    CompletionHandle handle(state);  // the completion's reference, dropped however what follows ends
    std::forward<F>(f)(Completion(std::move(handle)));
  });
  if (!failure) {
    state->returned();
    state->release();
    return XDEV_OK;
  }
  if (state == nullptr) return report(err, *failure);
  const bool report_it = state->threw();
  state->release();
  // Otherwise the backend completed, then threw: the completion has reported.
  return report_it ? report(err, *failure) : XDEV_OK;
}

/// \throws xdev::error `errc::invalid_argument` for a null pointer argument.
template <class P>
const P& deref(const P* p, const char* what) {
  if (p == nullptr) throw error(errc::invalid_argument, std::string(what) + " is null");
  return *p;
}

[[noreturn]] inline void throw_not_implemented(const char* op, const std::string& dtypes) {
  throw error(errc::unimplemented,
              std::string(op) + " is not implemented for " + dtypes + " by this plugin (its op_dtypes leaves it out)");
}

}  // namespace xdev::plugin::detail
