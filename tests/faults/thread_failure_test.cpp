// Thread-creation failure injection (docs/security.md, "Injected failures"): this program defines
// pthread_create itself, so that every thread xdev starts (std::thread in libstdc++ calls it
// through the dynamic linker, which finds the program's definition first) can be made to fail with
// EAGAIN, as the system does when a process reaches its thread limit. Each failing start must end
// in a clean std::system_error, with no thread left running and nothing hung, and the next attempt
// must succeed.
//
// Under a sanitizer whose runtime is linked into the program (TSan; clang's ASan) the tests say so
// and skip.
#include <xdev/any/any_device.hpp>
#include <xdev/any/detail/reaper.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/kernels/thread_pool.hpp>
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/mesh.hpp>

#include <gtest/gtest.h>

#include "scenarios.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <span>
#include <system_error>
#include <thread>
#include <vector>

// A sanitizer runtime linked into the program (TSan; clang's ASan and MSan) intercepts
// pthread_create there: a definition here would bypass it. g++'s ASan is a shared library, which
// dlsym(RTLD_NEXT) below reaches.
#if defined(__SANITIZE_THREAD__)
#define XDEV_FAULTS_UNDER_TSAN 1
#endif
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define XDEV_FAULTS_UNDER_TSAN 1
#endif
#endif

namespace {

std::atomic<long> thread_countdown{-1};  // thread starts left before the failing one; -1: off
std::atomic<long> threads_started{0};
std::atomic<bool> thread_failure_injected{false};

// Fails the i-th (0-based) thread start from now on, wherever it comes from.
void arm_threads(long i) {
  thread_failure_injected = false;
  thread_countdown = i;
}
bool disarm_threads() {
  thread_countdown = -1;
  return thread_failure_injected;
}

}  // namespace

#ifndef XDEV_FAULTS_UNDER_TSAN
extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) noexcept {
  using real_fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const auto real = reinterpret_cast<real_fn>(::dlsym(RTLD_NEXT, "pthread_create"));
  long left = thread_countdown.load();
  while (left >= 0 && !thread_countdown.compare_exchange_weak(left, left - 1)) {
  }
  if (left == 0) {
    thread_failure_injected = true;
    return EAGAIN;
  }
  ++threads_started;
  return real(thread, attr, start, arg);
}
#endif

namespace {

using xdev_faults::Host;

#ifdef XDEV_FAULTS_UNDER_TSAN
#define XDEV_SKIP_UNDER_TSAN()                                                                                   \
  GTEST_SKIP() << "the sanitizer runtime linked into this program intercepts pthread_create; no failure can be " \
                  "injected"
#else
#define XDEV_SKIP_UNDER_TSAN() (void)0
#endif

// Runs `scenario` with the k-th thread start failing, for k = 0, 1, ... until a run starts every
// thread it wants; each failed run must throw std::system_error and be followed by a run that
// succeeds. Returns how many threads the scenario starts.
template <class F>
long fail_each_thread_start(const char* what, F&& scenario) {
  for (long k = 0;; ++k) {
    bool threw = false;
    arm_threads(k);
    try {
      scenario();
    } catch (const std::system_error& e) {
      threw = true;
      EXPECT_EQ(e.code(), std::errc::resource_unavailable_try_again) << what << ", thread " << k << ": " << e.what();
    }
    if (!disarm_threads()) {
      EXPECT_FALSE(threw) << what << " failed with every thread started";
      return k;
    }
    EXPECT_TRUE(threw) << what << ": thread start " << k << " failed and nothing said so";
    try {
      scenario();
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": after thread start " << k << " failed, the next attempt failed too: " << e.what();
      return k;
    }
  }
}

TEST(ThreadCreationFailure, AThreadPoolStopsTheThreadsItStartedAndThrows) {
  XDEV_SKIP_UNDER_TSAN();
  // asio::thread_pool(4) would hang here, joining the threads it started before the failing one.
  const long n = fail_each_thread_start("a pool of 4", [] {
    xdev::kernels::ThreadPool pool(4);
    std::atomic<int> ran{0};
    for (int i = 0; i < 8; ++i) boost::asio::post(pool.get(), [&] { ++ran; });
    pool.join();
    EXPECT_EQ(ran.load(), 8);
  });
  EXPECT_EQ(n, 4);
}

TEST(ThreadCreationFailure, ARuntimeStartsWholeOrNotAtAll) {
  XDEV_SKIP_UNDER_TSAN();
  const long n = fail_each_thread_start(
      "a runtime", [] { xdev_faults::runtime_and_a_round_trip(Host::Options{.devices = 2, .threads = 3}); });
  EXPECT_GE(n, 3);
}

TEST(ThreadCreationFailure, ACollectiveWhoseTimerCannotStartFailsThroughItsToken) {
  XDEV_SKIP_UNDER_TSAN();
  // The first collective of the process starts the deadline timer's thread.
  xdev::Runtime<Host> rt({}, Host::Options{.devices = 4, .threads = 2});
  const xdev::spmd::Mesh mesh(xdev_faults::devices_of(rt), "data");
  std::vector<xdev::AnyArray<float>> arrays;
  for (std::size_t i = 0; i < 4; ++i) arrays.push_back(xdev::empty<float>(mesh.device(i), {256}));
  const long n = fail_each_thread_start("an all_reduce", [&] { xdev_faults::all_reduce_of_ones(mesh, arrays); });
  EXPECT_GE(n, 1);
  for (const auto& d : mesh.devices()) EXPECT_EQ(d.memory_stats().bytes_in_use, 256 * sizeof(float)) << d;
}

struct Counted {
  static inline std::atomic<int> destroyed{0};
  ~Counted() { ++destroyed; }
};

TEST(ThreadCreationFailure, AnObjectReleasedWhileTheReaperCannotStartIsDestroyedLater) {
  XDEV_SKIP_UNDER_TSAN();
  // A reaped object released on another thread than its creator's is destroyed on the reaper's
  // thread, started on first use. Releasing happens in a deleter, which must not throw: when the
  // thread cannot start, the destruction waits for the next release that can start it.
  auto first = xdev::detail::make_reaped<Counted>();
  auto second = xdev::detail::make_reaped<Counted>();
  const int before = Counted::destroyed.load();
  std::thread other([&] {
    arm_threads(0);
    first.reset();
    disarm_threads();
    second.reset();  // starts the reaper's thread, which destroys both
  });
  other.join();
  const bool injected = thread_failure_injected.load();
  if (!injected) GTEST_SKIP() << "the reaper's thread was already running in this process";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Counted::destroyed.load() - before < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(Counted::destroyed.load() - before, 2);
}

TEST(ThreadCreationFailure, TheInjectionReachesTheSystem) {
  XDEV_SKIP_UNDER_TSAN();
  // The tests above mean something only if xdev's threads come through this program's
  // pthread_create.
  const long before = threads_started.load();
  { xdev::Runtime<Host> rt({}, Host::Options{.devices = 1, .threads = 2}); }
  EXPECT_GE(threads_started.load() - before, 2);
}

}  // namespace
