/// \file
/// Internal: plugin images whose last `Library` went away on a thread that must not unload them
/// (`unloads_parked_here`), waiting, still mapped, for a thread that may.
///
/// Why: glibc's `exit` runs each exit handler with its list unlocked, and a `dlclose` on another
/// thread meanwhile finds that handler no longer listed, so it unmaps the library while the exiting
/// thread runs the library's own static destructor (seen as a crash at exit, in the plugin's
/// block pool's drain, when the reaper released a REF runtime just as `main` returned).
#pragma once

#include <xdev/plugin/detail/loader_state.hpp>
#include <xdev/plugin/detail/loader_trust.hpp>

#include <boost/dll/shared_library.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>

namespace xdev::plugin::detail {

/// A mapped plugin image, the descriptor it was loaded through and the slot its loads and unloads
/// are serialized on. Allocated with its `Library`, so that parking it allocates nothing.
struct ParkedImage {
  std::shared_ptr<LoadSlot> slot;
  boost::dll::shared_library library;
  PluginFile file;  // open while the image is mapped: its number names the image (see PluginFile)
  ParkedImage* next = nullptr;

  /// `dlclose`, then the descriptor (kept open when the image stays mapped). Call it under the
  /// slot's lock.
  void unload() noexcept {
    library.unload();
    file = PluginFile();
  }
};

/// The parked images of the process. Never destroyed: what is still parked at exit stays mapped
/// (the process is ending; its exit handlers run with the plugin's code in place).
class ParkedImages {
 public:
  /// Takes `image` (owned from now on). Never throws, never allocates, never unloads.
  void park(ParkedImage* image) noexcept {
    std::lock_guard lock(mutex_);
    image->next = head_;
    head_ = image;
  }

  /// Unloads every parked image, each under its slot's lock, and returns how many. Call it with
  /// no slot's lock held.
  std::size_t unload_all() noexcept {
    ParkedImage* list = nullptr;
    {
      std::lock_guard lock(mutex_);
      list = std::exchange(head_, nullptr);
    }
    std::size_t n = 0;
    while (list != nullptr) {
      std::unique_ptr<ParkedImage> image(std::exchange(list, list->next));
      std::lock_guard lock(image->slot->mutex);
      image->unload();
      ++n;
    }
    return n;
  }

 private:
  std::mutex mutex_;
  ParkedImage* head_ = nullptr;
};

inline ParkedImages& parked_images() {
  static ParkedImages* const images = new ParkedImages;  // never deleted: see the class
  return *images;
}

}  // namespace xdev::plugin::detail
