/// \file
/// Multi-process runs over MPI: `xdev::distributed::init()` and the process-level collectives
/// `barrier`, `rendezvous`, `broadcast_master_param` and `all_reduce` (of host memory; device arrays
/// across processes: <xdev/distributed/global_mesh.hpp>). The only xdev header that includes
/// <mpi.h> (with its detail/ headers): link `xdev::mpi` (`find_package(xdev CONFIG REQUIRED COMPONENTS mpi)`). See
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
#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/core/trace.hpp>
#include <xdev/distributed/detail/collective_queue.hpp>
#include <xdev/distributed/detail/deadline_engine.hpp>
#include <xdev/distributed/detail/mpi_types.hpp>
#include <xdev/distributed/detail/process.hpp>
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
    collectives_->close();  // the asynchronous collectives already started run to their end first
    {
      std::lock_guard lock(detail::process_state().mutex);
      detail::process_state().current = nullptr;
    }
    if (std::uncaught_exceptions() > uncaught_at_start_)
      detail::abort_job(exception_abort_status, "the distributed session was destroyed by an exception");
    {
      auto lock = engine_.lock();
      if (engine_.failed_locked())
        detail::abort_job(deadline_abort_status, "the distributed session failed: " + engine_.failure_locked());
      try {
        engine_.end_locked(default_timeout());
      } catch (const std::exception& ex) {
        detail::abort_job(deadline_abort_status, std::string("ending the distributed session: ") + ex.what());
      }
    }
    engine_.close();
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
  [[nodiscard]] MPI_Comm communicator() const noexcept { return engine_.communicator(); }

  /// Runs `job` on the session's collectives thread, after the jobs posted before it: what the
  /// asynchronous collectives (`distributed::all_reduce` of device arrays) run on, one at a time
  /// and in the order they were started — the order every rank must start them in. Thread-safe.
  /// A thread that waits for a collective posted later may run `job` instead (see
  /// `post_awaited`), still one job at a time and in order: a job must not rely on which thread
  /// runs it.
  void post(HostTask job) { collectives_->post(std::move(job)); }
  /// `post` for a collective whose future a thread is about to wait for: for 20 us the job is
  /// left to that thread, which runs it when it waits through the returned helper (see
  /// `use_future`), without a hand-off to the collectives thread and back. What xdev's
  /// asynchronous collectives with a future use; the order of jobs is the same as `post`'s. If
  /// nobody waits by then, the collectives thread starts the job within `start_within` after
  /// that (at most 4 ms, the longest it dozes while waiters run every job).
  [[nodiscard]] xdev::detail::wait_helper post_awaited(
      HostTask job, std::chrono::microseconds start_within = std::chrono::microseconds::max()) {
    return collectives_->post_awaited(std::move(job), start_within);
  }
  /// A collective missed its deadline: the job cannot go on, destroying the session aborts it.
  [[nodiscard]] bool failed() const { return engine_.failed(); }

  /// Waits until every rank has called `barrier`.
  /// \throws xdev::error `errc::deadline_exceeded` naming the ranks that had not arrived when
  ///         `timeout` (unset: `default_timeout()`) passed; `errc::unavailable` when the session
  ///         failed earlier.
  void barrier(std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    auto lock = engine_.lock();
    Op op = engine_.begin_locked(detail::Kind::barrier, timeout);
    MPI_Request req = MPI_REQUEST_NULL;
    detail::mpi_check(MPI_Ibarrier(engine_.communicator(), &req), "MPI_Ibarrier");
    engine_.wait_locked(op, req, "MPI_Ibarrier");
    engine_.drain_locked();
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
    auto lock = engine_.lock();
    Op op = engine_.begin_locked(detail::Kind::rendezvous, timeout);
    std::vector<std::byte> mine(sizeof(std::uint64_t) + tag.size() + payload.size());
    const std::uint64_t tag_size = tag.size();
    std::memcpy(mine.data(), &tag_size, sizeof tag_size);
    if (!tag.empty()) std::memcpy(mine.data() + sizeof tag_size, tag.data(), tag.size());
    if (!payload.empty()) std::memcpy(mine.data() + sizeof tag_size + tag.size(), payload.data(), payload.size());
    auto all = engine_.allgather_locked(op, mine, "rendezvous(\"" + std::string(tag) + "\")");
    engine_.drain_locked();

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
    auto lock = engine_.lock();
    Op op = engine_.begin_locked(detail::Kind::broadcast_master_param, timeout);
    engine_.broadcast_master_locked(
        op, std::as_writable_bytes(data),
        std::to_string(data.size()) + " elements of " + std::to_string(sizeof(T)) + " bytes");
    engine_.drain_locked();
  }

  /// Overwrites array `a` (an `AnyArray<T>` or an `Array<T, B>`) on every rank with rank 0's,
  /// staged through host memory: rank 0 copies it to the host, MPI broadcasts the bytes, the
  /// other ranks copy them to their device (each waits for its copy). Every rank's array must have
  /// the same shape.
  /// \throws as the span overload (a shape mismatch names the shapes), and the device's errors.
  template <class T, class B>
  void broadcast_master_param(Array<T, B>& a, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    static_assert(std::is_trivially_copyable_v<T>, "broadcast_master_param: the elements must be trivially copyable");
    auto lock = engine_.lock();
    Op op = engine_.begin_locked(detail::Kind::broadcast_master_param, timeout);
    std::unique_ptr<T[]> staging(new T[a.size()]);
    std::span<T> host(staging.get(), a.size());
    if (placement_.rank == 0) a.device().copy_to_host(a.buffer(), host).get();
    engine_.broadcast_master_locked(
        op, std::as_writable_bytes(host),
        "an array of shape " + to_string(a.shape()) + " (" + std::to_string(sizeof(T)) + "-byte elements)");
    engine_.drain_locked();
    if (placement_.rank != 0) a.device().copy_to_device(std::span<const T>(host), a.buffer()).get();
  }

  /// Reduces `data` element-wise across the ranks with the predefined MPI operation `op`
  /// (`MPI_SUM`, `MPI_MIN`, `MPI_MAX`, ...), in place: every rank ends with the result
  /// (once every rank arrived and agreed within the deadline: `MPI_Allreduce` up to 256 KiB,
  /// above it `MPI_Iallreduce` polled to the deadline). Elements: float, double, or 32- or 64-bit
  /// integers.
  /// Every rank must pass the same number of elements and the same `op`. The host-memory building
  /// block of the device-array reduction over a `GlobalMesh` (<xdev/distributed/global_mesh.hpp>).
  /// \throws xdev::error `errc::invalid_argument` on every rank when the sizes or operations differ
  ///         (naming the ranks); `errc::deadline_exceeded` / `errc::unavailable` as `barrier`.
  template <class T>
  void all_reduce(std::span<T> data, MPI_Op op, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    engine_.all_reduce(data, op, data.size_bytes(),
                       std::to_string(data.size()) + " elements of " + std::to_string(sizeof(T)) + " bytes, " +
                           detail::mpi_op_name(op),
                       timeout);
  }

  /// Reduces `data` element-wise across the ranks with the predefined MPI operation `op` into rank
  /// `root`'s `data` (`MPI_Ireduce`, polled to the deadline); the other ranks' `data` is left as
  /// it was. Every rank must pass the same number of elements, `op` and `root`. Elements as
  /// `all_reduce`.
  /// \throws xdev::error `errc::invalid_argument` on every rank when the sizes, operations or roots
  ///         differ (naming the ranks) or `root` is not a rank of the job; `errc::deadline_exceeded`
  ///         / `errc::unavailable` as `barrier`.
  template <class T>
  void reduce(std::span<T> data, MPI_Op op, std::uint32_t root,
              std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    const MPI_Datatype type = detail::mpi_datatype<T>();
    auto lock = engine_.lock();
    Op call = engine_.begin_locked(detail::Kind::reduce, timeout);
    engine_.agree_locked(call, "reduce", data.size_bytes(),
                         std::to_string(data.size()) + " elements of " + std::to_string(sizeof(T)) + " bytes, " +
                             detail::mpi_op_name(op) + ", to rank " + std::to_string(root));
    if (root >= world_size())
      throw error(errc::invalid_argument, "distributed::reduce: root " + std::to_string(root) +
                                              " is not a rank of the job of " + std::to_string(world_size()) +
                                              " processes");
    const bool here = root == rank();
    constexpr std::size_t chunk = (std::size_t{1} << 30) / sizeof(T);  // MPI counts are ints
    for (std::size_t at = 0; at < data.size(); at += chunk) {
      const auto count = static_cast<int>(std::min(chunk, data.size() - at));
      MPI_Request req = MPI_REQUEST_NULL;
      detail::mpi_check(MPI_Ireduce(here ? MPI_IN_PLACE : data.data() + at, here ? data.data() + at : nullptr, count,
                                    type, op, static_cast<int>(root), engine_.communicator(), &req),
                        "MPI_Ireduce");
      engine_.wait_locked(call, req, "MPI_Ireduce");
    }
    engine_.drain_locked();
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
    engine_.broadcast(std::as_writable_bytes(data), root,
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
    engine_.all_gather(std::as_bytes(mine), std::as_writable_bytes(all), sizeof(T),
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
    engine_.reduce_scatter<T>(in, out, op, std::string(), timeout);
  }

  /// Aborts the whole job now (`MPI_Abort` with `status`), after printing `why` to stderr.
  [[noreturn]] void abort(int status, std::string_view why) const noexcept {
    detail::abort_job(status, std::string(why));
  }

  /// The request and deadline engine this session's collectives run on: what the collectives over
  /// a `GlobalMesh` (<xdev/distributed/global_mesh.hpp>) use. An implementation detail.
  [[nodiscard]] detail::DeadlineEngine& engine() noexcept { return engine_; }

  /// The live session, or nullptr (what the free functions use).
  [[nodiscard]] static Session* current() noexcept {
    std::lock_guard lock(detail::process_state().mutex);
    return static_cast<Session*>(detail::process_state().current);
  }

 private:
  friend Session init(const Options& options);
  using Clock = std::chrono::steady_clock;
  using Op = detail::DeadlineEngine::Op;

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
    const auto timeout = options.timeout.value_or(default_timeout());
    // Two communicators of xdev's own: one for the collectives, one for the arrival tokens and
    // the headers of the calls' terms.
    engine_.open(placement_.rank, placement_.world_size, timeout);

    auto lock = engine_.lock();
    Op op = engine_.begin_locked(detail::Kind::init, timeout);
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
    auto all = engine_.allgather_locked(op, mine, "init");
    const auto met = Clock::now();  // every rank has arrived: where a trace aligns the ranks' clocks
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
    const unsigned hardware_threads = std::thread::hardware_concurrency();  // 0: unknown
    engine_.set_oversubscribed(hardware_threads != 0 && placement_.local_world_size > hardware_threads);
    Op verdict = engine_.begin_locked(detail::Kind::init, timeout);
    auto problems = engine_.allgather_locked(verdict, std::as_bytes(std::span(problem.data(), problem.size())), "init");
    engine_.drain_locked();
    std::string text;
    for (std::size_t r = 0; r < problems.size(); ++r)
      if (!problems[r].empty())
        text += (text.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": ") +
                std::string(reinterpret_cast<const char*>(problems[r].data()), problems[r].size());
    if (!text.empty()) throw error(errc::invalid_argument, "distributed::init failed: " + text);
    if (placement_.world_size > 1) {
      try {
        trace::detail::join_job(placement_.rank, placement_.world_size, met);
      } catch (const std::exception& ex) {  // this rank records no trace; the job goes on (see log)
        log::write(log::Level::error, "distributed", std::string("rank ") + std::to_string(rank) + ": " + ex.what());
      }
    }

    std::lock_guard state_lock(state.mutex);
    if (state.current != nullptr) throw error(errc::unavailable, "distributed::init: a session already exists");
    state.current = this;
  }

  int uncaught_at_start_ = 0;
  // The collectives thread (`post`); joined first when the session ends. It looks for the next
  // collective for 100 us before it sleeps: a program's collectives come one right after another,
  // and a sleep and wake-up per collective cost more than the collective at 64 KiB. With 4 ranks
  // on 2 cores, 64 KiB all_reduce went from 2.64x raw MPI_Allreduce's time to 1.45x (median).
  //
  // A collective whose future is awaited is left to the waiting thread for 20 us first (see
  // `post_awaited`): 64 KiB between 2 processes went from 1.92-2.22x raw MPI_Allreduce's time to
  // 1.48-1.61x, with 4 processes on 2 cores from 1.52-1.93x to 1.36-1.58x; 1 MiB between 2
  // processes from 1.13-1.15x to 1.05-1.06x (alternating runs).
  std::shared_ptr<detail::CollectiveQueue> collectives_ =
      std::make_shared<detail::CollectiveQueue>(std::chrono::microseconds(100), std::chrono::microseconds(20));
  bool owns_mpi_ = false;
  Placement placement_;
  detail::DeadlineEngine engine_;
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
