/// \file
/// The arguments of each portable operation as a backend receives them: plain structs of memory
/// handles, element counts and scalars, already validated by xdev. A backend implements an op by
/// providing the matching member, for example
///
///     void gemm(std::size_t device, const xdev::ops::GemmArgs<float, memory_handle>& args, xdev::Completion done);
///
/// and an op it leaves out runs through the CPU fallback. See docs/ops.md.
#pragma once

#include <xdev/core/dtype.hpp>
#include <xdev/policy/policies.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>

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

/// Element-wise binary operations.
enum class BinaryOp : std::uint8_t { add, mul };

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

/// A user kernel over [0, n): the backend calls `kernel(begin, end)` on disjoint ranges covering
/// [0, n), possibly in parallel (`LaunchableBackend`).
struct LaunchArgs {
  std::size_t n;
  std::size_t grain;
  std::function<void(std::size_t, std::size_t)> kernel;
};

}  // namespace xdev::ops
