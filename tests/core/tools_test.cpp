// xdev::tools: listeners see every operation, transfer, host task, synchronize, throttle wait,
// allocation and free of a small program, in order, with their ids, devices, streams and sizes;
// failures reach `end`; several listeners each see everything; a removed one sees nothing more.
#include <xdev/core/tools.hpp>

#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/ops.hpp>

#include "support/manual_backend.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace tools = xdev::tools;
using Host = xdev::backends::Host;

struct SeenEvent {
  std::string phase;  // "begin", "end", "instant"
  tools::Category category;
  std::string name;
  std::string device;
  std::uint64_t id;
  std::uint64_t stream;
  std::uint64_t bytes;
  std::string dtype;
  bool failed;
  std::chrono::steady_clock::time_point time;
  std::uint64_t event;

  [[nodiscard]] std::string brief() const {
    return phase + " " + tools::name_of(category) + " " + name + (dtype.empty() ? "" : " " + dtype) +
           (bytes != 0 ? " " + std::to_string(bytes) : "") + (failed ? " failed" : "");
  }
};

class Recorder final : public tools::Listener {
 public:
  void begin(const tools::Activity& a) override { add("begin", a, false); }
  void end(const tools::Activity& a, const std::exception_ptr& error) override { add("end", a, error != nullptr); }
  void instant(const tools::Activity& a) override { add("instant", a, false); }

  std::vector<SeenEvent> seen() const {
    std::lock_guard lk(m_);
    return seen_;
  }
  std::vector<std::string> briefs() const {
    std::vector<std::string> out;
    for (const auto& s : seen()) out.push_back(s.brief());
    return out;
  }

 private:
  void add(const char* phase, const tools::Activity& a, bool failed) {
    std::lock_guard lk(m_);
    seen_.push_back({phase, a.category, std::string(a.name), std::string(a.device), a.id, a.stream, a.bytes,
                     std::string(a.dtype), failed, a.time, a.event});
  }
  mutable std::mutex m_;
  std::vector<SeenEvent> seen_;
};

TEST(Tools, AListenerSeesASmallProgramExactly) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  auto recorder = std::make_shared<Recorder>();
  {
    const auto subscription = tools::add_listener(recorder);
    EXPECT_TRUE(tools::active());
    {
      auto x = xdev::empty<float>(dev, {4});
      std::vector<float> host(4, 1.0f);
      dev.copy_to_device(std::span<const float>(host), x.buffer()).get();
      xdev::ops::scale(dev, x, 2.0f).get();
      dev.execute([] {}).get();
      dev.copy_to_host(x.buffer(), std::span<float>(host)).get();
      dev.synchronize();
      EXPECT_EQ(host[3], 2.0f);
    }
    dev.synchronize();
  }
  EXPECT_FALSE(tools::active());
  const std::vector<std::string> expected = {
      "instant allocation allocate 16",
      "begin transfer copy_to_device 16",
      "end transfer copy_to_device 16",
      "begin op scale f32",
      "end op scale f32",
      "begin host_task execute",
      "end host_task execute",
      "begin transfer copy_to_host 16",
      "end transfer copy_to_host 16",
      "begin synchronize synchronize",
      "end synchronize synchronize",
      "instant free free 16",
      "begin synchronize synchronize",
      "end synchronize synchronize",
  };
  EXPECT_EQ(recorder->briefs(), expected);

  const auto seen = recorder->seen();
  ASSERT_EQ(seen.size(), expected.size());
  std::vector<std::uint64_t> ids;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].device, dev.name()) << i;
    EXPECT_NE(seen[i].id, 0u) << i;
    if (i > 0) {
      EXPECT_GE(seen[i].time, seen[i - 1].time) << i;
    }
    ids.push_back(seen[i].id);
  }
  // Each begin and its end share an id; no two activities share one.
  for (std::size_t i = 1; i + 1 < seen.size(); i += 2) {
    if (seen[i].phase != "begin") continue;
    EXPECT_EQ(seen[i].id, seen[i + 1].id) << seen[i].brief();
  }
  EXPECT_NE(ids[1], ids[3]);
  // The work of the default stream names one stream; synchronize of the device names none.
  EXPECT_NE(seen[1].stream, 0u);
  EXPECT_EQ(seen[3].stream, seen[1].stream);
  EXPECT_EQ(seen[9].stream, 0u);
}

TEST(Tools, StreamsHaveTheirOwnIdsAndStreamSynchronizeIsReported) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  auto a = dev.make_stream();
  auto b = dev.make_stream();
  auto recorder = std::make_shared<Recorder>();
  const auto subscription = tools::add_listener(recorder);
  a.execute([] {}).get();
  b.execute([] {}).get();
  b.synchronize();
  const auto seen = recorder->seen();
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_NE(seen[0].stream, seen[2].stream);
  EXPECT_EQ(seen[4].brief(), "begin synchronize Stream::synchronize");
  EXPECT_EQ(seen[4].stream, seen[2].stream);
}

TEST(Tools, ARecordAndTheWaitsOnItNameOnePoint) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  auto a = dev.make_stream();
  auto b = dev.make_stream();
  const auto untraced = a.record();
  auto recorder = std::make_shared<Recorder>();
  const auto subscription = tools::add_listener(recorder);
  const auto e = a.record();
  b.wait(e);
  b.wait(untraced);
  b.synchronize();
  std::vector<std::string> briefs;
  std::vector<SeenEvent> points;
  for (const auto& s : recorder->seen())
    if (s.category == tools::Category::event_record || s.category == tools::Category::event_wait) {
      briefs.push_back(s.brief());
      points.push_back(s);
    }
  EXPECT_EQ(briefs,
            (std::vector<std::string>{"begin event_record record", "end event_record record", "begin event_wait wait",
                                      "end event_wait wait", "begin event_wait wait", "end event_wait wait"}));
  ASSERT_EQ(points.size(), 6u);
  EXPECT_NE(points[0].event, 0u);
  EXPECT_EQ(points[2].event, points[0].event) << "the wait names the recorded point";
  EXPECT_EQ(points[4].event, 0u) << "a point recorded before anyone listened has no name";
  EXPECT_NE(points[0].stream, 0u);
  EXPECT_NE(points[2].stream, 0u);
  EXPECT_NE(points[0].stream, points[2].stream) << "the record is on a's stream, the wait on b's";
}

TEST(Tools, AFailedOperationEndsWithItsError) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  auto recorder = std::make_shared<Recorder>();
  const auto subscription = tools::add_listener(recorder);
  auto f = dev.execute([] { throw std::runtime_error("boom"); });
  EXPECT_THROW(f.get(), std::runtime_error);
  EXPECT_EQ(recorder->briefs(), (std::vector<std::string>{"begin host_task execute", "end host_task execute failed"}));
}

TEST(Tools, EveryListenerSeesEverythingAndARemovedOneNothingMore) {
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  auto first = std::make_shared<Recorder>();
  auto second = std::make_shared<Recorder>();
  auto one = tools::add_listener(first);
  {
    const auto two = tools::add_listener(second);
    dev.execute([] {}).get();
  }
  dev.execute([] {}).get();
  one.reset();
  EXPECT_FALSE(one);
  dev.execute([] {}).get();
  EXPECT_EQ(first->seen().size(), 4u);
  EXPECT_EQ(second->seen().size(), 2u);
  EXPECT_THROW((void)tools::add_listener(nullptr), std::invalid_argument);
}

TEST(Tools, AThrowingListenerDoesNotDisturbTheWork) {
  struct Thrower final : tools::Listener {
    void begin(const tools::Activity&) override { throw std::runtime_error("listener bug"); }
    void end(const tools::Activity&, const std::exception_ptr&) override { throw 42; }
  };
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  auto recorder = std::make_shared<Recorder>();
  const auto a = tools::add_listener(std::make_shared<Thrower>());
  const auto b = tools::add_listener(recorder);
  EXPECT_EQ(dev.execute([] { return 7; }).get(), 7);
  EXPECT_EQ(recorder->seen().size(), 2u) << "a listener after the throwing one missed its calls";
}

TEST(Tools, AnOpRunByTheCpuFallbackIsAFallbackInstantInsideTheOp) {
  xdev::Runtime<xdev_test::ManualBackend> rt({}, 1, xdev_test::ManualBackend::Mode::inline_completion);
  auto dev = rt.device(0);
  auto x = xdev::empty<float>(dev, {8});
  auto recorder = std::make_shared<Recorder>();
  const auto subscription = tools::add_listener(recorder);
  xdev::ops::fill(dev, x, 1.0f).get();
  std::vector<std::string> briefs;
  for (const auto& s : recorder->seen())
    if (s.category != tools::Category::allocation) briefs.push_back(s.brief() + " on " + s.device);
  EXPECT_EQ(briefs,
            (std::vector<std::string>{"begin op fill f32 on " + dev.name(), "instant fallback fill on " + dev.name(),
                                      "end op fill f32 on " + dev.name()}));
}

TEST(Tools, AProducerBlockedForAnInFlightSlotIsAThrottleWait) {
  xdev::Runtime<Host> rt({.max_inflight = 1}, Host::Options{.devices = 1, .threads = 2});
  auto dev = rt.device(0);
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  auto recorder = std::make_shared<Recorder>();
  const auto subscription = tools::add_listener(recorder);
  auto held = dev.execute([opened] { opened.wait(); });
  std::thread producer([&] { dev.execute([] {}).get(); });
  // The producer's wait begins once it is blocked; then the first task may finish.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto waiting = [&] {
    for (const auto& s : recorder->seen())
      if (s.category == tools::Category::throttle_wait) return true;
    return false;
  };
  while (!waiting() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  gate.set_value();
  producer.join();
  held.get();
  std::vector<std::string> waits;
  for (const auto& s : recorder->seen())
    if (s.category == tools::Category::throttle_wait) waits.push_back(s.phase + " " + s.device);
  EXPECT_EQ(waits, (std::vector<std::string>{"begin " + dev.name(), "end " + dev.name()}));
}

}  // namespace
