// xdev::trace: a traced run of a small program on host devices is a valid Trace Event Format file
// with the expected tracks and events; bad uses are clear errors; a file that cannot be written
// is an error naming it, and leaves nothing behind.
#include <xdev/core/trace.hpp>

#include <xdev/backends/host.hpp>
#include <xdev/core/error.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/ops.hpp>

#include "support/trace_check.hpp"

#include <boost/json/src.hpp>  // Boost.JSON, header-only, for the checker: in this file only

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Host = xdev::backends::Host;
namespace fs = std::filesystem;

// A path in a fresh directory of this test, removed at the end.
class TraceFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("xdev_trace_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    (void)xdev::trace::stop();
    fs::remove_all(dir_);
  }
  [[nodiscard]] std::string path(const char* name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(TraceFile, ATracedRunIsAValidTraceWithATrackPerDeviceAndStream) {
  const std::string file = path("run.json");
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 2, .threads = 2});
  xdev::trace::start(file);
  EXPECT_EQ(xdev::trace::recording(), file);
  {
    auto d0 = rt.device(0);
    auto d1 = rt.device(1);
    auto x = xdev::empty<float>(d0, {256});
    auto y = xdev::empty<float>(d1, {256});
    std::vector<float> host(256, 1.0f);
    d0.copy_to_device(std::span<const float>(host), x.buffer()).get();
    auto s = d0.make_stream();
    for (int i = 0; i < 3; ++i) xdev::ops::scale(s, x, 2.0f).get();
    d1.copy_to_device(std::span<const float>(host), y.buffer()).get();
    EXPECT_THROW(d1.execute([] { throw std::runtime_error("deliberate"); }).get(), std::runtime_error);
    rt.synchronize();
  }
  const auto written = xdev::trace::stop();
  ASSERT_EQ(written, file);
  EXPECT_EQ(xdev::trace::recording(), std::nullopt);
  EXPECT_FALSE(fs::exists(file + ".tmp." + std::to_string(::getpid())));

  const auto trace = xdev_test::check_trace_file(file);
  EXPECT_THAT(trace.problems, ::testing::IsEmpty());
  const auto scales = trace.named("X", "scale");
  ASSERT_EQ(scales.size(), 3u);
  EXPECT_EQ(trace.process_name(scales[0].pid), "HOST:0");
  EXPECT_EQ(scales[0].cat, "op");
  EXPECT_EQ(scales[0].args.at("dtype").as_string(), "f32");
  // The three ops of one stream are on one track, one after another.
  EXPECT_EQ(scales[1].tid, scales[0].tid);
  EXPECT_GE(scales[1].ts, scales[0].ts + scales[0].dur - 0.0015);
  const auto copies = trace.named("X", "copy_to_device");
  ASSERT_EQ(copies.size(), 2u);
  std::set<std::string> copy_devices;
  for (const auto& c : copies) {
    copy_devices.insert(trace.process_name(c.pid));
    EXPECT_EQ(c.args.at("bytes").as_int64(), 1024);
    EXPECT_NE(c.tid, scales[0].tid) << "the default stream and the made stream share a track";
  }
  EXPECT_EQ(copy_devices, (std::set<std::string>{"HOST:0", "HOST:1"}));
  // The failure: its slice carries the error, and an instant marks it.
  const auto failed = trace.named("X", "execute");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_THAT(std::string(failed[0].args.at("error").as_string()), ::testing::HasSubstr("deliberate"));
  EXPECT_EQ(trace.named("i", "error: execute").size(), 1u);
  // Memory and in-flight counters, and the host thread's synchronize.
  EXPECT_FALSE(trace.named("C", "bytes in use").empty());
  EXPECT_FALSE(trace.named("C", "operations in flight").empty());
  EXPECT_EQ(trace.named("X", "synchronize").size(), 2u);  // one per device
}

TEST_F(TraceFile, AnArrowLeadsFromEachRecordToTheWaitsItReleases) {
  const std::string file = path("events.json");
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  auto producer = dev.make_stream();
  auto consumer = dev.make_stream();
  auto other = dev.make_stream();
  const auto before = producer.record();  // not traced: no arrow
  xdev::trace::start(file);
  consumer.wait(before);
  auto held = producer.execute([] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
  const auto point = producer.record();
  consumer.wait(point);
  other.wait(point);
  auto after = consumer.execute([] {});
  after.get();
  other.synchronize();
  held.get();
  ASSERT_EQ(xdev::trace::stop(), file);

  const auto trace = xdev_test::check_trace_file(file);
  EXPECT_THAT(trace.problems, ::testing::IsEmpty());
  const auto records = trace.named("X", "record");
  const auto waits = trace.named("X", "wait");
  ASSERT_EQ(records.size(), 1u);
  ASSERT_EQ(waits.size(), 3u);
  EXPECT_EQ(records[0].cat, "event_record");
  const auto starts = trace.named("s", "event");
  const auto finishes = trace.named("f", "event");
  ASSERT_EQ(starts.size(), 2u) << "one arrow per wait of the traced record";
  ASSERT_EQ(finishes.size(), 2u);
  std::set<std::int64_t> released;
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(starts[i].tid, records[0].tid);
    released.insert(finishes[i].tid);
  }
  std::set<std::int64_t> waiting;
  for (const auto& w : waits) waiting.insert(w.tid);
  EXPECT_EQ(released.size(), 2u) << "both waiting streams get an arrow";
  EXPECT_EQ(waiting.size(), 2u);
  EXPECT_EQ(released, waiting);
  // A released wait ends no earlier than the point is reached (after the producer's sleep).
  for (const auto& f : finishes)
    for (const auto& w : waits)
      if (w.tid == f.tid && w.ts - 0.0015 <= f.ts && f.ts <= w.ts + w.dur + 0.0015) {
        EXPECT_GE(w.ts + w.dur, records[0].ts - 0.0015);
      }
}

TEST(TraceDocument, ARankOfAJobHasItsOwnPidsNamesAndMeetingTime) {
  namespace td = xdev::trace::detail;
  const auto origin = std::chrono::steady_clock::now();
  const auto at = [&](int us) { return origin + std::chrono::microseconds(us); };
  std::vector<td::Record> records;
  auto add = [&](char phase, std::uint64_t id, const char* device, int us) {
    records.push_back(
        td::Record{phase, xdev::tools::Category::op, id, "gemm", device, "f32", {}, 3, 0, 0, 0, 1, at(us), {}, {}});
  };
  add('B', 1, "HOST:0", 10);
  add('E', 1, "HOST:0", 20);
  add('B', 2, "HOST:1", 12);
  add('E', 2, "HOST:1", 30);
  const std::string text = td::Document(origin, at(40), td::JobPlace{2, 4, at(5)}).build(records);
  const auto trace = xdev_test::check_trace_text(text);
  EXPECT_THAT(trace.problems, ::testing::IsEmpty());
  const auto ops = trace.named("X", "gemm");
  ASSERT_EQ(ops.size(), 2u);
  for (const auto& op : ops) {
    EXPECT_GT(op.pid, 2000);
    EXPECT_LT(op.pid, 3000) << "rank 2's tracks have pids from 2000";
  }
  EXPECT_EQ(trace.process_name(ops[0].pid), "rank 2: HOST:0");
  EXPECT_EQ(trace.process_name(ops[1].pid), "rank 2: HOST:1");
  const auto doc = boost::json::parse(text).as_object();
  const auto& job = doc.at("xdev").as_object();
  EXPECT_EQ(job.at("rank").as_int64(), 2);
  EXPECT_EQ(job.at("world_size").as_int64(), 4);
  EXPECT_NEAR(job.at("rendezvous_us").to_number<double>(), 5.0, 0.01);
  // A process alone has no job: pids from 1, device names as they are, no "xdev" member.
  const std::string alone = td::Document(origin, at(40)).build(records);
  EXPECT_FALSE(boost::json::parse(alone).as_object().contains("xdev"));
  const auto single = xdev_test::check_trace_text(alone);
  EXPECT_EQ(single.process_name(single.named("X", "gemm")[0].pid), "HOST:0");
}

TEST_F(TraceFile, BadUsesAreClearErrors) {
  EXPECT_EQ(xdev::trace::stop(), std::nullopt) << "nothing was being recorded";
  try {
    xdev::trace::start("");
    FAIL() << "an empty path was accepted";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
  }
  xdev::trace::start(path("a.json"));
  try {
    xdev::trace::start(path("b.json"));
    FAIL() << "a second trace started while one is recorded";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::unavailable);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("a.json"));
  }
  EXPECT_EQ(xdev::trace::stop(), path("a.json"));
  EXPECT_THAT(xdev_test::check_trace_file(path("a.json")).problems, ::testing::IsEmpty()) << "an empty trace";
}

TEST_F(TraceFile, AFileThatCannotBeWrittenIsRefusedAtStart) {
  const std::string file = (dir_ / "missing" / "t.json").string();
  try {
    xdev::trace::start(file);
    FAIL() << "a trace into a directory that does not exist was started";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("t.json"));
  }
  EXPECT_EQ(xdev::trace::recording(), std::nullopt);
  EXPECT_TRUE(fs::is_empty(dir_)) << "the check left a file behind";
}

TEST_F(TraceFile, AFileThatCannotBeWrittenAtStopIsAnErrorNamingItAndLeavesNothing) {
  const std::string file = (dir_ / "missing" / "t.json").string();
  fs::create_directories(dir_ / "missing");
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 1});
  xdev::trace::start(file);
  rt.device(0).execute([] {}).get();
  fs::remove_all(dir_ / "missing");  // gone before the trace is written
  try {
    (void)xdev::trace::stop();
    FAIL() << "the trace was written into a directory that does not exist";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::unavailable);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("t.json"));
  }
  EXPECT_EQ(xdev::trace::recording(), std::nullopt) << "a failed write still ends the trace";
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
}

TEST(TraceChecker, RejectsWhatPerfettoWouldNot) {
  // The checker itself must fail: overlapping slices of one track, a missing field, a negative
  // duration, an unpaired flow.
  const auto bad = xdev_test::check_trace_text(R"({"traceEvents":[
    {"ph":"X","pid":1,"tid":1,"ts":0,"dur":10,"name":"a"},
    {"ph":"X","pid":1,"tid":1,"ts":5,"dur":10,"name":"b"},
    {"ph":"X","pid":1,"tid":2,"ts":0,"dur":-1,"name":"c"},
    {"ph":"i","pid":1,"ts":3,"name":"d"},
    {"ph":"s","pid":1,"tid":1,"ts":1,"id":7,"name":"e"},
    {"ph":"s","pid":1,"tid":3,"ts":1,"id":8,"name":"g"},
    {"ph":"f","pid":1,"tid":1,"ts":4,"id":8,"name":"g"}]})");
  // overlap, no tid, negative dur, flow 7 unpaired, flow 8's start on a track without slices
  EXPECT_EQ(bad.problems.size(), 5u) << ::testing::PrintToString(bad.problems);
  const auto good = xdev_test::check_trace_text(R"({"traceEvents":[
    {"ph":"X","pid":1,"tid":1,"ts":0,"dur":10,"name":"a"},
    {"ph":"X","pid":1,"tid":1,"ts":2,"dur":3,"name":"inside"},
    {"ph":"X","pid":1,"tid":1,"ts":10,"dur":1,"name":"after"},
    {"ph":"s","pid":1,"tid":1,"ts":1,"id":7,"name":"e"},
    {"ph":"f","pid":1,"tid":1,"ts":4,"id":7,"name":"e"}]})");
  EXPECT_THAT(good.problems, ::testing::IsEmpty());
}

}  // namespace
