/// \file
/// `xdev::kernels::Parallel` and `parallel_for`: how every host kernel splits its work over a
/// worker pool. Results never depend on the pool: pieces are cut by problem size alone.
///
///     boost::asio::thread_pool pool(2);
///     const xdev::kernels::Parallel par{&pool, 2};
///     xdev::kernels::parallel_for(par, n, 4096, [&](std::size_t b, std::size_t e) { ... });
#pragma once

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <type_traits>

namespace xdev::kernels {

/// Where kernels may run in parallel: a pool (null: everything runs serially on the calling
/// thread) and how many workers it has. A kernel uses at most `workers` threads at once: the
/// calling thread and up to `workers - 1` of the pool's, so a caller outside the pool does not
/// oversubscribe a pool sized to the machine.
struct Parallel {
  boost::asio::thread_pool* pool = nullptr;  ///< the pool to post helpers to; null for serial
  std::size_t workers = 1;                   ///< threads the pool has (0 and 1 mean serial)
};

namespace detail {

// The state one parallel_for shares with the helpers it posted. Helpers hold it by shared_ptr, so
// a helper that runs after the call returned still finds valid counters; it then claims no chunk
// and never touches `body`, which may be gone.
struct ForState {
  std::size_t n = 0;
  std::uint32_t chunks = 0;
  void* body = nullptr;
  void (*call)(void*, std::size_t, std::size_t) = nullptr;
  std::atomic<std::uint32_t> next{0};
  std::atomic<std::uint32_t> done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error{};

  [[nodiscard]] std::size_t begin(std::uint32_t i) const noexcept {
    const std::size_t q = n / chunks, r = n % chunks;
    return i * q + std::min<std::size_t>(i, r);
  }

  // Claims and runs chunks until none is left. Never waits for anything.
  void work() noexcept {
    for (;;) {
      const std::uint32_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= chunks) return;
      if (!failed.load(std::memory_order_relaxed)) {
        try {
          call(body, begin(i), begin(i + 1));
        } catch (...) {
          if (!failed.exchange(true, std::memory_order_acq_rel)) error = std::current_exception();
        }
      }
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) done.notify_all();
    }
  }

  // Waits until every chunk is done. Only chunks someone has claimed (and is running) can be
  // outstanding here, because the caller ran work() until no chunk was left.
  void wait() noexcept {
    for (std::uint32_t d = done.load(std::memory_order_acquire); d != chunks; d = done.load(std::memory_order_acquire))
      done.wait(d, std::memory_order_acquire);
  }
};

// Most chunks per worker: enough for dynamic load balancing, few enough that chunks stay large.
inline constexpr std::size_t chunks_per_worker = 4;

// The pool part of `parallel_for`, not a template (so the pool's handler machinery is instantiated
// once, not once per body): runs `chunks` (>= 2) chunks of [0, n) by `call(body, begin, end)` on
// the calling thread and up to `workers - 1` helpers posted to `pool`.
inline void run_chunks(boost::asio::thread_pool& pool, std::size_t workers, std::size_t n, std::uint32_t chunks,
                       void* body, void (*call)(void*, std::size_t, std::size_t)) {
  auto state = std::make_shared<ForState>();
  state->n = n;
  state->chunks = chunks;
  state->body = body;
  state->call = call;
  const std::size_t helpers = std::min<std::size_t>(workers - 1, chunks - 1);
  for (std::size_t h = 0; h < helpers; ++h) {
    try {
      boost::asio::post(pool, [state] { state->work(); });
    } catch (...) {  // could not post (out of memory): the threads already asked, and this one, do it all
      break;
    }
  }
  state->work();
  state->wait();
  if (state->error) std::rethrow_exception(state->error);
}

}  // namespace detail

/// Runs `f(begin, end)` on disjoint chunks covering [0, n), each of at least `grain` items (a
/// `grain` of 0 counts as 1), on the calling thread and up to `par.workers - 1` pool threads, and
/// returns when every chunk is done. Runs `f(0, n)` inline, posting nothing, when there is no
/// pool, one worker, or `n <= grain`. `f` must be safe to call concurrently on disjoint ranges.
///
/// Safe from inside the pool, even when every pool thread is inside a `parallel_for` on it: the
/// caller claims chunks itself from a shared counter and only waits for chunks other threads have
/// already claimed and are running; helpers that start after all chunks were claimed return at
/// once. So a pool thread never waits for work queued behind it.
///
/// \throws the first exception a chunk threw, after every running chunk finished; chunks not yet
/// started when a chunk throws are skipped.
template <class F>
void parallel_for(const Parallel& par, std::size_t n, std::size_t grain, F&& f) {
  if (n == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  const std::size_t workers = par.pool == nullptr ? 1 : par.workers;
  if (workers <= 1 || n <= grain) {
    f(std::size_t{0}, n);
    return;
  }
  const std::size_t max_chunks = std::min<std::size_t>(workers, std::size_t{1} << 16) * detail::chunks_per_worker;
  const auto chunks = static_cast<std::uint32_t>(std::min(n / grain, max_chunks));
  if (chunks <= 1) {
    f(std::size_t{0}, n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  detail::run_chunks(*par.pool, workers, n, chunks, const_cast<void*>(static_cast<const void*>(std::addressof(f))),
                     [](void* body, std::size_t b, std::size_t e) { (*static_cast<Fn*>(body))(b, e); });
}

}  // namespace xdev::kernels
