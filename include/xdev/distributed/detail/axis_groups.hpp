/// \file
/// Which devices and which processes a collective over some axes of a `GlobalMesh` with several
/// axes brings together: index arithmetic only (no MPI), so that it is tested on its own. Not part
/// of the public API.
///
/// The global devices (rank-major) are laid out row-major over the mesh's shape. A collective over
/// a set of axes runs once per *group*: the devices whose coordinates agree on every other axis.
/// The processes that hold a group's devices are its *rank set*. The cross-process step runs over
/// one MPI sub-communicator per rank set, so a layout is accepted for a set of axes only when
/// every rank's groups share one rank set (then its groups are the same on every rank of that set,
/// and one MPI all-reduce of all of them, packed, serves them all).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xdev::distributed::detail {

/// The groups of one set of axes, as one rank sees them.
struct AxisGroups {
  /// Empty when the layout is accepted for these axes, else why not (naming a rank and its groups).
  std::string problem;
  /// Devices per group (the product of the axes' extents).
  std::size_t group_size = 1;
  /// Per rank: the first rank of its rank set, or -1 when the set is that rank alone (no MPI).
  std::vector<int> color;
  /// This rank's groups in group order (by their first global device); each lists the local
  /// indices of its members on this rank, in global order.
  std::vector<std::vector<std::size_t>> local;
  /// The first global device of each of this rank's groups (the order of `local`).
  std::vector<std::size_t> base;

  /// True when some group spans processes (an MPI step is needed somewhere in the job).
  [[nodiscard]] bool crosses_processes() const {
    return std::ranges::any_of(color, [](int c) { return c >= 0; });
  }
};

/// The groups of the axes in `mask` (bit a: axis a) over a mesh of `shape` whose global devices
/// belong to the ranks as `offsets` says (rank r holds [offsets[r], offsets[r + 1])), seen from
/// rank `rank`. `names` label the axes in `problem`.
inline AxisGroups axis_groups(const std::vector<std::int64_t>& shape, const std::vector<std::string>& names,
                              std::uint32_t mask, const std::vector<std::size_t>& offsets, std::uint32_t rank) {
  AxisGroups out;
  const std::size_t ranks = offsets.size() - 1;
  const std::size_t total = offsets.back();
  std::vector<std::size_t> strides(shape.size(), 1);
  for (std::size_t a = shape.size(); a-- > 1;) strides[a - 1] = strides[a] * static_cast<std::size_t>(shape[a]);
  for (std::size_t a = 0; a < shape.size(); ++a)
    if ((mask >> a) & 1u) out.group_size *= static_cast<std::size_t>(shape[a]);

  // Each device's group: its flat index with the coordinates on the axes in `mask` set to 0.
  std::vector<std::size_t> rank_of(total);
  for (std::size_t r = 0; r < ranks; ++r)
    for (std::size_t g = offsets[r]; g < offsets[r + 1]; ++g) rank_of[g] = r;
  std::vector<std::size_t> group_of(total);
  for (std::size_t g = 0; g < total; ++g) {
    std::size_t base = g;
    for (std::size_t a = 0; a < shape.size(); ++a)
      if ((mask >> a) & 1u) base -= (g / strides[a]) % static_cast<std::size_t>(shape[a]) * strides[a];
    group_of[g] = base;
  }
  // Each group's rank set, as a sorted list of ranks.
  std::vector<std::vector<std::size_t>> ranks_of_group(total);
  for (std::size_t g = 0; g < total; ++g) {
    auto& set = ranks_of_group[group_of[g]];
    if (set.empty() || set.back() != rank_of[g]) set.push_back(rank_of[g]);
  }
  for (auto& set : ranks_of_group) {
    std::ranges::sort(set);
    set.erase(std::unique(set.begin(), set.end()), set.end());
  }
  // Every rank's groups must share one rank set.
  out.color.assign(ranks, -1);
  for (std::size_t r = 0; r < ranks && out.problem.empty(); ++r) {
    const std::vector<std::size_t>* first = nullptr;
    for (std::size_t g = offsets[r]; g < offsets[r + 1]; ++g) {
      const auto& set = ranks_of_group[group_of[g]];
      if (first == nullptr) {
        first = &set;
      } else if (set != *first) {
        auto text = [](const std::vector<std::size_t>& s) {
          std::string t;
          for (auto x : s) t += (t.empty() ? "" : ", ") + std::to_string(x);
          return "{" + t + "}";
        };
        std::string axes;
        for (std::size_t a = 0; a < names.size(); ++a)
          if ((mask >> a) & 1u) axes += (axes.empty() ? "'" : ", '") + names[a] + "'";
        out.problem = "over the axes " + axes + " rank " + std::to_string(r) + " holds devices of groups that span " +
                      "different sets of processes (" + text(*first) + " and " + text(set) +
                      "); choose a shape whose axes divide the devices along process boundaries";
        break;
      }
    }
    if (first != nullptr && first->size() > 1) out.color[r] = static_cast<int>(first->front());
  }
  if (!out.problem.empty()) return out;

  // This rank's groups, in group order, with the local indices of their members.
  std::vector<std::size_t> seen;  // the bases of this rank's groups, in the order met
  for (std::size_t g = offsets[rank]; g < offsets[rank + 1]; ++g) {
    auto at = static_cast<std::size_t>(std::ranges::find(seen, group_of[g]) - seen.begin());
    if (at == seen.size()) {
      seen.push_back(group_of[g]);
      out.local.emplace_back();
    }
    out.local[at].push_back(g - offsets[rank]);
  }
  // Ordered by the group's first device (base), the same order on every rank of the set.
  std::vector<std::size_t> order(seen.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::ranges::sort(order, [&](std::size_t a, std::size_t b) { return seen[a] < seen[b]; });
  std::vector<std::vector<std::size_t>> sorted;
  for (auto i : order) {
    sorted.push_back(std::move(out.local[i]));
    out.base.push_back(seen[i]);
  }
  out.local = std::move(sorted);
  return out;
}

/// The global devices of the group whose first device is `base`, in group order: row-major over
/// their coordinates on the axes `along` (axis positions, in the order a collective names them),
/// as `spmd::Mesh::groups` orders a group.
inline std::vector<std::size_t> group_members(const std::vector<std::int64_t>& shape,
                                              const std::vector<std::size_t>& along, std::size_t base) {
  std::vector<std::size_t> strides(shape.size(), 1);
  for (std::size_t a = shape.size(); a-- > 1;) strides[a - 1] = strides[a] * static_cast<std::size_t>(shape[a]);
  std::size_t size = 1;
  for (auto a : along) size *= static_cast<std::size_t>(shape[a]);
  std::vector<std::size_t> out(size);
  for (std::size_t pos = 0; pos < size; ++pos) {
    std::size_t flat = base;
    std::size_t rest = pos;
    for (std::size_t i = along.size(); i-- > 0;) {
      const auto extent = static_cast<std::size_t>(shape[along[i]]);
      flat += rest % extent * strides[along[i]];
      rest /= extent;
    }
    out[pos] = flat;
  }
  return out;
}

}  // namespace xdev::distributed::detail
