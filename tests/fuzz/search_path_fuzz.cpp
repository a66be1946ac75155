// XDEV_PLUGIN_PATH as SearchPath::parse reads it: never an error, every malformed entry a warning,
// only absolute directories kept.
#include <xdev/plugin/search_path.hpp>

#include "fuzz_support.hpp"

#include <filesystem>
#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = xdev_fuzz::text_of(data, size);
  // The first line, if any, is the installed directory (empty: none).
  const auto newline = text.find('\n');
  std::optional<std::filesystem::path> installed;
  if (newline != std::string_view::npos && newline > 0) installed = std::filesystem::path(text.substr(0, newline));
  const auto list = newline == std::string_view::npos ? text : text.substr(newline + 1);
  const auto path = xdev::plugin::SearchPath::parse(list, installed);
  for (const auto& dir : path.directories()) {
    XDEV_FUZZ_CHECK(dir.path.is_absolute());
    XDEV_FUZZ_CHECK(!dir.path.empty());
  }
  for (const auto& warning : path.warnings()) XDEV_FUZZ_CHECK(!warning.empty());
  (void)path.to_string();
  return 0;
}
