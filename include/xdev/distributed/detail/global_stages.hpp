/// \file
/// The stages of the collectives over a `GlobalMesh` (<xdev/distributed/global_mesh.hpp>): the
/// deadline of a call, device work waited for within it, host staging, the local combine, and one
/// body per collective that goes through one MPI collective of the session's engine (local arrays
/// to the host, the MPI call, the result back to the local devices); the point-to-point ones are
/// in global_exchange.hpp. Templates over the mesh type, so that this header needs only what the
/// stages use. Not part of the public API.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/event.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/core/error.hpp>
#include <xdev/distributed/mpi.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/memory/array_view.hpp>
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
#include <cstdio>
#include <exception>
#include <limits>
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

namespace xdev::distributed::detail {

// The deadline of one collective over a GlobalMesh, set when it is called.
struct Deadline {
  std::chrono::steady_clock::time_point at;

  static Deadline after(const char* name, std::optional<std::chrono::milliseconds> timeout) {
    const auto total = timeout.value_or(default_timeout());
    if (total.count() <= 0)
      throw error(errc::invalid_argument, std::string("distributed::") + name + ": the timeout must be > 0, got " +
                                              std::to_string(total.count()) + " ms");
    return Deadline{std::chrono::steady_clock::now() + total};
  }
  [[nodiscard]] std::chrono::milliseconds remaining() const {
    // Rounded up: a stage's own deadline never ends before the collective's.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(at - std::chrono::steady_clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  }
};

// Device work a collective waits for (copies, stream markers), each completing through a callback
// that also keeps `keep` (the host memory it reads or writes) alive: work that misses the
// deadline cannot touch freed memory when it runs later.
class PendingWork {
 public:
  explicit PendingWork(std::shared_ptr<void> keep = nullptr) : keep_(std::move(keep)) {}

  // A completion handler `void(std::exception_ptr)` to pass as a token; `what` names the work.
  auto handler(std::string what) {
    if (!state_) state_ = std::make_shared<State>();
    std::size_t index = 0;
    {
      std::lock_guard lock(state_->mutex);
      index = state_->pending.size();
      state_->pending.push_back(std::move(what));
    }
    return [state = state_, keep = keep_, index](std::exception_ptr ep) {
      std::lock_guard lock(state->mutex);
      state->pending[index].clear();
      ++state->done;
      if (ep && !state->error) state->error = ep;
      state->cv.notify_all();
    };
  }

  // Waits for every handler; throws the first error, or `errc::deadline_exceeded` naming the
  // work that had not completed when the deadline passed.
  void wait(const char* name, const Deadline& deadline) {
    if (!state_) return;  // no handler was made
    std::unique_lock lock(state_->mutex);
    const bool all = state_->cv.wait_until(lock, deadline.at, [&] { return state_->done == state_->pending.size(); });
    if (state_->error) std::rethrow_exception(state_->error);
    if (!all) {
      std::string late;
      for (const auto& w : state_->pending)
        if (!w.empty()) late += (late.empty() ? "" : ", ") + w;
      throw error(errc::deadline_exceeded,
                  std::string("distributed::") + name + ": the deadline passed before this rank's devices completed " +
                      late + " (the arrays may still be written until those devices are synchronized)");
    }
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<std::string> pending;  // per handler: what it is, cleared when it completed
    std::size_t done = 0;
    std::exception_ptr error;
  };
  std::shared_ptr<State> state_;  // made with the first handler: most collectives need none
  std::shared_ptr<void> keep_;
};

// The window `a`'s memory when it is host memory (the host backend), once the work submitted to
// its device's default stream before now has completed; nullptr for other memory. Windows of a
// collective are contiguous (`check_local_arrays`).
template <class T>
T* host_memory(const char* name, const AnyArrayView<T>& a, const Deadline& deadline) {
  const AnyDevice& d = a.device();
  T* p = static_cast<T*>(d.model().host_address(a.native_handle()));
  if (p != nullptr) {
    p += a.offset();
    // An idle stream's point is reached at once: then there is nothing to wait for, and no waiter
    // to build (a third of what a small collective's call cost around its MPI call).
    const Event point = d.default_stream().record();
    if (!point.ready()) {
      PendingWork earlier;
      point.on_ready(
          [h = earlier.handler("the work submitted to " + d.name() + " before the call")]() mutable { h(nullptr); });
      earlier.wait(name, deadline);
    }
  }
  return p;
}

// Host memory of `n` elements that device copies may still write after a missed deadline.
template <class T>
std::shared_ptr<T[]> staging(std::size_t n) {
  return std::shared_ptr<T[]>(new T[n == 0 ? 1 : n]);
}

// The operands of a collective as windows (`AnyArrayView`): of mutable elements for what it writes
// (`Out`), of const ones for what it only reads (`In`). A whole array is the window of all of it.
template <class T>
using Out = AnyArrayView<T>;
template <class T>
using In = AnyArrayView<const T>;
template <class V, class A>
std::vector<V> windows_of(std::span<A> operands) {
  return std::vector<V>(operands.begin(), operands.end());
}

// An operand a public collective accepts: `AnyArray<T>` or a contiguous window `AnyArrayView<T>`
// (const or not, where it is only read); `element_t` is T.
template <class A>
struct operand_traits {};
template <class T>
struct operand_traits<AnyArray<T>> {
  using element = T;
  static constexpr bool writable = true;
};
template <class T>
struct operand_traits<const AnyArray<T>> {
  using element = T;
  static constexpr bool writable = false;
};
template <class T>
struct operand_traits<AnyArrayView<T>> {
  using element = std::remove_const_t<T>;
  static constexpr bool writable = !std::is_const_v<T>;
};
template <class T>
struct operand_traits<const AnyArrayView<T>> : operand_traits<AnyArrayView<T>> {};
template <class A>
using element_t = typename operand_traits<A>::element;
/// Read by a collective: an array or a window.
template <class A>
concept Operand = requires {
  typename operand_traits<A>::element;
};
/// Written by a collective: an array or a window of mutable elements.
template <class A>
concept Target = Operand<A> && operand_traits<A>::writable;
/// Inputs and outputs of one element type.
template <class I, class O>
concept Operands = Operand<I> && Target<O> && std::is_same_v<element_t<I>, element_t<O>>;

// Copies the windows of `from` (n elements each) to the host, one after another from `to[0]`,
// and waits for the copies.
template <class T, class V>
void copy_to_host(const char* name, std::span<const V> from, const std::shared_ptr<T[]>& to, const Deadline& deadline) {
  PendingWork copies(to);
  const std::size_t n = from[0].size();
  for (std::size_t i = 0; i < from.size(); ++i)
    from[i].device().copy_to_host(from[i], std::span<T>(to.get() + i * n, n),
                                  copies.handler("the copy from " + from[i].device().name()));
  copies.wait(name, deadline);
}

// Copies `host` into every window of `arrays` but `skip` (an index, or arrays.size() for none).
template <class T>
void fan_out(const char* name, std::span<const T> host, std::shared_ptr<void> keep, std::span<const Out<T>> arrays,
             std::size_t skip, const Deadline& deadline) {
  PendingWork copies(std::move(keep));
  for (std::size_t i = 0; i < arrays.size(); ++i)
    if (i != skip)
      arrays[i].device().copy_to_device(host, arrays[i], copies.handler("the copy to " + arrays[i].device().name()));
  copies.wait(name, deadline);
}

// Checks one array or contiguous window per local device, all of the same shape.
template <class T, class A, class M>
std::vector<spmd::detail::ArrayRef> check_local_arrays(const char* name, const char* what, const M& mesh,
                                                       std::span<A> arrays) {
  const std::string full = std::string("distributed::") + name;
  auto refs = spmd::detail::check_arrays<T>(full.c_str(), what, mesh.local_mesh(),
                                            std::span<const std::remove_const_t<A>>(arrays.data(), arrays.size()));
  for (std::size_t i = 1; i < arrays.size(); ++i)
    if (arrays[i].shape() != arrays[0].shape())
      throw error(errc::invalid_argument, full + ": " + what + "[" + std::to_string(i) + "] has shape " +
                                              to_string(arrays[i].shape()) + " but " + what + "[0] has " +
                                              to_string(arrays[0].shape()) + "; the arrays must have the same shape");
  return refs;
}

// Checks the inputs and outputs of a collective that does not work in place: no output is its
// device's input, and no output window shares elements with its device's input window.
template <class T, class I, class O, class M>
void check_in_out(const char* name, const M& mesh, std::span<I> in, std::span<O> out) {
  spmd::detail::CollectivePlan plan;
  plan.in = check_local_arrays<T>(name, "in", mesh, in);
  plan.out = check_local_arrays<T>(name, "out", mesh, out);
  const std::string full = std::string("distributed::") + name;
  spmd::detail::check_apart(
      full.c_str(), plan,
      spmd::detail::is_window_v<std::remove_const_t<I>> || spmd::detail::is_window_v<std::remove_const_t<O>>);
}

// Checks an output array per local device of shape `want`.
template <class T, class O, class M>
void check_outputs(const char* name, const M& mesh, std::span<O> out, const Shape& want, const std::string& why) {
  (void)check_local_arrays<T>(name, "out", mesh, out);
  if (out[0].shape() != want)
    throw error(errc::invalid_argument, std::string("distributed::") + name + ": out[0] has shape " +
                                            to_string(out[0].shape()) + " but " + why + " gives " + to_string(want));
}

// `root` as a global device index of a mesh of `devices`.
inline std::size_t check_root(const char* name, std::int64_t root, std::size_t devices) {
  if (root < 0 || static_cast<std::uint64_t>(root) >= devices)
    throw error(errc::invalid_argument, std::string("distributed::") + name + ": root " + std::to_string(root) +
                                            " is not a device of the mesh; it is a global device index in [0, " +
                                            std::to_string(devices) + ")");
  return static_cast<std::size_t>(root);
}

// `root` as a position in a group of `size` devices.
inline std::size_t check_position(const char* name, std::int64_t root, std::size_t size) {
  if (root < 0 || static_cast<std::uint64_t>(root) >= size)
    throw error(errc::invalid_argument, std::string("distributed::") + name + ": root " + std::to_string(root) +
                                            " is not a position in a group; groups over these axes have " +
                                            std::to_string(size) + " devices, positions [0, " + std::to_string(size) +
                                            ")");
  return static_cast<std::size_t>(root);
}

// The output shape of a reduce_scatter of inputs of shape `s` into `k` blocks, one per `each` ("global
// device", "device of a group").
inline Shape scatter_shape(const Shape& s, std::size_t k, const char* each) {
  const auto blocks = static_cast<Shape::value_type>(k);
  if (s.rank() == 0 || s[0] % blocks != 0)
    throw error(errc::invalid_argument, "distributed::reduce_scatter: the inputs have shape " + to_string(s) +
                                            "; reduce_scatter splits dimension 0 into " + std::to_string(k) +
                                            " blocks (one per " + each + "), so it must be divisible by " +
                                            std::to_string(k));
  Shape want = s;
  want[0] = s[0] / blocks;
  return want;
}

inline std::string element_text(std::size_t bytes) {
  return std::to_string(bytes) + "-byte elements";
}

// A collective's future is left to its waiter, which runs the collective itself when it waits
// (see `Session::post_awaited`): no hand-off to the collectives thread and back, which at 1 MiB
// between 2 processes cost 1.09-1.11x `Session::all_reduce`'s time. When nobody waits, the
// collectives thread starts it, within its doze (up to 4 ms) for a collective of up to
// `prompt_from_bytes` per local array, which lasts about as long as one such wake-up, and within
// `prompt_start` for a larger one, whose start decides how much of it a program that holds the
// future overlaps with its own work.
inline constexpr std::size_t prompt_from_bytes = DeadlineEngine::blocking_all_reduce_bytes;
inline constexpr std::chrono::microseconds prompt_start{2000};

// Runs `body` on the session's collectives thread (or, for a future, on the thread that waits
// for it) and completes `token` with its outcome (`void(std::exception_ptr)`, delivered through
// `device`'s queue like device work).
template <class Body, class Token>
auto start(Session& session, const AnyDevice& device, std::size_t bytes, Body body, Token&& token) {
  auto initiation = [on = &session, queue = device.queue(), bytes, body = std::move(body)](auto handler) mutable {
    // A collective across processes lasts at least one round trip between them, and its polling
    // thread needs a core: a future waits for it asleep, not polling first (see `use_future`).
    if constexpr (requires { handler.note_work_ahead(std::size_t{}); })
      handler.note_work_ahead(std::numeric_limits<std::size_t>::max());
    auto work = boost::asio::make_work_guard(boost::asio::get_associated_executor(handler));
    xdev::detail::future_probe* probe = nullptr;  // the future's, which outlives this call
    if constexpr (requires { handler.probe(); }) probe = &handler.probe();
    HostTask job([queue, body = std::move(body), h = std::move(handler), work = std::move(work)]() mutable {
      std::exception_ptr ep;
      try {
        body();
      } catch (...) {
        ep = std::current_exception();
      }
      xdev::detail::deliver(queue, std::move(h), std::move(ep));
      work.reset();
    });
    // The helper is set after the post, before the future is handed out; the job never reads it.
    if (probe != nullptr)
      probe->set_wait_helper(on->post_awaited(
          std::move(job), bytes > prompt_from_bytes ? prompt_start : std::chrono::microseconds::max()));
    else
      on->post(std::move(job));
  };
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(std::move(initiation), token);
}

// What a validated all_reduce of device arrays runs: the ops of both stages.
struct ReducePlan {
  MPI_Op mpi_op = MPI_SUM;
  spmd::ReduceOp local_op = spmd::ReduceOp::sum;
  bool mean = false;
};

template <class T>
ReducePlan plan_reduction(const char* name, spmd::ReduceOp op) {
  (void)mpi_datatype<T>();  // the element-type check, at compile time
  ReducePlan plan;
  switch (op) {
    case spmd::ReduceOp::sum:
      break;
    case spmd::ReduceOp::mean:
      if constexpr (!std::is_floating_point_v<T>)
        throw error(errc::invalid_argument,
                    std::string("distributed::") + name + ": ReduceOp::mean needs floating-point elements");
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
    case spmd::ReduceOp::prod:
      plan.mpi_op = MPI_PROD;
      plan.local_op = spmd::ReduceOp::prod;
      break;
    default:
      throw error(errc::invalid_argument, std::string("distributed::") + name + ": unknown ReduceOp value " +
                                              std::to_string(static_cast<int>(op)) +
                                              "; accepted: sum, mean, min, max, prod");
  }
  return plan;
}

// Scales by 1 / (the global device count) for `mean`, as the single-process mesh does (a
// multiplication by the rounded reciprocal, like `ops::scale`).
template <class T>
void finish_mean(const ReducePlan& plan, std::span<T> host, std::size_t devices) {
  if constexpr (std::is_floating_point_v<T>) {
    if (plan.mean && devices > 1) {
      const T alpha = static_cast<T>(1.0 / static_cast<double>(devices));
      for (T& v : host) v *= alpha;
    }
  }
}

// acc[i] = acc[i] (op) x[i] on the host (integers wrap, as MPI_SUM and the device ops do).
template <class T>
void combine_on_host(spmd::ReduceOp op, std::span<T> acc, std::span<const T> x) {
  for (std::size_t i = 0; i < acc.size(); ++i) {
    switch (op) {
      case spmd::ReduceOp::min:
        acc[i] = x[i] < acc[i] ? x[i] : acc[i];
        break;
      case spmd::ReduceOp::max:
        acc[i] = acc[i] < x[i] ? x[i] : acc[i];
        break;
      case spmd::ReduceOp::prod:
        if constexpr (std::is_integral_v<T>)
          acc[i] =
              static_cast<T>(static_cast<std::make_unsigned_t<T>>(acc[i]) * static_cast<std::make_unsigned_t<T>>(x[i]));
        else
          acc[i] *= x[i];
        break;
      default:
        if constexpr (std::is_integral_v<T>)
          acc[i] =
              static_cast<T>(static_cast<std::make_unsigned_t<T>>(acc[i]) + static_cast<std::make_unsigned_t<T>>(x[i]));
        else
          acc[i] += x[i];
    }
  }
}

// How many pieces an all_reduce of `bytes` is pipelined in, where some rank has `local` devices
// (the most of any rank: every rank must cut alike, each piece being an MPI call): the local
// reduce of piece c + 1 runs while piece c crosses the processes. One piece below 1 MiB or when
// no rank has two devices (nothing to overlap), else up to 4 of at least 256 KiB, cut along
// dimension 0 (`rows`).
inline std::size_t pipeline_pieces(std::size_t bytes, std::size_t local, std::int64_t rows) {
  if (local < 2 || bytes < (std::size_t{1} << 20) || rows < 2) return 1;
  const std::size_t by_size = bytes / (std::size_t{256} << 10);
  return std::min({std::size_t{4}, by_size, static_cast<std::size_t>(rows)});
}

template <class T, class M>
void run_all_reduce(const M& mesh, std::span<const Out<T>> arrays, const ReducePlan& plan, const Deadline& deadline) {
  constexpr const char* name = "all_reduce";
  const std::size_t n = arrays[0].size();
  const auto rows = arrays[0].shape().rank() == 0 ? std::int64_t{1} : arrays[0].shape()[0];
  std::size_t most_local = 0;
  for (std::uint32_t r = 0; r < mesh.world_size(); ++r) most_local = std::max(most_local, mesh.size_of(r));
  const std::size_t pieces = pipeline_pieces(n * sizeof(T), most_local, rows);
  const std::string& axis = mesh.local_mesh().axis_names()[0];
  // Local device 0's memory when it is host memory (MPI works on it in place), else a staging
  // buffer; asked before any local work starts (it waits for the work submitted before the call).
  std::shared_ptr<T[]> staged;
  T* host = host_memory(name, arrays[0], deadline);
  if (host == nullptr) {
    staged = staging<T>(n);
    host = staged.get();
  }
  // Piece c: rows [c * rows / pieces, (c + 1) * rows / pieces) of every local array.
  const std::size_t row = rows > 0 ? n / static_cast<std::size_t>(rows) : 0;
  auto rows_of = [&](std::size_t c) {
    return Range{static_cast<std::int64_t>(c) * rows / static_cast<std::int64_t>(pieces),
                 static_cast<std::int64_t>(c + 1) * rows / static_cast<std::int64_t>(pieces)};
  };
  // 1. Within the process, piece by piece on the local mesh (sum for mean), into local device 0's
  // array only: the others get the global result in step 3, so a local all_reduce's second half
  // (the local sum back to every device) would be work thrown away.
  auto local_reduce = [&](std::size_t c) {
    std::vector<AnyArrayView<T>> windows;
    for (const auto& a : arrays) windows.push_back(pieces == 1 ? a : xdev::slice(a, rows_of(c)));
    return spmd::reduce(mesh.local_mesh(), axis, std::span(windows), plan.local_op, 0,
                        spmd::CollectiveOptions{.timeout = deadline.remaining()});
  };
  std::vector<Future<void>> local(arrays.size() > 1 ? pieces : 0);
  PendingWork copies(staged);
  std::size_t c = 0;
  try {
    if (arrays.size() > 1) local[0] = local_reduce(0);
    for (; c < pieces; ++c) {
      if (arrays.size() > 1) local[c].get();
      if (arrays.size() > 1 && c + 1 < pieces) local[c + 1] = local_reduce(c + 1);  // overlaps this piece's MPI
      const Range r = pieces == 1 ? Range{0, rows} : rows_of(c);
      const std::size_t at = static_cast<std::size_t>(r.begin) * row;
      const std::size_t count = pieces == 1 ? n : static_cast<std::size_t>(r.end - r.begin) * row;
      const std::span<T> piece(host + at, count);
      // 2. Across the processes, in host memory.
      if (staged) {
        PendingWork in(staged);
        arrays[0].device().copy_to_host(pieces == 1 ? arrays[0] : xdev::slice(arrays[0], r), piece,
                                        in.handler("the copy from " + arrays[0].device().name()));
        in.wait(name, deadline);
      }
      mesh.session().all_reduce(piece, plan.mpi_op, deadline.remaining());
      finish_mean(plan, piece, mesh.size());
      // 3. Back to every local device (array 0 already holds it when it was reduced in place),
      // while the next piece goes on.
      for (std::size_t i = staged ? 0 : 1; i < arrays.size(); ++i)
        arrays[i].device().copy_to_device(std::span<const T>(piece),
                                          pieces == 1 ? arrays[i] : xdev::slice(arrays[i], r),
                                          copies.handler("the copy to " + arrays[i].device().name()));
    }
  } catch (...) {
    // The next piece's local reduce may still run: let it finish (within the deadline) before
    // the caller may free the arrays.
    for (std::size_t k = c + 1; k < local.size(); ++k)
      if (local[k].valid() && local[k].wait_until(deadline.at) == std::future_status::ready) {
        try {
          local[k].get();
        } catch (...) {
        }
      }
    throw;
  }
  copies.wait(name, deadline);
}

template <class T, class M>
void run_all_gather(const M& mesh, std::span<const In<T>> in, std::span<const Out<T>> out, const Deadline& deadline) {
  constexpr const char* name = "all_gather";
  // 1. This rank's blocks, in local order, to the host.
  const std::size_t block = in[0].size();
  auto mine = staging<T>(block * in.size());
  copy_to_host(name, in, mine, deadline);
  // 2. Every rank's blocks (rank-major: the global order), into out[0]'s memory when it is host
  // memory.
  const std::size_t total = out[0].size();
  std::shared_ptr<T[]> staged;
  T* all = host_memory(name, out[0], deadline);
  if (all == nullptr) {
    staged = staging<T>(total);
    all = staged.get();
  }
  mesh.session().engine().all_gather(std::as_bytes(std::span<const T>(mine.get(), block * in.size())),
                                     std::as_writable_bytes(std::span<T>(all, total)), sizeof(T),
                                     "blocks of shape " + to_string(in[0].shape()) + ", " + element_text(sizeof(T)),
                                     deadline.remaining());
  // 3. To every local output.
  fan_out(name, std::span<const T>(all, total), staged, out, staged ? out.size() : 0, deadline);
}

template <class T, class M>
void run_reduce_scatter(const M& mesh, std::span<const In<T>> in, std::span<const Out<T>> out, const ReducePlan& plan,
                        const Deadline& deadline) {
  constexpr const char* name = "reduce_scatter";
  // 1. This rank's inputs combined on the host, in local order.
  const std::size_t n = in[0].size();
  auto inputs = staging<T>(n * in.size());
  copy_to_host(name, in, inputs, deadline);
  const std::span<T> acc(inputs.get(), n);
  for (std::size_t i = 1; i < in.size(); ++i)
    combine_on_host(plan.local_op, acc, std::span<const T>(inputs.get() + i * n, n));
  // 2. Across the processes: this rank receives its devices' blocks (consecutive in global order).
  const std::size_t block = out[0].size();
  auto mine = staging<T>(block * out.size());
  mesh.session().engine().template reduce_scatter<T>(
      std::span<const T>(acc), std::span<T>(mine.get(), block * out.size()), plan.mpi_op,
      "inputs of shape " + to_string(in[0].shape()), deadline.remaining());
  finish_mean(plan, std::span<T>(mine.get(), block * out.size()), mesh.size());
  // 3. Block i to local device i.
  PendingWork copies(mine);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i].device().copy_to_device(std::span<const T>(mine.get() + i * block, block), out[i],
                                   copies.handler("the copy to " + out[i].device().name()));
  copies.wait(name, deadline);
}

template <class T, class M>
void run_broadcast(const M& mesh, std::span<const Out<T>> arrays, std::size_t root, const Deadline& deadline) {
  constexpr const char* name = "broadcast";
  const std::uint32_t root_rank = mesh.rank_of(root);
  const bool here = root_rank == mesh.rank();
  // This rank's copy of the data: the root's array (on the root's rank) or array 0, in its own
  // memory when that is host memory, else staged.
  const std::size_t local = here ? root - mesh.first_index_of(root_rank) : 0;
  const std::size_t n = arrays[local].size();
  std::shared_ptr<T[]> staged;
  T* host = host_memory(name, arrays[local], deadline);
  if (host == nullptr) {
    staged = staging<T>(n);
    host = staged.get();
    if (here) copy_to_host(name, arrays.subspan(local, 1), staged, deadline);
  }
  mesh.session().engine().broadcast(std::as_writable_bytes(std::span<T>(host, n)), root_rank,
                                    "arrays of shape " + to_string(arrays[0].shape()) + ", " + element_text(sizeof(T)) +
                                        ", root device " + std::to_string(root),
                                    deadline.remaining());
  fan_out(name, std::span<const T>(host, n), staged, arrays, staged && !here ? arrays.size() : local, deadline);
}

template <class T, class M>
void run_reduce(const M& mesh, std::span<const Out<T>> arrays, const ReducePlan& plan, std::size_t root,
                const Deadline& deadline) {
  constexpr const char* name = "reduce";
  const std::uint32_t root_rank = mesh.rank_of(root);
  // 1. This rank's arrays combined on the host, in local order: no array but the root's is ever
  // written.
  const std::size_t n = arrays[0].size();
  auto inputs = staging<T>(n * arrays.size());
  copy_to_host(name, arrays, inputs, deadline);
  const std::span<T> acc(inputs.get(), n);
  for (std::size_t i = 1; i < arrays.size(); ++i)
    combine_on_host(plan.local_op, acc, std::span<const T>(inputs.get() + i * n, n));
  // 2. Across the processes, into the root's rank.
  mesh.session().reduce(acc, plan.mpi_op, root_rank, deadline.remaining());
  if (root_rank != mesh.rank()) return;
  // 3. On the root's rank, into the root's array.
  finish_mean(plan, acc, mesh.size());
  const Out<T>& target = arrays[root - mesh.first_index_of(root_rank)];
  PendingWork copy(inputs);
  target.device().copy_to_device(std::span<const T>(acc), target,
                                 copy.handler("the copy to " + target.device().name()));
  copy.wait(name, deadline);
}

}  // namespace xdev::distributed::detail
