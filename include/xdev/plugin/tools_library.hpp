/// \file
/// Tools libraries: profilers that plug into xdev's hooks (<xdev/core/tools.hpp>) from a shared
/// library, without recompiling the program, as Kokkos Tools do with `KOKKOS_TOOLS_LIBS`.
/// `XDEV_TOOLS_LIBS=/opt/prof/libmyprof.so` loads one when the first `Runtime` or `Registry` is
/// made; `xdev::tools::load_library(path)` loads one from code. The library speaks the C ABI of
/// <xdev/core/tools_abi.h> and is loaded through the plugin loader's checks (ownership and mode,
/// the allowlist, the checked descriptor handed to the dynamic loader: docs/security.md).
#pragma once

#include <xdev/core/tools_abi.h>
#include <xdev/core/detail/environment_hooks.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/log.hpp>
#include <xdev/core/tools.hpp>
#include <xdev/plugin/loader.hpp>

#include <boost/dll/shared_library.hpp>

#include <dlfcn.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace xdev::tools {

namespace detail {

// A loaded tools library as a listener: each callback goes to its C table. Destroyed once no
// callback can be running (the hub's snapshots hold it), it calls `finalize`, then unloads.
class LibraryListener final : public Listener {
 public:
  LibraryListener(boost::dll::shared_library library, const xdev_tools_library* table)
      : library_(std::move(library)), table_(table) {}
  LibraryListener(const LibraryListener&) = delete;
  LibraryListener& operator=(const LibraryListener&) = delete;
  ~LibraryListener() override {
    if (table_->finalize != nullptr) table_->finalize(table_->context);
  }

  void begin(const Activity& a) override { call(XDEV_TOOLS_BEGIN, a, {}); }
  void end(const Activity& a, const std::exception_ptr& error) override {
    if (!error) return call(XDEV_TOOLS_END, a, {});
    const std::string what = message_of(error);
    call(XDEV_TOOLS_END, a, what);
  }
  void instant(const Activity& a) override { call(XDEV_TOOLS_INSTANT, a, {}); }

 private:
  void call(xdev_tools_phase phase, const Activity& a, std::string_view error) const noexcept {
    xdev_tools_activity c{};
    c.struct_size = sizeof c;
    c.category = static_cast<std::uint32_t>(a.category);
    c.category_name = name_of(a.category);
    c.id = a.id;
    c.name = a.name.data();
    c.name_length = a.name.size();
    c.device = a.device.data();
    c.device_length = a.device.size();
    c.stream = a.stream;
    c.bytes = a.bytes;
    c.dtype = a.dtype.data();
    c.dtype_length = a.dtype.size();
    c.time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(a.time.time_since_epoch()).count();
    c.in_use = a.in_use;
    c.event = a.event;
    c.error = error.empty() ? nullptr : error.data();
    c.error_length = error.size();
    table_->callback(table_->context, static_cast<std::uint32_t>(phase), &c);
  }

  boost::dll::shared_library library_;  // destroyed after the destructor's body: after `finalize`
  const xdev_tools_library* table_;
};

// Why `table` cannot be used, or "".
inline std::string table_problem(const xdev_tools_library* table) {
  if (table == nullptr) return "its entry returned no table (the library declined to be loaded)";
  constexpr std::size_t minimum = offsetof(xdev_tools_library, context) + sizeof(void*);
  if (table->struct_size < minimum)
    return "its table is " + std::to_string(table->struct_size) + " bytes, smaller than the " +
           std::to_string(minimum) + " of ABI version 1";
  if (table->abi_version != XDEV_TOOLS_ABI_VERSION)
    return "it speaks tools ABI version " + std::to_string(table->abi_version) + ", this xdev speaks " +
           std::to_string(XDEV_TOOLS_ABI_VERSION);
  if (table->name == nullptr || *table->name == '\0') return "its table has no name";
  if (table->callback == nullptr) return "its table has no callback";
  return {};
}

}  // namespace detail

/// Loads the tools library at `path` and installs it as a listener until the returned
/// subscription is reset or destroyed (then its `finalize` runs and the library is unloaded).
/// The file is checked as a backend plugin is (`plugin::LoadOptions`: ownership and mode,
/// `XDEV_ALLOW_INSECURE_PLUGINS`, the allowlist) before any of its code runs.
/// \throws xdev::error naming the file and the reason: `errc::invalid_argument` for a relative
///         path, `errc::not_found`, `errc::permission_denied` (not trusted),
///         `errc::identity_mismatch` (not on the allowlist), `errc::unavailable` (the dynamic
///         loader refused it), `errc::incompatible_abi` (no `xdev_tools_entry_v1`, an entry that
///         throws, or a table that fails its checks: null, too small, another ABI version, no
///         name, no callback).
[[nodiscard]] inline Subscription load_library(const std::filesystem::path& path,
                                               const plugin::LoadOptions& options = {}) {
  const std::string context = "cannot load xdev tools library " + plugin::detail::quoted(path);
  if (!path.is_absolute())
    throw error(errc::invalid_argument,
                context + ": the path is not absolute (a bare name would be searched for by the dynamic loader)");
  const auto policy = plugin::detail::LoadPolicy::of(options);
  std::error_code ec;
  const auto canonical = std::filesystem::canonical(path, ec);
  if (ec) throw error(errc::not_found, context + ": " + ec.message());
  plugin::detail::PluginFile file = plugin::detail::open_plugin_file(canonical, context);
  if (const std::string why = plugin::detail::untrusted_reason(file, canonical); !why.empty()) {
    if (!policy.allow_insecure)
      throw error(errc::permission_denied,
                  context + ": not trusted: " + why +
                      " (a tools library and every directory above it must be owned by root or this process's user "
                      "and writable by nobody else; XDEV_ALLOW_INSECURE_PLUGINS=1 loads it anyway)");
    log::write(log::Level::warning, "tools",
               "loading the untrusted tools library " + plugin::detail::quoted(path) + " (" + why +
                   ") because insecure plugins are allowed");
  }
  const auto identity = plugin::detail::read_identity(file, canonical, /*hash=*/policy.allowlist != nullptr, context);
  policy.check(identity, context);

  boost::dll::shared_library library;
  boost::dll::fs::error_code load_error;
  library.load(plugin::detail::loader_name_of(file, canonical, context),
               boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, load_error);
  if (load_error) {
    const char* text = ::dlerror();
    throw error(errc::unavailable, context + ": the dynamic loader refused it: " +
                                       (text != nullptr ? std::string(text) : load_error.message()));
  }
  if (!library.has(XDEV_TOOLS_ENTRY_NAME))
    throw error(errc::incompatible_abi,
                context + ": it does not export " XDEV_TOOLS_ENTRY_NAME " (not an xdev tools library)");
  auto& entry = library.get<const xdev_tools_library*(std::uint32_t)>(XDEV_TOOLS_ENTRY_NAME);
  const xdev_tools_library* table = nullptr;
  try {
    table = entry(XDEV_TOOLS_ABI_VERSION);
  } catch (...) {  // a C entry cannot throw; one written in C++ still might
    throw error(errc::incompatible_abi, context + ": its entry threw a C++ exception across the C boundary");
  }
  if (const std::string why = detail::table_problem(table); !why.empty())
    throw error(errc::incompatible_abi, context + ": " + why);
  const std::string name = table->name;
  auto subscription = add_listener(std::make_shared<detail::LibraryListener>(std::move(library), table));
  if (log::enabled(log::Level::debug))
    log::write(log::Level::debug, "tools", "tools library " + name + " loaded from " + canonical.string());
  return subscription;
}

/// Loads the libraries `XDEV_TOOLS_LIBS` names (absolute paths separated by ':' or ';'), once per
/// process, and keeps them until the process exits. Every `Runtime` and `Registry` calls it; a
/// program may call it earlier. Nothing when the variable is unset or empty.
/// \throws xdev::error quoting the variable: a malformed list (an empty entry), or what
///         `load_library` throws for one of its files (then none of them stays loaded; every
///         later call tries again and reports it again).
inline void load_libraries_from_environment() {
  static std::once_flag once;
  std::call_once(once, [] {
    const auto value = getenv_string("XDEV_TOOLS_LIBS");
    if (!value || value->empty()) return;
    const std::string quoted_value = "XDEV_TOOLS_LIBS=\"" + *value + "\"";
    std::vector<std::string> files;
    for (std::size_t begin = 0;;) {
      const std::size_t end = value->find_first_of(":;", begin);
      files.push_back(value->substr(begin, end == std::string::npos ? std::string::npos : end - begin));
      if (files.back().empty())
        throw error(errc::invalid_argument,
                    quoted_value + ": entry " + std::to_string(files.size()) +
                        " is empty (give absolute paths of tools libraries, separated by ':' or ';')");
      if (end == std::string::npos) break;
      begin = end + 1;
    }
    std::vector<Subscription> loaded;
    for (const auto& file : files) {
      try {
        loaded.push_back(load_library(file));
      } catch (const error& e) {
        throw error(e.condition(), quoted_value + ": " + e.message());
      }
    }
    // Until exit: then each is removed, finalized and unloaded.
    static std::vector<Subscription> kept;
    kept = std::move(loaded);
  });
}

namespace detail {
// Lets every Runtime of the program load XDEV_TOOLS_LIBS (core/detail/environment_hooks.hpp).
inline const bool libraries_starter_registered =
    (libraries_starter.store(&load_libraries_from_environment, std::memory_order_release), true);
}  // namespace detail

}  // namespace xdev::tools
