/// \file
/// Reading xdev's environment variables with errors that name the variable, value and accepted range.
#pragma once

#include <xdev/core/error.hpp>
#include <xdev/core/log.hpp>

#if defined(__linux__)
#include <sys/auxv.h>
#endif

#include <atomic>
#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace xdev {

namespace detail {
// -1: the process's own state; 0 or 1: forced by `set_secure_execution_for_testing`.
inline std::atomic<int>& secure_execution_forced() noexcept {
  static std::atomic<int> forced{-1};
  return forced;
}
inline std::atomic<bool>& secure_execution_announced() noexcept {
  static std::atomic<bool> announced{false};
  return announced;
}
}  // namespace detail

/// True when this process runs in secure-execution mode: it gained privileges its user does not
/// have when it started (a setuid or setgid program, file capabilities: the kernel's `AT_SECURE`,
/// what `secure_getenv` obeys). xdev then reads no environment variable at all (`getenv_string`
/// sees every one as unset), so plugins are searched only in the installed directory.
[[nodiscard]] inline bool secure_execution() noexcept {
  const int forced = detail::secure_execution_forced().load(std::memory_order_relaxed);
  if (forced >= 0) return forced != 0;
#if defined(__linux__)
  return ::getauxval(AT_SECURE) != 0;
#else
  return false;
#endif
}

/// For tests: makes `secure_execution()` answer `on`, or the process's real state again with
/// `std::nullopt`. Affects this program's copy of xdev only (a plugin asks the kernel itself).
inline void set_secure_execution_for_testing(std::optional<bool> on) noexcept {
  detail::secure_execution_forced().store(on ? static_cast<int>(*on) : -1, std::memory_order_relaxed);
  detail::secure_execution_announced().store(false, std::memory_order_relaxed);
}

/// The value of environment variable `name`, or `std::nullopt` when it is unset.
/// An empty value counts as unset, as for most Unix tools. In secure-execution mode every
/// variable counts as unset, and the first call says so once (a warning in xdev's log).
inline std::optional<std::string> getenv_string(const char* name) {
  if (secure_execution()) {
    if (!detail::secure_execution_announced().exchange(true, std::memory_order_relaxed))
      log::write(log::Level::warning, "env",
                 "secure-execution mode (setuid, setgid or file capabilities): environment variables such as "
                 "XDEV_PLUGIN_PATH and XDEV_DEVICE are ignored; plugins are loaded from the installed directory only");
    return std::nullopt;
  }
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

/// Parses `text` as an integer in [`min`, `max`] for the variable or option `what`.
/// \throws xdev::error `errc::invalid_argument`: `XDEV_HOST_DEVICES="0x" is not an integer in [1, 1024]`.
inline std::size_t parse_count(std::string_view what, std::string_view text, std::size_t min, std::size_t max) {
  std::size_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc{} || ptr != last || value < min || value > max)
    throw error(errc::invalid_argument, std::string(what) + "=\"" + std::string(text) + "\" is not an integer in [" +
                                            std::to_string(min) + ", " + std::to_string(max) + "]");
  return value;
}

/// Reads environment variable `name` as an integer in [`min`, `max`]; `std::nullopt` when unset.
/// \throws xdev::error `errc::invalid_argument` naming the variable, its value and the accepted range.
inline std::optional<std::size_t> getenv_count(const char* name, std::size_t min,
                                               std::size_t max = std::numeric_limits<std::size_t>::max()) {
  auto text = getenv_string(name);
  if (!text) return std::nullopt;
  return parse_count(name, *text, min, max);
}

}  // namespace xdev
