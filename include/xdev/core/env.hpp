/// \file
/// Reading xdev's environment variables with errors that name the variable, value and accepted range.
#pragma once

#include <xdev/core/error.hpp>

#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace xdev {

/// The value of environment variable `name`, or `std::nullopt` when it is unset.
/// An empty value counts as unset, as for most Unix tools.
inline std::optional<std::string> getenv_string(const char* name) {
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
