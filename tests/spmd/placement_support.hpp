// What the placement tests share: the devices of a runtime, recognisable data, and a host backend
// whose host→device copies fail on one chosen device (a transfer failure in the middle of a
// sharded operation).
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/core/error.hpp>
#include <xdev/device/runtime.hpp>

#include <atomic>
#include <cstddef>
#include <exception>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev_test {

/// Every device of `rt`, type-erased, in order.
template <class B>
std::vector<xdev::AnyDevice> devices_of(xdev::Runtime<B>& rt) {
  std::vector<xdev::AnyDevice> out;
  for (auto d : rt.devices()) out.emplace_back(d);
  return out;
}

/// 1, 2, ..., n: every element tells where it came from.
inline std::vector<float> iota_floats(std::size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

/// Four host devices ("FLAKY:i"); copies to `failing_device` fail with `errc::unavailable`.
class FlakyHost : public xdev::backends::Host {
 public:
  static constexpr std::string_view name = "FLAKY";
  static inline std::atomic<std::size_t> failing_device{std::size_t(-1)};
  FlakyHost() : Host(Options{.devices = 4, .threads = 2}) {}
  void copy_to_device(std::size_t device, const void* src, memory_handle dst, std::size_t off, std::size_t bytes,
                      xdev::Completion done) {
    if (device == failing_device.load()) {
      done(std::make_exception_ptr(
          xdev::error(xdev::errc::unavailable, "FLAKY:" + std::to_string(device) + " lost its link")));
      return;
    }
    Host::copy_to_device(device, src, dst, off, bytes, std::move(done));
  }
};

}  // namespace xdev_test
