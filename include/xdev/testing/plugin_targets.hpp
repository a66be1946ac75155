/// \file
/// Device test targets for the plugins this process discovers: `DiscoveredPluginTarget<N>` is the
/// N-th plugin of `xdev::Registry::global()` (search order), its devices erased to `AnyDevice`.
/// Instantiating a device-generic suite over a few of them runs it on every plugin installed or
/// listed in `XDEV_PLUGIN_PATH`, whatever their names:
///
///     using Plugins = xdev::testing::Targets<xdev::testing::DiscoveredPluginTarget<0>,
///                                            xdev::testing::DiscoveredPluginTarget<1>>;
///     XDEV_INSTANTIATE_OP_SUITE(plugins, Plugins);   // tests plugins/Ops/PLUGIN0.*, PLUGIN1.*
///
/// A target beyond the plugins found is unavailable (its tests skip, saying so); a plugin whose
/// client cannot be created is unavailable with its error. List `PLUGIN0` in `XDEV_TEST_DEVICES` to
/// make its absence a failure.
///
/// `PluginTarget<Name>` is the plugin of a given name instead (`Name::value`, "OPENCL"), listed
/// under that name:
///
///     struct OpenCL { static constexpr const char* value = "OPENCL"; };
///     XDEV_INSTANTIATE_OP_SUITE(plugins, xdev::testing::Targets<xdev::testing::PluginTarget<OpenCL>>);
///
/// Includes Boost.DLL (through the registry).
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/testing/erased_targets.hpp>

#include <cstddef>
#include <exception>
#include <string>
#include <vector>

namespace xdev::testing {

/// The `N`-th discovered plugin (0-based, in search order) as an erased device test target
/// named "PLUGIN<N>".
template <std::size_t N>
struct DiscoveredPluginTarget {
  static std::string name() { return "PLUGIN" + std::to_string(N); }

  static std::vector<AnyDevice> devices(std::string& why_unavailable) {
    auto& registry = Registry::global();
    const auto plugins = registry.discovery().plugins();
    if (N >= plugins.size()) {
      why_unavailable = "plugin #" + std::to_string(N) + " does not exist: " + std::to_string(plugins.size()) +
                        " plugin(s) found in the search path \"" + registry.discovery().search_path.to_string() +
                        "\" (set XDEV_PLUGIN_PATH)";
      return {};
    }
    const std::string plugin_name = plugins[N]->name();
    try {
      auto devs = registry.devices(plugin_name);
      if (devs.empty()) why_unavailable = "plugin " + plugin_name + " has no devices";
      return devs;
    } catch (const std::exception& e) {
      why_unavailable = "plugin " + plugin_name + " (" + plugins[N]->path().string() + "): " + e.what();
      return {};
    }
  }
};

/// The plugin whose backend is named `Name::value` (a `const char*` or string view constant), as an
/// erased device test target of that name. Unavailable, with the registry's reason, when no such
/// plugin is found or its client cannot be created.
template <class Name>
struct PluginTarget {
  static std::string name() { return std::string(Name::value); }

  static std::vector<AnyDevice> devices(std::string& why_unavailable) {
    auto& registry = Registry::global();
    try {
      auto devs = registry.devices(name());
      if (devs.empty()) why_unavailable = "plugin " + name() + " has no devices";
      return devs;
    } catch (const std::exception& e) {
      why_unavailable = "plugin " + name() + " is unavailable (search path \"" +
                        registry.discovery().search_path.to_string() + "\"): " + e.what();
      return {};
    }
  }
};

}  // namespace xdev::testing
