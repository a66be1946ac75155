/// \file
/// The vocabulary of the portable operations that every layer shares: `ops::OpKind` (which op a
/// backend is asked about) and `ops::BinaryOp` (the element-wise operators). The host kernels
/// (<xdev/kernels/>), the op API (<xdev/ops/>) and the plugin ABI all use these values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

namespace xdev::ops {

/// The portable operations a backend may implement, one per `*Args` struct of <xdev/ops/op_args.hpp> (`add`, `mul`,
/// `minimum` and `maximum` are `binary`; `rng_uniform` and `rng_normal` are `rng`). What a
/// backend's optional `implements(op, t, t2)` hook is asked about (see
/// <xdev/backend/concepts.hpp>). The values are the plugin ABI's `XDEV_OP_*` (<xdev/plugin/abi.h>):
/// keep the order.
enum class OpKind : std::uint32_t { fill, scale, axpy, binary, sum, sum_axis, dot, gemm, gather, rng, convert, exp };

/// The op's name as written in this enumeration ("fill", "sum_axis", ...).
constexpr const char* name_of(OpKind op) noexcept {
  constexpr const char* names[] = {"fill", "scale", "axpy",   "binary", "sum",     "sum_axis",
                                   "dot",  "gemm",  "gather", "rng",    "convert", "exp"};
  const auto i = static_cast<std::uint32_t>(op);
  return i < std::size(names) ? names[i] : "?";
}

/// Element-wise binary operations (`ops::add`, `ops::mul`, `ops::minimum`, `ops::maximum`). The
/// values are the plugin ABI's `XDEV_BINARY_*` (<xdev/plugin/abi.h>): keep them, append new ones.
enum class BinaryOp : std::uint8_t { add, mul, min, max };

/// The public op a `BinaryOp` stands for, as its fallback metric names it ("add", "mul",
/// "minimum", "maximum"; "?" for a value outside the enumeration).
constexpr const char* name_of(BinaryOp op) noexcept {
  constexpr const char* names[] = {"add", "mul", "minimum", "maximum"};
  const auto i = static_cast<std::size_t>(op);
  return i < std::size(names) ? names[i] : "?";
}

}  // namespace xdev::ops
