/// \file
/// The element-wise ops: `fill`, `scale`, `axpy`, `add`, `mul`, `minimum`, `maximum`, `combine`,
/// `exp`, and `copy`.
/// Every op takes a queue (a `Device<B>` or an `AnyDevice`, meaning its default stream, or a
/// `Stream<B>` or an `AnyStream`) and a completion token (default `xdev::use_future`). See docs/ops.md.
#pragma once

#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/half.hpp>
#include <xdev/kernels/elementwise.hpp>
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

// ---- the op table rows (see op_traits in <xdev/ops/dispatch.hpp>) ----------------------------

template <class T, class H>
struct op_traits<FillArgs<T, H>> {
  static const char* name(const FillArgs<T, H>&) noexcept { return "fill"; }
  static std::vector<detail::Staged<H>> operands(const FillArgs<T, H>& a) {
    return {detail::staged<T>(a.x, a.n, false, true)};
  }
  static void compute(const FillArgs<T, H>& a, std::vector<std::byte*>& p) {
    kernels::fill(detail::fallback_parallel(), reinterpret_cast<T*>(p[0]), a.n, a.value);
  }
};

template <class T, class H>
struct op_traits<ScaleArgs<T, H>> {
  static const char* name(const ScaleArgs<T, H>&) noexcept { return "scale"; }
  static std::vector<detail::Staged<H>> operands(const ScaleArgs<T, H>& a) {
    return {detail::staged<T>(a.x, a.n, true, true)};
  }
  static void compute(const ScaleArgs<T, H>& a, std::vector<std::byte*>& p) {
    kernels::scale(detail::fallback_parallel(), reinterpret_cast<T*>(p[0]), a.n, a.alpha);
  }
};

template <class T, class H>
struct op_traits<AxpyArgs<T, H>> {
  static const char* name(const AxpyArgs<T, H>&) noexcept { return "axpy"; }
  static std::vector<detail::Staged<H>> operands(const AxpyArgs<T, H>& a) {
    return {detail::staged<T>(a.x, a.n, true, false), detail::staged<T>(a.y, a.n, true, true)};
  }
  static void compute(const AxpyArgs<T, H>& a, std::vector<std::byte*>& p) {
    kernels::axpy(detail::fallback_parallel(), a.alpha, reinterpret_cast<const T*>(p[0]), reinterpret_cast<T*>(p[1]),
                  a.n);
  }
};

template <class T, class H>
struct op_traits<ExpArgs<T, H>> {
  static const char* name(const ExpArgs<T, H>&) noexcept { return "exp"; }
  static std::vector<detail::Staged<H>> operands(const ExpArgs<T, H>& a) {
    return {detail::staged<T>(a.x, a.n, true, false), detail::staged<T>(a.out, a.n, false, true)};
  }
  static void compute(const ExpArgs<T, H>& a, std::vector<std::byte*>& p) {
    kernels::exp(detail::fallback_parallel(), reinterpret_cast<const T*>(p[0]), reinterpret_cast<T*>(p[1]), a.n);
  }
};

/// `add`, `mul`, `minimum` and `maximum`: one `binary` member; the fallback counts
/// `fallback.add`, `fallback.mul`, `fallback.minimum` or `fallback.maximum` (`name_of(BinaryOp)`).
template <class T, class H>
struct op_traits<BinaryArgs<T, H>> {
  static const char* name(const BinaryArgs<T, H>& a) noexcept { return name_of(a.op); }
  static std::vector<detail::Staged<H>> operands(const BinaryArgs<T, H>& a) {
    return {detail::staged<T>(a.a, a.n, true, false), detail::staged<T>(a.b, a.n, true, false),
            detail::staged<T>(a.out, a.n, false, true)};
  }
  static void compute(const BinaryArgs<T, H>& a, std::vector<std::byte*>& p) {
    kernels::binary(detail::fallback_parallel(), a.op, reinterpret_cast<const T*>(p[0]),
                    reinterpret_cast<const T*>(p[1]), reinterpret_cast<T*>(p[2]), a.n);
  }
};

// ---- element-wise --------------------------------------------------------------------------
//
// Every operand is an array or a contiguous window of one (`xdev::ArrayView`, from
// `xdev::slice`); a strided window is an error naming it. An output is a non-`const` array or a
// view of non-`const` elements.

/// Sets every element of `x` to `value`. Signature `void(std::exception_ptr)`.
template <concepts::Queue Q, class X, class Token = const use_future_t&>
requires detail::output_of<X, detail::backend_of<Q>>
auto fill(const Q& q, X&& x, std::type_identity_t<detail::value_of<X>> value, Token&& token = use_future) {
  using T = detail::value_of<X>;
  const auto& s = detail::stream_of(q);
  detail::check_array("fill", "x", x, s.device());
  FillArgs<T, decltype(detail::handle(x))> args{detail::handle(x), x.size(), value};
  return detail::submit_op(s, args, detail::offsets_of(x), std::forward<Token>(token));
}

/// `x *= alpha`, element-wise. f32 and f64 run the backend's `scale` member (or the CPU fallback);
/// every other dtype runs the CPU fallback (counted in `fallback.scale`), with the arithmetic of
/// `kernels::scale`: integers wrap modulo 2^bits, f16/bf16 compute in float and round once, bool
/// is `and`.
template <concepts::Queue Q, class X, class Token = const use_future_t&>
requires detail::output_of<X, detail::backend_of<Q>> && HasDType<detail::value_of<X>>
auto scale(const Q& q, X&& x, std::type_identity_t<detail::value_of<X>> alpha, Token&& token = use_future) {
  using T = detail::value_of<X>;
  const auto& s = detail::stream_of(q);
  detail::check_array("scale", "x", x, s.device());
  ScaleArgs<T, decltype(detail::handle(x))> args{detail::handle(x), x.size(), alpha};
  if constexpr (detail::is_arith<T>)
    return detail::submit_op(s, args, detail::offsets_of(x), std::forward<Token>(token));
  else
    return detail::submit_fallback(s, args, detail::offsets_of(x), std::forward<Token>(token));
}

/// `y += alpha * x`, element-wise; shapes must match; `y` may be `x` itself, not a part of it
/// (f32, f64).
template <concepts::Queue Q, class X, class Y, class Token = const use_future_t&>
requires detail::input_of<X, detail::backend_of<Q>> &&
    detail::output_of_type<Y, detail::backend_of<Q>, detail::value_of<X>> && detail::is_arith<detail::value_of<X>>
auto axpy(const Q& q, std::type_identity_t<detail::value_of<X>> alpha, const X& x, Y&& y, Token&& token = use_future) {
  using T = detail::value_of<X>;
  const auto& s = detail::stream_of(q);
  detail::check_array("axpy", "x", x, s.device());
  detail::check_array("axpy", "y", y, s.device());
  detail::check_same_shape("axpy", x, "x", y, "y");
  detail::check_same_or_apart("axpy", y, "y", x, "x");
  AxpyArgs<T, decltype(detail::handle(x))> args{alpha, detail::handle(x), detail::handle(y), x.size()};
  return detail::submit_op(s, args, detail::offsets_of(x, y), std::forward<Token>(token));
}

namespace detail {
// The checks and arguments of the element-wise binary ops; `native` false runs the CPU fallback.
template <bool native, class Q, class A, class B2, class O, class Token>
auto binary(const char* name, BinaryOp op, const Q& q, const A& a, const B2& b, const O& out, Token&& token) {
  using T = value_of<A>;
  const auto& s = stream_of(q);
  check_array(name, "a", a, s.device());
  check_array(name, "b", b, s.device());
  check_array(name, "out", out, s.device());
  check_same_shape(name, a, "a", b, "b");
  check_same_shape(name, a, "a", out, "out");
  check_same_or_apart(name, out, "out", a, "a");
  check_same_or_apart(name, out, "out", b, "b");
  BinaryArgs<T, decltype(handle(a))> args{op, handle(a), handle(b), handle(out), a.size()};
  if constexpr (native)
    return submit_op(s, args, offsets_of(a, b, out), std::forward<Token>(token));
  else
    return submit_fallback(s, args, offsets_of(a, b, out), std::forward<Token>(token));
}

/// The operands of an element-wise binary op on queue `Q`: inputs `A` and `B2`, output `O`, all of
/// one element type.
template <class Q, class A, class B2, class O>
concept binary_operands = input_of<A, backend_of<Q>> && input_of_type<B2, backend_of<Q>, value_of<A>> &&
    output_of_type<O, backend_of<Q>, value_of<A>>;
}  // namespace detail

/// `out = a + b`, element-wise; all three shapes equal; `out` may be `a` or `b` (the same
/// elements), not a part of one (f32, f64).
template <concepts::Queue Q, class A, class B2, class O, class Token = const use_future_t&>
requires detail::binary_operands<Q, A, B2, O> && detail::is_arith<detail::value_of<A>>
auto add(const Q& q, const A& a, const B2& b, O&& out, Token&& token = use_future) {
  return detail::binary<true>("add", BinaryOp::add, q, a, b, out, std::forward<Token>(token));
}

/// `out = a * b`, element-wise; as `add`.
template <concepts::Queue Q, class A, class B2, class O, class Token = const use_future_t&>
requires detail::binary_operands<Q, A, B2, O> && detail::is_arith<detail::value_of<A>>
auto mul(const Q& q, const A& a, const B2& b, O&& out, Token&& token = use_future) {
  return detail::binary<true>("mul", BinaryOp::mul, q, a, b, out, std::forward<Token>(token));
}

/// `out = min(a, b)`, element-wise: `(b < a) ? b : a`, as `std::min`; as `add` otherwise. Exact
/// (each element is one of the inputs, bit for bit): `a` wins ties, so `minimum(-0.0, +0.0)` is
/// -0.0 and `minimum(+0.0, -0.0)` is +0.0; a NaN in `a` propagates, a NaN in `b` does not.
template <concepts::Queue Q, class A, class B2, class O, class Token = const use_future_t&>
requires detail::binary_operands<Q, A, B2, O> && detail::is_arith<detail::value_of<A>>
auto minimum(const Q& q, const A& a, const B2& b, O&& out, Token&& token = use_future) {
  return detail::binary<true>("minimum", BinaryOp::min, q, a, b, out, std::forward<Token>(token));
}

/// `out = max(a, b)`, element-wise: `(a < b) ? b : a`, as `std::max`; as `minimum` otherwise (`a`
/// wins ties, a NaN in `a` propagates).
template <concepts::Queue Q, class A, class B2, class O, class Token = const use_future_t&>
requires detail::binary_operands<Q, A, B2, O> && detail::is_arith<detail::value_of<A>>
auto maximum(const Q& q, const A& a, const B2& b, O&& out, Token&& token = use_future) {
  return detail::binary<true>("maximum", BinaryOp::max, q, a, b, out, std::forward<Token>(token));
}

/// `out = a op b`, element-wise, for every dtype and every `BinaryOp`: what the collectives combine
/// chunks with. f32 and f64 are exactly `add`, `mul`, `minimum` or `maximum` (the backend's
/// `binary` member, or the CPU fallback); every other dtype runs the CPU fallback (counted in
/// `fallback.add`, ...), with the arithmetic of `kernels::binary` (integers wrap, f16/bf16 round
/// once, min/max select bit for bit). All three shapes equal; `out` may be `a` or `b`.
template <concepts::Queue Q, class A, class B2, class O, class Token = const use_future_t&>
requires detail::binary_operands<Q, A, B2, O> && HasDType<detail::value_of<A>>
auto combine(const Q& q, BinaryOp op, const A& a, const B2& b, O&& out, Token&& token = use_future) {
  if (static_cast<unsigned>(op) > static_cast<unsigned>(BinaryOp::max))
    detail::invalid("combine", "unknown BinaryOp value " + std::to_string(static_cast<unsigned>(op)) +
                                   "; accepted: add (0), mul (1), min (2), max (3)");
  return detail::binary<detail::is_arith<detail::value_of<A>>>(name_of(op), op, q, a, b, out,
                                                               std::forward<Token>(token));
}

/// `out = e^x`, element-wise (f32, f64, f16, bf16; f16 and bf16 computed in float and rounded
/// once); shapes equal; `out` may be `x`, not a part of it. Results match `std::exp` within the
/// backend's documented accuracy (the host backend is `std::exp` itself).
template <concepts::Queue Q, class X, class O, class Token = const use_future_t&>
requires detail::input_of<X, detail::backend_of<Q>> &&
    detail::output_of_type<O, detail::backend_of<Q>, detail::value_of<X>> &&
    (detail::is_arith<detail::value_of<X>> || std::is_same_v<detail::value_of<X>, f16> ||
     std::is_same_v<detail::value_of<X>, bf16>)auto exp(const Q& q, const X& x, O&& out, Token&& token = use_future) {
  using T = detail::value_of<X>;
  const auto& s = detail::stream_of(q);
  detail::check_array("exp", "x", x, s.device());
  detail::check_array("exp", "out", out, s.device());
  detail::check_same_shape("exp", x, "x", out, "out");
  detail::check_same_or_apart("exp", out, "out", x, "x");
  ExpArgs<T, decltype(detail::handle(x))> args{detail::handle(x), detail::handle(out), x.size()};
  return detail::submit_op(s, args, detail::offsets_of(x, out), std::forward<Token>(token));
}

/// Copies `src` into `dst` (same shape; either may be on another device of the same runtime).
/// Arrays or views, contiguous or strided (`Stream::copy` of two windows).
template <concepts::Queue Q, class S, class D, class Token = const use_future_t&>
requires detail::input_of<S, detail::backend_of<Q>> &&
    detail::output_of_type<D, detail::backend_of<Q>, detail::value_of<S>>
auto copy(const Q& q, const S& src, D&& dst, Token&& token = use_future) {
  detail::check_same_shape("copy", src, "src", dst, "dst");
  if constexpr (!detail::is_view_operand<S> && !detail::is_view_operand<D>)
    return detail::stream_of(q).copy(src.buffer(), dst.buffer(), std::forward<Token>(token));
  else
    return detail::stream_of(q).copy(typename xdev::detail::view_of<const std::remove_reference_t<S>>::type(src),
                                     typename xdev::detail::view_of<std::remove_reference_t<D>>::type(dst),
                                     std::forward<Token>(token));
}

}  // namespace xdev::ops
