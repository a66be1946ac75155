/// \file
/// The point-to-point stages of the collectives over a `GlobalMesh`
/// (<xdev/distributed/global_mesh.hpp>, <xdev/distributed/axis_collectives.hpp>):
/// `collective_permute` and `all_to_all`, whose blocks go from one device to another with
/// `MPI_Isend` / `MPI_Irecv` between processes and a host copy within one, and the shape rules of
/// `all_to_all`. Not part of the public API.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/distributed/detail/global_stages.hpp>
#include <xdev/distributed/mpi.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/spmd/detail/all_to_all_runs.hpp>
#include <xdev/spmd/exchange.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace xdev::distributed::detail {

// An all_to_all of inputs of shape `s` in groups of `k` over a mesh of `global` devices: its axes
// and output shape. `of_k` says what k is ("the 4 global devices", "the group size 2").
struct AllToAllShape {
  std::size_t split = 0;
  std::size_t concat = 0;
  Shape want;
};
// Global device g's block for global device j travels with tag g * G + j: distinct for every
// pair, within the tag range MPI guarantees (32767) up to 181 global devices.
inline constexpr std::size_t all_to_all_max_devices = 181;
inline AllToAllShape all_to_all_shape(const Shape& s, std::int64_t split_axis, std::int64_t concat_axis, std::size_t k,
                                      std::size_t global, const std::string& of_k) {
  const char* full = "distributed::all_to_all";
  if (s.rank() == 0)
    throw error(errc::invalid_argument, std::string(full) + ": the inputs are scalars (shape []); all_to_all " +
                                            "splits and concatenates dimensions, so they need rank >= 1");
  AllToAllShape out;
  out.split = spmd::detail::axis_of(full, "split_axis", split_axis, s);
  out.concat = spmd::detail::axis_of(full, "concat_axis", concat_axis, s);
  if (global > all_to_all_max_devices)
    throw error(errc::invalid_argument, std::string(full) + ": the mesh has " + std::to_string(global) +
                                            " global devices; at most " + std::to_string(all_to_all_max_devices) +
                                            " are supported");
  const auto blocks = static_cast<Shape::value_type>(k);
  if (s[out.split] % blocks != 0)
    throw error(errc::invalid_argument, std::string(full) + ": the inputs have shape " + to_string(s) +
                                            ", whose dimension " + std::to_string(out.split) + " (" +
                                            std::to_string(s[out.split]) + ") is not divisible by " + of_k);
  out.want = s;
  out.want[out.split] = s[out.split] / blocks;
  out.want[out.concat] = out.want[out.concat] * blocks;
  return out;
}

// A 64-bit FNV-1a of the pairs: what every rank must agree on fits in a call header.
inline std::string pairs_text(const spmd::PermutePairs& pairs) {
  std::uint64_t h = 14695981039346656037ULL;
  for (const auto& [from, to] : pairs)
    for (const std::int64_t v : {from, to})
      for (int byte = 0; byte < 8; ++byte) {
        h ^= static_cast<std::uint64_t>(v) >> (8 * byte) & 0xffU;
        h *= 1099511628211ULL;
      }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::to_string(pairs.size()) + " pairs #" + hex;
}

// `source[t]`: the global device that global device t receives from (-1: none).
template <class T, class M>
void run_permute(const M& mesh, std::span<const In<T>> in, std::span<const Out<T>> out,
                 const std::vector<std::int64_t>& source, const std::string& description, const Deadline& deadline) {
  constexpr const char* name = "collective_permute";
  const std::size_t n = in[0].size();
  const std::size_t first = mesh.global_index(0);  // local device i is global device first + i
  std::vector<std::int64_t> target(source.size(), -1);
  for (std::size_t t = 0; t < source.size(); ++t)
    if (source[t] >= 0) target[static_cast<std::size_t>(source[t])] = static_cast<std::int64_t>(t);
  // 1. The local inputs that a pair sends, to the host.
  auto sent = staging<T>(n * in.size());
  {
    PendingWork copies(sent);
    for (std::size_t i = 0; i < in.size(); ++i)
      if (target[first + i] >= 0)
        in[i].device().copy_to_host(in[i], std::span<T>(sent.get() + i * n, n),
                                    copies.handler("the copy from " + in[i].device().name()));
    copies.wait(name, deadline);
  }
  // 2. Across the processes, one message per pair whose ends are on different ranks (tagged with
  // the target); a pair within this rank is a host copy.
  auto received = staging<T>(n * out.size());
  auto bytes_of = [n](const std::shared_ptr<T[]>& block, std::size_t i) {
    return std::as_writable_bytes(std::span<T>(block.get() + i * n, n));
  };
  std::vector<DeadlineEngine::Message> sends, recvs;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::size_t g = first + i;
    if (const std::int64_t t = target[g]; t >= 0) {
      const std::uint32_t r = mesh.rank_of(static_cast<std::size_t>(t));
      if (r == mesh.rank())
        std::memcpy(received.get() + (static_cast<std::size_t>(t) - first) * n, sent.get() + i * n, n * sizeof(T));
      else
        sends.push_back({r, static_cast<int>(t), bytes_of(sent, i)});
    }
    if (const std::int64_t s = source[g]; s >= 0) {
      const std::uint32_t r = mesh.rank_of(static_cast<std::size_t>(s));
      if (r != mesh.rank()) recvs.push_back({r, static_cast<int>(g), bytes_of(received, i)});
    } else {
      std::fill_n(received.get() + i * n, n, T{});  // no pair targets it: zeros
    }
  }
  mesh.session().engine().exchange(Kind::collective_permute, n * sizeof(T), description, sends, recvs,
                                   deadline.remaining());
  // 3. To every local output.
  PendingWork copies(received);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i].device().copy_to_device(std::span<const T>(received.get() + i * n, n), out[i],
                                   copies.handler("the copy to " + out[i].device().name()));
  copies.wait(name, deadline);
}

// `groups[i]`: local device i's group, as global devices in group order (every global device
// for the collective over every device). Block j of a device's input goes to its group's member j.
template <class T, class M>
void run_all_to_all(const M& mesh, std::span<const In<T>> in, std::span<const Out<T>> out, std::size_t split,
                    std::size_t concat, const std::vector<std::vector<std::size_t>>& groups,
                    const std::string& description, const Deadline& deadline) {
  constexpr const char* name = "all_to_all";
  const Shape shape = in[0].shape();
  const std::size_t n = in[0].size(), k = groups[0].size(), block = n / k, local = in.size();
  const std::size_t first = mesh.global_index(0), global = mesh.size();
  std::vector<std::size_t> position(local);
  for (std::size_t i = 0; i < local; ++i)
    position[i] =
        static_cast<std::size_t>(std::find(groups[i].begin(), groups[i].end(), first + i) - groups[i].begin());
  // 1. The local inputs to the host.
  auto inputs = staging<T>(n * local);
  copy_to_host(name, in, inputs, deadline);
  // 2. Each block packed (its runs, in the order the receiver unpacks them): block j of local
  // device i's input at packed[(i * k + j) * block].
  auto packed = staging<T>(n * local);
  for (std::size_t i = 0; i < local; ++i)
    for (std::size_t j = 0; j < k; ++j) {
      std::size_t filled = 0;
      spmd::detail::for_each_all_to_all_run(
          shape, k, j, split, concat, [&](std::size_t q, std::size_t src, std::size_t, std::size_t count) {
            if (q != position[i]) return;
            std::memcpy(packed.get() + (i * k + j) * block + filled, inputs.get() + i * n + src, count * sizeof(T));
            filled += count;
          });
    }
  // 3. Every block to its device's rank (a host copy within this rank): the block from group
  // member q for local device i lands at received[(i * k + q) * block].
  auto received = staging<T>(n * local);
  auto bytes_of = [block](const std::shared_ptr<T[]>& buffer, std::size_t at) {
    return std::as_writable_bytes(std::span<T>(buffer.get() + at * block, block));
  };
  std::vector<DeadlineEngine::Message> sends, recvs;
  for (std::size_t i = 0; i < local; ++i)
    for (std::size_t j = 0; j < k; ++j) {
      // Local device i (global g) sends block j to member j (global d), and receives d's block.
      const std::size_t g = first + i, d = groups[i][j];
      const std::uint32_t r = mesh.rank_of(d);
      if (r == mesh.rank()) {
        std::memcpy(received.get() + ((d - first) * k + position[i]) * block, packed.get() + (i * k + j) * block,
                    block * sizeof(T));
      } else {
        sends.push_back({r, static_cast<int>(g * global + d), bytes_of(packed, i * k + j)});
        recvs.push_back({r, static_cast<int>(d * global + g), bytes_of(received, i * k + j)});
      }
    }
  mesh.session().engine().exchange(Kind::all_to_all, n * sizeof(T), description, sends, recvs, deadline.remaining());
  // 4. Each local output assembled on the host from its blocks, in order along concat_axis.
  auto outputs = staging<T>(n * local);
  for (std::size_t i = 0; i < local; ++i) {
    std::vector<std::size_t> used(k, 0);
    spmd::detail::for_each_all_to_all_run(
        shape, k, position[i], split, concat, [&](std::size_t q, std::size_t, std::size_t dst, std::size_t count) {
          std::memcpy(outputs.get() + i * n + dst, received.get() + (i * k + q) * block + used[q], count * sizeof(T));
          used[q] += count;
        });
  }
  PendingWork copies(outputs);
  for (std::size_t i = 0; i < local; ++i)
    out[i].device().copy_to_device(std::span<const T>(outputs.get() + i * n, n), out[i],
                                   copies.handler("the copy to " + out[i].device().name()));
  copies.wait(name, deadline);
}

}  // namespace xdev::distributed::detail
