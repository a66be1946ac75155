/// \file
/// The side of the profiler hooks (<xdev/core/tools.hpp>) that xdev's own code calls: what an
/// activity is, whether anyone listens, and how a hook reports. Kept apart so that every header
/// with a hook pays only for this; listeners, subscriptions and the dispatch live in tools.hpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <iterator>
#include <string_view>
#include <utility>

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
  /// `Stream::record()` in stream order: begins when the record's turn comes on the stream, ends
  /// when the recorded point is reached; `event` names the point
  event_record,
  /// `Stream::wait(e)` in stream order: begins when the wait's turn comes, ends when the stream
  /// may go on (at once where the device orders it); `event` is the awaited point (0: an event
  /// recorded while nobody listened, or a ready-made `Event`)
  event_wait,
};

/// The category's name as written in the enumeration ("op", "throttle_wait", ...).
constexpr const char* name_of(Category c) noexcept {
  constexpr const char* names[] = {"op",          "transfer",      "host_task",    "collective",
                                   "synchronize", "throttle_wait", "allocation",   "free",
                                   "plugin_load", "fallback",      "event_record", "event_wait"};
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
  /// `event_record` and `event_wait`: the recorded point, unique in the process, so that a tool
  /// can draw an arrow from the record to each wait it releases; 0 elsewhere.
  std::uint64_t event = 0;
  /// At the `end` of an op, transfer, host task or record whose backend reports device times
  /// (`report_device_times`: OpenCL): when the device began and ended it, on the same steady
  /// clock as `time`. Both zero (the clock's epoch) when the backend does not say.
  std::chrono::steady_clock::time_point device_begin{};
  std::chrono::steady_clock::time_point device_end{};
};

namespace detail {

// How many listeners are installed: the whole cost of a hook when none is.
inline std::atomic<std::size_t> listener_count{0};
inline std::atomic<std::uint64_t> next_activity{1};

enum class phase { begin, end, instant };
// The dispatch to the installed listeners, set by tools.hpp's add_listener before it counts one.
inline std::atomic<void (*)(phase, const Activity&, const std::exception_ptr*) noexcept> dispatcher{nullptr};

inline std::uint64_t next_activity_id() noexcept {
  return next_activity.fetch_add(1, std::memory_order_relaxed);
}

inline void emit(phase p, const Activity& a, const std::exception_ptr* error) noexcept {
  if (auto* d = dispatcher.load(std::memory_order_acquire)) d(p, a, error);
}
inline void emit_begin(const Activity& a) noexcept {
  emit(phase::begin, a, nullptr);
}
inline void emit_end(const Activity& a, const std::exception_ptr& error) noexcept {
  emit(phase::end, a, &error);
}
inline void emit_instant(const Activity& a) noexcept {
  emit(phase::instant, a, nullptr);
}

}  // namespace detail

/// Whether any listener is installed. Code that would build an expensive name asks first.
/// Defining `XDEV_NO_PROFILER_HOOKS` (for every translation unit of the program) compiles the
/// hooks out: this is then always false and listeners see nothing.
#if defined(XDEV_NO_PROFILER_HOOKS)
[[nodiscard]] constexpr bool active() noexcept {
  return false;
}
#else
[[nodiscard]] inline bool active() noexcept {
  return detail::listener_count.load(std::memory_order_relaxed) != 0;
}
#endif

namespace detail {

/// A span on the calling thread (a synchronize, a throttle wait, a collective): `begin` at
/// construction, `end` at destruction or `finish`. Nothing at all when no listener is installed.
class scoped_activity {
 public:
  scoped_activity(Category c, std::string_view name, std::string_view device, std::uint64_t stream = 0,
                  std::uint64_t bytes = 0) noexcept {
    if (!active()) return;
    a_ = Activity{
        next_activity_id(), c, name, device, stream, bytes, {}, std::chrono::steady_clock::now(), 0, 0, {}, {}};
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

/// Runs `f()` as a span of category `c` on the calling thread; its `end` carries what `f` throws,
/// which then goes on to the caller.
template <class F>
decltype(auto) within_activity(Category c, std::string_view name, std::string_view device, std::uint64_t stream,
                               F&& f) {
  scoped_activity span(c, name, device, stream);
  try {
    return std::forward<F>(f)();
  } catch (...) {
    span.finish(std::current_exception());
    throw;
  }
}

/// An instant (an allocation, a free, a fallback), when a listener is installed.
inline void instant(Category c, std::string_view name, std::string_view device, std::uint64_t bytes = 0,
                    std::uint64_t in_use = 0) noexcept {
  if (!active()) return;
  emit_instant(
      Activity{next_activity_id(), c, name, device, 0, bytes, {}, std::chrono::steady_clock::now(), in_use, 0, {}, {}});
}

}  // namespace detail

}  // namespace xdev::tools
