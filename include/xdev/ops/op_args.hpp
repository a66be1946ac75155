/// \file
/// The arguments of each portable operation as a backend receives them: plain structs of memory
/// handles, element counts and scalars, already validated by xdev. A backend implements an op by
/// providing the matching member, for example
///
///     void gemm(std::size_t device, const xdev::ops::GemmArgs<float, memory_handle>& args, xdev::Completion done);
///
/// and an op it leaves out runs through the CPU fallback. See docs/ops.md.
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/op_kind.hpp>
#include <xdev/policy/policies.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <type_traits>
#include <utility>

namespace xdev::ops {

/// `x[i] = value` for i < n.
template <class T, class H>
struct FillArgs {
  H x;
  std::size_t n;
  T value;
};

/// `x[i] *= alpha`.
template <class T, class H>
struct ScaleArgs {
  H x;
  std::size_t n;
  T alpha;
};

/// `y[i] += alpha * x[i]`.
template <class T, class H>
struct AxpyArgs {
  T alpha;
  H x;
  H y;
  std::size_t n;
};

/// `out[i] = a[i] op b[i]`; `out` may be `a` or `b`.
template <class T, class H>
struct BinaryArgs {
  BinaryOp op;
  H a;
  H b;
  H out;
  std::size_t n;
};

/// `*result = sum of x[i]` (written to host memory before `done`). f32 sums are pairwise, so the
/// error grows with log(n), not n.
template <class T, class H>
struct SumArgs {
  H x;
  std::size_t n;
  T* result;
};

/// Sum over the middle axis of `x` viewed as [outer, axis, inner], into `out` of [outer, inner].
template <class T, class H>
struct SumAxisArgs {
  H x;
  H out;
  std::size_t outer;
  std::size_t axis;
  std::size_t inner;
};

/// `*result = sum of x[i] * y[i]`. When `compute` is f16 or bf16 (autocast), each input is first
/// rounded to it (round to nearest even); products accumulate in f32 either way.
template <class T, class H>
struct DotArgs {
  H x;
  H y;
  std::size_t n;
  T* result;
  DType compute;
};

/// Row-major `C = alpha * op(A) * op(B) + beta * C` with `op(A)` m×k, `op(B)` k×n, C m×n.
/// `lda`, `ldb`, `ldc` are the row strides of A, B, C as stored. `compute` as for `DotArgs`.
/// With `beta == 0`, C is not read (NaNs in it do not propagate).
template <class T, class H>
struct GemmArgs {
  bool trans_a;
  bool trans_b;
  std::size_t m;
  std::size_t n;
  std::size_t k;
  T alpha;
  H a;
  std::size_t lda;
  H b;
  std::size_t ldb;
  T beta;
  H c;
  std::size_t ldc;
  DType compute;
};

/// `out[i, :] = table[index[i], :]` for a table of rows×cols. Indices were not range-checked:
/// an index outside [0, rows) must fail the op (xdev's host kernels throw `errc::invalid_argument`
/// naming the index and its position) without writing `out`. `dense` selects the lowering the
/// device's `DenseGather` policy asked for; both must give bit-identical results.
template <class T, class I, class H>
struct GatherArgs {
  H table;
  std::size_t rows;
  std::size_t cols;
  H index;
  std::size_t n;
  H out;
  bool dense;
};

/// Counter-based random numbers: element j of `out` is element `offset + j` of the stream
/// (algorithm, seed); uniform in [0, 1) or normal(mean, stddev). See <xdev/random/stream.hpp>.
template <class T, class H>
struct RngArgs {
  H out;
  std::size_t n;
  RngAlgorithm algorithm;
  std::uint64_t seed;
  std::uint64_t offset;
  bool normal;
  T mean;
  T stddev;
};

/// `dst[i] = D(src[i])`; to f16/bf16 with round to nearest even.
template <class S, class D, class H>
struct ConvertArgs {
  H src;
  H dst;
  std::size_t n;
};

/// `out[i] = e^x[i]` (f32, f64, f16, bf16; f16/bf16 computed in float and rounded once); `out`
/// may be `x`.
template <class T, class H>
struct ExpArgs {
  H x;
  H out;
  std::size_t n;
};

/// A user kernel over [0, n): the backend calls `kernel(begin, end)` on disjoint ranges covering
/// [0, n), possibly in parallel (`LaunchableBackend`).
struct LaunchArgs {
  std::size_t n;
  std::size_t grain;
  std::function<void(std::size_t, std::size_t)> kernel;
};

namespace detail {

template <class T>
constexpr DType dtype_or_default() noexcept {
  if constexpr (HasDType<T>)
    return dtype_of<T>;
  else
    return DType{};
}

template <OpKind Op, class T, class U = T>
struct op_info_base {
  static constexpr OpKind kind = Op;
  /// False when an element type has no dtype (then `dtype` and `dtype2` mean nothing).
  static constexpr bool known = HasDType<T> && HasDType<U>;
  static constexpr DType dtype = dtype_or_default<T>();
  static constexpr DType dtype2 = dtype_or_default<U>();
};

/// What an `*Args` struct describes, one row per op: its `OpKind`; the `t`, `t2` a backend's
/// `implements` hook is asked about (index dtype for gather, destination dtype for convert, else
/// `t` again); and `native(b, device, args, done)`, the call of the backend member that runs it
/// (`b.fill(device, args, done)` for `FillArgs`, ...), usable only when the backend has it. The one
/// place that names each op's member: the dispatch (`ops::has_native_op`) and the plugin table
/// (`XDEV_DEFINE_PLUGIN`) both read it.
template <class Args>
struct op_info {
  static constexpr bool known = false;
};
template <class T, class H>
struct op_info<FillArgs<T, H>> : op_info_base<OpKind::fill, T> {
  template <class B>
  static auto native(B& b, std::size_t d, const FillArgs<T, H>& a, Completion c)
      -> decltype(b.fill(d, a, std::move(c))) {
    return b.fill(d, a, std::move(c));
  }
};
template <class T, class H>
struct op_info<ScaleArgs<T, H>> : op_info_base<OpKind::scale, T> {
  template <class B>
  static auto native(B& b, std::size_t d, const ScaleArgs<T, H>& a, Completion c)
      -> decltype(b.scale(d, a, std::move(c))) {
    return b.scale(d, a, std::move(c));
  }
};
template <class T, class H>
struct op_info<AxpyArgs<T, H>> : op_info_base<OpKind::axpy, T> {
  template <class B>
  static auto native(B& b, std::size_t d, const AxpyArgs<T, H>& a, Completion c)
      -> decltype(b.axpy(d, a, std::move(c))) {
    return b.axpy(d, a, std::move(c));
  }
};
template <class T, class H>
struct op_info<BinaryArgs<T, H>> : op_info_base<OpKind::binary, T> {
  template <class B>
  static auto native(B& b, std::size_t d, const BinaryArgs<T, H>& a, Completion c)
      -> decltype(b.binary(d, a, std::move(c))) {
    return b.binary(d, a, std::move(c));
  }
};
template <class T, class H>
struct op_info<SumArgs<T, H>> : op_info_base<OpKind::sum, T> {
  template <class B>
  static auto native(B& b, std::size_t d, const SumArgs<T, H>& a, Completion c) -> decltype(b.sum(d, a, std::move(c))) {
    return b.sum(d, a, std::move(c));
  }
};
template <class T, class H>
struct op_info<SumAxisArgs<T, H>> : op_info_base<OpKind::sum_axis, T> {
  template <class B>
  static auto native(B& b, std::size_t d, const SumAxisArgs<T, H>& a, Completion c)
      -> decltype(b.sum_axis(d, a, std::move(c))) {
    return b.sum_axis(d, a, std::move(c));
  }
};
template <class T, class H>
struct op_info<DotArgs<T, H>> : op_info_base<OpKind::dot, T> {
  template <class B>
  static auto native(B& b, std::size_t d, const DotArgs<T, H>& a, Completion c) -> decltype(b.dot(d, a, std::move(c))) {
    return b.dot(d, a, std::move(c));
  }
};
template <class T, class H>
struct op_info<GemmArgs<T, H>> : op_info_base<OpKind::gemm, T> {
  template <class B>
  static auto native(B& b, std::size_t d, const GemmArgs<T, H>& a, Completion c)
      -> decltype(b.gemm(d, a, std::move(c))) {
    return b.gemm(d, a, std::move(c));
  }
};
template <class T, class I, class H>
struct op_info<GatherArgs<T, I, H>> : op_info_base<OpKind::gather, T, I> {
  template <class B>
  static auto native(B& b, std::size_t d, const GatherArgs<T, I, H>& a, Completion c)
      -> decltype(b.gather(d, a, std::move(c))) {
    return b.gather(d, a, std::move(c));
  }
};
template <class T, class H>
struct op_info<RngArgs<T, H>> : op_info_base<OpKind::rng, T> {
  template <class B>
  static auto native(B& b, std::size_t d, const RngArgs<T, H>& a, Completion c) -> decltype(b.rng(d, a, std::move(c))) {
    return b.rng(d, a, std::move(c));
  }
};
template <class S, class D, class H>
struct op_info<ConvertArgs<S, D, H>> : op_info_base<OpKind::convert, S, D> {
  template <class B>
  static auto native(B& b, std::size_t d, const ConvertArgs<S, D, H>& a, Completion c)
      -> decltype(b.convert(d, a, std::move(c))) {
    return b.convert(d, a, std::move(c));
  }
};
template <class T, class H>
struct op_info<ExpArgs<T, H>> : op_info_base<OpKind::exp, T> {
  template <class B>
  static auto native(B& b, std::size_t d, const ExpArgs<T, H>& a, Completion c) -> decltype(b.exp(d, a, std::move(c))) {
    return b.exp(d, a, std::move(c));
  }
};

// The same arguments with every memory handle mapped through `f` (an erased handle to the
// backend's own, for example); everything else is copied.
template <class H2, class T, class H, class F>
FillArgs<T, H2> rebind_handles(const FillArgs<T, H>& a, F&& f) {
  return {f(a.x), a.n, a.value};
}
template <class H2, class T, class H, class F>
ScaleArgs<T, H2> rebind_handles(const ScaleArgs<T, H>& a, F&& f) {
  return {f(a.x), a.n, a.alpha};
}
template <class H2, class T, class H, class F>
AxpyArgs<T, H2> rebind_handles(const AxpyArgs<T, H>& a, F&& f) {
  return {a.alpha, f(a.x), f(a.y), a.n};
}
template <class H2, class T, class H, class F>
BinaryArgs<T, H2> rebind_handles(const BinaryArgs<T, H>& a, F&& f) {
  return {a.op, f(a.a), f(a.b), f(a.out), a.n};
}
template <class H2, class T, class H, class F>
SumArgs<T, H2> rebind_handles(const SumArgs<T, H>& a, F&& f) {
  return {f(a.x), a.n, a.result};
}
template <class H2, class T, class H, class F>
SumAxisArgs<T, H2> rebind_handles(const SumAxisArgs<T, H>& a, F&& f) {
  return {f(a.x), f(a.out), a.outer, a.axis, a.inner};
}
template <class H2, class T, class H, class F>
DotArgs<T, H2> rebind_handles(const DotArgs<T, H>& a, F&& f) {
  return {f(a.x), f(a.y), a.n, a.result, a.compute};
}
template <class H2, class T, class H, class F>
GemmArgs<T, H2> rebind_handles(const GemmArgs<T, H>& a, F&& f) {
  return {a.trans_a, a.trans_b, a.m, a.n, a.k, a.alpha, f(a.a), a.lda, f(a.b), a.ldb, a.beta, f(a.c), a.ldc, a.compute};
}
template <class H2, class T, class I, class H, class F>
GatherArgs<T, I, H2> rebind_handles(const GatherArgs<T, I, H>& a, F&& f) {
  return {f(a.table), a.rows, a.cols, f(a.index), a.n, f(a.out), a.dense};
}
template <class H2, class T, class H, class F>
RngArgs<T, H2> rebind_handles(const RngArgs<T, H>& a, F&& f) {
  return {f(a.out), a.n, a.algorithm, a.seed, a.offset, a.normal, a.mean, a.stddev};
}
template <class H2, class S, class D, class H, class F>
ConvertArgs<S, D, H2> rebind_handles(const ConvertArgs<S, D, H>& a, F&& f) {
  return {f(a.src), f(a.dst), a.n};
}
template <class H2, class T, class H, class F>
ExpArgs<T, H2> rebind_handles(const ExpArgs<T, H>& a, F&& f) {
  return {f(a.x), f(a.out), a.n};
}

}  // namespace detail

/// True when backend `B` runs the op of `Args` itself: it has the op's member (`fill` for
/// `FillArgs`, ...), or one member template for every op,
///
///     template <class Args> void run_op(std::size_t device, const Args& args, xdev::Completion done);
///
/// (what `plugin::PluginBackend` has: one entry per op of the plugin's table). Whether a call then
/// runs there is `runs_natively`'s to say (the `implements` hooks).
template <class B, class Args>
inline constexpr bool has_native_op = requires(B& b, const Args& a, Completion c) {
  detail::op_info<Args>::native(b, std::size_t{}, a, std::move(c));
}
|| requires(B& b, const Args& a, Completion c) {
  b.run_op(std::size_t{}, a, std::move(c));
};

namespace detail {

/// Calls backend `b`'s member for the op of `args` (its named member, else its `run_op`).
template <class B, class Args>
requires has_native_op<B, Args>
void call_native(B& b, std::size_t device, const Args& args, Completion done) {
  if constexpr (requires { op_info<Args>::native(b, device, args, std::move(done)); })
    op_info<Args>::native(b, device, args, std::move(done));
  else
    b.run_op(device, args, std::move(done));
}

}  // namespace detail

}  // namespace xdev::ops
