/// \file
/// MPI's side of the element types and errors: `mpi_datatype<T>()`, `mpi_op_name`, and
/// `mpi_check`, which turns an MPI error code into an `xdev::error` naming the call.
#pragma once

#include <xdev/core/error.hpp>

#include <mpi.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace xdev::distributed::detail {

inline std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<std::size_t>(length));
}

inline void mpi_check(int rc, const char* call) {
  if (rc != MPI_SUCCESS)
    throw error(errc::internal, std::string("distributed: ") + call + " failed: " + mpi_error_text(rc));
}

template <class T>
inline constexpr bool always_false = false;

// The MPI datatype of the element types `Session::all_reduce` takes.
template <class T>
MPI_Datatype mpi_datatype() {
  if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return MPI_INT32_T;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return MPI_UINT32_T;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return MPI_INT64_T;
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return MPI_UINT64_T;
  else
    static_assert(always_false<T>,
                  "distributed::all_reduce: the elements must be float, double, or 32- or 64-bit integers");
}

inline std::string mpi_op_name(MPI_Op op) {
  if (op == MPI_SUM) return "MPI_SUM";
  if (op == MPI_MIN) return "MPI_MIN";
  if (op == MPI_MAX) return "MPI_MAX";
  if (op == MPI_PROD) return "MPI_PROD";
  return "another MPI_Op";
}

}  // namespace xdev::distributed::detail
