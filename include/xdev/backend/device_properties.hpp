/// \file
/// `xdev::DeviceProperties`: what a device is, as typed fields (CUDA's `cudaGetDeviceProperties`
/// with `cudaMemGetInfo`, `torch.cuda.get_device_properties`, SYCL's `get_info`). A backend supplies
/// what it knows through the optional hook `device_properties(device)`
/// (`concepts::ReportsDeviceProperties`); a plugin through the ABI 1.8 entry `device_properties`.
/// xdev fills in what it knows itself (host accessibility, dtypes) on the way to
/// `Device<B>::properties()` and `AnyDevice::properties()`.
#pragma once

#include <xdev/core/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace xdev {

/// What kind of processor a device computes on (OpenCL's `CL_DEVICE_TYPE`, SYCL's
/// `info::device::device_type`). `cpu` means the host's own cores: xdev's host backend, an OpenCL
/// CPU runtime such as PoCL.
enum class DeviceType : std::uint8_t {
  unknown,      ///< the backend does not say
  cpu,          ///< the host's processors
  gpu,          ///< a graphics processor
  accelerator,  ///< another attached processor (an FPGA, a TPU, a DSP)
};

/// "unknown", "cpu", "gpu" or "accelerator".
constexpr std::string_view name_of(DeviceType t) noexcept {
  switch (t) {
    case DeviceType::cpu:
      return "cpu";
    case DeviceType::gpu:
      return "gpu";
    case DeviceType::accelerator:
      return "accelerator";
    case DeviceType::unknown:
      break;
  }
  return "unknown";
}
inline std::ostream& operator<<(std::ostream& os, DeviceType t) {
  return os << name_of(t);
}

/// What a device is. Unknown text is "", an unknown count or size is 0, an unknown free size is
/// nullopt. Asked each time: `memory_free` is the driver's figure at the moment of the call.
struct DeviceProperties {
  DeviceType type = DeviceType::unknown;   ///< what the device computes on
  std::string name;                        ///< the device's model: "NVIDIA H100 80GB HBM3", "pthread-skylake"
  std::string vendor;                      ///< "NVIDIA Corporation", "GenuineIntel"
  std::string driver_version;              ///< the driver's own version text
  std::string architecture;                ///< CUDA compute capability "9.0", OpenCL's "OpenCL 3.0 ...", "x86_64"
  std::size_t compute_units = 0;           ///< SMs, OpenCL compute units, worker threads
  std::size_t max_work_group_size = 0;     ///< largest work-group (block) a kernel may use; 0: none or unknown
  std::size_t memory_total = 0;            ///< bytes of device memory
  std::optional<std::size_t> memory_free;  ///< bytes the driver says are free now
  bool host_accessible = false;            ///< the host addresses the device's memory directly (filled by xdev)
  std::uint32_t supported_dtypes = 0;      ///< bit `i` = `DType(i)`, from the capabilities (filled by xdev)

  /// True when the device supports dtype `t`.
  [[nodiscard]] constexpr bool supports(DType t) const noexcept {
    return (supported_dtypes >> static_cast<unsigned>(t)) & 1U;
  }

  friend bool operator==(const DeviceProperties&, const DeviceProperties&) = default;

  /// `{type=cpu, name="pthread-skylake", vendor="GenuineIntel", driver="", architecture="x86_64", compute_units=2,
  /// max_work_group=4096, memory_total=12345, memory_free=678, host_accessible=no, dtypes=[bool,...]}` (unknown sizes
  /// print as `unknown`).
  friend std::ostream& operator<<(std::ostream& os, const DeviceProperties& p) {
    os << "{type=" << p.type << ", name=\"" << p.name << "\", vendor=\"" << p.vendor << "\", driver=\""
       << p.driver_version << "\", architecture=\"" << p.architecture << "\", compute_units=" << p.compute_units
       << ", max_work_group=" << p.max_work_group_size << ", memory_total=";
    if (p.memory_total == 0)
      os << "unknown";
    else
      os << p.memory_total;
    os << ", memory_free=";
    if (p.memory_free)
      os << *p.memory_free;
    else
      os << "unknown";
    os << ", host_accessible=" << (p.host_accessible ? "yes" : "no") << ", dtypes=[";
    bool first = true;
    for (DType t : all_dtypes) {
      if (!p.supports(t)) continue;
      os << (first ? "" : ",") << t;
      first = false;
    }
    return os << "]}";
  }
};

}  // namespace xdev
