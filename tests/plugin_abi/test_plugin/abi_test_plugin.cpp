// The ABITEST plugin (abi_test_backend.hpp), defined with the options form of the macro.
#include "abi_test_backend.hpp"

#include <xdev/plugin/define.hpp>

namespace {
// Its destructor runs when the library is unloaded.
struct UnloadMarker {
  UnloadMarker() = default;
  UnloadMarker(const UnloadMarker&) = delete;
  UnloadMarker& operator=(const UnloadMarker&) = delete;
  ~UnloadMarker() { abi_test::append_marker("unloaded\n"); }
} unload_marker;
}  // namespace

XDEV_DEFINE_PLUGIN_WITH(abi_test::Backend, .version = "9.9.9", .platform = "the plugin ABI tests", .flags = 0);
