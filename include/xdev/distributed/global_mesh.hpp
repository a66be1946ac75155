/// \file
/// `xdev::distributed::GlobalMesh`: a mesh of devices (one axis or several) spanning the processes
/// of an MPI job, and the collectives of device arrays across it (`all_reduce`, `all_gather`,
/// `reduce_scatter`, `broadcast`, `reduce`, `all_to_all`, `collective_permute`). Link `xdev::mpi`. See
/// docs/distributed.md. The collectives over some of the axes of a mesh of several axes are in
/// <xdev/distributed/axis_collectives.hpp>.
///
///     xdev::distributed::Session session = xdev::distributed::init();
///     xdev::distributed::GlobalMesh mesh(xdev::spmd::Mesh(xdev::accelerator::devices(), "data"));
///     std::cout << mesh;      // GlobalMesh(data=4 over 2 processes: rank 0 / HOST:0, rank 0 / HOST:1, ...)
///     std::vector<xdev::AnyArray<float>> grads = ...;   // one per LOCAL device, same shape
///     xdev::distributed::all_reduce(mesh, std::span(grads), xdev::spmd::ReduceOp::mean).get();
///
/// **Global ids.** Every process contributes its local devices; the global index is rank-major
/// (rank 0's devices first, each rank's in its local mesh order), so it is the same on every
/// rank, and device `g` prints as `rank R / NAME` (`device_label(g)`).
///
/// **all_reduce** is hierarchical: the local arrays are reduced into local device 0's
/// (`spmd::reduce`, ReduceOp sum for `mean`), local device 0's result is reduced across the
/// processes by `Session::all_reduce` (the header of the call's terms to every peer, which names
/// a missing rank and checks the terms, polled to the deadline, then `MPI_Allreduce`, or above
/// 256 KiB `MPI_Iallreduce`)
/// — in place when its memory is host memory, else through a host copy — scaled by 1 / (global
/// device count) for `mean`, and copied to every other local device. The other collectives
/// likewise gather or combine the local arrays on the host, make one MPI call, and fan the result
/// out. All take the usual completion tokens: the stages run on the session's
/// collectives thread, so the caller goes on (`.get()` on the default future runs them on the
/// waiting thread instead when they have not started yet: `Session::post_awaited`).
///
/// **Arrays or windows.** Wherever a collective takes arrays (`std::span<AnyArray<T>>`, or
/// `std::span<const AnyArray<T>>` for inputs), it takes contiguous windows of them too
/// (`std::span<AnyArrayView<T>>`, `xdev::slice`: whole rows), and reads and writes only those; a
/// strided window, or an output window sharing elements with its device's input, is refused.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/tokens.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/core/error.hpp>
#include <xdev/distributed/detail/global_axes.hpp>
#include <xdev/distributed/detail/global_bodies.hpp>
#include <xdev/distributed/detail/global_exchange.hpp>
#include <xdev/distributed/detail/global_layout.hpp>
#include <xdev/distributed/detail/global_stages.hpp>
#include <xdev/distributed/mpi.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/exchange.hpp>
#include <xdev/spmd/mesh.hpp>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::distributed {

/// A mesh over the devices of every process of the job, built collectively (every rank must
/// construct it, in the same order as its other collectives). It has one axis over every global
/// device, or several (`shape` and `axis_names`) laid out row-major over the global order; a
/// collective over some of the axes runs within each group of devices that agree on the others.
/// Cheap to copy; it refers to the session, which must outlive it.
class GlobalMesh {
 public:
  /// Every rank contributes `local` (a one-axis `spmd::Mesh` of its devices; ranks may have
  /// different numbers of devices) and learns every other rank's devices (a `rendezvous`).
  /// \throws xdev::error `errc::invalid_argument` on every rank when a rank's mesh has more than
  ///         one axis or the ranks name the axis differently (naming the ranks);
  ///         `errc::deadline_exceeded` / `errc::unavailable` as `Session::rendezvous`.
  GlobalMesh(Session& session, spmd::Mesh local, std::optional<std::chrono::milliseconds> timeout = std::nullopt)
      : session_(&session) {
    std::string problem;
    if (local.empty())
      problem = "the local mesh has no devices";
    else if (local.ndim() != 1)
      problem = "the local mesh has " + std::to_string(local.ndim()) + " axes; a GlobalMesh takes one-axis meshes";
    auto layout =
        detail::meet(session, local, problem, local.empty() ? std::string() : local.axis_names()[0], {}, {}, timeout);
    adopt(std::move(local), std::move(layout));
  }

  /// The same, over the live session. \throws xdev::error `errc::unavailable` when there is none.
  explicit GlobalMesh(spmd::Mesh local, std::optional<std::chrono::milliseconds> timeout = std::nullopt)
      : GlobalMesh(detail::current_or_throw("GlobalMesh"), std::move(local), timeout) {}

  /// `devices` (this rank's) along an axis called `axis`.
  GlobalMesh(Session& session, const std::vector<AnyDevice>& devices, const std::string& axis = "data",
             std::optional<std::chrono::milliseconds> timeout = std::nullopt)
      : GlobalMesh(session, spmd::Mesh(devices, axis), timeout) {}

  /// A mesh of several axes (`jax.make_mesh(shape, axis_names)` over every process's devices):
  /// every rank contributes `devices` (its own, in order) and passes the same `shape` and
  /// `axis_names`, whose product must be the number of devices of every rank together. The global
  /// devices (rank-major) fill the shape in row-major order, so with `{world_size, k}` and
  /// `{"host", "local"}` axis "host" runs across the processes and "local" within each.
  ///
  ///     dist::GlobalMesh mesh(session, devices, {session.world_size(), 2}, {"host", "local"});
  ///     dist::all_reduce(mesh, {"host"}, std::span(grads), xdev::spmd::ReduceOp::sum).get();
  ///
  /// \throws xdev::error `errc::invalid_argument` on every rank, naming the problem and the ranks,
  ///         when `shape` and `axis_names` differ in length, an extent is < 1, a name is empty or
  ///         repeated, there are more than 8 axes, `devices` is empty, the product of `shape` is not
  ///         the global device count, or the ranks pass different shapes or names;
  ///         `errc::deadline_exceeded` / `errc::unavailable` as `Session::rendezvous`.
  GlobalMesh(Session& session, const std::vector<AnyDevice>& devices, std::vector<std::int64_t> shape,
             std::vector<std::string> axis_names, std::optional<std::chrono::milliseconds> timeout = std::nullopt)
      : session_(&session) {
    std::string problem = detail::layout_problem(devices, shape, axis_names);
    spmd::Mesh local;
    if (problem.empty()) local = spmd::Mesh(devices, "local");
    auto layout =
        detail::meet(session, local, problem, std::string(), std::move(shape), std::move(axis_names), timeout);
    adopt(std::move(local), std::move(layout));
  }

  // Copies share the layout (immutable once built), so that every asynchronous collective can keep
  // its own copy of the mesh for the price of a reference count. No move: a moved-from mesh stays
  // whole.
  GlobalMesh(const GlobalMesh&) = default;
  GlobalMesh& operator=(const GlobalMesh&) = default;
  ~GlobalMesh() = default;

  /// Number of devices of every rank together.
  [[nodiscard]] std::size_t size() const noexcept { return shared_->layout.labels.size(); }
  /// Number of this rank's devices.
  [[nodiscard]] std::size_t local_size() const noexcept { return shared_->local.size(); }
  /// This process's rank, and the number of processes.
  [[nodiscard]] std::uint32_t rank() const noexcept { return session_->rank(); }
  [[nodiscard]] std::uint32_t world_size() const noexcept { return session_->world_size(); }
  /// The name of a one-axis mesh's axis (the same on every rank).
  /// \throws xdev::error `errc::invalid_argument` for a mesh of several axes (see `axis_names`).
  [[nodiscard]] const std::string& axis_name() const {
    if (shared_->layout.names.size() != 1)
      throw error(errc::invalid_argument, "GlobalMesh::axis_name: the mesh has " +
                                              std::to_string(shared_->layout.names.size()) + " axes (" +
                                              describe_axes() + "); use axis_names()");
    return shared_->layout.names[0];
  }
  /// Every axis's name and extent, in axis order (a one-axis mesh: its axis, of extent `size()`).
  [[nodiscard]] const std::vector<std::string>& axis_names() const noexcept { return shared_->layout.names; }
  [[nodiscard]] const std::vector<std::int64_t>& shape() const noexcept { return shared_->layout.shape; }
  [[nodiscard]] std::size_t ndim() const noexcept { return shared_->layout.shape.size(); }
  /// Extent of axis `name`. \throws xdev::error `errc::invalid_argument` naming the mesh's axes.
  [[nodiscard]] std::int64_t axis_size(std::string_view name) const { return shared_->layout.shape[axis_index(name)]; }
  /// Coordinates of global device `g`, one per axis.
  /// \throws xdev::error `errc::invalid_argument` when `g >= size()`.
  [[nodiscard]] std::vector<std::int64_t> coords(std::size_t g) const {
    check_global(g);
    std::vector<std::int64_t> out(shared_->layout.shape.size());
    for (std::size_t a = shared_->layout.shape.size(); a-- > 0;) {
      out[a] = static_cast<std::int64_t>(g % static_cast<std::size_t>(shared_->layout.shape[a]));
      g /= static_cast<std::size_t>(shared_->layout.shape[a]);
    }
    return out;
  }
  /// This rank's devices, as the mesh it was built from (a mesh of several axes: one axis,
  /// "local", of this rank's devices in order).
  [[nodiscard]] const spmd::Mesh& local_mesh() const noexcept { return shared_->local; }
  /// The session it belongs to.
  [[nodiscard]] Session& session() const noexcept { return *session_; }

  /// Global index of this rank's local device `local` (rank-major).
  /// \throws xdev::error `errc::invalid_argument` when `local >= local_size()`.
  [[nodiscard]] std::size_t global_index(std::size_t local) const {
    if (local >= local_size())
      throw error(errc::invalid_argument, "GlobalMesh::global_index(" + std::to_string(local) + "): this rank has " +
                                              std::to_string(local_size()) + " devices");
    return shared_->layout.offsets[rank()] + local;
  }
  /// Global index of rank `r`'s first device, and its number of devices.
  /// \throws xdev::error `errc::invalid_argument` when `r >= world_size()`.
  [[nodiscard]] std::size_t first_index_of(std::uint32_t r) const { return shared_->layout.offsets.at(check_rank(r)); }
  [[nodiscard]] std::size_t size_of(std::uint32_t r) const {
    return shared_->layout.offsets.at(check_rank(r) + 1) - shared_->layout.offsets.at(r);
  }
  /// The rank that owns global device `g`.
  /// \throws xdev::error `errc::invalid_argument` when `g >= size()`.
  [[nodiscard]] std::uint32_t rank_of(std::size_t g) const {
    check_global(g);
    std::uint32_t r = 0;
    while (shared_->layout.offsets[r + 1] <= g) ++r;
    return r;
  }
  /// Global device `g` as "rank R / NAME", e.g. "rank 1 / HOST:0".
  /// \throws xdev::error `errc::invalid_argument` when `g >= size()`.
  [[nodiscard]] const std::string& device_label(std::size_t g) const { return shared_->layout.labels[check_global(g)]; }
  /// Every global device's label, in global order.
  [[nodiscard]] const std::vector<std::string>& device_labels() const noexcept { return shared_->layout.labels; }

  /// The positions of `axes`, in the order named, checked: at least one, every name an axis,
  /// none twice. \throws xdev::error `errc::invalid_argument` naming the problem, prefixed by `op`.
  [[nodiscard]] std::vector<std::size_t> axis_positions(const char* op, std::span<const std::string> axes) const {
    if (axes.empty())
      throw error(
          errc::invalid_argument,
          std::string(op) + ": no axis was given; name at least one of the mesh's axes (" + describe_axes() + ")");
    std::vector<std::size_t> out;
    for (const auto& name : axes) {
      std::size_t a = 0;
      try {
        a = axis_index(name);
      } catch (const error& e) {
        throw error(errc::invalid_argument, std::string(op) + ": " + e.what());
      }
      if (std::find(out.begin(), out.end(), a) != out.end())
        throw error(errc::invalid_argument, std::string(op) + ": axis '" + name + "' is named twice");
      out.push_back(a);
    }
    return out;
  }
  /// The groups and communicator of a set of axes of a mesh of several axes (null for a one-axis
  /// mesh): what the collectives over axes run on. An implementation detail.
  [[nodiscard]] const detail::AxisPlans::Plan* axes_plan(const std::vector<std::size_t>& positions) const {
    std::uint32_t mask = 0;
    for (auto a : positions) mask |= std::uint32_t{1} << a;
    return shared_->layout.plans ? &shared_->layout.plans->by_mask.at(mask) : nullptr;
  }

  /// "GlobalMesh(data=4 over 2 processes: rank 0 / HOST:0, rank 0 / HOST:1, rank 1 / HOST:0, rank 1 / HOST:1)";
  /// with several axes "GlobalMesh(host=2, local=2 over 2 processes: ...)".
  [[nodiscard]] std::string to_string() const {
    std::string out = "GlobalMesh(" + describe_axes() + " over " + std::to_string(world_size()) +
                      (world_size() == 1 ? " process: " : " processes: ");
    for (std::size_t g = 0; g < shared_->layout.labels.size(); ++g) out += (g ? ", " : "") + shared_->layout.labels[g];
    return out + ")";
  }
  friend std::ostream& operator<<(std::ostream& os, const GlobalMesh& m) { return os << m.to_string(); }

 private:
  std::size_t check_rank(std::uint32_t r) const {
    if (r >= world_size())
      throw error(errc::invalid_argument, "GlobalMesh: rank " + std::to_string(r) + " is not in the job of " +
                                              std::to_string(world_size()) + " processes");
    return r;
  }
  std::size_t check_global(std::size_t g) const {
    if (g >= size())
      throw error(errc::invalid_argument, "GlobalMesh: device " + std::to_string(g) + " is not in the mesh of " +
                                              std::to_string(size()) + " devices");
    return g;
  }

  void adopt(spmd::Mesh local, detail::GlobalLayout layout) {
    shared_ = std::make_shared<const Shared>(Shared{std::move(local), std::move(layout)});
  }
  std::size_t axis_index(std::string_view name) const {
    for (std::size_t a = 0; a < shared_->layout.names.size(); ++a)
      if (shared_->layout.names[a] == name) return a;
    throw error(errc::invalid_argument,
                "GlobalMesh has no axis '" + std::string(name) + "'; its axes are " + describe_axes());
  }
  std::string describe_axes() const {
    std::string out;
    for (std::size_t a = 0; a < shared_->layout.names.size(); ++a)
      out += (a ? ", " : "") + shared_->layout.names[a] + "=" + std::to_string(shared_->layout.shape[a]);
    return out;
  }

  // This rank's mesh and the global layout: its shape and axis names, per rank the first global
  // index (then size()), per global device its label, and for several axes the plan per set of axes.
  struct Shared {
    spmd::Mesh local;
    detail::GlobalLayout layout;
  };
  Session* session_;
  std::shared_ptr<const Shared> shared_;
};

/// Reduces `arrays` (one per LOCAL device of `mesh`, in local mesh order, all of the same shape
/// on every rank) element-wise over every device of every rank with `op`, leaving the result in
/// every array. `mean` scales the sum by 1 / `mesh.size()`, the global device count. Every rank
/// ends with the same bits. Elements: float, double (and, but for `mean`, 32- and 64-bit integers).
///
/// Asynchronous, with the usual completion tokens (`void(std::exception_ptr)`; the default
/// `use_future` gives a `Future<void>`): the call checks its arguments and returns; the three
/// stages run on the session's collectives thread (`Session::post`), or on the thread that waits
/// for the future (`Session::post_awaited`), one collective after another
/// in the order they were started — every rank must start the same collectives in the same order.
/// `arrays` (the span and the arrays) must stay alive until the completion (the mesh is copied).
/// The deadline (`timeout`, else `default_timeout()`) covers the whole collective from this call on.
///
///     dist::all_reduce(mesh, std::span(grads), xdev::spmd::ReduceOp::mean).get();
///
/// \throws xdev::error `errc::invalid_argument` for arrays that do not match the local mesh (only
///         on that rank, before anything starts: the other ranks then miss their deadline, naming
///         it), a `mean` of integers, an unknown op or a timeout <= 0.
/// Through the token: on every rank, `errc::invalid_argument` for shapes or ops that differ
/// between ranks; `errc::deadline_exceeded` naming the ranks that never arrived (the session then
/// fails, see mpi.hpp) or the local devices whose work had not completed; `errc::unavailable`
/// when the session failed earlier; device errors.
template <class A, class Token = const use_future_t&>
requires detail::Target<A>
auto all_reduce(const GlobalMesh& mesh, std::span<A> arrays, spmd::ReduceOp op,
                std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  using T = detail::element_t<A>;
  constexpr const char* name = "all_reduce";
  (void)detail::check_local_arrays<T>(name, "arrays", mesh, arrays);
  const detail::ReducePlan plan = detail::plan_reduction<T>(name, op);
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  return detail::start(
      mesh.session(), arrays[0].device(), arrays[0].size() * sizeof(T),
      [mesh, windows = detail::windows_of<detail::Out<T>>(arrays), plan, deadline] {
        detail::run_all_reduce<T>(mesh, std::span(windows), plan, deadline);
      },
      std::forward<Token>(token));
}

/// Concatenates the inputs of every device of every rank along dimension 0, in global device
/// order, into every local output: with inputs of shape `[d0, d1, ...]` (the same on every device
/// of every rank), `out[i]` has shape `[mesh.size() * d0, d1, ...]` and its block g (rows
/// `g*d0 ..`) is global device g's input. `in` and `out` hold one array per LOCAL device, in local
/// mesh order. Stages: the local inputs to the host, `MPI_Iallgatherv` across the processes (into
/// out[0]'s memory when it is host memory), the result to every local output. Asynchronous,
/// ordered and with a deadline as `all_reduce`; `in` and `out` must stay alive until the
/// completion.
///
///     std::vector<AnyArray<float>> in = ..., out = ...;   // in[i] [4, 8], out[i] [4 * mesh.size(), 8]
///     dist::all_gather(mesh, std::span<const AnyArray<float>>(in), std::span(out)).get();
///
/// \throws xdev::error `errc::invalid_argument` (on this rank, before anything starts) for arrays
///         that do not match the local mesh, inputs of rank 0, outputs of another shape, a
///         timeout <= 0. Through the token: `errc::invalid_argument` on every rank when the input
///         shapes or element sizes differ between ranks; otherwise as `all_reduce`.
template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto all_gather(const GlobalMesh& mesh, std::span<I> in, std::span<O> out,
                std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  using T = detail::element_t<O>;
  constexpr const char* name = "all_gather";
  (void)detail::check_local_arrays<T>(name, "in", mesh, in);
  if (in[0].shape().rank() == 0)
    throw error(errc::invalid_argument,
                "distributed::all_gather: the inputs are scalars (shape []); all_gather "
                "concatenates along dimension 0, so they need rank >= 1");
  Shape want = in[0].shape();
  want[0] *= static_cast<Shape::value_type>(mesh.size());
  detail::check_outputs<T>(name, mesh, out, want,
                           "gathering " + std::to_string(mesh.size()) + " inputs of shape " + to_string(in[0].shape()));
  detail::check_in_out<T>(name, mesh, in, out);
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  return detail::start(
      mesh.session(), out[0].device(), out[0].size() * sizeof(T),
      [mesh, ins = detail::windows_of<detail::In<T>>(in), outs = detail::windows_of<detail::Out<T>>(out), deadline] {
        detail::run_all_gather<T>(mesh, std::span(ins), std::span(outs), deadline);
      },
      std::forward<Token>(token));
}

/// Reduces the inputs of every device of every rank element-wise with `op` and leaves block g of
/// the result in the output of global device g: with inputs of shape `[mesh.size() * d0, d1, ...]`,
/// `out[i]` has shape `[d0, d1, ...]` and holds rows `g*d0 .. (g+1)*d0` of the reduction, g being
/// local device i's global index. `mean` scales by 1 / `mesh.size()`. Stages: the local inputs
/// combined on the host, `MPI_Ireduce_scatter` across the processes (each rank receives its
/// devices' blocks), each block to its device. Elements as `all_reduce`; asynchronous, ordered and
/// with a deadline as `all_reduce`; `in` and `out` must stay alive until the completion.
///
///     dist::reduce_scatter(mesh, std::span<const AnyArray<float>>(grads), std::span(shards),
///                          xdev::spmd::ReduceOp::sum).get();
///
/// \throws xdev::error `errc::invalid_argument` (on this rank, before anything starts) for arrays
///         that do not match the local mesh, inputs of rank 0 or whose dimension 0 is not
///         divisible by `mesh.size()`, outputs of another shape, a `mean` of integers, an unknown
///         op, a timeout <= 0. Through the token: `errc::invalid_argument` on every rank when the
///         shapes or ops differ between ranks; otherwise as `all_reduce`.
template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto reduce_scatter(const GlobalMesh& mesh, std::span<I> in, std::span<O> out, spmd::ReduceOp op,
                    std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  using T = detail::element_t<O>;
  constexpr const char* name = "reduce_scatter";
  (void)detail::check_local_arrays<T>(name, "in", mesh, in);
  const Shape& s = in[0].shape();
  const std::size_t k = mesh.size();
  const Shape want = detail::scatter_shape(s, k, "global device");
  detail::check_outputs<T>(name, mesh, out, want,
                           "scattering " + to_string(s) + " over " + std::to_string(k) + " devices");
  const detail::ReducePlan plan = detail::plan_reduction<T>(name, op);
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  return detail::start(
      mesh.session(), out[0].device(), out[0].size() * sizeof(T),
      [mesh, ins = detail::windows_of<detail::In<T>>(in), outs = detail::windows_of<detail::Out<T>>(out), plan,
       deadline] { detail::run_reduce_scatter<T>(mesh, std::span(ins), std::span(outs), plan, deadline); },
      std::forward<Token>(token));
}

/// Copies the array of global device `root` (of whichever rank owns it) into every array of every
/// rank. `arrays` holds one per LOCAL device, in local mesh order, of the same shape on every
/// rank. Stages: the root's array to the host on its rank, `MPI_Ibcast` from that rank (into
/// array 0's memory when it is host memory), then to every local array. Asynchronous, ordered and
/// with a deadline as `all_reduce`; `arrays` must stay alive until the completion.
///
///     dist::broadcast(mesh, std::span(params), 0).get();   // every device gets global device 0's
///
/// \throws xdev::error `errc::invalid_argument` (on this rank, before anything starts) for arrays
///         that do not match the local mesh, a `root` outside [0, mesh.size()), a timeout <= 0.
///         Through the token: `errc::invalid_argument` on every rank when the shapes, element
///         sizes or roots differ between ranks; otherwise as `all_reduce`.
template <class A, class Token = const use_future_t&>
requires detail::Target<A>
auto broadcast(const GlobalMesh& mesh, std::span<A> arrays, std::int64_t root,
               std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  using T = detail::element_t<A>;
  constexpr const char* name = "broadcast";
  (void)detail::check_local_arrays<T>(name, "arrays", mesh, arrays);
  const std::size_t r = detail::check_root(name, root, mesh.size());
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  return detail::start(
      mesh.session(), arrays[0].device(), arrays[0].size() * sizeof(T),
      [mesh, windows = detail::windows_of<detail::Out<T>>(arrays), r, deadline] {
        detail::run_broadcast<T>(mesh, std::span(windows), r, deadline);
      },
      std::forward<Token>(token));
}

/// Reduces `arrays` (one per LOCAL device of `mesh`, in local mesh order, of the same shape on
/// every rank) element-wise over every device of every rank with `op` into the array of global
/// device `root` only; every other array, on every rank, keeps its values (`torch.distributed.
/// reduce`). `mean` scales by 1 / `mesh.size()`. Stages: this rank's arrays combined on the host,
/// `MPI_Ireduce` to the root's rank, the result to the root's device. Elements as `all_reduce`;
/// asynchronous, ordered and with a deadline as `all_reduce`; `arrays` must stay alive until the
/// completion.
///
///     dist::reduce(mesh, std::span(losses), xdev::spmd::ReduceOp::sum, 0).get();   // on device 0
///
/// \throws xdev::error `errc::invalid_argument` (on this rank, before anything starts) for arrays
///         that do not match the local mesh, a `root` outside [0, mesh.size()), a `mean` of
///         integers, an unknown op, a timeout <= 0. Through the token: `errc::invalid_argument`
///         on every rank when the shapes, ops or roots differ between ranks; otherwise as
///         `all_reduce`.
template <class A, class Token = const use_future_t&>
requires detail::Target<A>
auto reduce(const GlobalMesh& mesh, std::span<A> arrays, spmd::ReduceOp op, std::int64_t root,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  using T = detail::element_t<A>;
  constexpr const char* name = "reduce";
  (void)detail::check_local_arrays<T>(name, "arrays", mesh, arrays);
  const std::size_t r = detail::check_root(name, root, mesh.size());
  const detail::ReducePlan plan = detail::plan_reduction<T>(name, op);
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  return detail::start(
      mesh.session(), arrays[0].device(), arrays[0].size() * sizeof(T),
      [mesh, windows = detail::windows_of<detail::Out<T>>(arrays), plan, r, deadline] {
        detail::run_reduce<T>(mesh, std::span(windows), plan, r, deadline);
      },
      std::forward<Token>(token));
}

/// Splits every input along `split_axis` into `mesh.size()` blocks, sends block j to global device
/// j, and concatenates the blocks each device receives along `concat_axis` in global device order
/// (`jax.lax.all_to_all` over a mesh that spans processes; expert parallelism). With inputs of
/// shape S (the same on every device of every rank), `out[i]` has shape S with S[split_axis] /
/// mesh.size() and then S[concat_axis] * mesh.size(). `in` and `out` hold one array per LOCAL
/// device, in local mesh order. Stages: the local inputs to the host, packed per destination; one
/// `MPI_Isend` / `MPI_Irecv` per block whose ends are on different ranks (a host copy within a
/// rank), all posted at once; each output assembled on the host and copied to its device.
/// Asynchronous, ordered and with a deadline as `all_reduce`; `in` and `out` must stay alive until
/// the completion. At most 181 global devices (the MPI tags of the blocks).
///
///     // in[i] [8, 4] on 4 global devices; out[i] [2, 16]
///     dist::all_to_all(mesh, std::span<const AnyArray<float>>(in), std::span(out), 0, 1).get();
///
/// \throws xdev::error `errc::invalid_argument` (on this rank, before anything starts) for arrays
///         that do not match the local mesh, inputs of rank 0, an axis outside [0, rank), a split
///         dimension not divisible by `mesh.size()`, outputs of another shape, an output that is
///         its input, more than 181 global devices, a timeout <= 0. Through the token:
///         `errc::invalid_argument` on every rank when the shapes, element sizes or axes differ
///         between ranks; otherwise as `all_reduce`.
template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto all_to_all(const GlobalMesh& mesh, std::span<I> in, std::span<O> out, std::int64_t split_axis,
                std::int64_t concat_axis, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                Token&& token = use_future) {
  using T = detail::element_t<O>;
  constexpr const char* name = "all_to_all";
  (void)detail::check_local_arrays<T>(name, "in", mesh, in);
  const Shape& s = in[0].shape();
  const std::size_t k = mesh.size();
  const detail::AllToAllShape shape =
      detail::all_to_all_shape(s, split_axis, concat_axis, k, k, "the " + std::to_string(k) + " global devices");
  const std::size_t split = shape.split, concat = shape.concat;
  const Shape& want = shape.want;
  detail::check_outputs<T>(name, mesh, out, want,
                           "all_to_all of " + to_string(s) + " over " + std::to_string(k) + " devices (split_axis " +
                               std::to_string(split) + ", concat_axis " + std::to_string(concat) + ")");
  detail::check_in_out<T>(name, mesh, in, out);
  std::string description = "inputs of shape " + to_string(s) + ", " + detail::element_text(sizeof(T)) +
                            ", split_axis " + std::to_string(split) + ", concat_axis " + std::to_string(concat);
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  return detail::start(
      mesh.session(), out[0].device(), out[0].size() * sizeof(T),
      [mesh, ins = detail::windows_of<detail::In<T>>(in), outs = detail::windows_of<detail::Out<T>>(out), split, concat,
       description = std::move(description), deadline] {
        std::vector<std::size_t> every(mesh.size());
        for (std::size_t g = 0; g < every.size(); ++g) every[g] = g;
        detail::run_all_to_all<T>(mesh, std::span(ins), std::span(outs), split, concat, std::vector(ins.size(), every),
                                  description, deadline);
      },
      std::forward<Token>(token));
}

/// For each `(source, target)` pair of global device indices, global device `target`'s output
/// receives global device `source`'s input, across processes or within one; the output of a device
/// that no pair targets is filled with zeros (`jax.lax.ppermute` over a mesh that spans processes;
/// pipeline stages, ring attention). `in` and `out` hold one array per LOCAL device, in local
/// mesh order, all of one shape on every rank; every rank passes the same pairs. Stages: the local
/// inputs that a pair sends, to the host; one `MPI_Isend` / `MPI_Irecv` per pair whose ends are on
/// different ranks (a host copy within a rank); every local output from the host. Asynchronous,
/// ordered and with a deadline as `all_reduce`; `in` and `out` must stay alive until the completion.
///
///     // A ring shift over every device of every process: device g receives device g-1's input.
///     xdev::spmd::PermutePairs ring;
///     for (std::size_t g = 0; g < mesh.size(); ++g) ring.push_back({g, (g + 1) % mesh.size()});
///     dist::collective_permute(mesh, std::span<const AnyArray<float>>(in), std::span(out), ring).get();
///
/// \throws xdev::error `errc::invalid_argument` (on this rank, before anything starts) for arrays
///         that do not match the local mesh, inputs and outputs of different shapes, an output that
///         is its input, a position outside [0, mesh.size()), a source or a target named twice, a
///         timeout <= 0. Through the token: `errc::invalid_argument` on every rank when the shapes,
///         element sizes or pairs differ between ranks; otherwise as `all_reduce`.
template <class I, class O, class Token = const use_future_t&>
requires detail::Operands<I, O>
auto collective_permute(const GlobalMesh& mesh, std::span<I> in, std::span<O> out, const spmd::PermutePairs& pairs,
                        std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  using T = detail::element_t<O>;
  constexpr const char* name = "collective_permute";
  (void)detail::check_local_arrays<T>(name, "in", mesh, in);
  detail::check_outputs<T>(name, mesh, out, in[0].shape(), "collective_permute keeps the shape, which");
  detail::check_in_out<T>(name, mesh, in, out);
  std::vector<std::int64_t> source =
      spmd::detail::sources_of("distributed::collective_permute", mesh.axis_names(), mesh.size(), pairs);
  std::string description = "arrays of shape " + to_string(in[0].shape()) + ", " + detail::element_text(sizeof(T)) +
                            ", " + detail::pairs_text(pairs);
  const detail::Deadline deadline = detail::Deadline::after(name, timeout);
  return detail::start(
      mesh.session(), out[0].device(), out[0].size() * sizeof(T),
      [mesh, ins = detail::windows_of<detail::In<T>>(in), outs = detail::windows_of<detail::Out<T>>(out),
       source = std::move(source), description = std::move(description),
       deadline] { detail::run_permute<T>(mesh, std::span(ins), std::span(outs), source, description, deadline); },
      std::forward<Token>(token));
}

}  // namespace xdev::distributed
