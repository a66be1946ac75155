/// \file
/// Multi-process runs over MPI: `xdev::distributed::init()` and the process-level collectives
/// `barrier`, `rendezvous`, `broadcast_master_param` and `all_reduce` (of host memory; device arrays
/// across processes: <xdev/distributed/global_mesh.hpp>). The only xdev header that includes
/// <mpi.h>: link `xdev::mpi` (`find_package(xdev CONFIG REQUIRED COMPONENTS mpi)`). See
/// docs/distributed.md.
///
///     int main() {
///       xdev::distributed::Session session = xdev::distributed::init();   // MPI_Init_thread, placement
///       auto dev = xdev::accelerator::current_device();                   // this local rank's share
///       auto w = xdev::empty<float>(dev, {1024});
///       if (session.rank() == 0) init_weights(w);
///       xdev::distributed::broadcast_master_param(w);                     // rank 0's values everywhere
///       auto all = xdev::distributed::rendezvous("ready", bytes);         // everyone's bytes, rank order
///     }                                                                   // MPI_Finalize
///
/// **Deadlines.** Every collective (and init's own exchange) has a deadline: the call's `timeout`,
/// else `default_timeout()` (60 s, `set_default_timeout`). They run as non-blocking MPI calls
/// polled with `MPI_Test`. Each call first posts an *arrival* token (a one-int message on a
/// communicator of its own) to every other rank, so when the deadline passes the rank knows who
/// never entered the call: it throws `errc::deadline_exceeded` naming those ranks (or, when every
/// rank arrived, what each peer was doing).
///
/// **Abort policy.** A collective that missed its deadline cannot be cancelled (MPI has no way
/// to), so the job cannot go on: the session is *failed*, later collectives throw
/// `errc::unavailable`, and destroying it calls `MPI_Abort` (status `deadline_abort_status`) —
/// the caller catches the exception only to report or save what it must first. Likewise a rank
/// whose session is destroyed by an exception, and any `std::terminate` (an uncaught exception,
/// in any thread) while MPI is initialised, abort the whole job at once (status
/// `exception_abort_status`) instead of leaving the other ranks waiting.
///
/// **Thread safety.** A session's calls are serialized by a mutex, so calls from several threads
/// are safe, but every rank must make the same collective calls in the same order: call them from
/// one thread, or order them yourself. MPI is initialised with `MPI_THREAD_MULTIPLE`, so other
/// threads (device runtimes, the program's own MPI calls on its own communicators) may use MPI.
#pragma once

#include <xdev/any/registry.hpp>
#include <xdev/backend/serial_worker.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/distributed/environment.hpp>
#include <xdev/memory/array.hpp>

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace xdev::distributed {

/// `MPI_Abort` status of a job aborted because a collective missed its deadline.
inline constexpr int deadline_abort_status = 124;
/// `MPI_Abort` status of a job aborted by a rank's `std::terminate` or by an exception that
/// destroyed a session.
inline constexpr int exception_abort_status = 70;

namespace detail {

inline std::atomic<std::int64_t> default_timeout_ms{60'000};

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

// What a session call is, as its arrival token says (the tokens' send buffers: static storage,
// since the sends are never waited for).
enum class Kind : int {
  init = 0,
  barrier = 1,
  rendezvous = 2,
  broadcast_master_param = 3,
  finalize = 4,
  all_reduce = 5,
  all_gather = 6,
  reduce_scatter = 7,
  broadcast = 8
};
inline constexpr int kind_codes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
inline constexpr const char* kind_names[] = {"init",     "barrier",    "rendezvous", "broadcast_master_param",
                                             "finalize", "all_reduce", "all_gather", "reduce_scatter",
                                             "broadcast"};
static_assert(std::size(kind_codes) == std::size(kind_names), "a name and a token for every Kind");
inline const char* name_of(int kind) {
  return kind >= 0 && kind < static_cast<int>(std::size(kind_names)) ? kind_names[kind] : "an unknown call";
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
  std::fprintf(stderr, "xdev::distributed: rank %d: %s; aborting the job (MPI_Abort, status %d)\n", rank, why.c_str(),
               status);
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

inline std::string list_ranks(const std::vector<std::uint32_t>& ranks) {
  std::string out;
  for (std::uint32_t r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace detail

/// The deadline of the collectives whose call sets none: process-wide, initially 60 s.
[[nodiscard]] inline std::chrono::milliseconds default_timeout() noexcept {
  return std::chrono::milliseconds(detail::default_timeout_ms.load(std::memory_order_relaxed));
}

/// Sets `default_timeout()` for the calls started from now on.
/// \throws xdev::error `errc::invalid_argument` when `timeout` is not > 0.
inline void set_default_timeout(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    throw error(errc::invalid_argument, "distributed::set_default_timeout: the timeout must be > 0, got " +
                                            std::to_string(timeout.count()) + " ms");
  detail::default_timeout_ms.store(timeout.count(), std::memory_order_relaxed);
}

/// How `init` sets the process up.
struct Options {
  /// Deadline of init's own exchange (every rank must reach init within it); unset: `default_timeout()`.
  std::optional<std::chrono::milliseconds> timeout = std::nullopt;
  /// Call `Registry::global().configure_multiprocess` with this process's placement, so that each
  /// backend's client takes this local rank's share of the host's devices.
  bool configure_registry = true;
  /// When `init` initialises MPI itself and it is Open MPI: select the reduce-scatter + allgather
  /// algorithm of `MPI_Iallreduce` (libnbc's `coll_libnbc_iallreduce_algorithm` = 3) unless the
  /// environment or an MCA parameter file chose one. libnbc's own choice for in-place reductions
  /// and for fewer than 4 processes is a binomial tree with half the bandwidth. Process-wide:
  /// it applies to the program's own `MPI_Iallreduce` calls too. See docs/distributed.md.
  bool tune_collectives = true;
};

class Session;
Session init(const Options& options = {});

namespace detail {
struct SessionAccess;  // <xdev/distributed/global_mesh.hpp>'s way to the collectives' bodies
}  // namespace detail

/// A multi-process session: MPI initialised, this process's placement known, and the
/// process-level collectives. Made by `init()`; at most one exists at a time. Destroying it
/// waits (up to `default_timeout()`) for every rank to end its session too, then calls
/// `MPI_Finalize` when `init` initialised MPI (an MPI the program initialised itself is left
/// to it). A failed session, or one destroyed by an exception, aborts the job instead (see the
/// file comment). Not copyable or movable: keep it in `main` for the run.
class Session {
 public:
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  ~Session() {
    worker_.reset();  // the asynchronous collectives already started run to their end first
    {
      std::lock_guard lock(detail::process_state().mutex);
      detail::process_state().current = nullptr;
    }
    if (std::uncaught_exceptions() > uncaught_at_start_)
      detail::abort_job(exception_abort_status, "the distributed session was destroyed by an exception");
    std::lock_guard lock(mutex_);
    if (failed_) detail::abort_job(deadline_abort_status, "the distributed session failed: " + failure_);
    try {
      Op op = begin_locked(detail::Kind::finalize, std::nullopt);
      MPI_Request req = MPI_REQUEST_NULL;
      detail::mpi_check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
      wait_locked(op, req, "waiting for every rank to end its session");
      // Every peer entered the final barrier, so each one's arrival tokens are all sent: receive
      // them, so that no message is left unmatched at MPI_Finalize.
      while (true) {
        drain_locked();
        bool all = true;
        for (std::uint32_t p = 0; p < placement_.world_size; ++p)
          if (p != placement_.rank && arrived_[p] < seq_) all = false;
        if (all) break;
        if (std::chrono::steady_clock::now() > op.deadline)
          throw error(errc::deadline_exceeded, "arrival tokens missing at the end of the session");
        std::this_thread::yield();
      }
    } catch (const std::exception& ex) {
      detail::abort_job(deadline_abort_status, std::string("ending the distributed session: ") + ex.what());
    }
    MPI_Comm_free(&arrivals_);
    MPI_Comm_free(&comm_);
    if (owns_mpi_) {
      MPI_Finalize();
      std::lock_guard state_lock(detail::process_state().mutex);
      auto& state = detail::process_state();
      state.xdev_initialized_mpi = false;
      if (state.terminate_installed) std::set_terminate(state.previous_terminate);
      state.terminate_installed = false;
    }
  }

  /// This process's placement (rank, world size, local rank and size, host index and count).
  [[nodiscard]] const Placement& placement() const noexcept { return placement_; }
  /// This process's rank in the job (the rank in `MPI_COMM_WORLD`).
  [[nodiscard]] std::uint32_t rank() const noexcept { return placement_.rank; }
  /// The number of processes in the job.
  [[nodiscard]] std::uint32_t world_size() const noexcept { return placement_.world_size; }
  /// xdev's own duplicate of `MPI_COMM_WORLD` (its collectives run there). Use your own
  /// communicator for your own MPI calls.
  [[nodiscard]] MPI_Comm communicator() const noexcept { return comm_; }

  /// Runs `job` on the session's collectives thread, after the jobs posted before it: what the
  /// asynchronous collectives (`distributed::all_reduce` of device arrays) run on, one at a time
  /// and in the order they were started — the order every rank must start them in. Thread-safe.
  void post(HostTask job) { worker_->post(std::move(job)); }
  /// A collective missed its deadline: the job cannot go on, destroying the session aborts it.
  [[nodiscard]] bool failed() const {
    std::lock_guard lock(mutex_);
    return failed_;
  }

  /// Waits until every rank has called `barrier`.
  /// \throws xdev::error `errc::deadline_exceeded` naming the ranks that had not arrived when
  ///         `timeout` (unset: `default_timeout()`) passed; `errc::unavailable` when the session
  ///         failed earlier.
  void barrier(std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    std::lock_guard lock(mutex_);
    Op op = begin_locked(detail::Kind::barrier, timeout);
    MPI_Request req = MPI_REQUEST_NULL;
    detail::mpi_check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
    wait_locked(op, req, "MPI_Ibarrier");
    drain_locked();
  }

  /// Every rank contributes `payload`; every rank receives all of them, in rank order
  /// (PyTorch/XLA's `xm.rendezvous`). `tag` names the meeting and must be the same on every rank.
  ///
  ///     auto all = session.rendezvous("checkpoint-7", std::as_bytes(std::span(my_step)));
  ///     // all[r]: rank r's bytes; all.size() == session.world_size()
  ///
  /// \throws xdev::error `errc::invalid_argument` on every rank when the tags differ (naming each
  ///         tag and its ranks) or the payloads total more than 2147483647 bytes;
  ///         `errc::deadline_exceeded` / `errc::unavailable` as `barrier`.
  std::vector<std::vector<std::byte>> rendezvous(std::string_view tag, std::span<const std::byte> payload = {},
                                                 std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    std::lock_guard lock(mutex_);
    Op op = begin_locked(detail::Kind::rendezvous, timeout);
    std::vector<std::byte> mine(sizeof(std::uint64_t) + tag.size() + payload.size());
    const std::uint64_t tag_size = tag.size();
    std::memcpy(mine.data(), &tag_size, sizeof tag_size);
    if (!tag.empty()) std::memcpy(mine.data() + sizeof tag_size, tag.data(), tag.size());
    if (!payload.empty()) std::memcpy(mine.data() + sizeof tag_size + tag.size(), payload.data(), payload.size());
    auto all = allgather_locked(op, mine, "rendezvous(\"" + std::string(tag) + "\")");
    drain_locked();

    std::vector<std::string> tags(all.size());
    std::vector<std::vector<std::byte>> out(all.size());
    for (std::size_t r = 0; r < all.size(); ++r) {
      std::uint64_t n = 0;
      std::memcpy(&n, all[r].data(), sizeof n);
      tags[r].assign(reinterpret_cast<const char*>(all[r].data()) + sizeof n, static_cast<std::size_t>(n));
      out[r].assign(all[r].begin() + static_cast<std::ptrdiff_t>(sizeof n + n), all[r].end());
    }
    if (std::any_of(tags.begin(), tags.end(), [&](const std::string& t) { return t != tags[0]; })) {
      std::string text;
      std::vector<bool> done(tags.size());
      for (std::size_t r = 0; r < tags.size(); ++r) {
        if (done[r]) continue;
        std::vector<std::uint32_t> ranks;
        for (std::size_t q = r; q < tags.size(); ++q)
          if (tags[q] == tags[r]) ranks.push_back(static_cast<std::uint32_t>(q)), done[q] = true;
        text += (text.empty() ? "" : "; ") + ("\"" + tags[r] + "\" on rank" + (ranks.size() > 1 ? "s " : " ")) +
                detail::list_ranks(ranks);
      }
      throw error(errc::invalid_argument, "distributed::rendezvous: the ranks used different tags: " + text +
                                              " (every rank must use the same)");
    }
    return out;
  }

  /// Overwrites `data` on every rank with rank 0's (PyTorch/XLA's `broadcast_master_param`).
  /// Every rank must pass the same number of elements.
  /// \throws xdev::error `errc::invalid_argument` on every rank when the sizes differ (naming the
  ///         ranks and sizes); `errc::deadline_exceeded` / `errc::unavailable` as `barrier`.
  template <class T>
  void broadcast_master_param(std::span<T> data, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    static_assert(!std::is_const_v<T>, "broadcast_master_param: the span is written on every rank but 0: not const");
    static_assert(std::is_trivially_copyable_v<T>, "broadcast_master_param: the elements must be trivially copyable");
    std::lock_guard lock(mutex_);
    Op op = begin_locked(detail::Kind::broadcast_master_param, timeout);
    broadcast_master_locked(op, std::as_writable_bytes(data),
                            std::to_string(data.size()) + " elements of " + std::to_string(sizeof(T)) + " bytes");
    drain_locked();
  }

  /// Overwrites array `a` (an `AnyArray<T>` or an `Array<T, B>`) on every rank with rank 0's,
  /// staged through host memory: rank 0 copies it to the host, MPI broadcasts the bytes, the
  /// other ranks copy them to their device (each waits for its copy). Every rank's array must have
  /// the same shape.
  /// \throws as the span overload (a shape mismatch names the shapes), and the device's errors.
  template <class T, class B>
  void broadcast_master_param(Array<T, B>& a, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    static_assert(std::is_trivially_copyable_v<T>, "broadcast_master_param: the elements must be trivially copyable");
    std::lock_guard lock(mutex_);
    Op op = begin_locked(detail::Kind::broadcast_master_param, timeout);
    std::unique_ptr<T[]> staging(new T[a.size()]);
    std::span<T> host(staging.get(), a.size());
    if (placement_.rank == 0) a.device().copy_to_host(a.buffer(), host).get();
    broadcast_master_locked(
        op, std::as_writable_bytes(host),
        "an array of shape " + to_string(a.shape()) + " (" + std::to_string(sizeof(T)) + "-byte elements)");
    drain_locked();
    if (placement_.rank != 0) a.device().copy_to_device(std::span<const T>(host), a.buffer()).get();
  }

  /// Reduces `data` element-wise across the ranks with the predefined MPI operation `op`
  /// (`MPI_SUM`, `MPI_MIN`, `MPI_MAX`, ...), in place: every rank ends with the result
  /// (`MPI_Iallreduce`, polled to the deadline). Elements: float, double, or 32- or 64-bit integers.
  /// Every rank must pass the same number of elements and the same `op`. The host-memory building
  /// block of the device-array reduction over a `GlobalMesh` (<xdev/distributed/global_mesh.hpp>).
  /// \throws xdev::error `errc::invalid_argument` on every rank when the sizes or operations differ
  ///         (naming the ranks); `errc::deadline_exceeded` / `errc::unavailable` as `barrier`.
  template <class T>
  void all_reduce(std::span<T> data, MPI_Op op, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    const MPI_Datatype type = detail::mpi_datatype<T>();
    std::lock_guard lock(mutex_);
    Op call = begin_locked(detail::Kind::all_reduce, timeout);
    agree_locked(call, "all_reduce", data.size_bytes(),
                 std::to_string(data.size()) + " elements of " + std::to_string(sizeof(T)) + " bytes, " +
                     detail::mpi_op_name(op));
    constexpr std::size_t chunk = (std::size_t{1} << 30) / sizeof(T);  // MPI counts are ints
    for (std::size_t at = 0; at < data.size(); at += chunk) {
      const auto count = static_cast<int>(std::min(chunk, data.size() - at));
      MPI_Request req = MPI_REQUEST_NULL;
      detail::mpi_check(MPI_Iallreduce(MPI_IN_PLACE, data.data() + at, count, type, op, comm_, &req), "MPI_Iallreduce");
      wait_locked(call, req, "MPI_Iallreduce");
    }
    drain_locked();
  }

  /// Overwrites `data` on every rank with rank `root`'s (`MPI_Ibcast`, polled to the deadline).
  /// Every rank must pass the same number of elements and the same `root`.
  /// \throws xdev::error `errc::invalid_argument` on every rank when the sizes or roots differ
  ///         (naming the ranks) or `root` is not a rank of the job; `errc::deadline_exceeded` /
  ///         `errc::unavailable` as `barrier`.
  template <class T>
  void broadcast(std::span<T> data, std::uint32_t root,
                 std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    static_assert(!std::is_const_v<T>, "broadcast: the span is written on every rank but the root: not const");
    static_assert(std::is_trivially_copyable_v<T>, "broadcast: the elements must be trivially copyable");
    broadcast_impl(std::as_writable_bytes(data), root,
                   std::to_string(data.size()) + " elements of " + std::to_string(sizeof(T)) + " bytes", timeout);
  }

  /// Every rank contributes `mine`; every rank receives all of them in `all`, concatenated in rank
  /// order (`MPI_Iallgatherv`). Ranks may contribute different numbers of elements; `all` must
  /// hold their total on every rank.
  ///
  ///     std::vector<float> all(total);   // total: every rank's mine.size(), added up
  ///     session.all_gather(std::span<const float>(mine), std::span(all));
  ///
  /// \throws xdev::error `errc::invalid_argument` on every rank when the element sizes differ, a
  ///         rank's `all` does not hold the total (naming the ranks), or the total exceeds
  ///         2147483647 bytes; `errc::deadline_exceeded` / `errc::unavailable` as `barrier`.
  template <class T>
  void all_gather(std::span<const std::type_identity_t<T>> mine, std::span<T> all,
                  std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    static_assert(std::is_trivially_copyable_v<T>, "all_gather: the elements must be trivially copyable");
    all_gather_impl(std::as_bytes(mine), std::as_writable_bytes(all), sizeof(T),
                    "elements of " + std::to_string(sizeof(T)) + " bytes", timeout);
  }

  /// Reduces `in` element-wise across the ranks with the predefined MPI operation `op` and leaves
  /// each rank its slice of the result in `out` (`MPI_Ireduce_scatter`): the slices follow one
  /// another in rank order, each as long as its rank's `out` (ranks may differ), and together
  /// cover `in`, which has the same size on every rank. Elements as `all_reduce`.
  /// \throws xdev::error `errc::invalid_argument` on every rank when the sizes of `in` or the
  ///         operations differ, the slices do not add up to `in` (naming the ranks), or `in` has
  ///         more than 2147483647 elements; `errc::deadline_exceeded` / `errc::unavailable` as
  ///         `barrier`.
  template <class T>
  void reduce_scatter(std::span<const std::type_identity_t<T>> in, std::span<T> out, MPI_Op op,
                      std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    reduce_scatter_impl<T>(in, out, op, std::string(), timeout);
  }

  /// Aborts the whole job now (`MPI_Abort` with `status`), after printing `why` to stderr.
  [[noreturn]] void abort(int status, std::string_view why) const noexcept {
    detail::abort_job(status, std::string(why));
  }

  /// The live session, or nullptr (what the free functions use).
  [[nodiscard]] static Session* current() noexcept {
    std::lock_guard lock(detail::process_state().mutex);
    return static_cast<Session*>(detail::process_state().current);
  }

 private:
  friend Session init(const Options& options);
  using Clock = std::chrono::steady_clock;
  static constexpr int arrival_tag = 1;

  struct Op {
    std::uint64_t seq = 0;
    detail::Kind kind = detail::Kind::barrier;
    std::chrono::milliseconds timeout{0};
    Clock::time_point deadline;
  };

  explicit Session(const Options& options) : uncaught_at_start_(std::uncaught_exceptions()) {
    // The environment first: a malformed variable is reported before MPI starts.
    const EnvPlacement env = read_environment();
    auto& state = detail::process_state();
    {
      std::lock_guard lock(state.mutex);
      if (state.current != nullptr)
        throw error(errc::unavailable, "distributed::init: a session already exists (one per process)");
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (finalized != 0)
        throw error(errc::unavailable,
                    "distributed::init: MPI was finalized (by an earlier session); MPI cannot be initialised twice "
                    "in one process");
      int initialized = 0;
      MPI_Initialized(&initialized);
      int provided = 0;
      if (initialized == 0) {
        detail::mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
        state.xdev_initialized_mpi = true;
        if (options.tune_collectives) detail::select_open_mpi_iallreduce_algorithm();
        if (!state.terminate_installed) {
          state.previous_terminate = std::set_terminate(&detail::on_terminate);
          state.terminate_installed = true;
        }
      } else {
        detail::mpi_check(MPI_Query_thread(&provided), "MPI_Query_thread");
      }
      owns_mpi_ = state.xdev_initialized_mpi;
      if (provided < MPI_THREAD_MULTIPLE)
        throw error(
            errc::unavailable,
            "distributed::init: MPI provides thread support level " + std::to_string(provided) +
                ", below MPI_THREAD_MULTIPLE (" + std::to_string(MPI_THREAD_MULTIPLE) +
                "), which xdev needs (device runtimes call from their own threads); use an MPI built with "
                "thread support" +
                (initialized != 0 ? " and initialise it with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)" : ""));
    }
    int rank = 0;
    int size = 0;
    detail::mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    detail::mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
    placement_.rank = static_cast<std::uint32_t>(rank);
    placement_.world_size = static_cast<std::uint32_t>(size);
    arrived_.assign(placement_.world_size, 0);
    last_kind_.assign(placement_.world_size, -1);

    const auto timeout = options.timeout.value_or(default_timeout());
    const auto deadline = Clock::now() + timeout;
    {
      // Two communicators of xdev's own: one for the collectives, one for the arrival tokens.
      // Nobody can name the missing ranks yet: this wait reports the deadline alone.
      MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      detail::mpi_check(MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &reqs[0]), "MPI_Comm_idup");
      detail::mpi_check(MPI_Comm_idup(MPI_COMM_WORLD, &arrivals_, &reqs[1]), "MPI_Comm_idup");
      for (int spins = 0;; ++spins) {
        int done = 0;
        detail::mpi_check(MPI_Testall(2, reqs, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
        if (done != 0) break;
        if (Clock::now() > deadline)
          throw error(errc::deadline_exceeded, "distributed::init on rank " + std::to_string(rank) +
                                                   ": not every rank of " + std::to_string(size) +
                                                   " reached init within " + std::to_string(timeout.count()) + " ms");
        backoff(spins);
      }
      MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
      MPI_Comm_set_errhandler(arrivals_, MPI_ERRORS_RETURN);
    }

    std::lock_guard lock(mutex_);
    Op op = begin_locked(detail::Kind::init, timeout);
    // Every rank's host name and GROUP_RANK.
    std::vector<std::byte> mine(sizeof(std::int64_t));
    const std::int64_t group_rank = env.host_index ? std::int64_t{env.host_index->value} : -1;
    std::memcpy(mine.data(), &group_rank, sizeof group_rank);
    {
      char host[MPI_MAX_PROCESSOR_NAME];
      int length = 0;
      detail::mpi_check(MPI_Get_processor_name(host, &length), "MPI_Get_processor_name");
      const auto* b = reinterpret_cast<const std::byte*>(host);
      mine.insert(mine.end(), b, b + length);
    }
    auto all = allgather_locked(op, mine, "init");
    std::vector<PeerInfo> peers(all.size());
    for (std::size_t r = 0; r < all.size(); ++r) {
      std::int64_t g = -1;
      std::memcpy(&g, all[r].data(), sizeof g);
      if (g >= 0) peers[r].host_index = static_cast<std::uint32_t>(g);
      peers[r].host.assign(reinterpret_cast<const char*>(all[r].data()) + sizeof g, all[r].size() - sizeof g);
    }

    // Every rank checks its placement, then all agree: one rank's error fails init on every rank.
    std::string problem;
    try {
      placement_ = resolve_placement(env, static_cast<std::uint32_t>(rank), peers);
      if (options.configure_registry)
        Registry::global().configure_multiprocess(ProcessPlacement{.local_rank = placement_.local_rank,
                                                                   .local_world_size = placement_.local_world_size,
                                                                   .global_rank = placement_.rank,
                                                                   .global_world_size = placement_.world_size});
    } catch (const std::exception& ex) {
      problem = ex.what();
    }
    Op verdict = begin_locked(detail::Kind::init, timeout);
    auto problems = allgather_locked(verdict, std::as_bytes(std::span(problem.data(), problem.size())), "init");
    drain_locked();
    std::string text;
    for (std::size_t r = 0; r < problems.size(); ++r)
      if (!problems[r].empty())
        text += (text.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": ") +
                std::string(reinterpret_cast<const char*>(problems[r].data()), problems[r].size());
    if (!text.empty()) throw error(errc::invalid_argument, "distributed::init failed: " + text);

    std::lock_guard state_lock(state.mutex);
    if (state.current != nullptr) throw error(errc::unavailable, "distributed::init: a session already exists");
    state.current = this;
  }

  // Between two MPI_Test calls. MPI progresses a non-blocking collective inside MPI_Test, so a
  // long sleep here stretches every step of a large reduction: yield for the first ~10^4 polls
  // (milliseconds), then sleep briefly (a rank waiting long for a peer needs no core).
  static void backoff(int spins) {
    if (spins < 10000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(spins < 20000 ? 20 : 200));
  }

  // Opens call number seq_+1 and tells every other rank that this one arrived.
  Op begin_locked(detail::Kind kind, std::optional<std::chrono::milliseconds> timeout) {
    if (failed_)
      throw error(errc::unavailable, std::string("distributed::") + detail::name_of(static_cast<int>(kind)) +
                                         ": the session failed earlier (" + failure_ + "); the job cannot continue");
    const auto t = timeout.value_or(default_timeout());
    if (t.count() <= 0)
      throw error(errc::invalid_argument, std::string("distributed::") + detail::name_of(static_cast<int>(kind)) +
                                              ": the timeout must be > 0, got " + std::to_string(t.count()) + " ms");
    Op op{++seq_, kind, t, Clock::now() + t};
    for (std::uint32_t p = 0; p < placement_.world_size; ++p) {
      if (p == placement_.rank) continue;
      MPI_Request req = MPI_REQUEST_NULL;
      detail::mpi_check(MPI_Isend(&detail::kind_codes[static_cast<int>(kind)], 1, MPI_INT, static_cast<int>(p),
                                  arrival_tag, arrivals_, &req),
                        "MPI_Isend");
      // Never waited for: the buffer is static, and the receiver takes every token (drain_locked).
      MPI_Request_free(&req);
    }
    return op;
  }

  // Receives the arrival tokens that have come in.
  void drain_locked() {
    while (true) {
      int flag = 0;
      MPI_Status status;
      detail::mpi_check(MPI_Iprobe(MPI_ANY_SOURCE, arrival_tag, arrivals_, &flag, &status), "MPI_Iprobe");
      if (flag == 0) return;
      int kind = -1;
      detail::mpi_check(MPI_Recv(&kind, 1, MPI_INT, status.MPI_SOURCE, arrival_tag, arrivals_, MPI_STATUS_IGNORE),
                        "MPI_Recv");
      ++arrived_[static_cast<std::size_t>(status.MPI_SOURCE)];
      last_kind_[static_cast<std::size_t>(status.MPI_SOURCE)] = kind;
    }
  }

  // Polls `req` until it completes or the call's deadline passes.
  void wait_locked(const Op& op, MPI_Request& req, const char* phase) {
    for (int spins = 0;; ++spins) {
      int done = 0;
      detail::mpi_check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done != 0) return;
      if (Clock::now() > op.deadline) fail_locked(op, phase);
      backoff(spins);
    }
  }

  [[noreturn]] void fail_locked(const Op& op, const char* phase) {
    drain_locked();
    std::vector<std::uint32_t> missing;
    std::string elsewhere;
    for (std::uint32_t p = 0; p < placement_.world_size; ++p) {
      if (p == placement_.rank) continue;
      if (arrived_[p] < op.seq)
        missing.push_back(p);
      else if (arrived_[p] == op.seq && last_kind_[p] != static_cast<int>(op.kind))
        elsewhere += std::string(elsewhere.empty() ? "" : ", ") + "rank " + std::to_string(p) + " called " +
                     detail::name_of(last_kind_[p]);
    }
    std::string what = std::string("distributed::") + detail::name_of(static_cast<int>(op.kind)) + " (call #" +
                       std::to_string(op.seq) + ") on rank " + std::to_string(placement_.rank) + ": deadline of " +
                       std::to_string(op.timeout.count()) + " ms exceeded (" + phase + "): ";
    if (!missing.empty())
      what += (missing.size() == 1 ? "rank " : "ranks ") + detail::list_ranks(missing) + " of " +
              std::to_string(placement_.world_size) + (missing.size() == 1 ? " has" : " have") + " not arrived";
    else if (!elsewhere.empty())
      what += "every rank arrived, but not at the same call: " + elsewhere;
    else
      what += "every rank arrived, but the MPI operation did not complete";
    what += "; the session has failed: destroying it aborts the job";
    failed_ = true;
    failure_ = what;
    throw error(errc::deadline_exceeded, what);
  }

  // Every rank's `mine`, in rank order (MPI_Iallgather of the sizes, then MPI_Iallgatherv).
  std::vector<std::vector<std::byte>> allgather_locked(const Op& op, std::span<const std::byte> mine,
                                                       const std::string& what) {
    const std::size_t n = placement_.world_size;
    std::vector<std::uint64_t> sizes(n);
    const std::uint64_t my_size = mine.size();
    MPI_Request req = MPI_REQUEST_NULL;
    detail::mpi_check(MPI_Iallgather(&my_size, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, comm_, &req),
                      "MPI_Iallgather");
    wait_locked(op, req, "MPI_Iallgather of the sizes");
    std::uint64_t total = 0;
    for (auto s : sizes) total += s;
    // Too large a total is refused by allgatherv_locked before anything is sent.
    std::vector<std::byte> buffer(total <= static_cast<std::uint64_t>(INT_MAX) ? static_cast<std::size_t>(total) : 0);
    allgatherv_locked(op, mine, buffer, sizes, what + ": the payloads");
    std::vector<std::vector<std::byte>> out(n);
    for (std::size_t r = 0, at = 0; r < n; at += sizes[r], ++r)
      out[r].assign(buffer.begin() + static_cast<std::ptrdiff_t>(at),
                    buffer.begin() + static_cast<std::ptrdiff_t>(at + sizes[r]));
    return out;
  }

  // Every rank's `mine` (rank r's is `sizes[r]` bytes, every rank knowing every size) into `all`,
  // in rank order (MPI_Iallgatherv). \throws invalid_argument naming `what` when the sizes total
  // more than MPI's int counts reach.
  void allgatherv_locked(const Op& op, std::span<const std::byte> mine, std::span<std::byte> all,
                         const std::vector<std::uint64_t>& sizes, const std::string& what) {
    std::uint64_t total = 0;
    for (auto s : sizes) total += s;
    if (total > static_cast<std::uint64_t>(INT_MAX))
      throw error(errc::invalid_argument, "distributed::" + what + " total " + std::to_string(total) +
                                              " bytes; at most " + std::to_string(INT_MAX) + " are accepted");
    std::vector<int> counts(sizes.size());
    std::vector<int> displs(sizes.size());
    for (std::size_t r = 0, at = 0; r < sizes.size(); at += sizes[r], ++r) {
      counts[r] = static_cast<int>(sizes[r]);
      displs[r] = static_cast<int>(at);
    }
    std::byte dummy[1]{};  // a valid address for an empty side
    MPI_Request req = MPI_REQUEST_NULL;
    detail::mpi_check(
        MPI_Iallgatherv(mine.empty() ? dummy : mine.data(), static_cast<int>(mine.size()), MPI_BYTE,
                        all.empty() ? dummy : all.data(), counts.data(), displs.data(), MPI_BYTE, comm_, &req),
        "MPI_Iallgatherv");
    wait_locked(op, req, "MPI_Iallgatherv");
  }

  // What each rank passed to a collective: two counts and a description (sizes, shapes, op).
  struct CallHeader {
    std::uint64_t count[2];
    char description[112];
  };

  // Every rank's header, in rank order (MPI_Iallgather).
  std::vector<CallHeader> headers_locked(const Op& op, std::uint64_t a, std::uint64_t b,
                                         const std::string& description) {
    CallHeader mine{};
    mine.count[0] = a;
    mine.count[1] = b;
    std::strncpy(mine.description, description.c_str(), sizeof mine.description - 1);
    std::vector<CallHeader> all(placement_.world_size);
    MPI_Request req = MPI_REQUEST_NULL;
    detail::mpi_check(
        MPI_Iallgather(&mine, sizeof(CallHeader), MPI_BYTE, all.data(), sizeof(CallHeader), MPI_BYTE, comm_, &req),
        "MPI_Iallgather");
    wait_locked(op, req, "MPI_Iallgather of the sizes");
    return all;
  }

  // Throws invalid_argument (on every rank: they all see the same headers) naming the ranks whose
  // description, or first count when `same_count`, differs from rank 0's.
  static void check_headers(const char* name, const std::vector<CallHeader>& all, bool same_count, const char* unit) {
    auto text = [&](std::size_t r) {
      return std::string(all[r].description) +
             (same_count ? " (" + std::to_string(all[r].count[0]) + " " + unit + ")" : std::string());
    };
    std::string mismatch;
    for (std::size_t r = 1; r < all.size(); ++r)
      if ((same_count && all[r].count[0] != all[0].count[0]) ||
          std::strcmp(all[r].description, all[0].description) != 0)
        mismatch += "; rank " + std::to_string(r) + " has " + text(r);
    if (!mismatch.empty())
      throw error(errc::invalid_argument, std::string("distributed::") + name + ": rank 0 has " + text(0) + mismatch +
                                              " (every rank must pass the same)");
  }

  // Checks that every rank passed the same `description` and size to call `name`; throws
  // invalid_argument on every rank otherwise.
  void agree_locked(const Op& op, const char* name, std::size_t bytes, const std::string& description) {
    check_headers(name, headers_locked(op, bytes, 0, description), true, "bytes");
  }

  // `root`'s `data` to every rank (chunked below 2^31 bytes).
  void broadcast_locked(const Op& op, std::span<std::byte> data, int root) {
    MPI_Request req = MPI_REQUEST_NULL;
    constexpr std::size_t chunk = std::size_t{1} << 30;  // MPI counts are ints
    for (std::size_t at = 0; at < data.size(); at += chunk) {
      const auto count = static_cast<int>(std::min(chunk, data.size() - at));
      detail::mpi_check(MPI_Ibcast(data.data() + at, count, MPI_BYTE, root, comm_, &req), "MPI_Ibcast");
      wait_locked(op, req, "MPI_Ibcast");
    }
  }

  // The collectives' bodies; `description` (the same on every rank) says what the elements are,
  // so that a mismatch names it (<xdev/distributed/global_mesh.hpp> passes array shapes).
  friend struct detail::SessionAccess;

  void broadcast_impl(std::span<std::byte> data, std::uint32_t root, const std::string& description,
                      std::optional<std::chrono::milliseconds> timeout) {
    std::lock_guard lock(mutex_);
    Op op = begin_locked(detail::Kind::broadcast, timeout);
    check_headers("broadcast", headers_locked(op, data.size(), 0, description + " from rank " + std::to_string(root)),
                  true, "bytes");
    if (root >= placement_.world_size)
      throw error(errc::invalid_argument, "distributed::broadcast: root " + std::to_string(root) +
                                              " is not a rank of the job of " + std::to_string(placement_.world_size) +
                                              " processes");
    broadcast_locked(op, data, static_cast<int>(root));
    drain_locked();
  }

  void all_gather_impl(std::span<const std::byte> mine, std::span<std::byte> all, std::size_t element,
                       const std::string& description, std::optional<std::chrono::milliseconds> timeout) {
    constexpr const char* name = "all_gather";
    std::lock_guard lock(mutex_);
    Op op = begin_locked(detail::Kind::all_gather, timeout);
    const auto headers = headers_locked(op, mine.size() / element, all.size() / element, description);
    check_headers(name, headers, false, "elements");
    std::uint64_t total = 0;
    for (const auto& h : headers) total += h.count[0];
    std::string wrong;
    for (std::size_t r = 0; r < headers.size(); ++r)
      if (headers[r].count[1] != total)
        wrong += std::string(wrong.empty() ? "" : ", ") + "rank " + std::to_string(r) + "'s holds " +
                 std::to_string(headers[r].count[1]);
    if (!wrong.empty())
      throw error(errc::invalid_argument, std::string("distributed::") + name + ": the ranks contribute " +
                                              std::to_string(total) + " elements in all, but the output " + wrong +
                                              " (it must hold every rank's contribution)");
    std::vector<std::uint64_t> sizes(headers.size());
    for (std::size_t r = 0; r < headers.size(); ++r) sizes[r] = headers[r].count[0] * element;
    allgatherv_locked(op, mine, all, sizes, std::string(name) + ": the contributions");
    drain_locked();
  }

  template <class T>
  void reduce_scatter_impl(std::span<const T> in, std::span<T> out, MPI_Op mpi_op, const std::string& description,
                           std::optional<std::chrono::milliseconds> timeout) {
    constexpr const char* name = "reduce_scatter";
    const MPI_Datatype type = detail::mpi_datatype<T>();
    std::lock_guard lock(mutex_);
    Op op = begin_locked(detail::Kind::reduce_scatter, timeout);
    const auto headers = headers_locked(op, in.size(), out.size(),
                                        (description.empty() ? std::string() : description + ", ") + "elements of " +
                                            std::to_string(sizeof(T)) + " bytes, " + detail::mpi_op_name(mpi_op));
    check_headers(name, headers, true, "elements");
    std::uint64_t total = 0;
    for (const auto& h : headers) total += h.count[1];
    if (total != in.size()) {
      std::string slices;
      for (std::size_t r = 0; r < headers.size(); ++r) slices += (r ? ", " : "") + std::to_string(headers[r].count[1]);
      throw error(errc::invalid_argument, std::string("distributed::") + name + ": the ranks' outputs (" + slices +
                                              " elements, in rank order) add up to " + std::to_string(total) +
                                              ", but the input has " + std::to_string(in.size()) +
                                              " (they must cover it)");
    }
    if (total > static_cast<std::uint64_t>(INT_MAX))
      throw error(errc::invalid_argument, std::string("distributed::") + name + ": the input has " +
                                              std::to_string(total) + " elements; at most " + std::to_string(INT_MAX) +
                                              " are accepted");
    if (total > 0) {
      std::vector<int> counts(headers.size());
      for (std::size_t r = 0; r < headers.size(); ++r) counts[r] = static_cast<int>(headers[r].count[1]);
      T dummy[1]{};
      MPI_Request req = MPI_REQUEST_NULL;
      detail::mpi_check(
          MPI_Ireduce_scatter(in.data(), out.empty() ? dummy : out.data(), counts.data(), type, mpi_op, comm_, &req),
          "MPI_Ireduce_scatter");
      wait_locked(op, req, "MPI_Ireduce_scatter");
    }
    drain_locked();
  }

  // Rank 0's `data` to every rank, after checking that every rank has the same `description`
  // and size.
  void broadcast_master_locked(const Op& op, std::span<std::byte> data, const std::string& description) {
    agree_locked(op, "broadcast_master_param", data.size(), description);
    broadcast_locked(op, data, 0);
  }

  int uncaught_at_start_ = 0;
  // The collectives thread (`post`); joined first when the session ends.
  std::unique_ptr<SerialWorker> worker_ = std::make_unique<SerialWorker>();
  bool owns_mpi_ = false;
  Placement placement_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm arrivals_ = MPI_COMM_NULL;
  mutable std::mutex mutex_;
  std::uint64_t seq_ = 0;               // calls made (every rank makes the same calls)
  std::vector<std::uint64_t> arrived_;  // per peer: arrival tokens received
  std::vector<int> last_kind_;          // per peer: the kind of its last token
  bool failed_ = false;
  std::string failure_;
};

/// Starts the multi-process session: reads the launcher's variables (see
/// <xdev/distributed/environment.hpp>), initialises MPI with `MPI_THREAD_MULTIPLE` (unless the
/// program already did), installs a `std::terminate` handler that aborts the job, meets every
/// other rank (within `options.timeout`), cross-checks the variables against MPI, and configures
/// the plugin registry (`Registry::configure_multiprocess`) so that each local rank gets its
/// share of the local devices. Call it once, before any device is used.
///
/// A singleton run (`./app`, no launcher) is rank 0 of 1.
/// \throws xdev::error `errc::invalid_argument` for malformed or inconsistent variables (naming
///         them; on every rank when one rank's are inconsistent), `errc::unavailable` when MPI's
///         thread support is below `MPI_THREAD_MULTIPLE`, a session exists, MPI was finalized, or
///         a device was already used (the registry's clients exist), `errc::deadline_exceeded`
///         when not every rank reached init in time. MPI stays initialised after a failure.
inline Session init(const Options& options) {
  return Session(options);
}

namespace detail {
inline Session& current_or_throw(const char* what) {
  Session* s = Session::current();
  if (s == nullptr)
    throw error(errc::unavailable,
                std::string("distributed::") + what + ": no distributed session; call xdev::distributed::init() first");
  return *s;
}
}  // namespace detail

/// `Session::barrier` of the live session.
/// \throws xdev::error `errc::unavailable` when there is none, else as `Session::barrier`.
inline void barrier(std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
  detail::current_or_throw("barrier").barrier(timeout);
}

/// `Session::rendezvous` of the live session.
/// \throws xdev::error `errc::unavailable` when there is none, else as `Session::rendezvous`.
inline std::vector<std::vector<std::byte>> rendezvous(std::string_view tag, std::span<const std::byte> payload = {},
                                                      std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
  return detail::current_or_throw("rendezvous").rendezvous(tag, payload, timeout);
}

/// `Session::broadcast_master_param` of the live session, for a span or an array.
/// \throws xdev::error `errc::unavailable` when there is none, else as the member.
template <class T>
void broadcast_master_param(std::span<T> data, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
  detail::current_or_throw("broadcast_master_param").broadcast_master_param(data, timeout);
}
template <class T, class B>
void broadcast_master_param(Array<T, B>& a, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
  detail::current_or_throw("broadcast_master_param").broadcast_master_param(a, timeout);
}

/// `Session::all_reduce` of the live session: `data` reduced with `op` across the ranks, in place.
/// \throws xdev::error `errc::unavailable` when there is none, else as the member.
template <class T>
void all_reduce(std::span<T> data, MPI_Op op, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
  detail::current_or_throw("all_reduce").all_reduce(data, op, timeout);
}

}  // namespace xdev::distributed
