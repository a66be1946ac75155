/// \file
/// Internal: deciding, without loading it, whether a file is an xdev plugin of this ABI major.
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/plugin/detail/loader_elf.hpp>
#include <xdev/plugin/name_note.hpp>

#include <boost/dll/library_info.hpp>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace xdev::plugin::detail {

/// What a file is, as far as the loader cares.
enum class FileKind {
  plugin,        ///< exports XDEV_PLUGIN_ENTRY_NAME: may be loaded
  other_major,   ///< exports only xdev_plugin_entry_v<N>, N != XDEV_ABI_MAJOR: must not be loaded
  not_a_plugin,  ///< anything else: must not be loaded
};

/// The verdict on one file. `reason` says why it is not a plugin (`not_a_plugin`).
struct Inspection {
  FileKind kind = FileKind::not_a_plugin;
  std::uint64_t other_major = 0;  ///< `other_major`: the N of xdev_plugin_entry_v<N>
  std::string reason;
  std::string name_note;  ///< `plugin`: the name its ELF note gives (name_note.hpp), "" without one
};

/// The N of "xdev_plugin_entry_v<N>", or 0 when `symbol` is not of that form.
inline std::uint64_t entry_symbol_major(std::string_view symbol) noexcept {
  constexpr std::string_view prefix = XDEV_PLUGIN_ENTRY_PREFIX;
  if (symbol.size() <= prefix.size() || symbol.substr(0, prefix.size()) != prefix) return 0;
  const std::string_view digits = symbol.substr(prefix.size());
  std::uint64_t major = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), major);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return 0;
  return major;
}

/// The exported symbols of `file` through `boost::dll::library_info`, or the reason they cannot be
/// read. `library_info` throws for anything it does not understand (and, on hostile input, might
/// do worse: `inspect_file` runs the ELF layout check first); every exception is turned into a
/// reason here.
inline bool read_exported_symbols(const std::filesystem::path& file, std::vector<std::string>& symbols,
                                  std::string& reason) {
  try {
    boost::dll::library_info info(file);
    symbols = info.symbols();
    return true;
  } catch (const std::bad_alloc&) {
    throw;  // memory ran out, which says nothing about the file
  } catch (const std::exception& e) {
    reason = std::string("not a readable shared library (") + e.what() + ")";
  } catch (...) {
    reason = "not a readable shared library";
  }
  return false;
}

/// Inspects `file` without loading it: follows symbolic links, rejects what is not a regular,
/// non-empty shared library, and looks for the entry symbol among its exports.
inline Inspection inspect_file(const std::filesystem::path& file) {
  Inspection result;
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec || !std::filesystem::exists(status)) {
    std::error_code link_ec;
    if (std::filesystem::is_symlink(std::filesystem::symlink_status(file, link_ec)))
      result.reason = "a dangling symbolic link";
    else
      result.reason = ec ? "cannot be read (" + ec.message() + ")" : "does not exist";
    return result;
  }
  if (std::filesystem::is_directory(status)) {
    result.reason = "a directory";
    return result;
  }
  if (!std::filesystem::is_regular_file(status)) {
    result.reason = "not a regular file";
    return result;
  }
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) {
    result.reason = "cannot be read (" + ec.message() + ")";
    return result;
  }
  if (size == 0) {
    result.reason = "an empty file";
    return result;
  }
#if defined(__ELF__)
  {
    std::ifstream in(file, std::ios::binary);
    if (!in.is_open()) {
      result.reason = "cannot be opened for reading";
      return result;
    }
    char magic[4] = {};
    in.read(magic, sizeof(magic));
    if (in.gcount() != sizeof(magic) || std::memcmp(magic,
                                                    "\x7f"
                                                    "ELF",
                                                    sizeof(magic)) != 0) {
      result.reason = "not a shared library (no ELF header)";
      return result;
    }
    std::string problem = elf_layout_problem(in, size);
    if (!problem.empty()) {
      result.reason = std::move(problem);
      return result;
    }
    result.name_note = elf_xdev_note(in, size, name_note_type);
  }
#endif
  std::vector<std::string> symbols;
  if (!read_exported_symbols(file, symbols, result.reason)) return result;
  for (const auto& symbol : symbols) {
    if (symbol == XDEV_PLUGIN_ENTRY_NAME) {
      result.kind = FileKind::plugin;
      return result;
    }
    if (const std::uint64_t major = entry_symbol_major(symbol); major != 0 && major != XDEV_ABI_MAJOR) {
      result.kind = FileKind::other_major;
      if (major > result.other_major) result.other_major = major;
    }
  }
  if (result.kind == FileKind::not_a_plugin) result.reason = "exports no " XDEV_PLUGIN_ENTRY_NAME;
  return result;
}

}  // namespace xdev::plugin::detail
