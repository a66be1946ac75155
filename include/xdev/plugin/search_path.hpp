/// \file
/// `xdev::plugin::SearchPath`: the directories the plugin loader searches, from `XDEV_PLUGIN_PATH`
/// and the installed plugin directory. Plain data: no Boost.DLL, no file-system access.
#pragma once

#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev::plugin {

/// Where a directory of the search path came from (reports say it; a missing installed
/// directory is only worth a verbose diagnostic, a missing `XDEV_PLUGIN_PATH` entry a warning).
enum class SearchOrigin {
  environment,  ///< an entry of `XDEV_PLUGIN_PATH`
  installed,    ///< the installed package's plugin directory (`XDEV_INSTALLED_PLUGIN_DIR`)
  program,      ///< given by the program (`SearchPath{{dir, ...}}`)
};

/// `"XDEV_PLUGIN_PATH"`, `"installed"` or `"program"`.
[[nodiscard]] inline std::string_view to_string(SearchOrigin origin) noexcept {
  switch (origin) {
    case SearchOrigin::environment:
      return "XDEV_PLUGIN_PATH";
    case SearchOrigin::installed:
      return "installed";
    case SearchOrigin::program:
      return "program";
  }
  return "unknown";
}

/// One directory of the search path: always absolute and lexically normal.
struct SearchDirectory {
  std::filesystem::path path;  ///< absolute, lexically normal
  SearchOrigin origin;         ///< where it came from
};

/// An ordered list of absolute plugin directories; earlier directories win for duplicate plugin
/// names. The current directory is never part of it: empty and relative entries of
/// `XDEV_PLUGIN_PATH` are dropped and recorded in `warnings()`, and a directory listed twice is
/// searched once, at its first place.
///
/// ```cpp
/// auto path = xdev::plugin::search_path();                        // from the environment
/// xdev::plugin::SearchPath mine{{"/opt/acme/xdev-plugins"}};      // given by the program
/// ```
class SearchPath {
 public:
  /// The empty search path: discovery finds nothing.
  SearchPath() = default;

  /// The directories `directories`, searched in this order.
  /// \throws xdev::error `errc::invalid_argument` for an empty or relative directory (naming it):
  ///         the loader only ever searches absolute directories.
  explicit SearchPath(const std::vector<std::filesystem::path>& directories) {
    for (std::size_t i = 0; i < directories.size(); ++i) {
      const auto& dir = directories[i];
      if (dir.empty() || !dir.is_absolute())
        throw error(errc::invalid_argument, "plugin search directory " + std::to_string(i + 1) + " \"" + dir.string() +
                                                "\" is not an absolute path; only absolute directories are accepted");
      add(dir, SearchOrigin::program);
    }
  }

  /// Parses `list` as `XDEV_PLUGIN_PATH` does (colon-separated), then appends `installed` when
  /// given. Never throws for a malformed entry: empty and relative entries are ignored and each
  /// gets one line in `warnings()`. An empty `list` means no entries (and no warning).
  [[nodiscard]] static SearchPath parse(std::string_view list,
                                        const std::optional<std::filesystem::path>& installed = std::nullopt) {
    SearchPath result;
    if (!list.empty()) {
      std::size_t index = 0;
      std::size_t begin = 0;
      while (true) {
        const std::size_t end = list.find(':', begin);
        const std::string_view entry = list.substr(begin, end == std::string_view::npos ? end : end - begin);
        ++index;
        if (entry.empty()) {
          result.warnings_.push_back("XDEV_PLUGIN_PATH entry " + std::to_string(index) +
                                     " is empty: ignored (the current directory is never searched for plugins)");
        } else if (!std::filesystem::path(entry).is_absolute()) {
          result.warnings_.push_back("XDEV_PLUGIN_PATH entry " + std::to_string(index) + " \"" + std::string(entry) +
                                     "\" is not an absolute path: ignored (only absolute directories are searched)");
        } else {
          result.add(std::filesystem::path(entry), SearchOrigin::environment);
        }
        if (end == std::string_view::npos) break;
        begin = end + 1;
      }
    }
    if (installed && !installed->empty()) {
      if (installed->is_absolute())
        result.add(*installed, SearchOrigin::installed);
      else
        result.warnings_.push_back("installed plugin directory \"" + installed->string() +
                                   "\" is not an absolute path: ignored");
    }
    return result;
  }

  /// The directories, in search order.
  [[nodiscard]] const std::vector<SearchDirectory>& directories() const noexcept { return directories_; }

  /// One line per ignored entry, e.g. `XDEV_PLUGIN_PATH entry 2 "plugins" is not an absolute path:
  /// ignored (only absolute directories are searched)`. Discovery reports each as a diagnostic.
  [[nodiscard]] const std::vector<std::string>& warnings() const noexcept { return warnings_; }

  /// True when there is no directory to search.
  [[nodiscard]] bool empty() const noexcept { return directories_.empty(); }

  /// The directories joined with ':' (for messages).
  [[nodiscard]] std::string to_string() const {
    std::string out;
    for (const auto& dir : directories_) {
      if (!out.empty()) out += ':';
      out += dir.path.string();
    }
    return out;
  }

 private:
  void add(const std::filesystem::path& dir, SearchOrigin origin) {
    std::filesystem::path normal = dir.lexically_normal();
    // "/a/b/" and "/a/b" name the same directory: compare without the trailing separator.
    if (!normal.has_filename() && normal.has_relative_path()) normal = normal.parent_path();
    for (const auto& known : directories_)
      if (known.path == normal) return;
    directories_.push_back({std::move(normal), origin});
  }

  std::vector<SearchDirectory> directories_;
  std::vector<std::string> warnings_;
};

/// The installed package's plugin directory (`XDEV_INSTALLED_PLUGIN_DIR`, set by the installed
/// CMake package), or `std::nullopt` when xdev is used from its build tree.
[[nodiscard]] inline std::optional<std::filesystem::path> installed_plugin_directory() {
#ifdef XDEV_INSTALLED_PLUGIN_DIR
  return std::filesystem::path(XDEV_INSTALLED_PLUGIN_DIR);
#else
  return std::nullopt;
#endif
}

/// The search path of this process: the entries of `XDEV_PLUGIN_PATH` (colon-separated, absolute
/// directories only), then `installed_plugin_directory()`. Unset or empty `XDEV_PLUGIN_PATH`
/// contributes nothing. Ignored entries are listed in `warnings()`; this function never throws
/// for a malformed value.
[[nodiscard]] inline SearchPath search_path() {
  return SearchPath::parse(getenv_string("XDEV_PLUGIN_PATH").value_or(std::string()), installed_plugin_directory());
}

}  // namespace xdev::plugin
