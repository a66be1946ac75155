/// \file
/// The host side of one call into a plugin: where the plugin reports a failure (`ErrorSink`, an
/// `xdev_error` whose message is copied), and the context of an asynchronous call, freed exactly
/// once whatever order the plugin completes and returns in (`AsyncCall`).
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/backend/completion.hpp>
#include <xdev/core/detail/block_pool.hpp>
#include <xdev/core/error.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>

namespace xdev::plugin::detail {

// Where the plugin reports a failing call's message (copied during `set`).
struct ErrorSink {
  ErrorSink() noexcept : c{sizeof(xdev_error), this, &ErrorSink::set} {}
  ErrorSink(const ErrorSink&) = delete;
  ErrorSink& operator=(const ErrorSink&) = delete;

  static void set(void* context, xdev_status code, const char* message) noexcept {
    auto* self = static_cast<ErrorSink*>(context);
    if (self->was_set) return;  // the first message describes the failure
    self->was_set = true;
    self->code = code;
    try {
      self->message = message != nullptr ? message : "";
    } catch (...) {  // out of memory: the status alone reports the failure
      self->message.clear();
    }
  }

  [[nodiscard]] const char* text() const noexcept { return was_set ? message.c_str() : nullptr; }

  xdev_error c;
  xdev_status code = XDEV_OK;
  std::string message;
  bool was_set = false;
};

// The host-side context of one asynchronous plugin call, freed exactly once. Two references: the
// call's and the completion's. The completion drops its reference when the plugin calls it; the
// call drops its own when the entry returns, and the completion's too when the entry returns an
// error and the plugin (as the rules say) never called it. `claimed` decides who delivers `done`,
// so a plugin that completes and then returns an error neither double-frees nor double-reports.
class AsyncCall {
 public:
  /// `plugin` names the plugin in errors ("REF"); it outlives the call, like the backend object.
  /// `entry` is a string literal.
  AsyncCall(Completion done, const std::string& plugin, const char* entry) noexcept
      : done_(std::move(done)), plugin_(&plugin), entry_(entry) {}
  AsyncCall(const AsyncCall&) = delete;
  AsyncCall& operator=(const AsyncCall&) = delete;

  // One per asynchronous call: from the recycling pool.
  static void* operator new(std::size_t bytes) { return xdev::detail::block_pool::instance().allocate(bytes); }
  static void operator delete(void* p, std::size_t bytes) noexcept {
    xdev::detail::block_pool::instance().deallocate(p, bytes);
  }

  /// Makes this an `execute`: `task` runs through `host_task()`.
  void set_task(HostTask task) noexcept {
    task_ = std::move(task);
    has_task_ = true;
  }

  [[nodiscard]] xdev_completion completion() noexcept {
    return {sizeof(xdev_completion), this, &AsyncCall::on_complete, &AsyncCall::on_device_times};
  }
  [[nodiscard]] xdev_host_task host_task() noexcept { return {sizeof(xdev_host_task), this, &AsyncCall::on_run}; }

  /// The entry returned XDEV_OK: the completion delivers (or has delivered) the result.
  void returned_ok() noexcept { release(); }

  /// The entry returned an error. True when the caller reports it (the plugin did not complete;
  /// the context is freed and `done` destroyed uncalled); false when the plugin had completed
  /// before returning the error (breaking the rules): that completion has reported.
  bool returned_error() noexcept {
    if (claimed_.exchange(true, std::memory_order_acq_rel)) {
      release();
      return false;
    }
    Completion unused = std::move(done_);
    release();
    release();
    return true;
  }

 private:
  static void on_complete(void* context, xdev_status code, const char* message) noexcept {
    auto* self = static_cast<AsyncCall*>(context);
    if (self->claimed_.exchange(true, std::memory_order_acq_rel)) return self->release();
    Completion done = std::move(self->done_);
    std::exception_ptr ep = self->outcome(code, message);
    self->release();
    // xdev's completions do not throw (their handlers' errors are kept on the device); nothing
    // may unwind into the plugin.
    try {
      done(std::move(ep));
    } catch (...) {
    }
  }

  // Since ABI 1.7: where the device ran the work, just before `on_complete` on the same thread;
  // handed on to the completion the way a typed backend reports it.
  static void on_device_times(void*, std::int64_t begin_ns, std::int64_t end_ns) noexcept {
    const auto at = [](std::int64_t ns) {
      return std::chrono::steady_clock::time_point(
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(ns)));
    };
    if (begin_ns > 0 && end_ns >= begin_ns) report_device_times({at(begin_ns), at(end_ns)});
  }

  static void on_run(void* context) noexcept {
    auto* self = static_cast<AsyncCall*>(context);
    try {
      HostTask task = std::move(self->task_);
      if (task) task();
    } catch (...) {
      self->task_error_ = std::current_exception();  // reaches the completion with its type
    }
    self->ran_.store(true, std::memory_order_release);
  }

  std::exception_ptr outcome(xdev_status code, const char* message) noexcept {
    try {
      if (task_error_) return task_error_;
      if (code != XDEV_OK)
        return std::make_exception_ptr(error(errc_of(code), where() + ": " + status_text(code, message)));
      if (has_task_ && !ran_.load(std::memory_order_acquire))
        return std::make_exception_ptr(
            error(errc::internal, where() + ": the plugin reported success without running the host task"));
      return nullptr;
    } catch (...) {
      return std::current_exception();
    }
  }

  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // "REF: copy_to_device": built only for an error.
  [[nodiscard]] std::string where() const { return *plugin_ + ": " + entry_; }

  std::atomic<int> refs_{2};
  std::atomic<bool> claimed_{false};
  Completion done_;
  const std::string* plugin_;
  const char* entry_;
  HostTask task_;
  std::exception_ptr task_error_;
  bool has_task_ = false;
  std::atomic<bool> ran_{false};
};

}  // namespace xdev::plugin::detail
