/// \file
/// How the CUDA plugin turns a failed CUDA or cuBLAS call into an `xdev::error`: the call and the
/// status by name, "CUDA:0: cudaMallocAsync failed: cudaErrorMemoryAllocation (2): out of memory",
/// with the status mapped to an `errc` (`cuda_errc`).
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <xdev/core/error.hpp>

#include <string>
#include <string_view>

namespace xdev_cuda {

/// The `errc` of a CUDA status: allocation failures are `out_of_memory`; no device, no or an old
/// driver, and the sticky errors after which the context is unusable (an illegal address, a
/// launch failure, an assert or a trap in a kernel, an uncorrectable ECC error, ...) are
/// `unavailable`; a bad argument is `invalid_argument`; anything else is `internal`.
constexpr xdev::errc cuda_errc(cudaError_t status) noexcept {
  switch (status) {
    case cudaErrorMemoryAllocation:
      return xdev::errc::out_of_memory;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
      return xdev::errc::invalid_argument;
    default:
      break;
  }
  return (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver || status == cudaErrorInvalidDevice ||
          status == cudaErrorDevicesUnavailable || status == cudaErrorSystemDriverMismatch ||
          status == cudaErrorCompatNotSupportedOnDevice || status == cudaErrorStubLibrary ||
          status == cudaErrorDeviceUninitialized)
             ? xdev::errc::unavailable
         : (status == cudaErrorIllegalAddress || status == cudaErrorLaunchFailure ||
            status == cudaErrorIllegalInstruction || status == cudaErrorMisalignedAddress ||
            status == cudaErrorInvalidAddressSpace || status == cudaErrorInvalidPc ||
            status == cudaErrorHardwareStackError || status == cudaErrorAssert || status == cudaErrorECCUncorrectable ||
            status == cudaErrorLaunchTimeout || status == cudaErrorUnknown)
             ? xdev::errc::unavailable
             : xdev::errc::internal;
}

/// True for the statuses after which the CUDA context is unusable until the process exits
/// ("sticky" errors): every later call on the device fails with them.
constexpr bool cuda_sticky(cudaError_t status) noexcept {
  return status == cudaErrorIllegalAddress || status == cudaErrorLaunchFailure ||
         status == cudaErrorIllegalInstruction || status == cudaErrorMisalignedAddress ||
         status == cudaErrorInvalidAddressSpace || status == cudaErrorInvalidPc ||
         status == cudaErrorHardwareStackError || status == cudaErrorAssert || status == cudaErrorECCUncorrectable ||
         status == cudaErrorLaunchTimeout;
}

/// "what: call failed: cudaErrorX (n): description" as an `xdev::error` of `cuda_errc(status)`.
inline xdev::error cuda_failure(std::string_view what, std::string_view call, cudaError_t status) {
  const char* name = cudaGetErrorName(status);
  const char* text = cudaGetErrorString(status);
  std::string m(what);
  if (!m.empty()) m += ": ";
  m += std::string(call) + " failed: " + (name != nullptr ? name : "unknown CUDA error") + " (" +
       std::to_string(static_cast<int>(status)) + ")";
  if (text != nullptr) m += std::string(": ") + text;
  return xdev::error(cuda_errc(status), m);
}

/// Throws `cuda_failure(what, call, status)` unless the call succeeded.
inline void cuda_check(cudaError_t status, std::string_view what, std::string_view call) {
  if (status != cudaSuccess) throw cuda_failure(what, call, status);
}

/// A cuBLAS status by name ("CUBLAS_STATUS_ALLOC_FAILED").
constexpr std::string_view cublas_status_name(cublasStatus_t s) noexcept {
  switch (s) {
    // clang-format off
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    // clang-format on
    default:
      return "unknown cuBLAS status";
  }
}

/// A failed cuBLAS call as an `xdev::error`: an allocation failure is `out_of_memory`, an
/// unsupported configuration `unimplemented`, an invalid value `invalid_argument`, the rest
/// `internal`.
inline xdev::error cublas_failure(std::string_view what, std::string_view call, cublasStatus_t status) {
  xdev::errc code = xdev::errc::internal;
  if (status == CUBLAS_STATUS_ALLOC_FAILED) code = xdev::errc::out_of_memory;
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_ARCH_MISMATCH) code = xdev::errc::unimplemented;
  if (status == CUBLAS_STATUS_INVALID_VALUE) code = xdev::errc::invalid_argument;
  std::string m(what);
  if (!m.empty()) m += ": ";
  m += std::string(call) + " failed: " + std::string(cublas_status_name(status)) + " (" +
       std::to_string(static_cast<int>(status)) + ")";
  return xdev::error(code, m);
}

inline void cublas_check(cublasStatus_t status, std::string_view what, std::string_view call) {
  if (status != CUBLAS_STATUS_SUCCESS) throw cublas_failure(what, call, status);
}

}  // namespace xdev_cuda
