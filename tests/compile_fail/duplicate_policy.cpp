// expect: xdev::Capabilities<...>: the MaxInflight policy is given twice
// Mistake: one policy kind (MaxInflight) is given twice in the capability list.
#include "complete_backend.hpp"

using Mine = CompleteBackend<xdev::Capabilities<xdev::MaxInflight<8>, xdev::DenseGather<16>, xdev::MaxInflight<4>>>;

static_assert(xdev::check_backend<Mine>());
