/// \file
/// The collectives over some axes of a `GlobalMesh` with several axes
/// (<xdev/distributed/axis_collectives.hpp>): the groups of every set of axes with their MPI
/// sub-communicators, made once when the mesh is built, and the stages that run over them — the
/// packed group reduction (`all_reduce`, `reduce_scatter`, `reduce`), the set-wide gather
/// (`all_gather`, `broadcast`), and each group's members in order (`all_to_all`,
/// `collective_permute` go through the point-to-point stages of global_exchange.hpp). Not part of the
/// public API.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/core/error.hpp>
#include <xdev/distributed/detail/axis_groups.hpp>
#include <xdev/distributed/detail/global_bodies.hpp>
#include <xdev/distributed/detail/global_stages.hpp>
#include <xdev/distributed/mpi.hpp>
#include <xdev/memory/array.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace xdev::distributed::detail {

/// Every set of axes of one mesh (indexed by its bit mask): its groups as this rank sees them, and
/// the communicator of this rank's rank set. The communicators are freed with the last copy of
/// the mesh (unless MPI was finalized first).
struct AxisPlans {
  struct Plan {
    AxisGroups groups;
    /// Unset: every rank is in one rank set (the session's communicator serves); else this
    /// rank's sub-communicator, `MPI_COMM_NULL` when its rank set is itself alone.
    std::optional<MPI_Comm> comm;
  };
  std::vector<Plan> by_mask;
  std::vector<MPI_Comm> owned;

  AxisPlans() = default;
  AxisPlans(const AxisPlans&) = delete;
  AxisPlans& operator=(const AxisPlans&) = delete;
  ~AxisPlans() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0)
      for (MPI_Comm& c : owned) MPI_Comm_free(&c);
  }
};

/// Builds the plans of every set of axes; splits a communicator of the session once per distinct
/// partition of the ranks (`DeadlineEngine::split`), in mask order: the same calls on every rank,
/// whose layout is the same.
inline std::shared_ptr<const AxisPlans> make_axis_plans(DeadlineEngine& engine, const std::vector<std::int64_t>& shape,
                                                        const std::vector<std::string>& names,
                                                        const std::vector<std::size_t>& offsets, std::uint32_t rank) {
  auto plans = std::make_shared<AxisPlans>();
  std::map<std::vector<int>, std::optional<MPI_Comm>> made;
  const std::uint32_t masks = std::uint32_t{1} << shape.size();
  for (std::uint32_t mask = 0; mask < masks; ++mask) {
    AxisPlans::Plan plan{axis_groups(shape, names, mask, offsets, rank), std::nullopt};
    const auto& color = plan.groups.color;
    if (plan.groups.problem.empty() && plan.groups.crosses_processes()) {
      auto it = made.find(color);
      if (it == made.end()) {
        std::optional<MPI_Comm> comm;  // unset: one set of every rank
        if (!std::ranges::all_of(color, [](int c) { return c == 0; })) {
          const int mine = color[rank];
          comm = engine.split(mine < 0 ? MPI_UNDEFINED : mine);
          if (*comm != MPI_COMM_NULL) plans->owned.push_back(*comm);
        }
        it = made.emplace(color, comm).first;
      }
      plan.comm = it->second;
    }
    plans->by_mask.push_back(std::move(plan));
  }
  return plans;
}

// Steps 1 and 2 of a reduction over the groups of one set of axes: every local array to the
// host, each group's members on this rank combined there in local order into the group's slot of
// the result (the groups one after another, from element `local * n` of the returned staging),
// then reduced across the processes of each group's rank set, packed into one call.
template <class T, class V, class M>
std::shared_ptr<T[]> reduce_groups(const char* name, const M& mesh, const AxisPlans::Plan& axes,
                                   std::span<const V> arrays, const ReducePlan& plan, const std::string& description,
                                   const Deadline& deadline) {
  const auto& groups = axes.groups.local;
  const std::size_t n = arrays[0].size();
  std::shared_ptr<T[]> staged = staging<T>((arrays.size() + groups.size()) * n);
  copy_to_host(name, arrays, staged, deadline);
  T* packed = staged.get() + arrays.size() * n;
  for (std::size_t j = 0; j < groups.size(); ++j) {
    std::span<T> slot(packed + j * n, n);
    std::copy_n(staged.get() + groups[j][0] * n, n, slot.data());
    for (std::size_t m = 1; m < groups[j].size(); ++m)
      combine_on_host(plan.local_op, slot, std::span<const T>(staged.get() + groups[j][m] * n, n));
  }
  // A rank whose groups are its own still makes the call.
  if (axes.groups.crosses_processes()) {
    const bool mine = axes.groups.color[mesh.rank()] >= 0;
    mesh.session().engine().all_reduce(std::span<T>(packed, mine ? groups.size() * n : 0), plan.mpi_op, n * sizeof(T),
                                       description, deadline.remaining(), axes.comm);
  }
  finish_mean(plan, std::span<T>(packed, groups.size() * n), axes.groups.group_size);
  return staged;
}

// Copies `n` elements from `host + source(i) * n` into `arrays[i]` for every local array i and
// waits for the copies (keeping `keep` alive until they complete).
template <class T, class Source>
void scatter_to(const char* name, const T* host, std::size_t n, Source source, std::shared_ptr<void> keep,
                std::span<const Out<T>> arrays, const Deadline& deadline) {
  PendingWork copies(std::move(keep));
  for (std::size_t i = 0; i < arrays.size(); ++i)
    arrays[i].device().copy_to_device(std::span<const T>(host + source(i) * n, n), arrays[i],
                                      copies.handler("the copy to " + arrays[i].device().name()));
  copies.wait(name, deadline);
}

// Per local array: its group among this rank's groups, and its position in that group's order.
struct Membership {
  std::vector<std::size_t> group;
  std::vector<std::size_t> position;
};
template <class M>
Membership membership(const M& mesh, const AxisPlans::Plan& axes, const std::vector<std::size_t>& along) {
  Membership out{std::vector<std::size_t>(mesh.local_size()), std::vector<std::size_t>(mesh.local_size())};
  for (std::size_t j = 0; j < axes.groups.local.size(); ++j) {
    const auto members = group_members(mesh.shape(), along, axes.groups.base[j]);
    for (std::size_t i : axes.groups.local[j]) {
      out.group[i] = j;
      out.position[i] =
          static_cast<std::size_t>(std::find(members.begin(), members.end(), mesh.global_index(i)) - members.begin());
    }
  }
  return out;
}

/// all_reduce over the groups of one set of axes: `arrays` holds one array per local device.
template <class T, class M>
void run_all_reduce_over(const M& mesh, const AxisPlans::Plan& axes, std::span<const Out<T>> arrays,
                         const ReducePlan& plan, const std::string& description, const Deadline& deadline) {
  constexpr const char* name = "all_reduce";
  const std::size_t n = arrays[0].size();
  auto staged = reduce_groups<T>(name, mesh, axes, arrays, plan, description, deadline);
  const T* packed = staged.get() + arrays.size() * n;
  const Membership in = membership(mesh, axes, {});
  scatter_to(
      name, packed, n, [&](std::size_t i) { return in.group[i]; }, staged, arrays, deadline);
}

/// reduce_scatter over the groups of the axes `along` (in the order named): the group's
/// reduction, whose block p (of `out[i].size()` elements) goes to the group's member p.
template <class T, class M>
void run_reduce_scatter_over(const M& mesh, const AxisPlans::Plan& axes, const std::vector<std::size_t>& along,
                             std::span<const In<T>> in, std::span<const Out<T>> out, const ReducePlan& plan,
                             const std::string& description, const Deadline& deadline) {
  constexpr const char* name = "reduce_scatter";
  const std::size_t n = in[0].size();
  const std::size_t block = out[0].size();
  auto staged = reduce_groups<T>(name, mesh, axes, in, plan, description, deadline);
  const T* packed = staged.get() + in.size() * n;
  const Membership at = membership(mesh, axes, along);
  scatter_to(
      name, packed, block, [&](std::size_t i) { return at.group[i] * (n / block) + at.position[i]; }, staged, out,
      deadline);
}

/// all_gather over the groups of the axes `along` (in the order named): each group's inputs
/// concatenated in group order into each member's output. The inputs of every rank of this rank's
/// set reach it in one `MPI_Iallgatherv` over the set's communicator: every one of them belongs
/// to one of this rank's groups.
template <class T, class M>
void run_all_gather_over(const M& mesh, const AxisPlans::Plan& axes, const std::vector<std::size_t>& along,
                         std::span<const In<T>> in, std::span<const Out<T>> out, const std::string& description,
                         const Deadline& deadline) {
  constexpr const char* name = "all_gather";
  const std::size_t n = in[0].size();
  auto mine = staging<T>(in.size() * n);
  copy_to_host(name, in, mine, deadline);

  // 1. Every input of this rank's set, rank-major (where[r]: rank r's first element).
  const int color = axes.groups.color.empty() ? -1 : axes.groups.color[mesh.rank()];
  std::vector<std::size_t> where(mesh.world_size(), 0);
  std::shared_ptr<T[]> all = mine;
  if (axes.groups.crosses_processes()) {
    std::vector<std::uint64_t> sizes;
    std::size_t total = 0;
    for (std::uint32_t r = 0; r < mesh.world_size(); ++r)
      if (color >= 0 && axes.groups.color[r] == color) {
        where[r] = total;
        sizes.push_back(mesh.size_of(r) * n * sizeof(T));
        total += mesh.size_of(r) * n;
      }
    if (color >= 0) all = staging<T>(total);
    const MPI_Comm over = color < 0 ? MPI_COMM_NULL : axes.comm.value_or(mesh.session().communicator());
    mesh.session().engine().all_gather_over(std::as_bytes(std::span<const T>(mine.get(), in.size() * n)),
                                            std::as_writable_bytes(std::span<T>(all.get(), color < 0 ? 0 : total)),
                                            sizes, n * sizeof(T), description, deadline.remaining(), over);
  }
  if (color < 0) where[mesh.rank()] = 0;

  // 2. Each group's output, in group order; then to each member.
  const auto& groups = axes.groups.local;
  const std::size_t k = axes.groups.group_size;
  auto result = staging<T>(groups.size() * k * n);
  for (std::size_t j = 0; j < groups.size(); ++j) {
    const auto members = group_members(mesh.shape(), along, axes.groups.base[j]);
    for (std::size_t p = 0; p < k; ++p) {
      const std::uint32_t r = mesh.rank_of(members[p]);
      std::copy_n(all.get() + where[r] + (members[p] - mesh.first_index_of(r)) * n, n, result.get() + (j * k + p) * n);
    }
  }
  const Membership at = membership(mesh, axes, along);
  scatter_to(
      name, result.get(), k * n, [&](std::size_t i) { return at.group[i]; }, result, out, deadline);
}

/// broadcast over the groups of the axes `along`: each group's member at position `root` to every
/// member. The roots of this rank's set travel in one `MPI_Iallgatherv` (each rank contributes the
/// roots it holds, in group order): what every rank of the set needs, and nothing else.
template <class T, class M>
void run_broadcast_over(const M& mesh, const AxisPlans::Plan& axes, const std::vector<std::size_t>& along,
                        std::span<const Out<T>> arrays, std::size_t root, const std::string& description,
                        const Deadline& deadline) {
  constexpr const char* name = "broadcast";
  const std::size_t n = arrays[0].size();
  const auto& groups = axes.groups.local;
  // Each group's root, and which roots each rank holds (in group order).
  std::vector<std::size_t> roots(groups.size());
  std::vector<std::vector<std::size_t>> held(mesh.world_size());  // per rank: the groups whose root it holds
  for (std::size_t j = 0; j < groups.size(); ++j) {
    roots[j] = group_members(mesh.shape(), along, axes.groups.base[j])[root];
    held[mesh.rank_of(roots[j])].push_back(j);
  }
  const std::vector<std::size_t>& here = held[mesh.rank()];
  auto mine = staging<T>(here.size() * n);
  {
    PendingWork copies(mine);
    for (std::size_t q = 0; q < here.size(); ++q) {
      const Out<T>& a = arrays[roots[here[q]] - mesh.global_index(0)];
      a.device().copy_to_host(a, std::span<T>(mine.get() + q * n, n),
                              copies.handler("the copy from " + a.device().name()));
    }
    copies.wait(name, deadline);
  }

  // Every root of the set, rank-major; at[j]: group j's root in `all`.
  const int color = axes.groups.color[mesh.rank()];
  std::shared_ptr<T[]> all = mine;
  std::vector<std::size_t> at(groups.size());
  for (std::size_t q = 0; q < here.size(); ++q) at[here[q]] = q * n;
  if (axes.groups.crosses_processes()) {
    std::vector<std::uint64_t> sizes;
    std::size_t total = 0;
    for (std::uint32_t r = 0; r < mesh.world_size(); ++r)
      if (color >= 0 && axes.groups.color[r] == color) {
        for (std::size_t q = 0; q < held[r].size(); ++q) at[held[r][q]] = total + q * n;
        sizes.push_back(held[r].size() * n * sizeof(T));
        total += held[r].size() * n;
      }
    if (color >= 0) all = staging<T>(total);
    const MPI_Comm over = color < 0 ? MPI_COMM_NULL : axes.comm.value_or(mesh.session().communicator());
    mesh.session().engine().all_gather_over(std::as_bytes(std::span<const T>(mine.get(), here.size() * n)),
                                            std::as_writable_bytes(std::span<T>(all.get(), color < 0 ? 0 : total)),
                                            sizes, n * sizeof(T), description, deadline.remaining(), over);
  }
  // Each root's data to the other members of its group.
  PendingWork copies(all);
  for (std::size_t j = 0; j < groups.size(); ++j)
    for (std::size_t i : groups[j])
      if (mesh.global_index(i) != roots[j])
        arrays[i].device().copy_to_device(std::span<const T>(all.get() + at[j], n), arrays[i],
                                          copies.handler("the copy to " + arrays[i].device().name()));
  copies.wait(name, deadline);
}

/// reduce over the groups of the axes `along`: each group's reduction into its member at position
/// `root` only (the packed group reduction of `all_reduce`, kept by the roots).
template <class T, class M>
void run_reduce_over(const M& mesh, const AxisPlans::Plan& axes, const std::vector<std::size_t>& along,
                     std::span<const Out<T>> arrays, const ReducePlan& plan, std::size_t root,
                     const std::string& description, const Deadline& deadline) {
  constexpr const char* name = "reduce";
  const std::size_t n = arrays[0].size();
  auto staged = reduce_groups<T>(name, mesh, axes, arrays, plan, description, deadline);
  const T* packed = staged.get() + arrays.size() * n;
  PendingWork copies(staged);
  for (std::size_t j = 0; j < axes.groups.local.size(); ++j) {
    const std::size_t g = group_members(mesh.shape(), along, axes.groups.base[j])[root];
    if (mesh.rank_of(g) != mesh.rank()) continue;
    const Out<T>& target = arrays[g - mesh.global_index(0)];
    target.device().copy_to_device(std::span<const T>(packed + j * n, n), target,
                                   copies.handler("the copy to " + target.device().name()));
  }
  copies.wait(name, deadline);
}

/// Every group of the axes `along` over the whole mesh, as global devices in group order.
template <class M>
std::vector<std::vector<std::size_t>> every_group(const M& mesh, const std::vector<std::size_t>& along) {
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t g = 0; g < mesh.size(); ++g) {
    const auto c = mesh.coords(g);
    if (std::all_of(along.begin(), along.end(), [&](std::size_t a) { return c[a] == 0; }))
      out.push_back(group_members(mesh.shape(), along, g));
  }
  return out;
}

}  // namespace xdev::distributed::detail
