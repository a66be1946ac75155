/// \file
/// Turning SPMD on: the SPMD virtual device as this process's current device (`XDEV_USE_SPMD=1`,
/// or `use_spmd()`), like PyTorch/XLA's `use_spmd()`. Includes the whole SPMD area.
///
///     xdev::spmd::use_spmd();                                   // mesh: every device, axis "data"
///     xdev::AnyDevice dev = xdev::accelerator::current_device();  // "SPMD:0"
///     xdev::accelerator::device_count();                          // the mesh's size, e.g. 4
///     auto vd = xdev::spmd::virtual_device();
///
/// This header reaches the plugin registry (through <xdev/any/accelerator.hpp>), so it costs what
/// that costs to compile; the rest of the SPMD area (<xdev/spmd/placement.hpp>,
/// <xdev/spmd/collectives.hpp>) does not need it.
#pragma once

#include <xdev/any/accelerator.hpp>
#include <xdev/core/error.hpp>
#include <xdev/spmd/collective_options.hpp>
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/exchange.hpp>
#include <xdev/spmd/mesh.hpp>
#include <xdev/spmd/partition_spec.hpp>
#include <xdev/spmd/placement.hpp>
#include <xdev/spmd/sharded_array.hpp>
#include <xdev/spmd/sharding.hpp>
#include <xdev/spmd/virtual_device.hpp>

#include <cstddef>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace xdev::spmd {

namespace detail {

struct GlobalSpmd {
  std::mutex mutex;
  std::optional<bool> explicit_on;      // set by use_spmd / disable_spmd; unset: XDEV_USE_SPMD decides
  std::optional<VirtualDevice> device;  // made on first use

  static GlobalSpmd& get() {
    static GlobalSpmd* g = new GlobalSpmd;  // never destroyed: devices may be used during exit
    return *g;
  }
};

inline Mesh default_mesh() {
  auto devices = accelerator::devices();
  if (devices.empty())
    throw error(errc::unavailable, "SPMD needs at least one device, but the selected backend " +
                                       accelerator::current_backend() + " has none");
  return Mesh(std::move(devices), "data");
}

// The virtual device when SPMD is on; nullopt when off. Caller holds no lock.
inline std::optional<VirtualDevice> current_virtual_device() {
  auto& g = GlobalSpmd::get();
  std::lock_guard lock(g.mutex);
  const bool on = g.explicit_on ? *g.explicit_on : xdev::accelerator::detail::spmd_requested_by_environment();
  if (!on) return std::nullopt;
  if (!g.device) g.device.emplace(default_mesh());
  return g.device;
}

inline const xdev::accelerator::detail::SpmdHook hook{[] {
                                                        auto v = current_virtual_device();
                                                        return v ? std::optional<AnyDevice>(v->device()) : std::nullopt;
                                                      },
                                                      [] {
                                                        auto v = current_virtual_device();
                                                        return v ? v->device_count() : std::size_t{0};
                                                      },
                                                      [] {
                                                        auto v = current_virtual_device();
                                                        return v ? v->physical_devices() : std::vector<AnyDevice>{};
                                                      }};

inline const bool hook_installed = [] {
  xdev::accelerator::detail::spmd_hook.store(&hook, std::memory_order_release);
  return true;
}();

}  // namespace detail

/// Turns SPMD on with a virtual device over `mesh`: from now on, threads that have not set a
/// current device of their own get the virtual device from `accelerator::current_device()`, and
/// `accelerator::device_count()` reports the mesh's size. Replaces an earlier virtual device
/// (arrays already made on it stay valid).
inline void use_spmd(Mesh mesh) {
  VirtualDevice device(std::move(mesh));
  auto& g = detail::GlobalSpmd::get();
  std::lock_guard lock(g.mutex);
  g.device = std::move(device);
  g.explicit_on = true;
}

/// Turns SPMD on over a one-axis mesh named "data" of every device of the selected backend
/// (`accelerator::devices()`), or keeps the virtual device already made.
/// \throws xdev::error as `accelerator::devices()`, or `errc::unavailable` when there are no devices.
inline void use_spmd() {
  auto& g = detail::GlobalSpmd::get();
  {
    std::lock_guard lock(g.mutex);
    if (g.device) {
      g.explicit_on = true;
      return;
    }
  }
  use_spmd(detail::default_mesh());
}

/// Turns SPMD off (whatever `XDEV_USE_SPMD` says) and forgets the virtual device.
inline void disable_spmd() {
  auto& g = detail::GlobalSpmd::get();
  std::lock_guard lock(g.mutex);
  g.explicit_on = false;
  g.device.reset();
}

/// True when SPMD is on: `use_spmd` was called, or `XDEV_USE_SPMD=1` and no `disable_spmd`.
/// \throws xdev::error `errc::invalid_argument` for a malformed `XDEV_USE_SPMD`.
[[nodiscard]] inline bool is_spmd() {
  auto& g = detail::GlobalSpmd::get();
  std::lock_guard lock(g.mutex);
  return g.explicit_on ? *g.explicit_on : xdev::accelerator::detail::spmd_requested_by_environment();
}

/// The process's virtual device.
/// \throws xdev::error `errc::unavailable` when SPMD is off (saying how to turn it on), or as
///         `use_spmd()` when making it.
[[nodiscard]] inline VirtualDevice virtual_device() {
  auto v = detail::current_virtual_device();
  if (!v)
    throw error(errc::unavailable,
                "SPMD is off: set XDEV_USE_SPMD=1 or call xdev::spmd::use_spmd() to get the virtual device");
  return *v;
}

}  // namespace xdev::spmd
