// Failure scenarios of <xdev/distributed/mpi.hpp>, each run under mpirun by run_scenario.cmake,
// which checks the job's exit status, its output and how long it took:
//
//   stall        the odd ranks sleep for 20 s instead of calling barrier; the others must get
//                errc::deadline_exceeded naming exactly the odd ranks within the 500 ms deadline,
//                and the failed session then aborts the job (status deadline_abort_status)
//   throw        rank 1 throws out of main while the others wait in a barrier (60 s deadline):
//                the terminate handler must abort the job at once
//   exit         rank 1 calls std::exit(0) without ending its session: the job must end at once,
//                with a non-zero status
//   crash        rank 1 dies of a signal (std::abort: SIGABRT) while the others wait in a
//                barrier (60 s deadline): the job must end at once, with a non-zero status
//   all_reduce_stall  as stall, for an all_reduce of device arrays over a GlobalMesh (two host
//                devices per rank): rank 1 sleeps, rank 0 must be told that rank 1 has not arrived
//   axes_stall   as all_reduce_stall, for an all_gather over one axis of a GlobalMesh of shape
//                (2, 2) over 4 ranks: rank 3 sleeps; ranks 0 and 1, whose group it is not in, are
//                still told that rank 3 has not arrived (every rank takes part in every call)
//   other_call   ranks 0 and 2 call barrier, ranks 1 and 3 all_reduce (which announces itself
//                with the header of its terms, not an arrival token): within the 500 ms deadline
//                each must be told that every rank arrived, but not at the same call, naming the
//                others' call
//   group_rank   each rank sets a GROUP_RANK of its own on one host: init must fail on every
//                rank, naming the variable and the ranks
//   thread_level the program initialises MPI itself with MPI_THREAD_FUNNELED: init must refuse
//                with errc::unavailable naming the level, and leave MPI to the program
#include <xdev/backends/host.hpp>
#include <xdev/core/error.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/distributed/axis_collectives.hpp>
#include <xdev/distributed/global_mesh.hpp>
#include <xdev/distributed/mpi.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace dist = xdev::distributed;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  const std::string_view scenario = argc > 1 ? argv[1] : "";
  if (scenario == "group_rank") {
    const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
    setenv("GROUP_RANK", r != nullptr ? r : "0", 1);
  }
  if (scenario == "thread_level") {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int status = 2;
    try {
      dist::Session refused = dist::init();
      std::fprintf(stderr, "scenario thread_level: init accepted thread level %d\n", provided);
    } catch (const xdev::error& e) {
      std::fprintf(stderr, "scenario thread_level: %s (%s)\n", e.what(),
                   e.condition() == xdev::errc::unavailable ? "unavailable" : "another error");
      status = provided < MPI_THREAD_MULTIPLE && e.condition() == xdev::errc::unavailable ? 0 : 2;
    }
    MPI_Finalize();  // still the program's: init did not take MPI over
    return status;
  }
  dist::Session session = dist::init();
  const std::uint32_t rank = session.rank();

  if (scenario == "stall") {
    if (rank % 2 == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(20));
      session.barrier();
      return 0;
    }
    std::string expected;
    for (std::uint32_t r = 1; r < session.world_size(); r += 2)
      expected += (expected.empty() ? "" : ", ") + std::to_string(r);
    const auto start = Clock::now();
    try {
      session.barrier(std::chrono::milliseconds(500));
    } catch (const xdev::error& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      const std::string what = e.what();
      const bool named = what.find(" " + expected + " of " + std::to_string(session.world_size())) != std::string::npos;
      if (e.condition() == xdev::errc::deadline_exceeded && named && ms >= 500 && ms < 2000) {
        std::printf("scenario stall: rank %u OK after %lld ms: %s\n", rank, static_cast<long long>(ms), e.what());
        std::fflush(stdout);
        return 0;  // the failed session aborts the job
      }
      std::printf("scenario stall: rank %u WRONG after %lld ms (expected ranks %s): %s\n", rank,
                  static_cast<long long>(ms), expected.c_str(), e.what());
      std::fflush(stdout);
      session.abort(2, "scenario stall failed");
    }
    std::printf("scenario stall: rank %u WRONG: the barrier completed\n", rank);
    std::fflush(stdout);
    session.abort(2, "scenario stall failed");
  }
  if (scenario == "all_reduce_stall") {
    xdev::Runtime<xdev::backends::Host> rt(xdev::RuntimeOptions{}, xdev::backends::Host::Options{.devices = 2});
    const dist::GlobalMesh mesh(session, {xdev::AnyDevice(rt.device(0)), xdev::AnyDevice(rt.device(1))}, "data");
    std::vector<xdev::AnyArray<float>> grads;
    for (const auto& d : mesh.local_mesh().devices()) grads.push_back(xdev::empty<float>(d, {256}));
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(20));
      dist::all_reduce(mesh, std::span(grads), xdev::spmd::ReduceOp::mean).get();
      return 0;
    }
    const auto start = Clock::now();
    try {
      dist::all_reduce(mesh, std::span(grads), xdev::spmd::ReduceOp::mean, std::chrono::milliseconds(500)).get();
    } catch (const xdev::error& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      const bool named = std::string(e.what()).find("rank 1 of 2 has not arrived") != std::string::npos;
      std::printf("scenario all_reduce_stall: rank %u %s after %lld ms: %s\n", rank,
                  e.condition() == xdev::errc::deadline_exceeded && named && ms >= 500 && ms < 2000 ? "OK" : "WRONG",
                  static_cast<long long>(ms), e.what());
      std::fflush(stdout);
      return 0;  // the failed session aborts the job
    }
    std::printf("scenario all_reduce_stall: rank %u WRONG: the all_reduce completed\n", rank);
    std::fflush(stdout);
    session.abort(2, "scenario all_reduce_stall failed");
  }
  if (scenario == "axes_stall") {
    xdev::Runtime<xdev::backends::Host> rt(xdev::RuntimeOptions{}, xdev::backends::Host::Options{.devices = 1});
    const dist::GlobalMesh mesh(session, {xdev::AnyDevice(rt.device(0))}, {2, 2}, {"x", "y"});
    std::vector<xdev::AnyArray<float>> in, out;
    in.push_back(xdev::empty<float>(mesh.local_mesh().device(0), {64}));
    out.push_back(xdev::empty<float>(mesh.local_mesh().device(0), {128}));
    const std::span<const xdev::AnyArray<float>> shard(in);
    if (rank == 3) {
      std::this_thread::sleep_for(std::chrono::seconds(20));
      dist::all_gather(mesh, "y", shard, std::span(out)).get();
      return 0;
    }
    const auto start = Clock::now();
    try {
      dist::all_gather(mesh, "y", shard, std::span(out), std::chrono::milliseconds(500)).get();
    } catch (const xdev::error& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      const bool named = std::string(e.what()).find("rank 3 of 4 has not arrived") != std::string::npos;
      std::printf("scenario axes_stall: rank %u %s after %lld ms: %s\n", rank,
                  e.condition() == xdev::errc::deadline_exceeded && named && ms >= 500 && ms < 2000 ? "OK" : "WRONG",
                  static_cast<long long>(ms), e.what());
      std::fflush(stdout);
      return 0;  // the failed session aborts the job
    }
    std::printf("scenario axes_stall: rank %u WRONG: the all_gather completed\n", rank);
    std::fflush(stdout);
    session.abort(2, "scenario axes_stall failed");
  }
  if (scenario == "other_call") {
    const bool reducing = rank % 2 == 1;
    std::string expected;
    for (std::uint32_t r = 0; r < session.world_size(); ++r)
      if (r != rank && r % 2 != rank % 2)
        expected += (expected.empty() ? "" : ", ") + ("rank " + std::to_string(r) + " called ") +
                    (reducing ? "barrier" : "all_reduce");
    std::vector<float> data(16, 1.0f);
    const auto start = Clock::now();
    try {
      if (reducing)
        session.all_reduce(std::span(data), MPI_SUM, std::chrono::milliseconds(500));
      else
        session.barrier(std::chrono::milliseconds(500));
    } catch (const xdev::error& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      const bool named = std::string(e.what()).find("not at the same call: " + expected) != std::string::npos;
      std::printf("scenario other_call: rank %u %s after %lld ms: %s\n", rank,
                  e.condition() == xdev::errc::deadline_exceeded && named && ms >= 500 && ms < 2000 ? "OK" : "WRONG",
                  static_cast<long long>(ms), e.what());
      std::fflush(stdout);
      return 0;  // the failed session aborts the job
    }
    std::printf("scenario other_call: rank %u WRONG: the call completed\n", rank);
    std::fflush(stdout);
    session.abort(2, "scenario other_call failed");
  }
  if (scenario == "throw") {
    if (rank == 1) throw std::runtime_error("scenario throw: boom on rank 1");
    session.barrier();
    return 0;
  }
  if (scenario == "exit") {
    if (rank == 1) std::exit(0);  // even a zero status, without ending the session, ends the job
    session.barrier();
    return 0;
  }
  if (scenario == "crash") {
    if (rank == 1) std::abort();
    session.barrier();
    return 0;
  }
  std::fprintf(stderr,
               "unknown scenario \"%s\"; accepted: stall, all_reduce_stall, axes_stall, throw, exit, crash, "
               "group_rank, thread_level\n",
               argv[argc > 1 ? 1 : 0]);
  return 2;
}
