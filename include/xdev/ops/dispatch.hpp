/// \file
/// How a portable op reaches a device: the op table (`op_traits<Args>`, one specialization per
/// `*Args` struct, beside the op's API in its family header), the one decision "the backend's own
/// member, or the CPU fallback" (`has_native_op`, `runs_natively`), the checks every op makes
/// before submitting, and the submission itself. See docs/ops.md and, for adding an op,
/// docs/writing-a-backend.md.
///
/// Dispatch (`ops::detail::launch_op`, one function for every op): the backend's member of the
/// op's name taking that `*Args` struct runs it, unless the backend's optional
/// `implements(op, t, t2)` hook refuses the dtypes (or, for the element-wise binary ops, its
/// `implements_binary(op)` hook refuses the operator: `concepts::DeclaresBinaryOps`); a backend
/// without that member, or that refuses, gets the CPU fallback (operands copied to the host,
/// computed there with <xdev/kernels/>, results copied back), counted by the metric
/// `fallback.<op>`. Another kind of queue (an `AnyDevice`) plugs in by specializing
/// `op_launcher`.
#pragma once

#include <xdev/async/queue.hpp>
#include <xdev/async/stream.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/core/detail/hooks.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/device/device.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/fallback.hpp>
#include <xdev/ops/op_args.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::ops {

/// The op table's host side: for each `*Args` struct, a specialization (in the op's family
/// header) saying how the CPU fallback runs it:
///
///     static const char* name(const Args&);                       // the fallback metric's suffix
///     static std::vector<Staged<H>> operands(const Args&);        // what the fallback stages
///     static void compute(const Args&, std::vector<std::byte*>&); // the fallback's host kernel
///
/// Its backend side, `op_info<Args>` in <xdev/ops/op_args.hpp>, gives the kind, the dtypes and
/// the backend member (`has_native_op`).
template <class Args>
struct op_traits;

/// How an op reaches a device of handle type `D`: `op_launcher<D>::launch(d, args, done)` (the
/// backend's member or the CPU fallback) and `op_launcher<D>::launch_fallback(d, args, done)` (the
/// CPU fallback). Defined here for `Device<B>`; <xdev/any/any_device.hpp> specializes it for
/// `AnyDevice`.
template <class D>
struct op_launcher;

namespace detail {

template <concepts::DeviceHandle D>
auto stream_of(const D& d) {
  return d.default_stream();
}
template <concepts::Queue S>
requires(!concepts::DeviceHandle<S>) const S& stream_of(const S& s) {
  return s;
}

template <class Q>
using backend_of = typename Q::backend_type;

[[noreturn]] inline void invalid(const char* op, const std::string& what) {
  throw error(errc::invalid_argument, std::string(op) + ": " + what);
}

// Unqualified `capabilities_of` calls below find the `AnyDevice` overload by argument-dependent lookup.
template <class D>
void check_dtype(const char* op, DType t, const D& d) {
  if (!capabilities_of(d).supports(t))
    throw error(errc::unimplemented,
                std::string(op) + ": dtype " + std::string(name_of(t)) + " is not supported by " + d.name());
}

template <class T, class B, class D>
void check_array(const char* op, const char* what, const Array<T, B>& a, const D& d) {
  if (a.device() != d) {
    std::string where = a.device().valid() ? a.device().name() : "no device";
    if (a.device().valid() && !a.device().same_runtime(d) && a.device().name() == d.name())
      where += " of another runtime";
    invalid(op, std::string(what) + " is on " + where + ", not on " + d.name());
  }
  if constexpr (HasDType<T>) check_dtype(op, dtype_of<T>, d);
}

template <class T, class U, class B>
void check_same_shape(const char* op, const Array<T, B>& a, const char* an, const Array<U, B>& b, const char* bn) {
  if (a.shape() != b.shape())
    invalid(op, std::string(an) + " has shape " + to_string(a.shape()) + " but " + bn + " has shape " +
                    to_string(b.shape()));
}

// Rejects an output that is one of the inputs, for ops whose kernels read inputs after writing outputs.
template <class T, class B>
void check_not_same(const char* op, const Array<T, B>& out, const char* out_name, const Array<T, B>& in,
                    const char* in_name) {
  if (&out == &in || (out.size() != 0 && out.buffer().native_handle() == in.buffer().native_handle()))
    invalid(op, std::string(out_name) + " is the same array as " + in_name +
                    "; the output must not share memory with an input");
}

template <class T>
inline constexpr bool is_arith = std::is_same_v<T, float> || std::is_same_v<T, double>;

// The handle of an array's memory (the backend's `memory_handle`, or an erased one).
template <class T, class B>
auto handle(const Array<T, B>& a) {
  return a.buffer().native_handle();
}

template <class T, class H>
Staged<H> staged(H h, std::size_t n, bool read, bool written) {
  return {h, n * sizeof(T), read, written};
}

}  // namespace detail

/// The one native-or-fallback decision, at run time: false when backend `b` has the `implements`
/// hook and it refuses these arguments' dtypes, or, for a binary op, the `implements_binary` hook
/// and it refuses the operator. An op runs natively when the backend has its member
/// (`has_native_op<B, Args>`) and this is true; otherwise it runs through the CPU fallback.
template <class B, class Args>
bool runs_natively(const B& b, const Args& args) noexcept {
  using info = detail::op_info<Args>;
  if constexpr (info::known && info::kind == OpKind::binary && concepts::DeclaresBinaryOps<B>) {
    if (!static_cast<bool>(b.implements_binary(args.op))) return false;
  } else {
    (void)args;
  }
  if constexpr (concepts::DeclaresOps<B> && info::known)
    return static_cast<bool>(b.implements(info::kind, info::dtype, info::dtype2));
  else
    return true;
}

namespace detail {

// Whether the fallback code of an op with a member must exist: only when `implements` may refuse
// (or, for a binary op, `implements_binary`).
template <class B, class Args>
inline constexpr bool may_refuse = concepts::DeclaresOps<B> ||
                                   (op_info<Args>::kind == OpKind::binary && concepts::DeclaresBinaryOps<B>);

/// Runs the op of `args` on `dev` through the CPU fallback (counted in `fallback.<op>`), whatever
/// the backend has.
template <class B, class Args>
void launch_fallback(const Device<B>& dev, const Args& args, Completion done) {
  using traits = op_traits<Args>;
  if (tools::active()) tools::detail::instant(tools::Category::fallback, traits::name(args), dev.name());
  run_fallback<B>(
      traits::name(args), dev.backend(), dev.ordinal(), traits::operands(args),
      [args](std::vector<std::byte*>& p) { traits::compute(args, p); }, std::move(done));
}

/// Runs the op of `args` on `dev`: the backend's member, or the CPU fallback.
template <class B, class Args>
void launch_op(const Device<B>& dev, const Args& args, Completion done) {
  constexpr bool member = has_native_op<B, Args>;
  if constexpr (member) {
    if (runs_natively(dev.backend(), args)) return call_native(dev.backend(), dev.ordinal(), args, std::move(done));
  }
  if constexpr (!member || may_refuse<B, Args>) launch_fallback(dev, args, std::move(done));
}

template <class D, class Args>
void launch(const D& dev, const Args& args, Completion done) {
  op_launcher<D>::launch(dev, args, std::move(done));
}

// What profiler hooks are told about the op of `args` (its name and element type).
template <class Args>
xdev::detail::activity_tag op_activity(const Args& args) noexcept {
  xdev::detail::activity_tag t{tools::Category::op, op_traits<Args>::name(args), nullptr, 0};
  if constexpr (op_info<Args>::known) t.dtype = name_of(op_info<Args>::dtype).data();
  return t;
}

// Submits an op without a result on `s`: `launch_op(device, args)` once it reaches the device.
template <class S, class Args, class Token>
auto submit_op(const S& s, const Args& args, Token&& token) {
  return s.template submit<void>(
      nullptr,
      xdev::detail::queue_ordered([dev = s.device(), args](Completion done) { launch(dev, args, std::move(done)); },
                                  op_activity(args)),
      std::forward<Token>(token));
}

// Submits an op producing a `T` through `args.result` (`sum`, `dot`).
template <class T, class S, class Args, class Token>
auto submit_op_with_result(const S& s, const Args& args, Token&& token) {
  auto slot = std::make_shared<xdev::detail::result_slot<T>>();
  return s.template submit<T>(slot,
                              xdev::detail::queue_ordered(
                                  [dev = s.device(), args = Args(args), slot](Completion done) mutable {
                                    args.result = &slot->value.emplace();
                                    launch(dev, args, std::move(done));
                                  },
                                  op_activity(args)),
                              std::forward<Token>(token));
}

// Submits the op of `args` on `s` to run through the CPU fallback, whatever the backend has: for
// element types that no backend member takes (the ops' members take f32 and f64).
template <class S, class Args, class Token>
auto submit_fallback(const S& s, const Args& args, Token&& token) {
  return s.template submit<void>(nullptr,
                                 xdev::detail::queue_ordered(
                                     [dev = s.device(), args](Completion done) {
                                       op_launcher<std::decay_t<decltype(dev)>>::launch_fallback(dev, args,
                                                                                                 std::move(done));
                                     },
                                     op_activity(args)),
                                 std::forward<Token>(token));
}

}  // namespace detail

/// A typed device: the dispatch above.
template <class B>
struct op_launcher<Device<B>> {
  template <class Args>
  static void launch(const Device<B>& dev, const Args& args, Completion done) {
    detail::launch_op(dev, args, std::move(done));
  }
  template <class Args>
  static void launch_fallback(const Device<B>& dev, const Args& args, Completion done) {
    detail::launch_fallback(dev, args, std::move(done));
  }
};

}  // namespace xdev::ops
