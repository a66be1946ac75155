/// \file
/// The plugin loader: finds xdev plugins (shared libraries exporting `xdev_plugin_entry_v1`) in
/// the search path, loads and initializes them without ever letting a bad file crash the
/// process, and owns each through `std::shared_ptr<Library>` (docs/plugins.md, "Discovery and
/// loading").
///
/// ```cpp
/// auto found = xdev::plugin::discover();            // XDEV_PLUGIN_PATH, then the installed directory
/// std::cout << found.report();                      // what xdev-info prints
/// auto ref = xdev::plugin::find("REF");             // or load("/abs/path/libxdev_plugin_ref.so")
/// const xdev_plugin_api& api = ref->api();          // validated and initialized
/// ```
///
/// Boost.DLL enters xdev through this header (and its detail/ headers) only.
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/core/detail/hooks.hpp>
#include <xdev/core/error.hpp>
#include <xdev/plugin/detail/loader_identity.hpp>
#include <xdev/plugin/detail/loader_inspect.hpp>
#include <xdev/plugin/detail/loader_state.hpp>
#include <xdev/plugin/detail/loader_trust.hpp>
#include <xdev/plugin/detail/parked_images.hpp>
#include <xdev/plugin/diagnostics.hpp>
#include <xdev/plugin/identity.hpp>
#include <xdev/plugin/library.hpp>
#include <xdev/plugin/plugin_backend.hpp>
#include <xdev/plugin/search_path.hpp>

#include <boost/dll/shared_library.hpp>
#include <boost/dll/shared_library_load_mode.hpp>

#include <dirent.h>
#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace xdev::plugin {

/// The file-name suffix of plugin candidates. Only files whose name ends with it are considered;
/// versioned names (`libfoo.so.1`) are not. ".so" on Linux and other ELF systems (the tested
/// platform), ".dylib" on macOS.
#if defined(__APPLE__)
inline constexpr std::string_view plugin_file_suffix = ".dylib";
#else
inline constexpr std::string_view plugin_file_suffix = ".so";
#endif

/// How the loader treats the files it finds (docs/security.md).
struct LoadOptions {
  /// Load a plugin whose file, or a directory above it, fails the ownership and mode checks
  /// (owned by root or this process's user, writable by nobody else), with a warning, instead of
  /// refusing it with `errc::permission_denied`. Unset: `XDEV_ALLOW_INSECURE_PLUGINS=1` allows it.
  std::optional<bool> allow_insecure_plugins = std::nullopt;

  /// Load only the plugin builds on this list (`Allowlist`): any other file is refused with
  /// `errc::identity_mismatch` before any of its code runs. Unset: the list in the file
  /// `XDEV_PLUGIN_ALLOWLIST` names, if any (read when discovery or a load starts).
  std::optional<Allowlist> allowlist = std::nullopt;

  /// `allow_insecure_plugins`, or the environment's choice when unset.
  /// \throws xdev::error `errc::invalid_argument` for an `XDEV_ALLOW_INSECURE_PLUGINS` other than 0 or 1.
  [[nodiscard]] bool insecure_allowed() const {
    return allow_insecure_plugins ? *allow_insecure_plugins : detail::insecure_plugins_allowed_by_environment();
  }
};

namespace detail {

/// `LoadOptions` resolved against the environment, once per `load` or discovery.
struct LoadPolicy {
  bool allow_insecure = false;
  std::shared_ptr<const Allowlist> allowlist;  ///< null: every identity is admitted

  /// \throws xdev::error for a malformed variable or an allowlist that cannot be read or parsed.
  static LoadPolicy of(const LoadOptions& options) {
    LoadPolicy policy;
    policy.allow_insecure = options.insecure_allowed();
    policy.allowlist = options.allowlist ? std::make_shared<const Allowlist>(*options.allowlist)
                                         : allowlist_from_environment(policy.allow_insecure);
    return policy;
  }

  /// \throws xdev::error `errc::identity_mismatch` (naming `context`) when the allowlist does not
  ///         admit `identity`.
  void check(const Identity& identity, const std::string& context) const {
    if (!allowlist || allowlist->admits(identity)) return;
    throw error(errc::identity_mismatch, context + ": not on the plugin allowlist " + allowlist->origin() +
                                             " (sha256 " + identity.sha256 + ", build-id " +
                                             (identity.build_id.empty() ? "none" : identity.build_id) + ")");
  }
};

/// `"/p/libx.so"` for messages.
inline std::string quoted(const std::filesystem::path& path) {
  // Appended piece by piece: `"\"" + path.string() + "\""` makes g++ 12 -O3 report a false
  // -Wrestrict inside std::string (GCC bug 105329), which fails users' -Werror builds.
  std::string text;
  text.reserve(path.native().size() + 2);
  text += '"';
  text += path.native();
  text += '"';
  return text;
}

/// The start of every load error: `cannot load xdev plugin "/p/libx.so"`.
inline std::string cannot_load(const std::filesystem::path& path) {
  return "cannot load xdev plugin " + quoted(path);
}

/// Decides, from a validated table, that the library must not be initialized (a duplicate name,
/// not the name asked for); returns the reason, or "" to go on.
using Veto = std::function<std::string(const xdev_plugin_api&)>;

/// The result of `acquire`: a library, or the veto's reason.
struct Acquired {
  std::shared_ptr<Library> library;  ///< null when vetoed
  std::string name;                  ///< the table's name
  std::string vetoed;                ///< the veto's reason
};

/// The plugin's `initialize`, once for the image now mapped (the caller holds the slot's lock).
/// \throws xdev::error with the plugin's code and message.
inline void initialize_once(LoadSlot& slot, const xdev_plugin_api& api, const std::filesystem::path& path) {
  if (slot.image_initialized) return;
  slot.log_prefix = std::make_unique<std::string>("plugin " + std::string(api.name));
  xdev_host_info host{};
  host.struct_size = sizeof(xdev_host_info);
  host.abi_major = XDEV_ABI_MAJOR;
  host.abi_minor = XDEV_ABI_MINOR;
  host.xdev_version = host_version();
  host.log_context = slot.log_prefix.get();
  host.log = &plugin_log;
  ErrorSink sink;
  xdev_status status = XDEV_OK;
  try {
    status = api.initialize(&host, &sink.c);
  } catch (...) {  // a hand-written C++ table whose initialize throws (see the entry above)
    throw error(errc::internal, "cannot initialize xdev plugin " + std::string(api.name) + " (" + quoted(path) +
                                    "): its initialize threw a C++ exception across the C boundary");
  }
  if (status != XDEV_OK)
    throw error(errc_of(status), "cannot initialize xdev plugin " + std::string(api.name) + " (" + quoted(path) +
                                     "): " + status_text(status, sink.text()));
  slot.image_initialized = true;
}

// `acquire`'s load of a plugin not loaded yet (under the slot's lock).
inline void load_into(Acquired& result, const std::shared_ptr<LoadSlot>& slot, const std::filesystem::path& path,
                      const std::filesystem::path& canonical, const Veto& veto, std::string& name,
                      const LoadPolicy& policy) {
  const bool keep_mapped = plugin_unloading_disabled();
  PluginFile file = open_plugin_file(canonical, cannot_load(path));
  if (const std::string why = untrusted_reason(file, canonical); !why.empty()) {
    if (!policy.allow_insecure)
      throw error(errc::permission_denied,
                  cannot_load(path) + ": not trusted: " + why +
                      " (a plugin and every directory above it must be owned by root or this process's user and "
                      "writable by nobody else; XDEV_ALLOW_INSECURE_PLUGINS=1 loads it anyway)");
    diagnose(Severity::warning,
             "loading the untrusted plugin " + quoted(path) + " (" + why + ") because insecure plugins are allowed");
  }
  Identity identity = read_identity(file, canonical, /*hash=*/policy.allowlist != nullptr, cannot_load(path));
  policy.check(identity, cannot_load(path));

  boost::dll::shared_library library;
  boost::dll::fs::error_code load_error;
  // rtld_now: an unresolved symbol fails here, with the dynamic loader's text, rather than as a
  // crash at the first call; rtld_local: one plugin's symbols never satisfy another's. The name is
  // the checked descriptor's, so a file swapped in since cannot be what is mapped.
  library.load(loader_name_of(file, canonical, cannot_load(path)),
               boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, load_error);
  if (load_error) {
    const char* text = ::dlerror();  // Boost.DLL leaves dlopen's message in place on failure
    throw error(errc::unavailable, cannot_load(path) + ": the dynamic loader refused it: " +
                                       (text != nullptr ? std::string(text) : load_error.message()));
  }
  if (keep_mapped) {  // RTLD_NODELETE on the image just mapped: no dlclose unmaps it any more
    if (void* pin = ::dlopen(file.loader_path().c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) ::dlclose(pin);
  }
  if (!library.has(XDEV_PLUGIN_ENTRY_NAME))
    throw error(errc::incompatible_abi,
                cannot_load(path) + ": it does not export " XDEV_PLUGIN_ENTRY_NAME " to the dynamic loader");
  // The alias symbol is a data object holding the entry's address (BOOST_DLL_ALIAS).
  const void* const entry_address = library.get<const void*>(XDEV_PLUGIN_ENTRY_NAME);
  if (entry_address == nullptr)
    throw error(errc::internal, cannot_load(path) + ": its " XDEV_PLUGIN_ENTRY_NAME " symbol holds a null address");
  xdev_plugin_entry_fn entry = nullptr;
  static_assert(sizeof(entry) == sizeof(entry_address));
  std::memcpy(&entry, &entry_address, sizeof(entry));
  // A C entry cannot throw; a C++ plugin written without XDEV_DEFINE_PLUGIN still might. Catch it
  // here, while the library is loaded (the exception object lives in it), and keep only its text.
  const xdev_plugin_api* api = nullptr;
  try {
    api = entry();
  } catch (const std::exception& e) {
    throw error(
        errc::incompatible_abi,
        cannot_load(path) + ": its entry threw a C++ exception across the C boundary (" + std::string(e.what()) + ")");
  } catch (...) {
    throw error(errc::incompatible_abi,
                cannot_load(path) + ": its entry threw a C++ exception across the C boundary (not a std::exception)");
  }
  plugin::check_table(api, cannot_load(path));  // versions, size, name, required entries; also a null table

  name = result.name = api->name;
  result.vetoed = veto ? veto(*api) : std::string();
  if (!result.vetoed.empty()) return;  // unloaded here, never initialized

  initialize_once(*slot, *api, path);
  result.library = LibraryAccess::make(path, std::move(identity), slot, std::move(file), std::move(library), api);
  slot->library = result.library;
  if (result.library->never_unload()) {
    auto& state = loader_state();
    std::lock_guard forever_lock(state.forever_mutex);
    state.forever.push_back(result.library);
  }
}

/// Loads (or finds already loaded) the plugin file `path` (absolute, inspected as exporting
/// XDEV_PLUGIN_ENTRY_NAME), validates its table, asks `veto`, then initializes it once.
/// Every dlopen and dlclose of the file happens under its slot's lock. `name` receives the table's
/// name as soon as the table passed its checks (so a caller knows whose `initialize` failed).
/// Before the dynamic loader sees the file, it is opened once and that descriptor checked
/// (`untrusted_reason`; refused with `errc::permission_denied` unless the policy allows insecure
/// plugins) and its identity read and held against the policy's allowlist; the dynamic loader
/// then opens the same descriptor, so the file checked is the file loaded.
/// \throws xdev::error naming the path and the reason (see `load`).
inline Acquired acquire(const std::filesystem::path& path, const Veto& veto, std::string& name,
                        const LoadPolicy& policy) {
  std::error_code ec;
  const auto canonical = std::filesystem::canonical(path, ec);
  if (ec) throw error(errc::not_found, cannot_load(path) + ": " + ec.message());
  const auto slot = slot_for(canonical);
  (void)parked_images().unload_all();  // with no slot locked (see `Library`)

  Acquired result;
  std::shared_ptr<Library> alive;  // released after the lock: it may be the last reference
  std::lock_guard lock(slot->mutex);
  alive = slot->library.lock();
  if (alive) {
    policy.check(alive->identity(), cannot_load(path));  // loaded before, perhaps under another policy
    name = result.name = alive->name();
    result.vetoed = veto ? veto(alive->api()) : std::string();
    if (result.vetoed.empty()) result.library = alive;
    return result;
  }
  if (slot->image_initialized && !image_resident(canonical)) slot->image_initialized = false;

  // Profiler hooks: the load, from the first look at the file to its initialization.
  const std::string file_name = tools::active() ? canonical.string() : std::string();
  tools::detail::within_activity(tools::Category::plugin_load, file_name, {}, 0,
                                 [&] { load_into(result, slot, path, canonical, veto, name, policy); });
  return result;
}

/// The candidate files of directory `dir` (name ending with `plugin_file_suffix`, any type),
/// sorted by file name; a problem with the directory itself goes to `problem`.
inline std::vector<std::filesystem::path> list_candidates(const std::filesystem::path& dir, std::string& problem) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  const auto status = std::filesystem::status(dir, ec);
  if (ec || !std::filesystem::exists(status)) {
    problem = "does not exist";
    return files;
  }
  if (!std::filesystem::is_directory(status)) {
    problem = "is not a directory";
    return files;
  }
  // opendir/readdir rather than std::filesystem::directory_iterator: libstdc++ allocates inside
  // its noexcept parts, so an allocation failure there would end the process instead of reaching
  // the caller as std::bad_alloc.
  const std::unique_ptr<DIR, int (*)(DIR*)> handle(::opendir(dir.c_str()), &::closedir);
  if (!handle) {
    problem = "cannot be read (" + std::generic_category().message(errno) + ")";
    return files;
  }
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(handle.get());
    if (entry == nullptr) {
      if (errno != 0) ec = std::error_code(errno, std::generic_category());
      break;
    }
    const std::string_view file_name(entry->d_name);
    if (file_name.size() > plugin_file_suffix.size() &&
        file_name.substr(file_name.size() - plugin_file_suffix.size()) == plugin_file_suffix)
      files.push_back(dir / file_name);
  }
  if (ec) problem = "could not be read completely (" + ec.message() + ")";
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.filename().native() < b.filename().native(); });
  return files;
}

}  // namespace detail

/// Loads the plugin at `path`, or returns the one already loaded from that file (concurrent calls
/// get the same `Library`). The file is inspected first and only dlopen'ed when it exports
/// `xdev_plugin_entry_v1`; its table is checked before any other plugin function runs; then
/// `initialize` runs once per process (per mapped image).
/// \throws xdev::error whose message names the path and the reason:
///   - `errc::invalid_argument`: `path` is relative (bare names are never handed to the dynamic
///     loader) or not a regular file;
///   - `errc::not_found`: no such file;
///   - `errc::permission_denied`: the file or a directory above it is not trusted (owned by
///     another user, or writable by others; see `LoadOptions::allow_insecure_plugins`);
///   - `errc::identity_mismatch`: an allowlist is in force and the file is not on it (never loaded);
///   - what reading the allowlist throws (`LoadOptions::allowlist`, `XDEV_PLUGIN_ALLOWLIST`);
///   - `errc::incompatible_abi`: not an xdev plugin, or a plugin of another ABI major (never
///     loaded);
///   - `errc::unavailable`: the dynamic loader refused it (its dlerror text: an unresolved symbol,
///     a missing dependency, another architecture);
///   - `errc::internal`: the entry symbol holds a null address;
///   - what `check_table` throws for the table (`errc::incompatible_abi`, also for a null table;
///     `errc::invalid_argument` for a malformed name);
///   - the plugin's own code and message when `initialize` fails.
inline std::shared_ptr<Library> load(const std::filesystem::path& path, const LoadOptions& options = {}) {
  if (path.empty() || !path.is_absolute())
    throw error(errc::invalid_argument, "cannot load xdev plugin " + detail::quoted(path) +
                                            ": not an absolute path (plugins are only loaded from absolute paths)");
  const auto file = path.lexically_normal();
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) throw error(errc::not_found, detail::cannot_load(file) + ": no such file");
  if (!std::filesystem::is_regular_file(file, ec))
    throw error(errc::invalid_argument, detail::cannot_load(file) + ": not a regular file");
  const auto inspection = detail::inspect_file(file);
  if (inspection.kind == detail::FileKind::other_major)
    throw error(errc::incompatible_abi, detail::cannot_load(file) + ": built for plugin ABI " +
                                            std::to_string(inspection.other_major) + ", this xdev speaks " +
                                            std::to_string(XDEV_ABI_MAJOR));
  if (inspection.kind == detail::FileKind::not_a_plugin)
    throw error(errc::incompatible_abi, detail::cannot_load(file) + ": not an xdev plugin (" + inspection.reason +
                                            "); a plugin is a shared library exporting " XDEV_PLUGIN_ENTRY_NAME);
  const auto policy = detail::LoadPolicy::of(options);
  std::string name;
  return detail::acquire(file, {}, name, policy).library;
}

// ---- discovery -------------------------------------------------------------------------------

/// What discovery did with one candidate file.
enum class CandidateStatus {
  loaded,        ///< validated and initialized: `Candidate::library` is set
  not_a_plugin,  ///< not a shared library, or one without the entry symbol: never loaded
  other_abi,     ///< exports only the entry of another ABI major: never loaded
  duplicate,     ///< a plugin of the same name came earlier in the search path: not initialized
  failed,        ///< looked like a plugin of this ABI but could not be loaded, validated or initialized
};

/// "loaded", "not a plugin", "other ABI", "duplicate" or "failed".
[[nodiscard]] inline std::string_view to_string(CandidateStatus status) noexcept {
  switch (status) {
    case CandidateStatus::loaded:
      return "loaded";
    case CandidateStatus::not_a_plugin:
      return "not a plugin";
    case CandidateStatus::other_abi:
      return "other ABI";
    case CandidateStatus::duplicate:
      return "duplicate";
    case CandidateStatus::failed:
      return "failed";
  }
  return "unknown";
}

/// One file discovery looked at (its name ends with `plugin_file_suffix`).
struct Candidate {
  std::filesystem::path path;                              ///< absolute
  CandidateStatus status = CandidateStatus::not_a_plugin;  ///< what happened to it
  std::string name;                  ///< the table's name, when it was read (loaded, duplicate, failed in initialize)
  std::string reason;                ///< why it was not loaded (the full error message when failed); "" when loaded
  std::error_code error;             ///< other_abi and failed: the xdev::errc; otherwise empty
  std::shared_ptr<Library> library;  ///< loaded: the plugin
};

/// The outcome of `discover`: every candidate in search order (directories in search-path order,
/// files by name within one), with a status each.
struct Discovery {
  SearchPath search_path;             ///< what was searched
  std::vector<std::string> notes;     ///< ignored search-path entries and unusable directories
  std::vector<Candidate> candidates;  ///< every candidate file, in search order

  /// The loaded plugins, in search order (at most one per name).
  [[nodiscard]] std::vector<std::shared_ptr<Library>> plugins() const {
    std::vector<std::shared_ptr<Library>> out;
    for (const auto& c : candidates)
      if (c.library) out.push_back(c.library);
    return out;
  }

  /// The loaded plugin named `name`, or null.
  [[nodiscard]] std::shared_ptr<Library> find(std::string_view name) const {
    for (const auto& c : candidates)
      if (c.library && c.library->name() == name) return c.library;
    return nullptr;
  }

  /// A human-readable report, one line per directory, note and candidate, and one more with the
  /// identity of each loaded plugin (what xdev-info prints):
  /// ```text
  /// plugin search path:
  ///   /opt/p (XDEV_PLUGIN_PATH)
  /// notes:
  ///   XDEV_PLUGIN_PATH entry 2 "rel" is not an absolute path: ignored (...)
  /// candidates:
  ///   loaded        /opt/p/libxdev_plugin_ref.so: REF 1.0 (ABI 1.3) on "host"
  ///                 build-id 5f2b0a1c..., sha256 9f86d081...
  ///   not a plugin  /opt/p/libfoo.so: exports no xdev_plugin_entry_v1
  /// ```
  [[nodiscard]] std::string report() const {
    std::string out = "plugin search path:";
    if (search_path.empty()) out += " (empty)";
    out += '\n';
    for (const auto& dir : search_path.directories())
      out += "  " + dir.path.string() + " (" + std::string(to_string(dir.origin)) + ")\n";
    if (!notes.empty()) {
      out += "notes:\n";
      for (const auto& note : notes) out += "  " + note + "\n";
    }
    out += "candidates:";
    if (candidates.empty()) out += " (none)";
    out += '\n';
    for (const auto& c : candidates) {
      std::string status(to_string(c.status));
      status.resize(std::max<std::size_t>(status.size() + 1, 14), ' ');
      out += "  " + status + c.path.string() + ": ";
      if (c.library) {
        const auto& lib = *c.library;
        out += lib.name() + (lib.version().empty() ? "" : " " + lib.version()) + " (ABI " +
               std::to_string(XDEV_ABI_MAJOR) + "." + std::to_string(lib.abi_minor()) + ")";
        if (!lib.platform().empty()) out += " on \"" + lib.platform() + "\"";
        out += "\n" + std::string(16, ' ') + identity_line(lib);
      } else {
        // A load error starts with the path this line already shows.
        const std::string prefix = detail::cannot_load(c.path) + ": ";
        out += c.reason.compare(0, prefix.size(), prefix) == 0 ? c.reason.substr(prefix.size()) : c.reason;
      }
      out += '\n';
    }
    return out;
  }

 private:
  /// "build-id <hex>, sha256 <hex>" ("none" without a build-id), or why it cannot be read.
  static std::string identity_line(const Library& lib) {
    try {
      const auto& id = lib.identity();
      return "build-id " + (id.build_id.empty() ? std::string("none") : id.build_id) + ", sha256 " + id.sha256;
    } catch (const error& e) {
      return "identity unknown (" + e.message() + ")";
    }
  }
};

namespace detail {

/// Runs discovery over `path`. With `wanted`, stops at the first plugin of that name and
/// initializes no other plugin (`find`); otherwise loads every plugin, first name wins.
inline Discovery run_discovery(const SearchPath& path, std::optional<std::string_view> wanted,
                               const LoadOptions& options) {
  const auto policy = LoadPolicy::of(options);
  Discovery found;
  found.search_path = path;
  for (const auto& warning : path.warnings()) {
    found.notes.push_back(warning);
    diagnose(Severity::warning, warning);
  }
  std::map<std::string, std::filesystem::path, std::less<>> first_of_name;
  for (const auto& dir : path.directories()) {
    std::string problem;
    const auto files = list_candidates(dir.path, problem);
    if (!problem.empty()) {
      std::string note = "plugin directory " + quoted(dir.path) + " (" + std::string(to_string(dir.origin)) + ") " +
                         problem + ": skipped";
      diagnose(dir.origin == SearchOrigin::installed ? Severity::verbose : Severity::warning, note);
      found.notes.push_back(std::move(note));
    }
    for (const auto& file : files) {
      Candidate c;
      c.path = file;
      const auto inspection = inspect_file(file);
      if (inspection.kind == FileKind::not_a_plugin) {
        c.reason = inspection.reason;
        diagnose(Severity::verbose, "skipped " + quoted(file) + ": not an xdev plugin (" + c.reason + ")");
      } else if (inspection.kind == FileKind::other_major) {
        c.status = CandidateStatus::other_abi;
        c.error = errc::incompatible_abi;
        c.reason = "built for plugin ABI " + std::to_string(inspection.other_major) + ", this xdev speaks " +
                   std::to_string(XDEV_ABI_MAJOR);
        diagnose(Severity::warning, "skipped " + quoted(file) + ": " + c.reason);
      } else if (const auto& note = inspection.name_note;
                 !note.empty() && (wanted ? note != *wanted : first_of_name.contains(note))) {
        // Its ELF note names it: no need to run any of its code to know it is not wanted.
        c.status = CandidateStatus::duplicate;
        c.name = note;
        c.reason = wanted ? "not the plugin asked for (not opened: its name note says " + note + ")"
                          : "plugin name " + note + " is already taken by " + quoted(first_of_name.find(note)->second) +
                                " (the first in the search path wins; not opened: its name note says " + note + ")";
        if (!wanted) diagnose(Severity::warning, "skipped " + quoted(file) + ": " + c.reason);
      } else {
        const Veto veto = [&](const xdev_plugin_api& api) -> std::string {
          if (wanted) return api.name == *wanted ? std::string() : std::string("not the plugin asked for");
          const auto it = first_of_name.find(std::string_view(api.name));
          if (it == first_of_name.end()) return {};
          return "plugin name " + std::string(api.name) + " is already taken by " + quoted(it->second) +
                 " (the first in the search path wins)";
        };
        try {
          auto acquired = acquire(file, veto, c.name, policy);
          c.name = acquired.name;
          if (acquired.library) {
            c.status = CandidateStatus::loaded;
            c.library = std::move(acquired.library);
            first_of_name.emplace(c.name, file);
            diagnose(Severity::verbose, "loaded plugin " + c.name + " from " + quoted(file));
          } else {
            c.status = CandidateStatus::duplicate;
            c.reason = std::move(acquired.vetoed);
            if (!wanted) diagnose(Severity::warning, "skipped " + quoted(file) + ": " + c.reason);
          }
        } catch (const error& e) {
          // Memory running out says nothing about the file: the discovery fails as a whole (like
          // std::bad_alloc, which passes through), so that a caller can try again.
          if (e.condition() == errc::out_of_memory) throw;
          c.status = CandidateStatus::failed;
          c.error = e.code();
          c.reason = e.message();
          diagnose(Severity::warning, c.reason);
        }
      }
      found.candidates.push_back(std::move(c));
      if (wanted && found.candidates.back().library) return found;
    }
  }
  return found;
}

}  // namespace detail

/// Discovers the plugins of `path` (by default the process's `search_path()`): lists every
/// directory's files ending with `plugin_file_suffix`, in file-name order, inspects each without
/// loading it, and loads and initializes those exporting `xdev_plugin_entry_v1`. A plugin whose
/// name was already loaded from earlier in the search path is skipped without being initialized
/// (the first that loads wins; a failed plugin does not take its name).
/// Never throws for a bad file or directory: each skipped or failed candidate gets one diagnostic
/// (files that are not plugins only a verbose one) and a status in the result.
[[nodiscard]] inline Discovery discover(const SearchPath& path = search_path(), const LoadOptions& options = {}) {
  return detail::run_discovery(path, std::nullopt, options);
}

/// The plugin named `name` (its table's `name`, e.g. "REF"): the first one in `path`, loaded and
/// initialized. Candidates before it are opened to read their names but not initialized.
/// \throws xdev::error: the plugin's own error when its `initialize` fails; otherwise
///         `errc::not_found`, naming the search path, the plugins that were found and every
///         candidate that could not be loaded (a broken plugin's name is unknown until it loads).
inline std::shared_ptr<Library> find(std::string_view name, const SearchPath& path = search_path(),
                                     const LoadOptions& options = {}) {
  Discovery found = detail::run_discovery(path, name, options);
  std::string others;
  std::string failures;
  for (const auto& c : found.candidates) {
    if (c.library) return c.library;
    if (c.status == CandidateStatus::failed) {
      // The plugin asked for failed after its table was read (in `initialize`): that is the error.
      if (c.name == name) throw error(static_cast<errc>(c.error.value()), c.reason);
      failures += "; " + c.reason;
    } else if (c.status == CandidateStatus::duplicate) {
      others += (others.empty() ? "" : ", ") + c.name;
    } else if (c.status == CandidateStatus::other_abi) {
      failures += "; " + detail::quoted(c.path) + " " + c.reason;
    }
  }
  throw error(errc::not_found, "no xdev plugin named \"" + std::string(name) + "\" in the plugin search path \"" +
                                   path.to_string() + "\" (XDEV_PLUGIN_PATH, then the installed plugin directory)" +
                                   (others.empty() ? "; found none" : "; found: " + others) + failures);
}

}  // namespace xdev::plugin
