/// \file
/// The bodies of the collectives over a `GlobalMesh` (<xdev/distributed/global_mesh.hpp>,
/// <xdev/distributed/axis_collectives.hpp>) that go through one MPI collective of the session's
/// engine: local arrays to the host (or reduced on their devices first), the MPI call, the result
/// back to the local devices; and what a reduction plans (its MPI and local ops, `mean`, the
/// pipeline of an all_reduce over several local devices). Built from the stages of
/// global_stages.hpp; the point-to-point collectives are in global_exchange.hpp. Not part of the
/// public API.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/core/error.hpp>
#include <xdev/distributed/detail/global_stages.hpp>
#include <xdev/distributed/mpi.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/memory/array_view.hpp>
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/exchange.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace xdev::distributed::detail {

// What a validated all_reduce of device arrays runs: the ops of both stages.
struct ReducePlan {
  MPI_Op mpi_op = MPI_SUM;
  spmd::ReduceOp local_op = spmd::ReduceOp::sum;
  bool mean = false;
};

template <class T>
ReducePlan plan_reduction(const char* name, spmd::ReduceOp op) {
  (void)mpi_datatype<T>();  // the element-type check, at compile time
  ReducePlan plan;
  switch (op) {
    case spmd::ReduceOp::sum:
      break;
    case spmd::ReduceOp::mean:
      if constexpr (!std::is_floating_point_v<T>)
        throw error(errc::invalid_argument,
                    std::string("distributed::") + name + ": ReduceOp::mean needs floating-point elements");
      plan.mean = true;
      break;
    case spmd::ReduceOp::min:
      plan.mpi_op = MPI_MIN;
      plan.local_op = spmd::ReduceOp::min;
      break;
    case spmd::ReduceOp::max:
      plan.mpi_op = MPI_MAX;
      plan.local_op = spmd::ReduceOp::max;
      break;
    case spmd::ReduceOp::prod:
      plan.mpi_op = MPI_PROD;
      plan.local_op = spmd::ReduceOp::prod;
      break;
    default:
      throw error(errc::invalid_argument, std::string("distributed::") + name + ": unknown ReduceOp value " +
                                              std::to_string(static_cast<int>(op)) +
                                              "; accepted: sum, mean, min, max, prod");
  }
  return plan;
}

// Scales by 1 / (the global device count) for `mean`, as the single-process mesh does (a
// multiplication by the rounded reciprocal, like `ops::scale`).
template <class T>
void finish_mean(const ReducePlan& plan, std::span<T> host, std::size_t devices) {
  if constexpr (std::is_floating_point_v<T>) {
    if (plan.mean && devices > 1) {
      const T alpha = static_cast<T>(1.0 / static_cast<double>(devices));
      for (T& v : host) v *= alpha;
    }
  }
}

// acc[i] = acc[i] (op) x[i] on the host (integers wrap, as MPI_SUM and the device ops do).
template <class T>
void combine_on_host(spmd::ReduceOp op, std::span<T> acc, std::span<const T> x) {
  for (std::size_t i = 0; i < acc.size(); ++i) {
    switch (op) {
      case spmd::ReduceOp::min:
        acc[i] = x[i] < acc[i] ? x[i] : acc[i];
        break;
      case spmd::ReduceOp::max:
        acc[i] = acc[i] < x[i] ? x[i] : acc[i];
        break;
      case spmd::ReduceOp::prod:
        if constexpr (std::is_integral_v<T>)
          acc[i] =
              static_cast<T>(static_cast<std::make_unsigned_t<T>>(acc[i]) * static_cast<std::make_unsigned_t<T>>(x[i]));
        else
          acc[i] *= x[i];
        break;
      default:
        if constexpr (std::is_integral_v<T>)
          acc[i] =
              static_cast<T>(static_cast<std::make_unsigned_t<T>>(acc[i]) + static_cast<std::make_unsigned_t<T>>(x[i]));
        else
          acc[i] += x[i];
    }
  }
}

// How many pieces an all_reduce of `bytes` is pipelined in, where some rank has `local` devices
// (the most of any rank: every rank must cut alike, each piece being an MPI call): the local
// reduce of piece c + 1 runs while piece c crosses the processes. One piece below 1 MiB or when
// no rank has two devices (nothing to overlap), else up to 4 of at least 256 KiB, cut along
// dimension 0 (`rows`).
inline std::size_t pipeline_pieces(std::size_t bytes, std::size_t local, std::int64_t rows) {
  if (local < 2 || bytes < (std::size_t{1} << 20) || rows < 2) return 1;
  const std::size_t by_size = bytes / (std::size_t{256} << 10);
  return std::min({std::size_t{4}, by_size, static_cast<std::size_t>(rows)});
}

template <class T, class M>
void run_all_reduce(const M& mesh, std::span<const Out<T>> arrays, const ReducePlan& plan, const Deadline& deadline) {
  constexpr const char* name = "all_reduce";
  const std::size_t n = arrays[0].size();
  const auto rows = arrays[0].shape().rank() == 0 ? std::int64_t{1} : arrays[0].shape()[0];
  std::size_t most_local = 0;
  for (std::uint32_t r = 0; r < mesh.world_size(); ++r) most_local = std::max(most_local, mesh.size_of(r));
  const std::size_t pieces = pipeline_pieces(n * sizeof(T), most_local, rows);
  const std::string& axis = mesh.local_mesh().axis_names()[0];
  // Local device 0's memory when it is host memory (MPI works on it in place), else a staging
  // buffer; asked before any local work starts (it waits for the work submitted before the call).
  std::shared_ptr<T[]> staged;
  T* host = host_memory(name, arrays[0], deadline);
  if (host == nullptr) {
    staged = staging<T>(n);
    host = staged.get();
  }
  // Piece c: rows [c * rows / pieces, (c + 1) * rows / pieces) of every local array.
  const std::size_t row = rows > 0 ? n / static_cast<std::size_t>(rows) : 0;
  auto rows_of = [&](std::size_t c) {
    return Range{static_cast<std::int64_t>(c) * rows / static_cast<std::int64_t>(pieces),
                 static_cast<std::int64_t>(c + 1) * rows / static_cast<std::int64_t>(pieces)};
  };
  // 1. Within the process, piece by piece on the local mesh (sum for mean), into local device 0's
  // array only: the others get the global result in step 3, so a local all_reduce's second half
  // (the local sum back to every device) would be work thrown away.
  auto local_reduce = [&](std::size_t c) {
    std::vector<AnyArrayView<T>> windows;
    for (const auto& a : arrays) windows.push_back(pieces == 1 ? a : xdev::slice(a, rows_of(c)));
    return spmd::reduce(mesh.local_mesh(), axis, std::span(windows), plan.local_op, 0,
                        spmd::CollectiveOptions{.timeout = deadline.remaining()});
  };
  std::vector<Future<void>> local(arrays.size() > 1 ? pieces : 0);
  PendingWork copies(staged);
  std::size_t c = 0;
  try {
    if (arrays.size() > 1) local[0] = local_reduce(0);
    for (; c < pieces; ++c) {
      if (arrays.size() > 1) local[c].get();
      if (arrays.size() > 1 && c + 1 < pieces) local[c + 1] = local_reduce(c + 1);  // overlaps this piece's MPI
      const Range r = pieces == 1 ? Range{0, rows} : rows_of(c);
      const std::size_t at = static_cast<std::size_t>(r.begin) * row;
      const std::size_t count = pieces == 1 ? n : static_cast<std::size_t>(r.end - r.begin) * row;
      const std::span<T> piece(host + at, count);
      // 2. Across the processes, in host memory.
      if (staged) {
        PendingWork in(staged);
        arrays[0].device().copy_to_host(pieces == 1 ? arrays[0] : xdev::slice(arrays[0], r), piece,
                                        in.handler("the copy from " + arrays[0].device().name()));
        in.wait(name, deadline);
      }
      mesh.session().all_reduce(piece, plan.mpi_op, deadline.remaining());
      finish_mean(plan, piece, mesh.size());
      // 3. Back to every local device (array 0 already holds it when it was reduced in place),
      // while the next piece goes on.
      for (std::size_t i = staged ? 0 : 1; i < arrays.size(); ++i)
        arrays[i].device().copy_to_device(std::span<const T>(piece),
                                          pieces == 1 ? arrays[i] : xdev::slice(arrays[i], r),
                                          copies.handler("the copy to " + arrays[i].device().name()));
    }
  } catch (...) {
    // The next piece's local reduce may still run: let it finish (within the deadline) before
    // the caller may free the arrays.
    for (std::size_t k = c + 1; k < local.size(); ++k)
      if (local[k].valid() && local[k].wait_until(deadline.at) == std::future_status::ready) {
        try {
          local[k].get();
        } catch (...) {
        }
      }
    throw;
  }
  copies.wait(name, deadline);
}

template <class T, class M>
void run_all_gather(const M& mesh, std::span<const In<T>> in, std::span<const Out<T>> out, const Deadline& deadline) {
  constexpr const char* name = "all_gather";
  // 1. This rank's blocks, in local order, to the host.
  const std::size_t block = in[0].size();
  auto mine = staging<T>(block * in.size());
  copy_to_host(name, in, mine, deadline);
  // 2. Every rank's blocks (rank-major: the global order), into out[0]'s memory when it is host
  // memory.
  const std::size_t total = out[0].size();
  std::shared_ptr<T[]> staged;
  T* all = host_memory(name, out[0], deadline);
  if (all == nullptr) {
    staged = staging<T>(total);
    all = staged.get();
  }
  mesh.session().engine().all_gather(std::as_bytes(std::span<const T>(mine.get(), block * in.size())),
                                     std::as_writable_bytes(std::span<T>(all, total)), sizeof(T),
                                     "blocks of shape " + to_string(in[0].shape()) + ", " + element_text(sizeof(T)),
                                     deadline.remaining());
  // 3. To every local output.
  fan_out(name, std::span<const T>(all, total), staged, out, staged ? out.size() : 0, deadline);
}

template <class T, class M>
void run_reduce_scatter(const M& mesh, std::span<const In<T>> in, std::span<const Out<T>> out, const ReducePlan& plan,
                        const Deadline& deadline) {
  constexpr const char* name = "reduce_scatter";
  // 1. This rank's inputs combined on the host, in local order.
  const std::size_t n = in[0].size();
  auto inputs = staging<T>(n * in.size());
  copy_to_host(name, in, inputs, deadline);
  const std::span<T> acc(inputs.get(), n);
  for (std::size_t i = 1; i < in.size(); ++i)
    combine_on_host(plan.local_op, acc, std::span<const T>(inputs.get() + i * n, n));
  // 2. Across the processes: this rank receives its devices' blocks (consecutive in global order).
  const std::size_t block = out[0].size();
  auto mine = staging<T>(block * out.size());
  mesh.session().engine().template reduce_scatter<T>(
      std::span<const T>(acc), std::span<T>(mine.get(), block * out.size()), plan.mpi_op,
      "inputs of shape " + to_string(in[0].shape()), deadline.remaining());
  finish_mean(plan, std::span<T>(mine.get(), block * out.size()), mesh.size());
  // 3. Block i to local device i.
  PendingWork copies(mine);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i].device().copy_to_device(std::span<const T>(mine.get() + i * block, block), out[i],
                                   copies.handler("the copy to " + out[i].device().name()));
  copies.wait(name, deadline);
}

template <class T, class M>
void run_broadcast(const M& mesh, std::span<const Out<T>> arrays, std::size_t root, const Deadline& deadline) {
  constexpr const char* name = "broadcast";
  const std::uint32_t root_rank = mesh.rank_of(root);
  const bool here = root_rank == mesh.rank();
  // This rank's copy of the data: the root's array (on the root's rank) or array 0, in its own
  // memory when that is host memory, else staged.
  const std::size_t local = here ? root - mesh.first_index_of(root_rank) : 0;
  const std::size_t n = arrays[local].size();
  std::shared_ptr<T[]> staged;
  T* host = host_memory(name, arrays[local], deadline);
  if (host == nullptr) {
    staged = staging<T>(n);
    host = staged.get();
    if (here) copy_to_host(name, arrays.subspan(local, 1), staged, deadline);
  }
  mesh.session().engine().broadcast(std::as_writable_bytes(std::span<T>(host, n)), root_rank,
                                    "arrays of shape " + to_string(arrays[0].shape()) + ", " + element_text(sizeof(T)) +
                                        ", root device " + std::to_string(root),
                                    deadline.remaining());
  fan_out(name, std::span<const T>(host, n), staged, arrays, staged && !here ? arrays.size() : local, deadline);
}

template <class T, class M>
void run_reduce(const M& mesh, std::span<const Out<T>> arrays, const ReducePlan& plan, std::size_t root,
                const Deadline& deadline) {
  constexpr const char* name = "reduce";
  const std::uint32_t root_rank = mesh.rank_of(root);
  // 1. This rank's arrays combined on the host, in local order: no array but the root's is ever
  // written.
  const std::size_t n = arrays[0].size();
  auto inputs = staging<T>(n * arrays.size());
  copy_to_host(name, arrays, inputs, deadline);
  const std::span<T> acc(inputs.get(), n);
  for (std::size_t i = 1; i < arrays.size(); ++i)
    combine_on_host(plan.local_op, acc, std::span<const T>(inputs.get() + i * n, n));
  // 2. Across the processes, into the root's rank.
  mesh.session().reduce(acc, plan.mpi_op, root_rank, deadline.remaining());
  if (root_rank != mesh.rank()) return;
  // 3. On the root's rank, into the root's array.
  finish_mean(plan, acc, mesh.size());
  const Out<T>& target = arrays[root - mesh.first_index_of(root_rank)];
  PendingWork copy(inputs);
  target.device().copy_to_device(std::span<const T>(acc), target,
                                 copy.handler("the copy to " + target.device().name()));
  copy.wait(name, deadline);
}

}  // namespace xdev::distributed::detail
