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
  // Each matrix from its first element to its last, row strides included; one whose rows lie apart
  // (a block of columns) is staged row by row, so the memory between them is left alone.
  static std::vector<detail::Staged<H>> operands(const GemmArgs<T, H>& a) {
    auto span = [](std::size_t rows, std::size_t cols, std::size_t ld) {
      return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
    };
    std::vector<detail::Staged<H>> out{
        detail::staged<T>(a.a, span(a.trans_a ? a.k : a.m, a.trans_a ? a.m : a.k, a.lda), true, false),
        detail::staged<T>(a.b, span(a.trans_b ? a.n : a.k, a.trans_b ? a.k : a.n, a.ldb), true, false),
        detail::staged<T>(a.c, span(a.m, a.n, a.ldc), a.beta != T(0), true)};
    auto by_rows = [](detail::Staged<H>& s, std::size_t rows, std::size_t cols, std::size_t ld) {
      if (ld != cols && rows > 1 && cols > 0) {
        s.row_bytes = cols * sizeof(T);
        s.row_stride = ld * sizeof(T);
      }
    };
    by_rows(out[0], a.trans_a ? a.k : a.m, a.trans_a ? a.m : a.k, a.lda);
    by_rows(out[1], a.trans_b ? a.n : a.k, a.trans_b ? a.k : a.n, a.ldb);
    by_rows(out[2], a.m, a.n, a.ldc);
    return out;
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

namespace detail {
// The row stride of a 2-D `gemm` operand as stored: its width for an array or a contiguous window,
// the window's row stride for a block of columns.
template <class X>
std::size_t row_stride(const X& x) {
  if constexpr (is_view_operand<X>) {
    if (!x.is_contiguous()) return static_cast<std::size_t>(x.stride(0));
  }
  return static_cast<std::size_t>(x.shape()[1]);
}
}  // namespace detail

/// Row-major matrix multiply: `c = alpha * op(a) * op(b) + beta * c`, all three 2-D. With
/// `beta == 0`, `c` is not read. Inside a matching autocast scope, f32 inputs are rounded to the
/// device's autocast dtype and accumulated in f32. Each of `a`, `b`, `c` may also be a window:
/// contiguous, or a block of columns (rows contiguous, apart by the array's row stride, which
/// becomes the op's `lda`/`ldb`/`ldc`); `c` must share no element with `a` or `b`.
template <concepts::Queue Q, class A, class B2, class C, class Token = const use_future_t&>
requires detail::input_of<A, detail::backend_of<Q>> &&
    detail::input_of_type<B2, detail::backend_of<Q>, detail::value_of<A>> &&
    detail::output_of_type<C, detail::backend_of<Q>, detail::value_of<A>> && detail::is_arith<detail::value_of<A>>
auto gemm(const Q& q, const A& a, const B2& b, C&& c, GemmOptions<detail::value_of<A>> opt = {},
          Token&& token = use_future) {
  using T = detail::value_of<A>;
  const auto& s = detail::stream_of(q);
  detail::check_array("gemm", "a", a, s.device(), true);
  detail::check_array("gemm", "b", b, s.device(), true);
  detail::check_array("gemm", "c", c, s.device(), true);
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
                                                detail::row_stride(a),
                                                detail::handle(b),
                                                detail::row_stride(b),
                                                opt.beta,
                                                detail::handle(c),
                                                detail::row_stride(c),
                                                autocast_compute_dtype(capabilities_of(s.device()), dtype_of<T>)};
  return detail::submit_op(s, args, detail::offsets_of(a, b, c), std::forward<Token>(token));
}

}  // namespace xdev::ops
