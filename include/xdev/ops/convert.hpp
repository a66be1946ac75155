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
    return {detail::Staged<H>{a.src, a.n * size_of(dtype_of<S>), true, false},
            detail::Staged<H>{a.dst, a.n * size_of(dtype_of<D>), false, true}};
  }
  static void compute(const ConvertArgs<S, D, H>& a, std::vector<std::byte*>& p) {
    kernels::convert(detail::fallback_parallel(), dtype_of<S>, p[0], dtype_of<D>, p[1], a.n);
  }
};

// ---- dtype conversion ----------------------------------------------------------------------

/// `dst = S -> D (src)`, element-wise; shapes equal. To f16 and bf16 with round to nearest even.
template <concepts::Queue Q, class S, class D, class Token = const use_future_t&>
auto convert(const Q& q, const Array<S, detail::backend_of<Q>>& src, Array<D, detail::backend_of<Q>>& dst,
             Token&& token = use_future) {
  const auto& s = detail::stream_of(q);
  detail::check_array("convert", "src", src, s.device());
  detail::check_array("convert", "dst", dst, s.device());
  detail::check_same_shape("convert", src, "src", dst, "dst");
  ConvertArgs<S, D, decltype(detail::handle(src))> args{detail::handle(src), detail::handle(dst), src.size()};
  return detail::submit_op(s, args, std::forward<Token>(token));
}

}  // namespace xdev::ops
