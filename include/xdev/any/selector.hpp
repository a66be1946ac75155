/// \file
/// Choosing a device by what it can do (SYCL's device selectors and aspects): a selector scores a
/// device, a negative score rejects it, and `select_device` takes the best-scored one.
///
///     namespace sel = xdev::selectors;
///     xdev::AnyDevice d = xdev::select_device(sel::has_dtype(xdev::DType::f64) && sel::min_memory(1 << 30));
///     xdev::AnyDevice e = xdev::select_device([](const xdev::AnyDevice& d) {
///       return d.type_name() == "OPENCL" ? 10 : 1;   // prefer OpenCL, take anything else
///     });
///
/// `select_device(selector)` without a list of candidates chooses among every device the process
/// sees (`XDEV_DEVICE` limits them) and is declared in <xdev/any/accelerator.hpp>, with
/// `default_selector()`; this header has what needs no registry.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/any/device_filter.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>

#include <concepts>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev {

/// What a selector returns for a device: a score (higher is preferred, negative rejects), and for a
/// rejection the reason, which `select_device`'s error quotes. A selector may return a plain `int`
/// instead.
struct Score {
  int value = 0;
  std::string reason;  ///< why the device was rejected; empty when accepted

  Score(int v = 0) : value(v) {}  // NOLINT(google-explicit-constructor): a selector may return an int
  Score(int v, std::string why) : value(v), reason(std::move(why)) {}

  /// A rejection (`-1`) with its reason.
  [[nodiscard]] static Score reject(std::string why) { return Score(-1, std::move(why)); }
  [[nodiscard]] bool rejected() const noexcept { return value < 0; }
};

/// A callable that scores a device: `s(device)` returns an `int` or a `Score`.
/// (A `bool` is refused: `false` would be score 0, which accepts.)
template <class S>
concept DeviceSelector = std::invocable<const S&, const AnyDevice&> &&
                         !std::same_as<std::remove_cvref_t<std::invoke_result_t<const S&, const AnyDevice&>>, bool> &&
                         std::convertible_to<std::invoke_result_t<const S&, const AnyDevice&>, Score>;

/// The bytes a device can hold, as far as xdev knows: its memory limit when one is set, else its
/// properties' `memory_total` (the driver's figure, else the `MemoryPerDevice` capability; the
/// machine's memory for the host backend); nothing when neither is known.
/// \throws xdev::error what `AnyDevice::properties()` throws.
[[nodiscard]] inline std::optional<std::size_t> memory_capacity(const AnyDevice& d) {
  if (!d.valid()) return std::nullopt;
  if (auto limit = d.memory_stats().limit) return limit;
  if (const std::size_t m = d.properties().memory_total; m != 0) return m;
  return std::nullopt;
}

/// Ready-made selectors. Each accepts with score 0 or rejects with a reason; combine them with
/// `&&` (all must accept; the scores add) and add preferences of your own with `prefer`.
namespace selectors {

/// A selector held by value: a ready-made one, a combination, or any `DeviceSelector` wrapped.
class Selector {
 public:
  template <class S>
  requires(!std::same_as<std::remove_cvref_t<S>, Selector> && DeviceSelector<S>)
      Selector(S s)  // NOLINT(google-explicit-constructor): any selector converts
      : f_([s = std::move(s)](const AnyDevice& d) { return Score(std::invoke(s, d)); }) {}

  Score operator()(const AnyDevice& d) const { return f_(d); }

  /// Both must accept; the scores add. A rejection quotes the first selector that rejected.
  friend Selector operator&&(Selector a, Selector b) {
    return Selector([a = std::move(a), b = std::move(b)](const AnyDevice& d) {
      Score x = a(d);
      if (x.rejected()) return x;
      Score y = b(d);
      if (y.rejected()) return y;
      return Score(x.value + y.value);
    });
  }

 private:
  std::function<Score(const AnyDevice&)> f_;
};

/// Devices of backend `name` (ignoring case: "opencl" is OPENCL).
[[nodiscard]] inline Selector backend(std::string name) {
  return Selector([name = std::move(name)](const AnyDevice& d) {
    const std::string_view t = d.type_name();
    return DeviceFilter::same_name(t, name) ? Score(0) : Score::reject("a " + std::string(t) + " device, not " + name);
  });
}

/// The device of ordinal `i` (of whichever backend: combine with `backend`).
[[nodiscard]] inline Selector ordinal(std::size_t i) {
  return Selector([i](const AnyDevice& d) {
    return d.ordinal() == i ? Score(0)
                            : Score::reject("ordinal " + std::to_string(d.ordinal()) + ", not " + std::to_string(i));
  });
}

/// Devices that support dtype `t` (SYCL's `aspect::fp64` is `has_dtype(DType::f64)`).
[[nodiscard]] inline Selector has_dtype(DType t) {
  return Selector([t](const AnyDevice& d) {
    return d.capability_set().supports(t) ? Score(0) : Score::reject("no " + std::string(name_of(t)) + " support");
  });
}

/// Devices whose memory the host addresses directly (SYCL's `aspect::usm_host_allocations` in
/// spirit): what `parallel_for` through a typed device needs.
[[nodiscard]] inline Selector host_accessible() {
  return Selector([](const AnyDevice& d) {
    return d.host_accessible() ? Score(0) : Score::reject("its memory is not host-accessible");
  });
}

/// Devices that can hold at least `bytes` (as `memory_capacity` knows it; unknown, or properties
/// that cannot be read, reject).
[[nodiscard]] inline Selector min_memory(std::size_t bytes) {
  return Selector([bytes](const AnyDevice& d) {
    std::optional<std::size_t> have;
    try {
      have = memory_capacity(d);
    } catch (const std::exception& e) {
      return Score::reject(std::string("its memory size could not be read: ") + e.what());
    }
    if (!have) return Score::reject("its memory size is unknown (at least " + std::to_string(bytes) + " bytes asked)");
    if (*have < bytes)
      return Score::reject(std::to_string(*have) + " bytes of memory, fewer than the " + std::to_string(bytes) +
                           " asked");
    return Score(0);
  });
}

/// Adds `weight` to the score of the devices `condition` accepts, and accepts the others unchanged:
/// a preference, not a requirement (`prefer(backend("OPENCL"), 10)`).
[[nodiscard]] inline Selector prefer(Selector condition, int weight) {
  return Selector(
      [c = std::move(condition), weight](const AnyDevice& d) { return Score(c(d).rejected() ? 0 : weight); });
}

}  // namespace selectors

/// The device of `candidates` that `selector` scores highest. Ties go to the higher-priority
/// backend (`Priority<P>`), then to the lower ordinal, then to the earlier candidate.
/// \throws xdev::error `errc::not_found` when every candidate is rejected, listing each with its
///         reason (and `context`, when given, after the list: what else was not a candidate).
template <DeviceSelector S>
[[nodiscard]] AnyDevice select_device(const S& selector, std::span<const AnyDevice> candidates,
                                      std::string_view context = {}) {
  const AnyDevice* best = nullptr;
  int best_score = 0;
  std::string rejected;
  for (const AnyDevice& d : candidates) {
    if (!d.valid()) continue;
    const Score s(std::invoke(selector, d));
    if (s.rejected()) {
      rejected += (rejected.empty() ? "" : "; ") + d.name() + ": " +
                  (s.reason.empty() ? "scored " + std::to_string(s.value) : s.reason);
      continue;
    }
    const auto better = [&] {
      if (s.value != best_score) return s.value > best_score;
      const int p = d.capability_set().priority;
      const int bp = best->capability_set().priority;
      if (p != bp) return p > bp;
      return d.ordinal() < best->ordinal();
    };
    if (best == nullptr || better()) {
      best = &d;
      best_score = s.value;
    }
  }
  if (best != nullptr) return *best;
  std::string what = "select_device: no device was accepted";
  what += rejected.empty() ? std::string(" (there were no candidates)") : "; rejected: " + rejected;
  if (!context.empty()) what += "; " + std::string(context);
  throw error(errc::not_found, what);
}

}  // namespace xdev
