/// \file
/// `xdev::AutocastScope`: lower-precision matrix ops inside a scope, per autocast key.
#pragma once

#include <xdev/core/dtype.hpp>
#include <xdev/policy/capability_set.hpp>
#include <xdev/policy/policies.hpp>

#include <cstdint>

namespace xdev {

namespace detail {
inline thread_local std::uint32_t autocast_mask = 0;
constexpr std::uint32_t autocast_bit(AutocastKey k) noexcept {
  return std::uint32_t{1} << static_cast<unsigned>(k);
}
}  // namespace detail

/// While alive, on the constructing thread, `gemm` and `dot` submitted to devices whose `Autocast`
/// policy has key `key` round their f32 inputs to the policy's dtype (bf16 or f16) and accumulate
/// in f32. Scopes nest; each restores the state it found (so an inner `AutocastScope(key, false)`
/// turns autocast off for a region).
///
///     {
///       xdev::AutocastScope bf16(xdev::AutocastKey::cpu);
///       xdev::ops::gemm(host_dev, a, b, c).get();   // bf16 inputs, f32 accumulation
///     }
class AutocastScope {
 public:
  explicit AutocastScope(AutocastKey key, bool enabled = true) noexcept : saved_(detail::autocast_mask) {
    if (key == AutocastKey::none) return;
    if (enabled)
      detail::autocast_mask |= detail::autocast_bit(key);
    else
      detail::autocast_mask &= ~detail::autocast_bit(key);
  }
  ~AutocastScope() { detail::autocast_mask = saved_; }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  std::uint32_t saved_;
};

/// True when an autocast scope for `key` is active on this thread.
inline bool autocast_enabled(AutocastKey key) noexcept {
  return key != AutocastKey::none && (detail::autocast_mask & detail::autocast_bit(key)) != 0;
}

/// The dtype a matrix op on elements of `t` computes in for a device with capabilities `caps`:
/// the policy's dtype inside a matching scope (for f32 inputs), else `t` itself.
inline DType autocast_compute_dtype(const CapabilitySet& caps, DType t) noexcept {
  return (t == DType::f32 && autocast_enabled(caps.autocast_key)) ? caps.autocast_dtype : t;
}

}  // namespace xdev
