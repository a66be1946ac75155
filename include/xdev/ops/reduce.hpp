/// \file
/// The reductions: `sum` (of everything, or along an axis) and `dot`. See docs/ops.md.
#pragma once

#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/kernels/reduce.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/autocast.hpp>
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

// ---- the op table rows (see op_traits in <xdev/ops/dispatch.hpp>) ----------------------------

template <class T, class H>
struct op_traits<SumArgs<T, H>> {
  static const char* name(const SumArgs<T, H>&) noexcept { return "sum"; }
  static std::vector<detail::Staged<H>> operands(const SumArgs<T, H>& a) {
    return {detail::staged<T>(a.x, a.n, true, false)};
  }
  static void compute(const SumArgs<T, H>& a, std::vector<std::byte*>& p) {
    *a.result = kernels::sum(detail::fallback_parallel(), reinterpret_cast<const T*>(p[0]), a.n);
  }
};

/// `sum` along an axis: the fallback counts `fallback.sum`.
template <class T, class H>
struct op_traits<SumAxisArgs<T, H>> {
  static const char* name(const SumAxisArgs<T, H>&) noexcept { return "sum"; }
  static std::vector<detail::Staged<H>> operands(const SumAxisArgs<T, H>& a) {
    return {detail::staged<T>(a.x, a.outer * a.axis * a.inner, true, false),
            detail::staged<T>(a.out, a.outer * a.inner, false, true)};
  }
  static void compute(const SumAxisArgs<T, H>& a, std::vector<std::byte*>& p) {
    kernels::sum_axis(detail::fallback_parallel(), reinterpret_cast<const T*>(p[0]), a.outer, a.axis, a.inner,
                      reinterpret_cast<T*>(p[1]));
  }
};

template <class T, class H>
struct op_traits<DotArgs<T, H>> {
  static const char* name(const DotArgs<T, H>&) noexcept { return "dot"; }
  static std::vector<detail::Staged<H>> operands(const DotArgs<T, H>& a) {
    return {detail::staged<T>(a.x, a.n, true, false), detail::staged<T>(a.y, a.n, true, false)};
  }
  static void compute(const DotArgs<T, H>& a, std::vector<std::byte*>& p) {
    *a.result = kernels::dot(detail::fallback_parallel(), reinterpret_cast<const T*>(p[0]),
                             reinterpret_cast<const T*>(p[1]), a.n, a.compute);
  }
};

// ---- reductions ----------------------------------------------------------------------------

/// The sum of every element of `x`, delivered as the result (`void(std::exception_ptr, T)`).
/// f32 sums are pairwise: the error grows with log(n).
template <concepts::Queue Q, class X, class Token = const use_future_t&>
requires detail::input_of<X, detail::backend_of<Q>> && detail::is_arith<detail::value_of<X>>
auto sum(const Q& q, const X& x, Token&& token = use_future) {
  using T = detail::value_of<X>;
  const auto& s = detail::stream_of(q);
  detail::check_array("sum", "x", x, s.device());
  SumArgs<T, decltype(detail::handle(x))> args{detail::handle(x), x.size(), nullptr};
  return detail::submit_op_with_result<T>(s, args, detail::offsets_of(x), std::forward<Token>(token));
}

/// Sums `x` along dimension `axis` (negative counts from the back) into `out`, whose shape is
/// `x`'s without that dimension.
template <concepts::Queue Q, class X, class O, class Token = const use_future_t&>
requires detail::input_of<X, detail::backend_of<Q>> &&
    detail::output_of_type<O, detail::backend_of<Q>, detail::value_of<X>> && detail::is_arith<detail::value_of<X>>
auto sum(const Q& q, const X& x, std::ptrdiff_t axis, O&& out, Token&& token = use_future) {
  using T = detail::value_of<X>;
  const auto& s = detail::stream_of(q);
  detail::check_array("sum", "x", x, s.device());
  detail::check_array("sum", "out", out, s.device());
  const Shape& xs = x.shape();
  const auto r = static_cast<std::ptrdiff_t>(xs.rank());
  if (axis < -r || axis >= r)
    detail::invalid("sum", "axis " + std::to_string(axis) + " is out of range for shape " + to_string(xs));
  const auto ax = static_cast<std::size_t>(axis < 0 ? axis + r : axis);
  std::vector<Shape::value_type> expected;
  std::size_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < xs.rank(); ++i) {
    if (i == ax) continue;
    expected.push_back(xs[static_cast<std::ptrdiff_t>(i)]);
    (i < ax ? outer : inner) *= static_cast<std::size_t>(xs[static_cast<std::ptrdiff_t>(i)]);
  }
  if (out.shape() != Shape(std::span<const Shape::value_type>(expected)))
    detail::invalid("sum", "out has shape " + to_string(out.shape()) + " but summing " + to_string(xs) + " over axis " +
                               std::to_string(axis) + " gives " +
                               to_string(Shape(std::span<const Shape::value_type>(expected))));
  detail::check_not_same("sum", out, "out", x, "x");
  SumAxisArgs<T, decltype(detail::handle(x))> args{detail::handle(x), detail::handle(out), outer,
                                                   static_cast<std::size_t>(xs[static_cast<std::ptrdiff_t>(ax)]),
                                                   inner};
  return detail::submit_op(s, args, detail::offsets_of(x, out), std::forward<Token>(token));
}

/// The dot product of `x` and `y` (same shape, flattened), as the result. Inside an autocast
/// scope matching the device's `Autocast` policy, f32 inputs are rounded to the policy's dtype.
template <concepts::Queue Q, class X, class Y, class Token = const use_future_t&>
requires detail::input_of<X, detail::backend_of<Q>> &&
    detail::input_of_type<Y, detail::backend_of<Q>, detail::value_of<X>> && detail::is_arith<detail::value_of<X>>
auto dot(const Q& q, const X& x, const Y& y, Token&& token = use_future) {
  using T = detail::value_of<X>;
  const auto& s = detail::stream_of(q);
  detail::check_array("dot", "x", x, s.device());
  detail::check_array("dot", "y", y, s.device());
  detail::check_same_shape("dot", x, "x", y, "y");
  DotArgs<T, decltype(detail::handle(x))> args{detail::handle(x), detail::handle(y), x.size(), nullptr,
                                               autocast_compute_dtype(capabilities_of(s.device()), dtype_of<T>)};
  return detail::submit_op_with_result<T>(s, args, detail::offsets_of(x, y), std::forward<Token>(token));
}

}  // namespace xdev::ops
