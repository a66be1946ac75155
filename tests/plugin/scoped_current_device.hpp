// ScopedCurrentDevice: restores this thread's current device (set_current_device has no public
// undo) at scope exit, for tests of the accelerator functions.
#pragma once

#include <xdev/any/accelerator.hpp>
#include <xdev/any/any_device.hpp>

#include <optional>
#include <utility>

namespace xdev_test {

class ScopedCurrentDevice {
 public:
  ScopedCurrentDevice() : previous_(xdev::accelerator::detail::current) {}
  ~ScopedCurrentDevice() { xdev::accelerator::detail::current = std::move(previous_); }
  ScopedCurrentDevice(const ScopedCurrentDevice&) = delete;
  ScopedCurrentDevice& operator=(const ScopedCurrentDevice&) = delete;

 private:
  std::optional<xdev::AnyDevice> previous_;
};

}  // namespace xdev_test
