/// \file
/// The callback shapes a backend uses to report asynchronous work: `Completion` and `HostTask`.
#pragma once

#include <xdev/core/detail/unique_function.hpp>

#include <chrono>
#include <exception>
#include <optional>
#include <utility>

namespace xdev {

/// Called exactly once by a backend when submitted work has finished: with a null pointer on
/// success, or with the exception that describes the failure. A backend may call it from any
/// thread, including inside the submitting call (xdev then continues without recursing).
/// Natively asynchronous runtimes call it from their own event callback (an OpenCL event
/// callback, a CUDA host function), so no thread blocks per operation.
using Completion = detail::unique_function<void(std::exception_ptr)>;

/// A host function to run in device order (what `Device::execute` submits).
using HostTask = detail::unique_function<void()>;

/// Where a device ran a piece of work, on the host's steady clock.
struct DeviceTimes {
  std::chrono::steady_clock::time_point begin;
  std::chrono::steady_clock::time_point end;
};

namespace detail {
// The default TLS model, never "initial-exec": that model on one variable puts the whole module's
// thread-local storage into the static TLS block, and a dlopen'ed plugin whose block does not fit
// the loader's small surplus then fails to load (the CUDA plugin, 8 KiB with the static CUDA
// runtime: "cannot allocate memory in static TLS block").
inline thread_local std::optional<DeviceTimes> completing_device_times;
/// What the backend reported for the completion now being called (once: it is cleared).
inline std::optional<DeviceTimes> take_device_times() noexcept {
  return std::exchange(completing_device_times, std::nullopt);
}
}  // namespace detail

/// For backends that know when the device ran the work (OpenCL profiling info, CUDA events):
/// called just before the work's `Completion`, on the same thread, with the times converted to
/// the host's steady clock. xdev takes them at that call: an operation's profiler hooks and trace
/// slice, and an event's `elapsed_time`, then use the device's times instead of the host's view.
inline void report_device_times(DeviceTimes times) noexcept {
  detail::completing_device_times = times;
}

namespace detail {
// Set by a launch that is not one enqueue on a bound native queue (an op's CPU fallback: its first
// transfers go to the queue, its write-back comes later from a completion): later work on a
// native stream must then wait for its completion before it starts.
inline thread_local bool launch_was_multi_step = false;
// Set by a caller that starts work from a backend's own thread and can take the completion inside
// the call (a graph replay chaining its steps): a backend already running on one of its workers may
// then run the work inline instead of queueing it behind a wake-up. A backend that does so clears
// it while the work and its completion run, so that what they start is queued as usual.
inline thread_local bool inline_launch_welcome = false;
}  // namespace detail

/// For backends and op implementations: called during the call that starts an operation when the
/// operation goes on after that call returns with further backend calls of its own (staged through
/// the host, or split into steps). On a stream with a native queue, xdev then starts the work
/// after it only once it has completed; otherwise the queue's order is relied on.
inline void note_multi_step_launch() noexcept {
  detail::launch_was_multi_step = true;
}

}  // namespace xdev
