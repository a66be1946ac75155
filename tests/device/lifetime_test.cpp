// Handles that outlive their runtime: a Device, Buffer, Array, Stream or erased device whose
// runtime has been destroyed never reaches the runtime's memory. Using it throws
// errc::unavailable saying so; destroying it does nothing the backend would have to do.
// (Under the asan preset, any access to the destroyed runtime is a heap-use-after-free report.)
#include <xdev/any/any_device.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/ops.hpp>

#include "support/manual_backend.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using ::testing::HasSubstr;
using Host = xdev::backends::Host;
using xdev_test::ManualBackend;

// Expects `f` to throw errc::unavailable with a message that says the runtime is gone.
void expect_gone(const std::function<void()>& f, const char* what) {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::unavailable) << what << ": " << e.what();
    EXPECT_THAT(e.what(), HasSubstr("destroyed")) << what;
  }
}

Host::Options small() {
  return Host::Options{.devices = 2, .threads = 2};
}

TEST(Lifetime, EveryCheckedUseOfADeviceAfterItsRuntimeIsAnErrorThatSaysSo) {
  auto rt = std::make_unique<xdev::Runtime<Host>>(xdev::RuntimeOptions{}, small());
  const xdev::Device<Host> dev = rt->device(1);
  auto x = xdev::empty<float>(dev, {4});
  EXPECT_TRUE(dev.valid());
  rt.reset();

  EXPECT_FALSE(dev.valid());
  EXPECT_EQ(dev.ordinal(), 1u);  // plain data of the handle stays readable
  std::ostringstream printed;
  printed << dev;  // printing never throws
  EXPECT_EQ(printed.str(), "(device 1 of a destroyed runtime)");
  expect_gone([&] { (void)dev.name(); }, "name");
  expect_gone([&] { (void)dev.description(); }, "description");
  expect_gone([&] { (void)dev.allocate<float>(16); }, "allocate");
  expect_gone([&] { (void)dev.memory_stats(); }, "memory_stats");
  expect_gone([&] { dev.set_memory_limit(std::nullopt); }, "set_memory_limit");
  expect_gone([&] { dev.release_cached_memory(); }, "release_cached_memory");
  expect_gone([&] { dev.manual_seed(7); }, "manual_seed");
  expect_gone([&] { (void)dev.default_stream(); }, "default_stream");
  expect_gone([&] { (void)dev.make_stream(); }, "make_stream");
  expect_gone([&] { (void)dev.execute([] {}); }, "execute");
  expect_gone([&] { dev.synchronize(); }, "synchronize");
  expect_gone([&] { (void)dev.execution_stats(); }, "execution_stats");
  expect_gone([&] { (void)dev.max_inflight(); }, "max_inflight");
  expect_gone([&] { dev.require_valid(); }, "require_valid");
  try {
    dev.require_valid();
  } catch (const xdev::error& e) {
    EXPECT_THAT(e.what(), HasSubstr("device 1 of an xdev::Runtime<HOST>"));
  }
  expect_gone([&] { (void)xdev::ops::sum(dev, x); }, "an op");
}

TEST(Lifetime, AHandleThatNamesNoDeviceIsAnErrorNotACrash) {
  const xdev::Device<Host> none;
  EXPECT_FALSE(none.valid());
  EXPECT_FALSE(none.same_runtime(xdev::Device<Host>{}));
  std::ostringstream printed;
  printed << none;
  EXPECT_EQ(printed.str(), "(no device)");
  try {
    (void)none.allocate<int>(1);
    ADD_FAILURE() << "no error";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.code(), xdev::errc::unavailable);
    EXPECT_THAT(e.what(), HasSubstr("names no device"));
  }
}

TEST(Lifetime, ABufferAndAnArrayThatOutliveTheirRuntimeAreDestroyedQuietly) {
  auto rt = std::make_unique<xdev::Runtime<Host>>(xdev::RuntimeOptions{}, small());
  auto buf = rt->device(0).allocate<double>(1000);
  auto arr = xdev::empty<float>(rt->device(1), xdev::Shape{8, 8});
  auto moved = rt->device(0).allocate<int>(10);
  EXPECT_EQ(rt->device(0).memory_stats().allocation_count, 2u);
  EXPECT_EQ(rt->device(1).memory_stats().allocation_count, 1u);
  rt.reset();  // the host backend frees the blocks still allocated (LSan: no leak)

  EXPECT_FALSE(buf.device().valid());
  EXPECT_EQ(buf.size(), 1000u);
  auto other = std::move(moved);  // moving is fine
  buf.reset();                    // and so is freeing: nothing happens
  EXPECT_TRUE(buf.empty());
  expect_gone([&] { (void)arr.device().allocate<float>(1); }, "the array's device");
}

TEST(Lifetime, AStreamThatOutlivesItsRuntimeRefusesWork) {
  auto rt = std::make_unique<xdev::Runtime<Host>>(xdev::RuntimeOptions{}, small());
  auto s = rt->device(0).make_stream();
  auto d = rt->device(0).default_stream();
  auto x = xdev::empty<float>(rt->device(0), {4});
  s.execute([] {}).get();
  rt.reset();
  for (auto* stream : {&s, &d}) {
    try {
      (void)stream->execute([] {});
      ADD_FAILURE() << "no error";
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.code(), xdev::errc::unavailable) << e.what();
    }
  }
  EXPECT_THROW((void)xdev::ops::sum(s, x), xdev::error);
  // Nothing is left to wait for: an event recorded now is ready, and synchronizing returns.
  EXPECT_TRUE(s.record().ready());
  EXPECT_NO_THROW(s.synchronize());
}

TEST(Lifetime, ARuntimeMadeLaterAtTheSameAddressIsNotTheOneAHandleNamed) {
  alignas(xdev::Runtime<ManualBackend>) std::byte storage[sizeof(xdev::Runtime<ManualBackend>)];
  auto* first = ::new (storage) xdev::Runtime<ManualBackend>({}, 1);
  const auto old = first->device(0);
  first->~Runtime();
  auto* second = ::new (storage) xdev::Runtime<ManualBackend>({}, 1);
  const auto now = second->device(0);
  EXPECT_EQ(static_cast<void*>(first), static_cast<void*>(second));
  EXPECT_FALSE(old.valid());
  EXPECT_TRUE(now.valid());
  EXPECT_NE(old, now);
  EXPECT_FALSE(old.same_runtime(now));
  expect_gone([&] { (void)old.allocate<int>(1); }, "allocate through the old handle");
  EXPECT_NO_THROW((void)now.allocate<int>(1));
  second->~Runtime();
}

TEST(Lifetime, StampsAreNeverGivenOutTwice) {
  std::set<std::pair<const void*, std::uint32_t>> seen;
  for (int i = 0; i < 200; ++i) {
    xdev::Runtime<ManualBackend> rt({}, 1);
    EXPECT_TRUE(seen.emplace(rt.anchor().anchor(), rt.anchor().stamp()).second) << "runtime " << i;
    EXPECT_EQ(rt.anchor().stamp() % 2, 1u);
  }
}

TEST(Lifetime, AnErasedDeviceOfATypedRuntimeOutlivingItRefusesWorkAndFreesNothing) {
  auto rt = std::make_unique<xdev::Runtime<Host>>(xdev::RuntimeOptions{}, small());
  xdev::AnyDevice any = rt->device(0);  // no owner: the typed runtime is the caller's
  auto buf = any.allocate<float>(64);
  rt.reset();
  EXPECT_THROW((void)any.allocate<float>(1), xdev::error);
  EXPECT_THROW((void)any.execute([] {}), xdev::error);
  buf.reset();  // the erased buffer's release does nothing either
}

// A backend with native queues and markers that counts the calls that reach it after it was
// destroyed (which the runtime must never make).
class QueueBackend : public ManualBackend {
 public:
  using queue_handle = std::uint64_t;
  using marker_handle = std::uint64_t;
  explicit QueueBackend(std::size_t devices) : ManualBackend(devices) { live().insert(this); }
  ~QueueBackend() { live().erase(this); }
  QueueBackend(const QueueBackend&) = delete;
  QueueBackend& operator=(const QueueBackend&) = delete;

  queue_handle create_queue(std::size_t) { return ++next_; }
  void destroy_queue(std::size_t, queue_handle) noexcept { check_alive(); }
  marker_handle record_marker(std::size_t d, xdev::Completion done) {
    check_alive();
    execute(
        d, [] {}, std::move(done));
    return ++next_;
  }
  void wait_marker(std::size_t, marker_handle) { check_alive(); }
  void release_marker(std::size_t, marker_handle) noexcept { check_alive(); }
  void bind_queue(std::size_t, queue_handle) noexcept {}
  void unbind_queue(std::size_t) noexcept {}

  static inline int dead_calls = 0;

 private:
  void check_alive() const noexcept {
    if (!live().contains(this)) ++dead_calls;
  }
  static std::set<const void*>& live() {
    static std::set<const void*> s;
    return s;
  }
  queue_handle next_ = 0;
};
static_assert(xdev::concepts::NativeMarkers<QueueBackend>);

TEST(Lifetime, AStreamOnANativeQueueThatOutlivesItsRuntimeNeverCallsTheDestroyedBackend) {
  QueueBackend::dead_calls = 0;
  std::optional<xdev::Stream<QueueBackend>> s;
  std::optional<xdev::Stream<QueueBackend>> other;
  {
    xdev::Runtime<QueueBackend> rt({}, 1);
    s = rt.device(0).make_stream();
    other = rt.device(0).make_stream();
    ASSERT_TRUE(s->uses_native_queue());
    ASSERT_TRUE(s->has_markers());
  }
  const xdev::Event e = s->record();  // a marker would be the backend's
  EXPECT_TRUE(e.ready());
  other->wait(e);
  EXPECT_NO_THROW(other->synchronize());
  EXPECT_THROW((void)s->execute([] {}), xdev::error);
  s.reset();  // its queue is the backend's to release
  other.reset();
  EXPECT_EQ(QueueBackend::dead_calls, 0) << "a call reached the destroyed backend";
}

// A backend with native queues whose `destroy_queue` takes a while, and that counts the ones
// still running when the backend is destroyed.
class SlowQueueBackend : public ManualBackend {
 public:
  using queue_handle = std::uint64_t;
  explicit SlowQueueBackend(std::size_t devices) : ManualBackend(devices) {
    destroyed = false;
    entered = false;
    late_calls = 0;
  }
  ~SlowQueueBackend() { destroyed = true; }
  SlowQueueBackend(const SlowQueueBackend&) = delete;
  SlowQueueBackend& operator=(const SlowQueueBackend&) = delete;

  queue_handle create_queue(std::size_t) { return 1; }
  void destroy_queue(std::size_t, queue_handle) noexcept {
    entered = true;
    entered.notify_all();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the runtime's destruction goes on meanwhile
    if (destroyed) ++late_calls;
  }
  void bind_queue(std::size_t, queue_handle) noexcept {}
  void unbind_queue(std::size_t) noexcept {}

  static inline std::atomic<bool> destroyed{false};
  static inline std::atomic<int> late_calls{0};
  static inline std::atomic<bool> entered{false};
};
static_assert(xdev::concepts::NativeQueues<SlowQueueBackend>);

// The CI's tsan run caught this on OpenCL: a dropped stream's last completion, delivered on the
// backend's thread, let go of the stream's queue while the main thread destroyed the runtime.
TEST(Lifetime, AQueueLetGoOfOnACompletionThreadIsDestroyedBeforeItsBackend) {
  auto rt = std::make_unique<xdev::Runtime<SlowQueueBackend>>(xdev::RuntimeOptions{}, 1);
  SlowQueueBackend& backend = rt->backend();
  std::optional<xdev::Stream<SlowQueueBackend>> s = rt->device(0).make_stream();
  ASSERT_TRUE(s->uses_native_queue());
  auto done = s->execute([] {});
  // The operation in flight holds the stream's queue now; its completion delivers, then drops it.
  s.reset();
  std::thread completion([&backend] { backend.run_one(); });
  SlowQueueBackend::entered.wait(false);
  done.get();
  rt.reset();
  completion.join();
  EXPECT_EQ(SlowQueueBackend::late_calls, 0) << "destroy_queue was still running when the backend was destroyed";
}

// A backend with native queues that counts the queues it holds.
class CountingQueueBackend : public ManualBackend {
 public:
  using queue_handle = std::uint64_t;
  explicit CountingQueueBackend(std::size_t devices) : ManualBackend(devices) { live = 0; }

  queue_handle create_queue(std::size_t) { return static_cast<queue_handle>(++live); }
  void destroy_queue(std::size_t, queue_handle) noexcept { --live; }
  void bind_queue(std::size_t, queue_handle) noexcept {}
  void unbind_queue(std::size_t) noexcept {}

  static inline std::atomic<int> live{0};
};
static_assert(xdev::concepts::NativeQueues<CountingQueueBackend>);

// A stream dropped with three operations in flight lets go of its native queue when the last is
// delivered, not before, and never leaks it; one that is kept goes idle and busy again without
// losing it.
TEST(Lifetime, ADroppedStreamKeepsItsQueueUntilItsLastOperationIsDeliveredAndNoLonger) {
  xdev::Runtime<CountingQueueBackend> rt({}, 1);
  CountingQueueBackend& backend = rt.backend();
  const int before = CountingQueueBackend::live;  // the default stream's, if it has one
  std::optional<xdev::Stream<CountingQueueBackend>> s = rt.device(0).make_stream();
  ASSERT_TRUE(s->uses_native_queue());
  ASSERT_EQ(CountingQueueBackend::live, before + 1);

  for (int round = 0; round < 2; ++round) {  // idle, busy, idle again: the queue stays
    auto done = s->execute([] {});
    ASSERT_TRUE(backend.run_one());
    done.get();
    EXPECT_EQ(CountingQueueBackend::live, before + 1) << "round " << round;
  }

  std::vector<xdev::Future<void>> done;
  for (int i = 0; i < 3; ++i) done.push_back(s->execute([] {}));
  s.reset();
  for (std::size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(CountingQueueBackend::live, before + 1)
        << "the queue went with " << done.size() - i << " operations left";
    ASSERT_TRUE(backend.run_one());  // completes and delivers on this thread
    done[i].get();
  }
  EXPECT_EQ(CountingQueueBackend::live, before) << "the dropped stream's queue outlived its last operation";
}

}  // namespace
