// Discovers the plugins of the process's search path and says what it found: the program the
// setgid test (run_setgid.sh) runs as an unprivileged user, privileged and not.
#include <xdev/plugin/loader.hpp>

#include <cstdio>
#include <exception>

// In an ASan build: LeakSanitizer cannot work in a setgid process (it can read neither /proc/self
// nor the ASAN_OPTIONS there), and would end the privileged run with a fatal error at exit.
extern "C" const char* __asan_default_options() {
  return "detect_leaks=0";
}

int main() {
  try {
    const auto found = xdev::plugin::discover();
    std::printf("secure_execution=%d plugins=%zu\n", xdev::secure_execution() ? 1 : 0, found.plugins().size());
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
