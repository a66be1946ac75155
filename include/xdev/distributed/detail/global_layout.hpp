/// \file
/// How a `GlobalMesh` (<xdev/distributed/global_mesh.hpp>) is laid out, agreed by every rank when
/// it is built: one `rendezvous` of every rank's problems, layout (one axis, or a shape and names)
/// and device names, then the checks every rank makes alike, and — for a mesh of several axes —
/// the groups and MPI sub-communicators of every set of axes. Not part of the public API.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/core/error.hpp>
#include <xdev/distributed/detail/global_axes.hpp>
#include <xdev/distributed/mpi.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace xdev::distributed::detail {

inline void put_string(std::vector<std::byte>& out, std::string_view s) {
  const std::uint64_t n = s.size();
  const auto* p = reinterpret_cast<const std::byte*>(&n);
  out.insert(out.end(), p, p + sizeof n);
  const auto* b = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), b, b + s.size());
}

inline std::string get_string(std::span<const std::byte> in, std::size_t& at) {
  std::uint64_t n = 0;
  if (at + sizeof n > in.size()) throw error(errc::internal, "distributed::GlobalMesh: a truncated message");
  std::memcpy(&n, in.data() + at, sizeof n);
  at += sizeof n;
  if (n > in.size() - at) throw error(errc::internal, "distributed::GlobalMesh: a truncated message");
  std::string s(reinterpret_cast<const char*>(in.data() + at), static_cast<std::size_t>(n));
  at += static_cast<std::size_t>(n);
  return s;
}

/// The most axes a GlobalMesh has (the sets of axes are planned for all 2^n of them).
inline constexpr std::size_t global_mesh_max_axes = 8;

/// What every rank knows of a GlobalMesh once it is built.
struct GlobalLayout {
  std::vector<std::int64_t> shape;  // one axis: {every device}
  std::vector<std::string> names;
  std::vector<std::size_t> offsets;        // per rank: its first global index; then the device count
  std::vector<std::string> labels;         // per global device: "rank R / NAME"
  std::shared_ptr<const AxisPlans> plans;  // several axes only: per set of axes
};

/// Why `shape` and `names` cannot describe a mesh of `devices` on this rank ("" when they can).
inline std::string layout_problem(const std::vector<AnyDevice>& devices, const std::vector<std::int64_t>& shape,
                                  const std::vector<std::string>& names) {
  if (devices.empty()) return "the rank has no devices";
  if (shape.size() != names.size())
    return "the shape has " + std::to_string(shape.size()) + " extents but " + std::to_string(names.size()) +
           " axis names";
  if (shape.empty()) return "the mesh has no axes";
  if (shape.size() > global_mesh_max_axes)
    return "the mesh has " + std::to_string(shape.size()) + " axes; at most " + std::to_string(global_mesh_max_axes);
  for (std::size_t a = 0; a < shape.size(); ++a) {
    if (shape[a] < 1) return "axis '" + names[a] + "' has extent " + std::to_string(shape[a]) + "; extents are >= 1";
    if (names[a].empty()) return "axis " + std::to_string(a) + " has an empty name";
    for (std::size_t b = 0; b < a; ++b)
      if (names[b] == names[a]) return "axis name '" + names[a] + "' is used twice";
  }
  return {};
}

/// The rendezvous that builds a GlobalMesh: this rank's `problem` ("" when none), its layout (an
/// `axis` name when `shape` is empty, else `shape` and `names`) and `local` devices.
/// \throws xdev::error `errc::invalid_argument` on every rank naming every rank's problem, layouts
///         that differ between ranks, or a shape that does not hold every rank's devices.
inline GlobalLayout meet(Session& session, const spmd::Mesh& local, const std::string& problem, const std::string& axis,
                         std::vector<std::int64_t> shape, std::vector<std::string> names,
                         std::optional<std::chrono::milliseconds> timeout) {
  GlobalLayout out{std::move(shape), std::move(names), {}, {}, nullptr};
  const bool several = !out.shape.empty();
  std::string layout = several ? "shape (" : axis;
  for (std::size_t a = 0; a < out.shape.size(); ++a)
    layout += (a ? ", " : "") + out.names[a] + "=" + std::to_string(out.shape[a]);
  if (several) layout += ")";
  std::vector<std::byte> mine;
  put_string(mine, problem);
  put_string(mine, several ? "n" : "1");
  put_string(mine, layout);
  for (const auto& d : local.devices()) put_string(mine, d.name());
  const auto all = session.rendezvous("xdev.GlobalMesh", mine, timeout);

  std::string problems;
  auto add = [&](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
  std::vector<std::string> kinds(all.size()), layouts(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    std::size_t at = 0;
    const std::string p = get_string(all[r], at);
    kinds[r] = get_string(all[r], at);
    layouts[r] = get_string(all[r], at);
    if (!p.empty()) add("rank " + std::to_string(r) + ": " + p);
    out.offsets.push_back(out.labels.size());
    while (at < all[r].size()) out.labels.push_back("rank " + std::to_string(r) + " / " + get_string(all[r], at));
  }
  out.offsets.push_back(out.labels.size());
  auto as_text = [&](std::size_t r) { return kinds[r] == "1" ? "axis '" + layouts[r] + "'" : layouts[r]; };
  if (problems.empty())
    for (std::size_t r = 1; r < all.size(); ++r) {
      if (kinds[r] == "1" && kinds[0] == "1" && layouts[r] != layouts[0])
        add("rank " + std::to_string(r) + " names the axis '" + layouts[r] + "', rank 0 '" + layouts[0] + "'");
      else if (layouts[r] != layouts[0] || kinds[r] != kinds[0])
        add("rank " + std::to_string(r) + " lays the mesh out as " + as_text(r) + ", rank 0 as " + as_text(0));
    }
  if (problems.empty() && several) {
    std::size_t product = 1;
    for (auto e : out.shape) product *= static_cast<std::size_t>(e);
    if (product != out.labels.size()) {
      std::string counts;
      for (std::size_t r = 0; r + 1 < out.offsets.size(); ++r)
        counts += (r ? ", " : "") + ("rank " + std::to_string(r) + ": ") +
                  std::to_string(out.offsets[r + 1] - out.offsets[r]);
      add("the " + layout + " holds " + std::to_string(product) + " devices, but the ranks contribute " +
          std::to_string(out.labels.size()) + " (" + counts + ")");
    }
  }
  if (!problems.empty()) throw error(errc::invalid_argument, "distributed::GlobalMesh: " + problems);
  if (several) {
    out.plans = make_axis_plans(session.engine(), out.shape, out.names, out.offsets, session.rank());
  } else {
    out.shape = {static_cast<std::int64_t>(out.labels.size())};
    out.names = {axis};
  }
  return out;
}

}  // namespace xdev::distributed::detail
