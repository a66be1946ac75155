/// \file
/// `xdev::parallel_for`: a user C++ kernel over [0, n) on a device whose backend runs user kernels
/// (`concepts::LaunchableBackend`). See docs/ops.md.
#pragma once

#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/ops/dispatch.hpp>
#include <xdev/ops/op_args.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace xdev {

namespace concepts {
/// A backend that runs user C++ kernels: `b.launch(device, ops::LaunchArgs, done)` calls
/// `args.kernel(begin, end)` on disjoint ranges covering [0, n), possibly in parallel.
template <class B>
concept LaunchableBackend = Backend<B> && requires(B& b, std::size_t d, ops::LaunchArgs a, Completion c) {
  b.launch(d, std::move(a), std::move(c));
};
}  // namespace concepts

/// Runs `f(i)` for every i in [0, n) on the device, in parallel where the backend can; submitted
/// like any op (signature `void(std::exception_ptr)`; the first exception `f` throws fails it).
/// `f` must be safe to call concurrently and may only touch memory the host can address.
///
///     xdev::parallel_for(dev, a.size(), [p = a.buffer().host_data()](std::size_t i) { p[i] *= 2; }).get();
template <concepts::Queue Q, class F, class Token = const use_future_t&>
requires concepts::LaunchableBackend<ops::detail::backend_of<Q>> && std::is_invocable_v<const F&, std::size_t>
auto parallel_for(const Q& q, std::size_t n, F f, Token&& token = use_future) {
  const auto& s = ops::detail::stream_of(q);
  ops::LaunchArgs args{n, 0, [f = std::move(f)](std::size_t begin, std::size_t end) {
                         for (std::size_t i = begin; i < end; ++i) f(i);
                       }};
  return s.template submit<void>(
      nullptr,
      [dev = s.device(), args = std::move(args)](Completion done) mutable {
        dev.backend().launch(dev.ordinal(), std::move(args), std::move(done));
      },
      std::forward<Token>(token));
}

}  // namespace xdev
