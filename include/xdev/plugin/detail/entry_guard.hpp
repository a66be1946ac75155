/// \file
/// How the entries of a plugin's table (<xdev/plugin/detail/plugin_table.hpp>) keep the calling
/// rules of the C ABI: every exception becomes a status and a message (`guarded`), and the host's
/// `xdev_completion` is called exactly once when an entry returns XDEV_OK and never when it
/// returns an error (`run_async`).
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/backend/completion.hpp>
#include <xdev/core/error.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>

#include <exception>
#include <memory>
#include <mutex>
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
class CompletionState {
 public:
  explicit CompletionState(const xdev_completion& c) noexcept : c_(c) {}

  /// The backend called its completion.
  void complete(std::exception_ptr ep) noexcept {
    {
      std::lock_guard lk(m_);
      if (finished_) return;
      finished_ = true;
    }
    if (!ep) return c_.complete(c_.context, XDEV_OK, nullptr);
    const Failure f = failure_of(std::move(ep));
    c_.complete(c_.context, f.code, f.message.c_str());
  }

  /// The backend destroyed its completion without calling it.
  void drop() noexcept {
    {
      std::lock_guard lk(m_);
      if (finished_) return;
      if (in_call_) {
        dropped_ = true;
        return;
      }
      finished_ = true;
    }
    fire_dropped();
  }

  /// The backend's member returned normally.
  void returned() noexcept {
    {
      std::lock_guard lk(m_);
      in_call_ = false;
      if (finished_ || !dropped_) return;
      finished_ = true;
    }
    fire_dropped();
  }

  /// The backend's member threw. True when the entry may return the error (the completion was not
  /// called and now never will be); false when the backend completed before throwing.
  bool threw() noexcept {
    std::lock_guard lk(m_);
    in_call_ = false;
    if (finished_) return false;
    finished_ = true;
    return true;
  }

 private:
  void fire_dropped() noexcept {
    c_.complete(c_.context, XDEV_ERR_INTERNAL,
                "the backend destroyed the completion of an operation without calling it");
  }

  xdev_completion c_;
  std::mutex m_;
  bool in_call_ = true;
  bool finished_ = false;
  bool dropped_ = false;
};

/// The callable inside the `xdev::Completion` a backend receives.
class CompletionHandle {
 public:
  explicit CompletionHandle(std::shared_ptr<CompletionState> s) noexcept : s_(std::move(s)) {}
  CompletionHandle(CompletionHandle&&) noexcept = default;
  CompletionHandle& operator=(CompletionHandle&&) noexcept = default;
  CompletionHandle(const CompletionHandle&) = delete;
  CompletionHandle& operator=(const CompletionHandle&) = delete;
  ~CompletionHandle() {
    if (s_) s_->drop();
  }

  void operator()(std::exception_ptr ep) noexcept {
    if (auto s = std::move(s_)) s->complete(std::move(ep));
  }

 private:
  std::shared_ptr<CompletionState> s_;
};

/// Runs `f(Completion)` for an entry taking an `xdev_completion`, keeping the calling rule: the
/// host's completion is called exactly once when the entry returns XDEV_OK, never when it returns
/// an error.
template <class F>
xdev_status run_async(xdev_error* err, const xdev_completion* done, F&& f) noexcept {
  std::shared_ptr<CompletionState> state;
  auto failure = capture([&] {
    if (done == nullptr) throw error(errc::invalid_argument, "the completion is null");
    check_struct_size(done->struct_size, sizeof(xdev_completion), "xdev_completion");
    if (done->complete == nullptr) throw error(errc::invalid_argument, "xdev_completion::complete is null");
    state = std::make_shared<CompletionState>(*done);
    std::forward<F>(f)(Completion(CompletionHandle(state)));
  });
  if (!failure) {
    state->returned();
    return XDEV_OK;
  }
  if (!state || state->threw()) return report(err, *failure);
  return XDEV_OK;  // the backend completed, then threw: the completion has reported
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
