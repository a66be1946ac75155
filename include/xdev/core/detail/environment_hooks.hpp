/// \file
/// How a `Runtime` acts on `XDEV_TRACE` and `XDEV_TOOLS_LIBS` without compiling the trace writer
/// or the library loader (Boost.DLL) into every translation unit that makes one: the header that
/// implements each (<xdev/core/trace.hpp>, <xdev/plugin/tools_library.hpp>), included anywhere in
/// the program (as `Registry` and the umbrella header do), registers its starter here at static
/// initialization, and the runtime calls it.
#pragma once

#include <xdev/core/env.hpp>
#include <xdev/core/log.hpp>

#include <atomic>
#include <string>

namespace xdev::detail {

/// Runs `starter` when registered (it may throw); else, when `variable` is set, says once that
/// this program cannot act on it and which headers would (`headers`: "<a.hpp> (or <b.hpp>)").
inline void start_from_environment(const std::atomic<void (*)()>& starter, std::atomic<bool>& warned,
                                   const char* variable, const char* headers, const char* what) {
  if (auto* start = starter.load(std::memory_order_acquire)) return start();
  if (warned.load(std::memory_order_relaxed) || !getenv_string(variable)) return;
  if (!warned.exchange(true))
    log::write(log::Level::warning, "env",
               std::string(variable) + " is set, but this program has no " + what + ": include " + headers +
                   " in one of its files; it is ignored");
}

}  // namespace xdev::detail

namespace xdev::trace::detail {

/// Set by <xdev/core/trace.hpp>: starts the trace of `XDEV_TRACE` once per process (may throw).
inline std::atomic<void (*)()> environment_starter{nullptr};

/// What a `Runtime` constructor calls: the registered starter, or, when `XDEV_TRACE` is set in a
/// program without the trace writer, one warning saying how to get it.
inline void start_environment_trace() {
  static std::atomic<bool> warned{false};
  xdev::detail::start_from_environment(environment_starter, warned, "XDEV_TRACE",
                                       "<xdev/core/trace.hpp> (or <xdev/xdev.hpp>)", "trace writer");
}

}  // namespace xdev::trace::detail

namespace xdev::tools::detail {

/// Set by <xdev/plugin/tools_library.hpp>: loads the libraries of `XDEV_TOOLS_LIBS` once per
/// process (may throw).
inline std::atomic<void (*)()> libraries_starter{nullptr};

/// What a `Runtime` constructor calls: the registered loader, or, when `XDEV_TOOLS_LIBS` is set in
/// a program without it, one warning saying how to get it.
inline void load_environment_libraries() {
  static std::atomic<bool> warned{false};
  xdev::detail::start_from_environment(libraries_starter, warned, "XDEV_TOOLS_LIBS",
                                       "<xdev/plugin/tools_library.hpp> (or <xdev/any/registry.hpp>)",
                                       "tools library loader");
}

}  // namespace xdev::tools::detail
