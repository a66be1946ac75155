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

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev::tools {

/// What an activity is.
enum class Category : std::uint8_t {
  op,             ///< an op of `xdev::ops` (`name` is the op: "gemm", "scale", ...; `dtype` its type)
  transfer,       ///< a copy ("copy_to_device", "copy_to_host", "copy"); `bytes` is its size
  host_task,      ///< a function run by `execute` ("execute")
  collective,     ///< an SPMD collective ("all_reduce", ...) over a mesh; `device` is the mesh's first
  synchronize,    ///< a host thread waiting in `synchronize()` of a device, stream or runtime
  throttle_wait,  ///< a host thread blocked for an in-flight slot of `device`
  allocation,     ///< device memory taken (an instant); `bytes` is its size, `in_use` the total after it
  free,           ///< device memory given back (an instant); `bytes` is its size, `in_use` the total after it
  plugin_load,    ///< a plugin file loaded and initialized; `name` is its canonical path
  fallback,       ///< an op run by the CPU fallback, not the backend (an instant); `name` is the op
};

/// The category's name as written in the enumeration ("op", "throttle_wait", ...).
constexpr const char* name_of(Category c) noexcept {
  constexpr const char* names[] = {"op",          "transfer",      "host_task",  "collective",
                                   "synchronize", "throttle_wait", "allocation", "free",
                                   "plugin_load", "fallback"};
  const auto i = static_cast<std::size_t>(c);
  return i < std::size(names) ? names[i] : "?";
}

/// One activity as a listener sees it. The views live only as long as the callback.
struct Activity {
  /// Unique in the process; `begin` and `end` of one activity carry the same id.
  std::uint64_t id = 0;
  Category category = Category::op;
  std::string_view name;
  /// The device ("HOST:0", "OPENCL:1"); empty where there is none (a plugin load).
  std::string_view device;
  /// The stream's id, unique in the process (0: the work belongs to no single stream).
  std::uint64_t stream = 0;
  /// Bytes moved or allocated; 0 where that does not apply.
  std::uint64_t bytes = 0;
  /// The element type of an op ("f32", "bf16", ...); empty elsewhere.
  std::string_view dtype;
  /// When this callback's moment happened, on the steady clock of the process.
  std::chrono::steady_clock::time_point time;
  /// `allocation` and `free`: the device's bytes in use right after it; 0 elsewhere.
  std::uint64_t in_use = 0;
};

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

// How many listeners are installed: the whole cost of a hook when none is.
inline std::atomic<std::size_t> listener_count{0};

using listener_list = std::vector<std::shared_ptr<Listener>>;

struct hub {
  std::mutex m;
  std::vector<std::pair<std::uint64_t, std::shared_ptr<Listener>>> entries;          // under m
  std::shared_ptr<const listener_list> current = std::make_shared<listener_list>();  // under m
  std::uint64_t next_handle = 1;                                                     // under m
  std::atomic<std::uint64_t> next_activity{1};

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

inline std::uint64_t next_activity_id() noexcept {
  return hub::get().next_activity.fetch_add(1, std::memory_order_relaxed);
}

template <class Call>
void notify(Call&& call) noexcept {
  std::shared_ptr<const listener_list> ls;
  try {
    ls = hub::get().snapshot();
  } catch (...) {
    return;
  }
  for (const auto& l : *ls) {
    try {
      call(*l);
    } catch (...) {  // a listener's failure is its own
    }
  }
}

inline void emit_begin(const Activity& a) noexcept {
  notify([&](Listener& l) { l.begin(a); });
}
inline void emit_end(const Activity& a, const std::exception_ptr& error) noexcept {
  notify([&](Listener& l) { l.end(a, error); });
}
inline void emit_instant(const Activity& a) noexcept {
  notify([&](Listener& l) { l.instant(a); });
}

}  // namespace detail

/// Whether any listener is installed. Code that would build an expensive name asks first.
[[nodiscard]] inline bool active() noexcept {
  return detail::listener_count.load(std::memory_order_relaxed) != 0;
}

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

namespace detail {

/// A span on the calling thread (a synchronize, a throttle wait, a collective): `begin` at
/// construction, `end` at destruction or `finish`. Nothing at all when no listener is installed.
class scoped_activity {
 public:
  scoped_activity(Category c, std::string_view name, std::string_view device, std::uint64_t stream = 0,
                  std::uint64_t bytes = 0) noexcept {
    if (!active()) return;
    a_ = Activity{next_activity_id(), c, name, device, stream, bytes, {}, std::chrono::steady_clock::now(), 0};
    emit_begin(a_);
  }
  scoped_activity(const scoped_activity&) = delete;
  scoped_activity& operator=(const scoped_activity&) = delete;
  ~scoped_activity() { finish(nullptr); }

  void finish(const std::exception_ptr& error) noexcept {
    if (a_.id == 0) return;
    a_.time = std::chrono::steady_clock::now();
    emit_end(a_, error);
    a_.id = 0;
  }

 private:
  Activity a_;
};

/// An instant (an allocation, a free, a fallback), when a listener is installed.
inline void instant(Category c, std::string_view name, std::string_view device, std::uint64_t bytes = 0,
                    std::uint64_t in_use = 0) noexcept {
  if (!active()) return;
  emit_instant(Activity{next_activity_id(), c, name, device, 0, bytes, {}, std::chrono::steady_clock::now(), in_use});
}

}  // namespace detail

}  // namespace xdev::tools
