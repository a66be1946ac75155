// A typed-only program that does not include <xdev/core/trace.hpp>: with XDEV_TRACE set, its
// Runtime says once that it cannot write a trace, and runs on (tests/CMakeLists.txt).
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>

#include <cstdio>

int main() {
  using Host = xdev::backends::Host;
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 1});
  xdev::Runtime<Host> again({}, Host::Options{.devices = 1, .threads = 1});  // no second warning
  const int v = rt.device(0).execute([] { return 42; }).get();
  std::printf("ran: %d\n", v);
  return v == 42 ? 0 : 1;
}
