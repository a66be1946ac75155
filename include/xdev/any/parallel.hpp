/// \file
/// User C++ kernels through `AnyDevice`: `parallel_for` and `parallel_reduce` on any device that
/// `runs_kernels()` (a backend that launches user kernels, or one whose memory the host addresses:
/// there the whole range runs as one host task in device order), and `host_data` to reach an erased
/// buffer's elements from a kernel.
///
///     xdev::AnyArray<float> a = ...;
///     float* p = xdev::host_data(a);
///     xdev::parallel_for(dev, a.size(), [p](std::size_t i) { p[i] = 2 * p[i] + 1; });
///     double s = xdev::parallel_reduce(dev, a.size(), [p](std::size_t i) { return double(p[i]); },
///                                      xdev::Sum<double>{}).get();
///
/// Kernels go through the stream, the in-flight bound and the completion tokens like every other
/// operation, and profiler hooks see them as ops named "parallel_for" and "parallel_reduce".
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/async/submit.hpp>
#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/error.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/ops/parallel_for.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace xdev {

namespace detail {
inline void require_kernels(const AnyDevice& d, const char* what) {
  if (!d.valid()) throw error(errc::invalid_argument, std::string(what) + ": the handle names no device");
  if (!d.runs_kernels())
    throw error(errc::unimplemented, std::string(what) + ": " + d.name() +
                                         " cannot run a C++ kernel: its memory is not host-accessible and its "
                                         "backend does not launch user kernels (its portable ops still run)");
}
}  // namespace detail

/// The host address of `b`'s elements.
/// \throws xdev::error `errc::unimplemented` when the device's memory is not host-accessible.
template <class T>
[[nodiscard]] T* host_data(const AnyBuffer<T>& b) {
  if (b.empty()) return nullptr;
  if (!b.device().host_accessible())
    throw error(errc::unimplemented, "host_data: the memory of " + b.device().name() + " is not host-accessible");
  return static_cast<T*>(b.device().model().host_address(b.native_handle()));
}
/// As above, for an array's elements.
template <class T>
[[nodiscard]] T* host_data(const AnyArray<T>& a) {
  return host_data(a.buffer());
}

/// The host address of a view's first element (null for an empty view); element (i, j, ...) is
/// at `i * v.stride(0) + j * v.stride(1) + ...` from it, so a kernel indexes a strided window
/// through its strides. `const` elements for a view of a `const` array.
/// \throws xdev::error `errc::unimplemented` when the device's memory is not host-accessible,
///         `errc::invalid_argument` for a default-constructed view (of no array).
template <class T>
[[nodiscard]] T* host_data(const AnyArrayView<T>& v) {
  const auto& b = v.buffer();
  if (v.empty()) return nullptr;
  return host_data(b) + v.offset();
}

/// Runs `f(i)` for every i in [0, n) on `s`'s device (see the file comment), in stream order.
/// \throws xdev::error `errc::unimplemented` naming the device when it cannot run a C++ kernel
///         (nothing is submitted).
template <class F, class Token = const use_future_t&>
requires std::is_invocable_v<const F&, std::size_t>
auto parallel_for(const AnyStream& s, std::size_t n, F f, Token&& token = use_future) {
  detail::require_kernels(s.device(), "parallel_for");
  ops::LaunchArgs args{n, 0, [f = std::move(f)](std::size_t begin, std::size_t end) {
                         for (std::size_t i = begin; i < end; ++i) f(i);
                       }};
  return s.template submit<void>(nullptr,
                                 detail::queue_ordered(
                                     [dev = s.device(), args = std::move(args)](Completion done) mutable {
                                       dev.model().launch(std::move(args), dev.keep_alive(std::move(done)));
                                     },
                                     detail::activity_tag{tools::Category::op, "parallel_for"}),
                                 std::forward<Token>(token));
}
/// `parallel_for` on `dev`'s default stream.
template <class F, class Token = const use_future_t&>
requires std::is_invocable_v<const F&, std::size_t>
auto parallel_for(const AnyDevice& dev, std::size_t n, F f, Token&& token = use_future) {
  detail::require_kernels(dev, "parallel_for");
  return parallel_for(dev.default_stream(), n, std::move(f), std::forward<Token>(token));
}

/// Folds `f(i)` for every i in [0, n) with `reducer` (`Sum`, `Min`, `Max`, `Reducer{init, op}`) on
/// `s`'s device, in stream order; the result comes through the token (a `std::future<T>` by
/// default). Partial results are folded in the order of their ranges.
/// \throws xdev::error `errc::unimplemented` naming the device when it cannot run a C++ kernel.
template <class F, ReducerType R, class Token = const use_future_t&>
requires std::is_invocable_r_v<typename R::value_type, const F&, std::size_t>
auto parallel_reduce(const AnyStream& s, std::size_t n, F f, R reducer, Token&& token = use_future) {
  using T = typename R::value_type;
  detail::require_kernels(s.device(), "parallel_reduce");
  auto slot = std::make_shared<detail::result_slot<T>>();
  auto [args, wrap] = ops::detail::reduce_launch(n, std::move(reducer), std::move(f), slot);
  return s.template submit<T>(
      slot,
      detail::queue_ordered(
          [dev = s.device(), args = std::move(args), wrap = std::move(wrap)](Completion done) mutable {
            dev.model().launch(std::move(args), wrap(dev.keep_alive(std::move(done))));
          },
          detail::activity_tag{tools::Category::op, "parallel_reduce"}),
      std::forward<Token>(token));
}
/// `parallel_reduce` on `dev`'s default stream.
template <class F, ReducerType R, class Token = const use_future_t&>
requires std::is_invocable_r_v<typename R::value_type, const F&, std::size_t>
auto parallel_reduce(const AnyDevice& dev, std::size_t n, F f, R reducer, Token&& token = use_future) {
  detail::require_kernels(dev, "parallel_reduce");
  return parallel_reduce(dev.default_stream(), n, std::move(f), std::move(reducer), std::forward<Token>(token));
}

}  // namespace xdev
