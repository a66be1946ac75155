/// \file
/// The collectives over some axes of a `GlobalMesh` with several axes: the groups of every set of
/// axes with their MPI sub-communicators, made once when the mesh is built, and the stages of an
/// `all_reduce` over them (within each process first, on the host, then across the processes of
/// each group's rank set, packed into one `MPI_Iallreduce`). Not part of the public API.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/core/error.hpp>
#include <xdev/distributed/detail/axis_groups.hpp>
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

/// Builds the plans of every set of axes; splits the session's communicator once per distinct
/// partition of the ranks, in mask order (the same calls on every rank: the layout is the same).
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

/// all_reduce over the groups of one set of axes: `arrays` holds one array per local device.
template <class T, class M>
void run_all_reduce_over(const M& mesh, const AxisPlans::Plan& axes, std::span<AnyArray<T>> arrays,
                         const ReducePlan& plan, const std::string& description, const Deadline& deadline) {
  constexpr const char* name = "all_reduce";
  const auto& groups = axes.groups.local;
  const std::size_t n = arrays[0].size();
  const std::size_t local = arrays.size();

  // 1. Within the process: every local array to the host, each group's members combined there in
  // local order into the group's slot of `packed` (the groups one after another).
  std::shared_ptr<T[]> staged = staging<T>((local + groups.size()) * n);
  copy_to_host(name, std::span<const AnyArray<T>>(arrays.data(), arrays.size()), staged, deadline);
  T* packed = staged.get() + local * n;
  for (std::size_t j = 0; j < groups.size(); ++j) {
    std::span<T> slot(packed + j * n, n);
    std::copy_n(staged.get() + groups[j][0] * n, n, slot.data());
    for (std::size_t m = 1; m < groups[j].size(); ++m)
      combine_on_host(plan.local_op, slot, std::span<const T>(staged.get() + groups[j][m] * n, n));
  }

  // 2. Across the processes, where a group spans them: every group of this rank in one call over
  // its rank set's communicator (a rank whose groups are its own still makes the call).
  if (axes.groups.crosses_processes()) {
    const bool mine = axes.groups.color[mesh.rank()] >= 0;
    mesh.session().engine().all_reduce(std::span<T>(packed, mine ? groups.size() * n : 0), plan.mpi_op, n * sizeof(T),
                                       description, deadline.remaining(), axes.comm);
  }
  finish_mean(plan, std::span<T>(packed, groups.size() * n), axes.groups.group_size);

  // 3. Each group's result to each of its members.
  PendingWork copies(staged);
  for (std::size_t j = 0; j < groups.size(); ++j)
    for (std::size_t i : groups[j])
      arrays[i].device().copy_to_device(std::span<const T>(packed + j * n, n), arrays[i].buffer(),
                                        copies.handler("the copy to " + arrays[i].device().name()));
  copies.wait(name, deadline);
}

}  // namespace xdev::distributed::detail
