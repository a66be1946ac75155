// Streams on a backend with native in-order queues (concepts::NativeQueues): each operation is
// handed to the stream's queue as soon as it holds an in-flight slot, without waiting for the one
// before it; completions are still delivered in submission order; work that is not one enqueue
// keeps host ordering.
#include <xdev/async/event.hpp>
#include <xdev/async/tokens.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/core/tools.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>

#include "support/manual_backend.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using xdev_test::ManualBackend;

// ManualBackend with queues: records which queue each host task was enqueued on.
class QueueBackend : public ManualBackend {
 public:
  using ManualBackend::ManualBackend;
  using queue_handle = std::uint64_t;

  queue_handle create_queue(std::size_t) {
    std::lock_guard lk(qm_);
    ++live_;
    return ++next_;
  }
  void destroy_queue(std::size_t, queue_handle) noexcept {
    std::lock_guard lk(qm_);
    --live_;
  }
  void bind_queue(std::size_t, queue_handle q) noexcept { bound = q; }
  void unbind_queue(std::size_t) noexcept { bound = 0; }

  void execute(std::size_t d, xdev::HostTask t, xdev::Completion done) {
    {
      std::lock_guard lk(qm_);
      enqueued_on_.push_back(bound);
    }
    ManualBackend::execute(d, std::move(t), std::move(done));
  }

  std::vector<queue_handle> enqueued_on() const {
    std::lock_guard lk(qm_);
    return enqueued_on_;
  }
  int live_queues() const {
    std::lock_guard lk(qm_);
    return live_;
  }

  static inline thread_local queue_handle bound = 0;

 private:
  mutable std::mutex qm_;
  queue_handle next_ = 0;
  int live_ = 0;
  std::vector<queue_handle> enqueued_on_;
};
static_assert(xdev::concepts::NativeQueues<QueueBackend>);

TEST(NativeQueues, AStreamHandsItsOperationsOverWithoutWaiting) {
  xdev::Runtime<QueueBackend> rt({.max_inflight = 16}, 1);
  auto s = rt.device(0).make_stream();
  std::vector<xdev::Future<void>> fs;
  for (int i = 0; i < 3; ++i) fs.push_back(s.execute([] {}));
  EXPECT_EQ(rt.backend().queued(), 3u) << "an operation waited for the one before it on the host";
  rt.backend().run_all();
  for (auto& f : fs) f.get();
}

TEST(NativeQueues, EachStreamHasItsOwnQueueAndTheDefaultStreamOneToo) {
  std::vector<std::uint64_t> on;
  {
    xdev::Runtime<QueueBackend> rt({.max_inflight = 16}, 1);
    auto dev = rt.device(0);
    auto a = dev.make_stream();
    auto b = dev.make_stream();
    (void)a.execute([] {});
    (void)b.execute([] {});
    (void)dev.execute([] {});
    (void)a.execute([] {});
    rt.backend().run_all();
    dev.synchronize();
    on = rt.backend().enqueued_on();
    EXPECT_EQ(rt.backend().live_queues(), 3);  // a, b and the default stream's
  }
  ASSERT_EQ(on.size(), 4u);
  EXPECT_EQ(std::set<std::uint64_t>(on.begin(), on.end()).size(), 3u);
  EXPECT_EQ(on[0], on[3]);
  for (auto q : on) EXPECT_NE(q, 0u) << "an operation was enqueued with no queue bound";
}

TEST(NativeQueues, QueuesAreDestroyedWithTheirStreamsAndTheRuntime) {
  xdev::Runtime<QueueBackend> rt({.max_inflight = 16}, 1);
  const int base = rt.backend().live_queues();  // the default stream's
  {
    auto s = rt.device(0).make_stream();
    EXPECT_EQ(rt.backend().live_queues(), base + 1);
    (void)s.execute([] {});
    rt.backend().run_all();
    s.synchronize();
  }
  EXPECT_EQ(rt.backend().live_queues(), base);
}

TEST(NativeQueues, CompletionsAreDeliveredInSubmissionOrderWhateverOrderTheBackendReports) {
  xdev::Runtime<QueueBackend> rt({.max_inflight = 16}, 1);
  auto s = rt.device(0).make_stream();
  std::mutex m;
  std::vector<int> delivered;
  for (int i = 0; i < 5; ++i)
    s.execute([] {},
              [&, i](std::exception_ptr) {
                std::lock_guard lk(m);
                delivered.push_back(i);
              });
  while (rt.backend().run_newest()) {
  }
  s.synchronize();
  EXPECT_EQ(delivered, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(NativeQueues, AMarkerWaitsForTheWorkBeforeItAndAWaitHoldsBackTheWorkAfterIt) {
  xdev::Runtime<QueueBackend> rt({.max_inflight = 16}, 1);
  auto dev = rt.device(0);
  auto a = dev.make_stream();
  auto b = dev.make_stream();
  (void)a.execute([] {});
  const xdev::Event e = a.record();
  EXPECT_FALSE(e.ready());
  b.wait(e);
  auto after = b.execute([] {});
  EXPECT_EQ(rt.backend().queued(), 1u) << "work after a wait started before the event";
  rt.backend().run_one();  // a's work: the event fires, b's work is handed over
  EXPECT_TRUE(e.ready());
  EXPECT_EQ(rt.backend().queued(), 1u);
  rt.backend().run_all();
  after.get();
}

TEST(NativeQueues, PoisonFailsWorkAlreadyOnTheQueueAndWorkNotYetStarted) {
  xdev::Runtime<QueueBackend> rt({.max_inflight = 16}, 1);
  auto s = rt.device(0).make_stream({.on_error = xdev::ErrorPolicy::poison});
  auto f0 = s.execute([] { throw std::runtime_error("first"); });
  auto f1 = s.execute([] {});  // on the queue already: it runs, but its outcome is the error
  rt.backend().run_all();
  auto f2 = s.execute([] {});  // after the failure was seen: never reaches the backend
  rt.backend().run_all();
  for (auto* f : {&f0, &f1, &f2}) EXPECT_THROW(f->get(), std::runtime_error);
  EXPECT_EQ(rt.backend().enqueued_on().size(), 2u);
}

}  // namespace

namespace {

// QueueBackend with native markers: a marker is a queued job (it completes when run, after the
// jobs before it); waits are recorded with the queue they were enqueued on.
class MarkerBackend : public QueueBackend {
 public:
  using QueueBackend::QueueBackend;
  using marker_handle = std::uint64_t;

  marker_handle record_marker(std::size_t d, xdev::Completion done) {
    ManualBackend::execute(
        d, [] {}, std::move(done));
    std::lock_guard lk(mm_);
    ++live_markers_;
    return ++next_marker_;
  }
  void wait_marker(std::size_t, marker_handle m) {
    std::lock_guard lk(mm_);
    waits_.push_back({bound, m});
  }
  void release_marker(std::size_t, marker_handle) noexcept {
    std::lock_guard lk(mm_);
    --live_markers_;
  }

  struct wait_record {
    queue_handle queue;
    marker_handle marker;
  };
  std::vector<wait_record> waits() const {
    std::lock_guard lk(mm_);
    return waits_;
  }
  int live_markers() const {
    std::lock_guard lk(mm_);
    return live_markers_;
  }

 private:
  mutable std::mutex mm_;
  marker_handle next_marker_ = 0;
  int live_markers_ = 0;
  std::vector<wait_record> waits_;
};
static_assert(xdev::concepts::NativeMarkers<MarkerBackend>);
static_assert(!xdev::concepts::NativeMarkers<QueueBackend>);

std::uint64_t native_waits() {
  return xdev::metrics::counter("stream.wait.native").value();
}

TEST(NativeMarkers, ElapsedTimeIsMeasuredBetweenTheMarkersCompletions) {
  xdev::Runtime<MarkerBackend> rt({.max_inflight = 16}, 1);
  auto s = rt.device(0).make_stream();
  const xdev::Event start = s.record();
  rt.backend().run_all();
  ASSERT_TRUE(start.ready());
  std::this_thread::sleep_for(std::chrono::milliseconds(25));
  const xdev::Event end = s.record();
  EXPECT_THROW((void)start.elapsed_time(end), xdev::error) << "the later marker has not run";
  rt.backend().run_all();
  end.wait();
  EXPECT_GE(start.elapsed_time(end), 25.0);
}

TEST(NativeMarkers, AWaitOnAnotherStreamsRecordIsEnqueuedWithoutWaitingForIt) {
  xdev::Runtime<MarkerBackend> rt({.max_inflight = 16}, 1);
  auto producer = rt.device(0).make_stream();
  auto consumer = rt.device(0).make_stream();
  ASSERT_TRUE(producer.has_markers());
  std::vector<int> order;
  auto work = producer.execute([&] { order.push_back(1); });
  const xdev::Event e = producer.record();
  const auto before = native_waits();
  consumer.wait(e);
  auto after = consumer.execute([&] { order.push_back(2); });
  // work, the marker and the consumer's task are all on the device: the wait held nothing back.
  EXPECT_EQ(rt.backend().queued(), 3u) << "the consumer's task waited for the event on the host";
  EXPECT_EQ(native_waits(), before + 1);
  const auto waits = rt.backend().waits();
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_NE(waits[0].queue, 0u) << "the wait was not enqueued on the consumer's queue";
  EXPECT_FALSE(e.ready());
  rt.backend().run_all();
  work.get();
  after.get();
  e.wait();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(rt.backend().live_markers(), 0) << "the marker was not released once its event was ready";
}

TEST(NativeMarkers, HooksSeeTheRecordUntilItsPointAndTheWaitAtItsEnqueue) {
  struct Points final : xdev::tools::Listener {
    void begin(const xdev::tools::Activity& a) override { add("begin", a); }
    void end(const xdev::tools::Activity& a, const std::exception_ptr&) override { add("end", a); }
    void add(const char* phase, const xdev::tools::Activity& a) {
      if (a.category != xdev::tools::Category::event_record && a.category != xdev::tools::Category::event_wait) return;
      std::lock_guard lk(m);
      seen.push_back(std::string(phase) + " " + std::string(a.name));
      events.push_back(a.event);
    }
    std::mutex m;
    std::vector<std::string> seen;
    std::vector<std::uint64_t> events;
  };
  xdev::Runtime<MarkerBackend> rt({.max_inflight = 16}, 1);
  auto producer = rt.device(0).make_stream();
  auto consumer = rt.device(0).make_stream();
  auto points = std::make_shared<Points>();
  const auto subscription = xdev::tools::add_listener(points);
  const xdev::Event e = producer.record();
  consumer.wait(e);
  {
    std::lock_guard lk(points->m);
    // The record is on the device, its point not reached; the device orders the wait.
    EXPECT_EQ(points->seen, (std::vector<std::string>{"begin record", "begin wait", "end wait"}));
  }
  rt.backend().run_all();
  e.wait();
  std::lock_guard lk(points->m);
  EXPECT_EQ(points->seen, (std::vector<std::string>{"begin record", "begin wait", "end wait", "end record"}));
  ASSERT_EQ(points->events.size(), 4u);
  EXPECT_NE(points->events[0], 0u);
  for (auto id : points->events) EXPECT_EQ(id, points->events[0]);
}

// Markers whose backend says when the device reached them: the k-th at 1000 s + 7.5 ms * k.
class TimedMarkerBackend : public MarkerBackend {
 public:
  using MarkerBackend::MarkerBackend;
  static std::chrono::steady_clock::time_point reached(int k) {
    return std::chrono::steady_clock::time_point(std::chrono::seconds(1000)) + std::chrono::microseconds(7500 * k);
  }
  marker_handle record_marker(std::size_t d, xdev::Completion done) {
    const auto at = reached(count_++);
    return MarkerBackend::record_marker(d, [done = std::move(done), at](std::exception_ptr ep) mutable {
      xdev::report_device_times({at - std::chrono::microseconds(1), at});
      done(std::move(ep));
    });
  }

 private:
  int count_ = 0;
};

TEST(NativeMarkers, ElapsedTimeAndTheHooksUseTheDeviceTimesTheBackendReports) {
  struct Records final : xdev::tools::Listener {
    void end(const xdev::tools::Activity& a, const std::exception_ptr&) override {
      if (a.category != xdev::tools::Category::event_record) return;
      std::lock_guard lk(m);
      ends.push_back(a.device_end);
    }
    std::mutex m;
    std::vector<std::chrono::steady_clock::time_point> ends;
  };
  xdev::Runtime<TimedMarkerBackend> rt({.max_inflight = 16}, 1);
  auto s = rt.device(0).make_stream();
  auto records = std::make_shared<Records>();
  const auto subscription = xdev::tools::add_listener(records);
  const xdev::Event first = s.record();
  const xdev::Event second = s.record();
  const xdev::Event third = s.record();
  rt.backend().run_all();
  third.wait();
  // Exactly the device's times, whatever the host saw (the markers completed microseconds apart).
  EXPECT_DOUBLE_EQ(first.elapsed_time(second), 7.5);
  EXPECT_DOUBLE_EQ(first.elapsed_time(third), 15.0);
  EXPECT_DOUBLE_EQ(third.elapsed_time(first), -15.0);
  std::lock_guard lk(records->m);
  EXPECT_EQ(records->ends,
            (std::vector<std::chrono::steady_clock::time_point>{
                TimedMarkerBackend::reached(0), TimedMarkerBackend::reached(1), TimedMarkerBackend::reached(2)}));
}

TEST(NativeMarkers, AnEventThatIsReadyNeedsNoWait) {
  xdev::Runtime<MarkerBackend> rt({.max_inflight = 16}, 1);
  auto producer = rt.device(0).make_stream();
  auto consumer = rt.device(0).make_stream();
  const xdev::Event e = producer.record();
  rt.backend().run_all();
  e.wait();
  consumer.wait(e);
  auto f = consumer.execute([] {});
  rt.backend().run_all();
  f.get();
  EXPECT_TRUE(rt.backend().waits().empty());
  EXPECT_EQ(rt.backend().live_markers(), 0);
}

TEST(NativeMarkers, AnEventOfAnotherDeviceHoldsTheStreamOnTheHost) {
  xdev::Runtime<MarkerBackend> rt({.max_inflight = 16}, 2);
  auto producer = rt.device(0).make_stream();
  auto consumer = rt.device(1).make_stream();
  auto work = producer.execute([] {});
  const xdev::Event e = producer.record();
  consumer.wait(e);
  auto after = consumer.execute([] {});
  EXPECT_EQ(rt.backend().queued(), 2u) << "the other device's task was enqueued before the event was ready";
  EXPECT_TRUE(rt.backend().waits().empty());
  rt.backend().run_all();  // the work and the marker; the event's delivery releases the consumer
  rt.backend().run_all();
  work.get();
  after.get();
  EXPECT_EQ(rt.backend().live_markers(), 0);
}

TEST(NativeMarkers, AnEventWithoutAMarkerHoldsTheStreamOnTheHost) {
  // A host event (not recorded by a stream) has no marker: the consumer is held until it is set.
  xdev::Runtime<MarkerBackend> rt({.max_inflight = 16}, 1);
  auto consumer = rt.device(0).make_stream();
  const xdev::Event e = xdev::Event::pending();
  consumer.wait(e);
  std::atomic<bool> ran{false};
  auto f = consumer.execute([&] { ran = true; });
  EXPECT_EQ(rt.backend().queued(), 0u) << "work after the wait was enqueued before the event";
  e.set();
  rt.backend().wait_queued(1);
  rt.backend().run_all();
  f.get();
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(rt.backend().waits().empty());
}

// A backend that cannot enqueue a wait: the stream is held on the host instead, so the order holds.
class FailingWaitBackend : public MarkerBackend {
 public:
  using MarkerBackend::MarkerBackend;
  void wait_marker(std::size_t, marker_handle) { throw xdev::error(xdev::errc::internal, "no wait for you"); }
};
static_assert(xdev::concepts::NativeMarkers<FailingWaitBackend>);

TEST(NativeMarkers, AWaitTheBackendCannotEnqueueHoldsTheStreamOnTheHost) {
  xdev::Runtime<FailingWaitBackend> rt({.max_inflight = 16}, 1);
  auto producer = rt.device(0).make_stream();
  auto consumer = rt.device(0).make_stream();
  auto work = producer.execute([] {});
  const xdev::Event e = producer.record();
  const auto host_before = xdev::metrics::counter("stream.wait.host").value();
  consumer.wait(e);
  auto after = consumer.execute([] {});
  EXPECT_EQ(rt.backend().queued(), 2u) << "the consumer's task was enqueued although its wait failed";
  EXPECT_EQ(xdev::metrics::counter("stream.wait.host").value(), host_before + 1);
  rt.backend().run_all();  // the work, the marker and (once the event is ready) the consumer's task
  rt.backend().run_all();
  work.get();
  after.get();
  EXPECT_EQ(rt.backend().live_markers(), 0);
}

}  // namespace
