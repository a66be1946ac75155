// expect: xdev::Capabilities<...>: every argument must be a capability policy
// Mistake: a type that is not a policy (int) in the capability list.
#include "complete_backend.hpp"

using Mine = CompleteBackend<xdev::Capabilities<xdev::MaxInflight<8>, int>>;

static_assert(xdev::check_backend<Mine>());
