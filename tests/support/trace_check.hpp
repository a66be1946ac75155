// A checker of Trace Event Format files, as Perfetto and chrome://tracing read them: every event
// has `ph`, `ts`, `pid` and `tid`; complete events (`X`) have `dur` >= 0; flow events pair up, and
// each one lies inside a complete event of its track (the slice a viewer binds it to); and the
// complete events of each track nest (each one ends before the one it started inside ends).
//
// Uses Boost.JSON: a test executable that includes this header must also compile
// <boost/json/src.hpp> in exactly one of its files (the header-only form of the library).
#pragma once

#include <boost/json.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace xdev_test {

struct TraceEvent {
  std::string ph, name, cat;
  double ts = 0, dur = 0;
  std::int64_t pid = 0, tid = 0;
  boost::json::object args;
};

struct TraceCheck {
  std::vector<TraceEvent> events;
  std::vector<std::string> problems;  // empty: the file is a valid trace

  /// The events with this phase and name.
  [[nodiscard]] std::vector<TraceEvent> named(const std::string& ph, const std::string& name) const {
    std::vector<TraceEvent> out;
    for (const auto& e : events)
      if (e.ph == ph && e.name == name) out.push_back(e);
    return out;
  }
  /// The name given to process `pid` by its metadata event ("" when none).
  [[nodiscard]] std::string process_name(std::int64_t pid) const {
    for (const auto& e : events)
      if (e.ph == "M" && e.name == "process_name" && e.pid == pid)
        if (const auto* n = e.args.if_contains("name"); n && n->is_string()) return std::string(n->as_string());
    return {};
  }
};

inline TraceCheck check_trace_text(const std::string& text) {
  TraceCheck r;
  boost::system::error_code ec;
  const boost::json::value doc = boost::json::parse(text, ec);
  if (ec) {
    r.problems.push_back("not JSON: " + ec.message());
    return r;
  }
  const auto* root = doc.if_object();
  const auto* list = root ? root->if_contains("traceEvents") : nullptr;
  if (list == nullptr || !list->is_array()) {
    r.problems.push_back("no traceEvents array");
    return r;
  }
  std::map<std::string, int> flows;  // flow id -> starts minus finishes
  std::size_t index = 0;
  for (const auto& v : list->as_array()) {
    const std::string where = "event " + std::to_string(index++);
    const auto* o = v.if_object();
    if (o == nullptr) {
      r.problems.push_back(where + " is not an object");
      continue;
    }
    TraceEvent e;
    auto number = [&](const char* key, double& out) {
      const auto* x = o->if_contains(key);
      if (x == nullptr || !x->is_number()) return false;
      out = x->to_number<double>();
      return true;
    };
    const auto* ph = o->if_contains("ph");
    if (ph == nullptr || !ph->is_string()) {
      r.problems.push_back(where + " has no ph");
      continue;
    }
    e.ph = std::string(ph->as_string());
    double pid = 0, tid = 0;
    if (!number("ts", e.ts)) r.problems.push_back(where + " (" + e.ph + ") has no numeric ts");
    if (!number("pid", pid)) r.problems.push_back(where + " (" + e.ph + ") has no numeric pid");
    if (!number("tid", tid)) r.problems.push_back(where + " (" + e.ph + ") has no numeric tid");
    e.pid = static_cast<std::int64_t>(pid);
    e.tid = static_cast<std::int64_t>(tid);
    if (const auto* n = o->if_contains("name"); n && n->is_string()) e.name = std::string(n->as_string());
    if (const auto* c = o->if_contains("cat"); c && c->is_string()) e.cat = std::string(c->as_string());
    if (const auto* a = o->if_contains("args"); a && a->is_object()) e.args = a->as_object();
    if (e.ph == "X") {
      if (!number("dur", e.dur) || e.dur < 0) r.problems.push_back(where + " (" + e.name + ") has no dur >= 0");
    } else if (e.ph == "s" || e.ph == "f") {
      const auto* id = o->if_contains("id");
      if (id == nullptr) {
        r.problems.push_back(where + " is a flow event without an id");
      } else {
        flows[boost::json::serialize(*id)] += e.ph == "s" ? 1 : -1;
      }
    } else if (e.ph != "M" && e.ph != "C" && e.ph != "i" && e.ph != "I") {
      r.problems.push_back(where + " has a phase this writer never emits: " + e.ph);
    }
    r.events.push_back(std::move(e));
  }
  for (const auto& [id, n] : flows)
    if (n != 0) r.problems.push_back("flow " + id + " does not pair up");

  // Nesting of the complete events of each track (to a nanosecond: ts is printed in microseconds
  // with three decimals).
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<const TraceEvent*>> tracks;
  for (const auto& e : r.events)
    if (e.ph == "X") tracks[{e.pid, e.tid}].push_back(&e);
  constexpr double eps = 0.0015;
  for (const auto& e : r.events) {
    if (e.ph != "s" && e.ph != "f") continue;
    bool bound = false;
    if (const auto it = tracks.find({e.pid, e.tid}); it != tracks.end())
      for (const TraceEvent* x : it->second) bound = bound || (x->ts - eps <= e.ts && e.ts <= x->ts + x->dur + eps);
    if (!bound) {
      std::ostringstream os;
      os << "flow event " << e.ph << " at " << e.ts << " on track " << e.pid << "/" << e.tid
         << " lies inside no complete event";
      r.problems.push_back(os.str());
    }
  }
  for (auto& [track, xs] : tracks) {
    std::stable_sort(xs.begin(), xs.end(), [](const TraceEvent* a, const TraceEvent* b) {
      return a->ts != b->ts ? a->ts < b->ts : a->dur > b->dur;
    });
    std::vector<double> open;  // ends of the enclosing events
    for (const TraceEvent* e : xs) {
      while (!open.empty() && open.back() <= e->ts + eps) open.pop_back();
      if (!open.empty() && e->ts + e->dur > open.back() + eps) {
        std::ostringstream os;
        os << "track " << track.first << "/" << track.second << ": " << e->name << " at " << e->ts << " for " << e->dur
           << " overlaps the end of its enclosing event at " << open.back();
        r.problems.push_back(os.str());
      }
      open.push_back(e->ts + e->dur);
    }
  }
  return r;
}

inline TraceCheck check_trace_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    TraceCheck r;
    r.problems.push_back("cannot open " + path);
    return r;
  }
  std::ostringstream os;
  os << in.rdbuf();
  return check_trace_text(os.str());
}

}  // namespace xdev_test
