/// \file
/// What the plugin loader says on its own (<xdev/plugin/loader.hpp>): `Severity`, `Diagnostic`,
/// the default sink (xdev's log, see <xdev/core/log.hpp>) and `set_diagnostic_sink` to route the messages into a
/// program's own logging; also how a plugin's own messages (`xdev_host_info::log`) reach the same sink.
#pragma once

#include <xdev/core/detail/sink_slot.hpp>
#include <xdev/core/log.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace xdev::plugin {

// ---- diagnostics ----------------------------------------------------------------------------

/// How much a diagnostic matters. The default sink prints `warning` and `error` only.
enum class Severity {
  verbose,  ///< report detail: files that are not plugins, plugins loaded, missing installed directory
  info,     ///< a plugin's own informational message (`xdev_host_info::log`, level 0)
  warning,  ///< something was skipped: a failed or incompatible plugin, an ignored search directory
  error,    ///< a plugin's own error message (`xdev_host_info::log`, level 2)
};

/// One loader diagnostic: one line, without the "xdev: " prefix the default sink adds.
struct Diagnostic {
  Severity severity = Severity::warning;  ///< how much it matters
  std::string message;                    ///< e.g. `skipped "/p/libx.so": built for plugin ABI 2, ...`
};

/// Receives every loader diagnostic. May be called from any thread (plugins log from their own),
/// so it must be thread-safe; it must not throw (exceptions are swallowed).
using DiagnosticSink = std::function<void(const Diagnostic&)>;

/// The log level a diagnostic goes out at: `verbose` is `debug`, the others keep their name.
[[nodiscard]] constexpr log::Level log_level_of(Severity severity) noexcept {
  switch (severity) {
    case Severity::verbose:
      return log::Level::debug;
    case Severity::info:
      return log::Level::info;
    case Severity::warning:
      return log::Level::warning;
    case Severity::error:
      return log::Level::error;
  }
  return log::Level::warning;
}

/// The default sink: xdev's log (<xdev/core/log.hpp>), component "plugin", at the diagnostic's
/// level (`log_level_of`). With the log's defaults, warnings and errors reach stderr as one line
/// each, `xdev: <message>`; `XDEV_LOG_LEVEL=debug` shows every step of discovery too.
inline void default_diagnostic_sink(const Diagnostic& diagnostic) {
  log::write(log_level_of(diagnostic.severity), "plugin", diagnostic.message);
}

namespace detail {

inline xdev::detail::SinkSlot<DiagnosticSink>& installed_sink() {
  static auto* const sink = new xdev::detail::SinkSlot<DiagnosticSink>;  // never destroyed
  return *sink;
}

/// Sends one diagnostic to the installed sink (outside the sink lock, so a sink may log itself).
inline void diagnose(Severity severity, std::string message) noexcept {
  try {
    const std::shared_ptr<const DiagnosticSink> sink = installed_sink().get();
    const Diagnostic diagnostic{severity, std::move(message)};
    if (sink && *sink)
      (*sink)(diagnostic);
    else
      default_diagnostic_sink(diagnostic);
  } catch (...) {
    // A diagnostic must never turn into a failure of the load that produced it.
  }
}

/// `xdev_host_info::log`: a plugin's message, prefixed with its name, to the sink.
inline void plugin_log(void* context, std::int32_t level, const char* message) noexcept {
  try {
    const auto* prefix = static_cast<const std::string*>(context);
    const Severity severity = level <= 0 ? Severity::info : level == 1 ? Severity::warning : Severity::error;
    diagnose(severity, (prefix != nullptr ? *prefix : std::string("plugin")) + ": " +
                           (message != nullptr ? message : "(null message)"));
  } catch (...) {
  }
}

}  // namespace detail

/// Installs `sink` for every loader diagnostic and returns the previous one (an empty function
/// when it was the default). An empty `sink` restores the default (`default_diagnostic_sink`).
/// Thread-safe.
inline DiagnosticSink set_diagnostic_sink(DiagnosticSink sink) {
  return detail::installed_sink().exchange(std::move(sink));
}

}  // namespace xdev::plugin
