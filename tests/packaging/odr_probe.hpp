// The probe both TUs of the ODR link test run (tests/packaging/CMakeLists.txt says why).
#pragma once

#include <xdev/xdev.hpp>

#include <cstddef>
#include <future>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

namespace odr {

/// What one TU sees: addresses of entities that must exist once per program, and results of
/// xdev's inline functions and templates as compiled in that TU.
struct Report {
  const std::error_category* category = nullptr;
  const xdev::use_future_t* use_future = nullptr;
  const void* default_runtime = nullptr;
  xdev::DType parsed = xdev::DType::bool_;
  std::optional<std::size_t> probe;
  std::string capabilities;
  std::string device;
  std::string shape;
  long long sum = 0;
  std::vector<int> round_trip;
};

inline constexpr std::size_t elements = 1000;

/// The first element of TU `tu`'s data; the data is `first(tu), first(tu) + 1, ...`.
constexpr int first(int tu) {
  return tu * 1000;
}

/// The sum `execute` must return in TU `tu`.
constexpr long long expected_sum(int tu) {
  const auto n = static_cast<long long>(elements);
  return n * first(tu) + n * (n - 1) / 2;
}

/// Runs the probe. `Tu` makes each TU's instantiation a distinct function, so each TU compiles
/// (and emits) its own uses of xdev's inline functions and templates.
template <int Tu>
Report probe() {
  using Host = xdev::backends::Host;
  Report r;
  r.category = &xdev::error_category();
  r.use_future = &xdev::use_future;
  r.default_runtime = &xdev::default_runtime<Host>();
  r.parsed = xdev::parse_dtype("float32");
  r.probe = xdev::getenv_count("XDEV_ODR_PROBE", 1, 100);
  r.capabilities = xdev::to_string(xdev::Device<Host>::capability_set);
  r.shape = to_string(xdev::Shape{2, 3});

  xdev::Runtime<Host> runtime({.max_inflight = 4}, Host::Options{.devices = 1, .threads = 2});
  xdev::Device<Host> dev = runtime.device(0);
  r.device = dev.name();
  std::vector<int> data(elements);
  std::iota(data.begin(), data.end(), first(Tu));
  auto buf = dev.allocate<int>(data.size());
  dev.copy_to_device(std::span<const int>(data), buf, xdev::use_future).get();
  std::future<long long> sum = dev.execute(
      [&buf] {
        const int* p = buf.host_data();
        return std::accumulate(p, p + buf.size(), 0LL);
      },
      xdev::use_future);
  r.sum = sum.get();
  r.round_trip.resize(data.size());
  dev.copy_to_host(buf, std::span<int>(r.round_trip), xdev::use_future).get();
  dev.synchronize();
  return r;
}

Report probe_main();    // odr_main.cpp
Report probe_second();  // odr_second.cpp

/// Throws the `xdev::error` of `parse_dtype("bogus")` from the second TU.
[[noreturn]] void throw_from_second();

}  // namespace odr
