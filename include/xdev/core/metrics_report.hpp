/// \file
/// Timers of how long operations, transfers, collectives and waits took (collected while
/// `collect_timers(true)`, from the profiler hooks), and the reports a person (`report()`) or a
/// script (`report_json()`) reads: counters, timers and each device's memory and execution.
#pragma once

#include <xdev/core/detail/json.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/core/tools.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace xdev::metrics {

// ---- timers --------------------------------------------------------------------------------

/// What a timer measured: exact count, total, min and max over every sample; median and p99 over
/// the most recent `Timer::window` samples.
struct TimerStats {
  std::uint64_t count = 0;
  std::chrono::nanoseconds total{0}, min{0}, median{0}, p99{0}, max{0};
};

/// Durations of one kind of activity ("op.gemm", "transfer.copy_to_device", "throttle_wait").
/// Thread-safe; obtained from `timer(name)`, valid for the life of the process.
class Timer {
 public:
  static constexpr std::size_t window = 4096;

  void record(std::chrono::nanoseconds d) {
    std::lock_guard lk(m_);
    if (count_ == 0 || d < min_) min_ = d;
    if (count_ == 0 || d > max_) max_ = d;
    ++count_;
    total_ += d;
    if (recent_.size() < window)
      recent_.push_back(d);
    else
      recent_[next_] = d;
    next_ = (next_ + 1) % window;
  }

  [[nodiscard]] TimerStats stats() const {
    std::vector<std::chrono::nanoseconds> v;
    TimerStats s;
    {
      std::lock_guard lk(m_);
      v = recent_;
      s.count = count_;
      s.total = total_;
      s.min = min_;
      s.max = max_;
    }
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    // Nearest rank: the smallest sample at or above the fraction of them.
    auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<std::size_t>(q * (v.size() - 1) + 0.5))]; };
    s.median = at(0.5);
    s.p99 = at(0.99);
    return s;
  }

  void reset() {
    std::lock_guard lk(m_);
    count_ = 0;
    total_ = min_ = max_ = std::chrono::nanoseconds{0};
    recent_.clear();
    next_ = 0;
  }

 private:
  mutable std::mutex m_;
  std::uint64_t count_ = 0;
  std::chrono::nanoseconds total_{0}, min_{0}, max_{0};
  std::vector<std::chrono::nanoseconds> recent_;  // a ring of the last `window` samples
  std::size_t next_ = 0;
};

namespace detail {
struct timer_registry {
  std::mutex m;
  std::map<std::string, std::unique_ptr<Timer>, std::less<>> timers;
  tools::Subscription collecting;  // the listener that feeds the timers, while installed

  static timer_registry& get() {
    static auto* r = new timer_registry;  // never destroyed: completions may run at exit
    return *r;
  }
};
}  // namespace detail

/// The timer called `name`, created empty on first use. Thread-safe.
inline Timer& timer(std::string_view name) {
  auto& r = detail::timer_registry::get();
  std::lock_guard lk(r.m);
  auto it = r.timers.find(name);
  if (it == r.timers.end()) it = r.timers.emplace(std::string(name), std::make_unique<Timer>()).first;
  return *it->second;
}

/// Every timer that has recorded something, sorted by name.
inline std::map<std::string, TimerStats> timer_snapshot() {
  auto& r = detail::timer_registry::get();
  std::vector<std::pair<std::string, const Timer*>> all;
  {
    std::lock_guard lk(r.m);
    for (const auto& [name, t] : r.timers) all.emplace_back(name, t.get());
  }
  std::map<std::string, TimerStats> out;
  for (const auto& [name, t] : all)
    if (auto s = t->stats(); s.count != 0) out.emplace(name, s);
  return out;
}

namespace detail {

// The timer an activity's duration goes to: "<category>.<name>", with a collective's name cut to
// its kind ("collective.all_reduce") and the waits and loads under their category alone.
inline std::string timer_name(const tools::Activity& a) {
  using C = tools::Category;
  switch (a.category) {
    case C::throttle_wait:
    case C::plugin_load:
    case C::event_record:
    case C::event_wait:
      return tools::name_of(a.category);
    case C::synchronize:
      return a.name == "Stream::synchronize" ? "synchronize.stream" : "synchronize.device";
    case C::collective:
      return "collective." + std::string(a.name.substr(0, a.name.find(' ')));
    default:
      return std::string(tools::name_of(a.category)) + "." + std::string(a.name);
  }
}

// Feeds the timers from the profiler hooks.
class TimerListener final : public tools::Listener {
 public:
  void begin(const tools::Activity& a) override {
    std::lock_guard lk(m_);
    started_[a.id] = a.time;
  }
  void end(const tools::Activity& a, const std::exception_ptr&) override {
    std::chrono::steady_clock::time_point t0;
    {
      std::lock_guard lk(m_);
      const auto it = started_.find(a.id);
      if (it == started_.end()) return;  // begun before collection started
      t0 = it->second;
      started_.erase(it);
    }
    timer(timer_name(a)).record(std::chrono::duration_cast<std::chrono::nanoseconds>(a.time - t0));
  }

 private:
  std::mutex m_;
  std::map<std::uint64_t, std::chrono::steady_clock::time_point> started_;
};

}  // namespace detail

/// Starts (`true`) or stops collecting the timers: while on, every op, transfer, host task,
/// collective, synchronize, throttle wait and plugin load records its duration (through the
/// profiler hooks, <xdev/core/tools.hpp>, so each costs a listener call). Off by default.
inline void collect_timers(bool on) {
  auto& r = detail::timer_registry::get();
  std::lock_guard lk(r.m);
  if (on && !r.collecting)
    r.collecting = tools::add_listener(std::make_shared<detail::TimerListener>());
  else if (!on)
    r.collecting.reset();
}

/// Whether the timers are being collected.
[[nodiscard]] inline bool collecting_timers() {
  auto& r = detail::timer_registry::get();
  std::lock_guard lk(r.m);
  return static_cast<bool>(r.collecting);
}

// ---- reports ---------------------------------------------------------------------------------

namespace detail {

inline std::string micros(std::chrono::nanoseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

struct no_devices {
  [[nodiscard]] const int* begin() const noexcept { return nullptr; }
  [[nodiscard]] const int* end() const noexcept { return nullptr; }
};

template <class Devices>
std::string device_lines(const Devices& devices) {
  std::ostringstream os;
  for (const auto& d : devices) {
    const auto m = d.memory_stats();
    const auto e = d.execution_stats();
    os << "  " << d.name() << ": memory in_use=" << m.bytes_in_use << " peak=" << m.peak_bytes_in_use
       << " reserved=" << m.bytes_reserved << " limit=";
    if (m.limit)
      os << *m.limit;
    else
      os << "none";
    os << "; execution submitted=" << e.submitted << " completed=" << e.completed << " failed=" << e.failed
       << " throttle_waits=" << e.throttle_waits << " inflight_high_water=" << e.inflight_high_water << "/"
       << e.max_inflight << '\n';
  }
  return os.str();
}

template <class Devices>
std::string device_json(const Devices& devices) {
  std::ostringstream os;
  bool first = true;
  for (const auto& d : devices) {
    const auto m = d.memory_stats();
    const auto e = d.execution_stats();
    os << (first ? "" : ",") << "{\"name\":" << xdev::detail::json_string(d.name())
       << ",\"memory\":{\"in_use\":" << m.bytes_in_use << ",\"peak\":" << m.peak_bytes_in_use
       << ",\"reserved\":" << m.bytes_reserved << ",\"limit\":";
    if (m.limit)
      os << *m.limit;
    else
      os << "null";
    os << "},\"execution\":{\"submitted\":" << e.submitted << ",\"completed\":" << e.completed
       << ",\"failed\":" << e.failed << ",\"throttle_waits\":" << e.throttle_waits
       << ",\"inflight_high_water\":" << e.inflight_high_water << ",\"max_inflight\":" << e.max_inflight << "}}";
    first = false;
  }
  return os.str();
}

}  // namespace detail

/// A report a person reads, as PyTorch/XLA's `metrics_report()`: every counter (`name: value`),
/// every timer that recorded something (count, total, min, median, p99, max in microseconds), and
/// with `devices` (any range of `Device<B>`, `AnyDevice` or the like) each device's memory and
/// execution statistics.
///
///     xdev::metrics::collect_timers(true);
///     ... run ...
///     std::cout << xdev::metrics::report(xdev::accelerator::devices());
template <class Devices = detail::no_devices>
std::string report(const Devices& devices = {}) {
  std::ostringstream os;
  os << "counters:\n";
  for (const auto& [name, v] : snapshot()) os << "  " << name << ": " << v << '\n';
  os << "timers (microseconds):\n";
  for (const auto& [name, t] : timer_snapshot())
    os << "  " << name << ": count=" << t.count << " total=" << detail::micros(t.total)
       << " min=" << detail::micros(t.min) << " median=" << detail::micros(t.median) << " p99=" << detail::micros(t.p99)
       << " max=" << detail::micros(t.max) << '\n';
  if constexpr (!std::is_same_v<Devices, detail::no_devices>) os << "devices:\n" << detail::device_lines(devices);
  return os.str();
}

/// The same as `report` as one JSON document:
/// `{"counters": {name: value}, "timers": {name: {count, total_us, min_us, median_us, p99_us,
/// max_us}}, "devices": [{name, memory: {in_use, peak, reserved, limit}, execution: {...}}]}`.
template <class Devices = detail::no_devices>
std::string report_json(const Devices& devices = {}) {
  std::ostringstream os;
  os << "{\"counters\":{";
  bool first = true;
  for (const auto& [name, v] : snapshot()) {
    os << (first ? "" : ",") << xdev::detail::json_string(name) << ":" << v;
    first = false;
  }
  os << "},\"timers\":{";
  first = true;
  for (const auto& [name, t] : timer_snapshot()) {
    os << (first ? "" : ",") << xdev::detail::json_string(name) << ":{\"count\":" << t.count
       << ",\"total_us\":" << detail::micros(t.total) << ",\"min_us\":" << detail::micros(t.min)
       << ",\"median_us\":" << detail::micros(t.median) << ",\"p99_us\":" << detail::micros(t.p99)
       << ",\"max_us\":" << detail::micros(t.max) << "}";
    first = false;
  }
  os << "},\"devices\":[";
  if constexpr (!std::is_same_v<Devices, detail::no_devices>) os << detail::device_json(devices);
  os << "]}";
  return os.str();
}

/// Sets every counter to zero and empties every timer (both stay registered).
inline void reset_all() {
  reset();
  auto& t = detail::timer_registry::get();
  std::lock_guard lk(t.m);
  for (auto& [name, timer] : t.timers) timer->reset();
}

}  // namespace xdev::metrics
