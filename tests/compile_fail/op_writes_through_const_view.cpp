// expect: output_of
// Mistake: an op's output is a view of a const array (or the const array itself): the constraint
// that names what an op writes (`detail::output_of`) rejects it at the call.
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array_view.hpp>
#include <xdev/ops/ops.hpp>

#include <utility>

void scale_a_const_window(const xdev::Device<xdev::backends::Host>& dev) {
  const auto a = xdev::empty<float>(dev, {4, 4});
  (void)xdev::ops::scale(dev, xdev::slice(a, {0, 2}), 2.0f);
}
