/// \file
/// The SPMD collectives that move arrays between devices without reducing them: `all_to_all`
/// (expert-parallel layers) and `collective_permute` (pipeline parallelism, ring attention). Like
/// the collectives of <xdev/spmd/collectives.hpp> they run in every group of `mesh.groups(axes)`,
/// take `CollectiveOptions` and a completion token with signature `void(std::exception_ptr)`
/// (default `xdev::use_future`), validate everything before submitting anything, and have a
/// deadline that names the devices that did not complete. Ordering, errors and the rule to
/// synchronize before reusing the arrays after an error are those of collectives.hpp.
///
///     // Every device of the 'expert' axis sends block j of its tokens to device j and receives
///     // one block from each, concatenated along dimension 0:
///     all_to_all(mesh, "expert", in, std::span(out), /*split_axis=*/0, /*concat_axis=*/0).get();
///     // Pipeline stages pass their activations on: stage i's `in` becomes stage i+1's `out`.
///     collective_permute(mesh, "stage", in, std::span(out), {{0, 1}, {1, 2}, {2, 3}}).get();
///
/// Algorithms: where every device's memory is host memory (`shared_memory`, what `automatic`
/// picks there) each device copies what it receives straight from its peers' memory, in one step;
/// elsewhere (`ring` and `direct` alike) each device copies the same regions with region copies
/// on its default stream. Neither needs temporaries.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/spmd/collective_options.hpp>
#include <xdev/spmd/detail/collective_start.hpp>
#include <xdev/spmd/mesh.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::spmd {

/// The (source, target) pairs of `collective_permute`: positions in a group.
using PermutePairs = std::vector<std::pair<std::int64_t, std::int64_t>>;

namespace detail {

// in[i] must not be out[i]: a device reads its peers' inputs while they write their outputs.
template <class T>
void check_distinct(const char* op, std::span<const AnyArray<T>> in, std::span<const AnyArray<T>> out) {
  for (std::size_t i = 0; i < in.size(); ++i)
    if (out[i].buffer().native_handle() == in[i].buffer().native_handle())
      invalid(op, "out[" + std::to_string(i) + "] is the same array as in[" + std::to_string(i) +
                      "]; this collective does not work in place");
}

// A dimension of `shape` given by the user, checked.
inline std::size_t axis_of(const char* op, const char* what, std::int64_t axis, const Shape& shape) {
  if (axis < 0 || static_cast<std::size_t>(axis) >= shape.rank())
    invalid(op, std::string(what) + " " + std::to_string(axis) + " is not a dimension of arrays of shape " +
                    to_string(shape) + "; it must be in [0, " + std::to_string(shape.rank()) + ")");
  return static_cast<std::size_t>(axis);
}

// Per position in a group of k, the position it receives from (-1: none), from the pairs.
inline std::vector<std::int64_t> sources_of(const char* op, std::span<const std::string> axes, std::size_t group_size,
                                            const PermutePairs& pairs) {
  const auto k = static_cast<std::int64_t>(group_size);
  std::vector<std::int64_t> source(group_size, -1);
  std::vector<bool> sends(group_size, false);
  for (const auto& [from, to] : pairs) {
    auto pair = [from = from, to = to] {  // appended piece by piece (g++ 12 -O3 warns on "(" + string&&)
      std::string text("pair (");
      text += std::to_string(from);
      text += ", ";
      text += std::to_string(to);
      text += ")";
      return text;
    };
    if (from < 0 || from >= k || to < 0 || to >= k)
      invalid(op, pair() + " is out of range for " + describe_axes(axes) + " of size " + std::to_string(k) +
                      "; positions are in [0, " + std::to_string(k) + ")");
    auto& src = source[static_cast<std::size_t>(to)];
    if (src >= 0)
      invalid(op, pair() + " names target " + std::to_string(to) + " again (it already receives from " +
                      std::to_string(src) + "); each position receives from at most one");
    if (sends[static_cast<std::size_t>(from)])
      invalid(op, pair() + " names source " + std::to_string(from) + " again; each position sends to at most one");
    src = from;
    sends[static_cast<std::size_t>(from)] = true;
  }
  return source;
}

}  // namespace detail

namespace detail {

// An output that is its device's input: the same array, or windows sharing an element.
template <class T, class In, class Out>
void check_exchange_apart(const char* name, const CollectivePlan& plan, std::span<const In> in,
                          std::span<const Out> out) {
  if constexpr (is_window_v<In> || is_window_v<Out>)
    check_apart(name, plan, true);
  else
    check_distinct<T>(name, in, out);
}

// The plan of an all_to_all of arrays or windows.
template <class T, class In, class Out>
CollectivePlan all_to_all_plan(const Mesh& mesh, std::span<const std::string> axes, std::span<const In> in,
                               std::span<const Out> out, std::int64_t split_axis, std::int64_t concat_axis) {
  constexpr const char* name = "all_to_all";
  CollectivePlan plan;
  plan.kind = CollectiveKind::all_to_all;
  plan.groups = groups_of(name, mesh, axes);
  plan.in = check_arrays<T>(name, "in", mesh, in);
  plan.out = check_arrays<T>(name, "out", mesh, out);
  check_same_shapes<T>(name, "in", plan.groups, in);
  check_exchange_apart<T>(name, plan, in, out);
  for (const auto& g : plan.groups) {
    const Shape& s = in[g[0]].shape();
    if (s.rank() == 0)
      invalid(name, "in[" + std::to_string(g[0]) + "] is a scalar (shape []); all_to_all splits and " +
                        "concatenates dimensions, so the arrays need rank >= 1");
    plan.split_axis = axis_of(name, "split_axis", split_axis, s);
    plan.concat_axis = axis_of(name, "concat_axis", concat_axis, s);
    const auto k = static_cast<Shape::value_type>(g.size());
    if (s[plan.split_axis] % k != 0)
      invalid(name, "in[" + std::to_string(g[0]) + "] has shape " + to_string(s) + ", whose dimension " +
                        std::to_string(plan.split_axis) + " (" + std::to_string(s[plan.split_axis]) +
                        ") is not divisible by the " + std::to_string(k) + " devices of its group");
    Shape want = s;
    want[plan.split_axis] = s[plan.split_axis] / k;
    want[plan.concat_axis] = want[plan.concat_axis] * k;
    for (auto i : g)
      if (out[i].shape() != want)
        invalid(name, "out[" + std::to_string(i) + "] on " + out[i].device().name() + " has shape " +
                          to_string(out[i].shape()) + " but all_to_all of " + to_string(s) + " over " +
                          std::to_string(k) + " devices (split_axis " + std::to_string(split_axis) + ", concat_axis " +
                          std::to_string(concat_axis) + ") gives " + to_string(want));
  }
  for (const auto& a : in) plan.in_shapes.push_back(a.shape());
  return plan;
}

// The plan of a collective_permute of arrays or windows.
template <class T, class In, class Out>
CollectivePlan permute_plan(const Mesh& mesh, std::span<const std::string> axes, std::span<const In> in,
                            std::span<const Out> out, const PermutePairs& pairs) {
  constexpr const char* name = "collective_permute";
  CollectivePlan plan;
  plan.kind = CollectiveKind::permute;
  plan.groups = groups_of(name, mesh, axes);
  plan.in = check_arrays<T>(name, "in", mesh, in);
  plan.out = check_arrays<T>(name, "out", mesh, out);
  check_same_shapes<T>(name, "in", plan.groups, in);
  check_exchange_apart<T>(name, plan, in, out);
  for (const auto& g : plan.groups)
    for (auto i : g)
      if (out[i].shape() != in[g[0]].shape())
        invalid(name, "out[" + std::to_string(i) + "] on " + out[i].device().name() + " has shape " +
                          to_string(out[i].shape()) + " but the inputs of its group have shape " +
                          to_string(in[g[0]].shape()) + "; collective_permute keeps the shape");
  plan.source = sources_of(name, axes, plan.groups[0].size(), pairs);
  return plan;
}

}  // namespace detail

// ---- all_to_all ------------------------------------------------------------------------------------

/// In every group of k devices, splits each input along `split_axis` into k equal blocks, sends
/// block j to the group's j-th device, and concatenates the k blocks a device receives along
/// `concat_axis`, in group order (JAX `lax.all_to_all`). With inputs of shape S, `out[i]` has
/// shape S with S[split_axis] / k and then S[concat_axis] * k (S itself when the two axes are
/// the same). Completes with `void(std::exception_ptr)`.
///
///     // in[i] [8, 4] on 4 devices; out[i] [2, 16]: out[j] = concat(in[0][2j:2j+2], ..., axis 1)
///     all_to_all(mesh, "x", in, std::span(out), 0, 1).get();
///
/// \throws xdev::error `errc::invalid_argument` as `all_reduce`, and for inputs of rank 0, an axis
///         outside [0, rank), a split dimension not divisible by k, an output of another shape,
///         an output that is its input.
/// Errors through the token as `all_reduce`.
template <class T, class Token = const use_future_t&>
auto all_to_all(const Mesh& mesh, std::span<const std::string> axes,
                std::span<const AnyArray<std::type_identity_t<T>>> in, std::span<AnyArray<T>> out,
                std::int64_t split_axis, std::int64_t concat_axis, CollectiveOptions opt = {},
                Token&& token = use_future) {
  constexpr const char* name = "all_to_all";
  return detail::start<T>(
      name,
      detail::all_to_all_plan<T>(mesh, axes, in, std::span<const AnyArray<T>>(out.data(), out.size()), split_axis,
                                 concat_axis),
      opt, in[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}

/// `all_to_all` over one axis.
template <class T, class Token = const use_future_t&>
auto all_to_all(const Mesh& mesh, std::string_view axis, std::span<const AnyArray<std::type_identity_t<T>>> in,
                std::span<AnyArray<T>> out, std::int64_t split_axis, std::int64_t concat_axis,
                CollectiveOptions opt = {}, Token&& token = use_future) {
  const std::string one(axis);
  return all_to_all<T>(mesh, std::span<const std::string>(&one, 1), in, out, split_axis, concat_axis, std::move(opt),
                       std::forward<Token>(token));
}

/// `all_to_all` over the axes in braces.
template <class T, class Token = const use_future_t&>
auto all_to_all(const Mesh& mesh, std::initializer_list<std::string> axes,
                std::span<const AnyArray<std::type_identity_t<T>>> in, std::span<AnyArray<T>> out,
                std::int64_t split_axis, std::int64_t concat_axis, CollectiveOptions opt = {},
                Token&& token = use_future) {
  return all_to_all<T>(mesh, std::span<const std::string>(axes.begin(), axes.size()), in, out, split_axis, concat_axis,
                       std::move(opt), std::forward<Token>(token));
}

// ---- collective_permute ----------------------------------------------------------------------------

/// In every group, for each `(source, target)` pair (positions in the group), the target's output
/// receives the source's input; the output of a device that no pair targets is filled with zeros
/// (JAX `lax.ppermute`). Every array of a group has the same shape. Completes with
/// `void(std::exception_ptr)`.
///
///     // A ring shift over 4 devices: device i receives device i-1's input.
///     collective_permute(mesh, "x", in, std::span(out), {{0, 1}, {1, 2}, {2, 3}, {3, 0}}).get();
///
/// \throws xdev::error `errc::invalid_argument` as `all_reduce`, and for a position outside
///         [0, k), a source or a target named twice, inputs and outputs of different shapes, an
///         output that is its input.
/// Errors through the token as `all_reduce`.
template <class T, class Token = const use_future_t&>
auto collective_permute(const Mesh& mesh, std::span<const std::string> axes,
                        std::span<const AnyArray<std::type_identity_t<T>>> in, std::span<AnyArray<T>> out,
                        const PermutePairs& pairs, CollectiveOptions opt = {}, Token&& token = use_future) {
  constexpr const char* name = "collective_permute";
  return detail::start<T>(
      name, detail::permute_plan<T>(mesh, axes, in, std::span<const AnyArray<T>>(out.data(), out.size()), pairs), opt,
      in[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}

/// `collective_permute` over one axis.
template <class T, class Token = const use_future_t&>
auto collective_permute(const Mesh& mesh, std::string_view axis, std::span<const AnyArray<std::type_identity_t<T>>> in,
                        std::span<AnyArray<T>> out, const PermutePairs& pairs, CollectiveOptions opt = {},
                        Token&& token = use_future) {
  const std::string one(axis);
  return collective_permute<T>(mesh, std::span<const std::string>(&one, 1), in, out, pairs, std::move(opt),
                               std::forward<Token>(token));
}

/// `collective_permute` over the axes in braces.
template <class T, class Token = const use_future_t&>
auto collective_permute(const Mesh& mesh, std::initializer_list<std::string> axes,
                        std::span<const AnyArray<std::type_identity_t<T>>> in, std::span<AnyArray<T>> out,
                        const PermutePairs& pairs, CollectiveOptions opt = {}, Token&& token = use_future) {
  return collective_permute<T>(mesh, std::span<const std::string>(axes.begin(), axes.size()), in, out, pairs,
                               std::move(opt), std::forward<Token>(token));
}

// ---- on windows ------------------------------------------------------------------------------------

/// `all_to_all` and `collective_permute` on windows (`xdev::slice`; a whole array converts to a
/// window of all of it): one contiguous window per mesh device for `in` and for `out`, with the
/// shapes of the array forms. An output window that shares elements with its device's input is
/// refused.
template <class T, class Token = const use_future_t&>
auto all_to_all(const Mesh& mesh, std::span<const std::string> axes,
                std::span<const AnyArrayView<std::type_identity_t<T>>> in, std::span<AnyArrayView<T>> out,
                std::int64_t split_axis, std::int64_t concat_axis, CollectiveOptions opt = {},
                Token&& token = use_future) {
  constexpr const char* name = "all_to_all";
  return detail::start<T>(
      name,
      detail::all_to_all_plan<T>(mesh, axes, in, std::span<const AnyArrayView<T>>(out.data(), out.size()), split_axis,
                                 concat_axis),
      opt, in[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto collective_permute(const Mesh& mesh, std::span<const std::string> axes,
                        std::span<const AnyArrayView<std::type_identity_t<T>>> in, std::span<AnyArrayView<T>> out,
                        const PermutePairs& pairs, CollectiveOptions opt = {}, Token&& token = use_future) {
  constexpr const char* name = "collective_permute";
  return detail::start<T>(
      name, detail::permute_plan<T>(mesh, axes, in, std::span<const AnyArrayView<T>>(out.data(), out.size()), pairs),
      opt, in[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto all_to_all(const Mesh& mesh, std::string_view axis, std::span<const AnyArrayView<std::type_identity_t<T>>> in,
                std::span<AnyArrayView<T>> out, std::int64_t split_axis, std::int64_t concat_axis,
                CollectiveOptions opt = {}, Token&& token = use_future) {
  const std::string one(axis);
  return all_to_all<T>(mesh, std::span<const std::string>(&one, 1), in, out, split_axis, concat_axis, std::move(opt),
                       std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto all_to_all(const Mesh& mesh, std::initializer_list<std::string> axes,
                std::span<const AnyArrayView<std::type_identity_t<T>>> in, std::span<AnyArrayView<T>> out,
                std::int64_t split_axis, std::int64_t concat_axis, CollectiveOptions opt = {},
                Token&& token = use_future) {
  return all_to_all<T>(mesh, std::span<const std::string>(axes.begin(), axes.size()), in, out, split_axis, concat_axis,
                       std::move(opt), std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto collective_permute(const Mesh& mesh, std::string_view axis,
                        std::span<const AnyArrayView<std::type_identity_t<T>>> in, std::span<AnyArrayView<T>> out,
                        const PermutePairs& pairs, CollectiveOptions opt = {}, Token&& token = use_future) {
  const std::string one(axis);
  return collective_permute<T>(mesh, std::span<const std::string>(&one, 1), in, out, pairs, std::move(opt),
                               std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto collective_permute(const Mesh& mesh, std::initializer_list<std::string> axes,
                        std::span<const AnyArrayView<std::type_identity_t<T>>> in, std::span<AnyArrayView<T>> out,
                        const PermutePairs& pairs, CollectiveOptions opt = {}, Token&& token = use_future) {
  return collective_permute<T>(mesh, std::span<const std::string>(axes.begin(), axes.size()), in, out, pairs,
                               std::move(opt), std::forward<Token>(token));
}

}  // namespace xdev::spmd
