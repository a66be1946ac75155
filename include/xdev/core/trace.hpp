/// \file
/// A device timeline in a file: `XDEV_TRACE=path.json`, or `xdev::trace::start(path)` and
/// `stop()`, write a Trace Event Format file that Perfetto (ui.perfetto.dev) and chrome://tracing
/// open. The writer is a profiler-hook listener (<xdev/core/tools.hpp>): it buffers what each
/// thread sees and writes the file once, at `stop()` or when the process exits normally, to a
/// temporary name first and then renamed, so a reader never finds a truncated trace.
/// docs/observability.md shows how to read one.
#pragma once

#include <xdev/core/detail/environment_hooks.hpp>
#include <xdev/core/detail/json.hpp>
#include <xdev/core/detail/spin_mutex.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/log.hpp>
#include <xdev/core/tools.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdev::trace {

namespace detail {

// One callback as the writer keeps it.
struct Record {
  char phase;  // 'B' begin, 'E' end, 'I' instant
  tools::Category category;
  std::uint64_t id;
  std::string name, device, dtype, error;
  std::uint64_t stream, bytes, in_use, event;
  std::uint64_t thread;  // the calling thread's number in this process (1, 2, ...)
  std::chrono::steady_clock::time_point time;
};

// What one thread recorded. Its own lock is uncontended but for `write`.
struct ThreadBuffer {
  xdev::detail::SpinMutex m;
  std::vector<Record> records;
};

inline std::uint64_t thread_number() noexcept {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t n = next.fetch_add(1, std::memory_order_relaxed);
  return n;
}

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
        spans.push_back({it->second, r.time, r.error, false});
        open.erase(it);
      } else {
        instant(r);
      }
    }
    for (const auto& [id, r] : open) spans.push_back({r, stopped_, {}, true});  // still running at stop
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
        // the one before it, so its slice starts then if it was handed over earlier.
        const int pid = pid_of(r.device);
        name_thread(pid, r.stream, "stream " + std::to_string(r.stream));
        double& last = stream_end_[{pid, r.stream}];
        const double ts = std::max(begin, last);
        const double stop = std::max(end, ts);
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

// The listener that records a traced run.
class Writer final : public tools::Listener {
 public:
  explicit Writer(std::string path)
      : path_(std::move(path)), origin_(std::chrono::steady_clock::now()), generation_(next_generation()) {}

  void begin(const tools::Activity& a) override { add('B', a, {}); }
  void end(const tools::Activity& a, const std::exception_ptr& error) override {
    add('E', a, error ? tools::detail::message_of(error) : std::string());
  }
  void instant(const tools::Activity& a) override { add('I', a, {}); }

  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  // Under State's lock, while the writer is the trace in progress: the process joined a job of
  // several (its tracks get the rank), and the file it will be written to, when XDEV_TRACE chose it.
  void join(const JobPlace& job, std::optional<std::string> path) {
    job_ = job;
    if (path) path_ = std::move(*path);
  }

  /// Whether the file can be written, before anything is recorded: the temporary is created and
  /// removed again.
  /// \throws xdev::error `errc::invalid_argument` naming the file and the reason.
  void probe() const {
    const std::string temp = temp_path();
    std::FILE* f = std::fopen(temp.c_str(), "wb");
    if (f == nullptr)
      throw error(errc::invalid_argument, "xdev trace: cannot write " + path_ + ": " + std::strerror(errno));
    std::fclose(f);
    std::remove(temp.c_str());
  }

  /// Writes the file: to `path.tmp.<pid>`, then renamed over `path`.
  /// \throws xdev::error naming the file and the reason when it cannot be written.
  void write() {
    std::vector<Record> all;
    {
      std::lock_guard lk(m_);
      for (const auto& b : buffers_) {
        std::lock_guard blk(b->m);
        all.insert(all.end(), std::make_move_iterator(b->records.begin()), std::make_move_iterator(b->records.end()));
        b->records.clear();
      }
    }
    const std::string text = Document(origin_, std::chrono::steady_clock::now(), job_).build(std::move(all));
    const std::string temp = temp_path();
    std::FILE* f = std::fopen(temp.c_str(), "wb");
    if (f == nullptr) fail("cannot create " + temp);
    const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    const int saved = errno;
    if (std::fclose(f) != 0 || !written) {
      std::remove(temp.c_str());
      errno = written ? errno : saved;
      fail("cannot write " + temp);
    }
    if (std::rename(temp.c_str(), path_.c_str()) != 0) {
      const int e = errno;
      std::remove(temp.c_str());
      errno = e;
      fail("cannot rename " + temp + " to " + path_);
    }
  }

 private:
  [[nodiscard]] std::string temp_path() const { return path_ + ".tmp." + std::to_string(::getpid()); }

  [[noreturn]] static void fail(const std::string& what) {
    throw error(errc::unavailable, "xdev trace: " + what + ": " + std::strerror(errno));
  }

  static std::uint64_t next_generation() noexcept {
    static std::atomic<std::uint64_t> g{1};
    return g.fetch_add(1, std::memory_order_relaxed);
  }

  // The calling thread's buffer for this writer (registered at its first record).
  ThreadBuffer& buffer() {
    struct Cached {
      std::uint64_t generation = 0;
      ThreadBuffer* buffer = nullptr;
    };
    thread_local Cached cached;
    if (cached.generation != generation_) {
      auto b = std::make_shared<ThreadBuffer>();
      std::lock_guard lk(m_);
      buffers_.push_back(b);
      cached = {generation_, b.get()};
    }
    return *cached.buffer;
  }

  void add(char phase, const tools::Activity& a, std::string error) {
    Record r{phase,
             a.category,
             a.id,
             std::string(a.name),
             std::string(a.device),
             std::string(a.dtype),
             std::move(error),
             a.stream,
             a.bytes,
             a.in_use,
             a.event,
             thread_number(),
             a.time};
    ThreadBuffer& b = buffer();
    std::lock_guard lk(b.m);
    b.records.push_back(std::move(r));
  }

  std::string path_;
  std::chrono::steady_clock::time_point origin_;
  std::optional<JobPlace> job_;
  std::uint64_t generation_;
  std::mutex m_;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers_;  // under m_
};

// The trace in progress, if any; written at exit when still running.
struct State {
  std::mutex m;
  std::shared_ptr<Writer> writer;
  tools::Subscription subscription;
  bool from_environment = false;  // `writer` was started by XDEV_TRACE
  std::optional<JobPlace> job;    // once distributed::init has run in this process

  static State& get() {
    static State s;
    return s;
  }
  ~State() {
    std::lock_guard lk(m);
    if (!writer) return;
    subscription.reset();
    try {
      writer->write();
      log::write(log::Level::info, "trace", "trace written to " + writer->path());
    } catch (const std::exception& e) {
      log::write(log::Level::error, "trace", e.what());
    }
  }
};

}  // namespace detail

namespace detail {
// start(), under State's lock; `from_environment`: XDEV_TRACE chose the path.
inline void start_locked(State& s, const std::string& path, bool from_environment) {
  if (path.empty()) throw error(errc::invalid_argument, "xdev::trace::start: the path is empty");
  if (s.writer)
    throw error(errc::unavailable, "xdev::trace::start(\"" + path + "\"): a trace to \"" + s.writer->path() +
                                       "\" is being recorded; stop it first");
  auto w = std::make_shared<Writer>(path);
  w->probe();
  if (s.job) w->join(*s.job, std::nullopt);
  s.subscription = tools::add_listener(w);
  s.writer = std::move(w);
  s.from_environment = from_environment;
}
}  // namespace detail

/// Starts recording a trace that `stop()` (or the process's normal exit) writes to `path`.
/// \throws xdev::error `errc::invalid_argument` for an empty path or one that cannot be written
///         (a missing directory, no permission: checked now, naming the file and the reason),
///         `errc::unavailable` when a trace is already being recorded (naming its file).
/// In a job of several processes (after `distributed::init`), the tracks carry the rank (see
/// `path_for_rank` for a file per rank).
inline void start(const std::string& path) {
  auto& s = detail::State::get();
  std::lock_guard lk(s.m);
  detail::start_locked(s, path, false);
}

/// Stops recording and writes the file; returns its path, or `std::nullopt` when no trace was
/// being recorded. Work still running is written as unfinished at the time of the call.
/// \throws xdev::error `errc::unavailable` when the file cannot be written (the trace is dropped).
inline std::optional<std::string> stop() {
  auto& s = detail::State::get();
  std::shared_ptr<detail::Writer> w;
  {
    std::lock_guard lk(s.m);
    if (!s.writer) return std::nullopt;
    s.subscription.reset();
    w = std::move(s.writer);
    s.from_environment = false;
  }
  w->write();
  return w->path();
}

/// The file of the trace being recorded, or `std::nullopt`.
[[nodiscard]] inline std::optional<std::string> recording() {
  auto& s = detail::State::get();
  std::lock_guard lk(s.m);
  if (!s.writer) return std::nullopt;
  return s.writer->path();
}

/// The file of rank `rank` for a trace of several processes: `path` with `.rank<N>` inserted
/// before its extension ("step.json" -> "step.rank1.json"; "trace" -> "trace.rank1").
[[nodiscard]] inline std::string path_for_rank(const std::string& path, std::uint64_t rank) {
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  const bool has_extension = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  const std::string tag = ".rank" + std::to_string(rank);
  return has_extension ? path.substr(0, dot) + tag + path.substr(dot) : path + tag;
}

/// Starts the trace `XDEV_TRACE` names, once per process (the first `Runtime` or `Registry` asks;
/// a `Runtime` reaches it when this header is part of the program, see core/detail/environment_hooks.hpp).
/// Nothing when it is unset or a trace is already being recorded.
/// \throws xdev::error `errc::invalid_argument` quoting the variable when the file cannot be
///         written (see `start`); every later call tries again, and reports it again.
inline void start_from_environment() {
  static std::once_flag once;
  std::call_once(once, [] {
    const auto path = getenv_string("XDEV_TRACE");
    if (!path) return;
    auto& s = detail::State::get();
    std::lock_guard lk(s.m);
    if (s.writer) return;
    try {
      detail::start_locked(s, s.job ? path_for_rank(*path, s.job->rank) : *path, true);
    } catch (const error& e) {
      throw error(e.condition(), "XDEV_TRACE=\"" + *path + "\": " + e.message());
    }
  });
}

namespace detail {
/// Called by `distributed::init` once every rank has met (`met`: when the meeting ended here): from
/// now on the trace's tracks carry the rank, and `XDEV_TRACE`'s trace goes to the rank's own file
/// (`path_for_rank`), started now if no `Runtime` has started it yet.
inline void join_job(std::uint32_t rank, std::uint32_t world_size, std::chrono::steady_clock::time_point met) {
  auto& s = State::get();
  {
    std::lock_guard lk(s.m);
    s.job = JobPlace{rank, world_size, met};
    if (s.writer) {
      std::optional<std::string> ranked;
      if (s.from_environment)
        if (const auto path = getenv_string("XDEV_TRACE")) ranked = path_for_rank(*path, rank);
      s.writer->join(*s.job, std::move(ranked));
    }
  }
  start_from_environment();
}
}  // namespace detail

namespace detail {
// Lets every Runtime of the program start XDEV_TRACE's trace (core/detail/environment_hooks.hpp).
inline const bool environment_starter_registered =
    (environment_starter.store(&start_from_environment, std::memory_order_release), true);
}  // namespace detail

}  // namespace xdev::trace
