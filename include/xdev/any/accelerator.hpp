/// \file
/// The device-agnostic functions (PyTorch's `torch.accelerator` set): whichever backend is
/// selected — `XDEV_DEVICE`, else the available backend of highest priority — the same calls
/// answer how many devices there are, which one is current, and wait for them.
///
///     if (xdev::accelerator::is_available()) {
///       xdev::AnyDevice dev = xdev::accelerator::current_device();   // "REF:0", "HOST:0", ...
///       xdev::accelerator::DeviceGuard guard(1);                      // device 1 until scope exit
///       ...
///       xdev::accelerator::synchronize();
///     }
///
/// The current device is per thread (as in PyTorch): each thread starts at device 0 of the
/// selected backend.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/core/error.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xdev::accelerator {

namespace detail {
inline thread_local std::optional<AnyDevice> current;
}  // namespace detail

/// The selected backend's name (`Registry::global().default_backend()`).
/// \throws xdev::error as `Registry::default_backend` (a malformed or unknown `XDEV_DEVICE`).
[[nodiscard]] inline std::string current_backend() {
  return Registry::global().default_backend();
}

/// The selected backend's devices, in ordinal order.
/// \throws xdev::error as `current_backend`.
[[nodiscard]] inline std::vector<AnyDevice> devices() {
  auto& r = Registry::global();
  return r.devices(r.default_backend());
}

/// How many devices the selected backend has.
/// \throws xdev::error as `current_backend`.
[[nodiscard]] inline std::size_t device_count() {
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

/// This thread's current device: the last one set on it, else device 0 of the selected backend.
/// \throws xdev::error as `current_backend`, or `errc::unavailable` when it has no devices.
[[nodiscard]] inline AnyDevice current_device() {
  if (detail::current) return *detail::current;
  auto all = devices();
  if (all.empty()) throw error(errc::unavailable, "the selected backend " + current_backend() + " has no devices");
  return all.front();
}

/// Makes device `ordinal` of the selected backend this thread's current device.
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
inline void synchronize() {
  current_device().synchronize();
}

/// Sets this thread's current device for a scope and restores the previous one at its end.
///
///     {
///       xdev::accelerator::DeviceGuard g(1);
///       run_on(xdev::accelerator::current_device());   // device 1
///     }                                                 // back to the previous device
class DeviceGuard {
 public:
  /// \throws xdev::error as `set_current_device`.
  explicit DeviceGuard(std::size_t ordinal) : previous_(detail::current) { set_current_device(ordinal); }
  /// \throws xdev::error as `set_current_device`.
  explicit DeviceGuard(const AnyDevice& device) : previous_(detail::current) { set_current_device(device); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() { detail::current = std::move(previous_); }

 private:
  std::optional<AnyDevice> previous_;
};

}  // namespace xdev::accelerator
