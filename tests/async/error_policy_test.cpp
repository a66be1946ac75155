// ErrorPolicy: with `poison`, the first failure on a stream makes every later operation on it fail
// at once with the same error; with `isolate` (the default) each operation reports its own outcome.
#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <future>
#include <mutex>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// The host backend, except that its N-th host function fails in the backend (as a driver error
// would) without running.
class FailNth : public xdev::backends::Host {
 public:
  explicit FailNth(int n) : Host(Host::Options{.devices = 1, .threads = 2}), fail_at_(n) {}
  void execute(std::size_t device, xdev::HostTask task, xdev::Completion done) {
    if (calls_.fetch_add(1) + 1 == fail_at_) {
      done(std::make_exception_ptr(
          xdev::error(xdev::errc::internal, "operation " + std::to_string(fail_at_) + " failed on HOST:0")));
      return;
    }
    Host::execute(device, std::move(task), std::move(done));
  }
  [[nodiscard]] int calls() const { return calls_.load(); }

 private:
  std::atomic<int> calls_{0};
  int fail_at_;
};

constexpr int pipeline = 50;

struct Outcome {
  int ran = 0;                      // host functions that ran
  std::vector<std::string> errors;  // per operation: "" or the error's message
};

Outcome run_pipeline(int fail_at, xdev::ErrorPolicy policy, bool* event_ready = nullptr) {
  xdev::Runtime<FailNth> rt({}, fail_at);
  auto stream = rt.device(0).make_stream({.on_error = policy});
  EXPECT_EQ(stream.error_policy(), policy);
  std::atomic<int> ran{0};
  std::vector<xdev::Future<void>> fs;
  for (int i = 0; i < pipeline; ++i) fs.push_back(stream.execute([&ran] { ran.fetch_add(1); }));
  const xdev::Event done = stream.record();
  Outcome out;
  for (auto& f : fs) {
    EXPECT_EQ(f.wait_for(10s), std::future_status::ready) << "the pipeline did not finish";
    try {
      f.get();
      out.errors.emplace_back();
    } catch (const xdev::error& e) {
      out.errors.emplace_back(e.what());
    }
  }
  if (event_ready) *event_ready = done.wait_for(10s);
  out.ran = ran.load();
  if (policy == xdev::ErrorPolicy::poison) {
    EXPECT_EQ(rt.backend().calls(), fail_at) << "operations after the failure reached the backend";
    EXPECT_TRUE(stream.sticky_error() != nullptr);
  }
  return out;
}

TEST(ErrorPolicy, PoisonFailsEveryLaterOperationWithTheOriginalError) {
  for (int n = 1; n <= pipeline; ++n) {
    SCOPED_TRACE("failing operation " + std::to_string(n));
    bool event_ready = false;
    const Outcome o = run_pipeline(n, xdev::ErrorPolicy::poison, &event_ready);
    EXPECT_EQ(o.ran, n - 1);
    for (int i = 0; i < pipeline; ++i) {
      if (i < n - 1)
        EXPECT_EQ(o.errors[i], "") << i;
      else
        EXPECT_THAT(o.errors[i], HasSubstr("operation " + std::to_string(n) + " failed on HOST:0")) << i;
    }
    EXPECT_TRUE(event_ready) << "an event recorded after the failure never became ready";
  }
}

TEST(ErrorPolicy, IsolateReportsOnlyTheFailedOperation) {
  for (int n = 1; n <= pipeline; ++n) {
    SCOPED_TRACE("failing operation " + std::to_string(n));
    const Outcome o = run_pipeline(n, xdev::ErrorPolicy::isolate);
    EXPECT_EQ(o.ran, pipeline - 1);
    for (int i = 0; i < pipeline; ++i) {
      if (i == n - 1)
        EXPECT_THAT(o.errors[i], HasSubstr("failed on HOST:0"));
      else
        EXPECT_EQ(o.errors[i], "") << i;
    }
  }
}

TEST(ErrorPolicy, ClearErrorLetsLaterWorkRun) {
  xdev::Runtime<FailNth> rt({}, 1);
  auto stream = rt.device(0).make_stream({.on_error = xdev::ErrorPolicy::poison});
  EXPECT_THROW(stream.execute([] {}).get(), xdev::error);
  EXPECT_THROW(stream.execute([] {}).get(), xdev::error);
  stream.clear_error();
  EXPECT_EQ(stream.sticky_error(), nullptr);
  EXPECT_EQ(stream.execute([] { return 7; }).get(), 7);
}

TEST(ErrorPolicy, TheDefaultStreamAndNewStreamsIsolate) {
  xdev::Runtime<FailNth> rt({}, 1);
  EXPECT_EQ(rt.device(0).default_stream().error_policy(), xdev::ErrorPolicy::isolate);
  EXPECT_EQ(rt.device(0).make_stream().error_policy(), xdev::ErrorPolicy::isolate);
  EXPECT_THROW(rt.device(0).execute([] {}).get(), xdev::error);
  EXPECT_EQ(rt.device(0).execute([] { return 1; }).get(), 1);
}

}  // namespace
