/// \file
/// The matrix multiply `gemm` (row-major, with transposes and scalars, autocast). See docs/ops.md.
#pragma once

#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/kernels/gemm.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/autocast.hpp>
#include <xdev/ops/dispatch.hpp>
#include <xdev/ops/fallback.hpp>
#include <xdev/ops/op_args.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::ops {

// ---- the op table row (see op_traits in <xdev/ops/dispatch.hpp>) -----------------------------

template <class T, class H>
struct op_traits<GemmArgs<T, H>> {
  static const char* name(const GemmArgs<T, H>&) noexcept { return "gemm"; }
  static std::vector<detail::Staged<H>> operands(const GemmArgs<T, H>& a) {
    return {detail::staged<T>(a.a, a.m * a.k, true, false), detail::staged<T>(a.b, a.k * a.n, true, false),
            detail::staged<T>(a.c, a.m * a.n, a.beta != T(0), true)};
  }
  static void compute(const GemmArgs<T, H>& a, std::vector<std::byte*>& p) {
    kernels::gemm(detail::fallback_parallel(), a.trans_a, a.trans_b, a.m, a.n, a.k, a.alpha,
                  reinterpret_cast<const T*>(p[0]), a.lda, reinterpret_cast<const T*>(p[1]), a.ldb, a.beta,
                  reinterpret_cast<T*>(p[2]), a.ldc, a.compute);
  }
};

// ---- matrix multiply -----------------------------------------------------------------------

/// Options of `gemm`: `C = alpha * op(A) * op(B) + beta * C`, op = transpose when asked.
template <class T>
struct GemmOptions {
  bool trans_a = false;
  bool trans_b = false;
  T alpha = T(1);
  T beta = T(0);
};

/// Row-major matrix multiply: `c = alpha * op(a) * op(b) + beta * c`, all three 2-D. With
/// `beta == 0`, `c` is not read. Inside a matching autocast scope, f32 inputs are rounded to the
/// device's autocast dtype and accumulated in f32.
template <concepts::Queue Q, class T, class Token = const use_future_t&>
requires detail::is_arith<T>
auto gemm(const Q& q, const Array<T, detail::backend_of<Q>>& a, const Array<T, detail::backend_of<Q>>& b,
          Array<T, detail::backend_of<Q>>& c, GemmOptions<T> opt = {}, Token&& token = use_future) {
  const auto& s = detail::stream_of(q);
  detail::check_array("gemm", "a", a, s.device());
  detail::check_array("gemm", "b", b, s.device());
  detail::check_array("gemm", "c", c, s.device());
  detail::check_not_same("gemm", c, "c", a, "a");
  detail::check_not_same("gemm", c, "c", b, "b");
  for (auto [arr, nm] : {std::pair{&a.shape(), "a"}, std::pair{&b.shape(), "b"}, std::pair{&c.shape(), "c"}})
    if (arr->rank() != 2) detail::invalid("gemm", std::string(nm) + " must be 2-D, but has shape " + to_string(*arr));
  const auto m = static_cast<std::size_t>(opt.trans_a ? a.shape()[1] : a.shape()[0]);
  const auto k = static_cast<std::size_t>(opt.trans_a ? a.shape()[0] : a.shape()[1]);
  const auto kb = static_cast<std::size_t>(opt.trans_b ? b.shape()[1] : b.shape()[0]);
  const auto n = static_cast<std::size_t>(opt.trans_b ? b.shape()[0] : b.shape()[1]);
  if (k != kb)
    detail::invalid("gemm", std::string("op(a) is [") + std::to_string(m) + ", " + std::to_string(k) +
                                "] but op(b) is [" + std::to_string(kb) + ", " + std::to_string(n) + "] (a " +
                                to_string(a.shape()) + ", b " + to_string(b.shape()) + "): inner dimensions differ");
  if (c.shape() != Shape{static_cast<std::int64_t>(m), static_cast<std::int64_t>(n)})
    detail::invalid("gemm", "c has shape " + to_string(c.shape()) + " but op(a)·op(b) is [" + std::to_string(m) + ", " +
                                std::to_string(n) + "]");
  GemmArgs<T, decltype(detail::handle(a))> args{opt.trans_a,
                                                opt.trans_b,
                                                m,
                                                n,
                                                k,
                                                opt.alpha,
                                                detail::handle(a),
                                                static_cast<std::size_t>(a.shape()[1]),
                                                detail::handle(b),
                                                static_cast<std::size_t>(b.shape()[1]),
                                                opt.beta,
                                                detail::handle(c),
                                                n,
                                                autocast_compute_dtype(capabilities_of(s.device()), dtype_of<T>)};
  return detail::submit_op(s, args, std::forward<Token>(token));
}

}  // namespace xdev::ops
