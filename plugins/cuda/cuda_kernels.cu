// The CUDA plugin's device code: see cuda_kernels.h for what each launcher computes. The helpers
// are ports of xdev's host definitions (<xdev/core/half.hpp>, <xdev/kernels/convert.hpp>,
// <xdev/random/*.hpp>) and of the OpenCL plugin's kernels, on bit patterns wherever a float might
// be subnormal or a NaN, so that results do not depend on how the device treats those.
//
// Compiled with --fmad=false (plugins/cuda/CMakeLists.txt): no multiply-add is fused, as on the host.
#include "cuda_kernels.h"

#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>

namespace xdev_cuda::kernels {
namespace {

using u8 = unsigned char;
using u16 = unsigned short;
using u32 = unsigned int;
using u64 = unsigned long long;
using i64 = long long;

constexpr int dt_bool = 0, dt_u8 = 1, dt_i32 = 2, dt_i64 = 3, dt_f16 = 4, dt_bf16 = 5, dt_f32 = 6, dt_f64 = 7;

constexpr unsigned threads = 256;  // threads per block of the element-wise kernels
constexpr unsigned reduce_threads = 256;
constexpr unsigned reduce_items = 8;  // elements each thread adds in order per block-pass step
constexpr unsigned reduce_max_blocks = 1024;
constexpr std::size_t tree_axis_min = 64;  // axes at least this long: one block per output

// Blocks of `threads` for n elements, grid-stride loops beyond.
unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < (1u << 20) ? (b == 0 ? 1 : b) : (1u << 20));
}

#define XDEV_GRID_STRIDE(i, n)                                                      \
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < (n); \
       i += std::size_t(gridDim.x) * blockDim.x)

// ---- floating-point formats on bit patterns ----------------------------------------------------

__device__ u16 f16_from_f32(u32 x) {
  const u32 sign = (x >> 16) & 0x8000u;
  const u32 a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<u16>(sign | 0x7E00u | ((a >> 13) & 0x03FFu));
  if (a >= 0x477FF000u) return static_cast<u16>(sign | 0x7C00u);
  if (a >= 0x38800000u) {
    const u32 truncated = (a >> 13) - (112u << 10);
    const u32 rest = a & 0x1FFFu;
    const u32 up = (rest > 0x1000u || (rest == 0x1000u && (truncated & 1u))) ? 1u : 0u;
    return static_cast<u16>(sign | (truncated + up));
  }
  const u32 shift = 126u - (a >> 23);
  if (shift > 24u) return static_cast<u16>(sign);
  const u32 significand = (a & 0x007FFFFFu) | 0x00800000u;
  const u32 truncated = significand >> shift;
  const u32 rest = significand & ((1u << shift) - 1u);
  const u32 halfway = 1u << (shift - 1u);
  const u32 up = (rest > halfway || (rest == halfway && (truncated & 1u))) ? 1u : 0u;
  return static_cast<u16>(sign | (truncated + up));
}

__device__ u16 bf16_from_f32(u32 x) {
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<u16>((x >> 16) | 0x0040u);
  return static_cast<u16>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

__device__ u32 f32_from_f16(u16 h) {
  const u32 sign = static_cast<u32>(h & 0x8000u) << 16;
  const u32 exponent = (h >> 10) & 0x1Fu;
  const u32 fraction = h & 0x03FFu;
  if (exponent == 0x1Fu) return sign | 0x7F800000u | (fraction << 13);
  if (exponent != 0u) return sign | ((exponent + 112u) << 23) | (fraction << 13);
  if (fraction == 0u) return sign;
  const u32 p = 31u - static_cast<u32>(__clz(fraction));
  return sign | ((p + 103u) << 23) | ((fraction << (23u - p)) & 0x007FFFFFu);
}

__device__ u32 f32_from_bf16(u16 h) {
  return static_cast<u32>(h) << 16;
}

__device__ u64 f64_from_f32(u32 x) {
  const u64 sign = static_cast<u64>(x & 0x80000000u) << 32;
  const u32 a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7FF8000000000000ULL | (static_cast<u64>(a & 0x007FFFFFu) << 29);
  if (a == 0x7F800000u) return sign | 0x7FF0000000000000ULL;
  if (a >= 0x00800000u)
    return sign | (static_cast<u64>((a >> 23) + 896u) << 52) | (static_cast<u64>(a & 0x007FFFFFu) << 29);
  if (a == 0u) return sign;
  const u32 p = 31u - static_cast<u32>(__clz(a));
  return sign | (static_cast<u64>(p + 874u) << 52) | ((static_cast<u64>(a) << (52u - p)) & 0x000FFFFFFFFFFFFFULL);
}

// Double bits to float bits, to nearest even (odd false) or to odd (odd true).
__device__ u32 f32_from_f64(u64 x, bool odd) {
  const u32 sign = static_cast<u32>(x >> 32) & 0x80000000u;
  const u64 a = x & 0x7FFFFFFFFFFFFFFFULL;
  if (a > 0x7FF0000000000000ULL) return sign | 0x7FC00000u | static_cast<u32>((a >> 29) & 0x007FFFFFULL);
  if (a == 0x7FF0000000000000ULL) return sign | 0x7F800000u;
  int e = static_cast<int>(a >> 52);
  u64 significand = a & 0x000FFFFFFFFFFFFFULL;
  if (e != 0)
    significand |= 0x0010000000000000ULL;
  else
    e = 1;
  const int fe = e - 896;
  if (fe >= 255) return sign | (odd ? 0x7F7FFFFFu : 0x7F800000u);
  const int shift = min(fe >= 1 ? 29 : 30 - fe, 63);
  u64 kept = significand >> shift;
  const u64 rest = significand & ((1ULL << shift) - 1ULL);
  if (odd) {
    if (rest != 0ULL) kept |= 1ULL;
  } else {
    const u64 halfway = 1ULL << (shift - 1);
    if (rest > halfway || (rest == halfway && (kept & 1ULL) != 0ULL)) kept += 1ULL;
  }
  return sign | (fe >= 1 ? (static_cast<u32>(fe - 1) << 23) + static_cast<u32>(kept) : static_cast<u32>(kept));
}

__device__ u32 f32_from_i64(i64 v, bool odd) {
  const u64 mag = v < 0 ? 0ULL - static_cast<u64>(v) : static_cast<u64>(v);
  u32 bits = 0u;
  if (mag != 0ULL) {
    const int w = 64 - __clzll(static_cast<i64>(mag));
    u64 kept;
    if (w <= 24) {
      kept = mag << (24 - w);
    } else {
      const int shift = w - 24;
      kept = mag >> shift;
      const u64 rest = mag & ((1ULL << shift) - 1ULL);
      if (odd) {
        if (rest != 0ULL) kept |= 1ULL;
      } else {
        const u64 halfway = 1ULL << (shift - 1);
        if (rest > halfway || (rest == halfway && (kept & 1ULL) != 0ULL)) kept += 1ULL;
      }
    }
    bits = (static_cast<u32>(w + 125) << 23) + static_cast<u32>(kept);
  }
  return (v < 0 ? 0x80000000u : 0u) | bits;
}

// Autocast rounding of dot and gemm inputs: 0 none, 1 to f32, 2 to f16, 3 to bf16.
__device__ float round_input(float v, int rounding) {
  if (rounding == 2) return __uint_as_float(f32_from_f16(f16_from_f32(__float_as_uint(v))));
  if (rounding == 3) return __uint_as_float(f32_from_bf16(bf16_from_f32(__float_as_uint(v))));
  return v;
}

__device__ double round_input(double v, int rounding) {
  const u64 x = static_cast<u64>(__double_as_longlong(v));
  if (rounding == 1) return __longlong_as_double(static_cast<i64>(f64_from_f32(f32_from_f64(x, false))));
  if (rounding == 2)
    return __longlong_as_double(static_cast<i64>(f64_from_f32(f32_from_f16(f16_from_f32(f32_from_f64(x, true))))));
  if (rounding == 3)
    return __longlong_as_double(static_cast<i64>(f64_from_f32(f32_from_bf16(bf16_from_f32(f32_from_f64(x, true))))));
  return v;
}

// ---- element-wise ------------------------------------------------------------------------------

template <class E>
__global__ void fill_kernel(E* x, std::size_t n, E value) {
  XDEV_GRID_STRIDE(i, n) x[i] = value;
}

template <class T>
__global__ void scale_kernel(T* x, std::size_t n, T alpha) {
  XDEV_GRID_STRIDE(i, n) x[i] = x[i] * alpha;
}

template <class T>
__global__ void axpy_kernel(T alpha, const T* x, T* y, std::size_t n) {
  XDEV_GRID_STRIDE(i, n) y[i] = y[i] + alpha * x[i];
}

template <class T>
__global__ void binary_kernel(int op, const T* a, const T* b, T* out, std::size_t n) {
  XDEV_GRID_STRIDE(i, n) {
    const T x = a[i], y = b[i];
    T r;
    if (op == 0)
      r = x + y;
    else if (op == 1)
      r = x * y;
    else if (op == 2)
      r = y < x ? y : x;
    else
      r = x < y ? y : x;
    out[i] = r;
  }
}

__global__ void exp_f32_kernel(const float* x, float* out, std::size_t n) {
  XDEV_GRID_STRIDE(i, n) out[i] = expf(x[i]);
}
__global__ void exp_f64_kernel(const double* x, double* out, std::size_t n) {
  XDEV_GRID_STRIDE(i, n) out[i] = ::exp(x[i]);
}
__global__ void exp_f16_kernel(const u16* x, u16* out, std::size_t n) {
  XDEV_GRID_STRIDE(i, n) out[i] = f16_from_f32(__float_as_uint(expf(__uint_as_float(f32_from_f16(x[i])))));
}
__global__ void exp_bf16_kernel(const u16* x, u16* out, std::size_t n) {
  XDEV_GRID_STRIDE(i, n) out[i] = bf16_from_f32(__float_as_uint(expf(__uint_as_float(f32_from_bf16(x[i])))));
}

template <class T>
__global__ void round_kernel(const T* src, T* dst, std::size_t n, int rounding) {
  XDEV_GRID_STRIDE(i, n) dst[i] = round_input(src[i], rounding);
}

template <class T>
__global__ void scale_matrix_kernel(T* c, std::size_t m, std::size_t n, std::size_t ldc, T beta) {
  XDEV_GRID_STRIDE(t, m * n) {
    const std::size_t r = t / n, j = t - r * n;
    T* p = c + r * ldc + j;
    *p = beta == T(0) ? T(0) : beta * *p;
  }
}

// ---- reductions --------------------------------------------------------------------------------

// The block's sum of every thread's v as a binary tree in shared memory (blockDim.x a power of
// two); valid in thread 0. Every thread of the block must call it.
template <class T>
__device__ T block_sum(T v) {
  extern __shared__ unsigned char shared_bytes[];
  T* scratch = reinterpret_cast<T*>(shared_bytes);
  const unsigned lid = threadIdx.x;
  scratch[lid] = v;
  __syncthreads();
  for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
    if (lid < h) scratch[lid] = scratch[lid] + scratch[lid + h];
    __syncthreads();
  }
  return scratch[0];
}

// Pass 1 of sum and dot: block g adds the elements g * C + j * L + lid (C = L * reduce_items, j <
// reduce_items) in order per thread, for every chunk g, g + gridDim, ..., then the tree.
template <class T, bool Dot>
__global__ void reduce_pass(const T* x, const T* y, std::size_t n, int rounding, T* partial) {
  const std::size_t chunk = std::size_t(blockDim.x) * reduce_items;
  T acc = -T(0);
  for (std::size_t base = blockIdx.x * chunk; base < n; base += std::size_t(gridDim.x) * chunk) {
#pragma unroll
    for (unsigned j = 0; j < reduce_items; ++j) {
      const std::size_t i = base + j * blockDim.x + threadIdx.x;
      if (i < n) {
        if constexpr (Dot) {
          T u = x[i], v = y[i];
          if (rounding != 0) {
            u = round_input(u, rounding);
            v = round_input(v, rounding);
          }
          acc = acc + u * v;
        } else {
          acc = acc + x[i];
        }
      }
    }
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// Pass 2: one block adds the partial sums.
template <class T>
__global__ void reduce_final(const T* partial, unsigned count, T* result) {
  T acc = -T(0);
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) acc = acc + partial[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *result = acc;
}

template <class T>
__global__ void sum_axis_tree(const T* x, T* out, std::size_t outer, std::size_t axis, std::size_t inner) {
  for (std::size_t g = blockIdx.x; g < outer * inner; g += gridDim.x) {
    const std::size_t o = g / inner, i = g - o * inner;
    const T* row = x + o * axis * inner + i;
    T acc = -T(0);
    for (std::size_t j = threadIdx.x; j < axis; j += blockDim.x) acc = acc + row[j * inner];
    acc = block_sum(acc);
    if (threadIdx.x == 0) out[g] = acc;
    __syncthreads();  // scratch is reused by the next output
  }
}

template <class T>
__global__ void sum_axis_small(const T* x, T* out, std::size_t outer, std::size_t axis, std::size_t inner) {
  XDEV_GRID_STRIDE(g, outer * inner) {
    const std::size_t o = g / inner, i = g - o * inner;
    const T* row = x + o * axis * inner + i;
    T acc = T(0);
    if (axis != 0) {
      acc = row[0];
      for (std::size_t j = 1; j < axis; ++j) acc = acc + row[j * inner];
    }
    out[g] = acc;
  }
}

// ---- gather ------------------------------------------------------------------------------------

template <class I>
__global__ void gather_check_kernel(const I* index, std::size_t n, std::size_t rows, u32* status) {
  XDEV_GRID_STRIDE(i, n) {
    const I v = index[i];
    if (v < 0 || static_cast<u64>(v) >= rows)
      atomicMin(status, static_cast<u32>(i < 0xFFFFFFFEull ? i : 0xFFFFFFFEull));
  }
}

template <class E, class I>
__global__ void gather_kernel(const E* table, std::size_t cols, const I* index, std::size_t n, E* out, u32* status) {
  const std::size_t width = cols > 1 ? cols : 1;
  const u32 bad = *status;
  XDEV_GRID_STRIDE(t, n * width) {
    const std::size_t i = width == 1 ? t : t / width, c = t - i * width;
    if (bad != 0xFFFFFFFFu) {
      if (c == 0 && i == bad) *reinterpret_cast<i64*>(status + 2) = static_cast<i64>(index[i]);
      continue;
    }
    if (cols != 0) out[t] = table[static_cast<std::size_t>(index[i]) * cols + c];
  }
}

// ---- random numbers ----------------------------------------------------------------------------

struct Words4 {
  u32 w[4];
};

__device__ Words4 philox(u64 block, u32 k0, u32 k1) {
  u32 x0 = static_cast<u32>(block), x1 = static_cast<u32>(block >> 32), x2 = 0u, x3 = 0u;
  for (int r = 0; r < 10; ++r) {
    if (r != 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const u32 hi0 = __umulhi(0xD2511F53u, x0), lo0 = 0xD2511F53u * x0;
    const u32 hi1 = __umulhi(0xCD9E8D57u, x2), lo1 = 0xCD9E8D57u * x2;
    x0 = hi1 ^ x1 ^ k0;
    x1 = lo1;
    x2 = hi0 ^ x3 ^ k1;
    x3 = lo0;
  }
  return {{x0, x1, x2, x3}};
}

__device__ u32 rotl(u32 x, int r) {
  return (x << r) | (x >> (32 - r));
}

__device__ void threefry(u64 block, u32 k0, u32 k1, u32& y0, u32& y1) {
  const u32 ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  u32 x0 = static_cast<u32>(block) + ks[0], x1 = static_cast<u32>(block >> 32) + ks[1];
  const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
#pragma unroll
  for (int s = 1; s <= 5; ++s) {
    const int* r = rot[(s - 1) % 2];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      x0 += x1;
      x1 = rotl(x1, r[q]) ^ x0;
    }
    x0 += ks[s % 3];
    x1 += ks[(s + 1) % 3] + static_cast<u32>(s);
  }
  y0 = x0;
  y1 = x1;
}

// Raw outputs p and p + 1 of the stream (positions modulo 2^64).
__device__ void raw2(int algorithm, u64 seed, u64 p, u32& a, u32& b) {
  const u32 k0 = static_cast<u32>(seed), k1 = static_cast<u32>(seed >> 32);
  if (algorithm == 0) {
    const Words4 w = philox(p >> 2, k0, k1);
    const unsigned j = static_cast<unsigned>(p & 3u);
    a = w.w[j];
    b = j < 3 ? w.w[j + 1] : philox((p + 1) >> 2, k0, k1).w[0];
    return;
  }
  u32 w0, w1;
  threefry(p >> 1, k0, k1, w0, w1);
  if ((p & 1u) == 0) {
    a = w0;
    b = w1;
    return;
  }
  a = w1;
  u32 n0, n1;
  threefry((p + 1) >> 1, k0, k1, n0, n1);
  b = n0;
}

__device__ u32 raw1(int algorithm, u64 seed, u64 p) {
  const u32 k0 = static_cast<u32>(seed), k1 = static_cast<u32>(seed >> 32);
  if (algorithm == 0) return philox(p >> 2, k0, k1).w[p & 3u];
  u32 w0, w1;
  threefry(p >> 1, k0, k1, w0, w1);
  return (p & 1u) == 0 ? w0 : w1;
}

__device__ float uniform_bits_f32(u32 raw) {
  return static_cast<float>(static_cast<int>(raw >> 8)) * 0x1p-24f;
}
__device__ double uniform_bits_f64(u32 a, u32 b) {
  const u64 w = static_cast<u64>(a) | (static_cast<u64>(b) << 32);
  return static_cast<double>(static_cast<i64>(w >> 11)) * 0x1p-53;
}

__device__ float uniform_at(float, int alg, u64 seed, u64 p) {
  return uniform_bits_f32(raw1(alg, seed, p));
}
__device__ double uniform_at(double, int alg, u64 seed, u64 p) {
  u32 a, b;
  raw2(alg, seed, p, a, b);
  return uniform_bits_f64(a, b);
}

// Box-Muller as <xdev/random/stream.hpp>: the pair of raw outputs at p & ~1 for floats (cosine
// branch for the even position), the four at p & ~2 for doubles (cosine when bit 1 is clear).
__device__ float normal_at(float, int alg, u64 seed, u64 p) {
  u32 a, b;
  raw2(alg, seed, p & ~1ULL, a, b);
  const float u1 = static_cast<float>(static_cast<int>((a >> 8) + 1u)) * 0x1p-24f;
  const float u2 = uniform_bits_f32(b);
  const float r = sqrtf(-2.0f * logf(u1));
  const float theta = 2.0f * 3.14159265358979323846f * u2;
  return (p & 1u) == 0 ? r * cosf(theta) : r * sinf(theta);
}

__device__ double normal_at(double, int alg, u64 seed, u64 p) {
  const u64 start = p & ~2ULL;
  u32 a, b, c, d;
  raw2(alg, seed, start, a, b);
  raw2(alg, seed, start + 2, c, d);
  const u64 w = static_cast<u64>(a) | (static_cast<u64>(b) << 32);
  const double u1 = static_cast<double>(static_cast<i64>((w >> 11) + 1)) * 0x1p-53;
  const double u2 = uniform_bits_f64(c, d);
  const double r = sqrt(-2.0 * log(u1));
  const double theta = 2.0 * 3.14159265358979323846 * u2;
  return (p & 2u) == 0 ? r * cos(theta) : r * sin(theta);
}

template <class T>
__global__ void rng_kernel(T* out, std::size_t n, int alg, u64 seed, u64 offset, bool normal, T mean, T stddev) {
  constexpr u64 per_value = sizeof(T) == 8 ? 2 : 1;
  XDEV_GRID_STRIDE(j, n) {
    const u64 p = offset + per_value * j;
    out[j] = normal ? mean + stddev * normal_at(T{}, alg, seed, p) : uniform_at(T{}, alg, seed, p);
  }
}

// ---- conversions -------------------------------------------------------------------------------
// A source value is loaded as one of three kinds (an integer, float bits, a double) and each
// destination converts from each kind, as xdev::kernels::convert does.

template <int D>
struct Storage;
template <>
struct Storage<dt_bool> {
  using type = u8;
};
template <>
struct Storage<dt_u8> {
  using type = u8;
};
template <>
struct Storage<dt_i32> {
  using type = int;
};
template <>
struct Storage<dt_i64> {
  using type = i64;
};
template <>
struct Storage<dt_f16> {
  using type = u16;
};
template <>
struct Storage<dt_bf16> {
  using type = u16;
};
template <>
struct Storage<dt_f32> {
  using type = float;
};
template <>
struct Storage<dt_f64> {
  using type = double;
};

__host__ __device__ constexpr int kind_of(int d) {
  return d <= dt_i64 ? 0 : d == dt_f64 ? 2 : 1;
}

template <int S>
__device__ i64 load_int(typename Storage<S>::type v) {
  if constexpr (S == dt_bool)
    return v != 0 ? 1 : 0;
  else
    return static_cast<i64>(v);
}

template <int S>
__device__ u32 load_float(typename Storage<S>::type v) {
  if constexpr (S == dt_f16)
    return f32_from_f16(v);
  else if constexpr (S == dt_bf16)
    return f32_from_bf16(v);
  else
    return __float_as_uint(v);
}

template <class I>
__device__ I saturate(float x, float lo, float hi, I min_value, I max_value) {
  if (x != x) return 0;
  if (x <= lo) return min_value;
  if (x >= hi) return max_value;
  return static_cast<I>(x);
}
template <class I>
__device__ I saturate(double x, double lo, double hi, I min_value, I max_value) {
  if (x != x) return 0;
  if (x <= lo) return min_value;
  if (x >= hi) return max_value;
  return static_cast<I>(x);
}

template <int D>
__device__ typename Storage<D>::type from_int(i64 v) {
  if constexpr (D == dt_bool)
    return v != 0 ? 1 : 0;
  else if constexpr (D == dt_u8)
    return static_cast<u8>(v);
  else if constexpr (D == dt_i32)
    return static_cast<int>(static_cast<u32>(v));
  else if constexpr (D == dt_i64)
    return v;
  else if constexpr (D == dt_f16)
    return f16_from_f32(f32_from_i64(v, true));
  else if constexpr (D == dt_bf16)
    return bf16_from_f32(f32_from_i64(v, true));
  else if constexpr (D == dt_f32)
    return __uint_as_float(f32_from_i64(v, false));
  else
    return __ll2double_rn(v);
}

template <int D>
__device__ typename Storage<D>::type from_float(u32 f) {
  const float x = __uint_as_float(f);
  if constexpr (D == dt_bool)
    return (f & 0x7FFFFFFFu) != 0u ? 1 : 0;
  else if constexpr (D == dt_u8)
    return (x != x || x <= 0.0f) ? u8(0) : x >= 256.0f ? u8(255) : static_cast<u8>(x);
  else if constexpr (D == dt_i32)
    return saturate<int>(x, -0x1p31f, 0x1p31f, INT_MIN, INT_MAX);
  else if constexpr (D == dt_i64)
    return saturate<i64>(x, -0x1p63f, 0x1p63f, LLONG_MIN, LLONG_MAX);
  else if constexpr (D == dt_f16)
    return f16_from_f32(f);
  else if constexpr (D == dt_bf16)
    return bf16_from_f32(f);
  else if constexpr (D == dt_f32)
    return x;
  else
    return __longlong_as_double(static_cast<i64>(f64_from_f32(f)));
}

template <int D>
__device__ typename Storage<D>::type from_double(double x) {
  const u64 bits = static_cast<u64>(__double_as_longlong(x));
  if constexpr (D == dt_bool)
    return (bits & 0x7FFFFFFFFFFFFFFFULL) != 0ULL ? 1 : 0;
  else if constexpr (D == dt_u8)
    return (x != x || x <= 0.0) ? u8(0) : x >= 256.0 ? u8(255) : static_cast<u8>(x);
  else if constexpr (D == dt_i32)
    return saturate<int>(x, -0x1p31, 0x1p31, INT_MIN, INT_MAX);
  else if constexpr (D == dt_i64)
    return saturate<i64>(x, -0x1p63, 0x1p63, LLONG_MIN, LLONG_MAX);
  else if constexpr (D == dt_f16)
    return f16_from_f32(f32_from_f64(bits, true));
  else if constexpr (D == dt_bf16)
    return bf16_from_f32(f32_from_f64(bits, true));
  else if constexpr (D == dt_f32)
    return __uint_as_float(f32_from_f64(bits, false));
  else
    return x;
}

template <int S, int D>
__global__ void convert_kernel(const typename Storage<S>::type* src, typename Storage<D>::type* dst, std::size_t n) {
  XDEV_GRID_STRIDE(i, n) {
    if constexpr (kind_of(S) == 0)
      dst[i] = from_int<D>(load_int<S>(src[i]));
    else if constexpr (kind_of(S) == 1)
      dst[i] = from_float<D>(load_float<S>(src[i]));
    else
      dst[i] = from_double<D>(src[i]);
  }
}

template <int S, int D>
cudaError_t launch_convert(const void* src, void* dst, std::size_t n, cudaStream_t s) {
  if constexpr (S == D) {
    return cudaErrorInvalidValue;
  } else {
    convert_kernel<S, D><<<blocks_for(n), threads, 0, s>>>(static_cast<const typename Storage<S>::type*>(src),
                                                           static_cast<typename Storage<D>::type*>(dst), n);
    return cudaGetLastError();
  }
}

template <int S>
cudaError_t convert_from(int dst_dtype, const void* src, void* dst, std::size_t n, cudaStream_t s) {
  switch (dst_dtype) {
    case dt_bool:
      return launch_convert<S, dt_bool>(src, dst, n, s);
    case dt_u8:
      return launch_convert<S, dt_u8>(src, dst, n, s);
    case dt_i32:
      return launch_convert<S, dt_i32>(src, dst, n, s);
    case dt_i64:
      return launch_convert<S, dt_i64>(src, dst, n, s);
    case dt_f16:
      return launch_convert<S, dt_f16>(src, dst, n, s);
    case dt_bf16:
      return launch_convert<S, dt_bf16>(src, dst, n, s);
    case dt_f32:
      return launch_convert<S, dt_f32>(src, dst, n, s);
    case dt_f64:
      return launch_convert<S, dt_f64>(src, dst, n, s);
    default:
      return cudaErrorInvalidValue;
  }
}

__global__ void empty_kernel() {}

// Calls f(T{}) with T float for dtype f32 and double for f64; anything else is invalid.
template <class F>
cudaError_t with_float(int dtype, F&& f) {
  if (dtype == dt_f32) return f(float{});
  if (dtype == dt_f64) return f(double{});
  return cudaErrorInvalidValue;
}

unsigned reduce_blocks(std::size_t n) {
  const std::size_t per_block = std::size_t(reduce_threads) * reduce_items;
  const std::size_t b = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(b == 0 ? 1 : (b < reduce_max_blocks ? b : reduce_max_blocks));
}

template <class T>
cudaError_t reduce_launch(const T* x, const T* y, std::size_t n, int rounding, T* result, void* scratch, cudaStream_t s,
                          bool dot) {
  const unsigned blocks = reduce_blocks(n);
  T* partial = static_cast<T*>(scratch);
  const std::size_t shared = reduce_threads * sizeof(T);
  if (dot)
    reduce_pass<T, true><<<blocks, reduce_threads, shared, s>>>(x, y, n, rounding, partial);
  else
    reduce_pass<T, false><<<blocks, reduce_threads, shared, s>>>(x, y, n, rounding, partial);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  reduce_final<T><<<1, 1024, 1024 * sizeof(T), s>>>(partial, blocks, result);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fill(void* x, std::size_t n, std::size_t element_bytes, std::uint64_t pattern, cudaStream_t s) {
  const unsigned b = blocks_for(n);
  switch (element_bytes) {
    case 1:
      fill_kernel<u8><<<b, threads, 0, s>>>(static_cast<u8*>(x), n, static_cast<u8>(pattern));
      break;
    case 2:
      fill_kernel<u16><<<b, threads, 0, s>>>(static_cast<u16*>(x), n, static_cast<u16>(pattern));
      break;
    case 4:
      fill_kernel<u32><<<b, threads, 0, s>>>(static_cast<u32*>(x), n, static_cast<u32>(pattern));
      break;
    case 8:
      fill_kernel<u64><<<b, threads, 0, s>>>(static_cast<u64*>(x), n, static_cast<u64>(pattern));
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t scale(int dtype, void* x, std::size_t n, double alpha, cudaStream_t s) {
  return with_float(dtype, [&](auto t) {
    using T = decltype(t);
    scale_kernel<T><<<blocks_for(n), threads, 0, s>>>(static_cast<T*>(x), n, static_cast<T>(alpha));
    return cudaGetLastError();
  });
}

cudaError_t axpy(int dtype, double alpha, const void* x, void* y, std::size_t n, cudaStream_t s) {
  return with_float(dtype, [&](auto t) {
    using T = decltype(t);
    axpy_kernel<T>
        <<<blocks_for(n), threads, 0, s>>>(static_cast<T>(alpha), static_cast<const T*>(x), static_cast<T*>(y), n);
    return cudaGetLastError();
  });
}

cudaError_t binary(int dtype, int op, const void* a, const void* b, void* out, std::size_t n, cudaStream_t s) {
  if (op < 0 || op > 3) return cudaErrorInvalidValue;
  return with_float(dtype, [&](auto t) {
    using T = decltype(t);
    binary_kernel<T><<<blocks_for(n), threads, 0, s>>>(op, static_cast<const T*>(a), static_cast<const T*>(b),
                                                       static_cast<T*>(out), n);
    return cudaGetLastError();
  });
}

cudaError_t exp(int dtype, const void* x, void* out, std::size_t n, cudaStream_t s) {
  const unsigned b = blocks_for(n);
  switch (dtype) {
    case dt_f32:
      exp_f32_kernel<<<b, threads, 0, s>>>(static_cast<const float*>(x), static_cast<float*>(out), n);
      break;
    case dt_f64:
      exp_f64_kernel<<<b, threads, 0, s>>>(static_cast<const double*>(x), static_cast<double*>(out), n);
      break;
    case dt_f16:
      exp_f16_kernel<<<b, threads, 0, s>>>(static_cast<const u16*>(x), static_cast<u16*>(out), n);
      break;
    case dt_bf16:
      exp_bf16_kernel<<<b, threads, 0, s>>>(static_cast<const u16*>(x), static_cast<u16*>(out), n);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

std::size_t reduce_scratch_bytes(std::size_t n, std::size_t element_bytes) {
  return std::size_t(reduce_blocks(n)) * element_bytes;
}

cudaError_t sum(int dtype, const void* x, std::size_t n, void* result, void* scratch, cudaStream_t s) {
  return with_float(dtype, [&](auto t) {
    using T = decltype(t);
    return reduce_launch<T>(static_cast<const T*>(x), nullptr, n, 0, static_cast<T*>(result), scratch, s, false);
  });
}

cudaError_t dot(int dtype, const void* x, const void* y, std::size_t n, int rounding, void* result, void* scratch,
                cudaStream_t s) {
  return with_float(dtype, [&](auto t) {
    using T = decltype(t);
    return reduce_launch<T>(static_cast<const T*>(x), static_cast<const T*>(y), n, rounding, static_cast<T*>(result),
                            scratch, s, true);
  });
}

cudaError_t sum_axis(int dtype, const void* x, void* out, std::size_t outer, std::size_t axis, std::size_t inner,
                     cudaStream_t s) {
  const std::size_t outputs = outer * inner;
  return with_float(dtype, [&](auto t) {
    using T = decltype(t);
    if (axis >= tree_axis_min) {
      const unsigned blocks = static_cast<unsigned>(outputs < (1u << 20) ? outputs : (1u << 20));
      sum_axis_tree<T><<<blocks, reduce_threads, reduce_threads * sizeof(T), s>>>(
          static_cast<const T*>(x), static_cast<T*>(out), outer, axis, inner);
    } else {
      sum_axis_small<T>
          <<<blocks_for(outputs), threads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), outer, axis, inner);
    }
    return cudaGetLastError();
  });
}

cudaError_t round_inputs(int dtype, const void* src, void* dst, std::size_t n, int rounding, cudaStream_t s) {
  return with_float(dtype, [&](auto t) {
    using T = decltype(t);
    round_kernel<T><<<blocks_for(n), threads, 0, s>>>(static_cast<const T*>(src), static_cast<T*>(dst), n, rounding);
    return cudaGetLastError();
  });
}

cudaError_t scale_matrix(int dtype, void* c, std::size_t m, std::size_t n, std::size_t ldc, double beta,
                         cudaStream_t s) {
  return with_float(dtype, [&](auto t) {
    using T = decltype(t);
    scale_matrix_kernel<T><<<blocks_for(m * n), threads, 0, s>>>(static_cast<T*>(c), m, n, ldc, static_cast<T>(beta));
    return cudaGetLastError();
  });
}

cudaError_t gather_check(int index_dtype, const void* index, std::size_t n, std::size_t rows, void* status,
                         cudaStream_t s) {
  if (index_dtype == dt_i32)
    gather_check_kernel<int>
        <<<blocks_for(n), threads, 0, s>>>(static_cast<const int*>(index), n, rows, static_cast<u32*>(status));
  else if (index_dtype == dt_i64)
    gather_check_kernel<i64>
        <<<blocks_for(n), threads, 0, s>>>(static_cast<const i64*>(index), n, rows, static_cast<u32*>(status));
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

namespace {
template <class E>
cudaError_t gather_typed(int index_dtype, const void* table, std::size_t cols, const void* index, std::size_t n,
                         void* out, void* status, cudaStream_t s) {
  const unsigned b = blocks_for(n * (cols > 1 ? cols : 1));
  if (index_dtype == dt_i32)
    gather_kernel<E, int><<<b, threads, 0, s>>>(static_cast<const E*>(table), cols, static_cast<const int*>(index), n,
                                                static_cast<E*>(out), static_cast<u32*>(status));
  else if (index_dtype == dt_i64)
    gather_kernel<E, i64><<<b, threads, 0, s>>>(static_cast<const E*>(table), cols, static_cast<const i64*>(index), n,
                                                static_cast<E*>(out), static_cast<u32*>(status));
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}
}  // namespace

cudaError_t gather(std::size_t element_bytes, int index_dtype, const void* table, std::size_t, std::size_t cols,
                   const void* index, std::size_t n, void* out, void* status, cudaStream_t s) {
  switch (element_bytes) {
    case 1:
      return gather_typed<u8>(index_dtype, table, cols, index, n, out, status, s);
    case 2:
      return gather_typed<u16>(index_dtype, table, cols, index, n, out, status, s);
    case 4:
      return gather_typed<u32>(index_dtype, table, cols, index, n, out, status, s);
    case 8:
      return gather_typed<u64>(index_dtype, table, cols, index, n, out, status, s);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t rng(int dtype, void* out, std::size_t n, int algorithm, std::uint64_t seed, std::uint64_t offset,
                bool normal, double mean, double stddev, cudaStream_t s) {
  if (algorithm != 0 && algorithm != 1) return cudaErrorInvalidValue;
  return with_float(dtype, [&](auto t) {
    using T = decltype(t);
    rng_kernel<T><<<blocks_for(n), threads, 0, s>>>(static_cast<T*>(out), n, algorithm, seed, offset, normal,
                                                    static_cast<T>(mean), static_cast<T>(stddev));
    return cudaGetLastError();
  });
}

cudaError_t convert(int src_dtype, int dst_dtype, const void* src, void* dst, std::size_t n, cudaStream_t s) {
  if (src_dtype == dst_dtype) return cudaErrorInvalidValue;
  switch (src_dtype) {
    case dt_bool:
      return convert_from<dt_bool>(dst_dtype, src, dst, n, s);
    case dt_u8:
      return convert_from<dt_u8>(dst_dtype, src, dst, n, s);
    case dt_i32:
      return convert_from<dt_i32>(dst_dtype, src, dst, n, s);
    case dt_i64:
      return convert_from<dt_i64>(dst_dtype, src, dst, n, s);
    case dt_f16:
      return convert_from<dt_f16>(dst_dtype, src, dst, n, s);
    case dt_bf16:
      return convert_from<dt_bf16>(dst_dtype, src, dst, n, s);
    case dt_f32:
      return convert_from<dt_f32>(dst_dtype, src, dst, n, s);
    case dt_f64:
      return convert_from<dt_f64>(dst_dtype, src, dst, n, s);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t empty(cudaStream_t s) {
  empty_kernel<<<1, 1, 0, s>>>();
  return cudaGetLastError();
}

}  // namespace xdev_cuda::kernels
