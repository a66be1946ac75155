/// \file
/// Where this process sits in a multi-process job, as the launcher's environment variables say
/// and as MPI confirms: `xdev::distributed::read_environment` and `resolve_placement`. Pure
/// functions, MPI-free: <xdev/distributed/mpi.hpp> runs them inside `distributed::init()`, and
/// they can be tested without a launcher.
///
///     auto env = xdev::distributed::read_environment();   // RANK, OMPI_COMM_WORLD_RANK, ...
///     // each rank's host name, gathered by MPI, and this process's MPI rank:
///     xdev::distributed::Placement p = xdev::distributed::resolve_placement(env, mpi_rank, peers);
///
/// Variable families (a value may come from several; they must agree):
///
/// | value | torchrun | Open MPI | MPICH/Hydra (PMI) |
/// | --- | --- | --- | --- |
/// | rank | `RANK` | `OMPI_COMM_WORLD_RANK` | `PMI_RANK` |
/// | world size | `WORLD_SIZE` | `OMPI_COMM_WORLD_SIZE` | `PMI_SIZE` |
/// | local rank | `LOCAL_RANK` | `OMPI_COMM_WORLD_LOCAL_RANK` | `MPI_LOCALRANKID` |
/// | local world size | `LOCAL_WORLD_SIZE` | `OMPI_COMM_WORLD_LOCAL_SIZE` | `MPI_LOCALNRANKS` |
/// | host index | `GROUP_RANK` | — | — |
///
/// Open MPI's `OMPI_COMM_WORLD_NODE_RANK` is not a host index (it is the process's rank on its
/// node across all jobs), so it is not read: without `GROUP_RANK` the host index is the order in
/// which hosts first appear among the ranks.
#pragma once

#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace xdev::distributed {

/// Where this process sits in the job. Single process: rank 0 of 1 everywhere.
struct Placement {
  std::uint32_t rank = 0;              ///< index among all processes of the job (the MPI rank)
  std::uint32_t world_size = 1;        ///< processes in the job
  std::uint32_t local_rank = 0;        ///< index among the processes on this host
  std::uint32_t local_world_size = 1;  ///< processes on this host
  std::uint32_t host_index = 0;        ///< index of this host among the job's hosts
  std::uint32_t host_count = 1;        ///< hosts in the job

  friend bool operator==(const Placement&, const Placement&) = default;
};

/// One value read from the environment, with the variable it came from (for error messages).
struct EnvValue {
  std::uint32_t value = 0;
  std::string variable;  ///< e.g. "RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"

  friend bool operator==(const EnvValue&, const EnvValue&) = default;
};

/// What the launcher's variables say; unset members were not given by any family.
struct EnvPlacement {
  std::optional<EnvValue> rank;
  std::optional<EnvValue> world_size;
  std::optional<EnvValue> local_rank;
  std::optional<EnvValue> local_world_size;
  std::optional<EnvValue> host_index;

  /// No variable of any family was set (a singleton run, or an unknown launcher).
  [[nodiscard]] bool empty() const noexcept {
    return !rank && !world_size && !local_rank && !local_world_size && !host_index;
  }
  friend bool operator==(const EnvPlacement&, const EnvPlacement&) = default;
};

/// Looks a variable up: its value, or `std::nullopt` when unset. An empty value counts as unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

/// What one rank reports about itself when the processes meet (gathered by MPI in rank order).
struct PeerInfo {
  std::string host;                         ///< its host (MPI processor) name
  std::optional<std::uint32_t> host_index;  ///< its `GROUP_RANK`, when set

  friend bool operator==(const PeerInfo&, const PeerInfo&) = default;
};

namespace detail {

// The variable of each value (rank, world size, local rank, local world size, host index) per
// family, nullptr where a family has none; families are read in this order.
inline constexpr std::array<std::array<const char*, 5>, 3> env_families{{
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
     nullptr},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", nullptr},
}};

inline constexpr std::uint32_t max_processes = 2147483647;  // MPI counts are ints

inline std::string show(const EnvValue& v) {
  return v.variable + "=" + std::to_string(v.value);
}

// A rank must be below its size; both given, so both are named.
inline void check_below(const std::optional<EnvValue>& index, const std::optional<EnvValue>& size) {
  if (index && size && index->value >= size->value)
    throw error(errc::invalid_argument,
                "distributed: " + show(*index) + " is not below " + show(*size) + " (a rank must be in [0, size))");
}

inline void check_placement_values(const EnvPlacement& p) {
  check_below(p.rank, p.world_size);
  check_below(p.local_rank, p.local_world_size);
  check_below(p.host_index, p.world_size);
  if (p.local_world_size && p.world_size && p.local_world_size->value > p.world_size->value)
    throw error(errc::invalid_argument, "distributed: " + show(*p.local_world_size) + " exceeds " +
                                            show(*p.world_size) +
                                            " (the processes of one host are part of the job's processes)");
}

inline std::optional<std::string> getenv_lookup(const char* name) {
  return getenv_string(name);
}

}  // namespace detail

/// Reads the launcher's variables (see the file comment for the families) through `lookup`.
/// Within a family, a rank and its size are set together or not at all (`RANK` without
/// `WORLD_SIZE` is an error; `GROUP_RANK` may stand alone); where families overlap their values
/// must be equal.
/// \throws xdev::error `errc::invalid_argument` naming the variables and values: a malformed value
///         (`RANK="x" is not an integer in [0, 2147483646]`), a missing partner, a rank not below
///         its size, a local world larger than the world, or two families that disagree
///         (`RANK=1 and OMPI_COMM_WORLD_RANK=0 disagree`).
inline EnvPlacement read_environment(const EnvLookup& lookup) {
  EnvPlacement out;
  std::array<std::optional<EnvValue>*, 5> fields{&out.rank, &out.world_size, &out.local_rank, &out.local_world_size,
                                                 &out.host_index};
  for (const auto& family : detail::env_families) {
    std::array<std::optional<EnvValue>, 5> values;
    for (std::size_t i = 0; i < family.size(); ++i) {
      if (family[i] == nullptr) continue;
      auto text = lookup(family[i]);
      if (!text || text->empty()) continue;
      const bool is_size = i == 1 || i == 3;
      const auto v =
          parse_count(family[i], *text, is_size ? 1 : 0, is_size ? detail::max_processes : detail::max_processes - 1);
      values[i] = EnvValue{static_cast<std::uint32_t>(v), family[i]};
    }
    for (std::size_t i : {std::size_t{0}, std::size_t{2}})
      if (values[i].has_value() != values[i + 1].has_value()) {
        const char* set = values[i] ? family[i] : family[i + 1];
        const char* unset = values[i] ? family[i + 1] : family[i];
        throw error(errc::invalid_argument, std::string("distributed: ") + set + " is set but " + unset +
                                                " is not (a launcher sets both, or neither)");
      }
    detail::check_placement_values({values[0], values[1], values[2], values[3], values[4]});
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (!values[i]) continue;
      auto& field = *fields[i];
      if (!field)
        field = values[i];
      else if (field->value != values[i]->value)
        throw error(errc::invalid_argument, "distributed: " + detail::show(*field) + " and " +
                                                detail::show(*values[i]) +
                                                " disagree (the launchers' variables must describe the same process)");
    }
  }
  // Values merged from different families (RANK with OMPI_COMM_WORLD_LOCAL_SIZE, ...).
  detail::check_placement_values(out);
  return out;
}

/// `read_environment` of the process's environment (`std::getenv`; empty values count as unset).
inline EnvPlacement read_environment() {
  return read_environment(&detail::getenv_lookup);
}

/// The placement of the process of MPI rank `rank`, given what every rank reported (`peers`, in
/// rank order: the world size is `peers.size()`), cross-checked against the environment `env`.
/// Local rank and local world size count the ranks with the same host name; the host index is
/// `GROUP_RANK` when the ranks set it (the same on the ranks of one host, different across
/// hosts), else the order in which the hosts first appear.
/// \throws xdev::error `errc::invalid_argument` when a value from the environment disagrees with
///         MPI (`WORLD_SIZE=3 disagrees with MPI: the job has 2 processes`, naming every
///         disagreeing variable), or `GROUP_RANK` is inconsistent across ranks (naming the ranks);
///         for `rank >= peers.size()`.
inline Placement resolve_placement(const EnvPlacement& env, std::uint32_t rank, std::span<const PeerInfo> peers) {
  if (peers.empty() || rank >= peers.size())
    throw error(errc::invalid_argument, "resolve_placement: rank " + std::to_string(rank) + " is not below the " +
                                            std::to_string(peers.size()) + " peers");
  Placement p;
  p.rank = rank;
  p.world_size = static_cast<std::uint32_t>(peers.size());
  std::vector<std::string> hosts;  // in order of first appearance
  std::uint32_t local_rank = 0;
  std::uint32_t local_size = 0;
  for (std::size_t r = 0; r < peers.size(); ++r) {
    if (std::find(hosts.begin(), hosts.end(), peers[r].host) == hosts.end()) hosts.push_back(peers[r].host);
    if (peers[r].host == peers[rank].host) {
      if (r < rank) ++local_rank;
      ++local_size;
    }
  }
  p.local_rank = local_rank;
  p.local_world_size = local_size;
  p.host_count = static_cast<std::uint32_t>(hosts.size());
  p.host_index = static_cast<std::uint32_t>(std::find(hosts.begin(), hosts.end(), peers[rank].host) - hosts.begin());

  std::string mismatches;
  auto check = [&](const std::optional<EnvValue>& v, std::uint32_t actual, const std::string& what) {
    if (v && v->value != actual)
      mismatches += (mismatches.empty() ? "" : "; ") + detail::show(*v) + " disagrees with MPI: " + what + " " +
                    std::to_string(actual);
  };
  check(env.rank, p.rank, "this process's rank is");
  check(env.world_size, p.world_size, "the job's process count is");
  check(env.local_rank, p.local_rank, "its rank among the processes on host \"" + peers[rank].host + "\" is");
  check(env.local_world_size, p.local_world_size, "the processes on host \"" + peers[rank].host + "\" are");
  if (!mismatches.empty())
    throw error(errc::invalid_argument, "distributed: " + mismatches +
                                            " (the launcher's variables and the MPI job must describe the same "
                                            "processes: run every process under the same launcher)");

  // GROUP_RANK: set on every rank or none, equal exactly on the ranks of one host.
  if (std::any_of(peers.begin(), peers.end(), [](const PeerInfo& peer) { return peer.host_index.has_value(); })) {
    for (std::size_t a = 0; a < peers.size(); ++a) {
      if (!peers[a].host_index)
        throw error(errc::invalid_argument, "distributed: GROUP_RANK is set on some ranks but not on rank " +
                                                std::to_string(a) + " (set it on every rank, or on none)");
      for (std::size_t b = 0; b < a; ++b)
        if ((peers[a].host == peers[b].host) != (*peers[a].host_index == *peers[b].host_index))
          throw error(errc::invalid_argument,
                      "distributed: GROUP_RANK=" + std::to_string(*peers[b].host_index) + " on rank " +
                          std::to_string(b) + " (host \"" + peers[b].host +
                          "\") and GROUP_RANK=" + std::to_string(*peers[a].host_index) + " on rank " +
                          std::to_string(a) + " (host \"" + peers[a].host +
                          "\") disagree with MPI (the ranks of one host must share one GROUP_RANK, "
                          "and different hosts have different ones)");
    }
    p.host_index = *peers[rank].host_index;
  }
  return p;
}

}  // namespace xdev::distributed
