// Shared by the plugin ABI tests: loading a test plugin by absolute path with Boost.DLL (rtld_now,
// its entry through get_alias), as the loader does, without the loader.
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/plugin/plugin_backend.hpp>

#include <boost/dll/shared_library.hpp>
#include <boost/dll/shared_library_load_mode.hpp>

#include <dlfcn.h>

#include <memory>
#include <string>

namespace plugin_abi_test {

/// The paths of the test plugins (absolute; set by tests/plugin_abi/CMakeLists.txt).
inline constexpr const char* ref_plugin = XDEV_TEST_REF_PLUGIN;
inline constexpr const char* abi_plugin = XDEV_TEST_ABI_PLUGIN;

/// A loaded plugin: the keep-alive of its library and its table.
struct Loaded {
  std::shared_ptr<void> library;
  const xdev_plugin_api* api = nullptr;
};

/// Loads the plugin at `path`, checks its table and, unless `initialize` is false, initializes it.
inline Loaded load(const char* path, bool initialize = true) {
  auto lib = std::make_shared<boost::dll::shared_library>(path, boost::dll::load_mode::rtld_now);
  const xdev_plugin_api* api = lib->get_alias<const xdev_plugin_api*()>(XDEV_PLUGIN_ENTRY_NAME)();
  xdev::plugin::check_table(api, path);
  if (initialize) xdev::plugin::initialize_plugin(*api);
  return {std::move(lib), api};
}

/// True when the shared library at `path` is mapped in this process (checked without loading it).
inline bool is_loaded(const char* path) {
  void* h = ::dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return false;
  ::dlclose(h);
  return true;
}

}  // namespace plugin_abi_test
