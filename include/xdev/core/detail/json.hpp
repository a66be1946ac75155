/// \file
/// JSON text of a string, for what xdev writes as JSON (traces, metrics reports, xdev-info).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace xdev::detail {

/// Appends `s` to `out` as a JSON string literal, quotes included.
inline void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

/// `s` as a JSON string literal, quotes included.
inline std::string json_string(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

}  // namespace xdev::detail
