/// \file
/// `xdev::log`: the one way xdev says something on its own — a plugin skipped during discovery,
/// an error nobody observed before exit, an MPI job aborted, and at `debug` the steps of plugin
/// loading, device selection and collectives. Four levels, a threshold from `XDEV_LOG_LEVEL` (or
/// `set_level`), and a sink the program can replace (`set_sink`) to route the records into its
/// own logging (spdlog, glog, syslog). The default sink writes one line per record to stderr.
#pragma once

#include <xdev/core/detail/sink_slot.hpp>
#include <xdev/core/error.hpp>

#include <stdlib.h>  // secure_getenv

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace xdev::log {

/// How much a record matters; a threshold lets through its own level and those above it.
enum class Level : int {
  error = 0,    ///< something failed and nobody else will report it (an unobserved error at exit)
  warning = 1,  ///< something was skipped or ignored (a plugin that failed to load); the default threshold
  info = 2,     ///< what a user may want to know (a plugin's own informational messages)
  debug = 3,    ///< steps: each plugin file looked at, the device chosen and why, each collective
};

/// "error", "warning", "info" or "debug".
[[nodiscard]] constexpr std::string_view name(Level level) noexcept {
  switch (level) {
    case Level::error:
      return "error";
    case Level::warning:
      return "warning";
    case Level::info:
      return "info";
    case Level::debug:
      return "debug";
  }
  return "?";
}

/// One record. The views live as long as the call to the sink.
struct Record {
  Level level = Level::warning;
  std::string_view component;  ///< which part of xdev speaks: "plugin", "registry", "distributed", "spmd", ...
  std::string_view message;    ///< one line, without a trailing newline
};

/// Receives every record that passes the threshold. May be called from any thread (plugins and
/// workers log from their own), so it must be thread-safe; what it throws is swallowed.
using Sink = std::function<void(const Record&)>;

/// The default sink: `xdev: <message>` on stderr for errors and warnings, `xdev: <level>:
/// <component>: <message>` for info and debug, one `fwrite` per line.
inline void default_sink(const Record& r) {
  std::string line = "xdev: ";
  if (r.level >= Level::info) {
    line += name(r.level);
    line += ": ";
    if (!r.component.empty()) {
      line += r.component;
      line += ": ";
    }
  }
  line += r.message;
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

/// Parses a level name as `XDEV_LOG_LEVEL` accepts it: `error`, `warning`, `info`, `debug`
/// (case-sensitive), or a digit 0-3 in that order.
/// \throws xdev::error `errc::invalid_argument` quoting `text`.
[[nodiscard]] inline Level parse_level(std::string_view text) {
  for (const Level l : {Level::error, Level::warning, Level::info, Level::debug})
    if (text == name(l) || (text.size() == 1 && text[0] == static_cast<char>('0' + static_cast<int>(l)))) return l;
  throw error(errc::invalid_argument, "XDEV_LOG_LEVEL=\"" + std::string(text) +
                                          "\" is not a log level: use error, warning, info or debug (or 0-3)");
}

namespace detail {

// The threshold in force: -1 until first read (from `XDEV_LOG_LEVEL` then), else a Level, or
// `malformed` when the variable could not be parsed (the records then use the default).
inline constexpr int unread = -1;
inline constexpr int malformed = -2;
inline std::atomic<int>& threshold() noexcept {
  static std::atomic<int> t{unread};
  return t;
}

// `XDEV_LOG_LEVEL`, read with `secure_getenv`: ignored in secure-execution mode, like every other
// variable of xdev.
inline int read_threshold() noexcept {
  const char* v = ::secure_getenv("XDEV_LOG_LEVEL");
  if (v == nullptr || *v == '\0') return static_cast<int>(Level::warning);
  try {
    return static_cast<int>(parse_level(v));
  } catch (...) {
    return malformed;
  }
}

inline int current_threshold() noexcept {
  int t = threshold().load(std::memory_order_relaxed);
  if (t == unread) {
    t = read_threshold();
    threshold().store(t, std::memory_order_relaxed);
  }
  return t;
}

inline xdev::detail::SinkSlot<Sink>& installed_sink() {
  static auto* const s = new xdev::detail::SinkSlot<Sink>;  // never destroyed: logging works during static destruction
  return *s;
}

}  // namespace detail

/// The threshold in force: `set_level`'s, else `XDEV_LOG_LEVEL`'s, else `warning`.
/// \throws xdev::error `errc::invalid_argument` for a malformed `XDEV_LOG_LEVEL`, quoting it (a
/// `Runtime` and a `Registry` ask at construction, so a typo is an error at startup).
[[nodiscard]] inline Level level() {
  const int t = detail::current_threshold();
  if (t == detail::malformed) {
    const char* v = ::secure_getenv("XDEV_LOG_LEVEL");
    if (v == nullptr || *v == '\0') return Level::warning;  // unset meanwhile
    return parse_level(v);                                  // throws, quoting the value
  }
  return static_cast<Level>(t);
}

/// Sets the threshold for the whole process; `std::nullopt` reads `XDEV_LOG_LEVEL` again at the
/// next record.
inline void set_level(std::optional<Level> l) noexcept {
  detail::threshold().store(l ? static_cast<int>(*l) : detail::unread, std::memory_order_relaxed);
}

/// Whether a record of level `l` would reach the sink: one relaxed load once the threshold is known.
/// Guard the building of an expensive message with it. A malformed `XDEV_LOG_LEVEL` counts as
/// `warning` here (`level()` is where it is an error).
[[nodiscard]] inline bool enabled(Level l) noexcept {
  int t = detail::current_threshold();
  if (t == detail::malformed) t = static_cast<int>(Level::warning);
  return static_cast<int>(l) <= t;
}

/// Installs `sink` for every record and returns the previous one (empty when it was the default).
/// An empty `sink` restores `default_sink`. Thread-safe; a record being written meanwhile goes to
/// either.
inline Sink set_sink(Sink sink) {
  return detail::installed_sink().exchange(std::move(sink));
}

/// Sends `message` to the sink when `l` passes the threshold. Never throws: a record must not
/// turn into a failure of what it reports on.
inline void write(Level l, std::string_view component, std::string_view message) noexcept {
  if (!enabled(l)) return;
  try {
    const std::shared_ptr<const Sink> sink = detail::installed_sink().get();
    const Record r{l, component, message};
    if (sink && *sink)
      (*sink)(r);
    else
      default_sink(r);
  } catch (...) {
  }
}

}  // namespace xdev::log
