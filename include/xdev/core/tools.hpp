/// \file
/// Profiler hooks: listeners that see every operation, transfer, collective, allocation,
/// synchronize, throttle wait and plugin load as it happens, in the spirit of Kokkos Tools and
/// the PJRT profiler extension. A program (or a profiler) installs a listener:
///
///     struct Printer final : xdev::tools::Listener {
///       void begin(const xdev::tools::Activity& a) override { ... }
///       void end(const xdev::tools::Activity& a, const std::exception_ptr& error) override { ... }
///     };
///     auto subscription = xdev::tools::add_listener(std::make_shared<Printer>());
///
/// With no listener installed, a hook costs one relaxed atomic load.
#pragma once

#include <xdev/core/detail/hooks.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev::tools {

/// What a profiler implements; every member has an empty default. The callbacks may come from
/// any thread (the submitting thread, a backend's completion thread, a worker), concurrently, so
/// a listener must be thread-safe. What a callback throws is swallowed. A callback must not wait
/// for xdev work (it may run where xdev holds a device's progress).
class Listener {
 public:
  virtual ~Listener() = default;
  /// An operation was handed to its backend, a collective started, a host thread began to wait.
  virtual void begin(const Activity& a) { (void)a; }
  /// It is over: `error` is null on success, else what it failed with.
  virtual void end(const Activity& a, const std::exception_ptr& error) {
    (void)a;
    (void)error;
  }
  /// Something without a duration happened: an allocation, a free, a fallback.
  virtual void instant(const Activity& a) { (void)a; }
};

namespace detail {

/// The message of a failure as an `end` callback has it: `what()` of a std::exception, a stand-in
/// text otherwise, never empty (a slice that failed still shows it).
inline std::string message_of(const std::exception_ptr& error) {
  std::string what;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  return what.empty() ? "an exception with an empty message" : what;
}

using listener_list = std::vector<std::shared_ptr<Listener>>;

struct hub {
  std::mutex m;
  std::vector<std::pair<std::uint64_t, std::shared_ptr<Listener>>> entries;          // under m
  std::shared_ptr<const listener_list> current = std::make_shared<listener_list>();  // under m
  std::uint64_t next_handle = 1;                                                     // under m

  // Never destroyed: hooks may run from threads and static destructors at exit.
  static hub& get() {
    static hub* h = new hub;
    return *h;
  }

  std::shared_ptr<const listener_list> snapshot() {
    std::lock_guard lk(m);
    return current;
  }
  void publish_locked() {
    auto next = std::make_shared<listener_list>();
    for (const auto& e : entries) next->push_back(e.second);
    current = std::move(next);
    listener_count.store(entries.size(), std::memory_order_release);
  }
};

// What the hooks call (through `dispatcher`): every installed listener, each failure its own.
inline void dispatch(phase p, const Activity& a, const std::exception_ptr* error) noexcept {
  std::shared_ptr<const listener_list> ls;
  try {
    ls = hub::get().snapshot();
  } catch (...) {
    return;
  }
  for (const auto& l : *ls) {
    try {
      if (p == phase::begin)
        l->begin(a);
      else if (p == phase::end)
        l->end(a, *error);
      else
        l->instant(a);
    } catch (...) {  // a listener's failure is its own
    }
  }
}

}  // namespace detail

/// Keeps a listener installed while alive (move-only); `reset()` or destruction removes it. A
/// callback already running on another thread may still finish after removal returns.
class Subscription {
 public:
  Subscription() = default;
  Subscription(Subscription&& o) noexcept : handle_(std::exchange(o.handle_, 0)) {}
  Subscription& operator=(Subscription&& o) noexcept {
    if (this != &o) {
      reset();
      handle_ = std::exchange(o.handle_, 0);
    }
    return *this;
  }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  ~Subscription() { reset(); }

  /// Removes the listener (nothing when already removed).
  void reset() noexcept {
    if (handle_ == 0) return;
    auto& h = detail::hub::get();
    std::lock_guard lk(h.m);
    std::erase_if(h.entries, [&](const auto& e) { return e.first == handle_; });
    handle_ = 0;
    try {
      h.publish_locked();
    } catch (...) {  // out of memory: the old list stays, without this listener's removal seen
    }
  }
  /// Whether a listener is installed through this subscription.
  explicit operator bool() const noexcept { return handle_ != 0; }

 private:
  friend Subscription add_listener(std::shared_ptr<Listener>);
  explicit Subscription(std::uint64_t handle) noexcept : handle_(handle) {}
  std::uint64_t handle_ = 0;
};

/// Installs `listener` (several may be) until the returned subscription is reset or destroyed.
/// \throws std::invalid_argument for a null listener.
[[nodiscard]] inline Subscription add_listener(std::shared_ptr<Listener> listener) {
  if (!listener) throw std::invalid_argument("xdev::tools::add_listener: the listener is null");
  detail::dispatcher.store(&detail::dispatch, std::memory_order_release);  // before any hook sees a listener
  auto& h = detail::hub::get();
  std::lock_guard lk(h.m);
  const std::uint64_t handle = h.next_handle++;
  h.entries.emplace_back(handle, std::move(listener));
  try {
    h.publish_locked();
  } catch (...) {
    h.entries.pop_back();
    throw;
  }
  return Subscription(handle);
}

}  // namespace xdev::tools
