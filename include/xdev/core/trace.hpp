/// \file
/// A device timeline in a file: `XDEV_TRACE=path.json`, or `xdev::trace::start(path)` and
/// `stop()`, write a Trace Event Format file that Perfetto (ui.perfetto.dev) and chrome://tracing
/// open. The writer is a profiler-hook listener (<xdev/core/tools.hpp>): it buffers what each
/// thread sees and writes the file once, at `stop()` or when the process exits normally, to a
/// temporary name first and then renamed, so a reader never finds a truncated trace.
/// docs/observability.md shows how to read one.
#pragma once

#include <xdev/core/detail/environment_hooks.hpp>
#include <xdev/core/detail/spin_mutex.hpp>
#include <xdev/core/detail/trace_document.hpp>
#include <xdev/core/env.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/log.hpp>
#include <xdev/core/tools.hpp>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xdev::trace {

namespace detail {

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
             a.time,
             a.device_begin,
             a.device_end};
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
