/// \file
/// Internal: the loader's process-wide state: one slot per plugin file, the never-unloaded list.
#pragma once

#include <dlfcn.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace xdev::plugin {

class Library;

}  // namespace xdev::plugin

namespace xdev::plugin::detail {

/// Per plugin file (keyed by canonical path): serializes loading, initialization and unloading of
/// that file, so concurrent loads share one `Library` and `initialize` runs once per mapped image.
struct LoadSlot {
  /// Recursive: a `Library` destroyed while its slot is locked by the same thread (an allocation
  /// failure right after construction) locks it again in its destructor.
  std::recursive_mutex mutex;
  std::weak_ptr<Library> library;  ///< the live `Library` of this file, if any
  /// True once `initialize` succeeded on the image currently mapped. Reset when a probe shows the
  /// image was really unloaded (the dynamic loader may keep it: other handles, RTLD_NODELETE...).
  bool image_initialized = false;
  /// What the plugin's `log` callback receives as context; lives as long as the mapped image can.
  std::unique_ptr<std::string> log_prefix;
};

/// Everything process-wide. Never destroyed: a `Library` kept by a static object, or one in the
/// never-unload list, may still be released during static destruction.
struct LoaderState {
  std::mutex slots_mutex;
  std::map<std::filesystem::path, std::shared_ptr<LoadSlot>> slots;
  std::mutex forever_mutex;
  std::vector<std::shared_ptr<Library>> forever;  ///< plugins flagged XDEV_PLUGIN_NEVER_UNLOAD
};

inline LoaderState& loader_state() {
  static LoaderState* const state = new LoaderState;
  return *state;
}

/// The slot of the file whose canonical path is `canonical`, created on first use.
inline std::shared_ptr<LoadSlot> slot_for(const std::filesystem::path& canonical) {
  auto& state = loader_state();
  std::lock_guard lock(state.slots_mutex);
  auto& slot = state.slots[canonical];
  if (!slot) slot = std::make_shared<LoadSlot>();
  return slot;
}

/// True when the dynamic loader still has `file` mapped (a probe that never loads anything).
inline bool image_resident(const std::filesystem::path& file) noexcept {
  void* handle = ::dlopen(file.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) {
    (void)::dlerror();
    return false;
  }
  ::dlclose(handle);
  return true;
}

}  // namespace xdev::plugin::detail
