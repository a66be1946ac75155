/// \file
/// The op table of the plugin ABI: one row per `xdev_*_args` struct (`c_op<C>`) giving its
/// `XDEV_OP_*` code, the table entry that runs it, the ABI minor that added that entry, the
/// `ops::*Args` it stands for, and what the plugin side checks before running it. `PluginBackend`
/// (C++ to C) and the table `XDEV_DEFINE_PLUGIN` generates (C to C++) are written once over these
/// rows; the per-op marshaling is `to_c` / `to_args` (<xdev/plugin/detail/op_marshal.hpp>).
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/core/error.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/plugin/detail/op_marshal.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace xdev::plugin::detail {

/// The row of C struct `C`: specialized below for every `xdev_*_args`.
template <class C>
struct c_op;

/// Calls `f(std::type_identity<T>{})` for the element type of every dtype.
template <class F>
constexpr void each_dtype(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::type_identity<dtype_type<I>>{}), ...);
  }
  (std::make_index_sequence<XDEV_DTYPE_COUNT>{});
}

/// The common part of the rows of ops with one element dtype (`C::dtype`), whose C++ arguments
/// are `Args<T, H>`.
template <class C, template <class, class> class Args>
struct single_dtype_op {
  /// Calls `f(std::type_identity<Args<T, H>>{}, make)` for the element type T of `c.dtype`;
  /// `make()` gives those arguments. \throws xdev::error for a value that is no dtype.
  template <class H, class F>
  static void visit(const C& c, F&& f) {
    visit_dtype(c.dtype, [&]<class T>(std::type_identity<T>) {
      f(std::type_identity<Args<T, H>>{}, [&] { return to_args<T, H>(c); });
    });
  }
  static std::string dtypes(const C& c) { return dtype_name(c.dtype); }
  static void check(const C&) {}
  /// Calls `f(std::type_identity<Args<T, H>>{})` for every element type T (for the dtype masks).
  template <class H, class F>
  static constexpr void each_type(F&& f) {
    each_dtype([&]<class T>(std::type_identity<T>) { f(std::type_identity<Args<T, H>>{}, dtype_value<T>()); });
  }
};

/// The common part of the rows of ops with two dtypes (gather: element and index; convert: source
/// and destination), whose C++ arguments are `Args<T, U, H>`; their dtype mask bit is `t * 8 + u`.
template <class C, template <class, class, class> class Args, std::uint32_t C::*First, std::uint32_t C::*Second>
struct pair_dtype_op {
  template <class H, class F>
  static void visit(const C& c, F&& f) {
    visit_dtype(c.*First, [&]<class T>(std::type_identity<T>) {
      visit_dtype(c.*Second, [&]<class U>(std::type_identity<U>) {
        f(std::type_identity<Args<T, U, H>>{}, [&] { return to_args<T, U, H>(c); });
      });
    });
  }
  static void check(const C&) {}
  template <class H, class F>
  static constexpr void each_type(F&& f) {
    each_dtype([&]<class T>(std::type_identity<T>) {
      each_dtype([&]<class U>(std::type_identity<U>) {
        f(std::type_identity<Args<T, U, H>>{}, dtype_value<T>() * XDEV_DTYPE_COUNT + dtype_value<U>());
      });
    });
  }
};

// The compute dtype of dot and gemm must be a floating-point dtype.
inline void check_compute_dtype(std::uint32_t compute) {
  if (compute != XDEV_DTYPE_F16 && compute != XDEV_DTYPE_BF16 && compute != XDEV_DTYPE_F32 && compute != XDEV_DTYPE_F64)
    throw error(errc::invalid_argument, "compute_dtype " + dtype_name(compute) + " is not a floating-point dtype");
}

// Every row: code, name (of the entry and the op), the C struct's name, the entry and the ABI
// minor since which the table has it.
#define XDEV_DETAIL_C_OP_HEADER(Entry, Code, Minor)             \
  static constexpr std::uint32_t code = Code;                   \
  static constexpr const char* name = #Entry;                   \
  static constexpr const char* c_name = "xdev_" #Entry "_args"; \
  static constexpr auto entry = &xdev_plugin_api::Entry;        \
  static constexpr std::uint32_t minor = Minor;                 \
  static constexpr std::size_t entry_end = offsetof(xdev_plugin_api, Entry) + sizeof(xdev_plugin_api::Entry)

template <>
struct c_op<xdev_fill_args> : single_dtype_op<xdev_fill_args, ops::FillArgs> {
  XDEV_DETAIL_C_OP_HEADER(fill, XDEV_OP_FILL, 1);
};
template <>
struct c_op<xdev_scale_args> : single_dtype_op<xdev_scale_args, ops::ScaleArgs> {
  XDEV_DETAIL_C_OP_HEADER(scale, XDEV_OP_SCALE, 1);
};
template <>
struct c_op<xdev_axpy_args> : single_dtype_op<xdev_axpy_args, ops::AxpyArgs> {
  XDEV_DETAIL_C_OP_HEADER(axpy, XDEV_OP_AXPY, 1);
};
template <>
struct c_op<xdev_binary_args> : single_dtype_op<xdev_binary_args, ops::BinaryArgs> {
  XDEV_DETAIL_C_OP_HEADER(binary, XDEV_OP_BINARY, 1);
  /// An unknown operator is the error, whatever the dtype.
  static void check(const xdev_binary_args& c) { (void)binary_op_from(c.op); }
};
template <>
struct c_op<xdev_sum_args> : single_dtype_op<xdev_sum_args, ops::SumArgs> {
  XDEV_DETAIL_C_OP_HEADER(sum, XDEV_OP_SUM, 1);
};
template <>
struct c_op<xdev_sum_axis_args> : single_dtype_op<xdev_sum_axis_args, ops::SumAxisArgs> {
  XDEV_DETAIL_C_OP_HEADER(sum_axis, XDEV_OP_SUM_AXIS, 1);
};
template <>
struct c_op<xdev_dot_args> : single_dtype_op<xdev_dot_args, ops::DotArgs> {
  XDEV_DETAIL_C_OP_HEADER(dot, XDEV_OP_DOT, 1);
  static void check(const xdev_dot_args& c) { check_compute_dtype(c.compute_dtype); }
};
template <>
struct c_op<xdev_gemm_args> : single_dtype_op<xdev_gemm_args, ops::GemmArgs> {
  XDEV_DETAIL_C_OP_HEADER(gemm, XDEV_OP_GEMM, 1);
  static void check(const xdev_gemm_args& c) { check_compute_dtype(c.compute_dtype); }
};
template <>
struct c_op<xdev_gather_args>
    : pair_dtype_op<xdev_gather_args, ops::GatherArgs, &xdev_gather_args::dtype, &xdev_gather_args::index_dtype> {
  XDEV_DETAIL_C_OP_HEADER(gather, XDEV_OP_GATHER, 1);
  static std::string dtypes(const xdev_gather_args& c) {
    return dtype_name(c.dtype) + " with " + dtype_name(c.index_dtype) + " indices";
  }
};
template <>
struct c_op<xdev_rng_args> : single_dtype_op<xdev_rng_args, ops::RngArgs> {
  XDEV_DETAIL_C_OP_HEADER(rng, XDEV_OP_RNG, 1);
  static void check(const xdev_rng_args& c) {
    if (c.algorithm != XDEV_RNG_PHILOX && c.algorithm != XDEV_RNG_THREE_FRY)
      throw error(errc::invalid_argument, "rng: algorithm " + std::to_string(c.algorithm) +
                                              " is not an XDEV_RNG_* value (0 philox, 1 three_fry)");
  }
};
template <>
struct c_op<xdev_convert_args>
    : pair_dtype_op<xdev_convert_args, ops::ConvertArgs, &xdev_convert_args::src_dtype, &xdev_convert_args::dst_dtype> {
  XDEV_DETAIL_C_OP_HEADER(convert, XDEV_OP_CONVERT, 1);
  static std::string dtypes(const xdev_convert_args& c) {
    return dtype_name(c.src_dtype) + " to " + dtype_name(c.dst_dtype);
  }
};
template <>
struct c_op<xdev_exp_args> : single_dtype_op<xdev_exp_args, ops::ExpArgs> {
  XDEV_DETAIL_C_OP_HEADER(exp, XDEV_OP_EXP, 4);  // exp_minor (plugin_backend.hpp)
};

#undef XDEV_DETAIL_C_OP_HEADER

/// The C struct of the op of `Args` (`xdev_fill_args` for `ops::FillArgs<T, xdev_memory>`, ...).
template <class Args>
using c_args_of = decltype(to_c(std::declval<const Args&>()));

/// Calls `f(std::type_identity<c_op<C>>{})` for every row, in `XDEV_OP_*` order.
template <class F>
constexpr void each_c_op(F&& f) {
  f(std::type_identity<c_op<xdev_fill_args>>{});
  f(std::type_identity<c_op<xdev_scale_args>>{});
  f(std::type_identity<c_op<xdev_axpy_args>>{});
  f(std::type_identity<c_op<xdev_binary_args>>{});
  f(std::type_identity<c_op<xdev_sum_args>>{});
  f(std::type_identity<c_op<xdev_sum_axis_args>>{});
  f(std::type_identity<c_op<xdev_dot_args>>{});
  f(std::type_identity<c_op<xdev_gemm_args>>{});
  f(std::type_identity<c_op<xdev_gather_args>>{});
  f(std::type_identity<c_op<xdev_rng_args>>{});
  f(std::type_identity<c_op<xdev_convert_args>>{});
  f(std::type_identity<c_op<xdev_exp_args>>{});
}

}  // namespace xdev::plugin::detail
