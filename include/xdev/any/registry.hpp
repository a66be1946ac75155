/// \file
/// `xdev::Registry`: every backend this process can use — the built-in host backend, backends the
/// program registers, and the plugins found on the plugin search path — with the options their
/// clients are created with, and the selection of the default backend (`XDEV_DEVICE`).
///
/// It mirrors PyTorch/XLA's DevicePlugin registry: per backend a library path, client-create
/// options (including the in-flight bound), the physical device count, and hooks for single- and
/// multi-process configuration. Clients are created lazily, once, on first use of a backend.
///
///     auto& reg = xdev::Registry::global();
///     reg.set_options("REF", {.max_inflight = 4});          // before REF is first used
///     for (const auto& b : reg.backends()) std::cout << b.name << ' ' << b.device_count << '\n';
///     std::vector<xdev::AnyDevice> devs = reg.devices(reg.default_backend());
///
/// This header includes Boost.DLL (through the loader); code that only uses devices it is handed
/// does not need it.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/any/detail/reaper.hpp>
#include <xdev/any/device_filter.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/log.hpp>
#include <xdev/core/trace.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/plugin/loader.hpp>
#include <xdev/plugin/plugin_backend.hpp>
#include <xdev/plugin/search_path.hpp>
#include <xdev/plugin/tools_library.hpp>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace xdev {

/// Options a backend's client is created with (PJRT's client-create options). Unset members take
/// the defaults described on `RuntimeOptions`.
struct BackendOptions {
  /// In-flight bound of every device. Unset: `XDEV_MAX_INFLIGHT`, else the backend's capability.
  std::optional<std::size_t> max_inflight = std::nullopt;
  /// Bytes each device may have in use. Unset: the backend's `MemoryPerDevice` capability, if any.
  std::optional<std::size_t> memory_limit = std::nullopt;

  friend bool operator==(const BackendOptions&, const BackendOptions&) = default;
};

/// Where this process sits in a multi-process job (what `Registry::configure_multiprocess` takes).
/// Single process: rank 0 of 1 everywhere.
struct ProcessPlacement {
  std::uint32_t local_rank = 0;        ///< index among the processes on this host
  std::uint32_t local_world_size = 1;  ///< processes on this host
  std::uint32_t global_rank = 0;       ///< index among all processes of the job
  std::uint32_t global_world_size = 1;

  friend bool operator==(const ProcessPlacement&, const ProcessPlacement&) = default;
};

/// What a backend's client is created from: its options and the process placement.
struct ClientConfig {
  BackendOptions options;
  ProcessPlacement placement;
};

/// One backend the registry knows, as `Registry::backends()` lists it.
struct BackendInfo {
  std::string name;               ///< "HOST", "REF": what `XDEV_DEVICE` names
  bool builtin = false;           ///< registered by the program (HOST is), not loaded from a plugin
  std::filesystem::path library;  ///< the plugin's file; empty for a built-in backend
  std::string version;            ///< the plugin's version; empty for a built-in backend
  std::string platform;           ///< the plugin's platform string
  BackendOptions options;         ///< what its client is (or will be) created with
  bool available = false;         ///< its client was created and has at least one device
  std::string why_unavailable;    ///< when not available: the error, or "no devices"
  std::size_t device_count = 0;   ///< physical devices (0 when unavailable)
  CapabilitySet capabilities;     ///< when available: the capabilities in force
  int priority = 0;               ///< `capabilities.priority` (what default selection compares)
};

/// The backends of this process and the selection of the default one. Thread-safe. See the
/// file comment for an example; `Registry::global()` is the process's registry, created on first
/// use with HOST built in and plugins discovered from `XDEV_PLUGIN_PATH` and the installed plugin
/// directory.
class Registry {
 public:
  /// Creates a backend's devices from its client configuration (a built-in backend's factory).
  /// The devices should own their runtime (`AnyDevice(dev, owner)`), so that they stay valid
  /// after the registry is gone.
  using Factory = std::function<std::vector<AnyDevice>(const ClientConfig&)>;

  /// A registry with HOST built in and the plugins of `path` (discovered on first use), loaded
  /// as `load` says (`plugin::LoadOptions`: by default untrusted plugin files are refused).
  /// \throws xdev::error `errc::invalid_argument` for a malformed `XDEV_LOG_LEVEL`; what
  ///         `XDEV_TOOLS_LIBS` and `XDEV_TRACE` give (a library that cannot be loaded, a trace
  ///         file that cannot be written).
  explicit Registry(plugin::SearchPath path, plugin::LoadOptions load = {})
      : path_(std::move(path)), load_(std::move(load)) {
    (void)log::level();                        // a malformed XDEV_LOG_LEVEL is an error here, not silence later
    tools::load_libraries_from_environment();  // XDEV_TOOLS_LIBS, once per process
    trace::start_from_environment();           // XDEV_TRACE, once per process
    add_locked("HOST", host_factory(), /*replace=*/false);
  }
  /// A registry searching the process's plugin search path (`plugin::search_path()`).
  Registry() : Registry(plugin::search_path()) {}
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  /// The process-wide registry (`accelerator::` functions and `xdev-info` use it). It lives until
  /// the process ends and is never destroyed: at exit, every device it created is synchronized
  /// (work in flight finishes; an unobserved error goes to xdev's log, stderr by default), but no
  /// runtime is torn down and no plugin unloaded, so nothing races with threads that are still
  /// winding down.
  static Registry& global() {
    static Registry* instance = [] {
      auto* r = new Registry;  // never deleted, see above
      std::atexit([] { global().synchronize_at_exit(); });
      return r;
    }();
    return *instance;
  }

  /// Registers a backend built into the program under `name` (upper case letters, digits and
  /// `_`, starting with a letter). A built-in backend shadows a plugin of the same name.
  /// \throws xdev::error `errc::invalid_argument` for a malformed or already registered name.
  void register_backend(std::string name, Factory factory) {
    check_name(name, "Registry::register_backend");
    std::lock_guard lock(mutex_);
    add_locked(std::move(name), std::move(factory), /*replace=*/false);
  }

  /// Sets the options backend `name`'s client will be created with. Takes effect only before the
  /// backend's first use: afterwards it is an error, since the client exists.
  /// \throws xdev::error `errc::invalid_argument` for an invalid option, `errc::unavailable` when
  ///         the client was already created.
  void set_options(std::string_view name, BackendOptions options) {
    if (options.max_inflight && (*options.max_inflight < 1 || *options.max_inflight > (std::size_t{1} << 20)))
      throw error(errc::invalid_argument, "Registry::set_options(" + std::string(name) + "): max_inflight=" +
                                              std::to_string(*options.max_inflight) + " is not in [1, 1048576]");
    std::lock_guard lock(mutex_);
    auto it = options_.find(std::string(name));
    if (const Entry* e = find_locked(name); e && e->created)
      throw error(errc::unavailable, "Registry::set_options(" + std::string(name) + "): the " + std::string(name) +
                                         " client already exists; set its options before its first use");
    if (it == options_.end())
      options_.emplace(std::string(name), options);
    else
      it->second = options;
  }

  /// Single-process configuration (the default): every client created from now on takes all
  /// local devices. \throws xdev::error `errc::unavailable` when a client already exists.
  void configure_single_process() { configure(ProcessPlacement{}, "configure_single_process"); }

  /// Multi-process configuration (PyTorch/XLA's `configure_multiprocess`): every client created
  /// from now on is told this process's placement, so each local process takes its share of the
  /// local devices.
  /// \throws xdev::error `errc::invalid_argument` for an inconsistent placement (a rank not below
  ///         its world size), `errc::unavailable` when a client already exists.
  void configure_multiprocess(const ProcessPlacement& p) {
    if (p.local_world_size == 0 || p.local_rank >= p.local_world_size || p.global_world_size == 0 ||
        p.global_rank >= p.global_world_size || p.local_world_size > p.global_world_size)
      throw error(errc::invalid_argument,
                  "configure_multiprocess: inconsistent placement: local rank " + std::to_string(p.local_rank) +
                      " of " + std::to_string(p.local_world_size) + ", global rank " + std::to_string(p.global_rank) +
                      " of " + std::to_string(p.global_world_size) +
                      " (each rank must be below its world size, and the local world within the global one)");
    configure(p, "configure_multiprocess");
  }

  /// The placement clients are created with.
  [[nodiscard]] ProcessPlacement placement() const {
    std::lock_guard lock(mutex_);
    return placement_;
  }

  /// The plugin discovery this registry made (searching on first call): what `xdev-info` reports.
  [[nodiscard]] const plugin::Discovery& discovery() {
    std::lock_guard lock(mutex_);
    discover_locked();
    return discovery_;
  }

  /// Every backend, creating each client once (a client that fails is listed unavailable with
  /// its error, and reported once as a diagnostic). Ordered as default selection tries them:
  /// highest priority first, ties by name.
  [[nodiscard]] std::vector<BackendInfo> backends() {
    std::lock_guard lock(mutex_);
    discover_locked();
    std::vector<BackendInfo> out;
    for (Entry* e : priority_order_locked()) out.push_back(info_locked(*e));
    return out;
  }

  /// The names of every backend known (built-in and discovered), without creating clients.
  [[nodiscard]] std::vector<std::string> names() {
    std::lock_guard lock(mutex_);
    discover_locked();
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e.name);
    return out;
  }

  /// The devices of backend `name` (matched ignoring case), creating its client on first use.
  /// \throws xdev::error `errc::not_found` naming the backends that exist, or the backend's own
  ///         error when its client cannot be created (a plugin asked for by name must work).
  [[nodiscard]] std::vector<AnyDevice> devices(std::string_view name) {
    std::lock_guard lock(mutex_);
    discover_locked();
    Entry* e = find_locked(name);
    if (e == nullptr)
      throw error(errc::not_found, "no backend named \"" + std::string(name) + "\"; " + available_locked());
    ensure_created_locked(*e, /*asked=*/true);
    return e->devices;
  }

  /// The default backend's name. With `XDEV_DEVICE` set (docs/devices.md has its grammar), the
  /// first backend its terms list that keeps a visible device; else the available backend of
  /// highest priority (HOST, priority -100, is the last resort; a plugin declaring a lower
  /// priority, like the reference plugin, is only used by name).
  /// \throws xdev::error `errc::invalid_argument` for a malformed `XDEV_DEVICE` (quoting the
  ///         variable, its value and what is accepted), `errc::not_found` listing the backends
  ///         when it names none or naming a device that does not exist, `errc::unavailable` when it
  ///         leaves no device visible, or the backend's own error when a client that it names
  ///         cannot be created.
  [[nodiscard]] std::string default_backend() {
    std::lock_guard lock(mutex_);
    return default_entry_locked(visible_locked()).name;
  }

  /// Every device `XDEV_DEVICE` leaves visible, in its order (without it: every device of every
  /// available backend, backends by priority, devices by ordinal). What `select_device` chooses
  /// from. \throws xdev::error as `default_backend`.
  [[nodiscard]] std::vector<AnyDevice> visible_devices() {
    std::lock_guard lock(mutex_);
    std::vector<AnyDevice> out;
    for (const auto& [e, i] : visible_locked().devices) out.push_back(e->devices[i]);
    return out;
  }

  /// The default backend's visible devices, in `XDEV_DEVICE`'s order (`XDEV_DEVICE=OPENCL:1`
  /// gives `{OPENCL:1}`): what `accelerator::devices()` returns. \throws xdev::error as
  /// `default_backend`.
  [[nodiscard]] std::vector<AnyDevice> default_devices() {
    std::lock_guard lock(mutex_);
    const Visible v = visible_locked();
    const Entry& chosen = default_entry_locked(v);
    std::vector<AnyDevice> out;
    for (const auto& [e, i] : v.devices)
      if (e == &chosen) out.push_back(e->devices[i]);
    return out;
  }

 private:
  void synchronize_at_exit() noexcept {
    std::vector<AnyDevice> all;
    {
      std::lock_guard lock(mutex_);
      for (const auto& e : entries_) all.insert(all.end(), e.devices.begin(), e.devices.end());
    }
    for (const auto& d : all) {
      try {
        d.synchronize();
      } catch (const std::exception& ex) {
        log::write(log::Level::error, "registry",
                   "at exit, " + d.name() + " had an unobserved error: " + std::string(ex.what()));
      }
    }
  }

  static constexpr int host_priority = backends::Host::capabilities::set.priority;

  struct Entry {
    std::string name;
    bool builtin = false;
    Factory factory;                          // built-in
    std::shared_ptr<plugin::Library> plugin;  // plugin
    bool created = false;                     // creation was attempted
    std::vector<AnyDevice> devices;           // the client's devices
    std::optional<error> failure;             // why the client could not be created
    BackendOptions options;
  };

  static Factory host_factory() {
    return [](const ClientConfig& c) {
      auto rt = detail::make_reaped<Runtime<backends::Host>>(
          RuntimeOptions{.max_inflight = c.options.max_inflight, .memory_limit = c.options.memory_limit});
      std::vector<AnyDevice> out;
      for (std::size_t i = 0; i < rt->device_count(); ++i) out.emplace_back(rt->device(i), rt);
      return out;
    };
  }

  static void check_name(const std::string& n, const char* where) {
    if (!DeviceFilter::valid_name(n))
      throw error(errc::invalid_argument, std::string(where) + "(\"" + n +
                                              "\"): not a backend name (accepted: a letter, then letters, digits or "
                                              "'_', at most 64 characters, e.g. HOST or OPENCL)");
    if (!std::all_of(n.begin(), n.end(), [](char c) { return !std::islower(static_cast<unsigned char>(c)); }))
      throw error(errc::invalid_argument,
                  std::string(where) + "(\"" + n + "\"): backend names are upper case (e.g. \"HOST\")");
  }

  // What XDEV_DEVICE leaves visible: (backend, ordinal) pairs in order, and which backends a term
  // without '!' named (those may be the default whatever their priority).
  struct Visible {
    std::vector<std::pair<Entry*, std::size_t>> devices;
    std::vector<const Entry*> named;
    std::string source;  // "XDEV_DEVICE=value", or empty when unset
  };

  // Every entry, each client created (a failure listed, not thrown), highest priority first.
  std::vector<Entry*> priority_order_locked() {
    std::vector<std::pair<Entry*, BackendInfo>> all;
    for (auto& e : entries_) {
      ensure_created_locked(e, /*asked=*/false);
      all.emplace_back(&e, info_locked(e));
    }
    std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
      return a.second.priority != b.second.priority ? a.second.priority > b.second.priority
                                                    : a.second.name < b.second.name;
    });
    std::vector<Entry*> out;
    for (const auto& a : all) out.push_back(a.first);
    return out;
  }

  Visible visible_locked() {
    const auto text = getenv_string("XDEV_DEVICE");
    const DeviceFilter filter = DeviceFilter::parse(text ? *text : std::string(), "XDEV_DEVICE");
    discover_locked();
    Visible v;
    if (!filter.empty()) v.source = "XDEV_DEVICE=" + DeviceFilter::printable(*text);
    auto where = [&](const DeviceFilterTerm& t) {
      return filter.terms().size() == 1 ? v.source : v.source + ": term \"" + DeviceFilter::to_string(t) + "\"";
    };
    auto named_entry = [&](const DeviceFilterTerm& t) -> Entry& {
      Entry* e = find_locked(t.backend);
      if (e == nullptr)
        throw error(errc::not_found, where(t) + " names no backend; " + available_locked() + " (search path: \"" +
                                         path_.to_string() +
                                         "\"; see xdev-info for every plugin file and why it was skipped)");
      return *e;
    };
    auto add = [&](Entry& e, const DeviceFilterTerm& t) {
      auto push = [&](std::size_t i) {
        if (std::find(v.devices.begin(), v.devices.end(), std::pair{&e, i}) == v.devices.end())
          v.devices.emplace_back(&e, i);
      };
      if (t.all_devices())
        for (std::size_t i = 0; i < e.devices.size(); ++i) push(i);
      for (std::size_t i : t.ordinals)
        if (i < e.devices.size()) push(i);
    };
    const DeviceFilterTerm everything{.exclude = false, .backend = "*", .ordinals = {}};
    std::vector<const DeviceFilterTerm*> inclusions;
    for (const auto& t : filter.terms())
      if (!t.exclude) inclusions.push_back(&t);
    if (inclusions.empty()) inclusions.push_back(&everything);
    for (const DeviceFilterTerm* t : inclusions) {
      if (t->any_backend()) {
        for (Entry* e : priority_order_locked())
          if (!e->failure) add(*e, *t);
        continue;
      }
      Entry& e = named_entry(*t);
      ensure_created_locked(e, /*asked=*/true);
      if (e.devices.empty()) throw error(errc::unavailable, where(*t) + ": backend " + e.name + " has no devices");
      for (std::size_t i : t->ordinals)
        if (i >= e.devices.size())
          throw error(errc::not_found, where(*t) + ": " + e.name + " has no device " + std::to_string(i) + " (it has " +
                                           std::to_string(e.devices.size()) + ")");
      add(e, *t);
      v.named.push_back(&e);
    }
    for (const auto& t : filter.terms()) {
      if (!t.exclude) continue;
      const Entry* only = t.any_backend() ? nullptr : &named_entry(t);  // a name must exist, even to exclude it
      std::erase_if(v.devices, [&](const std::pair<Entry*, std::size_t>& d) {
        return (only == nullptr || d.first == only) &&
               (t.all_devices() || std::find(t.ordinals.begin(), t.ordinals.end(), d.second) != t.ordinals.end());
      });
    }
    return v;
  }

  // The default backend among what `v` leaves visible: the first backend listed that a term named,
  // is HOST or has at least HOST's priority; else the first one listed.
  const Entry& default_entry_locked(const Visible& v) {
    if (v.devices.empty())
      throw error(errc::unavailable, v.source.empty() ? std::string("no backend has a device (not even HOST)")
                                                      : v.source + " leaves no device visible; " + devices_locked());
    std::vector<const Entry*> passed;  // each backend is considered (and logged) once
    for (const auto& [e, i] : v.devices) {
      if (std::find(passed.begin(), passed.end(), e) != passed.end()) continue;
      passed.push_back(e);
      const int priority = e->devices.front().capability_set().priority;
      const bool named = std::find(v.named.begin(), v.named.end(), e) != v.named.end();
      if (named || e->name == "HOST" || priority >= host_priority) {
        if (log::enabled(log::Level::debug))
          log::write(log::Level::debug, "registry",
                     "default backend: " + e->name + " (" +
                         (named ? "named by " + v.source
                                : "priority " + std::to_string(priority) + ", the highest of the available backends" +
                                      (v.source.empty() ? "; XDEV_DEVICE is unset" : " that " + v.source + " leaves")) +
                         "), " + std::to_string(e->devices.size()) + " device(s)");
        return *e;
      }
      if (log::enabled(log::Level::debug))
        log::write(log::Level::debug, "registry",
                   "not the default backend: " + e->name + " (priority " + std::to_string(priority) +
                       ", below HOST's, and not named by XDEV_DEVICE)");
    }
    return *v.devices.front().first;
  }

  // "devices: GOOD:0, GOOD:1, HOST:0; unavailable: OPENCL (why)" for errors: every backend's
  // devices, by priority (each client created).
  std::string devices_locked() {
    std::string have;
    std::string unavailable;
    for (const Entry* e : priority_order_locked()) {
      if (e->failure) unavailable += (unavailable.empty() ? "" : ", ") + e->name + " (" + e->failure->what() + ")";
      for (const auto& d : e->devices) have += (have.empty() ? "" : ", ") + d.name();
    }
    return "devices: " + (have.empty() ? std::string("none") : have) +
           (unavailable.empty() ? "" : "; unavailable: " + unavailable);
  }

  void add_locked(std::string name, Factory factory, bool replace) {
    for (auto& e : entries_)
      if (e.name == name) {
        if (!replace)
          throw error(errc::invalid_argument, "Registry::register_backend(\"" + name + "\"): already registered");
        e = Entry{};
      }
    Entry e;
    e.name = std::move(name);
    e.builtin = true;
    e.factory = std::move(factory);
    entries_.push_back(std::move(e));
  }

  Entry* find_locked(std::string_view name) {
    for (auto& e : entries_)
      if (DeviceFilter::same_name(e.name, name)) return &e;
    return nullptr;
  }

  void configure(const ProcessPlacement& p, const char* where) {
    std::lock_guard lock(mutex_);
    std::string made;
    for (const auto& e : entries_)
      if (e.created) made += (made.empty() ? "" : ", ") + e.name;
    if (!made.empty())
      throw error(errc::unavailable, std::string(where) + ": the clients of " + made +
                                         " already exist; configure the process before any device is used");
    placement_ = p;
  }

  void discover_locked() {
    if (discovered_) return;
    // All or nothing: a discovery that throws (a malformed variable, memory running out) leaves
    // the registry as it was, and the next use tries again.
    auto found = plugin::discover(path_, load_);
    std::vector<Entry> added;
    for (const auto& lib : found.plugins()) {
      if (find_locked(lib->name()) != nullptr) {
        plugin::detail::diagnose(plugin::Severity::warning,
                                 "plugin " + lib->name() + " (" + lib->path().string() +
                                     ") is shadowed by the built-in backend of the same name: not used");
        continue;
      }
      Entry e;
      e.name = lib->name();
      e.plugin = lib;
      added.push_back(std::move(e));
    }
    entries_.reserve(entries_.size() + added.size());
    for (auto& e : added) entries_.push_back(std::move(e));  // no reallocation: cannot throw
    discovery_ = std::move(found);
    discovered_ = true;
  }

  void ensure_created_locked(Entry& e, bool asked) {
    if (!e.created) {
      e.created = true;
      auto it = options_.find(e.name);
      e.options = it != options_.end() ? it->second : BackendOptions{};
      try {
        if (e.builtin) {
          e.devices = e.factory(ClientConfig{e.options, placement_});
        } else {
          plugin::ClientOptions co;
          co.max_inflight = e.options.max_inflight;
          co.local_rank = placement_.local_rank;
          co.local_world_size = placement_.local_world_size;
          co.global_rank = placement_.global_rank;
          co.global_world_size = placement_.global_world_size;
          auto rt = detail::make_reaped<Runtime<plugin::PluginBackend>>(
              RuntimeOptions{.max_inflight = e.options.max_inflight, .memory_limit = e.options.memory_limit},
              &e.plugin->api(), std::shared_ptr<void>(e.plugin), co);
          for (std::size_t i = 0; i < rt->device_count(); ++i) e.devices.emplace_back(rt->device(i), rt);
        }
      } catch (const std::bad_alloc&) {
        // Memory ran out here, which says nothing about the backend: the next use tries again.
        e.created = false;
        e.devices.clear();
        throw;
      } catch (const error& err) {
        e.failure = err;
      } catch (const std::exception& ex) {
        e.failure = error(errc::internal, e.name + ": " + ex.what());
      }
      if (e.failure && !asked)
        plugin::detail::diagnose(plugin::Severity::warning,
                                 "backend " + e.name + " is unavailable: " + e.failure->what());
    }
    if (asked && e.failure) throw *e.failure;
  }

  BackendInfo info_locked(const Entry& e) const {
    BackendInfo b;
    b.name = e.name;
    b.builtin = e.builtin;
    if (e.plugin) {
      b.library = e.plugin->path();
      b.version = e.plugin->version();
      b.platform = e.plugin->platform();
    }
    b.options = e.options;
    b.device_count = e.devices.size();
    b.available = !e.failure && !e.devices.empty();
    b.why_unavailable = e.failure ? e.failure->what() : (e.devices.empty() ? "no devices" : "");
    if (!e.devices.empty()) b.capabilities = e.devices.front().capability_set();
    b.priority = b.capabilities.priority;
    if (!b.available) b.priority = std::numeric_limits<int>::min();
    return b;
  }

  std::string available_locked() {
    std::string names;
    for (auto& e : entries_) names += (names.empty() ? "" : ", ") + e.name;
    std::string failed;
    for (const auto& c : discovery_.candidates)
      if (c.status == plugin::CandidateStatus::failed || c.status == plugin::CandidateStatus::other_abi)
        failed += "; not loaded: " + c.path.string() + " (" + c.reason + ")";
    return "available: " + names + failed;
  }

  mutable std::mutex mutex_;
  plugin::SearchPath path_;
  plugin::LoadOptions load_;
  bool discovered_ = false;
  plugin::Discovery discovery_;
  std::vector<Entry> entries_;
  std::map<std::string, BackendOptions, std::less<>> options_;
  ProcessPlacement placement_;
};

}  // namespace xdev
