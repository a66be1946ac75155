/// \file
/// `xdev::parallel_for` and `xdev::parallel_reduce`: a user C++ kernel over [0, n) on a device whose
/// backend runs user kernels (`concepts::LaunchableBackend`), and the reducers (`Sum`, `Min`, `Max`,
/// `Reducer`). <xdev/any/parallel.hpp> has both for `AnyDevice`. See docs/ops.md.
#pragma once

#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/backend/concepts.hpp>
#include <xdev/ops/dispatch.hpp>
#include <xdev/ops/op_args.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev {

namespace concepts {
/// A backend that runs user C++ kernels: `b.launch(device, ops::LaunchArgs, done)` calls
/// `args.kernel(begin, end)` on disjoint ranges covering [0, n), possibly in parallel.
template <class B>
concept LaunchableBackend = Backend<B> && requires(B& b, std::size_t d, ops::LaunchArgs a, Completion c) {
  b.launch(d, std::move(a), std::move(c));
};
}  // namespace concepts

/// How `parallel_reduce` combines values (Kokkos' reducers, `std::reduce`'s operation): a
/// `value_type`, its `identity()`, and `combine(a, b)`, which must be associative (the order of
/// the partial results is fixed, so a non-commutative one works too).
template <class R>
concept ReducerType = requires(const R& r, const typename R::value_type& a) {
  { r.identity() } -> std::convertible_to<typename R::value_type>;
  { r.combine(a, a) } -> std::convertible_to<typename R::value_type>;
};

/// The sum (identity 0).
template <class T>
struct Sum {
  using value_type = T;
  [[nodiscard]] T identity() const { return T{}; }
  [[nodiscard]] T combine(const T& a, const T& b) const { return a + b; }
};

/// The smallest value (identity: the largest `T`, or +infinity).
template <class T>
struct Min {
  using value_type = T;
  [[nodiscard]] T identity() const {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  }
  [[nodiscard]] T combine(const T& a, const T& b) const { return b < a ? b : a; }
};

/// The largest value (identity: the lowest `T`, or -infinity).
template <class T>
struct Max {
  using value_type = T;
  [[nodiscard]] T identity() const {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  }
  [[nodiscard]] T combine(const T& a, const T& b) const { return a < b ? b : a; }
};

/// A reducer of your own: `Reducer{neutral, op}`, where `neutral` is `op`'s identity (0 for +, 1
/// for *): it starts every range's partial result, so it must leave any value unchanged
/// (`Reducer{1.0, std::multiplies<>{}}`).
template <class T, class Op>
struct Reducer {
  using value_type = T;
  T neutral;
  Op op;
  [[nodiscard]] T identity() const { return neutral; }
  [[nodiscard]] T combine(const T& a, const T& b) const { return std::invoke(op, a, b); }
};
template <class T, class Op>
Reducer(T, Op) -> Reducer<T, Op>;

namespace ops::detail {

// The kernel and result of a `parallel_reduce`: each range folds its elements into a partial
// result; at the end the partials are folded in the order of their ranges, so the result does not
// depend on which range finished first.
template <class R, class F>
struct ReduceState {
  using T = typename R::value_type;
  ReduceState(R r, F f) : reducer(std::move(r)), map(std::move(f)) {}
  R reducer;
  F map;
  std::mutex m;
  std::vector<std::pair<std::size_t, T>> partials;

  void run(std::size_t begin, std::size_t end) {
    T acc = reducer.identity();
    for (std::size_t i = begin; i < end; ++i) acc = reducer.combine(acc, map(i));
    std::lock_guard lk(m);
    partials.emplace_back(begin, std::move(acc));
  }
  T finish() {
    std::sort(partials.begin(), partials.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    T r = reducer.identity();
    for (auto& p : partials) r = reducer.combine(r, p.second);
    return r;
  }
};

// The launch arguments and the completion wrapper of a reduction whose result goes to `slot`.
template <class R, class F, class Slot>
std::pair<LaunchArgs, std::function<Completion(Completion)>> reduce_launch(std::size_t n, R reducer, F f,
                                                                           std::shared_ptr<Slot> slot) {
  auto state = std::make_shared<ReduceState<R, F>>(std::move(reducer), std::move(f));
  LaunchArgs args{n, 0, [state](std::size_t b, std::size_t e) { state->run(b, e); }};
  auto wrap = [state, slot](Completion done) {
    return Completion([state, slot, done = std::move(done)](std::exception_ptr ep) mutable {
      if (!ep) {
        try {
          slot->value.emplace(state->finish());
        } catch (...) {
          ep = std::current_exception();
        }
      }
      done(ep);
    });
  };
  return {std::move(args), std::move(wrap)};
}

}  // namespace ops::detail

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

/// Folds `f(i)` for every i in [0, n) with `reducer` on the device, in parallel where the backend
/// can, and delivers the result through the token (a `std::future<T>` by default; signature
/// `void(std::exception_ptr, T)`). Partial results are folded in the order of their ranges.
/// `f` must be safe to call concurrently and may only touch memory the host can address.
///
///     auto total = xdev::parallel_reduce(dev, n, [p](std::size_t i) { return p[i]; }, xdev::Sum<double>{}).get();
template <concepts::Queue Q, class F, ReducerType R, class Token = const use_future_t&>
requires concepts::LaunchableBackend<ops::detail::backend_of<Q>> &&
    std::is_invocable_r_v<typename R::value_type, const F&, std::size_t>
auto parallel_reduce(const Q& q, std::size_t n, F f, R reducer, Token&& token = use_future) {
  using T = typename R::value_type;
  const auto& s = ops::detail::stream_of(q);
  auto slot = std::make_shared<detail::result_slot<T>>();
  auto [args, wrap] = ops::detail::reduce_launch(n, std::move(reducer), std::move(f), slot);
  return s.template submit<T>(
      slot,
      [dev = s.device(), args = std::move(args), wrap = std::move(wrap)](Completion done) mutable {
        dev.backend().launch(dev.ordinal(), std::move(args), wrap(std::move(done)));
      },
      std::forward<Token>(token));
}

}  // namespace xdev
