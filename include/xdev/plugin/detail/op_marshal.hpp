/// \file
/// The operation arguments in both directions: `xdev::ops::*Args` (op_args.hpp) to the C
/// `xdev_*_args` structs on the host side (`to_c`), and back on the plugin side (`to_args`).
/// Memory handles travel as their bits in an `xdev_memory`; scalars as the bits of their element
/// type in the low bytes of a uint64_t, exactly as memcpy writes them.
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/policy/policies.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace xdev::plugin::detail {

/// A memory handle that can travel as an `xdev_memory`: trivially copyable, at most 8 bytes.
template <class H>
inline constexpr bool is_portable_handle = std::is_trivially_copyable_v<H> && sizeof(H) <= sizeof(xdev_memory);

/// The bits of handle `h` as an `xdev_memory` (the unused high bytes zero).
template <class H>
xdev_memory handle_bits(const H& h) noexcept {
  static_assert(is_portable_handle<H>);
  xdev_memory m = 0;
  std::memcpy(&m, &h, sizeof(H));
  return m;
}

/// The handle whose bits `handle_bits` wrote.
template <class H>
H handle_from(xdev_memory m) noexcept {
  static_assert(is_portable_handle<H>);
  H h{};
  std::memcpy(&h, &m, sizeof(H));
  return h;
}

/// The bits of scalar `v` in the low bytes of a uint64_t.
template <class T>
std::uint64_t scalar_bits(const T& v) noexcept {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(std::uint64_t));
  std::uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}

/// The scalar whose bits `scalar_bits` wrote.
template <class T>
T scalar_from(std::uint64_t b) noexcept {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(std::uint64_t));
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

template <class T>
constexpr std::uint32_t dtype_value() noexcept {
  return static_cast<std::uint32_t>(dtype_of<T>);
}

/// The `XDEV_BINARY_*` code of `op`.
constexpr std::uint32_t binary_code(ops::BinaryOp op) noexcept {
  switch (op) {
    case ops::BinaryOp::add:
      return XDEV_BINARY_ADD;
    case ops::BinaryOp::mul:
      return XDEV_BINARY_MUL;
    case ops::BinaryOp::min:
      return XDEV_BINARY_MIN;
    case ops::BinaryOp::max:
      return XDEV_BINARY_MAX;
  }
  return static_cast<std::uint32_t>(op);  // not a BinaryOp value: passed on, for the receiver to reject
}

/// The operator of the `XDEV_BINARY_*` code `code`.
/// \throws xdev::error `errc::invalid_argument` when `code` is none of them (a plugin never
/// reinterprets a code it does not know).
inline ops::BinaryOp binary_op_from(std::uint32_t code) {
  switch (code) {
    case XDEV_BINARY_ADD:
      return ops::BinaryOp::add;
    case XDEV_BINARY_MUL:
      return ops::BinaryOp::mul;
    case XDEV_BINARY_MIN:
      return ops::BinaryOp::min;
    case XDEV_BINARY_MAX:
      return ops::BinaryOp::max;
    default:
      throw error(errc::invalid_argument,
                  "binary: op " + std::to_string(code) + " is not an XDEV_BINARY_* value (0 add, 1 mul, 2 min, 3 max)");
  }
}

// ---- host side: C++ arguments (handles are already xdev_memory) to the C structs -------------

/// `ops::FillArgs` as `xdev_fill_args`.
template <class T>
xdev_fill_args to_c(const ops::FillArgs<T, xdev_memory>& a) noexcept {
  xdev_fill_args c{};
  c.struct_size = sizeof c;
  c.dtype = dtype_value<T>();
  c.x = a.x;
  c.n = a.n;
  c.value_bits = scalar_bits(a.value);
  return c;
}

/// `ops::ExpArgs` as `xdev_exp_args` (ABI 1.4).
template <class T>
xdev_exp_args to_c(const ops::ExpArgs<T, xdev_memory>& a) noexcept {
  xdev_exp_args c{};
  c.struct_size = sizeof c;
  c.dtype = dtype_value<T>();
  c.x = a.x;
  c.out = a.out;
  c.n = a.n;
  return c;
}

/// `ops::ScaleArgs` as `xdev_scale_args`.
template <class T>
xdev_scale_args to_c(const ops::ScaleArgs<T, xdev_memory>& a) noexcept {
  xdev_scale_args c{};
  c.struct_size = sizeof c;
  c.dtype = dtype_value<T>();
  c.x = a.x;
  c.n = a.n;
  c.alpha_bits = scalar_bits(a.alpha);
  return c;
}

/// `ops::AxpyArgs` as `xdev_axpy_args`.
template <class T>
xdev_axpy_args to_c(const ops::AxpyArgs<T, xdev_memory>& a) noexcept {
  xdev_axpy_args c{};
  c.struct_size = sizeof c;
  c.dtype = dtype_value<T>();
  c.alpha_bits = scalar_bits(a.alpha);
  c.x = a.x;
  c.y = a.y;
  c.n = a.n;
  return c;
}

/// `ops::BinaryArgs` as `xdev_binary_args`.
template <class T>
xdev_binary_args to_c(const ops::BinaryArgs<T, xdev_memory>& a) noexcept {
  xdev_binary_args c{};
  c.struct_size = sizeof c;
  c.dtype = dtype_value<T>();
  c.op = binary_code(a.op);
  c.a = a.a;
  c.b = a.b;
  c.out = a.out;
  c.n = a.n;
  return c;
}

/// `ops::SumArgs` as `xdev_sum_args`.
template <class T>
xdev_sum_args to_c(const ops::SumArgs<T, xdev_memory>& a) noexcept {
  xdev_sum_args c{};
  c.struct_size = sizeof c;
  c.dtype = dtype_value<T>();
  c.x = a.x;
  c.n = a.n;
  c.result = a.result;
  return c;
}

/// `ops::SumAxisArgs` as `xdev_sum_axis_args`.
template <class T>
xdev_sum_axis_args to_c(const ops::SumAxisArgs<T, xdev_memory>& a) noexcept {
  xdev_sum_axis_args c{};
  c.struct_size = sizeof c;
  c.dtype = dtype_value<T>();
  c.x = a.x;
  c.out = a.out;
  c.outer = a.outer;
  c.axis = a.axis;
  c.inner = a.inner;
  return c;
}

/// `ops::DotArgs` as `xdev_dot_args`.
template <class T>
xdev_dot_args to_c(const ops::DotArgs<T, xdev_memory>& a) noexcept {
  xdev_dot_args c{};
  c.struct_size = sizeof c;
  c.dtype = dtype_value<T>();
  c.compute_dtype = static_cast<std::uint32_t>(a.compute);
  c.x = a.x;
  c.y = a.y;
  c.n = a.n;
  c.result = a.result;
  return c;
}

/// `ops::GemmArgs` as `xdev_gemm_args`.
template <class T>
xdev_gemm_args to_c(const ops::GemmArgs<T, xdev_memory>& a) noexcept {
  xdev_gemm_args c{};
  c.struct_size = sizeof c;
  c.dtype = dtype_value<T>();
  c.compute_dtype = static_cast<std::uint32_t>(a.compute);
  c.trans_a = a.trans_a ? 1 : 0;
  c.trans_b = a.trans_b ? 1 : 0;
  c.m = a.m;
  c.n = a.n;
  c.k = a.k;
  c.alpha_bits = scalar_bits(a.alpha);
  c.a = a.a;
  c.lda = a.lda;
  c.b = a.b;
  c.ldb = a.ldb;
  c.beta_bits = scalar_bits(a.beta);
  c.c = a.c;
  c.ldc = a.ldc;
  return c;
}

/// `ops::GatherArgs` as `xdev_gather_args`.
template <class T, class I>
xdev_gather_args to_c(const ops::GatherArgs<T, I, xdev_memory>& a) noexcept {
  xdev_gather_args c{};
  c.struct_size = sizeof c;
  c.dtype = dtype_value<T>();
  c.index_dtype = dtype_value<I>();
  c.table = a.table;
  c.rows = a.rows;
  c.cols = a.cols;
  c.index = a.index;
  c.n = a.n;
  c.out = a.out;
  c.dense = a.dense ? 1 : 0;
  return c;
}

/// `ops::RngArgs` as `xdev_rng_args`.
template <class T>
xdev_rng_args to_c(const ops::RngArgs<T, xdev_memory>& a) noexcept {
  xdev_rng_args c{};
  c.struct_size = sizeof c;
  c.dtype = dtype_value<T>();
  c.algorithm = static_cast<std::uint32_t>(a.algorithm);
  c.out = a.out;
  c.n = a.n;
  c.seed = a.seed;
  c.offset = a.offset;
  c.normal = a.normal ? 1 : 0;
  c.mean_bits = scalar_bits(a.mean);
  c.stddev_bits = scalar_bits(a.stddev);
  return c;
}

/// `ops::ConvertArgs` as `xdev_convert_args`.
template <class S, class D>
xdev_convert_args to_c(const ops::ConvertArgs<S, D, xdev_memory>& a) noexcept {
  xdev_convert_args c{};
  c.struct_size = sizeof c;
  c.src_dtype = dtype_value<S>();
  c.dst_dtype = dtype_value<D>();
  c.src = a.src;
  c.dst = a.dst;
  c.n = a.n;
  return c;
}

// ---- plugin side: the C structs (sizes checked, dtypes dispatched) to C++ arguments ----------

/// `xdev_fill_args` as `ops::FillArgs<T, H>`.
template <class T, class H>
ops::FillArgs<T, H> to_args(const xdev_fill_args& c) noexcept {
  return {handle_from<H>(c.x), static_cast<std::size_t>(c.n), scalar_from<T>(c.value_bits)};
}

/// `xdev_exp_args` as `ops::ExpArgs<T, H>`.
template <class T, class H>
ops::ExpArgs<T, H> to_args(const xdev_exp_args& c) noexcept {
  return {handle_from<H>(c.x), handle_from<H>(c.out), static_cast<std::size_t>(c.n)};
}

/// `xdev_scale_args` as `ops::ScaleArgs<T, H>`.
template <class T, class H>
ops::ScaleArgs<T, H> to_args(const xdev_scale_args& c) noexcept {
  return {handle_from<H>(c.x), static_cast<std::size_t>(c.n), scalar_from<T>(c.alpha_bits)};
}

/// `xdev_axpy_args` as `ops::AxpyArgs<T, H>`.
template <class T, class H>
ops::AxpyArgs<T, H> to_args(const xdev_axpy_args& c) noexcept {
  return {scalar_from<T>(c.alpha_bits), handle_from<H>(c.x), handle_from<H>(c.y), static_cast<std::size_t>(c.n)};
}

/// `xdev_binary_args` as `ops::BinaryArgs<T, H>`.
/// \throws xdev::error `errc::invalid_argument` when `op` is no `XDEV_BINARY_*` value
/// (`binary_op_from`).
template <class T, class H>
ops::BinaryArgs<T, H> to_args(const xdev_binary_args& c) {
  return {binary_op_from(c.op), handle_from<H>(c.a), handle_from<H>(c.b), handle_from<H>(c.out),
          static_cast<std::size_t>(c.n)};
}

/// `xdev_sum_args` as `ops::SumArgs<T, H>`.
template <class T, class H>
ops::SumArgs<T, H> to_args(const xdev_sum_args& c) noexcept {
  return {handle_from<H>(c.x), static_cast<std::size_t>(c.n), static_cast<T*>(c.result)};
}

/// `xdev_sum_axis_args` as `ops::SumAxisArgs<T, H>`.
template <class T, class H>
ops::SumAxisArgs<T, H> to_args(const xdev_sum_axis_args& c) noexcept {
  return {handle_from<H>(c.x), handle_from<H>(c.out), static_cast<std::size_t>(c.outer),
          static_cast<std::size_t>(c.axis), static_cast<std::size_t>(c.inner)};
}

/// `xdev_dot_args` as `ops::DotArgs<T, H>` (the caller has checked `compute_dtype`).
template <class T, class H>
ops::DotArgs<T, H> to_args(const xdev_dot_args& c) noexcept {
  return {handle_from<H>(c.x), handle_from<H>(c.y), static_cast<std::size_t>(c.n), static_cast<T*>(c.result),
          static_cast<DType>(c.compute_dtype)};
}

/// `xdev_gemm_args` as `ops::GemmArgs<T, H>` (the caller has checked `compute_dtype`).
template <class T, class H>
ops::GemmArgs<T, H> to_args(const xdev_gemm_args& c) noexcept {
  return {c.trans_a != 0,
          c.trans_b != 0,
          static_cast<std::size_t>(c.m),
          static_cast<std::size_t>(c.n),
          static_cast<std::size_t>(c.k),
          scalar_from<T>(c.alpha_bits),
          handle_from<H>(c.a),
          static_cast<std::size_t>(c.lda),
          handle_from<H>(c.b),
          static_cast<std::size_t>(c.ldb),
          scalar_from<T>(c.beta_bits),
          handle_from<H>(c.c),
          static_cast<std::size_t>(c.ldc),
          static_cast<DType>(c.compute_dtype)};
}

/// `xdev_gather_args` as `ops::GatherArgs<T, I, H>`.
template <class T, class I, class H>
ops::GatherArgs<T, I, H> to_args(const xdev_gather_args& c) noexcept {
  return {handle_from<H>(c.table),
          static_cast<std::size_t>(c.rows),
          static_cast<std::size_t>(c.cols),
          handle_from<H>(c.index),
          static_cast<std::size_t>(c.n),
          handle_from<H>(c.out),
          c.dense != 0};
}

/// `xdev_rng_args` as `ops::RngArgs<T, H>` (the caller has checked `algorithm`).
template <class T, class H>
ops::RngArgs<T, H> to_args(const xdev_rng_args& c) noexcept {
  return {
      handle_from<H>(c.out), static_cast<std::size_t>(c.n), static_cast<RngAlgorithm>(c.algorithm), c.seed, c.offset,
      c.normal != 0,         scalar_from<T>(c.mean_bits),   scalar_from<T>(c.stddev_bits)};
}

/// `xdev_convert_args` as `ops::ConvertArgs<S, D, H>`.
template <class S, class D, class H>
ops::ConvertArgs<S, D, H> to_args(const xdev_convert_args& c) noexcept {
  return {handle_from<H>(c.src), handle_from<H>(c.dst), static_cast<std::size_t>(c.n)};
}

}  // namespace xdev::plugin::detail
