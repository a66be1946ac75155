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
#include <xdev/async/tokens.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/core/detail/hooks.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/device/device.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/memory/array_view.hpp>
#include <xdev/ops/fallback.hpp>
#include <xdev/ops/op_args.hpp>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
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

// ---- operands: an array, or a window of one ------------------------------------------------

// What an op may take as an operand: an `Array<T, B>` or an `ArrayView<T, B>` (of `T` or `const
// T`). `writable` says whether the op may write through it (a view's own constness is shallow).
template <class X>
struct operand_traits {};
template <class T, class B>
struct operand_traits<Array<T, B>> {
  using value_type = T;
  using backend = B;
  static constexpr bool writable = true;
};
template <class T, class B>
struct operand_traits<const Array<T, B>> : operand_traits<Array<T, B>> {
  static constexpr bool writable = false;
};
template <class T, class B>
struct operand_traits<ArrayView<T, B>> : operand_traits<Array<T, B>> {};
template <class T, class B>
struct operand_traits<ArrayView<const T, B>> : operand_traits<const Array<T, B>> {};
template <class T, class B>
struct operand_traits<const ArrayView<T, B>> : operand_traits<ArrayView<T, B>> {};

template <class X>
using operand_t = operand_traits<std::remove_reference_t<X>>;
/// The element type of operand `X` (an array or a view, any reference).
template <class X>
using value_of = typename operand_t<X>::value_type;

/// `X` is an array or a view whose memory is of backend `B`: what an op reads.
template <class X, class B>
concept input_of = requires {
  typename operand_t<X>::value_type;
}
&&std::is_same_v<typename operand_t<X>::backend, B>;
/// What an op writes: a non-`const` array (an lvalue: a temporary's result would be lost) or a
/// view of non-`const` elements.
template <class X, class B>
concept output_of = input_of<X, B> && operand_t<X>::writable &&
    (std::is_lvalue_reference_v<X> || xdev::detail::is_array_view<std::remove_cvref_t<X>>);
/// An input of `B` whose elements are `T`.
template <class X, class B, class T>
concept input_of_type = input_of<X, B> && std::is_same_v<value_of<X>, T>;
/// An output of `B` whose elements are `T`.
template <class X, class B, class T>
concept output_of_type = output_of<X, B> && std::is_same_v<value_of<X>, T>;

// Whether `x` is a view (where its elements start in the buffer matters).
template <class X>
inline constexpr bool is_view_operand = xdev::detail::is_array_view<std::remove_cvref_t<X>>;

// The first element's place in the buffer, in elements: 0 for an array.
template <class X>
std::size_t element_offset(const X& x) noexcept {
  if constexpr (is_view_operand<X>)
    return x.offset();
  else
    return 0;
}

// `rows_may_stride`: the op takes a 2-D window whose rows are contiguous but apart (a block of
// columns: `gemm`, through its row strides).
template <class X, class D>
void check_array(const char* op, const char* what, const X& a, const D& d, bool rows_may_stride = false) {
  if constexpr (is_view_operand<X>) {
    if (a.empty() && a.shape() == Shape{0} && a.offset() == 0) {
      try {
        (void)a.buffer();
      } catch (const error&) {
        invalid(op, std::string(what) + " is a default-constructed ArrayView (a window onto no array)");
      }
    }
    if (!a.is_contiguous() && !(rows_may_stride && a.rank() == 2 && a.stride(1) == 1))
      invalid(op, std::string(what) + " is a strided view of shape " + to_string(a.shape()) + " (" +
                      std::to_string(a.run_count()) + " contiguous runs); " +
                      (rows_may_stride ? "it takes arrays, contiguous views and 2-D views whose rows are contiguous"
                                       : "ops take arrays and contiguous views") +
                      " (copy the window into an array first)");
  }
  if (a.device() != d) {
    std::string where = a.device().valid() ? a.device().name() : "no device";
    if (a.device().valid() && !a.device().same_runtime(d) && a.device().name() == d.name())
      where += " of another runtime";
    invalid(op, std::string(what) + " is on " + where + ", not on " + d.name());
  }
  if constexpr (HasDType<value_of<X>>) check_dtype(op, dtype_of<value_of<X>>, d);
}

template <class X, class Y>
void check_same_shape(const char* op, const X& a, const char* an, const Y& b, const char* bn) {
  if (a.shape() != b.shape())
    invalid(op, std::string(an) + " has shape " + to_string(a.shape()) + " but " + bn + " has shape " +
                    to_string(b.shape()));
}

// Whether operands `a` and `b` share an element: the same buffer, and an element of one window
// inside the other (exactly, for windows of one element type: interleaved blocks of columns share
// none; else by the byte ranges they span).
template <class X, class Y>
bool share_memory(const X& a, const Y& b) {
  if (a.size() == 0 || b.size() == 0) return false;
  if (static_cast<const void*>(&a.buffer()) != static_cast<const void*>(&b.buffer()) &&
      !(a.buffer().native_handle() == b.buffer().native_handle()))
    return false;
  const typename xdev::detail::view_of<const X>::type va(a);
  const typename xdev::detail::view_of<const Y>::type vb(b);
  if constexpr (std::is_same_v<value_of<X>, value_of<Y>>) {
    return xdev::detail::views_overlap(va.layout(), vb.layout());
  } else {
    auto span = [](const auto& v, std::size_t size) {
      const auto& l = v.layout();
      std::size_t last = l.offset;  // the last element's place
      for (std::size_t d = 0; d < v.rank(); ++d)
        last += static_cast<std::size_t>(v.shape()[static_cast<std::ptrdiff_t>(d)] - 1) *
                static_cast<std::size_t>(l.strides[d]);
      return std::pair{l.offset * size, (last + 1) * size};
    };
    const auto [a0, a1] = span(va, sizeof(value_of<X>));
    const auto [b0, b1] = span(vb, sizeof(value_of<Y>));
    return a0 < b1 && b0 < a1;
  }
}

// Rejects an output that shares memory with an input, for ops whose kernels read inputs after writing outputs.
template <class X, class Y>
void check_not_same(const char* op, const X& out, const char* out_name, const Y& in, const char* in_name) {
  const bool same = static_cast<const void*>(&out) == static_cast<const void*>(&in) ||
                    (share_memory(out, in) && !is_view_operand<X> && !is_view_operand<Y>);
  if (same || share_memory(out, in))
    invalid(op, std::string(out_name) + (same ? " is the same array as " : " shares memory with ") + in_name +
                    "; the output must not share memory with an input");
}

// Rejects an output that overlaps an input in part, for element-wise ops: `out` may be the input
// itself (the same elements), or apart from it.
template <class X, class Y>
void check_same_or_apart(const char* op, const X& out, const char* out_name, const Y& in, const char* in_name) {
  if (share_memory(out, in) && element_offset(out) != element_offset(in))
    invalid(op, std::string(out_name) + " overlaps " + in_name + " in part (elements from " +
                    std::to_string(element_offset(out)) + " and from " + std::to_string(element_offset(in)) +
                    " of one array); an element-wise output must be the input itself or apart from it");
}

template <class T>
inline constexpr bool is_arith = std::is_same_v<T, float> || std::is_same_v<T, double>;

// The handle of an operand's memory (the backend's `memory_handle`, or an erased one): the
// whole buffer's; a view's offset travels beside it (`OperandOffsets`).
template <class X>
auto handle(const X& a) {
  return a.buffer().native_handle();
}

template <class T, class H>
Staged<H> staged(H h, std::size_t n, bool read, bool written) {
  return {h, n * sizeof(T), read, written, 0};
}

/// Where each operand of an op starts in its buffer, in bytes, in the order of the `*Args`
/// struct's memory handles (the order `rebind_handles` maps them in, and `op_traits::operands`
/// lists them in); zero for a whole array.
struct OperandOffsets {
  std::array<std::size_t, 3> bytes{};
  [[nodiscard]] bool any() const noexcept { return (bytes[0] | bytes[1] | bytes[2]) != 0; }
};

// The offsets of operands `xs`, in the order given (the `*Args` struct's handle order).
template <class... X>
OperandOffsets offsets_of(const X&... xs) noexcept {
  static_assert(sizeof...(X) <= 3);
  OperandOffsets o;
  std::size_t i = 0;
  ((o.bytes[i++] = element_offset(xs) * sizeof(value_of<X>)), ...);
  return o;
}

// `args` with each memory handle moved `offsets` bytes on by backend `b` (`concepts::OffsetsHandles`).
template <class B, class Args>
Args shifted(const B& b, const Args& args, const OperandOffsets& offsets) {
  using H = typename B::memory_handle;
  std::size_t i = 0;
  return rebind_handles<H>(args, [&](const H& h) {
    const std::size_t by = offsets.bytes[i++];
    return by == 0 ? h : b.offset_handle(h, by);
  });
}

// The windows a backend with `concepts::OpensWindows` opened for one op's operands at an offset;
// each closes when this goes, once the op's member has returned. Two operands at the same offset
// of the same memory (an op in place on a window) share one window, as they would share the
// array's handle: OpenCL leaves writes through two overlapping sub-buffers undefined.
template <class B>
class OpWindows {
 public:
  using H = typename B::memory_handle;
  OpWindows(B& b, std::size_t device) noexcept : b_(b), device_(device) {}
  OpWindows(const OpWindows&) = delete;
  OpWindows& operator=(const OpWindows&) = delete;
  ~OpWindows() {
    for (std::size_t i = 0; i < n_; ++i) b_.close_window(device_, opened_[i].window);
  }

  /// `args` with each operand at an offset on a window; nullopt when the backend has no window at
  /// one of those offsets (the op then runs through the fallback).
  template <class Args>
  std::optional<Args> shift(const Args& args, const OperandOffsets& offsets) {
    bool all = true;
    std::size_t i = 0;
    Args moved = rebind_handles<H>(args, [&](const H& h) {
      const std::size_t by = offsets.bytes[i++];
      if (by == 0 || !all) return h;
      for (std::size_t k = 0; k < n_; ++k)
        if (opened_[k].memory == h && opened_[k].offset == by) return opened_[k].window;
      const std::optional<H> w = b_.open_window(device_, h, by);
      if (!w) {
        all = false;
        return h;
      }
      opened_[n_++] = {h, by, *w};
      return *w;
    });
    if (!all) return std::nullopt;
    return moved;
  }

 private:
  struct Opened {
    H memory{};
    std::size_t offset = 0;
    H window{};
  };
  B& b_;
  std::size_t device_;
  std::array<Opened, 3> opened_{};
  std::size_t n_ = 0;
};

// The fallback's operands of `args`, each staged from its offset.
template <class Args>
auto staged_operands(const Args& args, const OperandOffsets& offsets) {
  auto operands = op_traits<Args>::operands(args);
  for (std::size_t i = 0; i < operands.size() && i < offsets.bytes.size(); ++i) operands[i].offset = offsets.bytes[i];
  return operands;
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
/// the backend has; each operand is staged from its offset.
template <class B, class Args>
void launch_fallback(const Device<B>& dev, const Args& args, const OperandOffsets& offsets, Completion done) {
  using traits = op_traits<Args>;
  if (tools::active()) tools::detail::instant(tools::Category::fallback, traits::name(args), dev.name());
  run_fallback<B>(
      traits::name(args), dev.backend(), dev.ordinal(), staged_operands(args, offsets),
      [args](std::vector<std::byte*>& p) { traits::compute(args, p); }, std::move(done));
}

/// Runs the op of `args` on `dev`: the backend's member, or the CPU fallback. Operands at an
/// offset (windows of arrays) reach the member through `offset_handle` where the backend has it
/// (`concepts::OffsetsHandles`), or through windows it opens (`concepts::OpensWindows`) where it
/// can open them; else the fallback stages them.
template <class B, class Args>
void launch_op(const Device<B>& dev, const Args& args, const OperandOffsets& offsets, Completion done) {
  constexpr bool member = has_native_op<B, Args>;
  constexpr bool offsets_natively = concepts::OffsetsHandles<B>;
  if constexpr (member) {
    if ((offsets_natively || !offsets.any()) && runs_natively(dev.backend(), args)) {
      if constexpr (offsets_natively) {
        if (offsets.any())
          return call_native(dev.backend(), dev.ordinal(), shifted(dev.backend(), args, offsets), std::move(done));
      }
      return call_native(dev.backend(), dev.ordinal(), args, std::move(done));
    }
    if constexpr (!offsets_natively && concepts::OpensWindows<B>) {
      if (offsets.any() && runs_natively(dev.backend(), args)) {
        OpWindows<B> windows(dev.backend(), dev.ordinal());
        if (const std::optional<Args> moved = windows.shift(args, offsets))
          return call_native(dev.backend(), dev.ordinal(), *moved, std::move(done));
      }
    }
  }
  if constexpr (!member || !offsets_natively || may_refuse<B, Args>)
    launch_fallback(dev, args, offsets, std::move(done));
}

template <class D, class Args>
void launch(const D& dev, const Args& args, const OperandOffsets& offsets, Completion done) {
  op_launcher<D>::launch(dev, args, offsets, std::move(done));
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
auto submit_op(const S& s, const Args& args, const OperandOffsets& offsets, Token&& token) {
  return s.template submit<void>(
      nullptr,
      xdev::detail::queue_ordered(
          [dev = s.device(), args, offsets](Completion done) { launch(dev, args, offsets, std::move(done)); },
          op_activity(args)),
      std::forward<Token>(token));
}

// Submits an op producing a `T` through `args.result` (`sum`, `dot`).
template <class T, class S, class Args, class Token>
auto submit_op_with_result(const S& s, const Args& args, const OperandOffsets& offsets, Token&& token) {
  auto slot = std::make_shared<xdev::detail::result_slot<T>>();
  return s.template submit<T>(slot,
                              xdev::detail::queue_ordered(
                                  [dev = s.device(), args = Args(args), offsets, slot](Completion done) mutable {
                                    args.result = &slot->value.emplace();
                                    launch(dev, args, offsets, std::move(done));
                                  },
                                  op_activity(args)),
                              std::forward<Token>(token));
}

// Submits the op of `args` on `s` to run through the CPU fallback, whatever the backend has: for
// element types that no backend member takes (the ops' members take f32 and f64).
template <class S, class Args, class Token>
auto submit_fallback(const S& s, const Args& args, const OperandOffsets& offsets, Token&& token) {
  return s.template submit<void>(nullptr,
                                 xdev::detail::queue_ordered(
                                     [dev = s.device(), args, offsets](Completion done) {
                                       op_launcher<std::decay_t<decltype(dev)>>::launch_fallback(dev, args, offsets,
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
  static void launch(const Device<B>& dev, const Args& args, const detail::OperandOffsets& offsets, Completion done) {
    detail::launch_op(dev, args, offsets, std::move(done));
  }
  template <class Args>
  static void launch_fallback(const Device<B>& dev, const Args& args, const detail::OperandOffsets& offsets,
                              Completion done) {
    detail::launch_fallback(dev, args, offsets, std::move(done));
  }
};

}  // namespace xdev::ops
