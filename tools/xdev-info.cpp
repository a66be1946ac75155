// xdev-info: what xdev sees on this machine — the plugin search path, every candidate plugin file
// and why it was loaded or skipped, each backend with its devices (and what each device is, when
// the backend describes it), capabilities and memory, and which backend a program would use by
// default.
//
//   xdev-info                    everything; exit status 0 unless XDEV_DEVICE names a backend
//                                that cannot be used
//   xdev-info --backend NAME     also require NAME (repeatable): exit status 1 if it fails
//   xdev-info --quiet            no diagnostics on stderr while discovering
//
// Exit status: 0 all requested backends work; 1 a requested backend (or XDEV_DEVICE) failed;
// 2 bad command line.
#include <xdev/plugin/abi.h>
#include <xdev/any/registry.hpp>
#include <xdev/version.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
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

int usage(const char* argv0, int status) {
  (status == 0 ? std::cout : std::cerr) << "usage: " << argv0 << " [--backend NAME]... [--quiet]\n"
                                        << "Lists xdev's plugin search path, plugin candidates, backends, devices,\n"
                                        << "capabilities and memory. Exit status 1 if a requested backend (or the\n"
                                        << "one XDEV_DEVICE names) cannot be used.\n";
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> requested;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--backend" && i + 1 < argc) {
      requested.emplace_back(argv[++i]);
    } else if (a.rfind("--backend=", 0) == 0) {
      requested.emplace_back(a.substr(10));
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--help" || a == "-h") {
      return usage(argv[0], 0);
    } else {
      std::cerr << argv[0] << ": unknown argument \"" << a << "\"\n";
      return usage(argv[0], 2);
    }
  }
  if (quiet) xdev::plugin::set_diagnostic_sink([](const xdev::plugin::Diagnostic&) {});

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
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "xdev-info: " << e.what() << '\n';
    return 1;
  }

  std::cout << '\n';
  try {
    const std::string chosen = xdev::Registry::global().default_backend();
    std::cout << "default backend: " << chosen
              << (xdev::getenv_string("XDEV_DEVICE") ? " (XDEV_DEVICE)" : " (highest priority)") << '\n';
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
