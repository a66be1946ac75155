/// \file
/// The vocabulary of the SPMD collectives (<xdev/spmd/collectives.hpp>,
/// <xdev/spmd/exchange.hpp>): `ReduceOp`, `CollectiveAlgorithm`, `CollectiveOptions`, and the
/// process-wide default deadline.
#pragma once

#include <xdev/core/error.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace xdev::spmd {

namespace detail {
/// The default deadline of every collective, in milliseconds (process-wide).
inline std::atomic<std::int64_t> default_timeout_ms{60'000};
}  // namespace detail

/// How `all_reduce`, `reduce_scatter` and `reduce` combine the arrays of a group, element-wise.
enum class ReduceOp : std::uint8_t {
  sum,   ///< the sum (integers wrap modulo 2^bits)
  mean,  ///< the sum scaled by 1/k on the device (floating-point elements only)
  min,   ///< the smallest, as `ops::minimum`
  max,   ///< the largest, as `ops::maximum`
  prod,  ///< the product, as `ops::mul` (integers wrap modulo 2^bits; `and` for bool)
};

/// How a collective moves data; see the algorithms in <xdev/spmd/collectives.hpp>.
enum class CollectiveAlgorithm : std::uint8_t {
  /// `shared_memory` when every device's memory is host memory, else `direct` for arrays of at
  /// most `direct_threshold_bytes` and `ring` above
  automatic,
  ring,    ///< bandwidth-optimal ring (reduce-scatter + all-gather; pipelined chain for broadcast)
  direct,  ///< every device reads what it needs straight from every peer
  /// every device's memory is host memory (`AnyDevice::host_accessible()`): each device reduces
  /// its share of every array in place, in one step, with no temporaries
  shared_memory,
};

/// Options of every collective.
///
///     using namespace xdev::spmd;
///     all_reduce(mesh, "data", std::span(a), ReduceOp::sum,
///                {.timeout = std::chrono::seconds(5), .algorithm = CollectiveAlgorithm::ring});
struct CollectiveOptions {
  /// How long the collective may take, from the call (or from invoking a deferred operation);
  /// unset: `default_collective_timeout()`. Must be > 0.
  std::optional<std::chrono::milliseconds> timeout = std::nullopt;
  /// Ring, direct, shared memory, or (`automatic`) chosen by the memory and size of the arrays.
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::automatic;
  /// `automatic` uses `direct` for arrays of at most this many bytes.
  std::size_t direct_threshold_bytes = 256 * 1024;
};

/// The deadline of collectives whose options set none: process-wide, initially 60 s.
[[nodiscard]] inline std::chrono::milliseconds default_collective_timeout() noexcept {
  return std::chrono::milliseconds(detail::default_timeout_ms.load(std::memory_order_relaxed));
}

/// Sets `default_collective_timeout()` for the collectives started from now on.
/// \throws xdev::error `errc::invalid_argument` when `timeout` is not > 0.
inline void set_default_collective_timeout(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    throw error(errc::invalid_argument, "set_default_collective_timeout: the timeout must be > 0, got " +
                                            std::to_string(timeout.count()) + " ms");
  detail::default_timeout_ms.store(timeout.count(), std::memory_order_relaxed);
}

}  // namespace xdev::spmd
