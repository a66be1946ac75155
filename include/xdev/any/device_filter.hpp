/// \file
/// `xdev::DeviceFilter`: the grammar of `XDEV_DEVICE`, which says which devices a process sees and
/// which backend is its default (in the spirit of oneAPI's `ONEAPI_DEVICE_SELECTOR` and CUDA's
/// `CUDA_VISIBLE_DEVICES`). This header only parses and prints; `xdev::Registry` applies a filter
/// to the backends it knows (see docs/devices.md).
///
///     value   = term *( ";" term )
///     term    = [ "!" ] backend [ ":" devices ]
///     backend = NAME / "*"                       ; NAME: a letter, then letters, digits or '_'
///     devices = "*" / ordinal *( "," ordinal )   ; ordinal: 1 to 6 decimal digits
///
///     XDEV_DEVICE=OPENCL              every OPENCL device; OPENCL is the default backend
///     XDEV_DEVICE=opencl:1,0          OPENCL:1 then OPENCL:0 (names match ignoring case)
///     XDEV_DEVICE="opencl:0;host:*"   OPENCL:0 and every HOST device; OPENCL is the default
///     XDEV_DEVICE=!REF                every device except REF's
///
/// Terms without `!` list the visible devices in their order; `!` terms then remove devices. A
/// value with only `!` terms starts from every device. Nothing may be empty: no empty term, no
/// empty device list, no spaces.
#pragma once

#include <xdev/core/error.hpp>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace xdev {

/// One term of a `DeviceFilter`: `[!]backend[:devices]`.
struct DeviceFilterTerm {
  bool exclude = false;               ///< written with `!`: removes the devices it matches
  std::string backend;                ///< the name as written, or "*" for every backend
  std::vector<std::size_t> ordinals;  ///< the devices in the order written; empty = every device

  /// True when the term names every backend (`*`).
  [[nodiscard]] bool any_backend() const noexcept { return backend == "*"; }
  /// True when the term takes every device of its backends (no ordinals, or `:*`).
  [[nodiscard]] bool all_devices() const noexcept { return ordinals.empty(); }

  friend bool operator==(const DeviceFilterTerm&, const DeviceFilterTerm&) = default;
};

/// A parsed `XDEV_DEVICE` value (the grammar is in the file comment). An empty filter makes every
/// device visible.
class DeviceFilter {
 public:
  /// The empty filter: every device visible.
  DeviceFilter() = default;

  /// The largest ordinal a term may name (six digits).
  static constexpr std::size_t max_ordinal = 999999;

  /// Parses `text`. `source` names where it came from in errors (`XDEV_DEVICE`); an empty `text`
  /// is the empty filter.
  /// \throws xdev::error `errc::invalid_argument` quoting `source=text`, the term at fault, what is
  ///         wrong with it, and what is accepted.
  [[nodiscard]] static DeviceFilter parse(std::string_view text, std::string_view source = "XDEV_DEVICE") {
    DeviceFilter f;
    if (text.empty()) return f;
    std::size_t start = 0;
    while (true) {
      const std::size_t end = std::min(text.find(';', start), text.size());
      f.terms_.push_back(parse_term(text.substr(start, end - start), text, source));
      if (end == text.size()) break;
      start = end + 1;
    }
    return f;
  }

  /// The terms, in the order written.
  [[nodiscard]] const std::vector<DeviceFilterTerm>& terms() const noexcept { return terms_; }
  /// True when no term was given: every device is visible.
  [[nodiscard]] bool empty() const noexcept { return terms_.empty(); }
  /// True when some term lists devices (has no `!`); else the filter starts from every device.
  [[nodiscard]] bool has_inclusions() const noexcept {
    return std::any_of(terms_.begin(), terms_.end(), [](const DeviceFilterTerm& t) { return !t.exclude; });
  }

  /// True when term `t`'s backend part matches backend `name` (ignoring case, or `*`).
  [[nodiscard]] static bool matches(const DeviceFilterTerm& t, std::string_view name) noexcept {
    return t.any_backend() || same_name(t.backend, name);
  }

  /// The filter in its canonical spelling: names upper case, `:*` left out, ordinals as numbers.
  /// Parsing it gives an equal filter (up to the case of names).
  [[nodiscard]] std::string to_string() const {
    std::string out;
    for (const auto& t : terms_) {
      if (!out.empty()) out += ';';
      out += to_string(t);
    }
    return out;
  }

  /// One term in its canonical spelling (`!OPENCL:0,1`).
  [[nodiscard]] static std::string to_string(const DeviceFilterTerm& t) {
    std::string out = t.exclude ? "!" : "";
    for (char c : t.backend) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    // Appended piece by piece: `":" + std::to_string(...)` (a literal before a temporary string)
    // trips g++ 12's -Wrestrict at -O3 once inlined into the registry (a false positive that
    // fails users' -Werror builds).
    for (std::size_t i = 0; i < t.ordinals.size(); ++i) {
      out += i == 0 ? ':' : ',';
      out += std::to_string(t.ordinals[i]);
    }
    return out;
  }

  /// Backend names compare ignoring case.
  [[nodiscard]] static bool same_name(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
           });
  }

  /// True for a backend name: a letter, then letters, digits or '_', at most 64 characters.
  [[nodiscard]] static bool valid_name(std::string_view n) noexcept {
    if (n.empty() || n.size() > 64 || !std::isalpha(static_cast<unsigned char>(n[0]))) return false;
    return std::all_of(n.begin(), n.end(),
                       [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  }

  /// `text` as errors quote it: control bytes (and DEL) written as `\xNN`, everything else as is.
  [[nodiscard]] static std::string printable(std::string_view text) {
    std::string out;
    for (char c : text) {
      const auto u = static_cast<unsigned char>(c);
      if (u >= 0x20 && u != 0x7f) {
        out += c;
      } else {
        constexpr char hex[] = "0123456789abcdef";
        out += "\\x";
        out += hex[u >> 4];
        out += hex[u & 15];
      }
    }
    return out;
  }

  friend bool operator==(const DeviceFilter&, const DeviceFilter&) = default;

 private:
  [[noreturn]] static void reject(std::string_view term, std::string_view text, std::string_view source,
                                  const std::string& problem) {
    std::string message = std::string(source) + "=" + printable(text) + ": " + problem;
    if (!term.empty()) message.append(" in term ").append(quoted(term));
    message +=
        " (accepted: terms separated by ';', each [!]NAME[:DEVICES], where NAME is a backend name "
        "(a letter, then letters, digits or '_', at most 64 characters) or *, and DEVICES is * or "
        "ordinals separated by ',', e.g. OPENCL:0,1;HOST:* or !REF)";
    throw error(errc::invalid_argument, message);
  }

  // `s` in double quotes, printable. Appended piece by piece, like `to_string`: a literal before a
  // temporary string (`"\"" + printable(s)`) trips g++ 12's false -Wrestrict at -O3 once inlined
  // into a caller of `parse`, which failed users' -Werror builds.
  static std::string quoted(std::string_view s) {
    std::string q(1, '"');
    q += printable(s);
    q += '"';
    return q;
  }

  static DeviceFilterTerm parse_term(std::string_view term, std::string_view text, std::string_view source) {
    DeviceFilterTerm t;
    if (term.empty()) reject(term, text, source, "an empty term (a ';' at an end, or two in a row)");
    std::string_view rest = term;
    if (rest.front() == '!') {
      t.exclude = true;
      rest.remove_prefix(1);
    }
    const std::size_t colon = rest.find(':');
    const std::string_view name = rest.substr(0, colon);
    if (name.empty()) reject(term, text, source, "no backend name");
    if (name != "*" && !valid_name(name)) reject(term, text, source, quoted(name) + " is not a backend name");
    t.backend = std::string(name);
    if (colon == std::string_view::npos) return t;
    std::string_view devices = rest.substr(colon + 1);
    if (devices.empty()) reject(term, text, source, "an empty device list after ':'");
    if (devices == "*") return t;
    std::size_t start = 0;
    while (true) {
      const std::size_t end = std::min(devices.find(',', start), devices.size());
      const std::string_view digits = devices.substr(start, end - start);
      if (digits.empty()) reject(term, text, source, "an empty device ordinal");
      if (digits.size() > 6 || !std::all_of(digits.begin(), digits.end(),
                                            [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }))
        reject(term, text, source, quoted(digits) + " is not a device ordinal (1 to 6 decimal digits, or * alone)");
      std::size_t n = 0;
      for (char c : digits) n = n * 10 + static_cast<std::size_t>(c - '0');
      if (std::find(t.ordinals.begin(), t.ordinals.end(), n) == t.ordinals.end()) t.ordinals.push_back(n);
      if (end == devices.size()) break;
      start = end + 1;
    }
    return t;
  }

  std::vector<DeviceFilterTerm> terms_;
};

}  // namespace xdev
