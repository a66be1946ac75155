/// \file
/// The collectives over some axes of a `GlobalMesh` (<xdev/distributed/global_mesh.hpp>):
/// `all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`, `reduce`, `all_to_all` and
/// `collective_permute` within every group of devices that agree on the other axes
/// (`jax.lax.psum` / `all_gather` / `psum_scatter` / `all_to_all` / `ppermute` with axis names
/// inside `shard_map` over a mesh that spans processes). Link `xdev::mpi`. See docs/distributed.md,
/// "Several axes".
///
///     dist::GlobalMesh mesh(session, devices, {session.world_size(), 2}, {"host", "local"});
///     dist::all_reduce(mesh, {"host"}, std::span(grads), xdev::spmd::ReduceOp::mean).get();
///
/// Stages, for each: the local arrays to the host, combined or arranged there per group; where a
/// group spans processes, one MPI call over the sub-communicator of the processes that hold its
/// devices (made when the mesh was built; a rank's groups packed into one call), or point-to-point
/// messages for `all_to_all` and `collective_permute`; then each group's result to each member. Every rank takes part
/// in every call (its arrival token and the agreement on sizes and axes), even one whose groups are all its own.
/// Asynchronous, in the order started, with a deadline and the usual completion tokens, as the collectives over every
/// device; over every axis each is the collective over every device.
///
/// Errors thrown by the call (on this rank, before anything starts), `errc::invalid_argument`:
/// arrays that do not match the local mesh, no axis, an unknown axis or one named twice, a layout
/// whose groups over `axes` would give a rank two different sets of processes (naming the rank and
/// both sets), a `mean` of integers, an unknown op, a timeout <= 0, and each collective's own shape
/// rules. Through the token: as `all_reduce` over every device.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/core/error.hpp>
#include <xdev/distributed/detail/global_axes.hpp>
#include <xdev/distributed/detail/global_bodies.hpp>
#include <xdev/distributed/detail/global_exchange.hpp>
#include <xdev/distributed/detail/global_stages.hpp>
#include <xdev/distributed/global_mesh.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/spmd/collective_options.hpp>
#include <xdev/spmd/exchange.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::distributed {

namespace detail {

// The checked axes of a collective over some axes: their positions, in the order named, and the
// plan of their set; nullptr plan when they are every axis (the collective over every device).
struct CheckedAxes {
  std::vector<std::size_t> along;
  const AxisPlans::Plan* plan = nullptr;
  std::string text;  // " over the axes 'a' 'b'", for the agreement between ranks
};

inline CheckedAxes check_axes(const char* name, const GlobalMesh& mesh, std::span<const std::string> axes) {
  CheckedAxes out;
  out.along = mesh.axis_positions((std::string("distributed::") + name).c_str(), axes);
  if (out.along.size() == mesh.ndim()) {
    bool in_order = true;
    for (std::size_t i = 0; i < out.along.size(); ++i) in_order = in_order && out.along[i] == i;
    if (in_order || std::string_view(name) == "all_reduce") return out;  // every device, in global order
  }
  out.plan = mesh.axes_plan(out.along);
  if (out.plan != nullptr && !out.plan->groups.problem.empty())
    throw error(errc::invalid_argument, std::string("distributed::") + name + ": " + out.plan->groups.problem);
  out.text = ", over the axes";
  for (auto a : out.along) out.text += " '" + mesh.axis_names()[a] + "'";
  return out;
}

}  // namespace detail

/// Reduces `arrays` (one per LOCAL device) with `op` within every group of devices that agree on
/// every axis but `axes`, leaving each group's result in each of its arrays; `mean` divides by the
/// group's size. Elements as `all_reduce` over every device.
///
///     dist::all_reduce(mesh, {"host"}, std::span(grads), xdev::spmd::ReduceOp::mean).get();
template <class A, class Token = const use_future_t&>
requires detail::Target<A>
auto all_reduce(const GlobalMesh& mesh, std::span<const std::string> axes, std::span<A> arrays, spmd::ReduceOp op,
                std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  using T = detail::element_t<A>;
  constexpr const char* name = "all_reduce";
  const detail::CheckedAxes checked = detail::check_axes(name, mesh, axes);
  if (checked.plan == nullptr) return all_reduce(mesh, arrays, op, timeout, std::forward<Token>(token));
  (void)detail::check_local_arrays<T>(name, "arrays", mesh, arrays);
  const detail::ReducePlan plan = detail::plan_reduction<T>(name, op);
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  std::string description = std::to_string(arrays[0].size()) + " elements of " + std::to_string(sizeof(T)) +
                            " bytes, " + detail::mpi_op_name(plan.mpi_op) + (plan.mean ? " (mean)" : "") + checked.text;
  return detail::start(
      mesh.session(), arrays[0].device(), arrays[0].size() * sizeof(T),
      [mesh, axes_plan = checked.plan, windows = detail::windows_of<detail::Out<T>>(arrays), plan,
       description = std::move(description),
       deadline] { detail::run_all_reduce_over<T>(mesh, *axes_plan, std::span(windows), plan, description, deadline); },
      std::forward<Token>(token));
}

/// Concatenates the inputs of every group along dimension 0, in group order (row-major over the
/// coordinates on `axes`, in the order named, as `spmd::Mesh::groups`), into every member's
/// output: with inputs `[d0, ...]` in groups of k devices, `out[i]` is `[k * d0, ...]`.
/// Across processes the inputs of every rank of this rank's set travel in one `MPI_Iallgatherv`.
///
///     dist::all_gather(mesh, {"host"}, std::span<const AnyArray<float>>(shards), std::span(full)).get();
template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto all_gather(const GlobalMesh& mesh, std::span<const std::string> axes, std::span<I> in, std::span<O> out,
                std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  using T = detail::element_t<O>;
  constexpr const char* name = "all_gather";
  const detail::CheckedAxes checked = detail::check_axes(name, mesh, axes);
  if (checked.plan == nullptr) return all_gather(mesh, in, out, timeout, std::forward<Token>(token));
  (void)detail::check_local_arrays<T>(name, "in", mesh, in);
  if (in[0].shape().rank() == 0)
    throw error(errc::invalid_argument,
                "distributed::all_gather: the inputs are scalars (shape []); all_gather "
                "concatenates along dimension 0, so they need rank >= 1");
  const auto k = static_cast<Shape::value_type>(checked.plan->groups.group_size);
  Shape want = in[0].shape();
  want[0] *= k;
  detail::check_outputs<T>(name, mesh, out, want,
                           "gathering " + std::to_string(k) + " inputs of shape " + to_string(in[0].shape()));
  detail::check_in_out<T>(name, mesh, in, out);
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  std::string description =
      "blocks of shape " + to_string(in[0].shape()) + ", " + detail::element_text(sizeof(T)) + checked.text;
  return detail::start(
      mesh.session(), out[0].device(), out[0].size() * sizeof(T),
      [mesh, checked, ins = detail::windows_of<detail::In<T>>(in), outs = detail::windows_of<detail::Out<T>>(out),
       description = std::move(description), deadline] {
        detail::run_all_gather_over<T>(mesh, *checked.plan, checked.along, std::span(ins), std::span(outs), description,
                                       deadline);
      },
      std::forward<Token>(token));
}

/// Reduces the inputs of every group with `op` and leaves block p of the result in the output of
/// the group's member p (group order as `all_gather`): with inputs `[k * d0, ...]` in groups of k
/// devices, `out[i]` is `[d0, ...]`; `mean` divides by k. Across processes each group's sum
/// travels whole (one MPI all-reduce of this rank's groups, packed), and each member keeps its
/// block: twice the bytes of a bandwidth-optimal reduce-scatter, for one call whatever the layout.
///
///     dist::reduce_scatter(mesh, {"host"}, std::span<const AnyArray<float>>(grads), std::span(shards),
///                          xdev::spmd::ReduceOp::sum).get();
template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto reduce_scatter(const GlobalMesh& mesh, std::span<const std::string> axes, std::span<I> in, std::span<O> out,
                    spmd::ReduceOp op, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                    Token&& token = use_future) {
  using T = detail::element_t<O>;
  constexpr const char* name = "reduce_scatter";
  const detail::CheckedAxes checked = detail::check_axes(name, mesh, axes);
  if (checked.plan == nullptr) return reduce_scatter(mesh, in, out, op, timeout, std::forward<Token>(token));
  (void)detail::check_local_arrays<T>(name, "in", mesh, in);
  const Shape& s = in[0].shape();
  const std::size_t k = checked.plan->groups.group_size;
  const Shape want = detail::scatter_shape(s, k, "device of a group");
  detail::check_outputs<T>(name, mesh, out, want,
                           "scattering " + to_string(s) + " over groups of " + std::to_string(k) + " devices");
  const detail::ReducePlan plan = detail::plan_reduction<T>(name, op);
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  std::string description = "inputs of shape " + to_string(s) + ", " + detail::element_text(sizeof(T)) + ", " +
                            detail::mpi_op_name(plan.mpi_op) + (plan.mean ? " (mean)" : "") + checked.text;
  return detail::start(
      mesh.session(), out[0].device(), out[0].size() * sizeof(T),
      [mesh, checked, ins = detail::windows_of<detail::In<T>>(in), outs = detail::windows_of<detail::Out<T>>(out), plan,
       description = std::move(description), deadline] {
        detail::run_reduce_scatter_over<T>(mesh, *checked.plan, checked.along, std::span(ins), std::span(outs), plan,
                                           description, deadline);
      },
      std::forward<Token>(token));
}

/// Copies the array of each group's member at position `root` (group order as `all_gather`) into
/// every array of the group. The roots of every rank of this rank's set travel in one
/// `MPI_Iallgatherv` (each rank contributes the roots it holds).
///
///     dist::broadcast(mesh, "host", std::span(params), 0).get();   // each local index from host 0
template <class A, class Token = const use_future_t&>
requires detail::Target<A>
auto broadcast(const GlobalMesh& mesh, std::span<const std::string> axes, std::span<A> arrays, std::int64_t root,
               std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  using T = detail::element_t<A>;
  constexpr const char* name = "broadcast";
  const detail::CheckedAxes checked = detail::check_axes(name, mesh, axes);
  if (checked.plan == nullptr) return broadcast(mesh, arrays, root, timeout, std::forward<Token>(token));
  (void)detail::check_local_arrays<T>(name, "arrays", mesh, arrays);
  const std::size_t r = detail::check_position(name, root, checked.plan->groups.group_size);
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  std::string description = "arrays of shape " + to_string(arrays[0].shape()) + ", " + detail::element_text(sizeof(T)) +
                            ", root " + std::to_string(r) + checked.text;
  return detail::start(
      mesh.session(), arrays[0].device(), arrays[0].size() * sizeof(T),
      [mesh, checked, windows = detail::windows_of<detail::Out<T>>(arrays), r, description = std::move(description),
       deadline] {
        detail::run_broadcast_over<T>(mesh, *checked.plan, checked.along, std::span(windows), r, description, deadline);
      },
      std::forward<Token>(token));
}

/// Reduces each group's arrays with `op` into the array of its member at position `root` only;
/// every other array keeps its values. `mean` divides by the group's size. Across processes each
/// group's partial result travels packed in one MPI all-reduce, as `all_reduce`'s.
///
///     dist::reduce(mesh, "local", std::span(losses), xdev::spmd::ReduceOp::sum, 0).get();
template <class A, class Token = const use_future_t&>
requires detail::Target<A>
auto reduce(const GlobalMesh& mesh, std::span<const std::string> axes, std::span<A> arrays, spmd::ReduceOp op,
            std::int64_t root, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
            Token&& token = use_future) {
  using T = detail::element_t<A>;
  constexpr const char* name = "reduce";
  const detail::CheckedAxes checked = detail::check_axes(name, mesh, axes);
  if (checked.plan == nullptr) return reduce(mesh, arrays, op, root, timeout, std::forward<Token>(token));
  (void)detail::check_local_arrays<T>(name, "arrays", mesh, arrays);
  const std::size_t r = detail::check_position(name, root, checked.plan->groups.group_size);
  const detail::ReducePlan plan = detail::plan_reduction<T>(name, op);
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  std::string description = std::to_string(arrays[0].size()) + " elements of " + std::to_string(sizeof(T)) +
                            " bytes, " + detail::mpi_op_name(plan.mpi_op) + (plan.mean ? " (mean)" : "") + ", root " +
                            std::to_string(r) + checked.text;
  return detail::start(
      mesh.session(), arrays[0].device(), arrays[0].size() * sizeof(T),
      [mesh, checked, windows = detail::windows_of<detail::Out<T>>(arrays), plan, r,
       description = std::move(description), deadline] {
        detail::run_reduce_over<T>(mesh, *checked.plan, checked.along, std::span(windows), plan, r, description,
                                   deadline);
      },
      std::forward<Token>(token));
}

/// Within each group of k devices, splits every input along `split_axis` into k blocks, sends
/// block j to the group's member j, and concatenates the blocks each member receives along
/// `concat_axis` in group order (`jax.lax.all_to_all(x, axes, split_axis, concat_axis)`). Blocks
/// between processes go point to point (`MPI_Isend` / `MPI_Irecv`, all posted at once), within a
/// process by a host copy. At most 181 global devices.
template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto all_to_all(const GlobalMesh& mesh, std::span<const std::string> axes, std::span<I> in, std::span<O> out,
                std::int64_t split_axis, std::int64_t concat_axis,
                std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  using T = detail::element_t<O>;
  constexpr const char* name = "all_to_all";
  const detail::CheckedAxes checked = detail::check_axes(name, mesh, axes);
  if (checked.plan == nullptr)
    return all_to_all(mesh, in, out, split_axis, concat_axis, timeout, std::forward<Token>(token));
  (void)detail::check_local_arrays<T>(name, "in", mesh, in);
  const Shape& s = in[0].shape();
  const std::size_t k = checked.plan->groups.group_size;
  const detail::AllToAllShape shape =
      detail::all_to_all_shape(s, split_axis, concat_axis, k, mesh.size(), "the group size " + std::to_string(k));
  const std::size_t split = shape.split, concat = shape.concat;
  const Shape& want = shape.want;
  detail::check_outputs<T>(name, mesh, out, want,
                           "all_to_all of " + to_string(s) + " in groups of " + std::to_string(k) +
                               " devices (split_axis " + std::to_string(split) + ", concat_axis " +
                               std::to_string(concat) + ")");
  detail::check_in_out<T>(name, mesh, in, out);
  std::vector<std::vector<std::size_t>> groups(mesh.local_size());
  const detail::Membership member = detail::membership(mesh, *checked.plan, checked.along);
  for (std::size_t i = 0; i < groups.size(); ++i)
    groups[i] = detail::group_members(mesh.shape(), checked.along, checked.plan->groups.base[member.group[i]]);
  std::string description = "inputs of shape " + to_string(s) + ", " + detail::element_text(sizeof(T)) +
                            ", split_axis " + std::to_string(split) + ", concat_axis " + std::to_string(concat) +
                            checked.text;
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  return detail::start(
      mesh.session(), out[0].device(), out[0].size() * sizeof(T),
      [mesh, ins = detail::windows_of<detail::In<T>>(in), outs = detail::windows_of<detail::Out<T>>(out), split, concat,
       groups = std::move(groups), description = std::move(description), deadline] {
        detail::run_all_to_all<T>(mesh, std::span(ins), std::span(outs), split, concat, groups, description, deadline);
      },
      std::forward<Token>(token));
}

/// Within each group, for each `(source, target)` pair of positions (group order as
/// `all_gather`), the target's output receives the source's input; outputs no pair targets are
/// zero-filled (`jax.lax.ppermute(x, axes, perm)`). Every group follows the same pairs: they
/// become one permutation of the global devices, sent point to point between processes.
template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto collective_permute(const GlobalMesh& mesh, std::span<const std::string> axes, std::span<I> in, std::span<O> out,
                        const spmd::PermutePairs& pairs,
                        std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  using T = detail::element_t<O>;
  constexpr const char* name = "collective_permute";
  const detail::CheckedAxes checked = detail::check_axes(name, mesh, axes);
  if (checked.plan == nullptr) return collective_permute(mesh, in, out, pairs, timeout, std::forward<Token>(token));
  (void)detail::check_local_arrays<T>(name, "in", mesh, in);
  detail::check_outputs<T>(name, mesh, out, in[0].shape(), "collective_permute keeps the shape, which");
  detail::check_in_out<T>(name, mesh, in, out);
  const std::vector<std::int64_t> position_source =
      spmd::detail::sources_of("distributed::collective_permute", axes, checked.plan->groups.group_size, pairs);
  std::vector<std::int64_t> source(mesh.size(), -1);
  for (const auto& members : detail::every_group(mesh, checked.along))
    for (std::size_t t = 0; t < members.size(); ++t)
      if (position_source[t] >= 0)
        source[members[t]] = static_cast<std::int64_t>(members[static_cast<std::size_t>(position_source[t])]);
  std::string description = "arrays of shape " + to_string(in[0].shape()) + ", " + detail::element_text(sizeof(T)) +
                            ", " + detail::pairs_text(pairs) + checked.text;
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  return detail::start(
      mesh.session(), out[0].device(), out[0].size() * sizeof(T),
      [mesh, ins = detail::windows_of<detail::In<T>>(in), outs = detail::windows_of<detail::Out<T>>(out),
       source = std::move(source), description = std::move(description),
       deadline] { detail::run_permute<T>(mesh, std::span(ins), std::span(outs), source, description, deadline); },
      std::forward<Token>(token));
}

// ---- one axis, or axes in braces ----------------------------------------------------------------
// (Without the brace overloads `{"a", "b"}` would reach the `string_view` ones through its
// two-pointer constructor.)

template <class A, class Token = const use_future_t&>
requires detail::Target<A>
auto all_reduce(const GlobalMesh& mesh, std::string_view axis, std::span<A> arrays, spmd::ReduceOp op,
                std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  const std::string one(axis);
  return all_reduce(mesh, std::span<const std::string>(&one, 1), arrays, op, timeout, std::forward<Token>(token));
}
template <class A, class Token = const use_future_t&>
requires detail::Target<A>
auto all_reduce(const GlobalMesh& mesh, std::initializer_list<std::string> axes, std::span<A> arrays, spmd::ReduceOp op,
                std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  return all_reduce(mesh, std::span<const std::string>(axes.begin(), axes.size()), arrays, op, timeout,
                    std::forward<Token>(token));
}

template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto all_gather(const GlobalMesh& mesh, std::string_view axis, std::span<I> in, std::span<O> out,
                std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  const std::string one(axis);
  return all_gather(mesh, std::span<const std::string>(&one, 1), in, out, timeout, std::forward<Token>(token));
}
template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto all_gather(const GlobalMesh& mesh, std::initializer_list<std::string> axes, std::span<I> in, std::span<O> out,
                std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  return all_gather(mesh, std::span<const std::string>(axes.begin(), axes.size()), in, out, timeout,
                    std::forward<Token>(token));
}

template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto reduce_scatter(const GlobalMesh& mesh, std::string_view axis, std::span<I> in, std::span<O> out, spmd::ReduceOp op,
                    std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  const std::string one(axis);
  return reduce_scatter(mesh, std::span<const std::string>(&one, 1), in, out, op, timeout, std::forward<Token>(token));
}
template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto reduce_scatter(const GlobalMesh& mesh, std::initializer_list<std::string> axes, std::span<I> in, std::span<O> out,
                    spmd::ReduceOp op, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                    Token&& token = use_future) {
  return reduce_scatter(mesh, std::span<const std::string>(axes.begin(), axes.size()), in, out, op, timeout,
                        std::forward<Token>(token));
}

template <class A, class Token = const use_future_t&>
requires detail::Target<A>
auto broadcast(const GlobalMesh& mesh, std::string_view axis, std::span<A> arrays, std::int64_t root,
               std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  const std::string one(axis);
  return broadcast(mesh, std::span<const std::string>(&one, 1), arrays, root, timeout, std::forward<Token>(token));
}
template <class A, class Token = const use_future_t&>
requires detail::Target<A>
auto broadcast(const GlobalMesh& mesh, std::initializer_list<std::string> axes, std::span<A> arrays, std::int64_t root,
               std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  return broadcast(mesh, std::span<const std::string>(axes.begin(), axes.size()), arrays, root, timeout,
                   std::forward<Token>(token));
}

template <class A, class Token = const use_future_t&>
requires detail::Target<A>
auto reduce(const GlobalMesh& mesh, std::string_view axis, std::span<A> arrays, spmd::ReduceOp op, std::int64_t root,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  const std::string one(axis);
  return reduce(mesh, std::span<const std::string>(&one, 1), arrays, op, root, timeout, std::forward<Token>(token));
}
template <class A, class Token = const use_future_t&>
requires detail::Target<A>
auto reduce(const GlobalMesh& mesh, std::initializer_list<std::string> axes, std::span<A> arrays, spmd::ReduceOp op,
            std::int64_t root, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
            Token&& token = use_future) {
  return reduce(mesh, std::span<const std::string>(axes.begin(), axes.size()), arrays, op, root, timeout,
                std::forward<Token>(token));
}

template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto all_to_all(const GlobalMesh& mesh, std::string_view axis, std::span<I> in, std::span<O> out,
                std::int64_t split_axis, std::int64_t concat_axis,
                std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  const std::string one(axis);
  return all_to_all(mesh, std::span<const std::string>(&one, 1), in, out, split_axis, concat_axis, timeout,
                    std::forward<Token>(token));
}
template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto all_to_all(const GlobalMesh& mesh, std::initializer_list<std::string> axes, std::span<I> in, std::span<O> out,
                std::int64_t split_axis, std::int64_t concat_axis,
                std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  return all_to_all(mesh, std::span<const std::string>(axes.begin(), axes.size()), in, out, split_axis, concat_axis,
                    timeout, std::forward<Token>(token));
}

template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto collective_permute(const GlobalMesh& mesh, std::string_view axis, std::span<I> in, std::span<O> out,
                        const spmd::PermutePairs& pairs,
                        std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  const std::string one(axis);
  return collective_permute(mesh, std::span<const std::string>(&one, 1), in, out, pairs, timeout,
                            std::forward<Token>(token));
}
template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto collective_permute(const GlobalMesh& mesh, std::initializer_list<std::string> axes, std::span<I> in,
                        std::span<O> out, const spmd::PermutePairs& pairs,
                        std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  return collective_permute(mesh, std::span<const std::string>(axes.begin(), axes.size()), in, out, pairs, timeout,
                            std::forward<Token>(token));
}

}  // namespace xdev::distributed
