// xdev::spmd collectives: results against a serial reference (every op, algorithm, group size and
// mesh axis, uneven and empty ring chunks), every completion token, each validation error, the
// deadline, errors injected mid-collective, meshes spanning two runtimes, the bytes each device
// receives, and temporaries returned to the allocator.
#include <xdev/spmd/collectives.hpp>

#include <xdev/any/any_device.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/core/half.hpp>
#include <xdev/core/log.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/core/tools.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array_view.hpp>
#include <xdev/spmd/exchange.hpp>
#include <xdev/spmd/mesh.hpp>

#include "spmd/algorithms.hpp"
#include "support/error_of.hpp"
#include "support/manual_backend.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <initializer_list>
#include <latch>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace spmd = xdev::spmd;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Host = xdev::backends::Host;
using spmd::CollectiveAlgorithm;
using spmd::CollectiveOptions;
using spmd::Mesh;
using spmd::ReduceOp;
using xdev::AnyArray;
using xdev::AnyDevice;
using xdev::Shape;
using xdev_test::ManualBackend;
using namespace std::chrono_literals;

using xdev_test::every_algorithm;
using xdev_test::name_of;

// Above the default direct threshold (256 KiB of f32/i32) and divisible by none of 2, 3, 4.
constexpr std::size_t large = 70001;

const char* name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::mean:
      return "mean";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::prod:
      return "prod";
  }
  return "?";
}

// Deterministic values: element `j` of the array of mesh device `i`.
template <class T>
T value(std::size_t i, std::size_t j, std::uint64_t salt = 0) {
  std::uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ (j + 17) * 0xbf58476d1ce4e5b9ULL ^ salt;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 29;
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<std::int64_t>(x % 2001) - 1000);
  else
    return static_cast<T>(static_cast<double>(x % 200001) / 100000.0 - 1.0);
}

template <class T>
std::vector<T> host_values(std::size_t i, std::size_t n, std::uint64_t salt = 0) {
  std::vector<T> h(n);
  for (std::size_t j = 0; j < n; ++j) h[j] = value<T>(i, j, salt);
  return h;
}

template <class T>
AnyArray<T> upload(const AnyDevice& d, Shape shape, const std::vector<T>& h) {
  auto a = xdev::empty<T>(d, shape);
  d.copy_to_device(std::span<const T>(h), a).get();
  return a;
}

template <class T>
std::vector<T> download(const AnyArray<T>& a) {
  std::vector<T> h(a.size());
  a.device().copy_to_host(a, std::span<T>(h)).get();
  return h;
}

// One array per mesh device, device i's holding host_values<T>(i, numel, salt).
template <class T>
std::vector<AnyArray<T>> arrays_for(const Mesh& mesh, Shape shape, std::uint64_t salt = 0) {
  std::vector<AnyArray<T>> out;
  for (std::size_t i = 0; i < mesh.size(); ++i)
    out.push_back(upload<T>(mesh.device(i), shape, host_values<T>(i, static_cast<std::size_t>(shape.numel()), salt)));
  return out;
}

template <class T>
std::vector<AnyArray<T>> empty_arrays(const Mesh& mesh, Shape shape) {
  std::vector<AnyArray<T>> out;
  for (std::size_t i = 0; i < mesh.size(); ++i) out.push_back(xdev::empty<T>(mesh.device(i), shape));
  return out;
}

// The serial reduction of `inputs` (one vector per group member, in group order).
template <class T>
std::vector<T> reference(const std::vector<std::vector<T>>& inputs, ReduceOp op) {
  std::vector<T> out = inputs[0];
  std::vector<double> wide(out.size());
  for (std::size_t j = 0; j < out.size(); ++j) wide[j] = static_cast<double>(out[j]);
  for (std::size_t q = 1; q < inputs.size(); ++q)
    for (std::size_t j = 0; j < out.size(); ++j) {
      const T v = inputs[q][j];
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::mean:
          wide[j] += static_cast<double>(v);
          out[j] = static_cast<T>(out[j] + v);
          break;
        case ReduceOp::min:
          out[j] = std::min(out[j], v);
          break;
        case ReduceOp::max:
          out[j] = std::max(out[j], v);
          break;
        case ReduceOp::prod:
          if constexpr (std::is_integral_v<T>)
            out[j] =
                static_cast<T>(static_cast<std::make_unsigned_t<T>>(out[j]) * static_cast<std::make_unsigned_t<T>>(v));
          else
            out[j] = static_cast<T>(out[j] * v);
          break;
      }
    }
  if constexpr (std::is_floating_point_v<T>) {
    if (op == ReduceOp::sum || op == ReduceOp::mean)
      for (std::size_t j = 0; j < out.size(); ++j)
        out[j] = static_cast<T>(op == ReduceOp::mean ? wide[j] / static_cast<double>(inputs.size()) : wide[j]);
  }
  return out;
}

template <class T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if constexpr (std::is_integral_v<T>) {
    EXPECT_EQ(got, want) << what;
  } else {
    // Inputs are in [-1, 1] and at most 4 are combined.
    const double tol = std::is_same_v<T, float> ? 4e-6 : 1e-14;
    std::size_t bad = 0;
    for (std::size_t j = 0; j < got.size(); ++j)
      if (!(std::abs(static_cast<double>(got[j]) - static_cast<double>(want[j])) <= tol)) {
        if (bad++ < 3) ADD_FAILURE() << what << ": element " << j << " is " << got[j] << ", expected " << want[j];
      }
    EXPECT_EQ(bad, 0u) << what;
  }
}

std::vector<std::size_t> memory_in_use(const Mesh& mesh) {
  std::vector<std::size_t> out;
  for (const auto& d : mesh.devices()) out.push_back(d.memory_stats().bytes_in_use);
  return out;
}

// After an error, the temporaries go once the work already queued has finished (its completion
// handlers may still be on their way when synchronize() returns).
void expect_memory_returns_to(const Mesh& mesh, const std::vector<std::size_t>& baseline) {
  for (const auto& d : mesh.devices()) d.synchronize();
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (memory_in_use(mesh) != baseline && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(memory_in_use(mesh), baseline);
}

using xdev_test::expect_error;

class Collectives : public ::testing::Test {
 protected:
  std::vector<AnyDevice> devices(std::size_t n) {
    std::vector<AnyDevice> out;
    for (std::size_t i = 0; i < n; ++i) out.emplace_back(rt.device(i));
    return out;
  }
  Mesh line(std::size_t k) { return Mesh(devices(k), "data"); }
  Mesh square() { return Mesh(devices(4), {2, 2}, {"data", "model"}); }

  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 4}};
};

// ---- all_reduce ------------------------------------------------------------------------------------

// Runs all_reduce over `axes` on arrays of `n` elements and checks every array against the serial
// reduction of its group; also checks that every temporary is freed by the time it completes.
template <class T>
void check_all_reduce(const Mesh& mesh, std::vector<std::string> axes, std::size_t n, ReduceOp op,
                      CollectiveOptions opt, const std::string& what) {
  auto arrays = arrays_for<T>(mesh, {static_cast<Shape::value_type>(n)});
  const auto baseline = memory_in_use(mesh);
  spmd::all_reduce(mesh, std::span<const std::string>(axes), std::span(arrays), op, opt).get();
  EXPECT_EQ(memory_in_use(mesh), baseline) << what;
  for (const auto& g : mesh.groups(std::span<const std::string>(axes))) {
    std::vector<std::vector<T>> inputs;
    for (auto i : g) inputs.push_back(host_values<T>(i, n));
    const auto want = reference(inputs, op);
    const auto first = download(arrays[g[0]]);
    for (auto i : g) {
      const auto got = download(arrays[i]);
      expect_close(got, want, what + ", device " + std::to_string(i));
      EXPECT_TRUE(got == first) << what << ": devices of a group disagree (device " << i << ")";
    }
  }
}

TEST_F(Collectives, AllReduceInt32IsExactForEveryOpSizeAndAlgorithm) {
  for (std::size_t k : {2, 3, 4})
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, large})
      for (auto alg : every_algorithm)
        for (auto op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max, ReduceOp::prod})
          check_all_reduce<std::int32_t>(
              line(k), {"data"}, n, op, {.algorithm = alg},
              "i32 k=" + std::to_string(k) + " n=" + std::to_string(n) + " " + name_of(alg) + " " + name_of(op));
}

TEST_F(Collectives, AllReduceFloatSumAndMeanAreWithinRounding) {
  for (std::size_t k : {2, 3, 4})
    for (std::size_t n : {std::size_t{5}, large})
      for (auto alg : every_algorithm)
        for (auto op : {ReduceOp::sum, ReduceOp::mean}) {
          const std::string what =
              " k=" + std::to_string(k) + " n=" + std::to_string(n) + " " + name_of(alg) + " " + name_of(op);
          check_all_reduce<float>(line(k), {"data"}, n, op, {.algorithm = alg}, "f32" + what);
          check_all_reduce<double>(line(k), {"data"}, n, op, {.algorithm = alg}, "f64" + what);
        }
}

TEST_F(Collectives, AllReduceFloatProdIsWithinRounding) {
  // Products of up to four values in [-1, 1], combined in group order by every algorithm.
  for (std::size_t k : {2, 4})
    for (auto alg : every_algorithm) {
      const std::string what = " prod k=" + std::to_string(k) + " " + name_of(alg);
      check_all_reduce<float>(line(k), {"data"}, large, ReduceOp::prod, {.algorithm = alg}, "f32" + what);
      check_all_reduce<double>(line(k), {"data"}, 33, ReduceOp::prod, {.algorithm = alg}, "f64" + what);
    }
}

TEST_F(Collectives, AllReduceFloatMinAndMaxAreExact) {
  for (auto alg : every_algorithm)
    for (auto op : {ReduceOp::min, ReduceOp::max}) {
      check_all_reduce<float>(line(3), {"data"}, large, op, {.algorithm = alg}, std::string("f32 ") + name_of(op));
      check_all_reduce<double>(line(4), {"data"}, 33, op, {.algorithm = alg}, std::string("f64 ") + name_of(op));
    }
}

// f16 and bf16 through the shared-memory step: each combine is computed in float and rounded once,
// in group order (the mean's scale by 1/k rounded to the type first), on a length that leaves a
// partial tile at the end of every participant's chunk.
template <class H>
void check_half_all_reduce(const Mesh& mesh, ReduceOp op, const std::string& what) {
  constexpr std::size_t n = 1003;
  const std::size_t k = mesh.size();
  std::vector<std::vector<H>> inputs;
  std::vector<AnyArray<H>> arrays;
  for (std::size_t i = 0; i < k; ++i) {
    std::vector<H> h(n);
    for (std::size_t j = 0; j < n; ++j) h[j] = H(static_cast<float>(value<double>(i, j)));
    arrays.push_back(upload<H>(mesh.device(i), Shape{static_cast<Shape::value_type>(n)}, h));
    inputs.push_back(std::move(h));
  }
  spmd::all_reduce(mesh, "data", std::span(arrays), op, {.algorithm = CollectiveAlgorithm::shared_memory}).get();
  std::vector<H> want = inputs[0];
  for (std::size_t q = 1; q < k; ++q)
    for (std::size_t j = 0; j < n; ++j) {
      const float a = static_cast<float>(want[j]), b = static_cast<float>(inputs[q][j]);
      want[j] = op == ReduceOp::max ? (a < b ? inputs[q][j] : want[j]) : H(a + b);
    }
  if (op == ReduceOp::mean) {
    const H alpha(static_cast<float>(1.0 / static_cast<double>(k)));
    for (auto& w : want) w = H(static_cast<float>(w) * static_cast<float>(alpha));
  }
  for (std::size_t i = 0; i < k; ++i) {
    const std::vector<H> got = download(arrays[i]);
    std::size_t wrong = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (static_cast<float>(got[j]) != static_cast<float>(want[j])) ++wrong;
    EXPECT_EQ(wrong, 0u) << what << ", device " << i;
  }
}

TEST_F(Collectives, HalfPrecisionAllReduceInSharedMemoryRoundsEachCombineOnce) {
  for (std::size_t k : {2, 3, 4})
    for (auto op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max}) {
      const std::string what = " k=" + std::to_string(k) + " " + name_of(op);
      check_half_all_reduce<xdev::f16>(line(k), op, "f16" + what);
      check_half_all_reduce<xdev::bf16>(line(k), op, "bf16" + what);
    }
}

TEST_F(Collectives, FloatsCombineWithThePortableOpsAndIntegersOnTheHost) {
  // Host devices run f32/f64 `binary` and `scale` themselves; i32 takes the ops' CPU fallback.
  auto& host_max = xdev::metrics::counter("fallback.maximum");
  auto& host_add = xdev::metrics::counter("fallback.add");
  auto& host_scale = xdev::metrics::counter("fallback.scale");
  auto& host_min = xdev::metrics::counter("fallback.minimum");
  const Mesh mesh = line(4);
  for (auto alg : {CollectiveAlgorithm::ring, CollectiveAlgorithm::direct}) {
    const auto before = host_add.value() + host_scale.value() + host_min.value() + host_max.value();
    check_all_reduce<float>(mesh, {"data"}, 100, ReduceOp::mean, {.algorithm = alg}, "f32 mean");
    check_all_reduce<double>(mesh, {"data"}, 100, ReduceOp::min, {.algorithm = alg}, "f64 min");
    EXPECT_EQ(host_add.value() + host_scale.value() + host_min.value() + host_max.value(), before) << name_of(alg);
    const auto max_before = host_max.value();
    check_all_reduce<std::int32_t>(mesh, {"data"}, 100, ReduceOp::max, {.algorithm = alg}, "i32 max");
    EXPECT_GT(host_max.value(), max_before) << name_of(alg);
  }
}

TEST_F(Collectives, ForcedRingOnTinyArraysLeavesSomeChunksEmpty) {
  for (std::size_t n : {1, 2, 3, 5})
    for (auto op : {ReduceOp::sum, ReduceOp::max}) {
      check_all_reduce<std::int32_t>(line(4), {"data"}, n, op, {.algorithm = CollectiveAlgorithm::ring},
                                     "i32 ring n=" + std::to_string(n));
      check_all_reduce<float>(line(4), {"data"}, n, op, {.algorithm = CollectiveAlgorithm::ring},
                              "f32 ring n=" + std::to_string(n));
    }
}

TEST_F(Collectives, ForcedDirectOnLargeArrays) {
  check_all_reduce<float>(line(4), {"data"}, 300001, ReduceOp::sum, {.algorithm = CollectiveAlgorithm::direct},
                          "f32 direct");
  check_all_reduce<std::int32_t>(line(3), {"data"}, 300001, ReduceOp::min, {.algorithm = CollectiveAlgorithm::direct},
                                 "i32 direct");
}

TEST_F(Collectives, ThresholdChoosesTheAlgorithmWhereMemoryIsNotHostMemory) {
  // With the threshold at the array's size automatic is direct, one byte below it is ring: the
  // bytes received tell them apart ((k-1)·N for direct, about 2(k-1)/k·N for ring). MANUAL's
  // memory is not host memory, so shared memory is not a choice there.
  xdev::Runtime<ManualBackend> manual({}, 4, ManualBackend::Mode::inline_completion);
  std::vector<AnyDevice> devs;
  for (std::size_t i = 0; i < 4; ++i) devs.emplace_back(manual.device(i));
  const Mesh mesh(devs, "data");
  ASSERT_FALSE(mesh.device(0).host_accessible());
  auto arrays = arrays_for<float>(mesh, {1000});
  auto received = [&](std::size_t threshold) {
    const auto before = mesh.device(0).transfer_stats().bytes_from_peer;
    spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, {.direct_threshold_bytes = threshold}).get();
    return mesh.device(0).transfer_stats().bytes_from_peer - before;
  };
  EXPECT_EQ(received(4000), 3u * 4000u);
  EXPECT_EQ(received(3999), (2u * 1000u - 250u - 250u) * 4u);  // 2n - len(chunk 3) - len(chunk 0) elements
}

// A backend whose memory is not host memory and which states CollectiveBackend<direct>.
struct DirectManual : ManualBackend {
  using ManualBackend::ManualBackend;
  static constexpr std::string_view name = "DMANUAL";
  using capabilities = xdev::Capabilities<xdev::MaxInflight<4>, xdev::CollectiveBackend<xdev::CollectiveKind::direct>>;
};

TEST_F(Collectives, TheCollectiveBackendPolicyChoosesWhereMemoryIsNotHostMemory) {
  // What device 0 allocates tells the algorithms apart: direct copies all k arrays (k*n elements),
  // ring two chunks of each length (about 2n/k). MANUAL states ring (the default), DMANUAL direct.
  xdev::Runtime<ManualBackend> ring_rt({}, 4, ManualBackend::Mode::inline_completion);
  xdev::Runtime<DirectManual> direct_rt({}, 4, ManualBackend::Mode::inline_completion);
  auto mesh_of = [](auto& a, auto& b) {
    return Mesh(std::vector<AnyDevice>{AnyDevice(a.device(0)), AnyDevice(a.device(1)), AnyDevice(b.device(2)),
                                       AnyDevice(b.device(3))},
                "data");
  };
  enum Ran { ran_ring, ran_direct };
  auto ran = [](const Mesh& mesh, std::size_t n, CollectiveOptions opt) {
    auto arrays = arrays_for<float>(mesh, {static_cast<Shape::value_type>(n)});
    const AnyDevice& d = mesh.device(0);
    d.reset_peak_memory_stats();
    const auto before = d.memory_stats().bytes_in_use;
    spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, opt).get();
    const auto grew = d.memory_stats().peak_bytes_in_use - before;
    EXPECT_GT(grew, 0u);
    return grew >= 4 * n * sizeof(float) ? ran_direct : ran_ring;
  };
  const std::size_t n = large;  // above the 256 KiB threshold
  // Every device states direct: direct above the threshold too.
  EXPECT_EQ(ran(mesh_of(direct_rt, direct_rt), n, {}), ran_direct);
  // Every device states ring: ring above the threshold, direct below.
  EXPECT_EQ(ran(mesh_of(ring_rt, ring_rt), n, {}), ran_ring);
  EXPECT_EQ(ran(mesh_of(ring_rt, ring_rt), 1000, {}), ran_direct);
  // Devices that differ: as ring.
  EXPECT_EQ(ran(mesh_of(ring_rt, direct_rt), n, {}), ran_ring);
  EXPECT_EQ(ran(mesh_of(direct_rt, ring_rt), 1000, {}), ran_direct);
  // The option overrides the policy.
  EXPECT_EQ(ran(mesh_of(direct_rt, direct_rt), n, {.algorithm = CollectiveAlgorithm::ring}), ran_ring);
  EXPECT_EQ(ran(mesh_of(ring_rt, ring_rt), n, {.algorithm = CollectiveAlgorithm::direct}), ran_direct);
  // And the results are right either way.
  check_all_reduce<float>(mesh_of(ring_rt, direct_rt), {"data"}, n, ReduceOp::sum, {}, "mixed policies");
  check_all_reduce<std::int32_t>(mesh_of(direct_rt, direct_rt), {"data"}, n, ReduceOp::max, {}, "direct policy");
}

TEST_F(Collectives, AutomaticIsSharedMemoryWhenEveryDeviceHasHostMemory) {
  // Shared memory: device 0 receives only the chunks its three peers reduced (250 elements each),
  // whatever the threshold; ring would bring (2n - 500) elements, direct 3n.
  const Mesh mesh = line(4);
  ASSERT_TRUE(mesh.device(0).host_accessible());
  auto arrays = arrays_for<float>(mesh, {1000});
  for (std::size_t threshold : {std::size_t{0}, std::size_t{1} << 30}) {
    const auto before = mesh.device(0).transfer_stats().bytes_from_peer;
    spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, {.direct_threshold_bytes = threshold}).get();
    EXPECT_EQ(mesh.device(0).transfer_stats().bytes_from_peer - before, 3u * 250u * 4u) << threshold;
  }
}

TEST_F(Collectives, SharedMemoryNeedsNoTemporaries) {
  // From 64 KiB up the steps run as host tasks on the devices; below, at once. Neither allocates.
  const Mesh mesh = line(4);
  for (std::size_t n : {std::size_t{100}, std::size_t{1} << 20}) {
    auto arrays = arrays_for<float>(mesh, {static_cast<Shape::value_type>(n)});
    for (const auto& d : mesh.devices()) d.reset_peak_memory_stats();
    const auto in_use = memory_in_use(mesh);
    spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::mean, {.algorithm = CollectiveAlgorithm::shared_memory})
        .get();
    for (std::size_t i = 0; i < mesh.size(); ++i)
      EXPECT_EQ(mesh.device(i).memory_stats().peak_bytes_in_use, in_use[i]) << "n=" << n << ", device " << i;
  }
}

TEST_F(Collectives, SharedMemoryIsRefusedWhereMemoryIsNotHostMemory) {
  xdev::Runtime<ManualBackend> manual({}, 2, ManualBackend::Mode::inline_completion);
  const Mesh mesh(std::vector<AnyDevice>{AnyDevice(rt.device(0)), AnyDevice(manual.device(1))}, "data");
  auto arrays = arrays_for<float>(mesh, {8});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 (void)spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum,
                                        {.algorithm = CollectiveAlgorithm::shared_memory});
               },
               {"all_reduce", "shared_memory", "MANUAL:1", "to be host memory"});
  // automatic takes the device copies instead, and is right.
  check_all_reduce<float>(mesh, {"data"}, 1000, ReduceOp::sum, {}, "host + MANUAL automatic");
}

TEST_F(Collectives, ASmallCollectiveOnIdleDevicesIsDoneWhenTheCallReturns) {
  // Shared memory on idle devices: the arrivals complete at once and the step runs on the
  // calling thread; no thread hand-off. The user's handler still never runs inside the call.
  const Mesh mesh = line(4);
  auto arrays = arrays_for<std::int32_t>(mesh, {64});
  for (const auto& d : mesh.devices()) d.synchronize();
  auto f = spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum);
  EXPECT_EQ(f.wait_for(0s), std::future_status::ready);
  f.get();

  asio::io_context ioc;
  bool ran = false;
  spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::max, {},
                   asio::bind_executor(ioc, [&](std::exception_ptr ep) {
                     EXPECT_FALSE(ep);
                     ran = true;
                   }));
  EXPECT_FALSE(ran);
  ioc.run();
  EXPECT_TRUE(ran);
}

TEST_F(Collectives, MeshOfTwoByTwoOverEachAxisAndBoth) {
  const Mesh mesh = square();
  for (auto alg : every_algorithm) {
    for (std::vector<std::string> axes :
         {std::vector<std::string>{"data"}, {"model"}, {"data", "model"}, {"model", "data"}}) {
      std::string what = std::string(name_of(alg)) + " over";
      for (const auto& a : axes) what += " " + a;
      check_all_reduce<std::int32_t>(mesh, axes, 101, ReduceOp::sum, {.algorithm = alg}, "i32 " + what);
      check_all_reduce<float>(mesh, axes, large, ReduceOp::mean, {.algorithm = alg}, "f32 " + what);
    }
  }
}

TEST_F(Collectives, AxesInBracesNameSeveralAxes) {
  const Mesh mesh = square();
  auto arrays = arrays_for<std::int32_t>(mesh, {6});
  spmd::all_reduce(mesh, {"data", "model"}, std::span(arrays), ReduceOp::sum).get();
  std::vector<std::vector<std::int32_t>> inputs;
  for (std::size_t i = 0; i < 4; ++i) inputs.push_back(host_values<std::int32_t>(i, 6));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(download(arrays[i]), reference(inputs, ReduceOp::sum));
  auto in = arrays_for<float>(mesh, {2});
  auto out = empty_arrays<float>(mesh, {8});
  spmd::all_gather(mesh, {"model", "data"}, in, std::span(out)).get();
  // Row-major over (model, data): devices 0, 2, 1, 3.
  std::vector<float> want;
  for (std::size_t q : {0, 2, 1, 3}) {
    const auto part = host_values<float>(q, 2);
    want.insert(want.end(), part.begin(), part.end());
  }
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(download(out[i]), want);
  auto scattered = empty_arrays<float>(mesh, {2});
  spmd::reduce_scatter(mesh, {"data", "model"}, out, std::span(scattered), ReduceOp::max).get();
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_EQ(download(scattered[i]), host_values<float>(i == 1 ? 2 : i == 2 ? 1 : i, 2));
}

TEST_F(Collectives, AxisOfSizeOneIsTheIdentity) {
  const Mesh mesh(devices(4), {4, 1}, {"data", "model"});
  for (auto alg : every_algorithm) {
    check_all_reduce<float>(mesh, {"model"}, 9, ReduceOp::mean, {.algorithm = alg}, "all_reduce over size 1");
    auto in = arrays_for<std::int32_t>(mesh, {3, 2});
    auto out = empty_arrays<std::int32_t>(mesh, {3, 2});
    spmd::all_gather(mesh, "model", in, std::span(out), {.algorithm = alg}).get();
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(download(out[i]), host_values<std::int32_t>(i, 6));
    auto out2 = empty_arrays<std::int32_t>(mesh, {3, 2});
    spmd::reduce_scatter(mesh, "model", in, std::span(out2), ReduceOp::sum, {.algorithm = alg}).get();
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(download(out2[i]), host_values<std::int32_t>(i, 6));
    spmd::broadcast(mesh, "model", std::span(in), 0, {.algorithm = alg}).get();
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(download(in[i]), host_values<std::int32_t>(i, 6));
  }
}

// ---- all_gather, reduce_scatter, broadcast ----------------------------------------------------------

template <class T>
void check_all_gather(const Mesh& mesh, std::vector<std::string> axes, Shape block, CollectiveOptions opt,
                      const std::string& what) {
  const auto groups = mesh.groups(std::span<const std::string>(axes));
  const auto k = static_cast<Shape::value_type>(groups[0].size());
  Shape whole = block;
  whole[0] *= k;
  auto in = arrays_for<T>(mesh, block);
  auto out = empty_arrays<T>(mesh, whole);
  const auto baseline = memory_in_use(mesh);
  spmd::all_gather(mesh, std::span<const std::string>(axes), in, std::span(out), opt).get();
  EXPECT_EQ(memory_in_use(mesh), baseline) << what;
  const auto b = static_cast<std::size_t>(block.numel());
  for (const auto& g : groups) {
    std::vector<T> want;
    for (auto i : g) {
      const auto part = host_values<T>(i, b);
      want.insert(want.end(), part.begin(), part.end());
    }
    for (auto i : g) EXPECT_EQ(download(out[i]), want) << what << ", device " << i;
  }
}

TEST_F(Collectives, AllGatherConcatenatesAlongDimensionZeroInGroupOrder) {
  for (std::size_t k : {2, 3, 4})
    for (auto alg : every_algorithm) {
      const std::string what = "k=" + std::to_string(k) + " " + name_of(alg);
      check_all_gather<std::int32_t>(line(k), {"data"}, {3, 5}, {.algorithm = alg}, "i32 " + what);
      check_all_gather<float>(line(k), {"data"}, {large}, {.algorithm = alg}, "f32 large " + what);
      check_all_gather<double>(line(k), {"data"}, {1}, {.algorithm = alg}, "f64 one " + what);
    }
  for (auto alg : every_algorithm)
    for (std::vector<std::string> axes : {std::vector<std::string>{"data"}, {"model"}, {"data", "model"}})
      check_all_gather<std::int32_t>(square(), axes, {2, 3}, {.algorithm = alg}, std::string("2x2 ") + name_of(alg));
}

template <class T>
void check_reduce_scatter(const Mesh& mesh, std::vector<std::string> axes, Shape block, ReduceOp op,
                          CollectiveOptions opt, const std::string& what) {
  const auto groups = mesh.groups(std::span<const std::string>(axes));
  const auto k = groups[0].size();
  Shape whole = block;
  whole[0] *= static_cast<Shape::value_type>(k);
  const auto n = static_cast<std::size_t>(whole.numel()), b = static_cast<std::size_t>(block.numel());
  auto in = arrays_for<T>(mesh, whole);
  auto out = empty_arrays<T>(mesh, block);
  const auto baseline = memory_in_use(mesh);
  spmd::reduce_scatter(mesh, std::span<const std::string>(axes), in, std::span(out), op, opt).get();
  EXPECT_EQ(memory_in_use(mesh), baseline) << what;
  for (const auto& g : groups) {
    std::vector<std::vector<T>> inputs;
    for (auto i : g) inputs.push_back(host_values<T>(i, n));
    const auto full = reference(inputs, op);
    for (std::size_t r = 0; r < k; ++r) {
      const std::vector<T> want(full.begin() + static_cast<std::ptrdiff_t>(r * b),
                                full.begin() + static_cast<std::ptrdiff_t>((r + 1) * b));
      expect_close(download(out[g[r]]), want, what + ", device " + std::to_string(g[r]));
    }
    for (auto i : g) EXPECT_EQ(download(in[i]), host_values<T>(i, n)) << what << ": the input changed";
  }
}

TEST_F(Collectives, ReduceScatterLeavesBlockRankOfTheReduction) {
  for (std::size_t k : {2, 3, 4})
    for (auto alg : every_algorithm) {
      const std::string what = "k=" + std::to_string(k) + " " + name_of(alg);
      for (auto op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max})
        check_reduce_scatter<std::int32_t>(line(k), {"data"}, {3, 2}, op, {.algorithm = alg},
                                           std::string("i32 ") + name_of(op) + " " + what);
      check_reduce_scatter<std::int32_t>(line(k), {"data"}, {large}, ReduceOp::sum, {.algorithm = alg},
                                         "i32 large sum " + what);
      check_reduce_scatter<float>(line(k), {"data"}, {large}, ReduceOp::mean, {.algorithm = alg}, "f32 mean " + what);
      check_reduce_scatter<double>(line(k), {"data"}, {1}, ReduceOp::sum, {.algorithm = alg}, "f64 sum " + what);
    }
  for (auto alg : every_algorithm)
    for (std::vector<std::string> axes : {std::vector<std::string>{"data"}, {"model"}, {"data", "model"}})
      check_reduce_scatter<float>(square(), axes, {5}, ReduceOp::sum, {.algorithm = alg},
                                  std::string("2x2 ") + name_of(alg));
}

TEST_F(Collectives, BroadcastFromEveryRoot) {
  for (std::size_t k : {3, 4})
    for (std::size_t n : {std::size_t{1}, std::size_t{10}, large})
      for (auto alg : every_algorithm)
        for (std::size_t root = 0; root < k; ++root) {
          const Mesh mesh = line(k);
          auto arrays = arrays_for<std::int32_t>(mesh, {static_cast<Shape::value_type>(n)});
          const auto baseline = memory_in_use(mesh);
          spmd::broadcast(mesh, "data", std::span(arrays), static_cast<std::int64_t>(root), {.algorithm = alg}).get();
          EXPECT_EQ(memory_in_use(mesh), baseline);
          for (std::size_t i = 0; i < k; ++i)
            EXPECT_EQ(download(arrays[i]), host_values<std::int32_t>(root, n))
                << "k=" << k << " n=" << n << " " << name_of(alg) << " root " << root << ", device " << i;
        }
  // Over one axis of a 2x2 mesh: each group's own root.
  const Mesh mesh = square();
  for (std::int64_t root = 0; root < 2; ++root) {
    auto arrays = arrays_for<float>(mesh, {4});
    spmd::broadcast(mesh, "model", std::span(arrays), root).get();
    for (const auto& g : mesh.groups("model"))
      for (auto i : g) EXPECT_EQ(download(arrays[i]), host_values<float>(g[static_cast<std::size_t>(root)], 4));
  }
}

// ---- ordering and concurrency ---------------------------------------------------------------------

TEST_F(Collectives, RunsAfterTheWorkSubmittedBeforeItOnEachDevice) {
  const Mesh mesh = line(4);
  for (auto alg : every_algorithm) {
    auto arrays = empty_arrays<float>(mesh, {large});
    std::vector<xdev::Future<void>> pending;
    for (std::size_t i = 0; i < 4; ++i) {
      // A slow device: its fill must still be seen by the collective.
      if (i == 1) pending.push_back(mesh.device(i).execute([] { std::this_thread::sleep_for(50ms); }));
      pending.push_back(xdev::ops::fill(mesh.device(i), arrays[i], static_cast<float>(i + 1)));
    }
    spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, {.algorithm = alg}).get();
    for (auto& f : pending) f.get();
    for (std::size_t i = 0; i < 4; ++i) {
      const auto got = download(arrays[i]);
      EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return v == 10.0f; }))
          << name_of(alg) << ", device " << i;
    }
  }
}

TEST_F(Collectives, ManyCollectivesInFlightAtOnce) {
  const Mesh mesh = square();
  std::vector<std::vector<AnyArray<std::int32_t>>> sets;
  std::vector<xdev::Future<void>> futures;
  for (int c = 0; c < 12; ++c) sets.push_back(arrays_for<std::int32_t>(mesh, {c % 2 ? 5 : 20001}, c));
  const auto baseline = memory_in_use(mesh);
  for (int c = 0; c < 12; ++c)
    futures.push_back(spmd::all_reduce(mesh, c % 3 ? "data" : "model", std::span(sets[c]),
                                       c % 4 ? ReduceOp::sum : ReduceOp::max,
                                       {.algorithm = c % 2 ? CollectiveAlgorithm::direct : CollectiveAlgorithm::ring}));
  for (auto& f : futures) f.get();
  EXPECT_EQ(memory_in_use(mesh), baseline);
  for (int c = 0; c < 12; ++c) {
    const std::size_t n = c % 2 ? 5 : 20001;
    for (const auto& g : mesh.groups(c % 3 ? "data" : "model")) {
      std::vector<std::vector<std::int32_t>> inputs;
      for (auto i : g) inputs.push_back(host_values<std::int32_t>(i, n, static_cast<std::uint64_t>(c)));
      const auto want = reference(inputs, c % 4 ? ReduceOp::sum : ReduceOp::max);
      for (auto i : g) EXPECT_EQ(download(sets[c][i]), want) << "collective " << c << ", device " << i;
    }
  }
}

TEST(CollectivesThrottle, CompletesWithAnInFlightBoundOfOne) {
  xdev::Runtime<Host> rt({.max_inflight = 1}, Host::Options{.devices = 4});
  std::vector<AnyDevice> devs;
  for (std::size_t i = 0; i < 4; ++i) devs.emplace_back(rt.device(i));
  const Mesh mesh(devs, "data");
  for (auto alg : every_algorithm) {
    auto arrays = arrays_for<float>(mesh, {large});
    spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, {.algorithm = alg}).get();
    std::vector<std::vector<float>> inputs;
    for (std::size_t i = 0; i < 4; ++i) inputs.push_back(host_values<float>(i, large));
    for (std::size_t i = 0; i < 4; ++i) expect_close(download(arrays[i]), reference(inputs, ReduceOp::sum), "bound 1");
  }
}

// ---- completion tokens -----------------------------------------------------------------------------

TEST_F(Collectives, CallbackToken) {
  const Mesh mesh = line(3);
  auto arrays = arrays_for<std::int32_t>(mesh, {100});
  std::promise<std::exception_ptr> p;
  spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, {}, [&](std::exception_ptr e) { p.set_value(e); });
  EXPECT_EQ(p.get_future().get(), nullptr);
  std::vector<std::vector<std::int32_t>> inputs;
  for (std::size_t i = 0; i < 3; ++i) inputs.push_back(host_values<std::int32_t>(i, 100));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(download(arrays[i]), reference(inputs, ReduceOp::sum));
}

TEST_F(Collectives, AwaitableTokenInsideAnIoContextCoroutine) {
  const Mesh mesh = line(4);
  auto arrays = arrays_for<float>(mesh, {large});
  auto in = arrays_for<float>(mesh, {3});
  auto out = empty_arrays<float>(mesh, {12});
  asio::io_context io;
  std::vector<std::vector<float>> means(4, std::vector<float>(large));
  auto body = [&]() -> asio::awaitable<int> {
    co_await spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::mean, {}, asio::use_awaitable);
    for (std::size_t i = 0; i < 4; ++i)
      co_await mesh.device(i).copy_to_host(arrays[i], std::span<float>(means[i]), asio::use_awaitable);
    co_await spmd::all_gather(mesh, "data", in, std::span(out), {}, asio::use_awaitable);
    try {
      // An error arrives at the co_await.
      mesh.device(3).set_memory_limit(mesh.device(3).memory_stats().bytes_in_use);
      co_await spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum,
                                {.algorithm = CollectiveAlgorithm::ring}, asio::use_awaitable);
    } catch (const xdev::error& e) {
      co_return static_cast<int>(e.condition());
    }
    co_return 0;
  };
  auto f = asio::co_spawn(io, body(), asio::use_future);
  io.run();
  mesh.device(3).set_memory_limit(std::nullopt);
  EXPECT_EQ(f.get(), static_cast<int>(xdev::errc::out_of_memory));
  std::vector<std::vector<float>> inputs;
  for (std::size_t i = 0; i < 4; ++i) inputs.push_back(host_values<float>(i, large));
  std::vector<float> gathered;
  for (std::size_t q = 0; q < 4; ++q) {
    const auto part = host_values<float>(q, 3);
    gathered.insert(gathered.end(), part.begin(), part.end());
  }
  for (std::size_t i = 0; i < 4; ++i) {
    expect_close(means[i], reference(inputs, ReduceOp::mean), "awaited mean");
    EXPECT_EQ(download(out[i]), gathered);
  }
  for (const auto& d : mesh.devices()) d.synchronize();
}

TEST_F(Collectives, DeferredTokenStartsNothingUntilInvoked) {
  const Mesh mesh = line(2);
  auto arrays = arrays_for<std::int32_t>(mesh, {8});
  auto op = spmd::broadcast(mesh, "data", std::span(arrays), 1, {}, asio::deferred);
  std::this_thread::sleep_for(20ms);
  for (const auto& d : mesh.devices()) d.synchronize();
  EXPECT_EQ(download(arrays[0]), host_values<std::int32_t>(0, 8));
  std::move(op)(xdev::use_future).get();
  EXPECT_EQ(download(arrays[0]), host_values<std::int32_t>(1, 8));
}

TEST_F(Collectives, DroppedFutureKeepsItsErrorOnTheFirstMeshDevice) {
  const Mesh mesh = line(2);
  auto arrays = arrays_for<float>(mesh, {large});
  mesh.device(1).set_memory_limit(mesh.device(1).memory_stats().bytes_in_use);
  {
    auto f = spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, {.algorithm = CollectiveAlgorithm::ring});
    f.wait();
  }
  mesh.device(1).set_memory_limit(std::nullopt);
  mesh.device(1).synchronize();
  expect_error(xdev::errc::out_of_memory, [&] { mesh.device(0).synchronize(); }, {"all_reduce", "HOST:1"});
}

// ---- validation ------------------------------------------------------------------------------------

TEST_F(Collectives, ValidationErrorsAreThrownBeforeAnythingIsSubmitted) {
  const Mesh mesh = line(4);
  auto submitted = [&] {
    std::size_t n = 0;
    for (const auto& d : mesh.devices()) n += d.execution_stats().submitted;
    return n;
  };
  const auto before = submitted();
  auto arrays = arrays_for<float>(mesh, {6});
  auto ints = arrays_for<std::int32_t>(mesh, {6});
  const auto after_setup = submitted();
  EXPECT_GT(after_setup, before);
  using xdev::errc;

  std::vector<AnyArray<float>> three;
  for (std::size_t i = 0; i < 3; ++i) three.push_back(xdev::empty<float>(mesh.device(i), {6}));
  expect_error(errc::invalid_argument, [&] { (void)spmd::all_reduce(mesh, "data", std::span(three), ReduceOp::sum); },
               {"all_reduce", "got 3 arrays in `arrays` for a mesh of 4 devices"});

  std::vector<AnyArray<float>> swapped;
  for (std::size_t i : {0, 2, 1, 3}) swapped.push_back(xdev::empty<float>(mesh.device(i), {6}));
  expect_error(errc::invalid_argument, [&] { (void)spmd::all_reduce(mesh, "data", std::span(swapped), ReduceOp::sum); },
               {"arrays[1] is on HOST:2, but mesh device 1 is HOST:1"});

  std::vector<AnyArray<float>> shapes;
  for (std::size_t i = 0; i < 4; ++i) shapes.push_back(xdev::empty<float>(mesh.device(i), {i == 2 ? 7 : 6}));
  expect_error(errc::invalid_argument, [&] { (void)spmd::all_reduce(mesh, "data", std::span(shapes), ReduceOp::sum); },
               {"arrays[2] on HOST:2 has shape [7]", "arrays[0] on HOST:0 has shape [6]"});

  expect_error(errc::invalid_argument, [&] { (void)spmd::all_reduce(mesh, "batch", std::span(arrays), ReduceOp::sum); },
               {"all_reduce", "mesh has no axis 'batch'"});

  expect_error(errc::invalid_argument, [&] { (void)spmd::all_reduce(mesh, "data", std::span(ints), ReduceOp::mean); },
               {"ReduceOp::mean", "i32", "use ReduceOp::sum"});

  std::vector<AnyArray<float>> with_empty;
  for (std::size_t i = 0; i < 4; ++i)
    with_empty.push_back(i == 3 ? AnyArray<float>() : xdev::empty<float>(mesh.device(i), {6}));
  expect_error(errc::invalid_argument,
               [&] { (void)spmd::all_reduce(mesh, "data", std::span(with_empty), ReduceOp::sum); },
               {"arrays[3] is empty"});

  auto zero = empty_arrays<float>(mesh, {0});
  expect_error(errc::invalid_argument, [&] { (void)spmd::broadcast(mesh, "data", std::span(zero), 0); },
               {"broadcast", "arrays[0] on HOST:0 has no elements (shape [0])"});

  expect_error(errc::invalid_argument, [&] { (void)spmd::broadcast(mesh, "data", std::span(arrays), 4); },
               {"broadcast", "root 4 is out of range", "[0, 4)"});
  expect_error(errc::invalid_argument, [&] { (void)spmd::broadcast(mesh, "data", std::span(arrays), -1); },
               {"root -1 is out of range"});

  auto gathered = empty_arrays<float>(mesh, {20});
  expect_error(errc::invalid_argument, [&] { (void)spmd::all_gather(mesh, "data", arrays, std::span(gathered)); },
               {"all_gather", "out[0] on HOST:0 has shape [20]", "gives [24]"});
  auto scalars = empty_arrays<float>(mesh, {});
  auto gathered4 = empty_arrays<float>(mesh, {4});
  expect_error(errc::invalid_argument, [&] { (void)spmd::all_gather(mesh, "data", scalars, std::span(gathered4)); },
               {"in[0] is a scalar"});

  auto scattered = empty_arrays<float>(mesh, {2});
  expect_error(errc::invalid_argument,
               [&] { (void)spmd::reduce_scatter(mesh, "data", arrays, std::span(scattered), ReduceOp::sum); },
               {"reduce_scatter", "dimension 0 (6) is not divisible by the 4 devices"});
  auto in8 = empty_arrays<float>(mesh, {8, 3});
  auto wrong = empty_arrays<float>(mesh, {2});
  expect_error(errc::invalid_argument,
               [&] { (void)spmd::reduce_scatter(mesh, "data", in8, std::span(wrong), ReduceOp::sum); },
               {"out[0] on HOST:0 has shape [2]", "blocks of shape [2, 3]"});

  expect_error(errc::invalid_argument,
               [&] { (void)spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, {.timeout = 0ms}); },
               {"CollectiveOptions::timeout must be > 0"});
  expect_error(errc::invalid_argument, [&] { spmd::set_default_collective_timeout(-5ms); }, {"must be > 0", "-5 ms"});

  // The same checks for every token: nothing was submitted by any of the calls above.
  expect_error(errc::invalid_argument,
               [&] { (void)spmd::all_reduce(mesh, "data", std::span(three), ReduceOp::sum, {}, asio::deferred); },
               {"got 3 arrays"});
  EXPECT_EQ(submitted(), after_setup);
}

TEST_F(Collectives, AnArrayOfAnotherRuntimeIsNamedSo) {
  xdev::Runtime<Host> other({}, Host::Options{.devices = 4});
  const Mesh mesh = line(2);
  std::vector<AnyArray<float>> arrays;
  arrays.push_back(xdev::empty<float>(mesh.device(0), {3}));
  arrays.push_back(xdev::empty<float>(AnyDevice(other.device(1)), {3}));
  expect_error(xdev::errc::invalid_argument,
               [&] { (void)spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum); },
               {"arrays[1] is on HOST:1 of another runtime, but mesh device 1 is HOST:1"});
}

// ---- deadline --------------------------------------------------------------------------------------

TEST_F(Collectives, DeadlineNamesTheDeviceThatDidNotArrive) {
  const Mesh mesh = line(4);
  auto arrays = arrays_for<float>(mesh, {large});
  const auto baseline = memory_in_use(mesh);
  std::latch release(1);
  auto blocker = mesh.device(2).execute([&] { release.wait(); });
  const auto start = std::chrono::steady_clock::now();
  auto f = spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum,
                            {.timeout = 200ms, .algorithm = CollectiveAlgorithm::ring});
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 200ms);
  expect_error(xdev::errc::deadline_exceeded, [&] { f.get(); },
               {"all_reduce over axis 'data' did not complete within 200 ms", "HOST:2 did not arrive",
                "waiting for them: HOST:0"});
  // No step starts after the deadline: releasing the device runs only its (empty) arrival.
  std::vector<std::size_t> submitted;
  for (const auto& d : mesh.devices()) submitted.push_back(d.execution_stats().submitted);
  release.count_down();
  blocker.get();
  expect_memory_returns_to(mesh, baseline);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(mesh.device(i).execution_stats().submitted, submitted[i]);
  // The mesh works again.
  check_all_reduce<float>(mesh, {"data"}, 1000, ReduceOp::sum, {}, "after the deadline");
}

// The deadline timer keeps the entries of ended deadlines for the next ones (no allocation per
// collective): a deadline set on a reused entry still fires, whether the entries before it were
// cancelled (collectives that completed in time) or fired (the one that timed out last round).
TEST_F(Collectives, ADeadlineFiresAfterManyCollectivesEndedBeforeTheirs) {
  const Mesh mesh = line(2);
  auto arrays = arrays_for<float>(mesh, {64});
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 100; ++i) spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::max).get();
    std::latch release(1);
    auto blocker = mesh.device(1).execute([&] { release.wait(); });
    auto f = spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::max, {.timeout = 100ms});
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "round " << round;
    expect_error(xdev::errc::deadline_exceeded, [&] { f.get(); },
                 {"did not complete within 100 ms", "HOST:1 did not arrive"});
    release.count_down();
    blocker.get();
  }
}

TEST_F(Collectives, StepsQueuedOnADeviceStuckMidCollectiveRunSafelyAfterTheDeadline) {
  const Mesh mesh = line(4);
  auto arrays = arrays_for<float>(mesh, {large});
  const auto baseline = memory_in_use(mesh);
  std::latch hold_pred(1);
  std::latch hold_stuck(1);
  auto pred_blocker = mesh.device(1).execute([&] { hold_pred.wait(); });
  auto f = spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum,
                            {.timeout = 300ms, .algorithm = CollectiveAlgorithm::ring});
  mesh.device(2).synchronize();  // HOST:2 has arrived: its step 1 waits for HOST:1's arrival
  auto stuck_blocker = mesh.device(2).execute([&] { hold_stuck.wait(); });
  hold_pred.count_down();  // now HOST:2's step 1 is submitted, behind the blocker
  pred_blocker.get();
  expect_error(xdev::errc::deadline_exceeded, [&] { f.get(); },
               {"did not complete within 300 ms", "HOST:2 did not complete step 1 of 6"});
  // The queued step still runs, on temporaries the collective's shared state kept alive.
  hold_stuck.count_down();
  stuck_blocker.get();
  expect_memory_returns_to(mesh, baseline);
  check_all_reduce<float>(mesh, {"data"}, large, ReduceOp::sum, {}, "after the deadline");
}

TEST_F(Collectives, DeadlineOfDirectAndDefaultTimeout) {
  const Mesh mesh = square();
  auto arrays = arrays_for<std::int32_t>(mesh, {16});
  const auto baseline = memory_in_use(mesh);
  const auto old = spmd::default_collective_timeout();
  EXPECT_EQ(old, 60s);
  spmd::set_default_collective_timeout(150ms);
  std::promise<void> release;
  auto released = release.get_future().share();
  auto blocker = mesh.device(1).execute([released] { released.wait(); });
  auto f =
      spmd::all_reduce(mesh, "model", std::span(arrays), ReduceOp::sum, {.algorithm = CollectiveAlgorithm::direct});
  spmd::set_default_collective_timeout(old);
  // Group {0, 1} times out; group {2, 3} is unaffected and completes (not named in the message).
  try {
    f.get();
    ADD_FAILURE() << "no deadline error";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.condition(), xdev::errc::deadline_exceeded);
    EXPECT_THAT(e.what(), HasSubstr("within 150 ms: HOST:1 did not arrive"));
    EXPECT_THAT(e.what(), HasSubstr("HOST:0"));
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("HOST:2")));
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("HOST:3")));
  }
  std::vector<std::vector<std::int32_t>> inputs{host_values<std::int32_t>(2, 16), host_values<std::int32_t>(3, 16)};
  EXPECT_EQ(download(arrays[2]), reference(inputs, ReduceOp::sum));
  release.set_value();
  blocker.get();
  expect_memory_returns_to(mesh, baseline);
}

// ---- errors mid-collective -------------------------------------------------------------------------

TEST_F(Collectives, OutOfMemoryOnOneDeviceFailsTheCollectiveAndFreesTheTemporaries) {
  for (auto alg : {CollectiveAlgorithm::ring, CollectiveAlgorithm::direct}) {
    const Mesh mesh = line(4);
    auto arrays = arrays_for<float>(mesh, {large});
    const auto baseline = memory_in_use(mesh);
    mesh.device(2).set_memory_limit(baseline[2]);
    const auto start = std::chrono::steady_clock::now();
    auto f = spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, {.algorithm = alg});
    expect_error(xdev::errc::out_of_memory, [&] { f.get(); },
                 {"all_reduce over axis 'data'", "out of memory on HOST:2"});
    EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);  // well before the 60 s deadline
    mesh.device(2).set_memory_limit(std::nullopt);
    expect_memory_returns_to(mesh, baseline);
  }
  // reduce_scatter allocates too.
  const Mesh mesh = line(3);
  auto in = arrays_for<std::int32_t>(mesh, {30});
  auto out = empty_arrays<std::int32_t>(mesh, {10});
  const auto baseline = memory_in_use(mesh);
  mesh.device(0).set_memory_limit(baseline[0]);
  expect_error(xdev::errc::out_of_memory,
               [&] {
                 spmd::reduce_scatter(mesh, "data", in, std::span(out), ReduceOp::max,
                                      {.algorithm = CollectiveAlgorithm::ring})
                     .get();
               },
               {"reduce_scatter over axis 'data'", "HOST:0"});
  mesh.device(0).set_memory_limit(std::nullopt);
  expect_memory_returns_to(mesh, baseline);
}

TEST_F(Collectives, SharedMemoryRunsOnDevicesWithNoRoomLeft) {
  // Nothing is allocated, so a device at its memory limit takes part as any other.
  const Mesh mesh = line(4);
  auto arrays = arrays_for<float>(mesh, {large});
  auto in = arrays_for<std::int32_t>(mesh, {40});
  auto out = empty_arrays<std::int32_t>(mesh, {10});
  const auto full = memory_in_use(mesh);
  for (std::size_t i = 0; i < mesh.size(); ++i) mesh.device(i).set_memory_limit(full[i]);
  spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum).get();
  spmd::reduce_scatter(mesh, "data", in, std::span(out), ReduceOp::max).get();
  for (std::size_t i = 0; i < mesh.size(); ++i) mesh.device(i).set_memory_limit(std::nullopt);
  std::vector<std::vector<std::int32_t>> inputs;
  for (std::size_t i = 0; i < 4; ++i) inputs.push_back(host_values<std::int32_t>(i, 40));
  const auto want = reference(inputs, ReduceOp::max);
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_EQ(download(out[i]), std::vector<std::int32_t>(want.begin() + 10 * i, want.begin() + 10 * (i + 1)));
  std::vector<std::vector<float>> floats;
  for (std::size_t i = 0; i < 4; ++i) floats.push_back(host_values<float>(i, large));
  expect_close(download(arrays[3]), reference(floats, ReduceOp::sum), "f32 sum at the limit");
}

// ---- two runtimes ----------------------------------------------------------------------------------

TEST(CollectivesAcrossRuntimes, MixedMeshGivesTheSameResults) {
  xdev::Runtime<Host> a({}, Host::Options{.devices = 2});
  xdev::Runtime<Host> b({}, Host::Options{.devices = 2});
  const Mesh mesh({AnyDevice(a.device(0)), AnyDevice(b.device(0)), AnyDevice(a.device(1)), AnyDevice(b.device(1))},
                  {2, 2}, {"data", "model"});
  for (auto alg : every_algorithm) {
    for (std::vector<std::string> axes : {std::vector<std::string>{"data"}, {"model"}, {"data", "model"}}) {
      const std::string what = std::string("mixed ") + name_of(alg);
      check_all_reduce<std::int32_t>(mesh, axes, 1001, ReduceOp::sum, {.algorithm = alg}, what);
      check_all_reduce<float>(mesh, axes, large, ReduceOp::mean, {.algorithm = alg}, what);
      check_all_reduce<float>(mesh, axes, 3, ReduceOp::max, {.algorithm = alg}, what);
      check_all_gather<double>(mesh, axes, {4, 2}, {.algorithm = alg}, what);
      check_reduce_scatter<std::int32_t>(mesh, axes, {7}, ReduceOp::min, {.algorithm = alg}, what);
    }
    auto arrays = arrays_for<float>(mesh, {large});
    spmd::broadcast(mesh, {"data", "model"}, std::span(arrays), 3, {.algorithm = alg}).get();
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(download(arrays[i]), host_values<float>(3, large));
  }
  // Between runtimes the bytes go through the host: none arrive from a peer.
  const Mesh across({AnyDevice(a.device(0)), AnyDevice(b.device(0))}, "x");
  auto arrays = arrays_for<float>(across, {1000});
  const auto peer = across.device(1).transfer_stats().bytes_from_peer;
  const auto host = across.device(1).transfer_stats().bytes_from_host;
  spmd::all_reduce(across, "x", std::span(arrays), ReduceOp::sum, {.algorithm = CollectiveAlgorithm::direct}).get();
  EXPECT_EQ(across.device(1).transfer_stats().bytes_from_peer, peer);
  EXPECT_EQ(across.device(1).transfer_stats().bytes_from_host - host, 4000u);
}

// ---- bytes moved -----------------------------------------------------------------------------------

std::vector<std::size_t> from_peer(const Mesh& mesh) {
  std::vector<std::size_t> out;
  for (const auto& d : mesh.devices()) out.push_back(d.transfer_stats().bytes_from_peer);
  return out;
}

// The length of chunk c when n elements are cut into k chunks that differ by at most one.
std::size_t chunk_length(std::size_t n, std::size_t k, std::size_t c) {
  return n / k + (c < n % k ? 1 : 0);
}

// ---- in place on windows ---------------------------------------------------------------------------

// Rows [3, 8) of a [10, 7] array per device: the window is reduced (or broadcast into), the rows
// around it are left alone, with every algorithm; and no temporary outlives the call.
TEST_F(Collectives, AllReduceBroadcastAndReduceWorkInPlaceOnAWindowAndLeaveTheRestOfTheArray) {
  const Mesh mesh = square();
  const Shape shape{10, 7};
  const std::size_t row = 7, first = 3 * row, last = 8 * row;
  for (auto alg : every_algorithm)
    for (std::vector<std::string> axes : {std::vector<std::string>{"data"}, {"model"}, {"data", "model"}}) {
      const std::string what = std::string(name_of(alg)) + " over " + axes[0] + (axes.size() > 1 ? "+model" : "");
      for (int kind = 0; kind < 3; ++kind) {
        auto arrays = arrays_for<float>(mesh, shape);
        std::vector<xdev::AnyArrayView<float>> windows;
        for (auto& a : arrays) windows.push_back(xdev::slice(a, {3, 8}));
        const auto baseline = memory_in_use(mesh);
        const std::span<const std::string> over(axes);
        if (kind == 0)
          spmd::all_reduce(mesh, over, std::span(windows), ReduceOp::sum, {.algorithm = alg}).get();
        else if (kind == 1)
          spmd::broadcast(mesh, over, std::span(windows), 1, {.algorithm = alg}).get();
        else
          spmd::reduce(mesh, over, std::span(windows), ReduceOp::max, 0, {.algorithm = alg}).get();
        EXPECT_EQ(memory_in_use(mesh), baseline) << what;
        for (const auto& g : mesh.groups(over)) {
          std::vector<std::vector<float>> inputs;
          for (auto i : g) {
            const auto all = host_values<float>(i, shape.numel());
            inputs.emplace_back(all.begin() + first, all.begin() + last);
          }
          for (std::size_t q = 0; q < g.size(); ++q) {
            const auto got = download(arrays[g[q]]);
            auto want = host_values<float>(g[q], shape.numel());  // outside the window: unchanged
            std::vector<float> window = inputs[q];
            if (kind == 0) window = reference(inputs, ReduceOp::sum);
            if (kind == 1) window = inputs[1];
            if (kind == 2 && q == 0) window = reference(inputs, ReduceOp::max);
            std::copy(window.begin(), window.end(), want.begin() + first);
            expect_close(got, want, what + ", kind " + std::to_string(kind) + ", device " + std::to_string(g[q]));
          }
        }
      }
    }
}

// A shard gathered into rows [2, 2 + 3k) of a [12, 5] buffer per device, and a window of rows
// reduce-scattered into a window of another buffer: the rest of each buffer left alone.
TEST_F(Collectives, AllGatherAndReduceScatterReadAndWriteWindows) {
  const Mesh mesh = line(4);
  for (auto alg : every_algorithm) {
    const std::string what = name_of(alg);
    // all_gather: whole [3, 5] shards (as windows of all of them) into rows [2, 14) of [16, 5].
    auto shards = arrays_for<float>(mesh, {3, 5});
    auto flat = arrays_for<float>(mesh, {16, 5}, 7);
    std::vector<xdev::AnyArrayView<float>> in(shards.begin(), shards.end()), out;
    for (auto& f : flat) out.push_back(xdev::slice(f, {2, 14}));
    spmd::all_gather(mesh, "data", std::span<const xdev::AnyArrayView<float>>(in), std::span(out), {.algorithm = alg})
        .get();
    for (std::size_t i = 0; i < 4; ++i) {
      auto want = host_values<float>(i, 80, 7);
      for (std::size_t q = 0; q < 4; ++q) {
        const auto shard = host_values<float>(q, 15);
        std::copy(shard.begin(), shard.end(), want.begin() + 10 + static_cast<std::ptrdiff_t>(q * 15));
      }
      expect_close(download(flat[i]), want, what + " all_gather, device " + std::to_string(i));
    }
    // reduce_scatter: rows [1, 9) of [10, 3] into rows [4, 6) of [7, 3].
    auto inputs = arrays_for<float>(mesh, {10, 3});
    auto outputs = arrays_for<float>(mesh, {7, 3}, 11);
    std::vector<xdev::AnyArrayView<float>> win, wout;
    for (auto& a : inputs) win.push_back(xdev::slice(a, {1, 9}));
    for (auto& a : outputs) wout.push_back(xdev::slice(a, {4, 6}));
    spmd::reduce_scatter(mesh, "data", std::span<const xdev::AnyArrayView<float>>(win), std::span(wout), ReduceOp::sum,
                         {.algorithm = alg})
        .get();
    std::vector<std::vector<float>> rows;
    for (std::size_t q = 0; q < 4; ++q) {
      const auto all = host_values<float>(q, 30);
      rows.emplace_back(all.begin() + 3, all.begin() + 27);
    }
    const auto sum = reference(rows, ReduceOp::sum);
    for (std::size_t i = 0; i < 4; ++i) {
      auto want = host_values<float>(i, 21, 11);
      std::copy(sum.begin() + static_cast<std::ptrdiff_t>(i * 6), sum.begin() + static_cast<std::ptrdiff_t>(i * 6 + 6),
                want.begin() + 12);
      expect_close(download(outputs[i]), want, what + " reduce_scatter, device " + std::to_string(i));
    }
  }
}

// all_to_all and collective_permute from rows [1, 9) of [10, 4] into rows [2, 4) of [5, 16] (and
// rows [3, 11) of [12, 4]): the same bytes as on whole arrays holding those rows, the rest of each
// output left alone.
TEST_F(Collectives, AllToAllAndCollectivePermuteReadAndWriteWindows) {
  const Mesh mesh = line(4);
  auto rows_of = [](const std::vector<float>& all, std::size_t from, std::size_t to) {
    return std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(from),
                              all.begin() + static_cast<std::ptrdiff_t>(to));
  };
  for (auto alg : xdev_test::copy_algorithms)
    for (bool permute : {false, true}) {
      const std::string what = std::string(name_of(alg)) + (permute ? " collective_permute" : " all_to_all");
      auto in = arrays_for<float>(mesh, {10, 4});
      const Shape out_shape = permute ? Shape{12, 4} : Shape{5, 16};
      auto out = arrays_for<float>(mesh, out_shape, 5);
      std::vector<xdev::AnyArrayView<float>> win, wout;
      for (auto& a : in) win.push_back(xdev::slice(a, {1, 9}));
      for (auto& a : out) wout.push_back(permute ? xdev::slice(a, {3, 11}) : xdev::slice(a, {2, 4}));
      // The same on whole arrays holding the window's rows.
      std::vector<AnyArray<float>> whole_in, whole_out;
      for (std::size_t i = 0; i < 4; ++i) {
        whole_in.push_back(upload<float>(mesh.device(i), {8, 4}, rows_of(host_values<float>(i, 40), 4, 36)));
        whole_out.push_back(xdev::empty<float>(mesh.device(i), permute ? Shape{8, 4} : Shape{2, 16}));
      }
      const std::span<const xdev::AnyArrayView<float>> cwin(win);
      const std::span<const AnyArray<float>> cwhole(whole_in);
      const spmd::PermutePairs pairs{{0, 1}, {1, 2}, {2, 3}};  // device 0 receives zeros
      if (permute) {
        spmd::collective_permute(mesh, "data", cwin, std::span(wout), pairs, {.algorithm = alg}).get();
        spmd::collective_permute(mesh, "data", cwhole, std::span(whole_out), pairs).get();
      } else {
        spmd::all_to_all(mesh, "data", cwin, std::span(wout), 0, 1, {.algorithm = alg}).get();
        spmd::all_to_all(mesh, "data", cwhole, std::span(whole_out), 0, 1).get();
      }
      for (std::size_t i = 0; i < 4; ++i) {
        auto want = host_values<float>(i, static_cast<std::size_t>(out_shape.numel()), 5);
        const auto block = download(whole_out[i]);
        std::copy(block.begin(), block.end(), want.begin() + (permute ? 12 : 32));
        expect_close(download(out[i]), want, what + ", device " + std::to_string(i));
      }
    }
}

TEST_F(Collectives, AWindowInSeveralRunsOrOnAnotherDeviceIsRefusedBeforeAnythingRuns) {
  const Mesh mesh = line(2);
  auto arrays = arrays_for<float>(mesh, {4, 6});
  // Columns 0-2 of every row: 4 runs.
  std::vector<xdev::AnyArrayView<float>> columns{xdev::slice(arrays[0], xdev::all, {0, 3}),
                                                 xdev::slice(arrays[1], xdev::all, {0, 3})};
  auto e = xdev_test::error_of([&] { (void)spmd::all_reduce(mesh, "data", std::span(columns), ReduceOp::sum); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), HasSubstr("arrays[0] on HOST:0 is a window of shape [4, 3] in 4 separate runs; collectives "
                                  "take contiguous windows"));
  std::vector<xdev::AnyArrayView<float>> swapped{xdev::slice(arrays[1], {0, 2}), xdev::slice(arrays[0], {0, 2})};
  e = xdev_test::error_of([&] { (void)spmd::broadcast(mesh, "data", std::span(swapped), 0); });
  EXPECT_THAT(e.what(), HasSubstr("arrays[0] is on HOST:1, but mesh device 0 is HOST:0"));
  std::vector<xdev::AnyArrayView<float>> none(2);
  e = xdev_test::error_of([&] { (void)spmd::reduce(mesh, "data", std::span(none), ReduceOp::sum, 0); });
  EXPECT_THAT(e.what(), HasSubstr("arrays[0] is empty: a default-constructed window, onto no array"));
  std::vector<xdev::AnyArrayView<float>> uneven{xdev::slice(arrays[0], {0, 2}), xdev::slice(arrays[1], {0, 3})};
  e = xdev_test::error_of([&] { (void)spmd::all_reduce(mesh, "data", std::span(uneven), ReduceOp::sum); });
  EXPECT_THAT(e.what(), HasSubstr("arrays[1] on HOST:1 has shape [3, 6] but arrays[0] on HOST:0 has shape [2, 6]"));
  // A shard inside the rows it would be gathered into.
  auto flat = arrays_for<float>(mesh, {4, 6}, 3);
  std::vector<xdev::AnyArrayView<float>> shard{xdev::slice(flat[0], {2, 4}), xdev::slice(flat[1], {0, 2})},
      rows{xdev::slice(flat[0], {0, 4}), xdev::slice(arrays[1], {0, 4})};
  e = xdev_test::error_of([&] {
    (void)spmd::all_gather(mesh, "data", std::span<const xdev::AnyArrayView<float>>(shard), std::span(rows));
  });
  EXPECT_THAT(e.what(), HasSubstr("out[0] and in[0] are windows of one array that share elements (elements [0, 24) "
                                  "and [12, 24))"));
  // Nothing ran: the arrays hold their values.
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(download(arrays[i]), host_values<float>(i, 24));
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(download(flat[i]), host_values<float>(i, 24, 3));
}

TEST_F(Collectives, RingAllReduceReceivesTwoKMinusOneOverKOfTheArray) {
  for (std::size_t k : {2, 3, 4})
    for (std::size_t n : {std::size_t{12}, large, std::size_t{5}, std::size_t{2}}) {
      const Mesh mesh = line(k);
      auto arrays = arrays_for<float>(mesh, {static_cast<Shape::value_type>(n)});
      const auto before = from_peer(mesh);
      spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, {.algorithm = CollectiveAlgorithm::ring}).get();
      const auto after = from_peer(mesh);
      for (std::size_t r = 0; r < k; ++r) {
        // Reduce-scatter: every chunk but (r-1); all-gather: every chunk but r (its own).
        const std::size_t want = (2 * n - chunk_length(n, k, (r + k - 1) % k) - chunk_length(n, k, r)) * sizeof(float);
        EXPECT_EQ(after[r] - before[r], want) << "k=" << k << " n=" << n << " device " << r;
      }
      if (n % k == 0) {
        for (std::size_t r = 0; r < k; ++r) EXPECT_EQ(after[r] - before[r], 2 * (k - 1) * n / k * sizeof(float));
      }
    }
}

TEST_F(Collectives, DirectAndOtherCollectivesReceiveWhatTheyNeed) {
  for (std::size_t k : {2, 3, 4}) {
    const Mesh mesh = line(k);
    const std::size_t n = 1201 * k;
    const std::size_t bytes = n * sizeof(float);
    auto arrays = arrays_for<float>(mesh, {static_cast<Shape::value_type>(n)});
    auto check = [&](const char* what, auto&& run, auto&& want) {
      const auto before = from_peer(mesh);
      run();
      const auto after = from_peer(mesh);
      for (std::size_t r = 0; r < k; ++r)
        EXPECT_EQ(after[r] - before[r], want(r)) << what << " k=" << k << " device " << r;
    };
    check(
        "direct all_reduce",
        [&] {
          spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, {.algorithm = CollectiveAlgorithm::direct})
              .get();
        },
        [&](std::size_t) { return (k - 1) * bytes; });
    auto out = empty_arrays<float>(mesh, {static_cast<Shape::value_type>(n / k)});
    for (auto alg : {CollectiveAlgorithm::ring, CollectiveAlgorithm::direct})
      check(
          "reduce_scatter",
          [&] { spmd::reduce_scatter(mesh, "data", arrays, std::span(out), ReduceOp::sum, {.algorithm = alg}).get(); },
          [&](std::size_t) { return (k - 1) * bytes / k; });
    auto gathered = empty_arrays<float>(mesh, {static_cast<Shape::value_type>(n * k)});
    for (auto alg : {CollectiveAlgorithm::ring, CollectiveAlgorithm::direct})
      check(
          "all_gather", [&] { spmd::all_gather(mesh, "data", arrays, std::span(gathered), {.algorithm = alg}).get(); },
          [&](std::size_t) { return (k - 1) * bytes; });
    for (auto alg : {CollectiveAlgorithm::ring, CollectiveAlgorithm::direct})
      check(
          "broadcast", [&] { spmd::broadcast(mesh, "data", std::span(arrays), 1, {.algorithm = alg}).get(); },
          [&](std::size_t r) { return r == 1 ? std::size_t{0} : bytes; });
  }
}

// At `debug`, each collective says when it starts (on how many devices, which algorithm) and when
// it completes; nothing at the default threshold.
TEST_F(Collectives, ACollectiveLogsItsProgressAtDebugOnly) {
  std::vector<std::string> said;
  std::mutex m;
  const xdev::log::Sink previous = xdev::log::set_sink([&](const xdev::log::Record& r) {
    std::lock_guard lk(m);
    if (r.component == "spmd") said.emplace_back(r.message);
  });
  const Mesh mesh = line(2);
  auto arrays = arrays_for<float>(mesh, {64});
  xdev::log::set_level(xdev::log::Level::warning);
  spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum).get();
  xdev::log::set_level(xdev::log::Level::debug);
  spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, {.algorithm = CollectiveAlgorithm::ring}).get();
  xdev::log::set_level(std::nullopt);
  xdev::log::set_sink(previous);
  std::lock_guard lk(m);
  EXPECT_THAT(said, ElementsAre("all_reduce over axis 'data': started on 2 devices in 1 group(s), ring",
                                "all_reduce over axis 'data': completed"));
}

TEST_F(Collectives, ACollectiveIsOneActivityAroundTheWorkOfItsSteps) {
  struct Recorder final : xdev::tools::Listener {
    std::mutex m;
    std::vector<std::string> seen;
    std::uint64_t collective_id = 0;
    void begin(const xdev::tools::Activity& a) override {
      std::lock_guard lk(m);
      if (a.category == xdev::tools::Category::collective) {
        collective_id = a.id;
        seen.push_back("begin " + std::string(a.name) + " on " + std::string(a.device));
      } else if (collective_id != 0 && seen.size() == 1) {
        seen.push_back("steps");  // the steps' own work comes between
      }
    }
    void end(const xdev::tools::Activity& a, const std::exception_ptr& error) override {
      std::lock_guard lk(m);
      if (a.category == xdev::tools::Category::collective)
        seen.push_back(std::string(error ? "failed " : "end ") + std::string(a.name) +
                       (a.id == collective_id ? "" : " (another id)"));
    }
  };
  const Mesh mesh = line(2);
  auto arrays = arrays_for<float>(mesh, {64});
  auto recorder = std::make_shared<Recorder>();
  {
    const auto subscription = xdev::tools::add_listener(recorder);
    spmd::all_reduce(mesh, "data", std::span(arrays), ReduceOp::sum, {.algorithm = CollectiveAlgorithm::ring}).get();
  }
  std::lock_guard lk(recorder->m);
  EXPECT_THAT(recorder->seen, ElementsAre("begin all_reduce over axis 'data' on " + mesh.devices().front().name(),
                                          "steps", "end all_reduce over axis 'data'"));
}

}  // namespace
