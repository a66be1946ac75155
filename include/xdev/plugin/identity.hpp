/// \file
/// What a plugin file is, beyond its name: `Identity` (real path, ELF build-id, SHA-256), and
/// `Allowlist`, the operator's list of the plugin builds a program may load (docs/security.md).
///
/// ```text
/// # XDEV_PLUGIN_ALLOWLIST=/etc/xdev/plugins.allow: `sha256sum` output works as it is
/// 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  /usr/lib/xdev/plugins/libxdev_plugin_opencl.so
/// build-id:5f2b0a1c3d4e5f60718293a4b5c6d7e8f9001122   the CUDA plugin, any copy of this build
/// ```
#pragma once

#include <xdev/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev::plugin {

/// Who a loaded plugin is: read from the very file the dynamic loader mapped.
struct Identity {
  std::filesystem::path real_path;  ///< the file's canonical path (symbolic links resolved)
  std::string build_id;             ///< its ELF build-id (`ld --build-id`), lowercase hex; "" without one
  std::string sha256;               ///< the SHA-256 of the whole file, 64 lowercase hex digits
};

/// The plugin builds a program may load: SHA-256 digests (the exact file) and build-ids (any file
/// of that build, stripped or not). A plugin matching no entry is refused before any of its code
/// runs, with `errc::identity_mismatch`.
///
/// The text format, one entry per line (blank lines and lines starting with `#` are ignored):
/// `[sha256:|build-id:]<hex> [label]`. A bare 64-digit hex is a SHA-256, any other bare hex a
/// build-id; what follows the hex after white space is a label for people, so the output of
/// `sha256sum` is an allowlist as it is. Hex digits may be upper or lower case.
class Allowlist {
 public:
  /// What an entry pins.
  enum class Kind {
    sha256,    ///< the file's contents: one flipped byte no longer matches
    build_id,  ///< the build: every copy of it, stripped or not (a flipped byte may still match)
  };

  /// One line of the list.
  struct Entry {
    Kind kind = Kind::sha256;
    std::string hex;    ///< lowercase
    std::string label;  ///< the rest of the line ("" when none)
    std::size_t line = 0;
  };

  /// An empty list: it admits nothing.
  Allowlist() = default;

  /// Parses `text`; `origin` names it in errors ("/etc/xdev/plugins.allow").
  /// \throws xdev::error `errc::invalid_argument` naming `origin`, the line and what is wrong.
  static Allowlist parse(std::string_view text, std::string origin) {
    Allowlist list;
    list.origin_ = std::move(origin);
    std::size_t line_number = 0;
    while (!text.empty()) {
      ++line_number;
      const auto end = text.find('\n');
      std::string_view line = text.substr(0, end);
      text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
      line = trim(line);
      if (line.empty() || line.front() == '#') continue;
      list.entries_.push_back(parse_line(line, line_number, list.origin_));
    }
    return list;
  }

  /// Where it came from: the file, or what `parse` was given.
  [[nodiscard]] const std::string& origin() const noexcept { return origin_; }
  /// Its entries, in order.
  [[nodiscard]] const std::vector<Entry>& entries() const noexcept { return entries_; }

  /// True when `identity`'s SHA-256 or (non-empty) build-id is on the list.
  [[nodiscard]] bool admits(const Identity& identity) const noexcept {
    for (const auto& e : entries_) {
      if (e.kind == Kind::sha256 && e.hex == identity.sha256) return true;
      if (e.kind == Kind::build_id && !identity.build_id.empty() && e.hex == identity.build_id) return true;
    }
    return false;
  }

 private:
  static constexpr std::size_t max_label_in_errors = 80;

  static std::string_view trim(std::string_view s) noexcept {
    constexpr std::string_view space = " \t\r\v\f";
    const auto first = s.find_first_not_of(space);
    if (first == std::string_view::npos) return {};
    return s.substr(first, s.find_last_not_of(space) - first + 1);
  }

  static bool is_hex(char c) noexcept {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }

  static Entry parse_line(std::string_view line, std::size_t number, const std::string& origin) {
    auto fail = [&](const std::string& what) -> Entry {
      std::string shown(line.substr(0, max_label_in_errors));
      for (char& c : shown)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
      throw error(errc::invalid_argument, "plugin allowlist " + origin + " line " + std::to_string(number) + ": " +
                                              what + " (\"" + shown + (line.size() > shown.size() ? "..." : "") +
                                              "\"; expected [sha256:|build-id:]<hex> [label])");
    };
    Entry entry;
    entry.line = number;
    const auto token_end = line.find_first_of(" \t");
    std::string_view token = line.substr(0, token_end);
    if (token_end != std::string_view::npos) entry.label = std::string(trim(line.substr(token_end)));
    std::optional<Kind> kind;
    if (token.substr(0, 7) == "sha256:") {
      kind = Kind::sha256;
      token.remove_prefix(7);
    } else if (token.substr(0, 9) == "build-id:") {
      kind = Kind::build_id;
      token.remove_prefix(9);
    } else if (const auto colon = token.find(':'); colon != std::string_view::npos) {
      return fail("unknown kind \"" + std::string(token.substr(0, std::min<std::size_t>(colon, 20))) +
                  "\" (sha256 or build-id)");
    }
    if (token.empty()) return fail("no hex digits");
    for (const char c : token)
      if (!is_hex(c)) return fail("not a hex digit: '" + std::string(1, c) + "'");
    if (!kind) kind = token.size() == 64 ? Kind::sha256 : Kind::build_id;
    if (*kind == Kind::sha256 && token.size() != 64)
      return fail("a SHA-256 has 64 hex digits, not " + std::to_string(token.size()));
    if (*kind == Kind::build_id && (token.size() % 2 != 0 || token.size() < 8 || token.size() > 128))
      return fail("a build-id has an even number of hex digits from 8 to 128, not " + std::to_string(token.size()));
    entry.kind = *kind;
    entry.hex.reserve(token.size());
    for (const char c : token) entry.hex += (c >= 'A' && c <= 'F') ? static_cast<char>(c - 'A' + 'a') : c;
    return entry;
  }

  std::string origin_;
  std::vector<Entry> entries_;
};

}  // namespace xdev::plugin
