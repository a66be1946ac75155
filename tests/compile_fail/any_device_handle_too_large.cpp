// expect: xdev::AnyDevice: the backend's memory_handle is larger than 16 bytes
// Mistake: erasing a device whose memory handle is too large for AnyDevice's erased handle.
#include "complete_backend.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/device/runtime.hpp>

#include <cstdint>

struct ThreeWords {
  std::uint64_t w[3];
  bool operator==(const ThreeWords&) const = default;
};

using Big = CompleteBackend<xdev::Capabilities<>, ThreeWords>;

xdev::AnyDevice erase(xdev::Runtime<Big>& rt) {
  return rt.device(0);
}
