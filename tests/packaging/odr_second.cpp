// The second TU of the ODR link test: the same headers, the same probe.
#include <xdev/xdev.hpp>

#include "odr_probe.hpp"

#include <stdexcept>

namespace odr {

Report probe_second() {
  return probe<1>();
}

void throw_from_second() {
  (void)xdev::parse_dtype("bogus");
  throw std::logic_error("xdev::parse_dtype(\"bogus\") did not throw");
}

}  // namespace odr
