/// \file
/// The process side of a distributed run: what xdev did to the process (initialised MPI, installed
/// a terminate handler), the abort policy (`abort_job`: report, then `MPI_Abort` the whole job),
/// the process-wide default deadline, and the Open MPI tuning done at init.
#pragma once

#include <xdev/core/log.hpp>

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>

namespace xdev::distributed {

/// `MPI_Abort` status of a job aborted because a collective missed its deadline.
inline constexpr int deadline_abort_status = 124;
/// `MPI_Abort` status of a job aborted by a rank's `std::terminate` or by an exception that
/// destroyed a session.
inline constexpr int exception_abort_status = 70;

namespace detail {

inline std::atomic<std::int64_t> default_timeout_ms{60'000};

struct ProcessState {
  std::mutex mutex;
  bool xdev_initialized_mpi = false;
  bool terminate_installed = false;
  std::terminate_handler previous_terminate = nullptr;
  void* current = nullptr;  // the live Session
};
inline ProcessState& process_state() {
  static ProcessState state;
  return state;
}

inline bool mpi_active() noexcept {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

[[noreturn]] inline void abort_job(int status, const std::string& why) noexcept {
  int rank = -1;
  if (mpi_active()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    log::write(log::Level::error, "distributed",
               "rank " + std::to_string(rank) + ": " + why + "; aborting the job (MPI_Abort, status " +
                   std::to_string(status) + ")");
  } catch (...) {  // no memory for the line: abort all the same
  }
  std::fflush(stderr);
  if (mpi_active()) MPI_Abort(MPI_COMM_WORLD, status);
  std::abort();
}

// Installed by init while MPI is initialised: a rank that terminates takes the job down at once.
[[noreturn]] inline void on_terminate() noexcept {
  std::string what = "std::terminate without an active exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = std::string("uncaught exception: ") + ex.what();
    } catch (...) {
      what = "uncaught exception of a non-standard type";
    }
  }
  if (mpi_active()) abort_job(exception_abort_status, what);
  if (std::terminate_handler previous = process_state().previous_terminate) previous();
  std::abort();
}

// Open MPI's libnbc, which runs MPI_Iallreduce, picks a binomial tree (reduce to rank 0, then
// broadcast: every byte crosses twice, one rank at a time) for every in-place reduction and for
// fewer than 4 processes, whatever the size: about half the bandwidth of the blocking
// MPI_Allreduce. Unless something chose an algorithm already (the environment names the variable,
// even as "ignore", or it is not "ignore" = 0), select the reduce-scatter + allgather one (3,
// "rabenseifner"; libnbc itself falls back to its ring when there are fewer elements than
// processes). A control variable of MPI_T, written on every rank during init; a no-op with an MPI
// that has no such variable.
inline void select_open_mpi_iallreduce_algorithm() noexcept {
  constexpr int ignore = 0;
  constexpr int reduce_scatter_allgather = 3;
  const bool chosen = std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm") != nullptr;
  int level = 0;
  if (chosen || MPI_T_init_thread(MPI_THREAD_MULTIPLE, &level) != MPI_SUCCESS) return;
  int value = -1;
  int index = -1;
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  int count = 0;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    if (count == 1 && MPI_T_cvar_read(handle, &value) == MPI_SUCCESS && value == ignore)
      MPI_T_cvar_write(handle, &reduce_scatter_allgather);
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
}

}  // namespace detail

/// The deadline of the collectives whose call sets none: process-wide, initially 60 s.
[[nodiscard]] inline std::chrono::milliseconds default_timeout() noexcept {
  return std::chrono::milliseconds(detail::default_timeout_ms.load(std::memory_order_relaxed));
}

}  // namespace xdev::distributed
