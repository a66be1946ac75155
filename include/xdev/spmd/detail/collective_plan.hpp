/// \file
/// What a validated collective is: its kind, how it moves data, its arrays and groups (internal to
/// the SPMD collectives; <xdev/spmd/detail/collective_run.hpp> runs a plan).
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/core/op_kind.hpp>
#include <xdev/core/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xdev::spmd::detail {

enum class CollectiveKind : std::uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  all_to_all,
  permute,  ///< collective_permute
};

/// How a collective moves data, resolved (never `automatic`): see `CollectiveAlgorithm`.
enum class Route : std::uint8_t { ring, direct, shared_memory };

/// A step of the shared-memory route that touches at most this many bytes runs at once on the
/// thread that finds it ready (a completion handler, or the caller when every device was idle)
/// instead of as a host task on its device: for small arrays the hand-off would cost more than
/// the work.
inline constexpr std::size_t shared_inline_bytes = 128 * 1024;

/// One array of a collective as captured by the call: where its elements live, and how many.
struct ArrayRef {
  AnyDevice device;
  xdev::detail::erased_handle handle;
  std::size_t count = 0;
  std::size_t offset = 0;  ///< elements before the first one (a contiguous window of an array)
};

/// What a collective does, validated and resolved (groups, algorithm) by its public function.
struct CollectivePlan {
  CollectiveKind kind = CollectiveKind::all_reduce;
  Route route = Route::ring;
  ops::BinaryOp combine = ops::BinaryOp::add;
  bool mean = false;
  std::size_t root = 0;  ///< broadcast and reduce: the root's position in its group
  /// collective_permute: per position in a group, the position whose input it receives (-1: none,
  /// its output is zero-filled)
  std::vector<std::int64_t> source;
  /// all_to_all: the dimension the inputs are split along and the one the blocks are concatenated
  /// along, and the input's shape per mesh device
  std::size_t split_axis = 0;
  std::size_t concat_axis = 0;
  std::vector<Shape> in_shapes;
  std::string what;  ///< "all_reduce over axis 'data'", for messages
  std::vector<std::vector<std::size_t>> groups;
  std::vector<ArrayRef> in;   ///< per mesh device; the arrays of all_reduce and broadcast
  std::vector<ArrayRef> out;  ///< per mesh device; all_gather and reduce_scatter only
};

/// `[offset, offset + length)` of chunk `c` when `n` elements are cut into `k` chunks whose
/// lengths differ by at most one (the first `n % k` chunks are one longer).
struct Chunk {
  std::size_t offset;
  std::size_t length;
};
inline Chunk chunk_of(std::size_t n, std::size_t k, std::size_t c) noexcept {
  const std::size_t q = n / k, r = n % k;
  return {c * q + (c < r ? c : r), q + (c < r ? 1 : 0)};
}

/// The collective's public name ("all_reduce", ...), for activities.
constexpr const char* name_of(CollectiveKind k) noexcept {
  switch (k) {
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::reduce:
      return "reduce";
    case CollectiveKind::all_to_all:
      return "all_to_all";
    case CollectiveKind::permute:
      break;
  }
  return "collective_permute";
}

}  // namespace xdev::spmd::detail
