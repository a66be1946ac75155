/// \file
/// `xdev::Capabilities<Ps...>`: composing capability policies into one compile-time list.
#pragma once

#include <xdev/policy/capability_set.hpp>
#include <xdev/policy/policies.hpp>

#include <cstddef>
#include <type_traits>

namespace xdev {

namespace detail {

// The kind of policy `P`, or void for a type that is not a policy (reported once by Capabilities).
template <class P>
struct kind_of {
  using type = void;
};
template <concepts::Policy P>
struct kind_of<P> {
  using type = typename P::policy_kind;
};

template <class Kind, class... Ps>
inline constexpr std::size_t count_kind = (std::size_t{0} + ... + std::is_same_v<typename kind_of<Ps>::type, Kind>);

// The policy of kind `Kind` in `Ps...`, or `Default` when none is given.
template <class Kind, class Default, class... Ps>
struct find_policy {
  using type = Default;
};
template <class Kind, class Default, class P, class... Ps>
struct find_policy<Kind, Default, P, Ps...>
    : std::conditional_t<std::is_same_v<typename kind_of<P>::type, Kind>, std::type_identity<P>,
                         find_policy<Kind, Default, Ps...>> {};

template <class... Ps>
inline constexpr bool all_policies = (concepts::Policy<Ps> && ...);

}  // namespace detail

/// A compile-time list of capability policies. Every kind not given takes its documented default:
///
///     using caps = xdev::Capabilities<xdev::DenseGather<8192>, xdev::MaxInflight<8>>;
///     static_assert(caps::max_inflight == 8 && caps::rng_default == xdev::RngAlgorithm::philox);
///
/// A type that is not a policy, or one kind given twice, is a compile error saying so.
template <class... Ps>
struct Capabilities {
  static_assert(detail::all_policies<Ps...>,
                "xdev::Capabilities<...>: every argument must be a capability policy (DenseGather, RngDefault, "
                "Autocast, MaxInflight, SupportedDTypes, MemoryPerDevice, CollectiveBackend, Priority); "
                "a type without a policy_kind was given, or a policy whose own check failed (see the error above)");

#define XDEV_DETAIL_UNIQUE_POLICY(kind, text)                      \
  static_assert(detail::count_kind<policy_kind::kind, Ps...> <= 1, \
                "xdev::Capabilities<...>: the " text " policy is given twice; give each policy kind at most once")
  XDEV_DETAIL_UNIQUE_POLICY(dense_gather, "DenseGather");
  XDEV_DETAIL_UNIQUE_POLICY(rng_default, "RngDefault");
  XDEV_DETAIL_UNIQUE_POLICY(autocast, "Autocast");
  XDEV_DETAIL_UNIQUE_POLICY(max_inflight, "MaxInflight");
  XDEV_DETAIL_UNIQUE_POLICY(supported_dtypes, "SupportedDTypes");
  XDEV_DETAIL_UNIQUE_POLICY(memory_per_device, "MemoryPerDevice");
  XDEV_DETAIL_UNIQUE_POLICY(collective_backend, "CollectiveBackend");
  XDEV_DETAIL_UNIQUE_POLICY(priority, "Priority");
#undef XDEV_DETAIL_UNIQUE_POLICY

  /// The policy of a kind as given, or its default (`Capabilities<>::policy<policy_kind::max_inflight>`
  /// is `MaxInflight<32>`).
  template <class Kind, class Default>
  using policy = typename detail::find_policy<Kind, Default, Ps...>::type;

  using dense_gather_policy = policy<policy_kind::dense_gather, DenseGather<0>>;
  using rng_default_policy = policy<policy_kind::rng_default, RngDefault<RngAlgorithm::philox>>;
  using autocast_policy = policy<policy_kind::autocast, Autocast<AutocastKey::none, DType::f32>>;
  using max_inflight_policy = policy<policy_kind::max_inflight, MaxInflight<32>>;
  using supported_dtypes_policy =
      policy<policy_kind::supported_dtypes, SupportedDTypes<DType::bool_, DType::u8, DType::i32, DType::i64, DType::f16,
                                                            DType::bf16, DType::f32, DType::f64>>;
  using memory_per_device_policy = policy<policy_kind::memory_per_device, MemoryPerDevice<0>>;
  using collective_backend_policy = policy<policy_kind::collective_backend, CollectiveBackend<CollectiveKind::ring>>;
  using priority_policy = policy<policy_kind::priority, Priority<0>>;

  static constexpr std::size_t dense_gather_factor = dense_gather_policy::factor;
  static constexpr RngAlgorithm rng_default = rng_default_policy::algorithm;
  static constexpr AutocastKey autocast_key = autocast_policy::key;
  static constexpr DType autocast_dtype = autocast_policy::dtype;
  static constexpr std::size_t max_inflight = max_inflight_policy::value;
  static constexpr std::uint32_t supported_dtypes = supported_dtypes_policy::mask;
  static constexpr std::size_t memory_per_device = memory_per_device_policy::bytes;
  static constexpr CollectiveKind collective_backend = collective_backend_policy::kind;
  static constexpr int priority = priority_policy::value;

  /// The same capabilities as a run-time value.
  static constexpr CapabilitySet set{dense_gather_factor, rng_default,        autocast_key,
                                     autocast_dtype,      max_inflight,       supported_dtypes,
                                     memory_per_device,   collective_backend, priority};

  /// True when dtype `t` is supported.
  static constexpr bool supports(DType t) noexcept {
    return set.supports(t);
  }
};

template <class T>
inline constexpr bool is_capabilities_v = false;
template <class... Ps>
inline constexpr bool is_capabilities_v<Capabilities<Ps...>> = true;

}  // namespace xdev
