// xdev-info: what xdev sees on this machine — the plugin search path, every candidate plugin file
// and why it was loaded or skipped, each backend with its devices (and what each device is, when
// the backend describes it), capabilities and memory, and which backend a program would use by
// default.
//
//   xdev-info                    everything; exit status 0 unless XDEV_DEVICE names a backend
//                                that cannot be used
//   xdev-info --backend NAME     also require NAME (repeatable): exit status 1 if it fails
//   xdev-info --quiet            no diagnostics on stderr while discovering
//   xdev-info --json             the same as one JSON document on stdout (for scripts and bug
//                                reports; docs/observability.md lists its fields)
//
// Exit status: 0 all requested backends work; 1 a requested backend (or XDEV_DEVICE) failed;
// 2 bad command line.
#include <xdev/plugin/abi.h>
#include <xdev/any/device_filter.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/core/detail/json.hpp>
#include <xdev/version.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

std::string bytes(std::size_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// ---- --json -------------------------------------------------------------------------------

// A JSON string literal of `s`.
std::string quote(std::string_view s) {
  return xdev::detail::json_string(s);
}

template <class T>
std::string printed(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// A JSON object written member by member.
class Object {
 public:
  Object& add(std::string_view key, const std::string& json_value) {
    text_ += (text_.empty() ? "{" : ",") + quote(key) + ":" + json_value;
    return *this;
  }
  Object& str(std::string_view key, std::string_view v) { return add(key, quote(v)); }
  Object& num(std::string_view key, std::uint64_t v) { return add(key, std::to_string(v)); }
  Object& flag(std::string_view key, bool v) { return add(key, v ? "true" : "false"); }
  [[nodiscard]] std::string json() const { return text_.empty() ? "{}" : text_ + "}"; }

 private:
  std::string text_;
};

std::string array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out + "]";
}

std::string capabilities_json(const xdev::CapabilitySet& c) {
  std::vector<std::string> dtypes;
  for (const xdev::DType t : xdev::all_dtypes)
    if (c.supports(t)) dtypes.push_back(quote(printed(t)));
  return Object()
      .num("dense_gather_factor", c.dense_gather_factor)
      .str("rng_default", printed(c.rng_default))
      .str("autocast_key", printed(c.autocast_key))
      .str("autocast_dtype", printed(c.autocast_dtype))
      .num("max_inflight", c.max_inflight)
      .add("dtypes", array(dtypes))
      .num("memory_per_device", c.memory_per_device)
      .str("collective", printed(c.collective_backend))
      .add("priority", std::to_string(c.priority))
      .json();
}

// Everything the text form shows, as one JSON document; the same exit status.
int print_json(const std::vector<std::string>& requested) {
  int status = 0;
  Object doc;
  doc.str("xdev_version", std::to_string(XDEV_VERSION_MAJOR) + "." + std::to_string(XDEV_VERSION_MINOR) + "." +
                              std::to_string(XDEV_VERSION_PATCH));
  doc.add(
      "plugin_abi",
      Object().num("major", XDEV_ABI_MAJOR).num("minor", XDEV_ABI_MINOR).num("min_minor", XDEV_ABI_MIN_MINOR).json());
  std::vector<std::string> errors;
  try {
    auto& registry = xdev::Registry::global();
    const auto& found = registry.discovery();
    std::vector<std::string> dirs, notes, plugins;
    for (const auto& d : found.search_path.directories())
      dirs.push_back(Object().str("path", d.path.string()).str("origin", xdev::plugin::to_string(d.origin)).json());
    for (const auto& n : found.notes) notes.push_back(quote(n));
    for (const auto& c : found.candidates) {
      Object o;
      o.str("path", c.path.string()).str("status", xdev::plugin::to_string(c.status));
      if (!c.name.empty()) o.str("name", c.name);
      if (!c.reason.empty()) o.str("reason", c.reason);
      if (c.library) {
        const auto& lib = *c.library;
        o.str("version", lib.version()).num("abi_minor", lib.abi_minor()).str("platform", lib.platform());
        try {
          const auto& id = lib.identity();
          o.str("build_id", id.build_id).str("sha256", id.sha256);
        } catch (const std::exception& e) {
          o.str("identity_error", e.what());
        }
      }
      plugins.push_back(o.json());
    }
    doc.add("search_path", array(dirs)).add("notes", array(notes)).add("plugins", array(plugins));

    std::vector<std::string> backends;
    for (const auto& b : registry.backends()) {
      Object o;
      o.str("name", b.name).flag("builtin", b.builtin);
      if (!b.builtin) o.str("library", b.library.string()).str("version", b.version).str("platform", b.platform);
      o.flag("available", b.available);
      if (!b.available) {
        backends.push_back(o.str("why_unavailable", b.why_unavailable).json());
        continue;
      }
      o.add("priority", std::to_string(b.priority)).add("capabilities", capabilities_json(b.capabilities));
      std::vector<std::string> devices;
      for (const auto& d : registry.devices(b.name)) {
        const auto m = d.memory_stats();
        Object memory;
        memory.num("in_use", m.bytes_in_use).num("peak", m.peak_bytes_in_use).num("reserved", m.bytes_reserved);
        memory.add("limit", m.limit ? std::to_string(*m.limit) : "null");
        Object dev;
        dev.str("name", d.name()).num("max_inflight", d.max_inflight()).add("memory", memory.json());
        try {
          dev.str("description", d.description());
        } catch (const std::exception& e) {
          dev.str("description_error", e.what());
        }
        try {
          const xdev::DeviceProperties p = d.properties();
          Object props;
          props.str("type", xdev::name_of(p.type))
              .str("name", p.name)
              .str("vendor", p.vendor)
              .str("architecture", p.architecture);
          props.str("driver_version", p.driver_version).num("compute_units", p.compute_units);
          props.num("max_work_group_size", p.max_work_group_size).num("memory_total", p.memory_total);
          props.add("memory_free", p.memory_free ? std::to_string(*p.memory_free) : "null");
          props.flag("host_accessible", p.host_accessible);
          std::vector<std::string> dtypes;
          for (xdev::DType t : xdev::all_dtypes)
            if (p.supports(t)) dtypes.push_back(quote(xdev::name_of(t)));
          dev.add("properties", props.add("dtypes", array(dtypes)).json());
        } catch (const std::exception& e) {
          dev.str("properties_error", e.what());
        }
        devices.push_back(dev.json());
      }
      backends.push_back(o.add("devices", array(devices)).json());
    }
    doc.add("backends", array(backends));
  } catch (const std::exception& e) {
    errors.push_back(quote(e.what()));
    status = 1;
  }
  try {
    auto& global = xdev::Registry::global();
    const std::string chosen = global.default_backend();
    std::vector<std::string> defaults, visible;
    for (const auto& d : global.default_devices()) defaults.push_back(quote(d.name()));
    for (const auto& d : global.visible_devices()) visible.push_back(quote(d.name()));
    doc.add("default_backend",
            Object()
                .str("name", chosen)
                .str("chosen_by", xdev::getenv_string("XDEV_DEVICE") ? "XDEV_DEVICE" : "highest priority")
                .add("devices", array(defaults))
                .json());
    doc.add("visible_devices", array(visible));
  } catch (const std::exception& e) {
    doc.add("default_backend", "null").add("visible_devices", "null");
    errors.push_back(quote(e.what()));
    status = 1;
  }
  std::vector<std::string> asked;
  for (const auto& name : requested) {
    Object o;
    o.str("name", name);
    try {
      const auto devs = xdev::Registry::global().devices(name);
      o.flag("ok", !devs.empty()).num("devices", devs.size());
      if (devs.empty()) {
        o.str("error", "backend " + name + " has no devices");
        status = 1;
      }
    } catch (const std::exception& e) {
      o.flag("ok", false).str("error", e.what());
      status = 1;
    }
    asked.push_back(o.json());
  }
  doc.add("requested", array(asked))
      .add("errors", array(errors))
      .num("exit_status", static_cast<std::uint64_t>(status));
  std::cout << doc.json() << '\n';
  return status;
}

int usage(const char* argv0, int status) {
  (status == 0 ? std::cout : std::cerr)
      << "usage: " << argv0 << " [--backend NAME]... [--quiet] [--json]\n"
      << "Lists xdev's plugin search path, plugin candidates, backends, devices,\n"
      << "capabilities and memory. Exit status 1 if a requested backend (or the\n"
      << "one XDEV_DEVICE names) cannot be used. --json prints the same as one JSON document.\n";
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> requested;
  bool quiet = false;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--backend" && i + 1 < argc) {
      requested.emplace_back(argv[++i]);
    } else if (a.rfind("--backend=", 0) == 0) {
      requested.emplace_back(a.substr(10));
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--help" || a == "-h") {
      return usage(argv[0], 0);
    } else {
      std::cerr << argv[0] << ": unknown argument \"" << a << "\"\n";
      return usage(argv[0], 2);
    }
  }
  if (quiet) xdev::plugin::set_diagnostic_sink([](const xdev::plugin::Diagnostic&) {});
  if (json) return print_json(requested);

  std::cout << "xdev " << XDEV_VERSION_MAJOR << '.' << XDEV_VERSION_MINOR << '.' << XDEV_VERSION_PATCH
            << ", plugin ABI " << XDEV_ABI_MAJOR << '.' << XDEV_ABI_MINOR << " (accepts " << XDEV_ABI_MAJOR << '.'
            << XDEV_ABI_MIN_MINOR << " and newer minors)\n\n";

  int status = 0;
  try {
    auto& registry = xdev::Registry::global();
    std::cout << registry.discovery().report() << '\n';

    std::cout << "backends (in default-selection order):\n";
    for (const auto& b : registry.backends()) {
      std::cout << "  " << b.name << (b.builtin ? " (built in)" : "") << '\n';
      if (!b.builtin)
        std::cout << "    library:      " << b.library.string() << "\n    version:      " << b.version
                  << "\n    platform:     " << b.platform << '\n';
      if (!b.available) {
        std::cout << "    unavailable:  " << b.why_unavailable << '\n';
        continue;
      }
      std::cout << "    priority:     " << b.priority << "\n    capabilities: " << b.capabilities
                << "\n    devices:      " << b.device_count << '\n';
      for (const auto& d : registry.devices(b.name)) {
        const auto m = d.memory_stats();
        std::cout << "      " << d.name() << ": max_inflight " << d.max_inflight() << ", memory in use "
                  << bytes(m.bytes_in_use) << ", reserved " << bytes(m.bytes_reserved) << ", limit "
                  << (m.limit ? bytes(*m.limit) : std::string("none")) << '\n';
        // What the device is (the backend's device_description, a plugin's describe_device), on
        // its own line; nothing when the backend gives none.
        std::string description;
        try {
          description = d.description();
        } catch (const std::exception& e) {
          description = std::string("(no description: ") + e.what() + ")";
        }
        if (!description.empty()) std::cout << "        " << description << '\n';
        // Its properties (the backend's device_properties, a plugin's ABI 1.8 entry), on one line.
        try {
          const xdev::DeviceProperties p = d.properties();
          auto known = [](const std::string& s) { return s.empty() ? std::string("unknown") : "\"" + s + "\""; };
          auto count = [](std::size_t n) { return n == 0 ? std::string("unknown") : std::to_string(n); };
          std::cout << "        properties: type " << p.type << ", name " << known(p.name) << ", vendor "
                    << known(p.vendor) << ", architecture " << known(p.architecture) << ", driver "
                    << known(p.driver_version) << ", compute units " << count(p.compute_units) << ", max work-group "
                    << count(p.max_work_group_size) << ", memory "
                    << (p.memory_total == 0 ? std::string("unknown") : bytes(p.memory_total)) << " total, "
                    << (p.memory_free ? bytes(*p.memory_free) : std::string("unknown")) << " free, "
                    << (p.host_accessible ? "host-accessible" : "not host-accessible") << '\n';
        } catch (const std::exception& e) {
          std::cout << "        properties: (could not be read: " << e.what() << ")\n";
        }
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "xdev-info: " << e.what() << '\n';
    return 1;
  }

  std::cout << '\n';
  try {
    auto& global = xdev::Registry::global();
    const std::string chosen = global.default_backend();
    const auto filter = xdev::getenv_string("XDEV_DEVICE");
    std::cout << "default backend: " << chosen
              << (filter ? " (XDEV_DEVICE=" + xdev::DeviceFilter::printable(*filter) + ")" : " (highest priority)")
              << '\n';
    std::string defaults, visible;
    for (const auto& d : global.default_devices()) defaults += (defaults.empty() ? "" : ", ") + d.name();
    for (const auto& d : global.visible_devices()) visible += (visible.empty() ? "" : ", ") + d.name();
    std::cout << "default devices: " << defaults << '\n' << "visible devices: " << visible << '\n';
  } catch (const std::exception& e) {
    std::cout << "default backend: none\n";
    std::cerr << "xdev-info: " << e.what() << '\n';
    status = 1;
  }
  for (const auto& name : requested) {
    try {
      const auto devs = xdev::Registry::global().devices(name);
      std::cout << "requested " << name << ": " << devs.size() << " device(s)\n";
      if (devs.empty()) {
        std::cerr << "xdev-info: backend " << name << " has no devices\n";
        status = 1;
      }
    } catch (const std::exception& e) {
      std::cout << "requested " << name << ": FAILED\n";
      std::cerr << "xdev-info: " << e.what() << '\n';
      status = 1;
    }
  }
  return status;
}
