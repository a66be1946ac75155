// Teardown of the host backend and of the CPU fallback against threads that are still leaving a
// call: a backend destroyed as soon as the work it was given completed must not find the thread
// that gave it that work still inside the backend's code (issue: `~thread_pool` racing a post
// from the fallback's thread, seen by TSan). These tests are meant to run under the tsan preset,
// where the race is a report; elsewhere a lost race may also crash.
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/fallback.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace {

using xdev::backends::Host;

// A completion that settles `p` with its outcome.
auto settles(std::promise<void>& p) {
  return [&p](std::exception_ptr ep) {
    if (ep)
      p.set_exception(ep);
    else
      p.set_value();
  };
}

// Larger than Host::inline_copy_bytes, so the copy is posted to the pool instead of done inline.
constexpr std::size_t posted_bytes = Host::inline_copy_bytes + 4096;

TEST(HostTeardown, DestroyedRightAfterAPostFromAnotherThreadCompleted) {
  std::vector<std::byte> src(posted_bytes, std::byte{7});
  for (int round = 0; round < 200; ++round) {
    auto host = std::make_unique<Host>(Host::Options{.devices = 1, .threads = 2});
    void* dst = host->allocate(0, posted_bytes);
    std::promise<void> copied;
    // A thread outside the pool hands the copy over; the main thread destroys the backend as soon
    // as the copy's completion ran, possibly while that thread is still inside the post.
    std::thread poster([&] { host->copy_to_device(0, src.data(), dst, 0, posted_bytes, settles(copied)); });
    copied.get_future().get();
    EXPECT_EQ(static_cast<const std::byte*>(dst)[posted_bytes - 1], std::byte{7});
    host->deallocate(0, dst, posted_bytes);
    host.reset();
    poster.join();
  }
}

// The CPU fallback's steps run on its own pool and call the backend from there: the op completes
// only once that thread has left the backend, so its runtime can be destroyed at once.
TEST(HostTeardown, AFallbackOpsBackendCanBeDestroyedAsSoonAsTheOpCompleted) {
  for (int round = 0; round < 100; ++round) {
    auto host = std::make_unique<Host>(Host::Options{.devices = 1, .threads = 2});
    constexpr std::size_t n = posted_bytes / sizeof(float);
    void* x = host->allocate(0, n * sizeof(float));
    std::memset(x, 0, n * sizeof(float));
    std::promise<void> done;
    std::vector<xdev::ops::detail::Staged<void*>> operands{{x, n * sizeof(float), true, true}};
    xdev::ops::detail::run_fallback(
        "test_fill", *host, 0, std::move(operands),
        [](std::vector<std::byte*>& p) {
          auto* f = reinterpret_cast<float*>(p[0]);
          for (std::size_t i = 0; i < n; ++i) f[i] = 2.0f;
        },
        settles(done));
    done.get_future().get();
    EXPECT_EQ(static_cast<const float*>(x)[n - 1], 2.0f);
    host->deallocate(0, x, n * sizeof(float));
    host.reset();
  }
}

// A backend whose transfers complete on a thread of their own before the call returns, and that
// still runs code of the call afterwards (as a plugin returning from its entry does). The fallback
// must not finish its op (which lets the owner destroy the backend) before that call has returned.
std::atomic<bool> returning_backend_destroyed{false};
std::atomic<int> calls_after_destruction{0};

struct ReturningBackend {
  using memory_handle = void*;
  ~ReturningBackend() { returning_backend_destroyed = true; }
  void copy_to_host(std::size_t, void* src, std::size_t off, void* dst, std::size_t bytes, xdev::Completion done) {
    std::memcpy(dst, static_cast<std::byte*>(src) + off, bytes);
    complete_then_return(done);
  }
  void copy_to_device(std::size_t, const void* src, void* dst, std::size_t off, std::size_t bytes,
                      xdev::Completion done) {
    std::memcpy(static_cast<std::byte*>(dst) + off, src, bytes);
    complete_then_return(done);
  }
  static void complete_then_return(xdev::Completion& done) {
    std::thread([&] { done(nullptr); }).join();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // still inside the call
    if (returning_backend_destroyed) ++calls_after_destruction;
  }
};

TEST(HostTeardown, TheFallbackFinishesOnlyAfterTheBackendsCallReturned) {
  for (int round = 0; round < 5; ++round) {
    returning_backend_destroyed = false;
    auto backend = std::make_unique<ReturningBackend>();
    std::vector<float> data(64, 1.0f);
    std::promise<void> done;
    std::vector<xdev::ops::detail::Staged<void*>> operands{{data.data(), data.size() * sizeof(float), true, true}};
    xdev::ops::detail::run_fallback(
        "test_scale", *backend, 0, std::move(operands),
        [](std::vector<std::byte*>& p) {
          auto* f = reinterpret_cast<float*>(p[0]);
          for (std::size_t i = 0; i < 64; ++i) f[i] *= 3.0f;
        },
        settles(done));
    done.get_future().get();
    backend.reset();  // the op completed: its backend may go
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(data[63], 3.0f);
  }
  EXPECT_EQ(calls_after_destruction.load(), 0) << "a backend call was still running when its op completed";
}

// A backend whose first transfer completes later, on a thread of its own that then goes on with
// other work (a plugin's completion thread). That thread hands the fallback's compute to the
// fallback pool; the op completes, the program exits, and the pool is destroyed at exit while the
// thread is still alive: the pool must not be destroyed before the thread has left asio's post,
// which wakes a worker after unlocking (the race TSan found at the exit of a plugin suite, the
// REF plugin's thread posting a gather's compute). Only TSan sees the race; elsewhere this checks
// that such an exit is clean.
struct LateCompletingBackend {
  using memory_handle = void*;
  void copy_to_host(std::size_t, void* src, std::size_t off, void* dst, std::size_t bytes, xdev::Completion done) {
    std::memcpy(dst, static_cast<std::byte*>(src) + off, bytes);
    std::thread([done = std::move(done)]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // after the call returned
      done(nullptr);                                               // posts the compute to the fallback pool
      // Still alive at exit, and not synchronized with anything since that post; `done` (with the
      // reference to the op it holds) is released only when this thread leaves.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }).detach();
  }
  void copy_to_device(std::size_t, const void* src, void* dst, std::size_t off, std::size_t bytes,
                      xdev::Completion done) {
    std::memcpy(static_cast<std::byte*>(dst) + off, src, bytes);
    done(nullptr);
  }
};

// Runs a fallback op on a LateCompletingBackend, waits for it, and exits the process.
template <class Backend>
void triple(Backend& backend, std::vector<float>& data) {
  std::promise<void> done;
  std::vector<xdev::ops::detail::Staged<void*>> operands{{data.data(), data.size() * sizeof(float), true, true}};
  xdev::ops::detail::run_fallback(
      "test_scale", backend, 0, std::move(operands),
      [](std::vector<std::byte*>& p) {
        auto* f = reinterpret_cast<float*>(p[0]);
        for (std::size_t i = 0; i < 64; ++i) f[i] *= 3.0f;
      },
      settles(done));
  done.get_future().get();
}

[[noreturn]] void triple_late_then_exit() {
  static Host host(Host::Options{.devices = 1, .threads = 1});
  static LateCompletingBackend late;
  static std::vector<float> data(64, 1.0f);
  triple(host, data);  // the fallback pool's workers started, and waiting for work again soon
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  triple(late, data);
  std::exit(data[63] == 9.0f ? 0 : 1);
}

TEST(HostTeardown, TheFallbackPoolOutlivesABackendThreadStillLeavingItsPostAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(triple_late_then_exit(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
