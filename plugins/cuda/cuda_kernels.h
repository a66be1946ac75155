/// \file
/// The device code of xdev's CUDA plugin (cuda_kernels.cu, compiled by nvcc), as plain launchers
/// the C++ side (cuda_backend.hpp, compiled by the host compiler) calls. Nothing of xdev's C++
/// headers, Boost or the standard library's heavier parts crosses into nvcc: this header names only
/// the CUDA runtime's types and fixed-width integers.
///
/// Every launcher enqueues on `stream` and returns the launch's status (`cudaGetLastError`), never
/// waiting. Dtype codes are xdev's (`XDEV_DTYPE_*` of <xdev/plugin/abi.h>: bool 0, u8 1, i32 2,
/// i64 3, f16 4, bf16 5, f32 6, f64 7). "Float" launchers take f32 or f64 only.
///
/// What the kernels compute is what xdev's host kernels compute: bit for bit for fill, convert,
/// gather, uniform random numbers and the element-wise ops (compiled with `--fmad=false`, so
/// `y + alpha * x` is a multiply and an add rounded twice, as on the host); in another summation
/// order (equal for exact sums, close otherwise) for sum, sum over an axis and dot; within a few
/// ulps for normal random numbers (CUDA's `log`, `sqrt`, `cos`, `sin` against the C library's).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace xdev_cuda::kernels {

/// `x[i] = pattern` for i < n, elements of `element_bytes` (1, 2, 4 or 8) bytes; `pattern` holds
/// the element's bytes in its low bytes.
cudaError_t fill(void* x, std::size_t n, std::size_t element_bytes, std::uint64_t pattern, cudaStream_t stream);

/// `x[i] *= alpha` (float dtypes; `alpha` converted to the dtype, exactly for a float's value).
cudaError_t scale(int dtype, void* x, std::size_t n, double alpha, cudaStream_t stream);

/// `y[i] = y[i] + alpha * x[i]`.
cudaError_t axpy(int dtype, double alpha, const void* x, void* y, std::size_t n, cudaStream_t stream);

/// `out[i] = a[i] op b[i]`: op 0 add, 1 mul, 2 min `(b < a) ? b : a`, 3 max `(a < b) ? b : a`.
cudaError_t binary(int dtype, int op, const void* a, const void* b, void* out, std::size_t n, cudaStream_t stream);

/// `out[i] = e^x[i]` for f32, f64 (CUDA's `exp`) and f16, bf16 (through float, rounded once).
cudaError_t exp(int dtype, const void* x, void* out, std::size_t n, cudaStream_t stream);

/// Bytes of device scratch `sum` and `dot` need for n elements of `element_bytes` each.
std::size_t reduce_scratch_bytes(std::size_t n, std::size_t element_bytes);

/// `*result = sum of x[i]` into device memory `result`, in two passes through `scratch`
/// (`reduce_scratch_bytes` bytes). Sums start at -0, so a sum of -0s is -0, as on the host.
cudaError_t sum(int dtype, const void* x, std::size_t n, void* result, void* scratch, cudaStream_t stream);

/// `*result = sum of round(x[i]) * round(y[i])`, rounding 0 none, 1 to f32, 2 to f16, 3 to bf16
/// (to nearest even, as xdev's host kernels round autocast inputs).
cudaError_t dot(int dtype, const void* x, const void* y, std::size_t n, int rounding, void* result, void* scratch,
                cudaStream_t stream);

/// x viewed as [outer, axis, inner] summed over the middle axis into out [outer, inner] (+0 for an
/// empty axis).
cudaError_t sum_axis(int dtype, const void* x, void* out, std::size_t outer, std::size_t axis, std::size_t inner,
                     cudaStream_t stream);

/// `dst[i] = round(src[i])` (float dtypes; rounding as for `dot`): the autocast inputs of an f64
/// gemm.
cudaError_t round_inputs(int dtype, const void* src, void* dst, std::size_t n, int rounding, cudaStream_t stream);

/// Row-major m x n C (row stride ldc) `= beta * C`, or 0 when beta == 0 (C not read): gemm with
/// alpha == 0 or an empty depth.
cudaError_t scale_matrix(int dtype, void* c, std::size_t m, std::size_t n, std::size_t ldc, double beta,
                         cudaStream_t stream);

/// Gather's range check: `status` (16 bytes of device memory) must hold 0xFF bytes in its first 4.
/// For every index outside [0, rows) at position i, `status[0]` becomes min(status[0], i) (at most
/// 0xFFFFFFFE).
cudaError_t gather_check(int index_dtype, const void* index, std::size_t n, std::size_t rows, void* status,
                         cudaStream_t stream);

/// `out[i, :] = table[index[i], :]` when the check found nothing; otherwise nothing is written and
/// the index at the first bad position is stored as an int64 at byte 8 of `status`.
cudaError_t gather(std::size_t element_bytes, int index_dtype, const void* table, std::size_t rows, std::size_t cols,
                   const void* index, std::size_t n, void* out, void* status, cudaStream_t stream);

/// The counter-based streams of <xdev/random/stream.hpp>: algorithm 0 Philox4x32-10, 1
/// Threefry2x32-20; uniform on [0, 1) (bit-identical to the host) or normal(mean, stddev).
cudaError_t rng(int dtype, void* out, std::size_t n, int algorithm, std::uint64_t seed, std::uint64_t offset,
                bool normal, double mean, double stddev, cudaStream_t stream);

/// `dst[i] = D(src[i])` for distinct dtypes S, D, bit for bit xdev's host conversion.
cudaError_t convert(int src_dtype, int dst_dtype, const void* src, void* dst, std::size_t n, cudaStream_t stream);

/// A kernel that does nothing (the benchmark's raw-launch baseline and the latency probes).
cudaError_t empty(cudaStream_t stream);

}  // namespace xdev_cuda::kernels
