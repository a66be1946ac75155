/// \file
/// `xdev::error` and `xdev::errc`: the one exception type xdev throws.
#pragma once

#include <string>
#include <system_error>
#include <type_traits>

namespace xdev {

/// Error conditions raised by xdev. Values are stable: the plugin ABI carries them as integers.
enum class errc : int {
  invalid_argument = 1,    ///< a caller passed a value xdev cannot accept (shape, size, dtype, variable)
  out_of_memory = 2,       ///< an allocation exceeded the device's memory or its configured limit
  not_found = 3,           ///< a named device, backend or plugin does not exist
  unavailable = 4,         ///< the device or runtime cannot take work now (e.g. after shutdown)
  unimplemented = 5,       ///< the operation or dtype is not supported by this device
  incompatible_abi = 6,    ///< a plugin was built against an ABI this xdev cannot use
  cancelled = 7,           ///< the work was cancelled before it ran
  deadline_exceeded = 8,   ///< the work did not finish before its deadline
  internal = 9,            ///< a bug in xdev or a backend
  permission_denied = 10,  ///< a file xdev would load is not trusted (its owner or mode; docs/security.md)
  identity_mismatch = 11,  ///< a plugin file is not on the allowlist in force (docs/security.md)
};

/// The category of `xdev::errc` codes; its name is "xdev".
inline const std::error_category& error_category() noexcept {
  struct category final : std::error_category {
    const char* name() const noexcept override { return "xdev"; }
    std::string message(int code) const override {
      switch (static_cast<errc>(code)) {
        case errc::invalid_argument:
          return "invalid argument";
        case errc::out_of_memory:
          return "out of memory";
        case errc::not_found:
          return "not found";
        case errc::unavailable:
          return "unavailable";
        case errc::unimplemented:
          return "unimplemented";
        case errc::incompatible_abi:
          return "incompatible ABI";
        case errc::cancelled:
          return "cancelled";
        case errc::deadline_exceeded:
          return "deadline exceeded";
        case errc::internal:
          return "internal error";
        case errc::permission_denied:
          return "permission denied";
        case errc::identity_mismatch:
          return "identity mismatch";
      }
      return "unknown xdev error " + std::to_string(code);
    }
  };
  static const category instance;
  return instance;
}

/// Makes `std::error_code{e}` work for `xdev::errc`.
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// The exception xdev throws: a `std::system_error` whose code is an `xdev::errc`.
///
/// `what()` reads "<message>: <code description>", where the message names the failing value
/// and what was expected, e.g. `XDEV_HOST_DEVICES="abc" is not an integer in [1, 1024]`.
class error : public std::system_error {
 public:
  error(errc code, const std::string& message) : std::system_error(make_error_code(code), message) {}

  /// The condition as an `errc` (the `std::error_code` is still available through `code()`).
  [[nodiscard]] errc condition() const noexcept { return static_cast<errc>(code().value()); }

  /// The message it was made with: `what()` without the ": <code description>" that
  /// `std::system_error` appends (to raise it again with more context in front).
  [[nodiscard]] std::string message() const {
    std::string text = what();
    const std::string suffix = ": " + code().message();
    if (text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0)
      text.resize(text.size() - suffix.size());
    return text;
  }
};

}  // namespace xdev

template <>
struct std::is_error_code_enum<xdev::errc> : std::true_type {};
