// xdev_trace_check FILE [--process NAME]... [--event NAME]... [--device-times]
//
// Checks that FILE is a valid Trace Event Format trace (tests/support/trace_check.hpp) that names
// each --process (a process track, e.g. a device "HOST:0") and holds a complete event whose name
// starts with each --event; with --device-times, that some slice has the device's own times. Prints every problem and
// exits with status 1 when there is one; used by the tests that trace the demo.
#include "support/trace_check.hpp"

#include <boost/json/src.hpp>  // Boost.JSON, header-only

#include <cstdio>
#include <set>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: xdev_trace_check FILE [--process NAME]... [--event NAME]... [--device-times]\n");
    return 2;
  }
  const auto trace = xdev_test::check_trace_file(argv[1]);
  std::vector<std::string> problems = trace.problems;
  std::set<std::string> processes;
  for (const auto& e : trace.events)
    if (e.ph == "M" && e.name == "process_name") processes.insert(trace.process_name(e.pid));
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--device-times") {
      bool found = false;
      for (const auto& e : trace.events) found = found || (e.ph == "X" && e.args.contains("device_times"));
      if (!found) problems.push_back("no slice with the device's times (args.device_times)");
      continue;
    }
    if (i + 1 >= argc || (flag != "--process" && flag != "--event")) {
      std::fprintf(stderr, "xdev_trace_check: unexpected argument %s\n", argv[i]);
      return 2;
    }
    const std::string want = argv[++i];
    if (flag == "--process") {
      if (!processes.count(want)) problems.push_back("no process track named " + want);
    } else {
      bool found = false;
      for (const auto& e : trace.events) found = found || (e.ph == "X" && e.name.rfind(want, 0) == 0);
      if (!found) problems.push_back("no complete event named " + want + "...");
    }
  }
  for (const auto& p : problems) std::printf("TRACE PROBLEM: %s\n", p.c_str());
  if (!problems.empty()) return 1;
  std::printf("trace OK: %zu events, %zu process tracks\n", trace.events.size(), processes.size());
  return 0;
}
