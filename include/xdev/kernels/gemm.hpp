/// \file
/// The host GEMM: cache-blocked (Goto / BLIS) with a register-blocked micro-kernel chosen once for
/// the CPU (<xdev/kernels/detail/gemm_microkernel.hpp>).
#pragma once

#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/kernels/detail/element_types.hpp>
#include <xdev/kernels/detail/gemm_microkernel.hpp>
#include <xdev/kernels/detail/rounding.hpp>
#include <xdev/kernels/parallel.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

namespace xdev::kernels {

namespace detail {

// A block of 64-byte-aligned memory that each thread keeps for reuse (GEMM packing buffers), so
// that repeated calls neither allocate nor page-fault.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { release(); }

  // At least `bytes` bytes; the contents are unspecified. \throws std::bad_alloc.
  void* get(std::size_t bytes) {
    if (bytes > capacity_) {
      release();
      data_ = ::operator new (bytes, std::align_val_t{64});
      capacity_ = bytes;
    }
    return data_;
  }

 private:
  void release() noexcept {
    if (data_ != nullptr) ::operator delete (data_, std::align_val_t{64});
    data_ = nullptr;
    capacity_ = 0;
  }
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
};

// Packed panels of A (one per thread computing a block of C) and of B (one per thread calling
// gemm, shared by its helpers).
inline ScratchBuffer& gemm_buffer_a() {
  thread_local ScratchBuffer b;
  return b;
}
inline ScratchBuffer& gemm_buffer_b() {
  thread_local ScratchBuffer b;
  return b;
}

constexpr std::size_t ceil_div(std::size_t a, std::size_t b) noexcept {
  return (a + b - 1) / b;
}
constexpr std::size_t round_up(std::size_t a, std::size_t b) noexcept {
  return ceil_div(a, b) * b;
}

// The operands of one gemm call.
template <class T>
struct GemmProblem {
  bool trans_a, trans_b;
  std::size_t m, n, k;
  T alpha;
  const T* a;
  std::size_t lda;
  const T* b;
  std::size_t ldb;
  T beta;
  T* c;
  std::size_t ldc;
};

// Packs rows [i0, i0 + rows) x depth [p0, p0 + kc) of op(A) as MR-row panels, zero padded.
template <std::size_t MR, Rounding R, class T>
void pack_a(const GemmProblem<T>& g, std::size_t i0, std::size_t rows, std::size_t p0, std::size_t kc, T* dst) {
  for (std::size_t s = 0; s < rows; s += MR, dst += kc * MR) {
    const std::size_t mr = std::min(MR, rows - s);
    const std::size_t r0 = i0 + s;
    if (!g.trans_a) {  // A(i, p) = a[i * lda + p]: MR row streams
      if (mr == MR) {
        const T* src[MR];
        for (std::size_t i = 0; i < MR; ++i) src[i] = g.a + (r0 + i) * g.lda + p0;
        for (std::size_t p = 0; p < kc; ++p)
          for (std::size_t i = 0; i < MR; ++i) dst[p * MR + i] = round_input<R>(src[i][p]);
      } else {
        for (std::size_t p = 0; p < kc; ++p)
          for (std::size_t i = 0; i < MR; ++i)
            dst[p * MR + i] = i < mr ? round_input<R>(g.a[(r0 + i) * g.lda + p0 + p]) : T(0);
      }
    } else {  // A(i, p) = a[p * lda + i]: MR contiguous values per step
      for (std::size_t p = 0; p < kc; ++p) {
        const T* src = g.a + (p0 + p) * g.lda + r0;
        if (mr == MR) {
          for (std::size_t i = 0; i < MR; ++i) dst[p * MR + i] = round_input<R>(src[i]);
        } else {
          for (std::size_t i = 0; i < MR; ++i) dst[p * MR + i] = i < mr ? round_input<R>(src[i]) : T(0);
        }
      }
    }
  }
}

// Packs NR-column panels [s0, s1) of columns [j0, j0 + cols) x depth [p0, p0 + kc) of op(B), zero
// padded; panel s goes to dst + s * kc * NR.
template <std::size_t NR, Rounding R, class T>
void pack_b(const GemmProblem<T>& g, std::size_t j0, std::size_t cols, std::size_t p0, std::size_t kc, std::size_t s0,
            std::size_t s1, T* dst) {
  const std::size_t full_end = std::max(s0, std::min(s1, cols / NR));  // [s0, full_end): full panels
  if (!g.trans_b) {  // B(p, j) = b[p * ldb + j]: each row of B read once, left to right
    for (std::size_t p = 0; p < kc; ++p) {
      const T* src = g.b + (p0 + p) * g.ldb + j0;
      for (std::size_t s = s0; s < full_end; ++s) {
        T* d = dst + (s * kc + p) * NR;
        for (std::size_t j = 0; j < NR; ++j) d[j] = round_input<R>(src[s * NR + j]);
      }
      if (full_end < s1) {  // the last, partial panel
        const std::size_t nr = cols - full_end * NR;
        T* d = dst + (full_end * kc + p) * NR;
        for (std::size_t j = 0; j < NR; ++j) d[j] = j < nr ? round_input<R>(src[full_end * NR + j]) : T(0);
      }
    }
    return;
  }
  for (std::size_t s = s0; s < s1; ++s) {  // B(p, j) = b[j * ldb + p]: NR column streams
    T* d = dst + s * kc * NR;
    const std::size_t c0 = j0 + s * NR;
    const std::size_t nr = std::min(NR, cols - s * NR);
    for (std::size_t j = 0; j < NR; ++j) {
      if (j < nr) {
        const T* src = g.b + (c0 + j) * g.ldb + p0;
        for (std::size_t p = 0; p < kc; ++p) d[p * NR + j] = round_input<R>(src[p]);
      } else {
        for (std::size_t p = 0; p < kc; ++p) d[p * NR + j] = T(0);
      }
    }
  }
}

// C = beta * C (C = 0 when beta == 0, without reading C): gemm with alpha == 0 or k == 0.
template <class T>
void gemm_scale_c(const Parallel& par, const GemmProblem<T>& g) {
  parallel_for(par, g.m, std::max<std::size_t>(1, elementwise_grain / g.n), [&g](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      T* row = g.c + i * g.ldc;
      if (g.beta == T(0))
        std::fill(row, row + g.n, T(0));
      else
        for (std::size_t j = 0; j < g.n; ++j) row[j] *= g.beta;
    }
  });
}

// The blocked GEMM (Goto / BLIS): for each panel of NC columns and each depth block of KC, B is
// packed once into the calling thread's buffer (in parallel), then blocks of C — MC rows, possibly
// split into column groups when there are few row blocks — are computed in parallel, each task
// packing its own rows of A. Block boundaries depend only on m, n, k and the kernel (the number of
// workers only changes how many row blocks a range of MR-row panels is cut into, never the order
// of the arithmetic of any element of C), so results do not depend on `par`.
//
// The rounding of autocast only changes the packing, so only the packing is compiled per rounding:
// one blocked loop per kernel family, not four.
template <class K>
void gemm_blocked(const Parallel& par, const GemmProblem<typename K::value_type>& g, Rounding rounding) {
  using T = typename K::value_type;
  constexpr std::size_t MR = K::mr, NR = K::nr;
  const std::size_t workers = par.pool == nullptr ? 1 : std::max<std::size_t>(1, par.workers);

  const std::size_t k_blocks = ceil_div(g.k, K::kc);
  const std::size_t kc_max = ceil_div(g.k, k_blocks);  // balanced: no thin last block
  const std::size_t n_panels = ceil_div(g.n, K::nc);
  const std::size_t nc_max = round_up(ceil_div(g.n, n_panels), NR);
  const std::size_t m_panels = ceil_div(g.m, MR);
  std::size_t row_blocks = ceil_div(g.m, K::mc);
  if (workers > 1) row_blocks = std::min(round_up(row_blocks, workers), m_panels);
  const std::size_t mc = round_up(ceil_div(g.m, row_blocks), MR);
  row_blocks = ceil_div(g.m, mc);

  T* const bbuf = static_cast<T*>(gemm_buffer_b().get(kc_max * nc_max * sizeof(T)));

  for (std::size_t jc = 0; jc < g.n; jc += nc_max) {
    const std::size_t nc = std::min(nc_max, g.n - jc);
    const std::size_t n_strips = ceil_div(nc, NR);
    // Few row blocks for many workers: also split the columns (each group packs its rows of A again).
    std::size_t groups = 1;
    if (workers > 1 && row_blocks < 2 * workers)
      groups = std::max<std::size_t>(1, std::min(ceil_div(2 * workers, row_blocks), n_strips / 4));
    for (std::size_t pc = 0; pc < g.k; pc += kc_max) {
      const std::size_t kc = std::min(kc_max, g.k - pc);
      const T beta = pc == 0 ? g.beta : T(1);
      parallel_for(par, n_strips, std::max<std::size_t>(1, 32768 / (kc * NR)), [&](std::size_t s0, std::size_t s1) {
        with_rounding(rounding, [&](auto r) { pack_b<NR, decltype(r)::value>(g, jc, nc, pc, kc, s0, s1, bbuf); });
      });
      parallel_for(par, row_blocks * groups, 1, [&](std::size_t t0, std::size_t t1) {
        for (std::size_t t = t0; t < t1; ++t) {
          const std::size_t ib = t / groups, grp = t % groups;
          const std::size_t i0 = ib * mc, rows = std::min(mc, g.m - i0);
          T* const abuf = static_cast<T*>(gemm_buffer_a().get(round_up(rows, MR) * kc * sizeof(T)));
          with_rounding(rounding, [&](auto r) { pack_a<MR, decltype(r)::value>(g, i0, rows, pc, kc, abuf); });
          const std::size_t s_begin = grp * n_strips / groups, s_end = (grp + 1) * n_strips / groups;
          for (std::size_t s = s_begin; s < s_end; ++s) {
            const std::size_t j0 = jc + s * NR, nr = std::min(NR, g.n - j0);
            const T* pb = bbuf + s * kc * NR;
            for (std::size_t q = 0; q < rows; q += MR) {
              const std::size_t mr = std::min(MR, rows - q);
              const T* pa = abuf + q * kc;
              T* cp = g.c + (i0 + q) * g.ldc + j0;
              if (mr == MR && nr == NR) {
                K::kernel(kc, pa, pb, cp, g.ldc, g.alpha, beta);
              } else {  // an edge tile: compute the whole tile aside, then update the part inside C
                alignas(64) T tile[MR * NR];
                K::kernel(kc, pa, pb, tile, NR, T(1), T(0));
                for (std::size_t i = 0; i < mr; ++i)
                  for (std::size_t j = 0; j < nr; ++j) {
                    T& cv = cp[i * g.ldc + j];
                    cv = beta == T(0) ? g.alpha * tile[i * NR + j] : g.alpha * tile[i * NR + j] + beta * cv;
                  }
              }
            }
          }
        }
      });
    }
  }
}

template <class T>
void gemm_dispatch(GemmIsa isa, const Parallel& par, const GemmProblem<T>& g, Rounding r) {
#if XDEV_DETAIL_HOST_X86
  constexpr bool is_f32 = std::is_same_v<T, float>;
  switch (isa) {
    case GemmIsa::avx512:
      return gemm_blocked<std::conditional_t<is_f32, Avx512F32, Avx512F64>>(par, g, r);
    case GemmIsa::avx2:
      return gemm_blocked<std::conditional_t<is_f32, Avx2F32, Avx2F64>>(par, g, r);
    case GemmIsa::sse2:
      return gemm_blocked<std::conditional_t<is_f32, Sse2F32, Sse2F64>>(par, g, r);
    case GemmIsa::portable:
      break;
  }
#else
  (void)isa;
#endif
  gemm_blocked<PortableKernel<T>>(par, g, r);
}

/// `gemm` with a chosen kernel family (for tests and benchmarks; `gemm` uses `best_gemm_isa()`).
/// \throws xdev::error `errc::unimplemented` when this CPU cannot run `isa`, and what `gemm` throws.
template <FloatData T>
void gemm_with(GemmIsa isa, const Parallel& par, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
               std::size_t k, T alpha, const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c,
               std::size_t ldc, DType compute) {
  const Rounding rounding = rounding_for<T>(compute, "gemm");
  if (!gemm_isa_supported(isa))
    throw error(errc::unimplemented, "gemm: this CPU cannot run the requested kernel family");
  if (m == 0 || n == 0) return;
  const GemmProblem<T> g{trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
  if (k == 0 || alpha == T(0)) return gemm_scale_c(par, g);
  gemm_dispatch<T>(isa, par, g, rounding);
}

}  // namespace detail

/// Row-major `C = alpha * op(A) * op(B) + beta * C`, as BLAS `?gemm` with row-major storage:
/// `op(A)` is m x k (A is stored m x k with row stride `lda`, or k x m when `trans_a`), `op(B)` is
/// k x n (stored k x n, or n x k when `trans_b`), C is m x n with row stride `ldc`. With
/// `beta == 0`, C is only written (NaNs in it do not propagate); with `alpha == 0` or `k == 0`, A
/// and B are not read. `compute` as for `dot`: f16/bf16 round each element of A and B to that
/// type while packing (autocast), products and sums are in T.
///
/// Cache-blocked (packed panels of A and B in 64-byte-aligned per-thread buffers, which each
/// thread keeps for later calls: up to ~4 MiB for B on a calling thread, ~0.3 MiB for A on each
/// thread) with a register-blocked micro-kernel chosen once for the CPU — AVX-512F (12 x 32 floats
/// / 12 x 16 doubles), AVX2 + FMA (6 x 16 / 6 x 8) or SSE2 — compiled for those instruction sets
/// with function attributes, so no `-march` flag is needed. Blocks of C are spread over `par`; the
/// result does not depend on `par`.
/// \throws xdev::error `errc::invalid_argument` when `compute` is not a floating-point type.
template <detail::FloatData T>
void gemm(const Parallel& par, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
          const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc, DType compute) {
  detail::gemm_with(detail::best_gemm_isa(), par, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                    compute);
}

}  // namespace xdev::kernels
