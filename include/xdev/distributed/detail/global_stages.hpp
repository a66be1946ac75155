/// \file
/// The stages of the collectives over a `GlobalMesh` (<xdev/distributed/global_mesh.hpp>): the
/// deadline of a call, device work waited for within it, host staging, the operands and their
/// checks, and the start of a collective on the session's collectives thread (or its waiter). The
/// bodies built from them are in global_bodies.hpp (through one MPI collective) and
/// global_exchange.hpp (point to point). Templates over the mesh type, so that this header needs
/// only what the stages use. Not part of the public API.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/event.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/tokens.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/core/error.hpp>
#include <xdev/distributed/mpi.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/memory/array_view.hpp>
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
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
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

}  // namespace xdev::distributed::detail
