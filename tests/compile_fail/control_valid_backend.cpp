// expect-success
// Positive control: a minimal correct backend passes check_backend and instantiates Device and Runtime.
// If this file stops compiling, every compile-fail test is suspect (they could fail for the wrong reason).
#include <xdev/backend/concepts.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>

#include "complete_backend.hpp"

using Mine = CompleteBackend<xdev::Capabilities<xdev::MaxInflight<8>, xdev::DenseGather<16>>>;

static_assert(xdev::check_backend<Mine>());
static_assert(xdev::concepts::Backend<Mine>);
static_assert(xdev::Device<Mine>::capabilities::max_inflight == 8);

int main() {
  xdev::Runtime<Mine> runtime;
  xdev::Device<Mine> device = runtime.device(0);
  return device.ordinal() == 0 ? 0 : 1;
}
