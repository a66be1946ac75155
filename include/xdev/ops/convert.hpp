/// \file
/// `convert`: element-wise dtype conversion, XLA's rules made total. See docs/ops.md.
#pragma once

#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/kernels/convert.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/dispatch.hpp>
#include <xdev/ops/fallback.hpp>
#include <xdev/ops/op_args.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::ops {

// ---- the op table row (see op_traits in <xdev/ops/dispatch.hpp>) -----------------------------

/// Every pair of dtypes goes through one fallback, by run-time dtype.
template <class S, class D, class H>
struct op_traits<ConvertArgs<S, D, H>> {
  static const char* name(const ConvertArgs<S, D, H>&) noexcept { return "convert"; }
  static std::vector<detail::Staged<H>> operands(const ConvertArgs<S, D, H>& a) {
    return {detail::Staged<H>{a.src, a.n * size_of(dtype_of<S>), true, false, 0},
            detail::Staged<H>{a.dst, a.n * size_of(dtype_of<D>), false, true, 0}};
  }
  static void compute(const ConvertArgs<S, D, H>& a, std::vector<std::byte*>& p) {
    kernels::convert(detail::fallback_parallel(), dtype_of<S>, p[0], dtype_of<D>, p[1], a.n);
  }
};

// ---- dtype conversion ----------------------------------------------------------------------

/// `dst = S -> D (src)`, element-wise; shapes equal. To f16 and bf16 with round to nearest even.
template <concepts::Queue Q, class X, class O, class Token = const use_future_t&>
requires detail::input_of<X, detail::backend_of<Q>> && detail::output_of<O, detail::backend_of<Q>>
auto convert(const Q& q, const X& src, O&& dst, Token&& token = use_future) {
  using S = detail::value_of<X>;
  using D = detail::value_of<O>;
  const auto& s = detail::stream_of(q);
  detail::check_array("convert", "src", src, s.device());
  detail::check_array("convert", "dst", dst, s.device());
  detail::check_same_shape("convert", src, "src", dst, "dst");
  detail::check_not_same("convert", dst, "dst", src, "src");
  ConvertArgs<S, D, decltype(detail::handle(src))> args{detail::handle(src), detail::handle(dst), src.size()};
  return detail::submit_op(s, args, detail::offsets_of(src, dst), std::forward<Token>(token));
}

}  // namespace xdev::ops
