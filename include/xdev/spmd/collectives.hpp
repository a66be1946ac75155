/// \file
/// Asynchronous collectives over the axes of an `xdev::spmd::Mesh`: `all_reduce`, `all_gather`,
/// `reduce_scatter`, `broadcast` and `reduce` (`all_to_all` and `collective_permute` are in
/// <xdev/spmd/exchange.hpp>; `ReduceOp` and `CollectiveOptions` in
/// <xdev/spmd/collective_options.hpp>).
///
///     xdev::spmd::Mesh mesh(devices, {2, 2}, {"data", "model"});
///     std::vector<xdev::AnyArray<float>> grads = ...;        // grads[i] on mesh.device(i)
///     xdev::spmd::all_reduce(mesh, "data", std::span(grads), xdev::spmd::ReduceOp::mean).get();
///
/// **Groups.** A collective over `axis` runs independently in every group of
/// `mesh.groups(axis)`: the devices that agree on every other axis, ordered by their coordinate
/// on `axis`. `arrays[i]` belongs to `mesh.device(i)` (one per mesh device, in mesh order). The
/// overloads taking `std::span<const std::string> axes` do the same over several axes at once
/// (the group is ordered row-major over `axes`, in the order given).
///
/// **Asynchrony.** Every call validates its arguments, throwing `xdev::error`
/// `errc::invalid_argument` before anything is submitted, and returns at once (it never blocks,
/// not even when a device's in-flight bound is reached: its work then waits in the device's queue).
/// The outcome arrives through the completion token, with signature `void(std::exception_ptr)`:
/// `xdev::use_future` (the default, an `xdev::Future<void>`), a callback, `asio::use_awaitable`,
/// `asio::deferred` (nothing starts until the deferred operation is invoked), `asio::detached`.
/// An error nobody receives (a dropped future, a detached token) is kept on `mesh.device(0)` and
/// raised by its `synchronize()`. The collective's work runs on each device's default stream,
/// after the work submitted there before the call. Its later steps are submitted as the data
/// they need arrives, so work submitted to a device after the call is *not* ordered after the
/// collective: use the arrays only once it has completed, and never make a device's default
/// stream wait for the collective (its remaining steps would queue behind that wait until the
/// deadline).
///
/// **Algorithms.** `CollectiveAlgorithm::ring` (k devices in a group, n elements per array):
/// - `all_reduce`: ring reduce-scatter, then ring all-gather, in place. The array is cut into k
///   chunks whose lengths differ by at most one; in each of k-1 steps every device receives one
///   chunk from its ring predecessor and combines it with its own, after which device r holds
///   the reduced chunk r (scaled by 1/k for `mean`); k-1 more steps pass the reduced chunks
///   around. Each device receives `2n - len(r-1) - len(r)` elements (about 2(k-1)/k of the
///   array), which is optimal; every chunk is reduced once, so all devices get identical bits.
/// - `reduce_scatter`: the first half of the above, reading the (read-only) inputs; each device
///   receives (k-1) blocks.
/// - `all_gather`: k-1 steps, each passing one block on to the ring successor.
/// - `broadcast`: a pipelined chain from the root, the array cut into k chunks.
///
/// `CollectiveAlgorithm::direct`: every device copies what it needs straight from every peer
/// ((k-1) whole arrays for `all_reduce`, their blocks for `reduce_scatter`, the root's array for
/// `broadcast`) and combines them locally in group order: fewer, larger steps, for small arrays.
/// `CollectiveAlgorithm::shared_memory`, when every device's memory is host memory
/// (`AnyDevice::host_accessible()`: host devices, plugins that say so): one step per device,
/// after every member of its group has arrived, reading and writing the members' arrays
/// directly. `all_reduce`: device r reduces chunk r (as in the ring) of every array, block by
/// block in group order, and writes the result into chunk r of every array: each array is read
/// once and written once, in place, and all devices get identical bits. `reduce_scatter`: device
/// r reduces block r of every input into its output; `all_gather`: r copies every input into
/// its output; `broadcast`: r copies the root's array. No temporaries. A step that touches at
/// most 128 KiB runs at once on the thread that finds it ready (on idle devices a small
/// collective is complete when the call returns; its handler still runs later, as Asio's rule
/// says); larger steps run as host tasks on each device's default stream, in parallel.
/// `TransferStats` count what each device writes into another's memory (or reads from it, for
/// `all_gather`, `reduce_scatter` and `broadcast`) as a copy between them.
///
/// `automatic` picks shared memory when every array is in host memory; otherwise direct when an
/// array (the input, for `all_gather` and `reduce_scatter`) has at most
/// `CollectiveOptions::direct_threshold_bytes`, else ring.
///
/// Combining (ring and direct) runs on the device: `ops::combine` (the backend's `add`, `minimum`, `maximum`) and,
/// for `mean`, `ops::scale` on per-device temporary chunk arrays, filled and emptied by region
/// copies. For element types no backend member takes (integers, f16, bf16, bool), the same ops
/// run their CPU fallback (the chunk is copied to the host, combined by the CPU kernels, and
/// copied back; metrics `fallback.add`, `fallback.maximum`, ...), so integer results are exact. Temporaries per device:
/// ring `all_reduce` two chunks of each length (about 2n/k elements), ring `reduce_scatter` k
/// blocks, direct `all_reduce` k arrays, direct `reduce_scatter` k blocks; `all_gather` and
/// `broadcast` need none. They are freed before a successful collective completes.
///
/// **Driver.** Each device runs a program of steps on its default stream. Step 0 (*arrival*) is
/// an empty operation: it completes when the device's earlier work has. A later step starts once
/// the steps it reads from have completed on other devices (in a ring, step s of device r needs
/// step s-1 of device r-1). No thread ever waits for a device: the completion of each operation
/// records itself in the collective's shared state and submits the steps that became ready
/// (submissions from a completion handler never block). One thread at a time does that
/// submitting, so each device's steps reach its stream in order. Because a step is submitted
/// only once everything it reads is ready (and its device has arrived), nothing queued on a
/// stream ever waits for another device: collectives started in different orders on
/// overlapping meshes cannot deadlock one another, and a device that never arrives holds up
/// only the steps that need its data.
///
/// **Deadline and errors.** Every collective has a deadline (`CollectiveOptions::timeout`, else
/// `default_collective_timeout()`), kept by one process-wide timer thread that spmd starts on
/// first use and joins at exit. If the collective has not completed by then, it completes with
/// `errc::deadline_exceeded`, naming the devices whose work had not completed ("all_reduce over
/// axis 'data' did not complete within 200 ms: HOST:2 did not arrive (step 0 of 6); waiting for
/// them: ..."). The first error of any step (`out_of_memory` for a temporary, a failed copy or
/// op) completes it at once with that error. Either way no further step is started, but work
/// already queued still runs when its device gets to it: **until every device of the mesh has
/// been synchronized, the collective's arrays may still be read and written** (in particular
/// those of the devices the message names), so synchronize before reusing or freeing them. A
/// device that did not arrive has nothing but the empty arrival queued. The shared state, with
/// its temporaries, lives until the last queued operation has finished.
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
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::spmd {

namespace detail {

// The plan of a collective in place (all_reduce, broadcast, reduce) over whole arrays or windows:
// `op` for the reductions, `root` for broadcast and reduce.
template <class T, class A>
CollectivePlan in_place_plan(const char* name, CollectiveKind kind, const Mesh& mesh, std::span<const std::string> axes,
                             std::span<const A> arrays, std::optional<ReduceOp> op, std::optional<std::int64_t> root) {
  CollectivePlan plan;
  plan.kind = kind;
  if (op) {
    plan.combine = combine_of<T>(name, *op);
    plan.mean = *op == ReduceOp::mean;
  }
  plan.groups = groups_of(name, mesh, axes);
  plan.in = check_arrays<T>(name, "arrays", mesh, arrays);
  check_same_shapes<T>(name, "arrays", plan.groups, arrays);
  if (root) plan.root = root_of(name, axes, plan.groups, *root);
  return plan;
}

// The plan of an all_gather of arrays or windows.
template <class T, class In, class Out>
CollectivePlan gather_plan(const Mesh& mesh, std::span<const std::string> axes, std::span<const In> in,
                           std::span<const Out> out) {
  constexpr const char* name = "all_gather";
  CollectivePlan plan;
  plan.kind = CollectiveKind::all_gather;
  plan.groups = groups_of(name, mesh, axes);
  plan.in = check_arrays<T>(name, "in", mesh, in);
  plan.out = check_arrays<T>(name, "out", mesh, out);
  check_same_shapes<T>(name, "in", plan.groups, in);
  for (const auto& g : plan.groups) {
    const Shape& s = in[g[0]].shape();
    if (s.rank() == 0)
      invalid(name, "in[" + std::to_string(g[0]) +
                        "] is a scalar (shape []); all_gather concatenates along "
                        "dimension 0, so the arrays need rank >= 1");
    Shape want = s;
    want[0] = s[0] * static_cast<Shape::value_type>(g.size());
    for (auto i : g)
      if (out[i].shape() != want)
        invalid(name, "out[" + std::to_string(i) + "] on " + out[i].device().name() + " has shape " +
                          to_string(out[i].shape()) + " but gathering " + std::to_string(g.size()) +
                          " inputs of shape " + to_string(s) + " gives " + to_string(want));
  }
  check_apart(name, plan, is_window_v<In> || is_window_v<Out>);
  return plan;
}

// The plan of a reduce_scatter of arrays or windows.
template <class T, class In, class Out>
CollectivePlan scatter_plan(const Mesh& mesh, std::span<const std::string> axes, std::span<const In> in,
                            std::span<const Out> out, ReduceOp op) {
  constexpr const char* name = "reduce_scatter";
  CollectivePlan plan;
  plan.kind = CollectiveKind::reduce_scatter;
  plan.combine = combine_of<T>(name, op);
  plan.mean = op == ReduceOp::mean;
  plan.groups = groups_of(name, mesh, axes);
  plan.in = check_arrays<T>(name, "in", mesh, in);
  plan.out = check_arrays<T>(name, "out", mesh, out);
  check_same_shapes<T>(name, "in", plan.groups, in);
  for (const auto& g : plan.groups) {
    const Shape& s = in[g[0]].shape();
    const auto k = static_cast<Shape::value_type>(g.size());
    if (s.rank() == 0)
      invalid(name, "in[" + std::to_string(g[0]) +
                        "] is a scalar (shape []); reduce_scatter splits "
                        "dimension 0, so the arrays need rank >= 1");
    if (s[0] % k != 0)
      invalid(name, "in[" + std::to_string(g[0]) + "] has shape " + to_string(s) + ", whose dimension 0 (" +
                        std::to_string(s[0]) + ") is not divisible by the " + std::to_string(k) +
                        " devices of its group");
    Shape want = s;
    want[0] = s[0] / k;
    for (auto i : g)
      if (out[i].shape() != want)
        invalid(name, "out[" + std::to_string(i) + "] on " + out[i].device().name() + " has shape " +
                          to_string(out[i].shape()) + " but scattering " + to_string(s) + " over " + std::to_string(k) +
                          " devices gives blocks of shape " + to_string(want));
  }
  if (is_window_v<In> || is_window_v<Out>) check_apart(name, plan, true);
  return plan;
}
}  // namespace detail

// ---- all_reduce ------------------------------------------------------------------------------------

/// Reduces the arrays of every group of `mesh.groups(axes)` element-wise with `op`, leaving the
/// result in every array of the group (in place). `arrays[i]` is on `mesh.device(i)`; the arrays
/// of a group have the same shape. Completes with `void(std::exception_ptr)`.
///
///     std::vector<std::string> axes{"data", "model"};
///     all_reduce(mesh, std::span<const std::string>(axes), std::span(grads), ReduceOp::sum).get();
///
/// \throws xdev::error `errc::invalid_argument`, before anything is submitted, naming the problem:
///         not one array per mesh device, an array empty or on another device, shapes that differ
///         in a group, an unknown axis, `mean` on non-floating-point elements, a timeout <= 0,
///         `shared_memory` with a device whose memory is not host memory.
/// Through the token: `errc::deadline_exceeded` naming the devices that did not complete, or the
/// first error of the work (`out_of_memory` for a temporary, ...). Either way the arrays may
/// still be written until the mesh's devices are synchronized (see the file comment).
template <class T, class Token = const use_future_t&>
auto all_reduce(const Mesh& mesh, std::span<const std::string> axes, std::span<AnyArray<T>> arrays, ReduceOp op,
                CollectiveOptions opt = {}, Token&& token = use_future) {
  static_assert(HasDType<T>, "xdev::spmd::all_reduce: the element type must have an xdev::DType");
  constexpr const char* name = "all_reduce";
  return detail::start<T>(
      name,
      detail::in_place_plan<T>(name, detail::CollectiveKind::all_reduce, mesh, axes,
                               std::span<const AnyArray<T>>(arrays.data(), arrays.size()), op, std::nullopt),
      opt, arrays[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}

/// `all_reduce` over one axis: `all_reduce(mesh, "data", std::span(grads), ReduceOp::mean)`.
template <class T, class Token = const use_future_t&>
auto all_reduce(const Mesh& mesh, std::string_view axis, std::span<AnyArray<T>> arrays, ReduceOp op,
                CollectiveOptions opt = {}, Token&& token = use_future) {
  const std::string one(axis);
  return all_reduce(mesh, std::span<const std::string>(&one, 1), arrays, op, std::move(opt),
                    std::forward<Token>(token));
}

/// `all_reduce` over the axes in braces: `all_reduce(mesh, {"data", "model"}, std::span(a), op)`.
/// (Without this overload the braces would reach the `string_view` one through its two-pointer
/// constructor.)
template <class T, class Token = const use_future_t&>
auto all_reduce(const Mesh& mesh, std::initializer_list<std::string> axes, std::span<AnyArray<T>> arrays, ReduceOp op,
                CollectiveOptions opt = {}, Token&& token = use_future) {
  return all_reduce(mesh, std::span<const std::string>(axes.begin(), axes.size()), arrays, op, std::move(opt),
                    std::forward<Token>(token));
}

// ---- all_gather ------------------------------------------------------------------------------------

/// Concatenates the inputs of every group along dimension 0, in group order, into every member's
/// output: with inputs of shape `[d0, d1, ...]` in a group of k devices, `out[i]` has shape
/// `[k * d0, d1, ...]` and its block q (rows `q*d0 ..`) is the input of the group's q-th device.
/// Completes with `void(std::exception_ptr)`.
///
///     std::vector<xdev::AnyArray<float>> in = ..., out = ...;   // in[i] [4, 8], out[i] [4 * k, 8]
///     all_gather(mesh, "data", in, std::span(out)).get();
///
/// \throws xdev::error `errc::invalid_argument` as `all_reduce`, and for inputs of rank 0, an output
///         whose shape is not `[k * d0, d1, ...]`, an output that is its input.
/// Errors through the token as `all_reduce`.
template <class T, class Token = const use_future_t&>
auto all_gather(const Mesh& mesh, std::span<const std::string> axes,
                std::span<const AnyArray<std::type_identity_t<T>>> in, std::span<AnyArray<T>> out,
                CollectiveOptions opt = {}, Token&& token = use_future) {
  constexpr const char* name = "all_gather";
  return detail::start<T>(name,
                          detail::gather_plan<T>(mesh, axes, in, std::span<const AnyArray<T>>(out.data(), out.size())),
                          opt, in[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}

/// `all_gather` over one axis.
template <class T, class Token = const use_future_t&>
auto all_gather(const Mesh& mesh, std::string_view axis, std::span<const AnyArray<std::type_identity_t<T>>> in,
                std::span<AnyArray<T>> out, CollectiveOptions opt = {}, Token&& token = use_future) {
  const std::string one(axis);
  return all_gather<T>(mesh, std::span<const std::string>(&one, 1), in, out, std::move(opt),
                       std::forward<Token>(token));
}

/// `all_gather` over the axes in braces: `all_gather(mesh, {"data", "model"}, in, std::span(out))`.
template <class T, class Token = const use_future_t&>
auto all_gather(const Mesh& mesh, std::initializer_list<std::string> axes,
                std::span<const AnyArray<std::type_identity_t<T>>> in, std::span<AnyArray<T>> out,
                CollectiveOptions opt = {}, Token&& token = use_future) {
  return all_gather<T>(mesh, std::span<const std::string>(axes.begin(), axes.size()), in, out, std::move(opt),
                       std::forward<Token>(token));
}

// ---- reduce_scatter --------------------------------------------------------------------------------

/// Reduces the inputs of every group element-wise with `op` and leaves block r of the result in
/// the output of the group's r-th device: with inputs of shape `[k * d0, d1, ...]`, `out[i]` has
/// shape `[d0, d1, ...]` and holds rows `r*d0 .. (r+1)*d0` of the reduction, r being i's position
/// in its group (its coordinate on a single axis). Completes with `void(std::exception_ptr)`.
///
///     all_reduce(...) == all_gather(reduce_scatter(...))   // the identity this implements
///     reduce_scatter(mesh, "data", in, std::span(out), ReduceOp::sum).get();
///
/// \throws xdev::error `errc::invalid_argument` as `all_reduce`, and for inputs of rank 0 or
///         whose dimension 0 is not divisible by k, an output whose shape is not `[d0, d1, ...]`.
/// Errors through the token as `all_reduce`.
template <class T, class Token = const use_future_t&>
auto reduce_scatter(const Mesh& mesh, std::span<const std::string> axes,
                    std::span<const AnyArray<std::type_identity_t<T>>> in, std::span<AnyArray<T>> out, ReduceOp op,
                    CollectiveOptions opt = {}, Token&& token = use_future) {
  static_assert(HasDType<T>, "xdev::spmd::reduce_scatter: the element type must have an xdev::DType");
  constexpr const char* name = "reduce_scatter";
  return detail::start<T>(
      name, detail::scatter_plan<T>(mesh, axes, in, std::span<const AnyArray<T>>(out.data(), out.size()), op), opt,
      in[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}

/// `reduce_scatter` over one axis.
template <class T, class Token = const use_future_t&>
auto reduce_scatter(const Mesh& mesh, std::string_view axis, std::span<const AnyArray<std::type_identity_t<T>>> in,
                    std::span<AnyArray<T>> out, ReduceOp op, CollectiveOptions opt = {}, Token&& token = use_future) {
  const std::string one(axis);
  return reduce_scatter<T>(mesh, std::span<const std::string>(&one, 1), in, out, op, std::move(opt),
                           std::forward<Token>(token));
}

/// `reduce_scatter` over the axes in braces.
template <class T, class Token = const use_future_t&>
auto reduce_scatter(const Mesh& mesh, std::initializer_list<std::string> axes,
                    std::span<const AnyArray<std::type_identity_t<T>>> in, std::span<AnyArray<T>> out, ReduceOp op,
                    CollectiveOptions opt = {}, Token&& token = use_future) {
  return reduce_scatter<T>(mesh, std::span<const std::string>(axes.begin(), axes.size()), in, out, op, std::move(opt),
                           std::forward<Token>(token));
}

// ---- broadcast -------------------------------------------------------------------------------------

/// Copies the array of each group's device at position `root` (its coordinate on a single axis;
/// row-major over `axes` for several) into every other array of the group. Completes with
/// `void(std::exception_ptr)`.
///
///     broadcast(mesh, "data", std::span(params), 0).get();   // every replica gets replica 0's
///
/// \throws xdev::error `errc::invalid_argument` as `all_reduce`, and for a root outside [0, k).
/// Errors through the token as `all_reduce`.
template <class T, class Token = const use_future_t&>
auto broadcast(const Mesh& mesh, std::span<const std::string> axes, std::span<AnyArray<T>> arrays, std::int64_t root,
               CollectiveOptions opt = {}, Token&& token = use_future) {
  constexpr const char* name = "broadcast";
  return detail::start<T>(
      name,
      detail::in_place_plan<T>(name, detail::CollectiveKind::broadcast, mesh, axes,
                               std::span<const AnyArray<T>>(arrays.data(), arrays.size()), std::nullopt, root),
      opt, arrays[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}

/// `broadcast` over one axis.
template <class T, class Token = const use_future_t&>
auto broadcast(const Mesh& mesh, std::string_view axis, std::span<AnyArray<T>> arrays, std::int64_t root,
               CollectiveOptions opt = {}, Token&& token = use_future) {
  const std::string one(axis);
  return broadcast(mesh, std::span<const std::string>(&one, 1), arrays, root, std::move(opt),
                   std::forward<Token>(token));
}

/// `broadcast` over the axes in braces.
template <class T, class Token = const use_future_t&>
auto broadcast(const Mesh& mesh, std::initializer_list<std::string> axes, std::span<AnyArray<T>> arrays,
               std::int64_t root, CollectiveOptions opt = {}, Token&& token = use_future) {
  return broadcast(mesh, std::span<const std::string>(axes.begin(), axes.size()), arrays, root, std::move(opt),
                   std::forward<Token>(token));
}

// ---- reduce ----------------------------------------------------------------------------------------

/// Reduces the arrays of every group element-wise with `op` into the array of the group's device
/// at position `root` (its coordinate on a single axis; row-major over `axes` for several); the
/// other arrays are read, not changed. Completes with `void(std::exception_ptr)`.
///
///     reduce(mesh, "data", std::span(losses), ReduceOp::sum, 0).get();   // the sum on replica 0
///
/// Shared memory: device r reduces chunk r into the root's array. Ring and direct (devices whose
/// memory is not host memory): the root copies every member's array and combines them in group
/// order (k temporary arrays on the root).
/// \throws xdev::error `errc::invalid_argument` as `all_reduce`, and for a root outside [0, k).
/// Errors through the token as `all_reduce`.
template <class T, class Token = const use_future_t&>
auto reduce(const Mesh& mesh, std::span<const std::string> axes, std::span<AnyArray<T>> arrays, ReduceOp op,
            std::int64_t root, CollectiveOptions opt = {}, Token&& token = use_future) {
  static_assert(HasDType<T>, "xdev::spmd::reduce: the element type must have an xdev::DType");
  constexpr const char* name = "reduce";
  return detail::start<T>(
      name,
      detail::in_place_plan<T>(name, detail::CollectiveKind::reduce, mesh, axes,
                               std::span<const AnyArray<T>>(arrays.data(), arrays.size()), op, root),
      opt, arrays[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}

/// `reduce` over one axis.
template <class T, class Token = const use_future_t&>
auto reduce(const Mesh& mesh, std::string_view axis, std::span<AnyArray<T>> arrays, ReduceOp op, std::int64_t root,
            CollectiveOptions opt = {}, Token&& token = use_future) {
  const std::string one(axis);
  return reduce(mesh, std::span<const std::string>(&one, 1), arrays, op, root, std::move(opt),
                std::forward<Token>(token));
}

/// `reduce` over the axes in braces.
template <class T, class Token = const use_future_t&>
auto reduce(const Mesh& mesh, std::initializer_list<std::string> axes, std::span<AnyArray<T>> arrays, ReduceOp op,
            std::int64_t root, CollectiveOptions opt = {}, Token&& token = use_future) {
  return reduce(mesh, std::span<const std::string>(axes.begin(), axes.size()), arrays, op, root, std::move(opt),
                std::forward<Token>(token));
}

// ---- in place on windows ---------------------------------------------------------------------------

/// `all_reduce`, `broadcast` and `reduce` in place on windows of the arrays (`xdev::slice`): one
/// contiguous window per mesh device (whole rows of a row-major array, or any range of a 1-D
/// one), the windows of a group of one shape. The collective reads and writes the window only:
/// the rest of each array is left as it was, and no copy of the array is made. A bucket of a flat
/// gradient buffer, reduced while the next bucket is still being computed:
///
///     std::vector<AnyArrayView<float>> bucket;
///     for (auto& g : grads) bucket.push_back(xdev::slice(g, {0, 4096}));
///     all_reduce(mesh, "data", std::span(bucket), ReduceOp::sum).get();
///
/// \throws xdev::error `errc::invalid_argument` as for whole arrays, and for a window in several
///         runs (a column block): copy it into an array of its own first.
template <class T, class Token = const use_future_t&>
auto all_reduce(const Mesh& mesh, std::span<const std::string> axes, std::span<AnyArrayView<T>> windows, ReduceOp op,
                CollectiveOptions opt = {}, Token&& token = use_future) {
  static_assert(HasDType<T>, "xdev::spmd::all_reduce: the element type must have an xdev::DType");
  constexpr const char* name = "all_reduce";
  return detail::start<T>(
      name,
      detail::in_place_plan<T>(name, detail::CollectiveKind::all_reduce, mesh, axes,
                               std::span<const AnyArrayView<T>>(windows.data(), windows.size()), op, std::nullopt),
      opt, windows[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto broadcast(const Mesh& mesh, std::span<const std::string> axes, std::span<AnyArrayView<T>> windows,
               std::int64_t root, CollectiveOptions opt = {}, Token&& token = use_future) {
  constexpr const char* name = "broadcast";
  return detail::start<T>(
      name,
      detail::in_place_plan<T>(name, detail::CollectiveKind::broadcast, mesh, axes,
                               std::span<const AnyArrayView<T>>(windows.data(), windows.size()), std::nullopt, root),
      opt, windows[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto reduce(const Mesh& mesh, std::span<const std::string> axes, std::span<AnyArrayView<T>> windows, ReduceOp op,
            std::int64_t root, CollectiveOptions opt = {}, Token&& token = use_future) {
  static_assert(HasDType<T>, "xdev::spmd::reduce: the element type must have an xdev::DType");
  constexpr const char* name = "reduce";
  return detail::start<T>(
      name,
      detail::in_place_plan<T>(name, detail::CollectiveKind::reduce, mesh, axes,
                               std::span<const AnyArrayView<T>>(windows.data(), windows.size()), op, root),
      opt, windows[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}

/// The same over one axis, and over the axes in braces.
template <class T, class Token = const use_future_t&>
auto all_reduce(const Mesh& mesh, std::string_view axis, std::span<AnyArrayView<T>> windows, ReduceOp op,
                CollectiveOptions opt = {}, Token&& token = use_future) {
  const std::string one(axis);
  return all_reduce(mesh, std::span<const std::string>(&one, 1), windows, op, std::move(opt),
                    std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto all_reduce(const Mesh& mesh, std::initializer_list<std::string> axes, std::span<AnyArrayView<T>> windows,
                ReduceOp op, CollectiveOptions opt = {}, Token&& token = use_future) {
  return all_reduce(mesh, std::span<const std::string>(axes.begin(), axes.size()), windows, op, std::move(opt),
                    std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto broadcast(const Mesh& mesh, std::string_view axis, std::span<AnyArrayView<T>> windows, std::int64_t root,
               CollectiveOptions opt = {}, Token&& token = use_future) {
  const std::string one(axis);
  return broadcast(mesh, std::span<const std::string>(&one, 1), windows, root, std::move(opt),
                   std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto broadcast(const Mesh& mesh, std::initializer_list<std::string> axes, std::span<AnyArrayView<T>> windows,
               std::int64_t root, CollectiveOptions opt = {}, Token&& token = use_future) {
  return broadcast(mesh, std::span<const std::string>(axes.begin(), axes.size()), windows, root, std::move(opt),
                   std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto reduce(const Mesh& mesh, std::string_view axis, std::span<AnyArrayView<T>> windows, ReduceOp op, std::int64_t root,
            CollectiveOptions opt = {}, Token&& token = use_future) {
  const std::string one(axis);
  return reduce(mesh, std::span<const std::string>(&one, 1), windows, op, root, std::move(opt),
                std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto reduce(const Mesh& mesh, std::initializer_list<std::string> axes, std::span<AnyArrayView<T>> windows, ReduceOp op,
            std::int64_t root, CollectiveOptions opt = {}, Token&& token = use_future) {
  return reduce(mesh, std::span<const std::string>(axes.begin(), axes.size()), windows, op, root, std::move(opt),
                std::forward<Token>(token));
}

/// `all_gather` and `reduce_scatter` on windows (`xdev::slice`; a whole array converts to a
/// window of all of it): one contiguous window per mesh device for `in` and for `out`, with the
/// shapes of the array forms, so a shard can be gathered straight into its rows of a flat
/// parameter buffer. A window that shares elements with its device's input is refused.
///
///     std::vector<AnyArrayView<float>> shards(params.begin(), params.end());   // whole arrays
///     std::vector<AnyArrayView<float>> rows;
///     for (auto& f : flat) rows.push_back(xdev::slice(f, {0, 4 * 1024}));
///     all_gather(mesh, "data", std::span<const AnyArrayView<float>>(shards), std::span(rows)).get();
template <class T, class Token = const use_future_t&>
auto all_gather(const Mesh& mesh, std::span<const std::string> axes,
                std::span<const AnyArrayView<std::type_identity_t<T>>> in, std::span<AnyArrayView<T>> out,
                CollectiveOptions opt = {}, Token&& token = use_future) {
  constexpr const char* name = "all_gather";
  return detail::start<T>(
      name, detail::gather_plan<T>(mesh, axes, in, std::span<const AnyArrayView<T>>(out.data(), out.size())), opt,
      in[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto reduce_scatter(const Mesh& mesh, std::span<const std::string> axes,
                    std::span<const AnyArrayView<std::type_identity_t<T>>> in, std::span<AnyArrayView<T>> out,
                    ReduceOp op, CollectiveOptions opt = {}, Token&& token = use_future) {
  static_assert(HasDType<T>, "xdev::spmd::reduce_scatter: the element type must have an xdev::DType");
  constexpr const char* name = "reduce_scatter";
  return detail::start<T>(
      name, detail::scatter_plan<T>(mesh, axes, in, std::span<const AnyArrayView<T>>(out.data(), out.size()), op), opt,
      in[0].size() * sizeof(T), axes, mesh, std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto all_gather(const Mesh& mesh, std::string_view axis, std::span<const AnyArrayView<std::type_identity_t<T>>> in,
                std::span<AnyArrayView<T>> out, CollectiveOptions opt = {}, Token&& token = use_future) {
  const std::string one(axis);
  return all_gather<T>(mesh, std::span<const std::string>(&one, 1), in, out, std::move(opt),
                       std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto all_gather(const Mesh& mesh, std::initializer_list<std::string> axes,
                std::span<const AnyArrayView<std::type_identity_t<T>>> in, std::span<AnyArrayView<T>> out,
                CollectiveOptions opt = {}, Token&& token = use_future) {
  return all_gather<T>(mesh, std::span<const std::string>(axes.begin(), axes.size()), in, out, std::move(opt),
                       std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto reduce_scatter(const Mesh& mesh, std::string_view axis, std::span<const AnyArrayView<std::type_identity_t<T>>> in,
                    std::span<AnyArrayView<T>> out, ReduceOp op, CollectiveOptions opt = {},
                    Token&& token = use_future) {
  const std::string one(axis);
  return reduce_scatter<T>(mesh, std::span<const std::string>(&one, 1), in, out, op, std::move(opt),
                           std::forward<Token>(token));
}
template <class T, class Token = const use_future_t&>
auto reduce_scatter(const Mesh& mesh, std::initializer_list<std::string> axes,
                    std::span<const AnyArrayView<std::type_identity_t<T>>> in, std::span<AnyArrayView<T>> out,
                    ReduceOp op, CollectiveOptions opt = {}, Token&& token = use_future) {
  return reduce_scatter<T>(mesh, std::span<const std::string>(axes.begin(), axes.size()), in, out, op, std::move(opt),
                           std::forward<Token>(token));
}

}  // namespace xdev::spmd
