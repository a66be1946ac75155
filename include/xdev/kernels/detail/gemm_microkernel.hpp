/// \file
/// The GEMM micro-kernels: one register-blocked tile kernel (`simd_tile`) over a small traits type
/// per instruction set and element type, the portable fallback, and the CPU check that picks one.
/// Only <xdev/kernels/gemm.hpp> includes this header. The registers are the compilers' own vector
/// types (`vector_size`), operated on with C++ operators and two compiler builtins (fused
/// multiply-add, prefetch), not <immintrin.h>: parsing that header cost every translation unit
/// that includes the ops about 0.4 s with g++ 12 and 86 MB of compiler memory, for instructions
/// that only a GEMM instantiation compiles (benchmarks/compile_time.sh).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/// Defined to 1 when the x86-64 GEMM micro-kernels (SSE2, AVX2+FMA, AVX-512F) are compiled in.
#define XDEV_DETAIL_HOST_X86 1
/// Compiles one function for a given instruction set, whatever the flags of the translation unit;
/// such a function only runs after a CPU check (`detail::best_gemm_isa`).
#define XDEV_DETAIL_TARGET(isa) __attribute__((target(isa)))
#else
#define XDEV_DETAIL_HOST_X86 0
#endif

namespace xdev::kernels::detail {

// Micro-kernel contract, for every kernel type K below: with `pa` an MR x kc panel of A packed
// column by column (pa[p * MR + i] = A(i, p)) and `pb` a kc x NR panel of B packed row by row
// (pb[p * NR + j] = B(p, j)), `K::kernel(kc, pa, pb, c, ldc, alpha, beta)` sets the MR x NR tile
// c[i * ldc + j] = alpha * (A B)(i, j) + beta * c[i * ldc + j], without reading c when beta == 0.
// Blocking: K::kc (depth of a packed panel; a kc x NR panel of B stays in L1), K::mc (rows of a
// packed block of A, kept in L2), K::nc (columns of a packed panel of B, kept in L3).

// Portable kernel: plain loops over a tile of accumulators, vectorized by the compiler as it can.
template <class T>
struct PortableKernel {
  using value_type = T;
  static constexpr std::size_t mr = 4, nr = 8, kc = 256, mc = 128, nc = 16384 / sizeof(T);
  static void kernel(std::size_t kc_, const T* pa, const T* pb, T* c, std::size_t ldc, T alpha, T beta) noexcept {
    T acc[mr][nr] = {};
    for (std::size_t p = 0; p < kc_; ++p, pa += mr, pb += nr) {
#pragma GCC unroll 8
      for (std::size_t i = 0; i < mr; ++i)
#pragma GCC unroll 16
        for (std::size_t j = 0; j < nr; ++j) acc[i][j] += pa[i] * pb[j];
    }
    for (std::size_t i = 0; i < mr; ++i)
      for (std::size_t j = 0; j < nr; ++j)
        c[i * ldc + j] = beta == T(0) ? alpha * acc[i][j] : alpha * acc[i][j] + beta * c[i * ldc + j];
  }
};

#if XDEV_DETAIL_HOST_X86

// The one SIMD tile kernel. `V` is a traits type of one instruction set and element type: its
// register type `vec` with `lanes` elements, the blocking (`mr` rows; `nr` = 2 registers of
// columns), and six operations on registers, each compiled for its instruction set:
//   zero(r), set1(r, x), load(r, p), store(p, r), mul(r, a, b): r = a * b, madd(acc, a, b): acc += a * b
// (a fused multiply-add where the instruction set has one). Registers are passed by reference, so
// this function, compiled without the instruction set, never passes one by value; it runs only
// inlined into `V::kernel` (see XDEV_DETAIL_GEMM_KERNEL), which is compiled for it.
template <class V>
inline void simd_tile(std::size_t kc_, const typename V::value_type* pa, const typename V::value_type* pb,
                      typename V::value_type* c, std::size_t ldc, typename V::value_type alpha,
                      typename V::value_type beta) noexcept {
  using T = typename V::value_type;
  constexpr std::size_t mr = V::mr, w = V::lanes;
  // Ask for the rows of the C tile (first and last element of each) while the kernel computes, so
  // that its update does not wait for them at the end (measured: about 10% at n = 1024 and 2048).
  for (std::size_t i = 0; i < mr; ++i) {
    __builtin_prefetch(c + i * ldc, 0, 3);  // prefetcht0
    __builtin_prefetch(c + i * ldc + 2 * w - 1, 0, 3);
  }
  typename V::vec acc[mr][2], a, b0, b1;
#pragma GCC unroll 16
  for (std::size_t i = 0; i < mr; ++i) V::zero(acc[i][0]), V::zero(acc[i][1]);
  for (std::size_t p = 0; p < kc_; ++p, pa += mr, pb += 2 * w) {
    V::load(b0, pb);
    V::load(b1, pb + w);
#pragma GCC unroll 16
    for (std::size_t i = 0; i < mr; ++i) {
      V::set1(a, pa[i]);
      V::madd(acc[i][0], a, b0);
      V::madd(acc[i][1], a, b1);
    }
  }
  typename V::vec va, vb, r, old;
  V::set1(va, alpha);
  V::set1(vb, beta);
#pragma GCC unroll 16
  for (std::size_t i = 0; i < mr; ++i)
#pragma GCC unroll 2
    for (std::size_t j = 0; j < 2; ++j) {
      T* cp = c + i * ldc + w * j;
      V::mul(r, va, acc[i][j]);
      if (beta != T(0)) {
        V::load(old, cp);
        V::madd(r, vb, old);
      }
      V::store(cp, r);
    }
}

// The entry point of traits type `Self` compiled for instruction set `isa`, with `simd_tile` and
// the register operations inlined into it (`flatten`). A template, so that a translation unit
// instantiates (and compiles) it only when it instantiates the GEMM that dispatches to it.
#define XDEV_DETAIL_GEMM_KERNEL(Self, isa)                                                                       \
  template <int = 0>                                                                                             \
  __attribute__((target(isa), flatten)) static void kernel(std::size_t kc_, const value_type* pa,                \
                                                           const value_type* pb, value_type* c, std::size_t ldc, \
                                                           value_type alpha, value_type beta) noexcept {         \
    simd_tile<Self>(kc_, pa, pb, c, ldc, alpha, beta);                                                           \
  }

// One register operation compiled for `isa`.
#define XDEV_DETAIL_VOP(isa) XDEV_DETAIL_TARGET(isa) static void

// The registers: GNU vector types, `lanes` elements of the value type. Loads and stores are
// unaligned (`__builtin_memcpy` of one register: one vmovups / vmovupd). `set1` broadcasts with
// `x - Vec{}`: a scalar operand goes to every lane, and x - 0 is x for every x, so the compilers
// fold the subtraction away (one vbroadcastss from memory); 0 + x is not x for x = -0, and cost an
// add before every broadcast (1.7x the time of the whole GEMM).
typedef float f32x4 __attribute__((vector_size(16)));
typedef double f64x2 __attribute__((vector_size(16)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef double f64x4 __attribute__((vector_size(32)));
typedef float f32x16 __attribute__((vector_size(64)));
typedef double f64x8 __attribute__((vector_size(64)));

// The operations every traits type shares, for register type `Vec` of `T`, compiled for `isa`.
#define XDEV_DETAIL_VEC_OPS(isa, T, Vec)                                  \
  XDEV_DETAIL_VOP(isa) zero(Vec& r) noexcept {                            \
    r = Vec{};                                                            \
  }                                                                       \
  XDEV_DETAIL_VOP(isa) set1(Vec& r, T x) noexcept {                       \
    r = x - Vec{};                                                        \
  }                                                                       \
  XDEV_DETAIL_VOP(isa) load(Vec& r, const T* p) noexcept {                \
    __builtin_memcpy(&r, p, sizeof r);                                    \
  }                                                                       \
  XDEV_DETAIL_VOP(isa) store(T* p, const Vec& v) noexcept {               \
    __builtin_memcpy(p, &v, sizeof v);                                    \
  }                                                                       \
  XDEV_DETAIL_VOP(isa) mul(Vec& r, const Vec& a, const Vec& b) noexcept { \
    r = a * b;                                                            \
  }

// _MM_FROUND_CUR_DIRECTION: the AVX-512 fused multiply-add rounds as the MXCSR says.
inline constexpr int current_rounding = 4;

// x86-64 baseline: SSE2, 4 x 8 floats (8 accumulators of 4 lanes); no FMA, so madd multiplies and adds.
struct Sse2F32 {
  using value_type = float;
  using vec = f32x4;
  static constexpr std::size_t lanes = 4, mr = 4, nr = 8, kc = 256, mc = 128, nc = 4096;
  XDEV_DETAIL_VEC_OPS("sse2", float, vec)
  XDEV_DETAIL_VOP("sse2") madd(vec& acc, const vec& a, const vec& b) noexcept { acc = acc + a * b; }
  XDEV_DETAIL_GEMM_KERNEL(Sse2F32, "sse2")
};

// x86-64 baseline: SSE2, 4 x 4 doubles.
struct Sse2F64 {
  using value_type = double;
  using vec = f64x2;
  static constexpr std::size_t lanes = 2, mr = 4, nr = 4, kc = 256, mc = 128, nc = 2048;
  XDEV_DETAIL_VEC_OPS("sse2", double, vec)
  XDEV_DETAIL_VOP("sse2") madd(vec& acc, const vec& a, const vec& b) noexcept { acc = acc + a * b; }
  XDEV_DETAIL_GEMM_KERNEL(Sse2F64, "sse2")
};

// AVX2 + FMA: 6 x 16 floats (12 accumulators of 8 lanes, 2 loads of B and 6 broadcasts of A per
// step: 15 of the 16 vector registers).
struct Avx2F32 {
  using value_type = float;
  using vec = f32x8;
  static constexpr std::size_t lanes = 8, mr = 6, nr = 16, kc = 256, mc = 192, nc = 4096;
  XDEV_DETAIL_VEC_OPS("avx2,fma", float, vec)
  XDEV_DETAIL_VOP("avx2,fma") madd(vec& acc, const vec& a, const vec& b) noexcept {
    acc = __builtin_ia32_vfmaddps256(a, b, acc);
  }
  XDEV_DETAIL_GEMM_KERNEL(Avx2F32, "avx2,fma")
};

// AVX2 + FMA: 6 x 8 doubles.
struct Avx2F64 {
  using value_type = double;
  using vec = f64x4;
  static constexpr std::size_t lanes = 4, mr = 6, nr = 8, kc = 256, mc = 96, nc = 2048;
  XDEV_DETAIL_VEC_OPS("avx2,fma", double, vec)
  XDEV_DETAIL_VOP("avx2,fma") madd(vec& acc, const vec& a, const vec& b) noexcept {
    acc = __builtin_ia32_vfmaddpd256(a, b, acc);
  }
  XDEV_DETAIL_GEMM_KERNEL(Avx2F64, "avx2,fma")
};

// AVX-512F: 12 x 32 floats (24 accumulators of 16 lanes; 27 of the 32 vector registers).
struct Avx512F32 {
  using value_type = float;
  using vec = f32x16;
  static constexpr std::size_t lanes = 16, mr = 12, nr = 32, kc = 192, mc = 384, nc = 4096;
  XDEV_DETAIL_VEC_OPS("avx512f", float, vec)
  XDEV_DETAIL_VOP("avx512f") madd(vec& acc, const vec& a, const vec& b) noexcept {
    acc = __builtin_ia32_vfmaddps512_mask(a, b, acc, static_cast<unsigned short>(-1), current_rounding);
  }
  XDEV_DETAIL_GEMM_KERNEL(Avx512F32, "avx512f")
};

// AVX-512F: 12 x 16 doubles.
struct Avx512F64 {
  using value_type = double;
  using vec = f64x8;
  static constexpr std::size_t lanes = 8, mr = 12, nr = 16, kc = 192, mc = 192, nc = 2048;
  XDEV_DETAIL_VEC_OPS("avx512f", double, vec)
  XDEV_DETAIL_VOP("avx512f") madd(vec& acc, const vec& a, const vec& b) noexcept {
    acc = __builtin_ia32_vfmaddpd512_mask(a, b, acc, static_cast<unsigned char>(-1), current_rounding);
  }
  XDEV_DETAIL_GEMM_KERNEL(Avx512F64, "avx512f")
};

#undef XDEV_DETAIL_VEC_OPS
#undef XDEV_DETAIL_VOP
#undef XDEV_DETAIL_GEMM_KERNEL

#endif  // XDEV_DETAIL_HOST_X86

/// The GEMM micro-kernel families, from the most portable to the widest.
enum class GemmIsa : std::uint8_t {
  portable,  ///< plain C++ loops (any CPU)
  sse2,      ///< x86-64 baseline
  avx2,      ///< AVX2 + FMA
  avx512,    ///< AVX-512F
};

/// The widest kernel family this CPU (and OS) supports, detected once.
inline GemmIsa best_gemm_isa() noexcept {
#if XDEV_DETAIL_HOST_X86
  static const GemmIsa best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return GemmIsa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return GemmIsa::avx2;
    return GemmIsa::sse2;
  }();
  return best;
#else
  return GemmIsa::portable;
#endif
}

/// True when kernels of family `isa` can run on this CPU.
inline bool gemm_isa_supported(GemmIsa isa) noexcept {
  return static_cast<int>(isa) <= static_cast<int>(best_gemm_isa());
}

}  // namespace xdev::kernels::detail
