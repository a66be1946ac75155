/// \file
/// `xdev::plugin::Library`: one loaded plugin, as the loader (<xdev/plugin/loader.hpp>) hands it
/// out: its path, name, versions, identity and validated table.
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/plugin/detail/loader_identity.hpp>
#include <xdev/plugin/detail/loader_state.hpp>
#include <xdev/plugin/detail/loader_trust.hpp>
#include <xdev/plugin/detail/parked_images.hpp>
#include <xdev/plugin/detail/unload_thread.hpp>
#include <xdev/plugin/identity.hpp>

#include <boost/dll/shared_library.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace xdev::plugin {

namespace detail {
struct LibraryAccess;
}  // namespace detail

/// A loaded plugin: its library is mapped, its table passed the ABI checks and its `initialize`
/// succeeded (once per mapped image, whoever loaded it). Immutable and thread-safe.
///
/// Always held through `std::shared_ptr<Library>`; every object created through the plugin keeps
/// a copy (`PluginBackend` takes it as its `std::shared_ptr<void>` keep-alive), so the library is
/// unloaded only after the last of them is gone, and never when the table's `flags` contain
/// `XDEV_PLUGIN_NEVER_UNLOAD` (the loader then keeps one reference for the process's lifetime).
/// When the last of them goes on one of xdev's own threads, which never unload a library, the
/// image stays mapped until the next load of any plugin or `unload_released_libraries()`.
class Library {
 public:
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  /// Unloads the library (`dlclose`), or parks it for a later unload on one of xdev's own threads
  /// (see <xdev/plugin/detail/parked_images.hpp>). Never called for a never-unload plugin.
  ~Library() {
    if (detail::unloads_parked_here) {
      detail::parked_images().park(image_.release());
      return;
    }
    std::lock_guard lock(image_->slot->mutex);
    image_->unload();
  }

  /// The file it was loaded from: absolute, as first asked for.
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  /// The device type it provides, as its table names it ("REF"): what `XDEV_DEVICE` selects.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// The plugin's own version, free form ("" when the table has none).
  [[nodiscard]] const std::string& version() const noexcept { return version_; }
  /// What it runs on, free form ("" when the table has none).
  [[nodiscard]] const std::string& platform() const noexcept { return platform_; }
  /// The table's ABI minor (the major is always XDEV_ABI_MAJOR); may be newer than XDEV_ABI_MINOR.
  [[nodiscard]] std::uint32_t abi_minor() const noexcept { return api_->abi_minor; }
  /// True when the table's flags contain XDEV_PLUGIN_NEVER_UNLOAD.
  [[nodiscard]] bool never_unload() const noexcept { return (api_->flags & XDEV_PLUGIN_NEVER_UNLOAD) != 0; }
  /// The validated table. Fields past the XDEV_ABI_MINOR layout must not be read, nor fields past
  /// its `struct_size` (a 1.1 or 1.2 table ends before `describe_device`); calling its entries
  /// follows the rules of <xdev/plugin/abi.h>.
  [[nodiscard]] const xdev_plugin_api& api() const noexcept { return *api_; }

  /// Who it is, read from the very file that was mapped (the descriptor the loader checked):
  /// real path, build-id and SHA-256. The digest is computed on the first call unless an
  /// allowlist already needed it (it reads the whole file once).
  /// \throws xdev::error `errc::unavailable` when the file can no longer be read to hash it.
  [[nodiscard]] const Identity& identity() const {
    std::call_once(hashed_, [this] {
      if (identity_.sha256.empty()) identity_.sha256 = detail::hash_plugin_file(image_->file, "xdev plugin " + name_);
    });
    return identity_;
  }

 private:
  friend struct detail::LibraryAccess;

  Library(std::filesystem::path path, Identity identity, std::unique_ptr<detail::ParkedImage> image,
          const xdev_plugin_api* api)
      : path_(std::move(path)),
        name_(api->name),
        version_(api->version != nullptr ? api->version : ""),
        platform_(api->platform != nullptr ? api->platform : ""),
        identity_(std::move(identity)),
        image_(std::move(image)),
        api_(api) {}

  std::filesystem::path path_;
  std::string name_;
  std::string version_;
  std::string platform_;
  mutable Identity identity_;  // sha256 filled once, under hashed_
  mutable std::once_flag hashed_;
  // The mapped library, the descriptor it was loaded through (see PluginFile) and its slot.
  std::unique_ptr<detail::ParkedImage> image_;
  const xdev_plugin_api* api_;
};

namespace detail {

struct LibraryAccess {
  static std::shared_ptr<Library> make(std::filesystem::path path, Identity identity, std::shared_ptr<LoadSlot> slot,
                                       PluginFile file, boost::dll::shared_library library,
                                       const xdev_plugin_api* api) {
    // The image's node first: if it cannot be made, `library` unloads here, still under the slot's
    // lock the caller holds.
    auto image = std::make_unique<ParkedImage>(ParkedImage{std::move(slot), std::move(library), std::move(file)});
    return std::shared_ptr<Library>(new Library(std::move(path), std::move(identity), std::move(image), api));
  }
};

}  // namespace detail

/// Unloads the plugins whose last reference went away on one of xdev's own threads, and returns
/// how many. Those threads never unload a library: one of them may still be at work while the
/// process exits, and a `dlclose` there could unmap a plugin whose static destructors the exiting
/// thread is running. Such a library stays mapped until the next load of any plugin, which calls
/// this first, or until this call; at exit it is left mapped. Like any unload, do not call it while
/// another thread is ending the process.
inline std::size_t unload_released_libraries() noexcept {
  return detail::parked_images().unload_all();
}

}  // namespace xdev::plugin
