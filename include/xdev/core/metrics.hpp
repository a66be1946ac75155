/// \file
/// Process-wide named counters: how often something happened (`fallback.gemm`, `gather.dense`).
/// The timers and the reports a person or a script reads (`report()`, `report_json()`) are in
/// <xdev/core/metrics_report.hpp>.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace xdev::metrics {

/// A monotonically increasing count. Obtained from `counter(name)`; the reference stays valid for
/// the life of the process, so hot paths look it up once and keep it.
class Counter {
 public:
  void add(std::uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }
  void reset() noexcept { value_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

namespace detail {
struct registry {
  std::mutex m;
  std::map<std::string, std::unique_ptr<Counter>, std::less<>> counters;

  // Never destroyed: ops count from backend threads and static destructors while the process
  // exits (the timers' registry, in metrics_report.hpp, is kept the same way).
  static registry& get() {
    static auto* const r = new registry;
    return *r;
  }
};
}  // namespace detail

/// The counter called `name`, created at zero on first use. Thread-safe.
///
///     static auto& dense = xdev::metrics::counter("gather.dense");
///     dense.add();
inline Counter& counter(std::string_view name) {
  auto& r = detail::registry::get();
  std::lock_guard lk(r.m);
  auto it = r.counters.find(name);
  if (it == r.counters.end()) it = r.counters.emplace(std::string(name), std::make_unique<Counter>()).first;
  return *it->second;
}

/// The value of counter `name`; 0 for a counter never used.
inline std::uint64_t value(std::string_view name) {
  auto& r = detail::registry::get();
  std::lock_guard lk(r.m);
  auto it = r.counters.find(name);
  return it == r.counters.end() ? 0 : it->second->value();
}

/// Every counter and its value, sorted by name.
inline std::map<std::string, std::uint64_t> snapshot() {
  auto& r = detail::registry::get();
  std::lock_guard lk(r.m);
  std::map<std::string, std::uint64_t> out;
  for (const auto& [name, c] : r.counters) out.emplace(name, c->value());
  return out;
}

/// Sets every counter to zero (counters stay registered). `reset_all()` in
/// <xdev/core/metrics_report.hpp> also empties the timers.
inline void reset() {
  auto& r = detail::registry::get();
  std::lock_guard lk(r.m);
  for (auto& [name, c] : r.counters) c->reset();
}

}  // namespace xdev::metrics
