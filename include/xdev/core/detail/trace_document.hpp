/// \file
/// The trace writer's document (<xdev/core/trace.hpp>): the records of one traced run, laid out as a
/// Trace Event Format file: a process track per device, a thread track per stream, the collectives'
/// lanes, the host threads, counters, instants and flows.
#pragma once

#include <xdev/core/detail/hooks.hpp>
#include <xdev/core/detail/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev::trace::detail {

// One callback as the writer keeps it.
struct Record {
  char phase;  // 'B' begin, 'E' end, 'I' instant
  tools::Category category;
  std::uint64_t id;
  std::string name, device, dtype, error;
  std::uint64_t stream, bytes, in_use, event;
  std::uint64_t thread;  // the calling thread's number in this process (1, 2, ...)
  std::chrono::steady_clock::time_point time;
  // 'E' of work whose backend reports device times: where the device ran it (else the epoch).
  std::chrono::steady_clock::time_point device_begin{}, device_end{};
};

inline void append_number(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  out += buf;
}

// This process's place in a job of several processes (set by `distributed::init`): its rank, the
// job's size, and when the session's first meeting of every rank ended here (where the merge tool
// aligns the ranks' clocks).
struct JobPlace {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 1;
  std::chrono::steady_clock::time_point met;
};

// Builds the Trace Event Format document from the records of one traced run. In a job of several
// processes, the tracks of rank r have pids from r * 1000 and names that start with "rank r: ".
class Document {
 public:
  Document(std::chrono::steady_clock::time_point origin, std::chrono::steady_clock::time_point stopped,
           std::optional<JobPlace> job = std::nullopt)
      : origin_(origin), stopped_(stopped), job_(job) {
    if (job_) {
      host_pid_ = static_cast<int>(job_->rank) * pids_per_rank + 1;
      prefix_ = "rank " + std::to_string(job_->rank) + ": ";
    }
  }

  std::string build(std::vector<Record> records) {
    std::stable_sort(records.begin(), records.end(), [](const Record& a, const Record& b) { return a.time < b.time; });
    std::map<std::uint64_t, const Record*> open;  // begun, not yet ended: by id
    std::vector<Span> spans;
    for (const Record& r : records) {
      if (r.phase == 'B') {
        open.emplace(r.id, &r);
      } else if (r.phase == 'E') {
        const auto it = open.find(r.id);
        if (it == open.end()) continue;  // begun before the trace started
        spans.push_back({it->second, r.time, r.error, false, r.device_begin, r.device_end});
        open.erase(it);
      } else {
        instant(r);
      }
    }
    for (const auto& [id, r] : open) spans.push_back({r, stopped_, {}, true, {}, {}});  // still running at stop
    std::stable_sort(spans.begin(), spans.end(),
                     [](const Span& a, const Span& b) { return a.begin->time < b.begin->time; });
    for (const Span& s : spans) place(s);
    flows();
    in_flight_counters(spans);

    std::string out = "{\"displayTimeUnit\":\"ms\",";
    if (job_) {  // what the merge tool (tools/xdev-trace-merge) reads
      out += "\"xdev\":{\"rank\":" + std::to_string(job_->rank) +
             ",\"world_size\":" + std::to_string(job_->world_size) +
             ",\"pid_base\":" + std::to_string(static_cast<int>(job_->rank) * pids_per_rank) + ",\"rendezvous_us\":";
      append_number(out, us(job_->met));
      out += "},";
    }
    out += "\"traceEvents\":[\n";
    bool first = true;
    for (const std::string& e : events_) {
      if (!first) out += ",\n";
      out += e;
      first = false;
    }
    out += "\n]}\n";
    return out;
  }

 private:
  struct Span {
    const Record* begin;
    std::chrono::steady_clock::time_point end;
    std::string error;
    bool unfinished;
    std::chrono::steady_clock::time_point device_begin, device_end;  // the epoch: not reported
  };
  static constexpr int pids_per_rank = 1000;

  [[nodiscard]] double us(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - origin_).count();
  }

  // The process track of a device ("HOST:0"), named at first use; the host's threads are pid 1.
  int pid_of(const std::string& device) {
    if (device.empty()) return host_pid_;
    auto [it, fresh] = pids_.emplace(device, host_pid_ + 1 + static_cast<int>(pids_.size()));
    if (fresh) metadata(it->second, 0, "process_name", prefix_ + device);
    return it->second;
  }

  void metadata(int pid, std::uint64_t tid, const char* what, std::string_view name) {
    std::string e = "{\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) +
                    ",\"ts\":0,\"name\":\"" + what + "\",\"args\":{\"name\":";
    xdev::detail::append_json_string(e, name);
    e += "}}";
    events_.push_back(std::move(e));
  }

  void name_thread(int pid, std::uint64_t tid, const std::string& name) {
    if (pid == host_pid_ && named_.emplace(pid, 0).second) metadata(pid, 0, "process_name", prefix_ + "host threads");
    if (named_.emplace(pid, tid).second) metadata(pid, tid, "thread_name", name);
  }

  void complete(int pid, std::uint64_t tid, const Record& r, double ts, double dur, const Span& s, double handed) {
    std::string e = "{\"ph\":\"X\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":";
    append_number(e, ts);
    e += ",\"dur\":";
    append_number(e, std::max(dur, 0.0));
    e += ",\"cat\":";
    xdev::detail::append_json_string(e, tools::name_of(r.category));
    e += ",\"name\":";
    xdev::detail::append_json_string(e, r.name);
    e += ",\"args\":{\"device\":";
    xdev::detail::append_json_string(e, r.device);
    if (r.stream != 0) e += ",\"stream\":" + std::to_string(r.stream);
    if (r.bytes != 0) e += ",\"bytes\":" + std::to_string(r.bytes);
    if (!r.dtype.empty()) {
      e += ",\"dtype\":";
      xdev::detail::append_json_string(e, r.dtype);
    }
    if (handed >= 0 && handed < ts) {
      e += ",\"handed_over_us\":";
      append_number(e, handed);
    }
    if (s.device_end != std::chrono::steady_clock::time_point{}) e += ",\"device_times\":true";
    if (!s.error.empty()) {
      e += ",\"error\":";
      xdev::detail::append_json_string(e, s.error);
    }
    if (s.unfinished) e += ",\"unfinished\":true";
    e += "}}";
    events_.push_back(std::move(e));
    if (!s.error.empty()) {
      std::string i =
          "{\"ph\":\"i\",\"s\":\"t\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":";
      append_number(i, ts + std::max(dur, 0.0));
      i += ",\"cat\":\"error\",\"name\":";
      xdev::detail::append_json_string(i, "error: " + r.name);
      i += ",\"args\":{\"error\":";
      xdev::detail::append_json_string(i, s.error);
      i += "}}";
      events_.push_back(std::move(i));
    }
  }

  void place(const Span& s) {
    const Record& r = *s.begin;
    const double begin = us(r.time);
    const double end = us(s.end);
    switch (r.category) {
      case tools::Category::op:
      case tools::Category::transfer:
      case tools::Category::host_task:
      case tools::Category::event_record:
      case tools::Category::event_wait: {
        // One track per stream. An in-order queue runs an operation no earlier than the end of
        // the one before it, so its slice starts then if it was handed over earlier. Where the
        // backend reported when the device ran it, the slice is that.
        const int pid = pid_of(r.device);
        name_thread(pid, r.stream, "stream " + std::to_string(r.stream));
        double& last = stream_end_[{pid, r.stream}];
        const bool on_device = s.device_end != std::chrono::steady_clock::time_point{};
        const double ts = std::max(on_device ? us(s.device_begin) : begin, last);
        const double stop = std::max(on_device ? us(s.device_end) : end, ts);
        last = stop;
        complete(pid, r.stream, r, ts, stop - ts, s, begin);
        // An arrow from where an event's point is reached to each wait it releases.
        if (r.event != 0 && r.category == tools::Category::event_record) {
          points_[r.event] = {pid, r.stream, ts};
        } else if (r.event != 0) {
          waits_.push_back({r.event, {pid, r.stream, ts}});
        }
        break;
      }
      case tools::Category::collective: {
        // Collectives of a mesh may overlap: each goes on the first lane free at its start.
        const int pid = pid_of(r.device);
        auto& lanes = collective_lanes_[pid];
        std::size_t lane = 0;
        while (lane < lanes.size() && lanes[lane] > begin) ++lane;
        if (lane == lanes.size()) lanes.push_back(0);
        lanes[lane] = end;
        const std::uint64_t tid = collective_tid + lane;
        name_thread(pid, tid, lane == 0 ? std::string("collectives") : "collectives " + std::to_string(lane + 1));
        complete(pid, tid, r, begin, end - begin, s, -1);
        break;
      }
      default: {  // a host thread waiting or loading: spans on one thread nest by construction
        name_thread(host_pid_, r.thread, "thread " + std::to_string(r.thread));
        complete(host_pid_, r.thread, r, begin, end - begin, s, -1);
      }
    }
  }

  // Flow events, one pair per wait whose record is in the trace: "s" bound to the record's slice
  // (viewers draw the arrow from its end, where the point was reached), "f" to the wait's slice.
  void flows() {
    std::uint64_t next = 1;
    for (const auto& [event, wait] : waits_) {
      const auto it = points_.find(event);
      if (it == points_.end()) continue;  // recorded before the trace started
      const std::string id = std::to_string(next++);
      const Place& from = it->second;
      std::string e = "{\"ph\":\"s\",\"cat\":\"event\",\"name\":\"event\",\"id\":" + id +
                      ",\"pid\":" + std::to_string(from.pid) + ",\"tid\":" + std::to_string(from.tid) + ",\"ts\":";
      append_number(e, from.ts);
      e += "}";
      events_.push_back(std::move(e));
      e = "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"event\",\"name\":\"event\",\"id\":" + id +
          ",\"pid\":" + std::to_string(wait.pid) + ",\"tid\":" + std::to_string(wait.tid) + ",\"ts\":";
      append_number(e, wait.ts);
      e += "}";
      events_.push_back(std::move(e));
    }
  }

  void counter(int pid, const char* name, const char* key, double ts, std::uint64_t value) {
    std::string e = "{\"ph\":\"C\",\"pid\":" + std::to_string(pid) + ",\"tid\":0,\"ts\":";
    append_number(e, ts);
    e += ",\"name\":\"";
    e += name;
    e += "\",\"args\":{\"";
    e += key;
    e += "\":" + std::to_string(value) + "}}";
    events_.push_back(std::move(e));
  }

  void instant(const Record& r) {
    if (r.category == tools::Category::allocation || r.category == tools::Category::free) {
      counter(pid_of(r.device), "bytes in use", "bytes", us(r.time), r.in_use);
    } else if (r.category == tools::Category::fallback) {  // on the device's whole process track
      std::string e = "{\"ph\":\"i\",\"s\":\"p\",\"pid\":" + std::to_string(pid_of(r.device)) + ",\"tid\":0,\"ts\":";
      append_number(e, us(r.time));
      e += ",\"cat\":\"fallback\",\"name\":";
      xdev::detail::append_json_string(e, "fallback: " + r.name);
      e += "}";
      events_.push_back(std::move(e));
    }
  }

  // Operations in flight per device, from the begin and end of each operation.
  void in_flight_counters(const std::vector<Span>& spans) {
    std::map<int, std::vector<std::pair<double, int>>> steps;
    for (const Span& s : spans) {
      const auto c = s.begin->category;
      if (c != tools::Category::op && c != tools::Category::transfer && c != tools::Category::host_task) continue;
      auto& v = steps[pid_of(s.begin->device)];
      v.emplace_back(us(s.begin->time), +1);
      v.emplace_back(us(s.end), -1);
    }
    for (auto& [pid, v] : steps) {
      std::stable_sort(v.begin(), v.end());
      std::int64_t n = 0;
      for (const auto& [ts, d] : v) {
        n += d;
        counter(pid, "operations in flight", "operations", ts,
                static_cast<std::uint64_t>(std::max<std::int64_t>(n, 0)));
      }
    }
  }

  static constexpr std::uint64_t collective_tid = 1'000'000'000;
  std::chrono::steady_clock::time_point origin_, stopped_;
  std::optional<JobPlace> job_;
  int host_pid_ = 1;    // the host threads' track; the devices' follow it
  std::string prefix_;  // of every process name: "rank r: " in a job of several processes
  std::vector<std::string> events_;
  std::map<std::string, int> pids_;
  std::map<std::pair<int, std::uint64_t>, double> stream_end_;
  std::map<int, std::vector<double>> collective_lanes_;
  std::set<std::pair<int, std::uint64_t>> named_;  // tracks named so far
  struct Place {
    int pid;
    std::uint64_t tid;
    double ts;
  };
  std::map<std::uint64_t, Place> points_;               // event -> the slice of its record
  std::vector<std::pair<std::uint64_t, Place>> waits_;  // (event, the wait's slice start)
};

}  // namespace xdev::trace::detail
