/// \file
/// How a `Runtime` starts the trace `XDEV_TRACE` names without compiling the trace writer into
/// every translation unit that makes one: <xdev/core/trace.hpp>, included anywhere in the program
/// (as `Registry` and the umbrella header do), registers its starter here at static
/// initialization, and the runtime calls it.
#pragma once

#include <xdev/core/env.hpp>
#include <xdev/core/log.hpp>

#include <atomic>

namespace xdev::trace::detail {

/// Set by <xdev/core/trace.hpp>: starts the trace of `XDEV_TRACE` once per process (may throw).
inline std::atomic<void (*)()> environment_starter{nullptr};

/// What a `Runtime` constructor calls: the registered starter, or, when `XDEV_TRACE` is set in a
/// program without the trace writer, one warning saying how to get it.
inline void start_environment_trace() {
  if (auto* start = environment_starter.load(std::memory_order_acquire)) return start();
  static std::atomic<bool> warned{false};
  if (warned.load(std::memory_order_relaxed) || !getenv_string("XDEV_TRACE")) return;
  if (!warned.exchange(true))
    log::write(log::Level::warning, "trace",
               "XDEV_TRACE is set, but this program has no trace writer: include <xdev/core/trace.hpp> (or "
               "<xdev/xdev.hpp>) in one of its files; no trace is written");
}

}  // namespace xdev::trace::detail
