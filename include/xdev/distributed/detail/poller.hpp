/// \file
/// `Poller`: how the distributed engine's thread waits between two polls of MPI requests. Not part
/// of the public API.
#pragma once

#include <chrono>
#include <thread>

namespace xdev::distributed::detail {

/// The wait between two polls of MPI requests (`MPI_Test`). MPI progresses a non-blocking operation
/// inside MPI_Test, so the first milliseconds are polls back to back, as MPI_Wait's own loop does,
/// with a yield every `yield_every` so that the process's other threads on this core (a local
/// reduce overlapping the transfer, work a user overlaps with an asynchronous collective) still
/// run. A yield before every poll cost as much again as the polls: 2 processes, 64 KiB,
/// `Session::all_reduce` 1.09-1.14x a bare `MPI_Allreduce` against 1.16-1.19x, 1 MiB 1.08-1.11x
/// against 1.10-1.13x (bench_distributed, alternating runs). A yield every 20 us still cost 7-9 %
/// of a 1 MiB reduction (about 8 `sched_yield` per call); every 200 us, `Session::all_reduce` read
/// 1.01-1.04x against 1.07-1.10x (6 alternating runs each), and two devices per process at 16 MiB,
/// the case the yields are for, measured the same (2.02-2.04x against 1.98-2.19x).
///
/// On a host with more ranks than hardware threads (`yield_every_poll`), it yields before every
/// poll, as MPI's own waits do there (Open MPI's `mpi_yield_when_idle`): the peer a rank waits for
/// may need this very core. 4 processes on 2 cores, 64 KiB: with 20 us between yields a
/// `GlobalMesh` all_reduce read 2.12-2.33x `MPI_Allreduce`, against 1.45-2.09x (a figure that moves
/// by as much from run to run).
///
/// A rank that waits long for a peer needs no core: after `spin_phase` (longer than a reduction of
/// 256 MiB takes here, which a sleep between its polls would stretch) it sleeps between polls,
/// briefly, then longer.
class Poller {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto yield_every = std::chrono::microseconds(200);
  static constexpr auto spin_phase = std::chrono::milliseconds(50);
  static constexpr auto short_sleep_phase = std::chrono::milliseconds(500);

  explicit Poller(bool yield_every_poll) noexcept : yield_every_poll_(yield_every_poll) {}

  /// Waits before the next poll; `now` is the time of the poll that just failed.
  void pause(Clock::time_point now) {
    const auto waited = now - start_;
    if (waited < spin_phase) {
      if (yield_every_poll_ || now - last_yield_ >= yield_every) {
        std::this_thread::yield();
        last_yield_ = Clock::now();
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(waited < short_sleep_phase ? 20 : 200));
  }

 private:
  bool yield_every_poll_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_yield_ = start_;
};

}  // namespace xdev::distributed::detail
