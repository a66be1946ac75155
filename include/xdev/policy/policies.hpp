/// \file
/// Capability policies: what is special about a device type, stated at compile time.
///
/// Each policy is an empty tag type with a `policy_kind` naming which aspect it sets. Compose them
/// with `xdev::Capabilities<...>` (see capabilities.hpp); any kind left out takes the default
/// documented on its policy.
#pragma once

#include <xdev/core/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

namespace xdev {

/// Counter-based random number generators (Random123 family).
enum class RngAlgorithm : std::uint8_t { philox, three_fry };

constexpr std::string_view name_of(RngAlgorithm a) noexcept {
  return a == RngAlgorithm::philox ? "philox" : "three_fry";
}
inline std::ostream& operator<<(std::ostream& os, RngAlgorithm a) {
  return os << name_of(a);
}

/// Which autocast scope applies to a device (PyTorch's autocast dispatch keys). `none` disables autocast.
enum class AutocastKey : std::uint8_t { none, cpu, cuda, xla, npu, private_use };

constexpr std::string_view name_of(AutocastKey k) noexcept {
  switch (k) {
    case AutocastKey::none:
      return "none";
    case AutocastKey::cpu:
      return "cpu";
    case AutocastKey::cuda:
      return "cuda";
    case AutocastKey::xla:
      return "xla";
    case AutocastKey::npu:
      return "npu";
    case AutocastKey::private_use:
      return "private_use";
  }
  return "?";
}
inline std::ostream& operator<<(std::ostream& os, AutocastKey k) {
  return os << name_of(k);
}

/// How collectives over a mesh of these devices are carried out by preference.
enum class CollectiveKind : std::uint8_t {
  direct,  ///< every device exchanges with every other (best for small arrays)
  ring,    ///< bandwidth-optimal ring (reduce-scatter + all-gather)
  mpi,     ///< through MPI, across processes
};

constexpr std::string_view name_of(CollectiveKind k) noexcept {
  switch (k) {
    case CollectiveKind::direct:
      return "direct";
    case CollectiveKind::ring:
      return "ring";
    case CollectiveKind::mpi:
      return "mpi";
  }
  return "?";
}
inline std::ostream& operator<<(std::ostream& os, CollectiveKind k) {
  return os << name_of(k);
}

/// The aspects a policy can set. Each may be given at most once in a `Capabilities` list.
namespace policy_kind {
struct dense_gather {};
struct rng_default {};
struct autocast {};
struct max_inflight {};
struct supported_dtypes {};
struct memory_per_device {};
struct collective_backend {};
struct priority {};
}  // namespace policy_kind

/// `ops::gather` takes the dense lowering when the indexed dimension has at most `Factor * 10` rows,
/// else the sparse one. `DenseGather<0>` never takes the dense path. **Default: `DenseGather<0>`.**
template <std::size_t Factor>
struct DenseGather {
  using policy_kind = xdev::policy_kind::dense_gather;
  static constexpr std::size_t factor = Factor;
};

/// Generator used by `ops::rng_*` unless a call names one. **Default: `RngDefault<RngAlgorithm::philox>`.**
template <RngAlgorithm A>
struct RngDefault {
  using policy_kind = xdev::policy_kind::rng_default;
  static constexpr RngAlgorithm algorithm = A;
};

/// Inside an autocast scope for `Key`, matrix ops on the device compute in `D` (inputs rounded,
/// accumulation in f32). **Default: `Autocast<AutocastKey::none, DType::f32>`** (no autocast).
template <AutocastKey Key, DType D>
struct Autocast {
  static_assert(D == DType::f32 || D == DType::f16 || D == DType::bf16,
                "xdev::Autocast<Key, D>: D must be DType::f16, DType::bf16 or DType::f32");
  using policy_kind = xdev::policy_kind::autocast;
  static constexpr AutocastKey key = Key;
  static constexpr DType dtype = D;
};

/// Default bound of a device's in-flight executions; a further submission waits for a slot.
/// Overridden by `XDEV_MAX_INFLIGHT` and by `RuntimeOptions::max_inflight`. **Default: `MaxInflight<32>`.**
template <std::size_t N>
struct MaxInflight {
  static_assert(N >= 1, "xdev::MaxInflight<N>: N must be at least 1 (a device that runs nothing is useless)");
  using policy_kind = xdev::policy_kind::max_inflight;
  static constexpr std::size_t value = N;
};

/// The dtypes the device can store and compute with. **Default: every `DType`.**
template <DType... Ds>
struct SupportedDTypes {
  static_assert(sizeof...(Ds) > 0, "xdev::SupportedDTypes<...>: list at least one dtype");
  using policy_kind = xdev::policy_kind::supported_dtypes;
  static constexpr std::uint32_t mask = ((std::uint32_t{1} << static_cast<unsigned>(Ds)) | ...);
};

/// Physical memory of one device in bytes; 0 means unknown (no limit but the one set at run time).
/// **Default: `MemoryPerDevice<0>`.**
template <std::size_t Bytes>
struct MemoryPerDevice {
  using policy_kind = xdev::policy_kind::memory_per_device;
  static constexpr std::size_t bytes = Bytes;
};

/// Preferred way to run collectives across these devices. **Default: `CollectiveBackend<CollectiveKind::ring>`.**
/// What the SPMD collectives' `CollectiveAlgorithm::automatic` makes of it, on devices whose memory
/// is not host memory (host memory always takes shared memory): when every device of a mesh
/// states `direct`, direct at every size; otherwise (every one states `ring` or `mpi`, or they
/// differ) direct up to `CollectiveOptions::direct_threshold_bytes` and ring above, since a ring's
/// k-1 steps cost more than they save on small arrays. `CollectiveOptions::algorithm` overrides
/// both. Across processes a `GlobalMesh` always reduces through MPI.
template <CollectiveKind K>
struct CollectiveBackend {
  using policy_kind = xdev::policy_kind::collective_backend;
  static constexpr CollectiveKind kind = K;
};

/// Rank of this device type when xdev picks a default device without `XDEV_DEVICE`: the highest
/// available wins. **Default: `Priority<0>`**; the host backend uses `Priority<-100>` so it is picked last.
template <int P>
struct Priority {
  using policy_kind = xdev::policy_kind::priority;
  static constexpr int value = P;
};

namespace concepts {
/// A capability policy: a type that names the aspect it sets through `policy_kind`.
template <class P>
concept Policy = requires {
  typename P::policy_kind;
};
}  // namespace concepts

}  // namespace xdev
