/// \file
/// `xdev::distributed::GlobalMesh`: a one-axis mesh of devices spanning the processes of an MPI
/// job, and `all_reduce` of device arrays across it. Link `xdev::mpi`. See docs/distributed.md.
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
/// **all_reduce** is hierarchical: the local arrays are reduced on the local mesh
/// (`spmd::all_reduce`, ReduceOp sum for `mean`), local device 0's result is copied to the host,
/// reduced across the processes with `MPI_Iallreduce` (`Session::all_reduce`, polled to the
/// deadline, arrival tokens naming a missing rank), scaled by 1 / (global device count) for
/// `mean`, and copied to every local device. It takes the usual completion tokens: the stages run
/// on the session's collectives thread, so the caller goes on (`.get()` on the default future).
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/core/error.hpp>
#include <xdev/distributed/mpi.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/mesh.hpp>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <future>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::distributed {

namespace detail {

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

}  // namespace detail

/// A one-axis mesh over the devices of every process of the job, built collectively (every rank
/// must construct it, in the same order as its other collectives). Cheap to copy; it refers to
/// the session, which must outlive it.
class GlobalMesh {
 public:
  /// Every rank contributes `local` (a one-axis `spmd::Mesh` of its devices; ranks may have
  /// different numbers of devices) and learns every other rank's devices (a `rendezvous`).
  /// \throws xdev::error `errc::invalid_argument` on every rank when a rank's mesh has more than
  ///         one axis or the ranks name the axis differently (naming the ranks);
  ///         `errc::deadline_exceeded` / `errc::unavailable` as `Session::rendezvous`.
  GlobalMesh(Session& session, spmd::Mesh local, std::optional<std::chrono::milliseconds> timeout = std::nullopt)
      : session_(&session), local_(std::move(local)) {
    std::string problem;
    if (local_.empty())
      problem = "the local mesh has no devices";
    else if (local_.ndim() != 1)
      problem = "the local mesh has " + std::to_string(local_.ndim()) + " axes; a GlobalMesh takes one-axis meshes";
    std::vector<std::byte> mine;
    detail::put_string(mine, problem);
    detail::put_string(mine, local_.empty() ? std::string_view() : std::string_view(local_.axis_names()[0]));
    for (const auto& d : local_.devices()) detail::put_string(mine, d.name());
    const auto all = session.rendezvous("xdev.GlobalMesh", mine, timeout);

    std::string problems;
    std::vector<std::string> axes(all.size());
    for (std::size_t r = 0; r < all.size(); ++r) {
      std::size_t at = 0;
      const std::string p = detail::get_string(all[r], at);
      axes[r] = detail::get_string(all[r], at);
      if (!p.empty()) problems += (problems.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": ") + p;
      offsets_.push_back(labels_.size());
      while (at < all[r].size())
        labels_.push_back("rank " + std::to_string(r) + " / " + detail::get_string(all[r], at));
    }
    offsets_.push_back(labels_.size());
    if (problems.empty())
      for (std::size_t r = 1; r < axes.size(); ++r)
        if (axes[r] != axes[0])
          problems += (problems.empty() ? "" : "; ") +
                      ("rank " + std::to_string(r) + " names the axis '" + axes[r] + "', rank 0 '" + axes[0] + "'");
    if (!problems.empty()) throw error(errc::invalid_argument, "distributed::GlobalMesh: " + problems);
    axis_ = axes[0];
  }

  /// The same, over the live session. \throws xdev::error `errc::unavailable` when there is none.
  explicit GlobalMesh(spmd::Mesh local, std::optional<std::chrono::milliseconds> timeout = std::nullopt)
      : GlobalMesh(detail::current_or_throw("GlobalMesh"), std::move(local), timeout) {}

  /// `devices` (this rank's) along an axis called `axis`.
  GlobalMesh(Session& session, const std::vector<AnyDevice>& devices, const std::string& axis = "data",
             std::optional<std::chrono::milliseconds> timeout = std::nullopt)
      : GlobalMesh(session, spmd::Mesh(devices, axis), timeout) {}

  /// Number of devices of every rank together.
  [[nodiscard]] std::size_t size() const noexcept { return labels_.size(); }
  /// Number of this rank's devices.
  [[nodiscard]] std::size_t local_size() const noexcept { return local_.size(); }
  /// This process's rank, and the number of processes.
  [[nodiscard]] std::uint32_t rank() const noexcept { return session_->rank(); }
  [[nodiscard]] std::uint32_t world_size() const noexcept { return session_->world_size(); }
  /// The axis name (the same on every rank).
  [[nodiscard]] const std::string& axis_name() const noexcept { return axis_; }
  /// This rank's devices, as the mesh it was built from.
  [[nodiscard]] const spmd::Mesh& local_mesh() const noexcept { return local_; }
  /// The session it belongs to.
  [[nodiscard]] Session& session() const noexcept { return *session_; }

  /// Global index of this rank's local device `local` (rank-major).
  /// \throws xdev::error `errc::invalid_argument` when `local >= local_size()`.
  [[nodiscard]] std::size_t global_index(std::size_t local) const {
    if (local >= local_size())
      throw error(errc::invalid_argument, "GlobalMesh::global_index(" + std::to_string(local) + "): this rank has " +
                                              std::to_string(local_size()) + " devices");
    return offsets_[rank()] + local;
  }
  /// Global index of rank `r`'s first device, and its number of devices.
  /// \throws xdev::error `errc::invalid_argument` when `r >= world_size()`.
  [[nodiscard]] std::size_t first_index_of(std::uint32_t r) const { return offsets_.at(check_rank(r)); }
  [[nodiscard]] std::size_t size_of(std::uint32_t r) const { return offsets_.at(check_rank(r) + 1) - offsets_.at(r); }
  /// The rank that owns global device `g`.
  /// \throws xdev::error `errc::invalid_argument` when `g >= size()`.
  [[nodiscard]] std::uint32_t rank_of(std::size_t g) const {
    check_global(g);
    std::uint32_t r = 0;
    while (offsets_[r + 1] <= g) ++r;
    return r;
  }
  /// Global device `g` as "rank R / NAME", e.g. "rank 1 / HOST:0".
  /// \throws xdev::error `errc::invalid_argument` when `g >= size()`.
  [[nodiscard]] const std::string& device_label(std::size_t g) const { return labels_[check_global(g)]; }
  /// Every global device's label, in global order.
  [[nodiscard]] const std::vector<std::string>& device_labels() const noexcept { return labels_; }

  /// "GlobalMesh(data=4 over 2 processes: rank 0 / HOST:0, rank 0 / HOST:1, rank 1 / HOST:0, rank 1 / HOST:1)".
  [[nodiscard]] std::string to_string() const {
    std::string out = "GlobalMesh(" + axis_ + "=" + std::to_string(size()) + " over " + std::to_string(world_size()) +
                      (world_size() == 1 ? " process: " : " processes: ");
    for (std::size_t g = 0; g < labels_.size(); ++g) out += (g ? ", " : "") + labels_[g];
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

  Session* session_;
  spmd::Mesh local_;
  std::string axis_;
  std::vector<std::size_t> offsets_;  // per rank: its first global index; then size()
  std::vector<std::string> labels_;   // per global device: "rank R / NAME"
};

namespace detail {

// What a validated all_reduce of device arrays runs: the ops of both stages and its deadline.
struct AllReducePlan {
  MPI_Op mpi_op = MPI_SUM;
  spmd::ReduceOp local_op = spmd::ReduceOp::sum;
  bool mean = false;
  std::chrono::steady_clock::time_point deadline;

  [[nodiscard]] std::chrono::milliseconds remaining() const {
    // Rounded up: a stage's own deadline never ends before the collective's.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  }
};

// Checks the arguments on this rank (nothing is started when they are wrong).
template <class T>
AllReducePlan plan_all_reduce(const GlobalMesh& mesh, std::span<AnyArray<T>> arrays, spmd::ReduceOp op,
                              std::optional<std::chrono::milliseconds> timeout) {
  constexpr const char* name = "distributed::all_reduce";
  (void)mpi_datatype<T>();  // the element-type check, at compile time
  const std::span<const AnyArray<T>> view(arrays.data(), arrays.size());
  (void)spmd::detail::check_arrays<T>(name, "arrays", mesh.local_mesh(), view);
  for (std::size_t i = 1; i < arrays.size(); ++i)
    if (arrays[i].shape() != arrays[0].shape())
      throw error(errc::invalid_argument, std::string(name) + ": arrays[" + std::to_string(i) + "] has shape " +
                                              to_string(arrays[i].shape()) + " but arrays[0] has " +
                                              to_string(arrays[0].shape()) + "; the arrays must have the same shape");
  AllReducePlan plan;
  switch (op) {
    case spmd::ReduceOp::sum:
      break;
    case spmd::ReduceOp::mean:
      if constexpr (!std::is_floating_point_v<T>)
        throw error(errc::invalid_argument, std::string(name) + ": ReduceOp::mean needs floating-point elements");
      plan.mean = true;
      break;
    case spmd::ReduceOp::min:
      plan.mpi_op = MPI_MIN;
      plan.local_op = spmd::ReduceOp::min;
      break;
    case spmd::ReduceOp::max:
      plan.mpi_op = MPI_MAX;
      plan.local_op = spmd::ReduceOp::max;
      break;
    default:
      throw error(errc::invalid_argument, std::string(name) + ": unknown ReduceOp value " +
                                              std::to_string(static_cast<int>(op)) + "; accepted: sum, mean, min, max");
  }
  const auto total = timeout.value_or(default_timeout());
  if (total.count() <= 0)
    throw error(errc::invalid_argument,
                std::string(name) + ": the timeout must be > 0, got " + std::to_string(total.count()) + " ms");
  plan.deadline = std::chrono::steady_clock::now() + total;
  return plan;
}

// The three stages, waited for one after another (on the session's collectives thread).
template <class T>
void run_all_reduce(const GlobalMesh& mesh, std::span<AnyArray<T>> arrays, const AllReducePlan& plan) {
  // 1. Within the process.
  if (arrays.size() > 1)
    spmd::all_reduce(mesh.local_mesh(), mesh.axis_name(), arrays, plan.local_op,
                     spmd::CollectiveOptions{.timeout = plan.remaining()})
        .get();

  // 2. Across the processes, in host memory: in place when local device 0's memory is host memory
  // (the host backend), once the work submitted to its default stream before this collective has
  // run (a marker event); else staged through a copy (ordered on that stream by itself).
  const AnyDevice& first_device = arrays[0].device();
  T* direct = static_cast<T*>(first_device.model().host_address(arrays[0].buffer().native_handle()));
  std::vector<T> staging;
  if (direct != nullptr) {
    first_device.default_stream().record().wait();
  } else {
    staging.resize(arrays[0].size());
    first_device.copy_to_host(arrays[0].buffer(), std::span<T>(staging)).get();
  }
  const std::span<T> host = direct != nullptr ? std::span<T>(direct, arrays[0].size()) : std::span<T>(staging);
  mesh.session().all_reduce(host, plan.mpi_op, plan.remaining());
  if constexpr (std::is_floating_point_v<T>) {
    if (plan.mean) {
      const T n = static_cast<T>(mesh.size());
      for (T& v : host) v /= n;
    }
  }

  // 3. Back to every local device (every copy waited for, the first error thrown); array 0
  // already holds the result when it was reduced in place.
  std::vector<Future<void>> copies;
  for (std::size_t i = direct != nullptr ? 1 : 0; i < arrays.size(); ++i)
    copies.push_back(arrays[i].device().copy_to_device(std::span<const T>(host), arrays[i].buffer()));
  std::exception_ptr first;
  for (auto& c : copies) try {
      c.get();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  if (first) std::rethrow_exception(first);
}

}  // namespace detail

/// Reduces `arrays` (one per LOCAL device of `mesh`, in local mesh order, all of the same shape
/// on every rank) element-wise over every device of every rank with `op`, leaving the result in
/// every array. `mean` divides by `mesh.size()`, the global device count. Every rank ends with
/// the same bits. Elements: float, double (and, but for `mean`, 32- and 64-bit integers).
///
/// Asynchronous, with the usual completion tokens (`void(std::exception_ptr)`; the default
/// `use_future` gives a `Future<void>`): the call checks its arguments and returns; the three
/// stages run on the session's collectives thread (`Session::post`), one collective after another
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
/// fails, see mpi.hpp) or, from the local reduction, the local devices that did not complete;
/// `errc::unavailable` when the session failed earlier; device errors.
template <class T, class Token = const use_future_t&>
auto all_reduce(const GlobalMesh& mesh, std::span<AnyArray<T>> arrays, spmd::ReduceOp op,
                std::optional<std::chrono::milliseconds> timeout = std::nullopt, Token&& token = use_future) {
  const detail::AllReducePlan plan = detail::plan_all_reduce(mesh, arrays, op, timeout);
  auto initiation = [&mesh, arrays, plan](auto handler) {
    auto work = boost::asio::make_work_guard(boost::asio::get_associated_executor(handler));
    mesh.session().post([mesh, arrays, plan, h = std::move(handler), work = std::move(work)]() mutable {
      std::exception_ptr ep;
      try {
        detail::run_all_reduce(mesh, arrays, plan);
      } catch (...) {
        ep = std::current_exception();
      }
      xdev::detail::deliver(arrays[0].device().queue(), std::move(h), std::move(ep));
      work.reset();
    });
  };
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(std::move(initiation), token);
}

}  // namespace xdev::distributed
