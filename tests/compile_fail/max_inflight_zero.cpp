// expect: xdev::MaxInflight<N>: N must be at least 1
// Mistake: a device that may never have work in flight.
#include "complete_backend.hpp"

using Mine = CompleteBackend<xdev::Capabilities<xdev::MaxInflight<0>>>;

static_assert(xdev::check_backend<Mine>());
