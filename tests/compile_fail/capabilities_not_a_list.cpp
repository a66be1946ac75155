// expect: xdev backend: missing `using capabilities = xdev::Capabilities<...>;`
// Mistake: capabilities names a single policy instead of an xdev::Capabilities<...> list.
#include "complete_backend.hpp"

using Mine = CompleteBackend<xdev::MaxInflight<8>>;

static_assert(xdev::check_backend<Mine>());
