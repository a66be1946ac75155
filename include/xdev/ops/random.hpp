/// \file
/// The random ops `rng_uniform` and `rng_normal`: counter-based streams, bit-identical on every
/// device (<xdev/random/stream.hpp>). See docs/ops.md.
#pragma once

#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/kernels/rng_fill.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/dispatch.hpp>
#include <xdev/ops/fallback.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/random/stream.hpp>

#include <optional>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::ops {

// ---- the op table row (see op_traits in <xdev/ops/dispatch.hpp>) -----------------------------

/// The fallback counts `fallback.rng_uniform` or `fallback.rng_normal`.
template <class T, class H>
struct op_traits<RngArgs<T, H>> {
  static const char* name(const RngArgs<T, H>& a) noexcept { return a.normal ? "rng_normal" : "rng_uniform"; }
  static std::vector<detail::Staged<H>> operands(const RngArgs<T, H>& a) {
    return {detail::staged<T>(a.out, a.n, false, true)};
  }
  static void compute(const RngArgs<T, H>& a, std::vector<std::byte*>& p) {
    kernels::rng(detail::fallback_parallel(), reinterpret_cast<T*>(p[0]), a.n, a.algorithm, a.seed, a.offset, a.normal,
                 a.mean, a.stddev);
  }
};

// ---- random numbers ------------------------------------------------------------------------

/// Options of the random ops. Unset members use the device: its `RngDefault` generator, and the
/// next part of its default stream (`Device::manual_seed` restarts it).
struct RngOptions {
  std::optional<RngAlgorithm> algorithm = std::nullopt;
  /// With a seed, the op reads (seed, offset) as given and leaves the device's stream alone.
  std::optional<std::uint64_t> seed = std::nullopt;
  /// Where in the stream (seed) to start, in raw 32-bit outputs; only with `seed` (else an error).
  std::uint64_t offset = 0;
};

namespace detail {
template <class Q, class O, class T, class Token>
auto rng(const char* name, const Q& q, const O& out, bool normal, T mean, T stddev, RngOptions opt, Token&& token) {
  const auto& s = stream_of(q);
  check_array(name, "out", out, s.device());
  if (normal && !(stddev >= T(0))) invalid(name, "stddev " + std::to_string(stddev) + " is not >= 0");
  if (!opt.seed && opt.offset != 0)
    invalid(name, "RngOptions::offset=" + std::to_string(opt.offset) +
                      " needs RngOptions::seed (without a seed the device's own stream position is used)");
  const RngAlgorithm alg = opt.algorithm.value_or(capabilities_of(s.device()).rng_default);
  const std::uint64_t raw = random::raw_outputs_per_value<T> * out.size();
  const auto [seed, offset] = opt.seed ? std::pair{*opt.seed, opt.offset} : s.device().generator().reserve(raw);
  RngArgs<T, decltype(handle(out))> args{handle(out), out.size(), alg, seed, offset, normal, mean, stddev};
  return submit_op(s, args, offsets_of(out), std::forward<Token>(token));
}
}  // namespace detail

/// Fills `out` with uniform numbers in [0, 1) from a counter-based stream (f32, f64).
template <concepts::Queue Q, class O, class Token = const use_future_t&>
requires detail::output_of<O, detail::backend_of<Q>> && detail::is_arith<detail::value_of<O>>
auto rng_uniform(const Q& q, O&& out, RngOptions opt = {}, Token&& token = use_future) {
  using T = detail::value_of<O>;
  return detail::rng("rng_uniform", q, out, false, T(0), T(1), opt, std::forward<Token>(token));
}

/// Fills `out` with normal numbers (Box–Muller on the same stream as `rng_uniform`).
template <concepts::Queue Q, class O, class Token = const use_future_t&>
requires detail::output_of<O, detail::backend_of<Q>> && detail::is_arith<detail::value_of<O>>
auto rng_normal(const Q& q, O&& out, std::type_identity_t<detail::value_of<O>> mean = 0,
                std::type_identity_t<detail::value_of<O>> stddev = 1, RngOptions opt = {}, Token&& token = use_future) {
  return detail::rng("rng_normal", q, out, true, mean, stddev, opt, std::forward<Token>(token));
}

}  // namespace xdev::ops
