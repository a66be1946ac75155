/// \file
/// Forwarding header, kept for one release: the host kernels moved to <xdev/kernels/> (one header
/// per facility) and from namespace `xdev::ops::host` to `xdev::kernels`. `xdev::ops::host` stays
/// an alias of `xdev::kernels` for code written against the old name.
#pragma once

#include <xdev/kernels/convert.hpp>
#include <xdev/kernels/elementwise.hpp>
#include <xdev/kernels/gather.hpp>
#include <xdev/kernels/gemm.hpp>
#include <xdev/kernels/parallel.hpp>
#include <xdev/kernels/reduce.hpp>
#include <xdev/kernels/rng_fill.hpp>

namespace xdev::ops {
/// Deprecated name of `xdev::kernels` (the host kernels), kept for one release.
namespace host = ::xdev::kernels;
}  // namespace xdev::ops
