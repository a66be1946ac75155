/// \file
/// The device-agnostic functions (PyTorch's `torch.accelerator` set): whichever backend is
/// selected — `XDEV_DEVICE`, else the available backend of highest priority — the same calls
/// answer how many devices there are, which one is current, and wait for them.
///
///     if (xdev::accelerator::is_available()) {
///       xdev::AnyDevice dev = xdev::accelerator::current_device();   // "REF:0", "HOST:0", ...
///       xdev::DeviceScope scope(1);                                   // device 1 until scope exit
///       ...
///       xdev::accelerator::synchronize();
///     }
///
/// The current device is per thread (as in PyTorch): each thread starts at device 0 of the
/// selected backend.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/any/selector.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>

#include <atomic>
#include <concepts>
#include <cstddef>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace xdev::accelerator {

namespace detail {
inline thread_local std::optional<AnyDevice> current;

/// What <xdev/spmd/spmd.hpp> installs so that, with SPMD on, the current device is the SPMD
/// virtual device and `device_count()` counts the mesh (this area sits below `spmd`, so it cannot
/// call it directly). Both return nothing / 0 when SPMD is off.
struct SpmdHook {
  std::optional<AnyDevice> (*virtual_device)() = nullptr;
  std::size_t (*mesh_size)() = nullptr;
  std::vector<AnyDevice> (*mesh_devices)() = nullptr;
};
inline std::atomic<const SpmdHook*> spmd_hook{nullptr};

/// True when `XDEV_USE_SPMD` asks for SPMD. \throws xdev::error for a malformed value.
inline bool spmd_requested_by_environment() {
  auto v = getenv_string("XDEV_USE_SPMD");
  if (!v || *v == "0") return false;
  if (*v == "1") return true;
  throw error(errc::invalid_argument, "XDEV_USE_SPMD=\"" + *v + "\" is not accepted: use 1 (SPMD on) or 0 (off)");
}

/// The SPMD virtual device when SPMD is on, else nullopt.
/// \throws xdev::error `errc::unavailable` when `XDEV_USE_SPMD=1` but the program does not include
///         <xdev/spmd/spmd.hpp>, so nothing can make the virtual device.
inline std::optional<AnyDevice> spmd_virtual_device() {
  if (const SpmdHook* h = spmd_hook.load(std::memory_order_acquire)) return h->virtual_device();
  if (spmd_requested_by_environment())
    throw error(errc::unavailable,
                "XDEV_USE_SPMD=1 asks for the SPMD virtual device, but this program does not include "
                "<xdev/spmd/spmd.hpp>, which provides it");
  return std::nullopt;
}
}  // namespace detail

/// The selected backend's name (`Registry::global().default_backend()`).
/// \throws xdev::error as `Registry::default_backend` (a malformed or unknown `XDEV_DEVICE`).
[[nodiscard]] inline std::string current_backend() {
  return Registry::global().default_backend();
}

/// The selected backend's devices that `XDEV_DEVICE` leaves visible, in its order (all of them,
/// in ordinal order, without it): `XDEV_DEVICE=OPENCL:1` gives `{OPENCL:1}`, so ordinal 0 below
/// is OPENCL:1 (as `CUDA_VISIBLE_DEVICES` renumbers).
/// \throws xdev::error as `current_backend`.
[[nodiscard]] inline std::vector<AnyDevice> devices() {
  return Registry::global().default_devices();
}

/// How many devices the selected backend has; with SPMD on, how many physical devices the SPMD
/// virtual device stands for (its mesh's size: see `xdev::spmd::VirtualDevice`).
/// \throws xdev::error as `current_backend`, or for a malformed `XDEV_USE_SPMD`.
[[nodiscard]] inline std::size_t device_count() {
  if (detail::spmd_virtual_device()) return detail::spmd_hook.load(std::memory_order_acquire)->mesh_size();
  return devices().size();
}

/// True when the selected backend has at least one device. Never throws: a malformed or unknown
/// `XDEV_DEVICE`, or a plugin that fails, reads as "not available" (`current_device` says why).
[[nodiscard]] inline bool is_available() noexcept {
  try {
    return device_count() > 0;
  } catch (...) {
    return false;
  }
}

/// This thread's current device: the last one set on it; else, with SPMD on (`XDEV_USE_SPMD=1` or
/// `xdev::spmd::use_spmd`), the SPMD virtual device; else device 0 of the selected backend.
/// \throws xdev::error as `current_backend`, `errc::unavailable` when it has no devices, or as
///         `device_count` for `XDEV_USE_SPMD`.
[[nodiscard]] inline AnyDevice current_device() {
  if (detail::current) return *detail::current;
  if (auto v = detail::spmd_virtual_device()) return *v;
  auto all = devices();
  if (all.empty()) throw error(errc::unavailable, "the selected backend " + current_backend() + " has no devices");
  return all.front();
}

/// Makes device `ordinal` of `devices()` this thread's current device.
/// \throws xdev::error `errc::not_found` naming the device and how many exist.
inline void set_current_device(std::size_t ordinal) {
  auto all = devices();
  if (ordinal >= all.size())
    throw error(errc::not_found, "set_current_device(" + std::to_string(ordinal) + "): " + current_backend() + " has " +
                                     std::to_string(all.size()) + " device(s)");
  detail::current = all[ordinal];
}

/// Makes `device` (of any backend) this thread's current device.
/// \throws xdev::error `errc::invalid_argument` for a handle that names no device.
inline void set_current_device(const AnyDevice& device) {
  if (!device.valid()) throw error(errc::invalid_argument, "set_current_device: the handle names no device");
  detail::current = device;
}

/// Waits for all work on this thread's current device, then raises its oldest unobserved error.
/// When that device is the SPMD virtual device, waits for every device of its mesh too (and raises
/// the first error found, after waiting for all of them).
inline void synchronize() {
  const AnyDevice dev = current_device();
  const auto virtual_device = detail::current ? std::nullopt : detail::spmd_virtual_device();
  if (!virtual_device || *virtual_device != dev) {
    dev.synchronize();
    return;
  }
  std::exception_ptr first;
  auto wait = [&](const AnyDevice& d) {
    try {
      d.synchronize();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  };
  wait(dev);
  for (const auto& d : detail::spmd_hook.load(std::memory_order_acquire)->mesh_devices()) wait(d);
  if (first) std::rethrow_exception(first);
}

}  // namespace xdev::accelerator

namespace xdev {

/// Sets this thread's current device for a scope (`accelerator::current_device()` follows it)
/// and restores the previous one at its end; scopes nest. PyTorch's `torch.accelerator.device_index`
/// context manager, c10's `DeviceGuard`.
///
///     {
///       xdev::DeviceScope s(xdev::selectors::backend("OPENCL"));   // the best OPENCL device
///       run_on(xdev::accelerator::current_device());
///     }                                                          // back to the previous device
class DeviceScope {
 public:
  /// Device `ordinal` of `accelerator::devices()`. \throws xdev::error as `set_current_device`.
  explicit DeviceScope(std::size_t ordinal) : previous_(accelerator::detail::current) {
    accelerator::set_current_device(ordinal);
  }
  /// `device`, of any backend. \throws xdev::error as `set_current_device`.
  explicit DeviceScope(const AnyDevice& device) : previous_(accelerator::detail::current) {
    accelerator::set_current_device(device);
  }
  /// The device `selector` chooses (`select_device`). \throws xdev::error as `select_device`.
  template <class S>
  requires(!std::convertible_to<S, std::size_t> && !std::convertible_to<S, AnyDevice> &&
           DeviceSelector<S>) explicit DeviceScope(const S& selector);
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope() { accelerator::detail::current = std::move(previous_); }

 private:
  std::optional<AnyDevice> previous_;
};

namespace accelerator {
/// The scoped current device under its `torch.accelerator` name.
using DeviceGuard = xdev::DeviceScope;
}  // namespace accelerator

/// The device `selector` scores highest among every device this process sees
/// (`Registry::visible_devices()`: `XDEV_DEVICE` limits them). Ties go to the higher-priority
/// backend, then to the lower ordinal.
/// \throws xdev::error `errc::not_found` listing every device with the reason it was rejected,
///         the backends that are unavailable and why, and what `XDEV_DEVICE` hid; as
///         `Registry::visible_devices` for a malformed `XDEV_DEVICE`.
template <DeviceSelector S>
[[nodiscard]] AnyDevice select_device(const S& selector) {
  auto& r = Registry::global();
  const std::vector<AnyDevice> candidates = r.visible_devices();
  std::string context;
  for (const auto& b : r.backends())
    if (!b.available) context += (context.empty() ? "" : ", ") + b.name + " (" + b.why_unavailable + ")";
  if (!context.empty()) context = "unavailable backends: " + context;
  if (auto v = getenv_string("XDEV_DEVICE"); v && !v->empty())
    context += (context.empty() ? "" : "; ") + ("XDEV_DEVICE=" + DeviceFilter::printable(*v)) +
               " left only these devices as candidates";
  return select_device(selector, std::span<const AnyDevice>(candidates), context);
}

/// Today's default rule as a selector: device 0 of `accelerator::devices()` scores 2, the rest of
/// the selected backend's visible devices 1, every other device 0.
/// \throws xdev::error as `accelerator::current_backend`.
[[nodiscard]] inline selectors::Selector default_selector() {
  std::vector<AnyDevice> chosen = accelerator::devices();
  return selectors::Selector([chosen = std::move(chosen)](const AnyDevice& d) {
    for (std::size_t i = 0; i < chosen.size(); ++i)
      if (chosen[i] == d) return Score(i == 0 ? 2 : 1);
    return Score(0);
  });
}

template <class S>
requires(!std::convertible_to<S, std::size_t> && !std::convertible_to<S, AnyDevice> &&
         DeviceSelector<S>) DeviceScope::DeviceScope(const S& selector)
    : previous_(accelerator::detail::current) {
  accelerator::set_current_device(select_device(selector));
}

}  // namespace xdev
