/// \file
/// The portable operations: the same calls on every device. See docs/ops.md.
///
/// Every op takes a queue (a `Device<B>` or an `AnyDevice`, meaning its default stream, or a
/// `Stream<B>` or an `AnyStream`) and a completion token (default `xdev::use_future`), and is
/// submitted like all device work: it returns at once, takes an in-flight slot, and keeps stream
/// order. Shapes, dtypes and devices are checked before submission (`errc::invalid_argument`
/// naming the shapes; `errc::unimplemented` for a dtype the device does not support, going by
/// `xdev::capabilities_of(device)`), so a rejected call runs nothing.
///
/// Dispatch (`ops::detail::launch_op`, one overload per `*Args` struct, see op_args.hpp): the
/// backend's member of the op's name taking that struct runs it, unless the backend's optional
/// `implements(op, t, t2)` hook refuses the dtypes; a backend without that member, or that
/// refuses, gets the CPU fallback (operands copied to the host, computed there, results copied
/// back), counted by the metric `fallback.<op>`. For the element-wise binary ops (`add`, `mul`,
/// `minimum`, `maximum`, one `binary` member) a backend may also refuse a single operator with the
/// optional `implements_binary(op)` hook (`concepts::DeclaresBinaryOps`): a plugin of an older ABI
/// minor that predates an operator refuses it this way. An `AnyDevice` takes the same path: its
/// erased model rebuilds the typed arguments and calls the same `launch_op`.
#pragma once

#include <xdev/async/stream.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/half.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/device/device.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/autocast.hpp>
#include <xdev/ops/fallback.hpp>
#include <xdev/ops/host_kernels.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/random/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev {

class AnyStream;

namespace concepts {

// clang-format off

/// A handle to one device: a `Device<B>` or an `AnyDevice`.
template <class D>
concept DeviceHandle = requires { typename D::backend_type; } &&
    (std::same_as<D, Device<typename D::backend_type>> || std::same_as<D, AnyDevice>);

/// Where an op is submitted: a device handle (its default stream), a `Stream<B>` or an `AnyStream`.
template <class Q>
concept Queue = requires { typename Q::backend_type; } &&
    (DeviceHandle<Q> || std::same_as<Q, Stream<typename Q::backend_type>> || std::same_as<Q, AnyStream>);

/// Optional backend hook: `b.implements_binary(op)` says whether the backend's `binary` member
/// handles the element-wise operator `op` at all; false runs that call through the CPU fallback
/// (counted in `fallback.<name>`, "fallback.minimum" say) although the member exists. Asked before
/// `implements` (`DeclaresOps`), which decides by dtype. `PluginBackend` refuses `min` and `max`
/// for a plugin of ABI 1.1, which predates them.
///
///     bool implements_binary(xdev::ops::BinaryOp op) const noexcept;
template <class B>
concept DeclaresBinaryOps = requires(const B& b, ops::BinaryOp op) {
  { b.implements_binary(op) } noexcept -> std::convertible_to<bool>;
};

// clang-format on

}  // namespace concepts

namespace ops {
namespace detail {

template <concepts::DeviceHandle D>
auto stream_of(const D& d) {
  return d.default_stream();
}
template <concepts::Queue S>
requires(!concepts::DeviceHandle<S>) const S& stream_of(const S& s) {
  return s;
}

template <class Q>
using backend_of = typename Q::backend_type;

[[noreturn]] inline void invalid(const char* op, const std::string& what) {
  throw error(errc::invalid_argument, std::string(op) + ": " + what);
}

// Unqualified `capabilities_of` calls below find the `AnyDevice` overload by argument-dependent lookup.
template <class D>
void check_dtype(const char* op, DType t, const D& d) {
  if (!capabilities_of(d).supports(t))
    throw error(errc::unimplemented,
                std::string(op) + ": dtype " + std::string(name_of(t)) + " is not supported by " + d.name());
}

template <class T, class B, class D>
void check_array(const char* op, const char* what, const Array<T, B>& a, const D& d) {
  if (a.device() != d) {
    std::string where = a.device().valid() ? a.device().name() : "no device";
    if (a.device().valid() && !a.device().same_runtime(d) && a.device().name() == d.name())
      where += " of another runtime";
    invalid(op, std::string(what) + " is on " + where + ", not on " + d.name());
  }
  if constexpr (HasDType<T>) check_dtype(op, dtype_of<T>, d);
}

template <class T, class U, class B>
void check_same_shape(const char* op, const Array<T, B>& a, const char* an, const Array<U, B>& b, const char* bn) {
  if (a.shape() != b.shape())
    invalid(op, std::string(an) + " has shape " + to_string(a.shape()) + " but " + bn + " has shape " +
                    to_string(b.shape()));
}

// Rejects an output that is one of the inputs, for ops whose kernels read inputs after writing outputs.
template <class T, class B>
void check_not_same(const char* op, const Array<T, B>& out, const char* out_name, const Array<T, B>& in,
                    const char* in_name) {
  if (&out == &in || (out.size() != 0 && out.buffer().native_handle() == in.buffer().native_handle()))
    invalid(op, std::string(out_name) + " is the same array as " + in_name +
                    "; the output must not share memory with an input");
}

template <class T>
inline constexpr bool is_arith = std::is_same_v<T, float> || std::is_same_v<T, double>;

// The handle of an array's memory (the backend's `memory_handle`, or an erased one).
template <class T, class B>
auto handle(const Array<T, B>& a) {
  return a.buffer().native_handle();
}

template <class T, class H>
Staged<H> staged(H h, std::size_t n, bool read, bool written) {
  return {h, n * sizeof(T), read, written};
}

// ---- dispatch: the backend's member, or the CPU fallback -----------------------------------

// False when backend `b` has the `implements` hook and it refuses these arguments' dtypes, or,
// for a binary op, the `implements_binary` hook and it refuses the operator.
template <class B, class Args>
bool runs_natively(const B& b, const Args& args) noexcept {
  using info = op_info<Args>;
  if constexpr (info::known && info::kind == OpKind::binary && concepts::DeclaresBinaryOps<B>) {
    if (!static_cast<bool>(b.implements_binary(args.op))) return false;
  } else {
    (void)args;
  }
  if constexpr (concepts::DeclaresOps<B> && info::known)
    return static_cast<bool>(b.implements(info::kind, info::dtype, info::dtype2));
  else
    return true;
}

// Whether the fallback code of an op with a member must exist: only when `implements` may refuse
// (or, for a binary op, `implements_binary`).
template <class B>
inline constexpr bool may_refuse = concepts::DeclaresOps<B>;

/// Starts an op whose arguments were erased by an `AnyDevice`: defined in <xdev/any/any_device.hpp>.
template <class Args>
void launch_op(const AnyDevice& dev, const Args& args, Completion done);

/// Runs `fill` on `dev`: the backend's `fill` member, or the CPU fallback.
template <class B, class T>
void launch_op(const Device<B>& dev, const FillArgs<T, typename B::memory_handle>& args, Completion done) {
  constexpr bool member = requires(B & b, Completion c) {
    b.fill(std::size_t{}, args, std::move(c));
  };
  if constexpr (member) {
    if (runs_natively(dev.backend(), args)) return dev.backend().fill(dev.ordinal(), args, std::move(done));
  }
  if constexpr (!member || may_refuse<B>) {
    run_fallback<B>(
        "fill", dev.backend(), dev.ordinal(), {staged<T>(args.x, args.n, false, true)},
        [args](std::vector<std::byte*>& p) {
          host::fill(fallback_parallel(), reinterpret_cast<T*>(p[0]), args.n, args.value);
        },
        std::move(done));
  }
}

/// Runs `scale` on `dev`.
template <class B, class T>
void launch_op(const Device<B>& dev, const ScaleArgs<T, typename B::memory_handle>& args, Completion done) {
  constexpr bool member = requires(B & b, Completion c) {
    b.scale(std::size_t{}, args, std::move(c));
  };
  if constexpr (member) {
    if (runs_natively(dev.backend(), args)) return dev.backend().scale(dev.ordinal(), args, std::move(done));
  }
  if constexpr (!member || may_refuse<B>) {
    run_fallback<B>(
        "scale", dev.backend(), dev.ordinal(), {staged<T>(args.x, args.n, true, true)},
        [args](std::vector<std::byte*>& p) {
          host::scale(fallback_parallel(), reinterpret_cast<T*>(p[0]), args.n, args.alpha);
        },
        std::move(done));
  }
}

/// Runs `axpy` on `dev`.
template <class B, class T>
void launch_op(const Device<B>& dev, const AxpyArgs<T, typename B::memory_handle>& args, Completion done) {
  constexpr bool member = requires(B & b, Completion c) {
    b.axpy(std::size_t{}, args, std::move(c));
  };
  if constexpr (member) {
    if (runs_natively(dev.backend(), args)) return dev.backend().axpy(dev.ordinal(), args, std::move(done));
  }
  if constexpr (!member || may_refuse<B>) {
    run_fallback<B>(
        "axpy", dev.backend(), dev.ordinal(),
        {staged<T>(args.x, args.n, true, false), staged<T>(args.y, args.n, true, true)},
        [args](std::vector<std::byte*>& p) {
          host::axpy(fallback_parallel(), args.alpha, reinterpret_cast<const T*>(p[0]), reinterpret_cast<T*>(p[1]),
                     args.n);
        },
        std::move(done));
  }
}

/// Runs `add`, `mul`, `minimum` or `maximum` on `dev` (the fallback counts `fallback.add`,
/// `fallback.mul`, `fallback.minimum` or `fallback.maximum`: see `name_of(BinaryOp)`).
template <class B, class T>
void launch_op(const Device<B>& dev, const BinaryArgs<T, typename B::memory_handle>& args, Completion done) {
  constexpr bool member = requires(B & b, Completion c) {
    b.binary(std::size_t{}, args, std::move(c));
  };
  if constexpr (member) {
    if (runs_natively(dev.backend(), args)) return dev.backend().binary(dev.ordinal(), args, std::move(done));
  }
  if constexpr (!member || may_refuse<B> || concepts::DeclaresBinaryOps<B>) {
    run_fallback<B>(
        name_of(args.op), dev.backend(), dev.ordinal(),
        {staged<T>(args.a, args.n, true, false), staged<T>(args.b, args.n, true, false),
         staged<T>(args.out, args.n, false, true)},
        [args](std::vector<std::byte*>& p) {
          host::binary(fallback_parallel(), args.op, reinterpret_cast<const T*>(p[0]), reinterpret_cast<const T*>(p[1]),
                       reinterpret_cast<T*>(p[2]), args.n);
        },
        std::move(done));
  }
}

/// Runs the full `sum` on `dev`.
template <class B, class T>
void launch_op(const Device<B>& dev, const SumArgs<T, typename B::memory_handle>& args, Completion done) {
  constexpr bool member = requires(B & b, Completion c) {
    b.sum(std::size_t{}, args, std::move(c));
  };
  if constexpr (member) {
    if (runs_natively(dev.backend(), args)) return dev.backend().sum(dev.ordinal(), args, std::move(done));
  }
  if constexpr (!member || may_refuse<B>) {
    run_fallback<B>(
        "sum", dev.backend(), dev.ordinal(), {staged<T>(args.x, args.n, true, false)},
        [args](std::vector<std::byte*>& p) {
          *args.result = host::sum(fallback_parallel(), reinterpret_cast<const T*>(p[0]), args.n);
        },
        std::move(done));
  }
}

/// Runs `sum` along an axis on `dev` (the fallback counts `fallback.sum`).
template <class B, class T>
void launch_op(const Device<B>& dev, const SumAxisArgs<T, typename B::memory_handle>& args, Completion done) {
  constexpr bool member = requires(B & b, Completion c) {
    b.sum_axis(std::size_t{}, args, std::move(c));
  };
  if constexpr (member) {
    if (runs_natively(dev.backend(), args)) return dev.backend().sum_axis(dev.ordinal(), args, std::move(done));
  }
  if constexpr (!member || may_refuse<B>) {
    const std::size_t n = args.outer * args.axis * args.inner;
    run_fallback<B>(
        "sum", dev.backend(), dev.ordinal(),
        {staged<T>(args.x, n, true, false), staged<T>(args.out, args.outer * args.inner, false, true)},
        [args](std::vector<std::byte*>& p) {
          host::sum_axis(fallback_parallel(), reinterpret_cast<const T*>(p[0]), args.outer, args.axis, args.inner,
                         reinterpret_cast<T*>(p[1]));
        },
        std::move(done));
  }
}

/// Runs `dot` on `dev`.
template <class B, class T>
void launch_op(const Device<B>& dev, const DotArgs<T, typename B::memory_handle>& args, Completion done) {
  constexpr bool member = requires(B & b, Completion c) {
    b.dot(std::size_t{}, args, std::move(c));
  };
  if constexpr (member) {
    if (runs_natively(dev.backend(), args)) return dev.backend().dot(dev.ordinal(), args, std::move(done));
  }
  if constexpr (!member || may_refuse<B>) {
    run_fallback<B>(
        "dot", dev.backend(), dev.ordinal(),
        {staged<T>(args.x, args.n, true, false), staged<T>(args.y, args.n, true, false)},
        [args](std::vector<std::byte*>& p) {
          *args.result = host::dot(fallback_parallel(), reinterpret_cast<const T*>(p[0]),
                                   reinterpret_cast<const T*>(p[1]), args.n, args.compute);
        },
        std::move(done));
  }
}

/// Runs `gemm` on `dev`.
template <class B, class T>
void launch_op(const Device<B>& dev, const GemmArgs<T, typename B::memory_handle>& args, Completion done) {
  constexpr bool member = requires(B & b, Completion c) {
    b.gemm(std::size_t{}, args, std::move(c));
  };
  if constexpr (member) {
    if (runs_natively(dev.backend(), args)) return dev.backend().gemm(dev.ordinal(), args, std::move(done));
  }
  if constexpr (!member || may_refuse<B>) {
    run_fallback<B>(
        "gemm", dev.backend(), dev.ordinal(),
        {staged<T>(args.a, args.m * args.k, true, false), staged<T>(args.b, args.k * args.n, true, false),
         staged<T>(args.c, args.m * args.n, args.beta != T(0), true)},
        [args](std::vector<std::byte*>& p) {
          host::gemm(fallback_parallel(), args.trans_a, args.trans_b, args.m, args.n, args.k, args.alpha,
                     reinterpret_cast<const T*>(p[0]), args.lda, reinterpret_cast<const T*>(p[1]), args.ldb, args.beta,
                     reinterpret_cast<T*>(p[2]), args.ldc, args.compute);
        },
        std::move(done));
  }
}

/// Runs `gather` on `dev`.
template <class B, class T, class I>
void launch_op(const Device<B>& dev, const GatherArgs<T, I, typename B::memory_handle>& args, Completion done) {
  constexpr bool member = requires(B & b, Completion c) {
    b.gather(std::size_t{}, args, std::move(c));
  };
  if constexpr (member) {
    if (runs_natively(dev.backend(), args)) return dev.backend().gather(dev.ordinal(), args, std::move(done));
  }
  if constexpr (!member || may_refuse<B>) {
    run_fallback<B>(
        "gather", dev.backend(), dev.ordinal(),
        {staged<T>(args.table, args.rows * args.cols, true, false), staged<I>(args.index, args.n, true, false),
         staged<T>(args.out, args.n * args.cols, false, true)},
        [args](std::vector<std::byte*>& p) {
          host::gather(fallback_parallel(), reinterpret_cast<const T*>(p[0]), args.rows, args.cols,
                       reinterpret_cast<const I*>(p[1]), args.n, reinterpret_cast<T*>(p[2]), args.dense);
        },
        std::move(done));
  }
}

/// Runs `rng_uniform` or `rng_normal` on `dev` (the fallback counts `fallback.rng_uniform` or
/// `fallback.rng_normal`).
template <class B, class T>
void launch_op(const Device<B>& dev, const RngArgs<T, typename B::memory_handle>& args, Completion done) {
  constexpr bool member = requires(B & b, Completion c) {
    b.rng(std::size_t{}, args, std::move(c));
  };
  if constexpr (member) {
    if (runs_natively(dev.backend(), args)) return dev.backend().rng(dev.ordinal(), args, std::move(done));
  }
  if constexpr (!member || may_refuse<B>) {
    run_fallback<B>(
        args.normal ? "rng_normal" : "rng_uniform", dev.backend(), dev.ordinal(),
        {staged<T>(args.out, args.n, false, true)},
        [args](std::vector<std::byte*>& p) {
          host::rng(fallback_parallel(), reinterpret_cast<T*>(p[0]), args.n, args.algorithm, args.seed, args.offset,
                    args.normal, args.mean, args.stddev);
        },
        std::move(done));
  }
}

// The CPU fallback of `convert`, for every pair of dtypes at once (run time `s`, `d`).
template <class B>
void run_convert_fallback(B& backend, std::size_t device, DType s, typename B::memory_handle src, DType d,
                          typename B::memory_handle dst, std::size_t n, Completion done) {
  using H = typename B::memory_handle;
  run_fallback<B>(
      "convert", backend, device,
      {Staged<H>{src, n * size_of(s), true, false}, Staged<H>{dst, n * size_of(d), false, true}},
      [s, d, n](std::vector<std::byte*>& p) { host::convert(fallback_parallel(), s, p[0], d, p[1], n); },
      std::move(done));
}

/// Runs `convert` on `dev`.
template <class B, class S, class D>
void launch_op(const Device<B>& dev, const ConvertArgs<S, D, typename B::memory_handle>& args, Completion done) {
  constexpr bool member = requires(B & b, Completion c) {
    b.convert(std::size_t{}, args, std::move(c));
  };
  if constexpr (member) {
    if (runs_natively(dev.backend(), args)) return dev.backend().convert(dev.ordinal(), args, std::move(done));
  }
  if constexpr (!member || may_refuse<B>)
    run_convert_fallback(dev.backend(), dev.ordinal(), dtype_of<S>, args.src, dtype_of<D>, args.dst, args.n,
                         std::move(done));
}

// Submits an op without a result on `s`: `launch_op(device, args)` once it reaches the device.
template <class S, class Args, class Token>
auto submit_op(const S& s, const Args& args, Token&& token) {
  return s.template submit<void>(
      nullptr, [dev = s.device(), args](Completion done) { launch_op(dev, args, std::move(done)); },
      std::forward<Token>(token));
}

// Submits an op producing a `T` through `args.result` (`sum`, `dot`).
template <class T, class S, class Args, class Token>
auto submit_op_with_result(const S& s, const Args& args, Token&& token) {
  auto slot = std::make_shared<xdev::detail::result_slot<T>>();
  return s.template submit<T>(
      slot,
      [dev = s.device(), args = Args(args), slot](Completion done) mutable {
        args.result = &slot->value.emplace();
        launch_op(dev, args, std::move(done));
      },
      std::forward<Token>(token));
}

}  // namespace detail

// ---- element-wise --------------------------------------------------------------------------

/// Sets every element of `x` to `value`. Signature `void(std::exception_ptr)`.
template <concepts::Queue Q, class T, class Token = const use_future_t&>
auto fill(const Q& q, Array<T, detail::backend_of<Q>>& x, std::type_identity_t<T> value, Token&& token = use_future) {
  const auto& s = detail::stream_of(q);
  detail::check_array("fill", "x", x, s.device());
  FillArgs<T, decltype(detail::handle(x))> args{detail::handle(x), x.size(), value};
  return detail::submit_op(s, args, std::forward<Token>(token));
}

/// `x *= alpha`, element-wise (f32, f64).
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto scale(const Q& q, Array<T, detail::backend_of<Q>>& x, std::type_identity_t<T> alpha, Token&& token = use_future) {
  const auto& s = detail::stream_of(q);
  detail::check_array("scale", "x", x, s.device());
  ScaleArgs<T, decltype(detail::handle(x))> args{detail::handle(x), x.size(), alpha};
  return detail::submit_op(s, args, std::forward<Token>(token));
}

/// `y += alpha * x`, element-wise; shapes must match (f32, f64).
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto axpy(const Q& q, std::type_identity_t<T> alpha, const Array<T, detail::backend_of<Q>>& x,
          Array<T, detail::backend_of<Q>>& y, Token&& token = use_future) {
  const auto& s = detail::stream_of(q);
  detail::check_array("axpy", "x", x, s.device());
  detail::check_array("axpy", "y", y, s.device());
  detail::check_same_shape("axpy", x, "x", y, "y");
  AxpyArgs<T, decltype(detail::handle(x))> args{alpha, detail::handle(x), detail::handle(y), x.size()};
  return detail::submit_op(s, args, std::forward<Token>(token));
}

namespace detail {
template <class Q, class T, class Token>
auto binary(const char* name, BinaryOp op, const Q& q, const Array<T, backend_of<Q>>& a,
            const Array<T, backend_of<Q>>& b, Array<T, backend_of<Q>>& out, Token&& token) {
  const auto& s = stream_of(q);
  check_array(name, "a", a, s.device());
  check_array(name, "b", b, s.device());
  check_array(name, "out", out, s.device());
  check_same_shape(name, a, "a", b, "b");
  check_same_shape(name, a, "a", out, "out");
  BinaryArgs<T, decltype(handle(a))> args{op, handle(a), handle(b), handle(out), a.size()};
  return submit_op(s, args, std::forward<Token>(token));
}
}  // namespace detail

/// `out = a + b`, element-wise; all three shapes equal; `out` may be `a` or `b` (f32, f64).
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto add(const Q& q, const Array<T, detail::backend_of<Q>>& a, const Array<T, detail::backend_of<Q>>& b,
         Array<T, detail::backend_of<Q>>& out, Token&& token = use_future) {
  return detail::binary("add", BinaryOp::add, q, a, b, out, std::forward<Token>(token));
}

/// `out = a * b`, element-wise; as `add`.
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto mul(const Q& q, const Array<T, detail::backend_of<Q>>& a, const Array<T, detail::backend_of<Q>>& b,
         Array<T, detail::backend_of<Q>>& out, Token&& token = use_future) {
  return detail::binary("mul", BinaryOp::mul, q, a, b, out, std::forward<Token>(token));
}

/// `out = min(a, b)`, element-wise: `(b < a) ? b : a`, as `std::min`; as `add` otherwise. Exact
/// (each element is one of the inputs, bit for bit): `a` wins ties, so `minimum(-0.0, +0.0)` is
/// -0.0 and `minimum(+0.0, -0.0)` is +0.0; a NaN in `a` propagates, a NaN in `b` does not.
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto minimum(const Q& q, const Array<T, detail::backend_of<Q>>& a, const Array<T, detail::backend_of<Q>>& b,
             Array<T, detail::backend_of<Q>>& out, Token&& token = use_future) {
  return detail::binary("minimum", BinaryOp::min, q, a, b, out, std::forward<Token>(token));
}

/// `out = max(a, b)`, element-wise: `(a < b) ? b : a`, as `std::max`; as `minimum` otherwise (`a`
/// wins ties, a NaN in `a` propagates).
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto maximum(const Q& q, const Array<T, detail::backend_of<Q>>& a, const Array<T, detail::backend_of<Q>>& b,
             Array<T, detail::backend_of<Q>>& out, Token&& token = use_future) {
  return detail::binary("maximum", BinaryOp::max, q, a, b, out, std::forward<Token>(token));
}

/// Copies `src` into `dst` (same shape; either may be on another device of the same runtime).
template <concepts::Queue Q, class T, class Token = const use_future_t&>
auto copy(const Q& q, const Array<T, detail::backend_of<Q>>& src, Array<T, detail::backend_of<Q>>& dst,
          Token&& token = use_future) {
  detail::check_same_shape("copy", src, "src", dst, "dst");
  return detail::stream_of(q).copy(src.buffer(), dst.buffer(), std::forward<Token>(token));
}

// ---- reductions ----------------------------------------------------------------------------

/// The sum of every element of `x`, delivered as the result (`void(std::exception_ptr, T)`).
/// f32 sums are pairwise: the error grows with log(n).
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto sum(const Q& q, const Array<T, detail::backend_of<Q>>& x, Token&& token = use_future) {
  const auto& s = detail::stream_of(q);
  detail::check_array("sum", "x", x, s.device());
  SumArgs<T, decltype(detail::handle(x))> args{detail::handle(x), x.size(), nullptr};
  return detail::submit_op_with_result<T>(s, args, std::forward<Token>(token));
}

/// Sums `x` along dimension `axis` (negative counts from the back) into `out`, whose shape is
/// `x`'s without that dimension.
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto sum(const Q& q, const Array<T, detail::backend_of<Q>>& x, std::ptrdiff_t axis,
         Array<T, detail::backend_of<Q>>& out, Token&& token = use_future) {
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
  SumAxisArgs<T, decltype(detail::handle(x))> args{detail::handle(x), detail::handle(out), outer,
                                                   static_cast<std::size_t>(xs[static_cast<std::ptrdiff_t>(ax)]),
                                                   inner};
  return detail::submit_op(s, args, std::forward<Token>(token));
}

/// The dot product of `x` and `y` (same shape, flattened), as the result. Inside an autocast
/// scope matching the device's `Autocast` policy, f32 inputs are rounded to the policy's dtype.
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto dot(const Q& q, const Array<T, detail::backend_of<Q>>& x, const Array<T, detail::backend_of<Q>>& y,
         Token&& token = use_future) {
  const auto& s = detail::stream_of(q);
  detail::check_array("dot", "x", x, s.device());
  detail::check_array("dot", "y", y, s.device());
  detail::check_same_shape("dot", x, "x", y, "y");
  DotArgs<T, decltype(detail::handle(x))> args{detail::handle(x), detail::handle(y), x.size(), nullptr,
                                               autocast_compute_dtype(capabilities_of(s.device()), dtype_of<T>)};
  return detail::submit_op_with_result<T>(s, args, std::forward<Token>(token));
}

// ---- matrix multiply -----------------------------------------------------------------------

/// Options of `gemm`: `C = alpha * op(A) * op(B) + beta * C`, op = transpose when asked.
template <class T>
struct GemmOptions {
  bool trans_a = false;
  bool trans_b = false;
  T alpha = T(1);
  T beta = T(0);
};

/// Row-major matrix multiply: `c = alpha * op(a) * op(b) + beta * c`, all three 2-D. With
/// `beta == 0`, `c` is not read. Inside a matching autocast scope, f32 inputs are rounded to the
/// device's autocast dtype and accumulated in f32.
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto gemm(const Q& q, const Array<T, detail::backend_of<Q>>& a, const Array<T, detail::backend_of<Q>>& b,
          Array<T, detail::backend_of<Q>>& c, GemmOptions<T> opt = {}, Token&& token = use_future) {
  const auto& s = detail::stream_of(q);
  detail::check_array("gemm", "a", a, s.device());
  detail::check_array("gemm", "b", b, s.device());
  detail::check_array("gemm", "c", c, s.device());
  detail::check_not_same("gemm", c, "c", a, "a");
  detail::check_not_same("gemm", c, "c", b, "b");
  for (auto [arr, nm] : {std::pair{&a.shape(), "a"}, std::pair{&b.shape(), "b"}, std::pair{&c.shape(), "c"}})
    if (arr->rank() != 2) detail::invalid("gemm", std::string(nm) + " must be 2-D, but has shape " + to_string(*arr));
  const auto m = static_cast<std::size_t>(opt.trans_a ? a.shape()[1] : a.shape()[0]);
  const auto k = static_cast<std::size_t>(opt.trans_a ? a.shape()[0] : a.shape()[1]);
  const auto kb = static_cast<std::size_t>(opt.trans_b ? b.shape()[1] : b.shape()[0]);
  const auto n = static_cast<std::size_t>(opt.trans_b ? b.shape()[0] : b.shape()[1]);
  if (k != kb)
    detail::invalid("gemm", std::string("op(a) is [") + std::to_string(m) + ", " + std::to_string(k) +
                                "] but op(b) is [" + std::to_string(kb) + ", " + std::to_string(n) + "] (a " +
                                to_string(a.shape()) + ", b " + to_string(b.shape()) + "): inner dimensions differ");
  if (c.shape() != Shape{static_cast<std::int64_t>(m), static_cast<std::int64_t>(n)})
    detail::invalid("gemm", "c has shape " + to_string(c.shape()) + " but op(a)·op(b) is [" + std::to_string(m) + ", " +
                                std::to_string(n) + "]");
  GemmArgs<T, decltype(detail::handle(a))> args{opt.trans_a,
                                                opt.trans_b,
                                                m,
                                                n,
                                                k,
                                                opt.alpha,
                                                detail::handle(a),
                                                static_cast<std::size_t>(a.shape()[1]),
                                                detail::handle(b),
                                                static_cast<std::size_t>(b.shape()[1]),
                                                opt.beta,
                                                detail::handle(c),
                                                n,
                                                autocast_compute_dtype(capabilities_of(s.device()), dtype_of<T>)};
  return detail::submit_op(s, args, std::forward<Token>(token));
}

// ---- gather --------------------------------------------------------------------------------

/// `out[i, :] = table[index[i], :]` for a 2-D `table` [rows, cols], a 1-D `index` [n] of i32 or
/// i64, and `out` [n, cols]. The device's `DenseGather<F>` policy picks the lowering: dense when
/// `rows <= F * 10` (and F > 0), else sparse; both give bit-identical results, and the metrics
/// `gather.dense` / `gather.sparse` count which ran. An index outside [0, rows) fails the op with
/// `errc::invalid_argument` naming the index and its position, and `out` is not written.
template <concepts::Queue Q, class T, class I, class Token = const use_future_t&>
requires(std::is_same_v<I, std::int32_t> ||
         std::is_same_v<I, std::int64_t>) auto gather(const Q& q, const Array<T, detail::backend_of<Q>>& table,
                                                      const Array<I, detail::backend_of<Q>>& index,
                                                      Array<T, detail::backend_of<Q>>& out,
                                                      Token&& token = use_future) {
  const auto& s = detail::stream_of(q);
  detail::check_array("gather", "table", table, s.device());
  detail::check_array("gather", "index", index, s.device());
  detail::check_array("gather", "out", out, s.device());
  detail::check_not_same("gather", out, "out", table, "table");
  if (table.rank() != 2) detail::invalid("gather", "table must be 2-D, but has shape " + to_string(table.shape()));
  if (index.rank() != 1) detail::invalid("gather", "index must be 1-D, but has shape " + to_string(index.shape()));
  const Shape want{index.shape()[0], table.shape()[1]};
  if (out.shape() != want)
    detail::invalid("gather", "out has shape " + to_string(out.shape()) + " but gathering " + to_string(index.shape()) +
                                  " rows of " + to_string(table.shape()) + " gives " + to_string(want));
  const auto rows = static_cast<std::size_t>(table.shape()[0]);
  const bool dense = capabilities_of(s.device()).uses_dense_gather(rows);
  metrics::counter(dense ? "gather.dense" : "gather.sparse").add();
  GatherArgs<T, I, decltype(detail::handle(table))> args{
      detail::handle(table), rows, static_cast<std::size_t>(table.shape()[1]), detail::handle(index), index.size(),
      detail::handle(out),   dense};
  return detail::submit_op(s, args, std::forward<Token>(token));
}

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
template <class Q, class T, class Token>
auto rng(const char* name, const Q& q, Array<T, backend_of<Q>>& out, bool normal, T mean, T stddev, RngOptions opt,
         Token&& token) {
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
  return submit_op(s, args, std::forward<Token>(token));
}
}  // namespace detail

/// Fills `out` with uniform numbers in [0, 1) from a counter-based stream (f32, f64).
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto rng_uniform(const Q& q, Array<T, detail::backend_of<Q>>& out, RngOptions opt = {}, Token&& token = use_future) {
  return detail::rng("rng_uniform", q, out, false, T(0), T(1), opt, std::forward<Token>(token));
}

/// Fills `out` with normal numbers (Box–Muller on the same stream as `rng_uniform`).
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto rng_normal(const Q& q, Array<T, detail::backend_of<Q>>& out, std::type_identity_t<T> mean = T(0),
                std::type_identity_t<T> stddev = T(1), RngOptions opt = {}, Token&& token = use_future) {
  return detail::rng("rng_normal", q, out, true, mean, stddev, opt, std::forward<Token>(token));
}

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

}  // namespace ops
}  // namespace xdev

namespace xdev {

namespace concepts {
/// A backend that runs user C++ kernels: `b.launch(device, ops::LaunchArgs, done)` calls
/// `args.kernel(begin, end)` on disjoint ranges covering [0, n), possibly in parallel.
template <class B>
concept LaunchableBackend = Backend<B> && requires(B& b, std::size_t d, ops::LaunchArgs a, Completion c) {
  b.launch(d, std::move(a), std::move(c));
};
}  // namespace concepts

/// Runs `f(i)` for every i in [0, n) on the device, in parallel where the backend can; submitted
/// like any op (signature `void(std::exception_ptr)`; the first exception `f` throws fails it).
/// `f` must be safe to call concurrently and may only touch memory the host can address.
///
///     xdev::parallel_for(dev, a.size(), [p = a.buffer().host_data()](std::size_t i) { p[i] *= 2; }).get();
template <concepts::Queue Q, class F, class Token = const use_future_t&>
requires concepts::LaunchableBackend<ops::detail::backend_of<Q>> && std::is_invocable_v<const F&, std::size_t>
auto parallel_for(const Q& q, std::size_t n, F f, Token&& token = use_future) {
  const auto& s = ops::detail::stream_of(q);
  ops::LaunchArgs args{n, 0, [f = std::move(f)](std::size_t begin, std::size_t end) {
                         for (std::size_t i = begin; i < end; ++i) f(i);
                       }};
  return s.template submit<void>(
      nullptr,
      [dev = s.device(), args = std::move(args)](Completion done) mutable {
        dev.backend().launch(dev.ordinal(), std::move(args), std::move(done));
      },
      std::forward<Token>(token));
}

}  // namespace xdev
