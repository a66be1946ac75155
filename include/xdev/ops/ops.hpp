/// \file
/// The portable operations: the same calls on every device. See docs/ops.md.
///
/// Every op takes a queue (a `Device<B>` or an `AnyDevice`, meaning its default stream, or a
/// `Stream<B>` or an `AnyStream`) and a completion token (default `xdev::use_future`), and is
/// submitted like all device work: it returns at once, takes an in-flight slot, and keeps stream
/// order. Shapes, dtypes and devices are checked before submission (`errc::invalid_argument`
/// naming the shapes; `errc::unimplemented` for a dtype the device does not support, going by
/// `xdev::capabilities_of(device)`), so a rejected call runs nothing.
///
/// This header includes every op family; include one family alone to compile less:
/// <xdev/ops/elementwise.hpp>, <xdev/ops/reduce.hpp>, <xdev/ops/gemm.hpp>, <xdev/ops/gather.hpp>,
/// <xdev/ops/random.hpp>, <xdev/ops/convert.hpp>, <xdev/ops/parallel_for.hpp>. How an op reaches
/// the backend (its member, or the CPU fallback) is <xdev/ops/dispatch.hpp>.
#pragma once

#include <xdev/ops/convert.hpp>
#include <xdev/ops/dispatch.hpp>
#include <xdev/ops/elementwise.hpp>
#include <xdev/ops/gather.hpp>
#include <xdev/ops/gemm.hpp>
#include <xdev/ops/parallel_for.hpp>
#include <xdev/ops/random.hpp>
#include <xdev/ops/reduce.hpp>
