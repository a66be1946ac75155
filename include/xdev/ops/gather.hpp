/// \file
/// `gather`: rows of a table by index, with the `DenseGather` lowering policy. See docs/ops.md.
#pragma once

#include <xdev/async/use_future.hpp>
#include <xdev/backend/completion.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/kernels/gather.hpp>
#include <xdev/memory/array.hpp>
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

template <class T, class I, class H>
struct op_traits<GatherArgs<T, I, H>> {
  static const char* name(const GatherArgs<T, I, H>&) noexcept { return "gather"; }
  static std::vector<detail::Staged<H>> operands(const GatherArgs<T, I, H>& a) {
    return {detail::staged<T>(a.table, a.rows * a.cols, true, false), detail::staged<I>(a.index, a.n, true, false),
            detail::staged<T>(a.out, a.n * a.cols, false, true)};
  }
  static void compute(const GatherArgs<T, I, H>& a, std::vector<std::byte*>& p) {
    kernels::gather(detail::fallback_parallel(), reinterpret_cast<const T*>(p[0]), a.rows, a.cols,
                    reinterpret_cast<const I*>(p[1]), a.n, reinterpret_cast<T*>(p[2]), a.dense);
  }
};

// ---- gather --------------------------------------------------------------------------------

/// `out[i, :] = table[index[i], :]` for a 2-D `table` [rows, cols], a 1-D `index` [n] of i32 or
/// i64, and `out` [n, cols]. The device's `DenseGather<F>` policy picks the lowering: dense when
/// `rows <= F * 10` (and F > 0), else sparse; both give bit-identical results, and the metrics
/// `gather.dense` / `gather.sparse` count which ran. An index outside [0, rows) fails the op with
/// `errc::invalid_argument` naming the index and its position, and `out` is not written.
template <concepts::Queue Q, class X, class Ix, class O, class Token = const use_future_t&>
requires detail::input_of<X, detail::backend_of<Q>> && detail::input_of<Ix, detail::backend_of<Q>> &&
    detail::output_of_type<O, detail::backend_of<Q>, detail::value_of<X>> &&
    (std::is_same_v<detail::value_of<Ix>, std::int32_t> ||
     std::is_same_v<detail::value_of<Ix>, std::int64_t>)auto gather(const Q& q, const X& table, const Ix& index,
                                                                    O&& out, Token&& token = use_future) {
  using T = detail::value_of<X>;
  using I = detail::value_of<Ix>;
  const auto& s = detail::stream_of(q);
  detail::check_array("gather", "table", table, s.device());
  detail::check_array("gather", "index", index, s.device());
  detail::check_array("gather", "out", out, s.device());
  detail::check_not_same("gather", out, "out", table, "table");
  detail::check_not_same("gather", out, "out", index, "index");
  if (table.rank() != 2) detail::invalid("gather", "table must be 2-D, but has shape " + to_string(table.shape()));
  if (index.rank() != 1) detail::invalid("gather", "index must be 1-D, but has shape " + to_string(index.shape()));
  const Shape want{index.shape()[0], table.shape()[1]};
  if (out.shape() != want)
    detail::invalid("gather", "out has shape " + to_string(out.shape()) + " but gathering " + to_string(index.shape()) +
                                  " rows of " + to_string(table.shape()) + " gives " + to_string(want));
  const auto rows = static_cast<std::size_t>(table.shape()[0]);
  const bool dense = capabilities_of(s.device()).uses_dense_gather(rows);
  metrics::counter(dense ? "gather.dense" : "gather.sparse").add();
  GatherArgs<T, I, decltype(detail::handle(table))> args{
      detail::handle(table), rows, static_cast<std::size_t>(table.shape()[1]), detail::handle(index), index.size(),
      detail::handle(out),   dense};
  return detail::submit_op(s, args, detail::offsets_of(table, index, out), std::forward<Token>(token));
}

}  // namespace xdev::ops
