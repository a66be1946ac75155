// Allocation-failure injection (docs/security.md, "Injected failures"): this program replaces the
// global operator new with one that fails the i-th allocation of the calling thread, and runs each
// scenario once for every i until it runs through. Each failed run must end in a clean
// std::bad_alloc or xdev::error (errc::out_of_memory) — never std::terminate, a hang, a leak (the
// asan suite runs this with LeakSanitizer) or a half-built object — and the same scenario run right
// after, with nothing failing, must succeed. Allocations on other threads (a backend's workers)
// are not failed: the count is per thread, so every run fails the same allocation.
#include <xdev/any/any_device.hpp>
#include <xdev/any/detail/reaper.hpp>
#include <xdev/any/registry.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/plugin/loader.hpp>
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/mesh.hpp>
#include <xdev/spmd/placement.hpp>
#include <xdev/spmd/virtual_device.hpp>

#include <gtest/gtest.h>

#include "scenarios.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <vector>

// ---- the failing operator new -----------------------------------------------------------------
// Every replaceable form, so that no allocation bypasses it and no block is freed by another
// allocator than the one that made it.

namespace {

thread_local long countdown = -1;  // allocations of this thread left before the failing one; -1: off
thread_local bool failure_injected = false;

void* allocate(std::size_t size, std::size_t alignment) {
  if (countdown >= 0 && countdown-- == 0) {
    failure_injected = true;
    throw std::bad_alloc();
  }
  if (size == 0) size = 1;
  void* p = alignment <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void* allocate_nothrow(std::size_t size, std::size_t alignment) noexcept {
  try {
    return allocate(size, alignment);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

// Fails allocation `i` (0-based) of this thread from now on; `disarm` says whether it was reached.
void arm(long i) {
  failure_injected = false;
  countdown = i;
}
bool disarm() {
  countdown = -1;
  return failure_injected;
}

}  // namespace

void* operator new(std::size_t n) {
  return allocate(n, alignof(std::max_align_t));
}
void* operator new[](std::size_t n) {
  return allocate(n, alignof(std::max_align_t));
}
void* operator new(std::size_t n, std::align_val_t a) {
  return allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return allocate(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return allocate_nothrow(n, alignof(std::max_align_t));
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return allocate_nothrow(n, alignof(std::max_align_t));
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_nothrow(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_nothrow(n, static_cast<std::size_t>(a));
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

// ---- the scenarios -----------------------------------------------------------------------------

namespace {

using xdev_faults::devices_of;
using xdev_faults::Host;
namespace spmd = xdev::spmd;

// Runs `scenario` failing allocation i of this thread, for i = 0, 1, ... until a run reaches no
// failure; after each failed run, runs it again without failures. Returns how many allocations
// the scenario makes on this thread.
template <class F>
long fail_each_allocation(const char* what, F&& scenario) {
  for (long i = 0;; ++i) {
    std::string error;
    arm(i);
    try {
      scenario();
    } catch (const std::bad_alloc&) {
      error = "bad_alloc";
    } catch (const xdev::error& e) {
      error = e.what();
      EXPECT_EQ(e.condition(), xdev::errc::out_of_memory) << what << ", allocation " << i << ": " << e.what();
    }
    if (!disarm()) {
      EXPECT_EQ(error, "") << what << " failed with no allocation failing";
      return i;
    }
    // The failure may also have been absorbed (a fallback that needs no memory); either way the
    // scenario checked its results. Now the same again, with nothing failing.
    try {
      scenario();
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": after allocation " << i << " failed (" << error
                    << "), the next attempt failed too: " << e.what();
      return i;
    }
  }
}

TEST(AllocationFailure, RuntimeConstructionAndATransfer) {
  const long n = fail_each_allocation(
      "a runtime", [] { xdev_faults::runtime_and_a_round_trip(Host::Options{.devices = 2, .threads = 1}); });
  EXPECT_GT(n, 10);
}

TEST(AllocationFailure, PluginRegistryConstruction) {
  const long n = fail_each_allocation("a registry", [] {
    xdev::Registry registry(xdev::plugin::SearchPath{{XDEV_TEST_PLUGIN_DIR}});
    const auto devices = registry.devices("REF");
    EXPECT_FALSE(devices.empty());
    EXPECT_EQ(registry.default_backend(), "HOST");
  });
  EXPECT_GT(n, 10);
}

TEST(AllocationFailure, TheGlobalRegistryIsBuiltWholeOrNotAtAll) {
  // Until one call builds it, every call fails cleanly; the one that builds it builds all of it.
  for (long i = 0;; ++i) {
    arm(i);
    bool built = false;
    try {
      built = !xdev::Registry::global().backends().empty();
    } catch (const std::bad_alloc&) {
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.condition(), xdev::errc::out_of_memory) << e.what();
    }
    if (!disarm()) {
      EXPECT_TRUE(built);
      break;
    }
  }
  EXPECT_EQ(xdev::Registry::global().default_backend().empty(), false);
  EXPECT_FALSE(xdev::Registry::global().devices("HOST").empty());
}

class AllocationFailureOnAMesh : public ::testing::Test {
 protected:
  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 4, .threads = 2}};
};

TEST_F(AllocationFailureOnAMesh, MeshConstruction) {
  const auto devices = devices_of(rt);
  const long n = fail_each_allocation("a mesh", [&] {
    spmd::Mesh mesh(devices, {2, 2}, {"data", "model"});
    EXPECT_EQ(mesh.size(), 4u);
  });
  EXPECT_GT(n, 2);
}

TEST_F(AllocationFailureOnAMesh, AShardedTransferAndBack) {
  const spmd::Mesh mesh(devices_of(rt), "data");
  const spmd::VirtualDevice vd(mesh);
  std::vector<float> global(64);
  std::iota(global.begin(), global.end(), 0.0f);
  const long n = fail_each_allocation("a sharded transfer", [&] {
    auto x = vd.place(std::span<const float>(global), {16, 4});
    auto xs = spmd::mark_sharding(x, vd.sharding({"data", spmd::replicated})).get();
    std::vector<float> back(64);
    spmd::to_host(xs, std::span<float>(back)).get();
    EXPECT_EQ(back, global);
  });
  EXPECT_GT(n, 10);
  for (const auto& d : mesh.devices()) EXPECT_EQ(d.memory_stats().bytes_in_use, 0u) << d;
}

TEST_F(AllocationFailureOnAMesh, ACollective) {
  const spmd::Mesh mesh(devices_of(rt), "data");
  std::vector<xdev::AnyArray<float>> arrays;
  for (std::size_t i = 0; i < 4; ++i) arrays.push_back(xdev::empty<float>(mesh.device(i), {1000}));
  const long n = fail_each_allocation("an all_reduce", [&] { xdev_faults::all_reduce_of_ones(mesh, arrays); });
  EXPECT_GT(n, 10);
}

// A reaped object whose last reference goes on another thread than its maker's is handed to the
// reaper by its deleter, which must not throw. The hand-over allocates nothing (a queue that grew
// there once could throw bad_alloc inside the deleter, and the process terminated), so it holds
// when no allocation can succeed on the releasing thread.
struct Reaped {
  static inline std::atomic<int> destroyed{0};
  ~Reaped() { destroyed.fetch_add(1); }
};

TEST(AllocationFailure, AReapedObjectReleasedOffItsThreadIsDestroyedEvenWhenNothingCanBeAllocated) {
  constexpr int n = 100;
  std::vector<std::shared_ptr<Reaped>> objects;
  for (int i = 0; i < n; ++i) objects.push_back(xdev::detail::make_reaped<Reaped>());
  std::thread([&] {
    for (auto& o : objects) {
      arm(0);  // the first allocation of this release fails, and so on for each
      o.reset();
      disarm();
    }
  }).join();
  // Starting the reaper's thread allocates, so it may not have started from there: releasing one
  // more from a thread where allocation works starts it, and it destroys everything queued.
  std::thread([o = xdev::detail::make_reaped<Reaped>()]() mutable { o.reset(); }).join();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Reaped::destroyed.load() < n + 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(Reaped::destroyed.load(), n + 1);
}

}  // namespace
