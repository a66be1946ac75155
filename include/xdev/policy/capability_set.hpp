/// \file
/// `xdev::CapabilitySet`: the run-time view of a device type's capabilities.
#pragma once

#include <xdev/core/dtype.hpp>
#include <xdev/policy/policies.hpp>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>

namespace xdev {

/// Plain-data view of a `Capabilities<...>` list: what a plugin reports and what `AnyDevice`
/// exposes. A typed device's set is computed from its compile-time list (`capability_set_of<B>`),
/// so the two cannot disagree. Every member has the default of the matching policy.
struct CapabilitySet {
  std::size_t dense_gather_factor = 0;
  RngAlgorithm rng_default = RngAlgorithm::philox;
  AutocastKey autocast_key = AutocastKey::none;
  DType autocast_dtype = DType::f32;
  std::size_t max_inflight = 32;
  std::uint32_t supported_dtypes = (std::uint32_t{1} << all_dtypes.size()) - 1;  ///< bit `i` = `DType(i)`
  std::size_t memory_per_device = 0;                                             ///< bytes; 0 = unknown
  CollectiveKind collective_backend = CollectiveKind::ring;
  int priority = 0;

  /// True when the device supports dtype `t`.
  [[nodiscard]] constexpr bool supports(DType t) const noexcept {
    return (supported_dtypes >> static_cast<unsigned>(t)) & 1U;
  }

  /// True when `gather` on a table of `rows` rows takes the dense lowering (`rows <= factor * 10`).
  [[nodiscard]] constexpr bool uses_dense_gather(std::size_t rows) const noexcept {
    return dense_gather_factor != 0 && rows <= dense_gather_factor * 10;
  }

  friend constexpr bool operator==(const CapabilitySet&, const CapabilitySet&) noexcept = default;

  /// `{dense_gather=0, rng=philox, autocast=none:f32, max_inflight=32, dtypes=[bool,u8,...], memory=unknown,
  /// collective=ring, priority=0}`
  friend std::ostream& operator<<(std::ostream& os, const CapabilitySet& c) {
    os << "{dense_gather=" << c.dense_gather_factor << ", rng=" << c.rng_default << ", autocast=" << c.autocast_key
       << ':' << c.autocast_dtype << ", max_inflight=" << c.max_inflight << ", dtypes=[";
    bool first = true;
    for (DType t : all_dtypes) {
      if (!c.supports(t)) continue;
      os << (first ? "" : ",") << t;
      first = false;
    }
    os << "], memory=";
    if (c.memory_per_device == 0)
      os << "unknown";
    else
      os << c.memory_per_device;
    return os << ", collective=" << c.collective_backend << ", priority=" << c.priority << '}';
  }
};

/// The printed form of a capability set (see `operator<<`).
inline std::string to_string(const CapabilitySet& c) {
  std::ostringstream os;
  os << c;
  return os.str();
}

}  // namespace xdev
