/// \file
/// What every public collective function shares (<xdev/spmd/collectives.hpp>,
/// <xdev/spmd/exchange.hpp>): argument checks with messages that name the problem, the choice of
/// algorithm, and the Asio initiation that starts a `CollectiveRun`. Nothing here is public.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/tokens.hpp>
#include <xdev/core/detail/hooks.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/log.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/policy/policies.hpp>
#include <xdev/spmd/collective_options.hpp>
#include <xdev/spmd/detail/collective_driver.hpp>
#include <xdev/spmd/detail/collective_run.hpp>
#include <xdev/spmd/mesh.hpp>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::spmd {

namespace detail {

[[noreturn]] inline void invalid(const char* op, const std::string& what) {
  throw error(errc::invalid_argument, std::string(op) + ": " + what);
}

inline std::string describe_axes(std::span<const std::string> axes) {
  std::string out = axes.size() == 1 ? "axis " : "axes ";
  for (std::size_t i = 0; i < axes.size(); ++i) out += (i ? ", '" : "'") + axes[i] + "'";
  return out;
}

// The groups of a collective over `axes`, with `op` in front of the mesh's message.
inline std::vector<std::vector<std::size_t>> groups_of(const char* op, const Mesh& mesh,
                                                       std::span<const std::string> axes) {
  if (mesh.empty()) invalid(op, "the mesh has no devices");
  if (axes.empty()) invalid(op, "no axis was given; name at least one of the mesh's axes");
  try {
    return mesh.groups(axes);
  } catch (const error& e) {
    invalid(op, e.message());
  }
}

inline std::string where(const AnyDevice& d) {
  return d.valid() ? d.name() : std::string("no device");
}

// One array per mesh device, each valid, non-empty and on its device.
// An operand of a collective: a whole array, or a window onto one (`AnyArrayView`).
template <class A>
inline constexpr bool is_window_v = !std::is_same_v<A, AnyArray<typename A::value_type>>;

template <class T, class A>
std::vector<ArrayRef> check_arrays(const char* op, const char* name, const Mesh& mesh, std::span<const A> arrays) {
  if (arrays.size() != mesh.size())
    invalid(op, "got " + std::to_string(arrays.size()) + " arrays in `" + name + "` for a mesh of " +
                    std::to_string(mesh.size()) + " devices; pass one per mesh device, in mesh order");
  std::vector<ArrayRef> refs;
  refs.reserve(arrays.size());
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const auto& a = arrays[i];
    const std::string id = std::string(name) + "[" + std::to_string(i) + "]";
    if constexpr (is_window_v<A>) {
      bool onto_an_array = true;
      try {
        (void)a.buffer();
      } catch (const error&) {
        onto_an_array = false;
      }
      if (!onto_an_array) invalid(op, id + " is empty: a default-constructed window, onto no array");
    } else {
      if (!a.device().valid()) invalid(op, id + " is empty: it holds no memory and is on no device");
    }
    const AnyDevice& want = mesh.device(i);
    if (a.device() != want) {
      std::string at = where(a.device());
      if (!a.device().same_runtime(want) && a.device().name() == want.name()) at += " of another runtime";
      invalid(op, id + " is on " + at + ", but mesh device " + std::to_string(i) + " is " + want.name() +
                      "; pass one array per mesh device, in mesh order");
    }
    if (a.size() == 0) invalid(op, id + " on " + want.name() + " has no elements (shape " + to_string(a.shape()) + ")");
    if constexpr (is_window_v<A>) {
      if (!a.is_contiguous())
        invalid(op, id + " on " + want.name() + " is a window of shape " + to_string(a.shape()) + " in " +
                        std::to_string(a.run_count()) +
                        " separate runs; collectives take contiguous windows (whole rows): copy it into an array "
                        "of its own first");
      refs.push_back({a.device(), a.native_handle(), a.size(), a.offset()});
    } else {
      refs.push_back({a.device(), a.buffer().native_handle(), a.size(), 0});
    }
  }
  return refs;
}

// Every array of a group has the shape of the group's first.
template <class T, class A>
void check_same_shapes(const char* op, const char* name, const std::vector<std::vector<std::size_t>>& groups,
                       std::span<const A> arrays) {
  for (const auto& g : groups)
    for (std::size_t r = 1; r < g.size(); ++r) {
      const auto& a = arrays[g[r]];
      const auto& first = arrays[g[0]];
      if (a.shape() != first.shape())
        invalid(op, std::string(name) + "[" + std::to_string(g[r]) + "] on " + a.device().name() + " has shape " +
                        to_string(a.shape()) + " but " + name + "[" + std::to_string(g[0]) + "] on " +
                        first.device().name() + " has shape " + to_string(first.shape()) +
                        "; the arrays of a group must have the same shape");
    }
}

// Rejects an output that shares elements with the input of its device: the same array, or
// windows of one array that overlap.
inline void check_apart(const char* name, const CollectivePlan& plan, bool windows) {
  for (std::size_t i = 0; i < plan.in.size(); ++i) {
    const ArrayRef& a = plan.in[i];
    const ArrayRef& b = plan.out[i];
    if (a.handle != b.handle) continue;
    if (!windows) invalid(name, "out[" + std::to_string(i) + "] is the same array as in[" + std::to_string(i) + "]");
    if (a.offset < b.offset + b.count && b.offset < a.offset + a.count)
      invalid(name, "out[" + std::to_string(i) + "] and in[" + std::to_string(i) + "] are windows of one array that " +
                        "share elements (elements [" + std::to_string(b.offset) + ", " +
                        std::to_string(b.offset + b.count) + ") and [" + std::to_string(a.offset) + ", " +
                        std::to_string(a.offset + a.count) + "))");
  }
}

// A root position, checked against the size of the groups.
inline std::size_t root_of(const char* op, std::span<const std::string> axes,
                           const std::vector<std::vector<std::size_t>>& groups, std::int64_t root) {
  const auto k = static_cast<std::int64_t>(groups[0].size());
  if (root < 0 || root >= k)
    invalid(op, "root " + std::to_string(root) + " is out of range for " + describe_axes(axes) + " of size " +
                    std::to_string(k) + "; it is a position in [0, " + std::to_string(k) + ")");
  return static_cast<std::size_t>(root);
}

inline std::chrono::milliseconds timeout_of(const char* op, const CollectiveOptions& opt) {
  if (!opt.timeout) return default_collective_timeout();
  if (opt.timeout->count() <= 0)
    invalid(op, "CollectiveOptions::timeout must be > 0, got " + std::to_string(opt.timeout->count()) + " ms");
  return *opt.timeout;
}

// The first device of the plan's arrays whose memory the CPU cannot address, or null.
inline const AnyDevice* not_host_memory(const CollectivePlan& plan) {
  for (const auto* arrays : {&plan.in, &plan.out})
    for (const auto& a : *arrays)
      if (!a.device.host_accessible() || a.device.model().host_address(a.handle) == nullptr) return &a.device;
  return nullptr;
}

// The `CollectiveBackend<K>` every device of the plan states, or none when they differ.
inline std::optional<::xdev::CollectiveKind> stated_kind(const CollectivePlan& plan) {
  std::optional<::xdev::CollectiveKind> kind;
  for (const auto* arrays : {&plan.in, &plan.out})
    for (const auto& a : *arrays) {
      const auto k = a.device.capability_set().collective_backend;
      if (kind && *kind != k) return std::nullopt;
      kind = k;
    }
  return kind;
}

// How the collective runs: the option, or (`automatic`) shared memory when every array is in host
// memory; else `direct` when every device states `CollectiveBackend<direct>`; else (every device
// states `ring`, the default, or `mpi`, or they differ) direct up to the threshold and ring above.
// `bytes`: one array's size (the input's).
inline Route route_of(const char* op, const CollectiveOptions& opt, std::size_t bytes, const CollectivePlan& plan) {
  switch (opt.algorithm) {
    case CollectiveAlgorithm::ring:
      return Route::ring;
    case CollectiveAlgorithm::direct:
      return Route::direct;
    case CollectiveAlgorithm::shared_memory:
      if (const AnyDevice* d = not_host_memory(plan))
        invalid(op, "CollectiveAlgorithm::shared_memory needs every device's memory to be host memory, but " +
                        d->name() + "'s is not (host_accessible() is false); use ring, direct or automatic");
      return Route::shared_memory;
    case CollectiveAlgorithm::automatic:
      break;
    default:
      invalid(op, "unknown CollectiveAlgorithm value " + std::to_string(static_cast<int>(opt.algorithm)) +
                      "; accepted: automatic, ring, direct, shared_memory");
  }
  if (!not_host_memory(plan)) return Route::shared_memory;
  if (stated_kind(plan) == ::xdev::CollectiveKind::direct) return Route::direct;
  return bytes > opt.direct_threshold_bytes ? Route::ring : Route::direct;
}

inline const char* name_of(Route r) noexcept {
  return r == Route::ring ? "ring" : r == Route::direct ? "direct" : "shared memory";
}

// Set while a collective starts on this thread: its outcome, if it is already known then, is
// delivered later (Asio's rule for a completion inside the initiating function). Only the
// user's handler is held back; the collective's own steps complete at once, so that on idle
// devices a small collective finishes without any thread hand-off.
inline thread_local int starting_collective = 0;

template <class T>
inline constexpr bool is_floating = std::is_floating_point_v<T> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

template <class T>
ops::BinaryOp combine_of(const char* op, ReduceOp r) {
  switch (r) {
    case ReduceOp::sum:
      return ops::BinaryOp::add;
    case ReduceOp::mean:
      if constexpr (!is_floating<T>)
        invalid(op, "ReduceOp::mean needs floating-point elements, but these are " + std::string(name_of(dtype_of<T>)) +
                        " (the mean of integers is not one): use ReduceOp::sum");
      return ops::BinaryOp::add;
    case ReduceOp::min:
      return ops::BinaryOp::min;
    case ReduceOp::max:
      return ops::BinaryOp::max;
    case ReduceOp::prod:
      return ops::BinaryOp::mul;
  }
  invalid(op,
          "unknown ReduceOp value " + std::to_string(static_cast<int>(r)) + "; accepted: sum, mean, min, max, prod");
}

// Starts a validated collective when the token asks for it. Invoked as an rvalue (as Asio and
// xdev's tokens do), it moves its plan into the run; an lvalue call copies it.
template <class T>
struct collective_initiation {
  CollectivePlan plan;
  std::chrono::milliseconds timeout;
  std::shared_ptr<DeviceQueue> error_sink;

  template <class Handler>
  void operator()(Handler&& handler) && {
    launch(std::forward<Handler>(handler), std::move(plan));
  }
  template <class Handler>
  void operator()(Handler&& handler) const& {
    launch(std::forward<Handler>(handler), CollectivePlan(plan));
  }

 private:
  template <class Handler>
  void launch(Handler&& handler, CollectivePlan&& p) const {
    auto work = boost::asio::make_work_guard(boost::asio::get_associated_executor(handler));
    // At `debug`, a record when the collective starts and when it completes (progress).
    std::string traced;
    if (log::enabled(log::Level::debug)) {
      std::size_t devices = 0;
      for (const auto& g : p.groups) devices += g.size();
      traced = p.what;
      log::write(log::Level::debug, "spmd",
                 traced + ": started on " + std::to_string(devices) + " devices in " + std::to_string(p.groups.size()) +
                     " group(s), " + name_of(p.route));
    }
    auto run = std::make_shared<CollectiveRun<T>>(std::move(p));
    // Profiler hooks: the collective as one activity of the mesh's first device.
    std::uint64_t activity = 0;
    if (tools::active()) {
      activity = tools::detail::next_activity_id();
      tools::detail::emit_begin(activity_of(activity, run->what()));
    }
    // `what` is the run's: its driver calls `finish` and holds the plan meanwhile.
    CollectiveDriver::Finish finish = [q = error_sink, h = std::forward<Handler>(handler), work = std::move(work),
                                       traced = std::move(traced), activity,
                                       what = &run->what()](std::exception_ptr ep) mutable {
      if (!traced.empty()) log::write(log::Level::debug, "spmd", traced + (ep ? ": failed" : ": completed"));
      if (activity != 0) tools::detail::emit_end(activity_of(activity, *what, q), ep);
      if (starting_collective > 0) {
        xdev::detail::initiating_scope initiating;
        xdev::detail::deliver(q, std::move(h), std::move(ep));
      } else {
        xdev::detail::deliver(q, std::move(h), std::move(ep));
      }
      work.reset();
    };
    // A completion inside this call is delivered later (Asio's rule; see `starting_collective`),
    // and no submission made here blocks the caller: a device that is full or stuck must not hold
    // up the others' work.
    struct Starting {
      Starting() noexcept { ++starting_collective; }
      ~Starting() { --starting_collective; }
      Starting(const Starting&) = delete;
      Starting& operator=(const Starting&) = delete;
    } starting;
    xdev::detail::async_scope never_block;
    run->start(timeout, std::move(finish));
  }

  [[nodiscard]] tools::Activity activity_of(std::uint64_t id, const std::string& what) const noexcept {
    return activity_of(id, what, error_sink);
  }
  [[nodiscard]] static tools::Activity activity_of(std::uint64_t id, const std::string& what,
                                                   const std::shared_ptr<DeviceQueue>& sink) noexcept {
    return tools::Activity{
        id, tools::Category::collective, what, sink->name(), 0, 0, {}, std::chrono::steady_clock::now(), 0, 0, {}, {}};
  }
};

template <class T, class Token>
auto initiate(CollectivePlan plan, std::chrono::milliseconds timeout, const Mesh& mesh, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(
      collective_initiation<T>{std::move(plan), timeout, mesh.device(0).queue()}, token);
}

// Completes a validated plan (its deadline, algorithm and name; `bytes`: one array's size, the
// input's) and starts it as the token asks.
template <class T, class Token>
auto start(const char* name, CollectivePlan plan, const CollectiveOptions& opt, std::size_t bytes,
           std::span<const std::string> axes, const Mesh& mesh, Token&& token) {
  const auto timeout = timeout_of(name, opt);
  plan.route = route_of(name, opt, bytes, plan);
  plan.what = std::string(name) + " over " + describe_axes(axes);
  return initiate<T>(std::move(plan), timeout, mesh, std::forward<Token>(token));
}

}  // namespace detail

}  // namespace xdev::spmd
