/// \file
/// The request and deadline engine under every distributed collective: xdev's own communicators,
/// the arrival tokens and headers that tell which rank never entered a call (counted by
/// `Arrivals`, <xdev/distributed/detail/arrivals.hpp>), non-blocking MPI requests polled
/// to a deadline, the cross-rank check that every rank passed the same arguments, and the bodies
/// of the host-memory collectives. `Session` (<xdev/distributed/mpi.hpp>) owns one; the collectives
/// over a `GlobalMesh` use it through `Session::engine()`. Not part of the public API.
#pragma once

#include <xdev/core/error.hpp>
#include <xdev/distributed/detail/arrivals.hpp>
#include <xdev/distributed/detail/mpi_types.hpp>
#include <xdev/distributed/detail/poller.hpp>
#include <xdev/distributed/detail/process.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace xdev::distributed::detail {

/// The engine. Every collective is one *call*: `begin_locked` numbers it and sends this rank's
/// arrival token to every peer (or, for a call whose terms are checked first, `headers_locked`
/// sends the header of its terms, which stands for the token); its MPI requests are polled by
/// `wait_locked` until they complete or the call's deadline passes (then `fail_locked` names the
/// missing ranks, and the engine is failed for good). The `*_locked` members need `lock()` held;
/// the others take it themselves.
class DeadlineEngine {
 public:
  using Clock = std::chrono::steady_clock;

  /// One call in flight: its number, kind, timeout and deadline.
  struct Op {
    std::uint64_t seq = 0;
    Kind kind = Kind::barrier;
    std::chrono::milliseconds timeout{0};
    Clock::time_point deadline;
  };

  DeadlineEngine() = default;
  DeadlineEngine(const DeadlineEngine&) = delete;
  DeadlineEngine& operator=(const DeadlineEngine&) = delete;
  ~DeadlineEngine() { close(); }

  /// Duplicates `MPI_COMM_WORLD` twice (the collectives' communicator and the arrival tokens'),
  /// waiting for every rank until `deadline`. Call once, after MPI is initialised.
  /// \throws xdev::error `errc::deadline_exceeded` when not every rank arrived in `timeout`.
  void open(std::uint32_t rank, std::uint32_t world_size, std::chrono::milliseconds timeout) {
    rank_ = rank;
    world_size_ = world_size;
    arrivals_of_.reset(world_size);
    const auto deadline = Clock::now() + timeout;
    // Nobody can name the missing ranks yet: this wait reports the deadline alone.
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    mpi_check(MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &reqs[0]), "MPI_Comm_idup");
    mpi_check(MPI_Comm_idup(MPI_COMM_WORLD, &arrivals_, &reqs[1]), "MPI_Comm_idup");
    for (Poller poller(oversubscribed_);;) {
      int done = 0;
      mpi_check(MPI_Testall(2, reqs, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
      if (done != 0) break;
      const auto now = Clock::now();
      if (now > deadline)
        throw error(errc::deadline_exceeded, "distributed::init on rank " + std::to_string(rank) +
                                                 ": not every rank of " + std::to_string(world_size) +
                                                 " reached init within " + std::to_string(timeout.count()) + " ms");
      poller.pause(now);
    }
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(arrivals_, MPI_ERRORS_RETURN);
  }

  /// Waits (within `timeout`) for every rank to end its session too and takes every arrival
  /// token still in flight, so that no message is left unmatched at `MPI_Finalize`.
  /// \throws xdev::error as `wait_locked`, or `errc::deadline_exceeded` when tokens stay missing.
  void end_locked(std::chrono::milliseconds timeout) {
    Op op = begin_locked(Kind::finalize, timeout);
    MPI_Request req = MPI_REQUEST_NULL;
    mpi_check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
    wait_locked(op, req, "waiting for every rank to end its session");
    // Every peer entered the final barrier, so each one's arrival tokens are all sent.
    while (true) {
      drain_locked();
      bool all = true;
      for (std::uint32_t p = 0; p < world_size_; ++p)
        if (p != rank_ && arrivals_of_.count(p) < seq_) all = false;
      if (all) break;
      if (Clock::now() > op.deadline)
        throw error(errc::deadline_exceeded, "arrival tokens missing at the end of the session");
      std::this_thread::yield();
    }
  }

  /// Frees the communicators (idempotent; MPI must still be initialised).
  void close() noexcept {
    if (arrivals_ != MPI_COMM_NULL) MPI_Comm_free(&arrivals_);
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  /// The collectives' communicator (xdev's own duplicate of `MPI_COMM_WORLD`).
  [[nodiscard]] MPI_Comm communicator() const noexcept { return comm_; }
  /// Serializes the calls: every `*_locked` member needs it held.
  [[nodiscard]] std::unique_lock<std::mutex> lock() const { return std::unique_lock(mutex_); }
  /// A call missed its deadline: the job cannot go on.
  [[nodiscard]] bool failed() const {
    std::lock_guard lock(mutex_);
    return failed_;
  }
  /// Why it failed ("" when it did not); with `lock()` held.
  [[nodiscard]] const std::string& failure_locked() const noexcept { return failure_; }
  [[nodiscard]] bool failed_locked() const noexcept { return failed_; }

  /// Overwrites `data` on every rank with rank `root`'s (`MPI_Ibcast`), after checking that every
  /// rank passed the same size, `description` and root.
  void broadcast(std::span<std::byte> data, std::uint32_t root, const std::string& description,
                 std::optional<std::chrono::milliseconds> timeout) {
    std::lock_guard lock(mutex_);
    Op op = begin_locked(Kind::broadcast, timeout);
    check_headers("broadcast", headers_locked(op, data.size(), 0, description + " from rank " + std::to_string(root)),
                  true, "bytes");
    if (root >= world_size_)
      throw error(errc::invalid_argument, "distributed::broadcast: root " + std::to_string(root) +
                                              " is not a rank of the job of " + std::to_string(world_size_) +
                                              " processes");
    broadcast_locked(op, data, static_cast<int>(root));
    drain_locked();
  }

  // Every rank's `mine` (`element`-byte elements; ranks may contribute different numbers), in rank
  // order into `all`, which must hold their total on every rank; `description` names the elements.
  void all_gather(std::span<const std::byte> mine, std::span<std::byte> all, std::size_t element,
                  const std::string& description, std::optional<std::chrono::milliseconds> timeout) {
    constexpr const char* name = "all_gather";
    std::lock_guard lock(mutex_);
    Op op = begin_locked(Kind::all_gather, timeout);
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

  /// One point-to-point message of `exchange`: `bytes` to or from rank `peer`, tagged `tag`.
  struct Message {
    std::uint32_t peer = 0;
    int tag = 0;
    std::span<std::byte> bytes;
  };

  /// Posts every receive and send at once (`MPI_Irecv` / `MPI_Isend`, chunked below 2^31 bytes)
  /// and polls them to the deadline, after checking that every rank passed the same `bytes` and
  /// `description` to call `kind`. A rank with nothing to send or receive still takes part.
  void exchange(Kind kind, std::size_t bytes, const std::string& description, std::span<const Message> sends,
                std::span<const Message> recvs, std::optional<std::chrono::milliseconds> timeout) {
    std::lock_guard lock(mutex_);
    Op op = begin_locked(kind, timeout);
    agree_locked(op, name_of(static_cast<int>(kind)), bytes, description);
    constexpr std::size_t chunk = std::size_t{1} << 30;  // MPI counts are ints
    std::vector<MPI_Request> requests;
    for (const bool send : {false, true})
      for (const Message& m : send ? sends : recvs)
        for (std::size_t at = 0; at < m.bytes.size(); at += chunk) {
          const auto count = static_cast<int>(std::min(chunk, m.bytes.size() - at));
          MPI_Request req = MPI_REQUEST_NULL;
          if (send)
            mpi_check(MPI_Isend(m.bytes.data() + at, count, MPI_BYTE, static_cast<int>(m.peer), m.tag, comm_, &req),
                      "MPI_Isend");
          else
            mpi_check(MPI_Irecv(m.bytes.data() + at, count, MPI_BYTE, static_cast<int>(m.peer), m.tag, comm_, &req),
                      "MPI_Irecv");
          requests.push_back(req);
        }
    for (auto& req : requests) wait_locked(op, req, "MPI_Isend / MPI_Irecv");
    drain_locked();
  }

  /// Reduces `data` in place with `mpi_op` (`MPI_Allreduce` or `MPI_Iallreduce`, see below;
  /// chunked below 2^31 bytes) over `over`: the collectives' communicator when unset; a
  /// sub-communicator of it; or `MPI_COMM_NULL`, for a rank whose part of the collective needs no
  /// other process (the call is still counted and agreed, as every rank makes it). Every rank
  /// must pass the same `bytes` and `description` (checked first).
  ///
  /// The deadline covers the arrival and that check, which are polled. A short reduction (at
  /// most `blocking_all_reduce_bytes` on this rank) is then the blocking `MPI_Allreduce`: once
  /// the check completed here, every rank of the collectives' communicator has entered this call
  /// with the same terms (the check completes only once every peer's header has come, and every
  /// rank sees the same headers, so all go on or all throw), so no participant can be missing, and
  /// MPI's blocking algorithms answer sooner (Open MPI's tuned component against libnbc's
  /// schedules polled with `MPI_Test`: 64 KiB over 2 processes 1.25–1.30x a bare
  /// `MPI_Allreduce` instead of 1.33–1.41x, bench_distributed). A longer one stays
  /// `MPI_Iallreduce` polled to the deadline: MPI's blocking wait spins on the rank's core, which
  /// the rank's other threads need meanwhile (with two devices per process, the local reduce of
  /// the next piece of a pipelined 16 MiB all_reduce: 2.30–2.63x `MPI_Allreduce` blocking
  /// against 2.17–2.25x polled), and it gained nothing from 1 MiB up. Every rank of `comm` passes
  /// the same size, so all make the same choice (MPI never matches a blocking collective with a
  /// non-blocking one).
  template <class T>
  void all_reduce(std::span<T> data, MPI_Op mpi_op, std::size_t bytes, const std::string& description,
                  std::optional<std::chrono::milliseconds> timeout, std::optional<MPI_Comm> over = std::nullopt) {
    const MPI_Datatype type = mpi_datatype<T>();
    const MPI_Comm comm = over.value_or(comm_);
    const bool blocking = data.size_bytes() <= blocking_all_reduce_bytes;
    std::lock_guard lock(mutex_);
    Op call = begin_locked(Kind::all_reduce, timeout);
    agree_locked(call, "all_reduce", bytes, description);
    constexpr std::size_t chunk = (std::size_t{1} << 30) / sizeof(T);  // MPI counts are ints
    for (std::size_t at = 0; comm != MPI_COMM_NULL && at < data.size(); at += chunk) {
      const auto count = static_cast<int>(std::min(chunk, data.size() - at));
      if (blocking) {
        mpi_check(MPI_Allreduce(MPI_IN_PLACE, data.data() + at, count, type, mpi_op, comm), "MPI_Allreduce");
      } else {
        MPI_Request req = MPI_REQUEST_NULL;
        mpi_check(MPI_Iallreduce(MPI_IN_PLACE, data.data() + at, count, type, mpi_op, comm, &req), "MPI_Iallreduce");
        wait_locked(call, req, "MPI_Iallreduce");
      }
    }
    drain_locked();
  }

  /// Every rank of `over` (a sub-communicator of the collectives' one) contributes `mine`; each
  /// receives all of them in `all`, in the sub-communicator's rank order, `sizes[i]` bytes from its
  /// rank i (`MPI_Iallgatherv`). `MPI_COMM_NULL`: this rank's part needs no other process (the call
  /// is still counted and agreed, as every rank makes it). Every rank must pass the same `bytes`
  /// and `description` (checked first).
  void all_gather_over(std::span<const std::byte> mine, std::span<std::byte> all,
                       const std::vector<std::uint64_t>& sizes, std::size_t bytes, const std::string& description,
                       std::optional<std::chrono::milliseconds> timeout, MPI_Comm over) {
    std::lock_guard lock(mutex_);
    Op call = begin_locked(Kind::all_gather, timeout);
    agree_locked(call, "all_gather", bytes, description);
    if (over != MPI_COMM_NULL) allgatherv_locked(call, mine, all, sizes, "all_gather: the contributions", over);
    drain_locked();
  }

  /// A communicator of the ranks that pass the same `color` (`MPI_UNDEFINED`: this rank takes
  /// no part), ordered by rank: every rank must call it, the same number of times. Blocking (MPI
  /// has no non-blocking split): call it only right after a call that every rank completed. It
  /// splits the arrival tokens' communicator, on which no collective runs, without the engine's
  /// lock: so it neither waits for nor mixes with an asynchronous collective that the
  /// collectives thread runs meanwhile on the collectives' communicator.
  MPI_Comm split(int color) const {
    MPI_Comm out = MPI_COMM_NULL;
    mpi_check(MPI_Comm_split(arrivals_, color, static_cast<int>(rank_), &out), "MPI_Comm_split");
    if (out != MPI_COMM_NULL) MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN);
    return out;
  }

  template <class T>
  void reduce_scatter(std::span<const T> in, std::span<T> out, MPI_Op mpi_op, const std::string& description,
                      std::optional<std::chrono::milliseconds> timeout) {
    constexpr const char* name = "reduce_scatter";
    const MPI_Datatype type = mpi_datatype<T>();
    std::lock_guard lock(mutex_);
    Op op = begin_locked(Kind::reduce_scatter, timeout);
    const auto headers = headers_locked(op, in.size(), out.size(),
                                        (description.empty() ? std::string() : description + ", ") + "elements of " +
                                            std::to_string(sizeof(T)) + " bytes, " + mpi_op_name(mpi_op));
    check_headers(name, headers, true, "elements");
    std::uint64_t total = 0;
    for (const auto& h : headers) total += h.count[1];
    if (total != in.size()) {
      std::string slices;
      for (std::size_t r = 0; r < headers.size(); ++r) {
        if (r != 0) slices += ", ";
        slices += std::to_string(headers[r].count[1]);
      }
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
      mpi_check(
          MPI_Ireduce_scatter(in.data(), out.empty() ? dummy : out.data(), counts.data(), type, mpi_op, comm_, &req),
          "MPI_Ireduce_scatter");
      wait_locked(op, req, "MPI_Ireduce_scatter");
    }
    drain_locked();
  }

  /// Rank 0's `data` to every rank, after checking that every rank has the same `description` and size.
  void broadcast_master_locked(const Op& op, std::span<std::byte> data, const std::string& description) {
    agree_locked(op, "broadcast_master_param", data.size(), description);
    broadcast_locked(op, data, 0);
  }

  // ---- the steps of a call, with lock() held ----

  // Opens call number seq_+1 and tells every other rank that this one arrived: with an arrival
  // token, or, for a call `announced_by_header`, with the header `headers_locked` sends next (the
  // caller's first step: a call of such a kind must exchange headers before anything else).
  Op begin_locked(Kind kind, std::optional<std::chrono::milliseconds> timeout) {
    if (failed_)
      throw error(errc::unavailable, std::string("distributed::") + name_of(static_cast<int>(kind)) +
                                         ": the session failed earlier (" + failure_ + "); the job cannot continue");
    const auto t = timeout.value_or(default_timeout());
    if (t.count() <= 0)
      throw error(errc::invalid_argument, std::string("distributed::") + name_of(static_cast<int>(kind)) +
                                              ": the timeout must be > 0, got " + std::to_string(t.count()) + " ms");
    Op op{++seq_, kind, t, Clock::now() + t};
    for (std::uint32_t p = 0; !announced_by_header(static_cast<int>(kind)) && p < world_size_; ++p) {
      if (p == rank_) continue;
      MPI_Request req = MPI_REQUEST_NULL;
      mpi_check(
          MPI_Isend(&kind_codes[static_cast<int>(kind)], 1, MPI_INT, static_cast<int>(p), arrival_tag, arrivals_, &req),
          "MPI_Isend");
      // Never waited for: the buffer is static, and the receiver takes every token (drain_locked).
      MPI_Request_free(&req);
    }
    return op;
  }

  // On a failure only: the headers that came in without a receive of this rank's (a peer in
  // another call, which announces itself by its header). Taking them out of order is harmless then:
  // the session is failed, so no later call would receive them.
  void drain_headers_locked() {
    drain_tag_locked<CallHeader>(header_tag, MPI_BYTE, sizeof(CallHeader),
                                 [&](std::uint32_t from, const CallHeader& h) { arrivals_of_.header(from, h); });
  }

  // Receives the arrival tokens that have come in.
  void drain_locked() {
    drain_tag_locked<int>(arrival_tag, MPI_INT, 1,
                          [&](std::uint32_t from, int kind) { arrivals_of_.token(from, kind); });
  }

  // Receives every message on `tag` that has come in, each one `M` sent as `count` of `type`, and
  // hands it to `take` with its sender's rank.
  template <class M, class Take>
  void drain_tag_locked(int tag, MPI_Datatype type, int count, Take take) {
    while (true) {
      int flag = 0;
      MPI_Status status;
      mpi_check(MPI_Iprobe(MPI_ANY_SOURCE, tag, arrivals_, &flag, &status), "MPI_Iprobe");
      if (flag == 0) return;
      M message{};
      mpi_check(MPI_Recv(&message, count, type, status.MPI_SOURCE, tag, arrivals_, MPI_STATUS_IGNORE), "MPI_Recv");
      take(static_cast<std::uint32_t>(status.MPI_SOURCE), message);
    }
  }

  // Polls `req` until it completes or the call's deadline passes.
  void wait_locked(const Op& op, MPI_Request& req, const char* phase) { wait_locked(op, std::span(&req, 1), phase); }
  // Polls `reqs` until every one completes or the call's deadline passes.
  void wait_locked(const Op& op, std::span<MPI_Request> reqs, const char* phase) {
    if (!poll_locked(op, reqs)) fail_locked(op, phase);
  }
  // Polls `reqs` until every one completes (true) or the call's deadline passes (false).
  bool poll_locked(const Op& op, std::span<MPI_Request> reqs) {
    for (Poller poller(oversubscribed_);;) {
      int done = 0;
      mpi_check(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
      if (done != 0) return true;
      const auto now = Clock::now();
      if (now > op.deadline) return false;
      poller.pause(now);
    }
  }

  [[noreturn]] void fail_locked(const Op& op, const char* phase) {
    drain_locked();
    drain_headers_locked();
    std::string what = std::string("distributed::") + name_of(static_cast<int>(op.kind)) + " (call #" +
                       std::to_string(op.seq) + ") on rank " + std::to_string(rank_) + ": deadline of " +
                       std::to_string(op.timeout.count()) + " ms exceeded (" + phase +
                       "): " + arrivals_of_.verdict(rank_, op.seq, static_cast<int>(op.kind)) +
                       "; the session has failed: destroying it aborts the job";
    failed_ = true;
    failure_ = what;
    throw error(errc::deadline_exceeded, what);
  }

  // Every rank's `mine`, in rank order (MPI_Iallgather of the sizes, then MPI_Iallgatherv).
  std::vector<std::vector<std::byte>> allgather_locked(const Op& op, std::span<const std::byte> mine,
                                                       const std::string& what) {
    const std::size_t n = world_size_;
    std::vector<std::uint64_t> sizes(n);
    const std::uint64_t my_size = mine.size();
    MPI_Request req = MPI_REQUEST_NULL;
    mpi_check(MPI_Iallgather(&my_size, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, comm_, &req), "MPI_Iallgather");
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
                         const std::vector<std::uint64_t>& sizes, const std::string& what,
                         MPI_Comm over = MPI_COMM_NULL) {
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
    mpi_check(MPI_Iallgatherv(mine.empty() ? dummy : mine.data(), static_cast<int>(mine.size()), MPI_BYTE,
                              all.empty() ? dummy : all.data(), counts.data(), displs.data(), MPI_BYTE,
                              over == MPI_COMM_NULL ? comm_ : over, &req),
              "MPI_Iallgatherv");
    wait_locked(op, req, "MPI_Iallgatherv");
  }

  // Every rank's header, in rank order. Each rank sends its own to every peer and receives
  // theirs: point-to-point messages on the arrivals' communicator (tag `header_tag`), polled to the
  // deadline. An `MPI_Iallgather` on the collectives' communicator did the same with libnbc's
  // schedule, polled: 5 us of a 28 us all_reduce of 64 KiB over 2 processes (1.26-1.31x a bare
  // `MPI_Allreduce` where the reduction alone was 1.08x). A peer's messages arrive in the order it
  // sent them, so the n-th receive from a peer takes its n-th call's header.
  std::vector<CallHeader> headers_locked(const Op& op, std::uint64_t a, std::uint64_t b,
                                         const std::string& description) {
    // On the heap: when the deadline passes, requests still pending may write into it until the
    // job aborts (the session is failed for good then), so it is let go of, not freed.
    auto all = std::make_unique<CallHeader[]>(world_size_);
    CallHeader& mine = all[rank_];
    mine.count[0] = a;
    mine.count[1] = b;
    mine.seq = op.seq;
    mine.kind = static_cast<std::int32_t>(op.kind);
    std::strncpy(mine.description, description.c_str(), sizeof mine.description - 1);
    std::vector<MPI_Request> requests;
    requests.reserve(2 * (world_size_ - 1));
    for (std::uint32_t p = 0; p < world_size_; ++p) {
      if (p == rank_) continue;
      MPI_Request req = MPI_REQUEST_NULL;
      mpi_check(MPI_Irecv(&all[p], sizeof(CallHeader), MPI_BYTE, static_cast<int>(p), header_tag, arrivals_, &req),
                "MPI_Irecv");
      requests.push_back(req);
    }
    for (std::uint32_t p = 0; p < world_size_; ++p) {
      if (p == rank_) continue;
      MPI_Request req = MPI_REQUEST_NULL;
      mpi_check(MPI_Isend(&mine, sizeof(CallHeader), MPI_BYTE, static_cast<int>(p), header_tag, arrivals_, &req),
                "MPI_Isend");
      requests.push_back(req);
    }
    // The receives come first in `requests`, in peer order without this rank.
    auto peer_of = [&](std::size_t i) { return static_cast<std::uint32_t>(i < rank_ ? i : i + 1); };
    if (!poll_locked(op, requests)) {
      for (std::size_t i = 0; i + 1 < world_size_; ++i) {
        int came = 0;
        mpi_check(MPI_Test(&requests[i], &came, MPI_STATUS_IGNORE), "MPI_Test");
        if (came != 0) arrivals_of_.header(peer_of(i), all[peer_of(i)]);
      }
      (void)all.release();
      fail_locked(op, "exchanging the call's terms");
    }
    for (std::size_t i = 0; i + 1 < world_size_; ++i) arrivals_of_.header(peer_of(i), all[peer_of(i)]);
    return {all.get(), all.get() + world_size_};
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
      mpi_check(MPI_Ibcast(data.data() + at, count, MPI_BYTE, root, comm_, &req), "MPI_Ibcast");
      wait_locked(op, req, "MPI_Ibcast");
    }
  }

  /// Whether this host runs more ranks than it has hardware threads (as `Session` learns at init):
  /// then a rank's polls yield before every test (see `Poller`).
  void set_oversubscribed(bool oversubscribed) noexcept { oversubscribed_ = oversubscribed; }

 private:
  std::uint32_t rank_ = 0;
  std::uint32_t world_size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm arrivals_ = MPI_COMM_NULL;
  mutable std::mutex mutex_;
  std::uint64_t seq_ = 0;  // calls made (every rank makes the same calls)
  Arrivals arrivals_of_;   // the peers' calls known here
  bool failed_ = false;
  bool oversubscribed_ = false;  // see set_oversubscribed
  std::string failure_;
  static constexpr int arrival_tag = 1;
  static constexpr int header_tag = 2;  // headers_locked's messages, on arrivals_ too

 public:
  /// The largest reduction `all_reduce` runs as the blocking `MPI_Allreduce` (see there).
  static constexpr std::size_t blocking_all_reduce_bytes = std::size_t{256} << 10;
};

}  // namespace xdev::distributed::detail
