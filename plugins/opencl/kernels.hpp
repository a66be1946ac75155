/// \file
/// The OpenCL C program of xdev's OpenCL plugin (`xdev_opencl::kernels::program_source()`) and the
/// launch geometry its kernels expect. The kernels compute what xdev's host kernels
/// (<xdev/ops/host_kernels.hpp>, <xdev/random/stream.hpp>) compute: bit for bit for convert, gather,
/// uniform random numbers and the element-wise ops (IEEE arithmetic; only which NaN comes out of
/// an add or a multiply of two NaNs, and the payload of a NaN an operation creates, are up to the
/// device); in another summation order (so equal for exact sums, close otherwise) for sum, sum_axis,
/// dot and gemm; within a few ulps for normal random numbers.
///
/// Building: the program is built once per context with `-cl-std=CL1.2`, plus `-DXDEV_FP64=1` when
/// the device has cl_khr_fp64; every double kernel (every name with `f64` in it) exists only then.
/// Nothing depends on cl_khr_fp16, 64-bit atomics, images or anything beyond OpenCL C 1.2.
/// `#pragma OPENCL FP_CONTRACT OFF` holds for the whole program: `y + alpha * x` is a multiply
/// and an add, rounded twice, as on the host.
///
/// Storage: bool is `uchar` (0 or 1), u8 `uchar`, i32 `int`, i64 `long`, f16 and bf16 `ushort`
/// (their bit patterns), f32 `float`, f64 `double`. Kernel names spell dtypes as `bool u8 i32 i64
/// f16 bf16 f32 f64`. Counts, strides and offsets are `ulong`, indices are computed in 64 bits.
///
/// Buffers: each buffer parameter below is two kernel arguments, the `cl_mem` and a `ulong` byte
/// offset into it where the kernel's array starts (a multiple of the element size): an op on a
/// window of an array runs at any offset, where a sub-buffer may only start at a multiple of the
/// device's base alignment.
///
/// Launching: every 1-D kernel takes its global size rounded up to a multiple of its local size and
/// ignores the work items past its count. The local sizes of `sum_pass`, `dot_pass` and `sum_axis`
/// are powers of two up to 1024, with `__local` scratch of one element per work item; `gemm` runs
/// on `gemm_range(m, n)` only (its work-group size is fixed).
///
/// Kernels (T is f32 or f64; "n" is the element count):
/// - `scale_T(x, n, alpha)`: `x[i] = x[i] * alpha`.
/// - `axpy_T(alpha, x, y, n)`: `y[i] = y[i] + alpha * x[i]`.
/// - `binary_T(op, a, b, out, n)`: op 0 add, 1 mul, 2 min `(b < a) ? b : a`, 3 max
///   `(a < b) ? b : a` (selections: the result is `a` or `b`, bit for bit). `out` may be `a` or `b`.
/// - `sum_pass_T(x, n, partial, scratch)`: work-group g writes to `partial[g]` the sum of
///   `x[g * C, min((g + 1) * C, n))`, `C = local size * reduce_items`: each work item adds its
///   `reduce_items` elements `g * C + j * L + lid` (j < reduce_items, L = local size) in order, then
///   the group adds the work items' sums as a binary tree. Repeat on the partial sums
///   (`reduce_groups`) until one value is left.
/// - `dot_pass_T(x, y, n, rounding, partial, scratch)`: the first pass of a dot product, on
///   `x[i] * y[i]` with each input rounded first: `rounding` 0 none, 1 to f32, 2 to f16, 3 to bf16
///   (to nearest even, as `xdev::to_f16` / `to_bf16`; from double with one correct rounding).
///   Later passes are `sum_pass_T`.
/// - `sum_axis_T(x, out, outer, axis, inner, scratch)`: x is [outer, axis, inner]; work-group g
///   (`g < outer * inner`) sums `x[o, :, i]`, `o = g / inner`, `i = g % inner`, into
///   `out[o * inner + i]`: its work items stride over the axis, then a tree. Global size
///   `outer * inner * local`.
/// - `sum_axis_small_T(x, out, outer, axis, inner)`: the same, one work item per output element
///   adding the axis in order (for short axes). Both write +0 when `axis == 0`.
///   (Sums start from -0, the identity of IEEE addition, so a sum of -0s is -0, as on the host.)
/// - `gemm_T(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, rounding)`: row-major
///   `C = alpha * op(A) * op(B) + beta * C` as `xdev::kernels::gemm`, `rounding` as for dot on
///   every element of A and B. C is not read when `beta == 0`; A and B are not read when
///   `k == 0` or `alpha == 0` (C becomes `beta * C`, or 0 when `beta == 0`).
/// - `gather_check_I(index, n, rows, status)`, I in i32 and i64: for every bad index (`< 0` or
///   `>= rows`) at position i, `atomic_min(&status[0], min(i, 0xFFFFFFFE))`. The host fills
///   `status[0, 4)` with 0xFFFFFFFF first.
/// - `gather_S_I(table, rows, cols, index, n, out, status)`, S in 1 2 4 8 (element bytes), I in
///   i32 and i64, one work item per output element (global size `n * max(cols, 1)`):
///   `out[i * cols + c] = table[index[i] * cols + c]` when `status[0] == 0xFFFFFFFF`; otherwise
///   nothing is written to `out` and the work item of position `status[0]`, column 0, writes
///   `index[status[0]]` as a long to `status[2, 4)` (also when `cols == 0`). A first bad position
///   past 0xFFFFFFFE is reported as 0xFFFFFFFE, with the index found there.
/// - `rng_uniform_T(out, n, algorithm, seed, offset)` and
///   `rng_normal_T(out, n, algorithm, seed, offset, mean, stddev)`: the streams of
///   <xdev/random/stream.hpp> (algorithm 0 Philox4x32-10, 1 Threefry2x32-20), one work item per
///   value. Uniforms are bit-identical to `xdev::random::fill_uniform`; normals use OpenCL's `log`,
///   `sqrt`, `cos` and `sin`, so they can differ from the host's in the last bits.
/// - `convert_S_D(src, dst, n)` for every pair of distinct dtypes: bit-identical to
///   `xdev::kernels::convert`, with integer arithmetic wherever a float might be subnormal or a
///   NaN (devices may flush float subnormals, or quieten NaNs differently).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace xdev_opencl::kernels {

/// Elements each work item of `sum_pass` / `dot_pass` adds in order before the work-group tree.
inline constexpr std::size_t reduce_items = 8;

/// Work-groups of a reduction pass over n elements with `local` work items each (the n of the
/// next pass). `local * reduce_items` elements per group.
constexpr std::size_t reduce_groups(std::size_t n, std::size_t local) noexcept {
  const std::size_t per_group = local * reduce_items;
  return (n + per_group - 1) / per_group;
}

/// The work-group of `gemm`: `gemm_side` x `gemm_side` work items (fixed with
/// `reqd_work_group_size`), which compute a `gemm_tile_m` x `gemm_tile_n` tile of C; each work item
/// computes 8 rows x 16 columns of it.
inline constexpr std::size_t gemm_side = 8;
inline constexpr std::size_t gemm_tile_m = 64;   ///< rows of C per work-group
inline constexpr std::size_t gemm_tile_n = 128;  ///< columns of C per work-group
/// Work items per gemm work-group: must not exceed CL_DEVICE_MAX_WORK_GROUP_SIZE (nor the kernel's
/// CL_KERNEL_WORK_GROUP_SIZE).
inline constexpr std::size_t gemm_local_items = gemm_side * gemm_side;
/// Depth of the k slices gemm stages in local memory: 32 for f32, 16 for f64, so that a work-group
/// needs `gemm_local_bytes` (24 KiB) of local memory for either (OpenCL's minimum is 32 KiB).
inline constexpr std::size_t gemm_depth_f32 = 32;
inline constexpr std::size_t gemm_depth_f64 = 16;
inline constexpr std::size_t gemm_local_bytes = (gemm_tile_m + gemm_tile_n) * gemm_depth_f32 * 4;
static_assert(gemm_local_bytes == (gemm_tile_m + gemm_tile_n) * gemm_depth_f64 * 8);

/// A 2-D NDRange: global and local sizes per dimension.
struct Range2 {
  std::size_t global[2];
  std::size_t local[2];
};

/// The NDRange of `gemm_T` (f32 and f64 alike) for an m x n C: dimension 0 runs over the columns
/// (n), dimension 1 over the rows (m), one work-group per `gemm_tile_m` x `gemm_tile_n` tile of C.
/// A global size is 0 when m or n is: launch nothing then.
constexpr Range2 gemm_range(std::size_t m, std::size_t n) noexcept {
  return {{(n + gemm_tile_n - 1) / gemm_tile_n * gemm_side, (m + gemm_tile_m - 1) / gemm_tile_m * gemm_side},
          {gemm_side, gemm_side}};
}

namespace detail {

// The program is assembled from the pieces below: the prelude (helpers), the float kernels twice
// (over `T` = float and, under XDEV_FP64, double), the gather kernels for each element size and
// index type, and the conversions.

// Pragmas, storage types, bit-exact conversions between the floating-point formats, rounding of
// gemm/dot inputs, the random generators.
inline constexpr std::string_view prelude = R"CLC(
#pragma OPENCL FP_CONTRACT OFF
#if XDEV_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

// Every buffer parameter is two arguments: the cl_mem and a byte offset into it, so that an op
// runs on a window of an array that starts anywhere (a sub-buffer starts only at a multiple of the
// device's base alignment). XDEV_BUF declares them; XDEV_AT(T, x) makes `x` the window's start.
#define XDEV_BUF(T, x) __global T* x##_base, ulong x##_at
#define XDEV_AT(T, x) __global T* x = (__global T*)((__global const uchar*)x##_base + x##_at)

#define XDEV_REDUCE_ITEMS 8
// gemm geometry (see the gemm kernel). GEMM_DEPTH, the k slice staged at once, is 32 for float
// and 16 for double: 24 KiB of local memory either way.
#define XDEV_GEMM_SIDE 8
#define XDEV_GEMM_ITEMS 64
#define XDEV_GEMM_ROWS 8
#define XDEV_GEMM_TILE_M 64
#define XDEV_GEMM_TILE_N 128
#define XDEV_GEMM_DEPTH_F32 32
#define XDEV_GEMM_DEPTH_F64 16

// dst[q * stride] = v.sq for q < 16 (a vector of 16 stored along a column of local memory).
#define XDEV_SCATTER16(dst, stride, v)                                     \
  {                                                                       \
    __local T* d_ = (dst);                                                \
    d_[0] = (v).s0;                                                       \
    d_[(stride)] = (v).s1;                                                \
    d_[2 * (stride)] = (v).s2;                                            \
    d_[3 * (stride)] = (v).s3;                                            \
    d_[4 * (stride)] = (v).s4;                                            \
    d_[5 * (stride)] = (v).s5;                                            \
    d_[6 * (stride)] = (v).s6;                                            \
    d_[7 * (stride)] = (v).s7;                                            \
    d_[8 * (stride)] = (v).s8;                                            \
    d_[9 * (stride)] = (v).s9;                                            \
    d_[10 * (stride)] = (v).sa;                                           \
    d_[11 * (stride)] = (v).sb;                                           \
    d_[12 * (stride)] = (v).sc;                                           \
    d_[13 * (stride)] = (v).sd;                                           \
    d_[14 * (stride)] = (v).se;                                           \
    d_[15 * (stride)] = (v).sf;                                           \
  }

// Storage type of each dtype.
typedef uchar st_bool;
typedef uchar st_u8;
typedef int st_i32;
typedef long st_i64;
typedef ushort st_f16;
typedef ushort st_bf16;
typedef float st_f32;
#if XDEV_FP64
typedef double st_f64;
#endif

// ---- Floating-point formats, on bit patterns (ports of <xdev/core/half.hpp> and
// <xdev/ops/host_kernels.hpp>). Integer arithmetic only: the results do not depend on whether
// the device flushes float subnormals or how it treats NaNs.

// Float bits to f16 bits, to nearest even (xdev::to_f16). A NaN stays a quiet NaN with its sign
// and the top 9 bits of its payload.
ushort xdev_f16_from_f32(uint x) {
  const uint sign = (x >> 16) & 0x8000u;
  const uint a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (ushort)(sign | 0x7E00u | ((a >> 13) & 0x03FFu));
  if (a >= 0x477FF000u) return (ushort)(sign | 0x7C00u);  // >= 65520: infinity
  if (a >= 0x38800000u) {                                  // normal: rebias, drop 13 bits, round
    const uint truncated = (a >> 13) - (112u << 10);
    const uint rest = a & 0x1FFFu;
    const uint up = (rest > 0x1000u || (rest == 0x1000u && (truncated & 1u))) ? 1u : 0u;
    return (ushort)(sign | (truncated + up));
  }
  // Subnormal f16 (or zero): round(|value| * 2^24) units of 2^-24.
  const uint shift = 126u - (a >> 23);
  if (shift > 24u) return (ushort)sign;
  const uint significand = (a & 0x007FFFFFu) | 0x00800000u;
  const uint truncated = significand >> shift;
  const uint rest = significand & ((1u << shift) - 1u);
  const uint halfway = 1u << (shift - 1u);
  const uint up = (rest > halfway || (rest == halfway && (truncated & 1u))) ? 1u : 0u;
  return (ushort)(sign | (truncated + up));
}

// Float bits to bf16 bits, to nearest even (xdev::to_bf16); a NaN is made quiet.
ushort xdev_bf16_from_f32(uint x) {
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (ushort)((x >> 16) | 0x0040u);
  return (ushort)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// f16 bits to float bits (exact; xdev::to_float).
uint xdev_f32_from_f16(ushort h) {
  const uint sign = (uint)(h & 0x8000u) << 16;
  const uint exponent = (h >> 10) & 0x1Fu;
  const uint fraction = h & 0x03FFu;
  if (exponent == 0x1Fu) return sign | 0x7F800000u | (fraction << 13);
  if (exponent != 0u) return sign | ((exponent + 112u) << 23) | (fraction << 13);
  if (fraction == 0u) return sign;
  const uint p = 31u - clz(fraction);  // subnormal: 2^(p - 24) * 1.xxx, a normal float
  return sign | ((p + 103u) << 23) | ((fraction << (23u - p)) & 0x007FFFFFu);
}

uint xdev_f32_from_bf16(ushort h) {
  return (uint)h << 16;
}

// Float bits to double bits (exact). A NaN becomes quiet and keeps its sign and payload, as the
// x86 and ARM conversions do.
ulong xdev_f64_from_f32(uint x) {
  const ulong sign = (ulong)(x & 0x80000000u) << 32;
  const uint a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7FF8000000000000UL | ((ulong)(a & 0x007FFFFFu) << 29);
  if (a == 0x7F800000u) return sign | 0x7FF0000000000000UL;
  if (a >= 0x00800000u) return sign | ((ulong)((a >> 23) + 896u) << 52) | ((ulong)(a & 0x007FFFFFu) << 29);
  if (a == 0u) return sign;
  const uint p = 31u - clz(a);  // subnormal: a * 2^-149 = 2^(p - 149) * 1.xxx
  return sign | ((ulong)(p + 874u) << 52) | (((ulong)a << (52u - p)) & 0x000FFFFFFFFFFFFFUL);
}

// Double bits to float bits, to nearest even (odd == 0) or to odd (odd != 0: truncated toward
// zero, the last bit set when anything was lost; xdev's to_float_round_to_odd, whose result
// rounds once more to f16 or bf16 exactly as the double would). A NaN becomes quiet and keeps its
// sign and the top of its payload, as the x86 and ARM conversions do.
uint xdev_f32_from_f64(ulong x, int odd) {
  const uint sign = (uint)(x >> 32) & 0x80000000u;
  const ulong a = x & 0x7FFFFFFFFFFFFFFFUL;
  if (a > 0x7FF0000000000000UL) return sign | 0x7FC00000u | (uint)((a >> 29) & 0x007FFFFFUL);
  if (a == 0x7FF0000000000000UL) return sign | 0x7F800000u;
  int e = (int)(a >> 52);
  ulong significand = a & 0x000FFFFFFFFFFFFFUL;
  if (e != 0)
    significand |= 0x0010000000000000UL;
  else
    e = 1;  // double subnormal: significand * 2^(1 - 1075)
  const int fe = e - 896;  // the float's biased exponent, when the result is normal
  if (fe >= 255) return sign | (odd ? 0x7F7FFFFFu : 0x7F800000u);
  // Bits of the 53-bit significand to drop: 29 for a normal float, more for a subnormal one.
  const int shift = min(fe >= 1 ? 29 : 30 - fe, 63);
  ulong kept = significand >> shift;
  const ulong rest = significand & ((1UL << shift) - 1UL);
  if (odd) {
    if (rest != 0UL) kept |= 1UL;
  } else {
    const ulong halfway = 1UL << (shift - 1);
    if (rest > halfway || (rest == halfway && (kept & 1UL) != 0UL)) kept += 1UL;
  }
  // Normal: the leading 1 of kept (bit 23) adds 1 to the exponent field fe - 1, and a carry out of
  // the rounding moves on to the next binade (or to infinity). Subnormal: kept is the pattern (a
  // carry makes it the smallest normal).
  return sign | (fe >= 1 ? ((uint)(fe - 1) << 23) + (uint)kept : (uint)kept);
}

// An int64 as float bits, to nearest even (odd == 0) or to odd (odd != 0; for int64 -> f16/bf16
// this equals the host's round to odd through double, then through float).
uint xdev_f32_from_long(long v, int odd) {
  const ulong mag = v < 0 ? 0UL - (ulong)v : (ulong)v;
  uint bits = 0u;
  if (mag != 0UL) {
    const int w = 64 - (int)clz(mag);  // bit width: |v| is in [2^(w-1), 2^w)
    ulong kept;
    if (w <= 24) {
      kept = mag << (24 - w);
    } else {
      const int shift = w - 24;
      kept = mag >> shift;
      const ulong rest = mag & ((1UL << shift) - 1UL);
      if (odd) {
        if (rest != 0UL) kept |= 1UL;
      } else {
        const ulong halfway = 1UL << (shift - 1);
        if (rest > halfway || (rest == halfway && (kept & 1UL) != 0UL)) kept += 1UL;
      }
    }
    // kept is in [2^23, 2^24] with its leading 1 adding one to the exponent field, as above.
    bits = ((uint)(w + 125) << 23) + (uint)kept;
  }
  return (v < 0 ? 0x80000000u : 0u) | bits;
}

// ---- Rounding of dot and gemm inputs (autocast): 0 none, 1 to f32, 2 to f16, 3 to bf16.

float xdev_round_f32(float v, uint rounding) {
  if (rounding == 2u) return as_float(xdev_f32_from_f16(xdev_f16_from_f32(as_uint(v))));
  if (rounding == 3u) return as_float(xdev_f32_from_bf16(xdev_bf16_from_f32(as_uint(v))));
  return v;  // rounding to f32 is nothing for float data
}

#if XDEV_FP64
double xdev_round_f64(double v, uint rounding) {
  const ulong x = as_ulong(v);
  if (rounding == 1u) return as_double(xdev_f64_from_f32(xdev_f32_from_f64(x, 0)));
  if (rounding == 2u) {
    const ushort h = xdev_f16_from_f32(xdev_f32_from_f64(x, 1));
    return as_double(xdev_f64_from_f32(xdev_f32_from_f16(h)));
  }
  if (rounding == 3u) {
    const ushort h = xdev_bf16_from_f32(xdev_f32_from_f64(x, 1));
    return as_double(xdev_f64_from_f32(xdev_f32_from_bf16(h)));
  }
  return v;
}
#endif

// ---- Counter-based generators (<xdev/random/philox.hpp>, <xdev/random/threefry.hpp>). The
// stream's key is {seed low, seed high}; raw output p is word p % 4 of Philox block p / 4, or word
// p % 2 of Threefry block p / 2, with the block number as the counter {low, high, 0, 0}.

uint4 xdev_philox(ulong block, uint k0, uint k1) {
  uint x0 = (uint)block, x1 = (uint)(block >> 32), x2 = 0u, x3 = 0u;
  for (uint r = 0u; r < 10u; ++r) {
    if (r != 0u) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint hi0 = mul_hi(0xD2511F53u, x0), lo0 = 0xD2511F53u * x0;
    const uint hi1 = mul_hi(0xCD9E8D57u, x2), lo1 = 0xCD9E8D57u * x2;
    x0 = hi1 ^ x1 ^ k0;
    x1 = lo1;
    x2 = hi0 ^ x3 ^ k1;
    x3 = lo0;
  }
  return (uint4)(x0, x1, x2, x3);
}

// Four Threefry2x32 rounds with rotations R0..R3, then key injection number S.
#define XDEV_THREEFRY_4(R0, R1, R2, R3, S)     \
  x0 += x1;                                    \
  x1 = rotate(x1, (uint)(R0)) ^ x0;            \
  x0 += x1;                                    \
  x1 = rotate(x1, (uint)(R1)) ^ x0;            \
  x0 += x1;                                    \
  x1 = rotate(x1, (uint)(R2)) ^ x0;            \
  x0 += x1;                                    \
  x1 = rotate(x1, (uint)(R3)) ^ x0;            \
  x0 += ks[(S) % 3];                           \
  x1 += ks[((S) + 1) % 3] + (uint)(S);

uint2 xdev_threefry(ulong block, uint k0, uint k1) {
  const uint ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  uint x0 = (uint)block + ks[0], x1 = (uint)(block >> 32) + ks[1];
  XDEV_THREEFRY_4(13, 15, 26, 6, 1)
  XDEV_THREEFRY_4(17, 29, 16, 24, 2)
  XDEV_THREEFRY_4(13, 15, 26, 6, 3)
  XDEV_THREEFRY_4(17, 29, 16, 24, 4)
  XDEV_THREEFRY_4(13, 15, 26, 6, 5)
  return (uint2)(x0, x1);
}

// Raw output p of the stream (algorithm 0: Philox, otherwise Threefry).
uint xdev_raw(uint algorithm, ulong seed, ulong p) {
  const uint k0 = (uint)seed, k1 = (uint)(seed >> 32);
  if (algorithm == 0u) {
    const uint4 w = xdev_philox(p >> 2, k0, k1);
    const uint j = (uint)p & 3u;
    return j == 0u ? w.x : j == 1u ? w.y : j == 2u ? w.z : w.w;
  }
  const uint2 w = xdev_threefry(p >> 1, k0, k1);
  return (p & 1UL) == 0UL ? w.x : w.y;
}

// Raw outputs p and p + 1 (positions modulo 2^64), computing a block once when both are in it.
uint2 xdev_raw2(uint algorithm, ulong seed, ulong p) {
  const uint k0 = (uint)seed, k1 = (uint)(seed >> 32);
  if (algorithm == 0u) {
    const uint4 w = xdev_philox(p >> 2, k0, k1);
    switch ((uint)p & 3u) {
      case 0u:
        return w.xy;
      case 1u:
        return w.yz;
      case 2u:
        return w.zw;
      default:
        return (uint2)(w.w, xdev_philox((p + 1UL) >> 2, k0, k1).x);
    }
  }
  const uint2 w = xdev_threefry(p >> 1, k0, k1);
  if ((p & 1UL) == 0UL) return w;
  return (uint2)(w.y, xdev_threefry((p + 1UL) >> 1, k0, k1).x);
}

// A raw output as a float uniform on [0, 1): its top 24 bits times 2^-24 (exact).
float xdev_uniform_bits_f32(uint raw) {
  return (float)(int)(raw >> 8) * 0x1p-24f;
}

float xdev_uniform_at_f32(uint algorithm, ulong seed, ulong p) {
  return xdev_uniform_bits_f32(xdev_raw(algorithm, seed, p));
}

// Box-Muller on the pair of raw outputs starting at p & ~1 (stream.hpp's box_muller): the cosine
// branch for the first value of the pair, the sine branch for the second.
float xdev_normal_at_f32(uint algorithm, ulong seed, ulong p) {
  const uint2 raw = xdev_raw2(algorithm, seed, p & ~1UL);
  const float u1 = (float)(int)((raw.x >> 8) + 1u) * 0x1p-24f;  // (0, 1]: log(u1) is finite
  const float u2 = xdev_uniform_bits_f32(raw.y);
  const float r = sqrt(-2.0f * log(u1));
  const float theta = 2.0f * M_PI_F * u2;
  return (p & 1UL) == 0UL ? r * cos(theta) : r * sin(theta);
}

#if XDEV_FP64
// Two raw outputs as a double uniform on [0, 1): the top 53 bits of first | second << 32.
double xdev_uniform_bits_f64(uint2 raw) {
  const ulong w = (ulong)raw.x | ((ulong)raw.y << 32);
  return (double)(long)(w >> 11) * 0x1p-53;
}

double xdev_uniform_at_f64(uint algorithm, ulong seed, ulong p) {
  return xdev_uniform_bits_f64(xdev_raw2(algorithm, seed, p));
}

// Box-Muller on the four raw outputs starting at p & ~2: the cosine branch when bit 1 of p is
// clear, the sine branch when it is set.
double xdev_normal_at_f64(uint algorithm, ulong seed, ulong p) {
  const ulong start = p & ~2UL;
  const uint2 first = xdev_raw2(algorithm, seed, start);
  const ulong w = (ulong)first.x | ((ulong)first.y << 32);
  const double u1 = (double)(long)((w >> 11) + 1UL) * 0x1p-53;
  const double u2 = xdev_uniform_bits_f64(xdev_raw2(algorithm, seed, start + 2UL));
  const double r = sqrt(-2.0 * log(u1));
  const double theta = 2.0 * M_PI * u2;
  return (p & 2UL) == 0UL ? r * cos(theta) : r * sin(theta);
}
#endif
)CLC";

// The kernels of a floating-point type, written over the macros `T` (the type), `T16` (its vector
// of 16), `NAME(x)` (x with the dtype suffix: `NAME(scale)` is `scale_f32`), `RAW_PER_VALUE` (raw
// random outputs per value: 1 for float, 2 for double) and `GEMM_DEPTH` (gemm's k slice).
inline constexpr std::string_view float_kernels = R"CLC(
__kernel void NAME(scale)(XDEV_BUF(T, x), ulong n, T alpha) {
  XDEV_AT(T, x);
  const ulong i = get_global_id(0);
  if (i < n) x[i] = x[i] * alpha;
}

__kernel void NAME(exp)(XDEV_BUF(const T, x), XDEV_BUF(T, out), ulong n) {
  XDEV_AT(const T, x);
  XDEV_AT(T, out);
  const ulong i = get_global_id(0);
  if (i < n) out[i] = exp(x[i]);
}

__kernel void NAME(axpy)(T alpha, XDEV_BUF(const T, x), XDEV_BUF(T, y), ulong n) {
  XDEV_AT(const T, x);
  XDEV_AT(T, y);
  const ulong i = get_global_id(0);
  if (i < n) y[i] = y[i] + alpha * x[i];
}

__kernel void NAME(binary)(uint op, XDEV_BUF(const T, a), XDEV_BUF(const T, b), XDEV_BUF(T, out), ulong n) {
  XDEV_AT(const T, a);
  XDEV_AT(const T, b);
  XDEV_AT(T, out);
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const T x = a[i], y = b[i];
  T r;
  if (op == 0u)
    r = x + y;
  else if (op == 1u)
    r = x * y;
  else if (op == 2u)
    r = y < x ? y : x;  // min: x on ties and when x is NaN
  else
    r = x < y ? y : x;  // max
  out[i] = r;
}

// The sum of every work item's v, as a binary tree in scratch (one element per work item, local
// size a power of two); valid in work item 0. Every work item of the group must call it.
T NAME(xdev_group_sum)(T v, __local T* scratch) {
  const uint lid = get_local_id(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = (uint)get_local_size(0) / 2u; h > 0u; h >>= 1) {
    if (lid < h) scratch[lid] = scratch[lid] + scratch[lid + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return scratch[0];
}

// Sums start at -0, the identity of IEEE addition (-0 + x is x for every x, -0 and +0 included).

__kernel void NAME(sum_pass)(XDEV_BUF(const T, x), ulong n, XDEV_BUF(T, partial), __local T* scratch) {
  XDEV_AT(const T, x);
  XDEV_AT(T, partial);
  const ulong local_size = get_local_size(0);
  const ulong first = (ulong)get_group_id(0) * local_size * XDEV_REDUCE_ITEMS + get_local_id(0);
  T acc = -(T)0;
#pragma unroll
  for (uint j = 0u; j < XDEV_REDUCE_ITEMS; ++j) {
    const ulong i = first + j * local_size;
    if (i < n) acc = acc + x[i];
  }
  acc = NAME(xdev_group_sum)(acc, scratch);
  if (get_local_id(0) == 0) partial[get_group_id(0)] = acc;
}

__kernel void NAME(dot_pass)(XDEV_BUF(const T, x), XDEV_BUF(const T, y), ulong n, uint rounding,
                             XDEV_BUF(T, partial), __local T* scratch) {
  XDEV_AT(const T, x);
  XDEV_AT(const T, y);
  XDEV_AT(T, partial);
  const ulong local_size = get_local_size(0);
  const ulong first = (ulong)get_group_id(0) * local_size * XDEV_REDUCE_ITEMS + get_local_id(0);
  T acc = -(T)0;
#pragma unroll
  for (uint j = 0u; j < XDEV_REDUCE_ITEMS; ++j) {
    const ulong i = first + j * local_size;
    if (i < n) {
      T u = x[i], v = y[i];
      if (rounding != 0u) {
        u = NAME(xdev_round)(u, rounding);
        v = NAME(xdev_round)(v, rounding);
      }
      acc = acc + u * v;
    }
  }
  acc = NAME(xdev_group_sum)(acc, scratch);
  if (get_local_id(0) == 0) partial[get_group_id(0)] = acc;
}

__kernel void NAME(sum_axis)(XDEV_BUF(const T, x), XDEV_BUF(T, out), ulong outer, ulong axis, ulong inner,
                             __local T* scratch) {
  XDEV_AT(const T, x);
  XDEV_AT(T, out);
  const ulong g = get_group_id(0);
  if (g >= outer * inner) return;  // the whole group leaves: no barrier is skipped by part of it
  const ulong o = g / inner, i = g - o * inner;
  const __global T* row = x + o * axis * inner + i;
  T acc = -(T)0;
  for (ulong j = get_local_id(0); j < axis; j += get_local_size(0)) acc = acc + row[j * inner];
  acc = NAME(xdev_group_sum)(acc, scratch);
  if (get_local_id(0) == 0) out[g] = axis == 0 ? (T)0 : acc;
}

__kernel void NAME(sum_axis_small)(XDEV_BUF(const T, x), XDEV_BUF(T, out), ulong outer, ulong axis, ulong inner) {
  XDEV_AT(const T, x);
  XDEV_AT(T, out);
  const ulong g = get_global_id(0);
  if (g >= outer * inner) return;
  const ulong o = g / inner, i = g - o * inner;
  const __global T* row = x + o * axis * inner + i;
  T acc = (T)0;
  if (axis != 0) {
    acc = row[0];
    for (ulong j = 1; j < axis; ++j) acc = acc + row[j * inner];
  }
  out[g] = acc;
}

// C = alpha * op(A) * op(B) + beta * C, row-major. A work-group of 8 x 8 work items computes a
// 64 x 128 tile of C: rows row0 + [0, 64) with row0 = 64 * group(1), columns col0 + [0, 128) with
// col0 = 128 * group(0). Work item (tx, ty) computes the 8 x 16 block at rows ty * 8 + [0, 8) and
// columns tx * 16 + [0, 16), as 8 accumulator vectors of 16. The shape favours CPU runtimes (the
// vectors of 16 fill their widest SIMD registers, and 64 work items per group keep the per-item
// overhead low); a GPU runs it correctly, with 128 accumulators per work item.
//
// For every slice [k0, k0 + GEMM_DEPTH) of k, the group stages op(A)'s 64 x depth block and op(B)'s
// depth x 128 block in local memory (with whole vectors when the slice lies inside the matrices,
// element by element with zeros outside them at the edges), rounds them per `rounding`, and each
// work item then adds its 8 x 16 products: acc += a * b, unfused, in T, in the order of p.
// A's block keeps its stored layout (rows of p when !trans_a, rows of r when trans_a); B's block is
// always [p][s] (transposed on the way in when trans_b), so that a row of it is one vector load.
__kernel __attribute__((reqd_work_group_size(XDEV_GEMM_SIDE, XDEV_GEMM_SIDE, 1))) void NAME(gemm)(
    uint trans_a, uint trans_b, ulong m, ulong n, ulong k, T alpha, XDEV_BUF(const T, a), ulong lda,
    XDEV_BUF(const T, b), ulong ldb, T beta, XDEV_BUF(T, c), ulong ldc, uint rounding) {
  XDEV_AT(const T, a);
  XDEV_AT(const T, b);
  XDEV_AT(T, c);
  // as[r * GEMM_DEPTH + p] (!trans_a) or as[p * TILE_M + r] (trans_a) = op(A)(row0 + r, k0 + p);
  // bs[p * TILE_N + s] = op(B)(k0 + p, col0 + s).
  __local T as[XDEV_GEMM_TILE_M * GEMM_DEPTH];
  __local T bs[GEMM_DEPTH * XDEV_GEMM_TILE_N];
  const uint tx = get_local_id(0), ty = get_local_id(1);
  const uint lid = ty * XDEV_GEMM_SIDE + tx;
  const ulong row0 = (ulong)get_group_id(1) * XDEV_GEMM_TILE_M;
  const ulong col0 = (ulong)get_group_id(0) * XDEV_GEMM_TILE_N;
  const int interior = row0 + XDEV_GEMM_TILE_M <= m && col0 + XDEV_GEMM_TILE_N <= n;
  T16 acc[XDEV_GEMM_ROWS];
  for (uint i = 0u; i < XDEV_GEMM_ROWS; ++i) acc[i] = (T16)((T)0);
  const int multiply = k != 0 && alpha != (T)0;  // the same in the whole group
  if (multiply) {
    for (ulong k0 = 0; k0 < k; k0 += GEMM_DEPTH) {
      if (interior && k0 + GEMM_DEPTH <= k) {  // the whole slice is inside: vectors of 16
        if (trans_a) {
          for (uint e = lid; e < GEMM_DEPTH * XDEV_GEMM_TILE_M / 16u; e += XDEV_GEMM_ITEMS) {
            const uint p = e / (XDEV_GEMM_TILE_M / 16u), r = e % (XDEV_GEMM_TILE_M / 16u) * 16u;
            vstore16(vload16(0, a + (k0 + p) * lda + row0 + r), 0, as + p * XDEV_GEMM_TILE_M + r);
          }
        } else {
          for (uint e = lid; e < XDEV_GEMM_TILE_M * GEMM_DEPTH / 16u; e += XDEV_GEMM_ITEMS) {
            const uint r = e / (GEMM_DEPTH / 16u), p = e % (GEMM_DEPTH / 16u) * 16u;
            vstore16(vload16(0, a + (row0 + r) * lda + k0 + p), 0, as + r * GEMM_DEPTH + p);
          }
        }
        if (trans_b) {
          for (uint e = lid; e < XDEV_GEMM_TILE_N * GEMM_DEPTH / 16u; e += XDEV_GEMM_ITEMS) {
            const uint s = e / (GEMM_DEPTH / 16u), p = e % (GEMM_DEPTH / 16u) * 16u;
            const T16 v = vload16(0, b + (col0 + s) * ldb + k0 + p);
            XDEV_SCATTER16(bs + p * XDEV_GEMM_TILE_N + s, XDEV_GEMM_TILE_N, v)
          }
        } else {
          for (uint e = lid; e < GEMM_DEPTH * XDEV_GEMM_TILE_N / 16u; e += XDEV_GEMM_ITEMS) {
            const uint p = e / (XDEV_GEMM_TILE_N / 16u), s = e % (XDEV_GEMM_TILE_N / 16u) * 16u;
            vstore16(vload16(0, b + (k0 + p) * ldb + col0 + s), 0, bs + p * XDEV_GEMM_TILE_N + s);
          }
        }
      } else {  // an edge: element by element, zeros outside the matrices
        for (uint e = lid; e < XDEV_GEMM_TILE_M * GEMM_DEPTH; e += XDEV_GEMM_ITEMS) {
          const uint r = trans_a ? e % XDEV_GEMM_TILE_M : e / GEMM_DEPTH;
          const uint p = trans_a ? e / XDEV_GEMM_TILE_M : e % GEMM_DEPTH;
          const ulong gi = row0 + r, gp = k0 + p;
          T v = (T)0;
          if (gi < m && gp < k) v = trans_a ? a[gp * lda + gi] : a[gi * lda + gp];
          as[e] = v;
        }
        for (uint e = lid; e < GEMM_DEPTH * XDEV_GEMM_TILE_N; e += XDEV_GEMM_ITEMS) {
          const uint p = e / XDEV_GEMM_TILE_N, s = e % XDEV_GEMM_TILE_N;
          const ulong gp = k0 + p, gj = col0 + s;
          T v = (T)0;
          if (gp < k && gj < n) v = trans_b ? b[gj * ldb + gp] : b[gp * ldb + gj];
          bs[e] = v;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      if (rounding != 0u) {  // autocast: round the staged inputs (zeros stay zeros)
        for (uint e = lid; e < XDEV_GEMM_TILE_M * GEMM_DEPTH; e += XDEV_GEMM_ITEMS)
          as[e] = NAME(xdev_round)(as[e], rounding);
        for (uint e = lid; e < GEMM_DEPTH * XDEV_GEMM_TILE_N; e += XDEV_GEMM_ITEMS)
          bs[e] = NAME(xdev_round)(bs[e], rounding);
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      // The p loops stay rolled: unrolled, the compiler hoists one local address per (p, i) out of
      // the k loop, and a CPU runtime (PoCL) then keeps each of them in memory across the barriers
      // (measured 3x slower).
      const __local T* brow = bs + tx * 16u;
      if (trans_a) {
        const __local T* arow = as + ty * XDEV_GEMM_ROWS;
#pragma unroll 1
        for (uint p = 0u; p < GEMM_DEPTH; ++p) {
          const T16 bv = vload16(0, brow + p * XDEV_GEMM_TILE_N);
#pragma unroll
          for (uint i = 0u; i < XDEV_GEMM_ROWS; ++i) acc[i] = acc[i] + arow[p * XDEV_GEMM_TILE_M + i] * bv;
        }
      } else {
        const __local T* arow = as + ty * XDEV_GEMM_ROWS * GEMM_DEPTH;
#pragma unroll 1
        for (uint p = 0u; p < GEMM_DEPTH; ++p) {
          const T16 bv = vload16(0, brow + p * XDEV_GEMM_TILE_N);
#pragma unroll
          for (uint i = 0u; i < XDEV_GEMM_ROWS; ++i) acc[i] = acc[i] + arow[i * GEMM_DEPTH + p] * bv;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
  // C = alpha * acc + beta * C; C is not read when beta == 0.
  const ulong col = col0 + tx * 16u;
  if (col >= n) return;
  for (uint i = 0u; i < XDEV_GEMM_ROWS; ++i) {
    const ulong row = row0 + ty * XDEV_GEMM_ROWS + i;
    if (row >= m) break;
    __global T* cp = c + row * ldc + col;
    if (col + 16u <= n) {
      T16 r;
      if (!multiply)
        r = beta == (T)0 ? (T16)((T)0) : beta * vload16(0, cp);
      else if (beta == (T)0)
        r = alpha * acc[i];
      else
        r = alpha * acc[i] + beta * vload16(0, cp);
      vstore16(r, 0, cp);
    } else {
      T v[16];
      vstore16(acc[i], 0, v);
      for (uint j = 0u; j < 16u && col + j < n; ++j) {
        T r;
        if (!multiply)
          r = beta == (T)0 ? (T)0 : beta * cp[j];
        else if (beta == (T)0)
          r = alpha * v[j];
        else
          r = alpha * v[j] + beta * cp[j];
        cp[j] = r;
      }
    }
  }
}

__kernel void NAME(rng_uniform)(XDEV_BUF(T, out), ulong n, uint algorithm, ulong seed, ulong offset) {
  XDEV_AT(T, out);
  const ulong j = get_global_id(0);
  if (j < n) out[j] = NAME(xdev_uniform_at)(algorithm, seed, offset + RAW_PER_VALUE * j);
}

__kernel void NAME(rng_normal)(XDEV_BUF(T, out), ulong n, uint algorithm, ulong seed, ulong offset, T mean,
                               T stddev) {
  XDEV_AT(T, out);
  const ulong j = get_global_id(0);
  if (j < n) out[j] = mean + stddev * NAME(xdev_normal_at)(algorithm, seed, offset + RAW_PER_VALUE * j);
}
)CLC";

// The gather kernels, written over `E` (the element type), `I` (the index type), `NAME_CHECK`
// (gather_check_<index>) and `NAME_GATHER` (gather_<bytes>_<index>). The check is emitted once per
// index type (with `E` undefined).
inline constexpr std::string_view gather_check_kernel = R"CLC(
__kernel void NAME_CHECK(XDEV_BUF(const I, index), ulong n, ulong rows, XDEV_BUF(uint, status)) {
  XDEV_AT(const I, index);
  XDEV_AT(uint, status);
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const I v = index[i];
  if (v < 0 || (ulong)v >= rows) atomic_min(&status[0], (uint)min(i, (ulong)0xFFFFFFFEu));
}
)CLC";

inline constexpr std::string_view gather_kernel = R"CLC(
__kernel void NAME_GATHER(XDEV_BUF(const E, table), ulong rows, ulong cols, XDEV_BUF(const I, index), ulong n,
                          XDEV_BUF(E, out), XDEV_BUF(uint, status)) {
  XDEV_AT(const E, table);
  XDEV_AT(const I, index);
  XDEV_AT(E, out);
  XDEV_AT(uint, status);
  // One work item per output element, or per index when cols == 0 (then only to report).
  const ulong width = max(cols, 1UL);
  const ulong t = get_global_id(0);
  if (t >= n * width) return;
  const ulong i = width == 1 ? t : t / width, c = t - i * width;
  const uint bad = status[0];
  if (bad != 0xFFFFFFFFu) {  // a bad index: report the one at position bad, write nothing else
    if (c == 0 && i == (ulong)bad) ((__global long*)(status + 2))[0] = (long)index[i];
    return;
  }
  if (cols != 0) out[t] = table[(ulong)index[i] * cols + c];
}
)CLC";

// convert_S_D for every pair of distinct dtypes. A source value is loaded as one of three kinds —
// an integer (`long`: bool, u8, i32, i64), float bits (`uint`: f16, bf16, f32, exact) or a double
// — and each destination has one function per kind (D_from_int, D_from_float, D_from_double).
inline constexpr std::string_view convert_kernels = R"CLC(
long load_bool(uchar v) { return v != 0 ? 1 : 0; }
long load_u8(uchar v) { return (long)v; }
long load_i32(int v) { return (long)v; }
long load_i64(long v) { return v; }
uint load_f16(ushort v) { return xdev_f32_from_f16(v); }
uint load_bf16(ushort v) { return xdev_f32_from_bf16(v); }
uint load_f32(float v) { return as_uint(v); }

// From integers: to bool x != 0; to integers modulo 2^bits; to float to nearest even; to f16 and
// bf16 by round to odd to float (exact below 2^24), then to nearest even.
uchar bool_from_int(long v) { return v != 0 ? 1 : 0; }
uchar u8_from_int(long v) { return (uchar)v; }
int i32_from_int(long v) { return as_int((uint)v); }
long i64_from_int(long v) { return v; }
ushort f16_from_int(long v) { return xdev_f16_from_f32(xdev_f32_from_long(v, 1)); }
ushort bf16_from_int(long v) { return xdev_bf16_from_f32(xdev_f32_from_long(v, 1)); }
float f32_from_int(long v) { return as_float(xdev_f32_from_long(v, 0)); }

// From floats (bits): to bool when not +-0 (a NaN is true); to integers truncated toward zero,
// saturated, NaN to 0 (float_to_int).
uchar bool_from_float(uint f) { return (f & 0x7FFFFFFFu) != 0u ? 1 : 0; }
uchar u8_from_float(uint f) {
  const float x = as_float(f);
  if (x != x || x <= 0.0f) return 0;
  if (x >= 256.0f) return 255;
  return (uchar)x;
}
int i32_from_float(uint f) {
  const float x = as_float(f);
  if (x != x) return 0;
  if (x <= -0x1p31f) return INT_MIN;
  if (x >= 0x1p31f) return INT_MAX;
  return (int)x;
}
long i64_from_float(uint f) {
  const float x = as_float(f);
  if (x != x) return 0;
  if (x <= -0x1p63f) return LONG_MIN;
  if (x >= 0x1p63f) return LONG_MAX;
  return (long)x;
}
ushort f16_from_float(uint f) { return xdev_f16_from_f32(f); }
ushort bf16_from_float(uint f) { return xdev_bf16_from_f32(f); }
float f32_from_float(uint f) { return as_float(f); }

// exp of f16 and bf16: computed in float, rounded once to nearest even (xdev::kernels::exp).
__kernel void exp_f16(XDEV_BUF(const ushort, x), XDEV_BUF(ushort, out), ulong n) {
  XDEV_AT(const ushort, x);
  XDEV_AT(ushort, out);
  const ulong i = get_global_id(0);
  if (i < n) out[i] = xdev_f16_from_f32(as_uint(exp(as_float(xdev_f32_from_f16(x[i])))));
}
__kernel void exp_bf16(XDEV_BUF(const ushort, x), XDEV_BUF(ushort, out), ulong n) {
  XDEV_AT(const ushort, x);
  XDEV_AT(ushort, out);
  const ulong i = get_global_id(0);
  if (i < n) out[i] = xdev_bf16_from_f32(as_uint(exp(as_float(xdev_f32_from_bf16(x[i])))));
}

#define XDEV_CONVERT(S, D, KIND)                                                                    \
  __kernel void convert_##S##_##D(XDEV_BUF(const st_##S, src), XDEV_BUF(st_##D, dst), ulong n) { \
    XDEV_AT(const st_##S, src);                                                                \
    XDEV_AT(st_##D, dst);                                                                      \
    const ulong i = get_global_id(0);                                                          \
    if (i < n) dst[i] = D##_from_##KIND(load_##S(src[i]));                               \
  }

XDEV_CONVERT(bool, u8, int) XDEV_CONVERT(bool, i32, int) XDEV_CONVERT(bool, i64, int)
XDEV_CONVERT(bool, f16, int) XDEV_CONVERT(bool, bf16, int) XDEV_CONVERT(bool, f32, int)

XDEV_CONVERT(u8, bool, int) XDEV_CONVERT(u8, i32, int) XDEV_CONVERT(u8, i64, int)
XDEV_CONVERT(u8, f16, int) XDEV_CONVERT(u8, bf16, int) XDEV_CONVERT(u8, f32, int)

XDEV_CONVERT(i32, bool, int) XDEV_CONVERT(i32, u8, int) XDEV_CONVERT(i32, i64, int)
XDEV_CONVERT(i32, f16, int) XDEV_CONVERT(i32, bf16, int) XDEV_CONVERT(i32, f32, int)

XDEV_CONVERT(i64, bool, int) XDEV_CONVERT(i64, u8, int) XDEV_CONVERT(i64, i32, int)
XDEV_CONVERT(i64, f16, int) XDEV_CONVERT(i64, bf16, int) XDEV_CONVERT(i64, f32, int)

XDEV_CONVERT(f16, bool, float) XDEV_CONVERT(f16, u8, float) XDEV_CONVERT(f16, i32, float)
XDEV_CONVERT(f16, i64, float) XDEV_CONVERT(f16, bf16, float) XDEV_CONVERT(f16, f32, float)

XDEV_CONVERT(bf16, bool, float) XDEV_CONVERT(bf16, u8, float) XDEV_CONVERT(bf16, i32, float)
XDEV_CONVERT(bf16, i64, float) XDEV_CONVERT(bf16, f16, float) XDEV_CONVERT(bf16, f32, float)

XDEV_CONVERT(f32, bool, float) XDEV_CONVERT(f32, u8, float) XDEV_CONVERT(f32, i32, float)
XDEV_CONVERT(f32, i64, float) XDEV_CONVERT(f32, f16, float) XDEV_CONVERT(f32, bf16, float)

#if XDEV_FP64
double load_f64(double v) { return v; }

double f64_from_int(long v) { return convert_double(v); }  // to nearest even
double f64_from_float(uint f) { return as_double(xdev_f64_from_f32(f)); }

uchar bool_from_double(double d) { return (as_ulong(d) & 0x7FFFFFFFFFFFFFFFUL) != 0UL ? 1 : 0; }
uchar u8_from_double(double x) {
  if (x != x || x <= 0.0) return 0;
  if (x >= 256.0) return 255;
  return (uchar)x;
}
int i32_from_double(double x) {
  if (x != x) return 0;
  if (x <= -0x1p31) return INT_MIN;
  if (x >= 0x1p31) return INT_MAX;
  return (int)x;
}
long i64_from_double(double x) {
  if (x != x) return 0;
  if (x <= -0x1p63) return LONG_MIN;
  if (x >= 0x1p63) return LONG_MAX;
  return (long)x;
}
ushort f16_from_double(double d) { return xdev_f16_from_f32(xdev_f32_from_f64(as_ulong(d), 1)); }
ushort bf16_from_double(double d) { return xdev_bf16_from_f32(xdev_f32_from_f64(as_ulong(d), 1)); }
float f32_from_double(double d) { return as_float(xdev_f32_from_f64(as_ulong(d), 0)); }

XDEV_CONVERT(bool, f64, int) XDEV_CONVERT(u8, f64, int) XDEV_CONVERT(i32, f64, int) XDEV_CONVERT(i64, f64, int)
XDEV_CONVERT(f16, f64, float) XDEV_CONVERT(bf16, f64, float) XDEV_CONVERT(f32, f64, float)

XDEV_CONVERT(f64, bool, double) XDEV_CONVERT(f64, u8, double) XDEV_CONVERT(f64, i32, double)
XDEV_CONVERT(f64, i64, double) XDEV_CONVERT(f64, f16, double) XDEV_CONVERT(f64, bf16, double)
XDEV_CONVERT(f64, f32, double)
#endif
)CLC";

// Appends `body` between `#define`s of `macros` ({name, replacement}; a name may take parameters,
// "NAME(x)") and the matching `#undef`s.
inline void append_instance(std::string& s, std::initializer_list<std::pair<std::string_view, std::string>> macros,
                            std::string_view body) {
  s += '\n';
  for (const auto& [name, replacement] : macros) {
    s += "#define ";
    s += name;
    s += ' ';
    s += replacement;
    s += '\n';
  }
  s += body;
  for (const auto& [name, replacement] : macros) {
    s += "#undef ";
    s += name.substr(0, name.find('('));
    s += '\n';
  }
}

inline std::string build_program_source() {
  std::string s(prelude);
  append_instance(s,
                  {{"T", "float"},
                   {"T16", "float16"},
                   {"NAME(x)", "x##_f32"},
                   {"RAW_PER_VALUE", "1UL"},
                   {"GEMM_DEPTH", "XDEV_GEMM_DEPTH_F32"}},
                  float_kernels);
  s += "\n#if XDEV_FP64";
  append_instance(s,
                  {{"T", "double"},
                   {"T16", "double16"},
                   {"NAME(x)", "x##_f64"},
                   {"RAW_PER_VALUE", "2UL"},
                   {"GEMM_DEPTH", "XDEV_GEMM_DEPTH_F64"}},
                  float_kernels);
  s += "#endif\n";
  constexpr std::pair<const char*, const char*> index_types[] = {{"i32", "int"}, {"i64", "long"}};
  constexpr const char* element_types[] = {"uchar", "ushort", "uint", "ulong"};  // 1, 2, 4, 8 bytes
  for (const auto& [index_name, index_type] : index_types) {
    append_instance(s, {{"I", index_type}, {"NAME_CHECK", std::string("gather_check_") + index_name}},
                    gather_check_kernel);
    for (int e = 0; e < 4; ++e)
      append_instance(s,
                      {{"E", element_types[e]},
                       {"I", index_type},
                       {"NAME_GATHER", "gather_" + std::to_string(1 << e) + "_" + index_name}},
                      gather_kernel);
  }
  s += convert_kernels;
  return s;
}

// True when the prelude has the line "#define <macro> <value>": the geometry the host uses is the
// program's.
constexpr bool defines(std::string_view macro, std::size_t value) {
  char digits[20] = {};
  std::size_t first = sizeof digits;
  do {
    digits[--first] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  const std::string_view number(digits + first, sizeof digits - first);
  constexpr std::string_view define = "#define ";
  for (std::size_t at = prelude.find(define); at != std::string_view::npos; at = prelude.find(define, at + 1)) {
    std::string_view line = prelude.substr(at + define.size());
    line = line.substr(0, line.find('\n'));
    if (line.size() == macro.size() + 1 + number.size() && line.starts_with(macro) && line[macro.size()] == ' ' &&
        line.ends_with(number))
      return true;
  }
  return false;
}
static_assert(defines("XDEV_REDUCE_ITEMS", reduce_items));
static_assert(defines("XDEV_GEMM_SIDE", gemm_side));
static_assert(defines("XDEV_GEMM_ITEMS", gemm_local_items));
static_assert(defines("XDEV_GEMM_ROWS", gemm_tile_m / gemm_side));
static_assert(defines("XDEV_GEMM_TILE_M", gemm_tile_m));
static_assert(defines("XDEV_GEMM_TILE_N", gemm_tile_n));
static_assert(defines("XDEV_GEMM_DEPTH_F32", gemm_depth_f32));
static_assert(defines("XDEV_GEMM_DEPTH_F64", gemm_depth_f64));
static_assert(!defines("XDEV_GEMM_SIDE", 9) && !defines("XDEV_GEMM_TILE", 64));

}  // namespace detail

/// The whole OpenCL C program, NUL-terminated; built on first use, alive until exit.
inline const char* program_source() {
  static const std::string source = detail::build_program_source();
  return source.c_str();
}

}  // namespace xdev_opencl::kernels
