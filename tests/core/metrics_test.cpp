// xdev::metrics (metrics_report.hpp): counters, the timers fed by the profiler hooks while collected, and the reports a
// person (report) and a script (report_json) read, with each device's memory and execution.
#include <xdev/core/metrics_report.hpp>

#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/ops.hpp>

#include <boost/json.hpp>  // its definitions are compiled in trace_test.cpp

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

using Host = xdev::backends::Host;
using ::testing::HasSubstr;
namespace metrics = xdev::metrics;

// A counter counted during static destruction (work completing on a backend's thread while main
// returns, or a static destructor of the program's): the atexit handler, registered before the
// counters exist, runs after everything constructed later was destroyed. The counters' registry
// was such an object: the count then walked a destroyed map (ASan: heap-use-after-free).
[[noreturn]] void count_after_the_statics_are_gone() {
  std::atexit([] {
    metrics::counter("exit.late").add();
    std::_Exit(metrics::value("exit.late") == 1 ? 0 : 3);
  });
  metrics::counter("exit.late");  // the registry exists from here on
  std::exit(0);
}

TEST(MetricsAtExit, ACounterCountedDuringStaticDestructionStillCounts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, whose registry is made after the handler
  EXPECT_EXIT(count_after_the_statics_are_gone(), ::testing::ExitedWithCode(0), "");
}

TEST(Metrics, ATimerKeepsExactExtremesAndPercentilesOfItsWindow) {
  metrics::Timer t;
  for (int i = 1; i <= 100; ++i) t.record(std::chrono::microseconds(i));
  const auto s = t.stats();
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(s.total, std::chrono::microseconds(5050));
  EXPECT_EQ(s.min, std::chrono::microseconds(1));
  EXPECT_EQ(s.max, std::chrono::microseconds(100));
  EXPECT_EQ(s.median, std::chrono::microseconds(51));  // nearest rank of 0.5 over 1..100
  EXPECT_EQ(s.p99, std::chrono::microseconds(99));
  // Beyond the window, the percentiles follow the recent samples; count and extremes stay exact.
  for (std::size_t i = 0; i < metrics::Timer::window; ++i) t.record(std::chrono::microseconds(1000));
  const auto later = t.stats();
  EXPECT_EQ(later.count, 100u + metrics::Timer::window);
  EXPECT_EQ(later.min, std::chrono::microseconds(1));
  EXPECT_EQ(later.median, std::chrono::microseconds(1000));
  t.reset();
  EXPECT_EQ(t.stats().count, 0u);
}

TEST(Metrics, TimersAreFedOnlyWhileCollectedAndTheReportsListThem) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 2, .threads = 2});
  auto dev = rt.device(0);
  auto x = xdev::empty<float>(dev, {64});
  metrics::reset_all();
  metrics::collect_timers(true);
  EXPECT_TRUE(metrics::collecting_timers());
  xdev::ops::fill(dev, x, 1.0f).get();
  for (int i = 0; i < 3; ++i) xdev::ops::scale(dev, x, 2.0f).get();
  dev.execute([] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }).get();
  dev.synchronize();
  metrics::collect_timers(false);
  EXPECT_FALSE(metrics::collecting_timers());
  xdev::ops::scale(dev, x, 2.0f).get();  // not collected any more

  const auto timers = metrics::timer_snapshot();
  ASSERT_TRUE(timers.count("op.scale"));
  EXPECT_EQ(timers.at("op.scale").count, 3u);
  EXPECT_EQ(timers.at("op.fill").count, 1u);
  ASSERT_TRUE(timers.count("host_task.execute"));
  EXPECT_GE(timers.at("host_task.execute").min, std::chrono::milliseconds(5));
  EXPECT_EQ(timers.at("synchronize.device").count, 1u);

  std::vector<xdev::Device<Host>> devices{rt.device(0), rt.device(1)};
  const std::string text = metrics::report(devices);
  EXPECT_THAT(text, HasSubstr("timers (microseconds):\n  "));
  EXPECT_THAT(text, HasSubstr("op.scale: count=3 total="));
  EXPECT_THAT(text, HasSubstr("HOST:0: memory in_use=256 peak="));
  EXPECT_THAT(text, HasSubstr("HOST:1: memory in_use=0"));
  EXPECT_THAT(metrics::report(), ::testing::Not(HasSubstr("devices:")));

  boost::system::error_code ec;
  const auto doc = boost::json::parse(metrics::report_json(devices), ec);
  ASSERT_FALSE(ec) << metrics::report_json(devices);
  EXPECT_EQ(doc.at("timers").at("op.scale").at("count").as_int64(), 3);
  EXPECT_GE(doc.at("timers").at("host_task.execute").at("min_us").to_number<double>(), 5000.0);
  ASSERT_EQ(doc.at("devices").as_array().size(), 2u);
  EXPECT_EQ(doc.at("devices").at(0).at("name").as_string(), "HOST:0");
  EXPECT_EQ(doc.at("devices").at(0).at("memory").at("in_use").as_int64(), 256);
  EXPECT_TRUE(doc.at("devices").at(0).at("memory").at("limit").is_null());
  EXPECT_GE(doc.at("devices").at(0).at("execution").at("completed").as_int64(), 6);
  EXPECT_TRUE(doc.at("counters").is_object());

  metrics::reset_all();
  EXPECT_TRUE(metrics::timer_snapshot().empty());
}

TEST(Metrics, ACounterIsCountedAndReported) {
  auto& c = metrics::counter("test.metrics.counted");
  c.reset();
  c.add(2);
  EXPECT_EQ(metrics::value("test.metrics.counted"), 2u);
  EXPECT_THAT(metrics::report(), HasSubstr("  test.metrics.counted: 2\n"));
  boost::system::error_code ec;
  const auto doc = boost::json::parse(metrics::report_json(), ec);
  ASSERT_FALSE(ec);
  EXPECT_EQ(doc.at("counters").at("test.metrics.counted").as_int64(), 2);
  EXPECT_TRUE(doc.at("devices").as_array().empty());
}

}  // namespace
