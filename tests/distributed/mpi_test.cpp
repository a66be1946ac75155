// <xdev/distributed/mpi.hpp> under mpirun (tests/distributed/CMakeLists.txt runs it with 2 and 4
// processes). Every rank runs every test; only rank 0 prints the usual GoogleTest output, the
// others print their failures prefixed with their rank, and every rank exits non-zero when any
// rank had a failure.
#include <xdev/any/registry.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/distributed/axis_collectives.hpp>
#include <xdev/distributed/global_mesh.hpp>
#include <xdev/distributed/mpi.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/ops.hpp>
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/mesh.hpp>

#include "../support/error_of.hpp"
#include "../support/manual_backend.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace dist = xdev::distributed;
using ::testing::AllOf;
using ::testing::HasSubstr;

dist::Session* session = nullptr;

std::uint32_t rank() {
  return session->rank();
}
std::uint32_t size() {
  return session->world_size();
}

using xdev_test::error_of;

TEST(Init, PlacementAgreesWithMpiAndTheLauncher) {
  int r = -1;
  int n = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const dist::Placement& p = session->placement();
  EXPECT_EQ(p.rank, static_cast<std::uint32_t>(r));
  EXPECT_EQ(p.world_size, static_cast<std::uint32_t>(n));
  // mpirun on one host: every process is local.
  EXPECT_EQ(p.local_rank, p.rank);
  EXPECT_EQ(p.local_world_size, p.world_size);
  EXPECT_EQ(p.host_index, 0u);
  EXPECT_EQ(p.host_count, 1u);
  if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) {
    EXPECT_EQ(std::to_string(p.local_world_size), v);
  }
  // init configured the registry with the placement.
  EXPECT_EQ(xdev::Registry::global().placement(), (xdev::ProcessPlacement{.local_rank = p.local_rank,
                                                                          .local_world_size = p.local_world_size,
                                                                          .global_rank = p.rank,
                                                                          .global_world_size = p.world_size}));
  EXPECT_EQ(dist::Session::current(), session);
}

TEST(Init, SecondInitIsRefused) {
  const auto e = error_of([] { auto again = dist::init(); });
  EXPECT_EQ(e.condition(), xdev::errc::unavailable);
  EXPECT_THAT(e.what(), HasSubstr("a session already exists"));
}

// Open MPI's MPI_Iallreduce algorithm as libnbc will use it, read through MPI_T; -1 when this MPI
// has no such variable.
int iallreduce_algorithm() {
  int level = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &level) != MPI_SUCCESS) return -1;
  int value = -1;
  int index = -1;
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  int count = 0;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    MPI_T_cvar_read(handle, &value);
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return value;
}

// init selects libnbc's reduce-scatter + allgather MPI_Iallreduce (3) when nothing chose one; an
// algorithm the environment chose stays (distributed.mpi.algorithm_chosen_by_user sets one), and
// so does libnbc's own choice (0) with `Options::tune_collectives = false`
// (distributed.mpi.untuned, XDEV_TEST_TUNE_COLLECTIVES=0).
TEST(Init, SelectsTheBandwidthOptimalIallreduceUnlessOneWasChosen) {
  const int value = iallreduce_algorithm();
  if (value < 0) GTEST_SKIP() << "this MPI has no coll_libnbc_iallreduce_algorithm (not Open MPI)";
  const char* chosen = std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
  const char* tune = std::getenv("XDEV_TEST_TUNE_COLLECTIVES");
  if (chosen != nullptr)
    EXPECT_EQ(std::to_string(value), chosen);
  else if (tune != nullptr && std::string(tune) == "0")
    EXPECT_EQ(value, 0);
  else
    EXPECT_EQ(value, 3);
}

TEST(Barrier, Repeated) {
  for (int i = 0; i < 20; ++i) session->barrier();
  dist::barrier(std::chrono::seconds(5));  // the free function: the live session
}

TEST(Barrier, TimeoutMustBePositive) {
  const auto e = error_of([] { session->barrier(std::chrono::milliseconds(0)); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_FALSE(session->failed());
}

TEST(Rendezvous, EveryRanksBytesInRankOrder) {
  for (std::size_t round = 0; round < 3; ++round) {
    // Rank r sends r * 1000 * round bytes (rank 0 and round 0: empty) of value r + round.
    std::vector<std::byte> mine(rank() * 1000 * round, std::byte(rank() + round));
    const auto all = dist::rendezvous("round-" + std::to_string(round), mine);
    ASSERT_EQ(all.size(), size());
    for (std::uint32_t r = 0; r < size(); ++r) {
      ASSERT_EQ(all[r].size(), r * 1000 * round) << "rank " << r;
      for (std::byte b : all[r]) ASSERT_EQ(b, std::byte(r + round)) << "rank " << r;
    }
  }
}

TEST(Rendezvous, TagMismatchNamesBothTags) {
  if (size() < 2) GTEST_SKIP() << "needs a rank 1";
  const std::string tag = rank() == 1 ? "beta" : "alpha";
  const auto e = error_of([&] { session->rendezvous(tag); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("\"alpha\" on rank"), HasSubstr("\"beta\" on rank 1")));
  // Not fatal: every rank saw the same error, and the session goes on.
  EXPECT_FALSE(session->failed());
  session->barrier();
}

TEST(Broadcast, HostSpan) {
  std::vector<double> values(1000);
  std::iota(values.begin(), values.end(), 1000.0 * rank());
  dist::broadcast_master_param(std::span(values));
  for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], static_cast<double>(i)) << i;
  std::vector<int> empty;
  session->broadcast_master_param(std::span(empty));
}

TEST(Broadcast, SizeMismatchIsNamedOnEveryRank) {
  if (size() < 2) GTEST_SKIP() << "needs a rank 1";
  std::vector<float> values(rank() == 1 ? 3 : 4);
  const auto e = error_of([&] { session->broadcast_master_param(std::span(values)); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("rank 0 has 4 elements of 4 bytes (16 bytes)"),
                              HasSubstr("rank 1 has 3 elements of 4 bytes (12 bytes)")));
  EXPECT_FALSE(session->failed());
}

TEST(Broadcast, AnyArrayOnTheHostBackend) {
  const xdev::AnyDevice dev = xdev::Registry::global().devices("HOST").at(0);
  auto a = xdev::empty<float>(dev, {4, 8});
  std::vector<float> host(32, static_cast<float>(rank() + 1));
  dev.copy_to_device(std::span<const float>(host), a).get();
  dist::broadcast_master_param(a);
  std::vector<float> back(32, -1.0f);
  dev.copy_to_host(a, std::span(back)).get();
  for (float v : back) ASSERT_EQ(v, 1.0f);

  if (size() < 2) return;
  auto wrong = xdev::empty<float>(dev, rank() == 1 ? xdev::Shape{8, 4} : xdev::Shape{4, 8});
  const auto e = error_of([&] { session->broadcast_master_param(wrong); });
  EXPECT_THAT(e.what(), HasSubstr("rank 1 has an array of shape [8, 4]"));
}

TEST(Broadcast, TypedArray) {
  auto& rt = xdev::default_runtime<xdev::backends::Host>();
  auto a = xdev::empty<std::int64_t>(rt.device(0), {100});
  std::vector<std::int64_t> host(100, rank() == 0 ? 42 : -7);
  rt.device(0).copy_to_device(std::span<const std::int64_t>(host), a.buffer()).get();
  session->broadcast_master_param(a);
  std::vector<std::int64_t> back(100);
  rt.device(0).copy_to_host(a.buffer(), std::span(back)).get();
  for (auto v : back) ASSERT_EQ(v, 42);
}

// ---- GlobalMesh and all_reduce across processes ----------------------------------------------

// Eight host devices of this test's own (whatever XDEV_HOST_DEVICES says).
std::vector<xdev::AnyDevice> host_devices(std::size_t n) {
  static xdev::Runtime<xdev::backends::Host> rt(xdev::RuntimeOptions{}, xdev::backends::Host::Options{.devices = 8});
  std::vector<xdev::AnyDevice> out;
  for (std::size_t i = 0; i < n; ++i) out.emplace_back(rt.device(i));
  return out;
}

TEST(GlobalMesh, RankMajorIdsAndLabels) {
  // Rank r contributes 1 + r % 2 devices: the ranks need not have the same number.
  const std::size_t mine = 1 + rank() % 2;
  const dist::GlobalMesh mesh(*session, xdev::spmd::Mesh(host_devices(mine), "data"));
  std::size_t total = 0;
  for (std::uint32_t r = 0; r < size(); ++r) {
    EXPECT_EQ(mesh.first_index_of(r), total);
    EXPECT_EQ(mesh.size_of(r), 1 + r % 2);
    for (std::size_t i = 0; i < 1 + r % 2; ++i) {
      EXPECT_EQ(mesh.device_label(total + i), "rank " + std::to_string(r) + " / HOST:" + std::to_string(i));
      EXPECT_EQ(mesh.rank_of(total + i), r);
    }
    total += 1 + r % 2;
  }
  EXPECT_EQ(mesh.size(), total);
  EXPECT_EQ(mesh.local_size(), mine);
  EXPECT_EQ(mesh.axis_name(), "data");
  for (std::size_t i = 0; i < mine; ++i) EXPECT_EQ(mesh.global_index(i), mesh.first_index_of(rank()) + i);
  EXPECT_THAT(mesh.to_string(),
              HasSubstr("GlobalMesh(data=" + std::to_string(total) + " over " + std::to_string(size()) + " process"));
  EXPECT_THAT(mesh.to_string(), HasSubstr("rank 0 / HOST:0"));
  if (size() > 1) {
    EXPECT_THAT(mesh.to_string(), HasSubstr("rank 0 / HOST:0, rank 1 / HOST:0, rank 1 / HOST:1"));
  }
  EXPECT_EQ(error_of([&] { (void)mesh.device_label(total); }).condition(), xdev::errc::invalid_argument);
  EXPECT_EQ(error_of([&] { (void)mesh.global_index(mine); }).condition(), xdev::errc::invalid_argument);
  // The free constructor uses the live session.
  const dist::GlobalMesh again(xdev::spmd::Mesh(host_devices(mine), "data"));
  EXPECT_EQ(again.device_labels(), mesh.device_labels());
}

TEST(GlobalMesh, CopiesShareTheLayoutAndAMovedFromMeshStaysWhole) {
  // Every asynchronous collective keeps a copy of its mesh: a copy must not duplicate the layout
  // (one label per global device, the local mesh), and must outlive the original.
  auto original = std::make_unique<dist::GlobalMesh>(*session, host_devices(2), "data");
  const dist::GlobalMesh copy = *original;
  EXPECT_EQ(&copy.device_labels(), &original->device_labels()) << "the copy duplicated the labels";
  EXPECT_EQ(&copy.local_mesh(), &original->local_mesh()) << "the copy duplicated the local mesh";
  const std::vector<std::string> labels = original->device_labels();
  dist::GlobalMesh moved = std::move(*original);
  EXPECT_EQ(original->device_labels(), labels) << "a moved-from mesh lost its layout";  // NOLINT: use after move
  EXPECT_EQ(original->size(), moved.size());  // NOLINT: use after move, on purpose
  original.reset();
  EXPECT_EQ(copy.device_labels(), labels);
  EXPECT_EQ(copy.local_mesh().size(), 2u);
  // And a collective over the copy, the original gone.
  std::vector<xdev::AnyArray<float>> arrays;
  for (std::size_t i = 0; i < copy.local_size(); ++i) {
    arrays.push_back(xdev::empty<float>(copy.local_mesh().device(i), {4}));
    xdev::ops::fill(copy.local_mesh().device(i), arrays.back(), 1.0f).get();
  }
  dist::all_reduce(copy, std::span(arrays), xdev::spmd::ReduceOp::sum).get();
  std::vector<float> host(4);
  arrays[1].device().copy_to_host(arrays[1].buffer(), std::span(host)).get();
  EXPECT_EQ(host, std::vector<float>(4, static_cast<float>(copy.size())));
}

TEST(GlobalMesh, DifferentAxisNamesFailOnEveryRank) {
  if (size() < 2) GTEST_SKIP() << "needs a rank 1";
  const auto e = error_of([&] { dist::GlobalMesh mesh(*session, host_devices(1), rank() == 1 ? "batch" : "data"); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), HasSubstr("rank 1 names the axis 'batch', rank 0 'data'"));
  EXPECT_FALSE(session->failed());
}

// Global device g's input: integer-valued (exact in any order) or not.
template <class T>
std::vector<T> input_of(std::size_t g, std::size_t n, bool integers) {
  std::vector<T> v(n);
  for (std::size_t j = 0; j < n; ++j)
    v[j] = integers ? static_cast<T>(static_cast<double>((g * 37 + j * 11) % 101) - 50.0)
                    : static_cast<T>(std::sin(0.37 * static_cast<double>(g + 1) + 0.011 * static_cast<double>(j)) *
                                     (1.0 + static_cast<double>(g)));
  return v;
}

template <class T>
std::vector<T> to_host(const xdev::AnyArray<T>& a) {
  std::vector<T> v(a.size());
  a.device().copy_to_host(a.buffer(), std::span<T>(v)).get();
  return v;
}

// Runs all_reduce over a GlobalMesh of `local` devices per rank, and the same reduction over a
// single-process mesh of all the global devices' inputs; checks the results.
template <class T>
void check_against_single_process(std::size_t local, xdev::spmd::ReduceOp op, bool integers,
                                  const xdev::Shape& shape = {10, 100}) {
  const auto n = static_cast<std::size_t>(shape.numel());
  const dist::GlobalMesh mesh(*session, host_devices(local), "data");
  std::vector<xdev::AnyArray<T>> arrays;
  for (std::size_t i = 0; i < local; ++i) {
    const auto& dev = mesh.local_mesh().device(i);
    arrays.push_back(xdev::empty<T>(dev, shape));
    const auto v = input_of<T>(mesh.global_index(i), n, integers);
    dev.copy_to_device(std::span<const T>(v), arrays.back()).get();
  }
  dist::all_reduce(mesh, std::span(arrays), op).get();

  // Every local device holds the same bits.
  const std::vector<T> result = to_host(arrays[0]);
  for (std::size_t i = 1; i < local; ++i)
    ASSERT_EQ(std::memcmp(to_host(arrays[i]).data(), result.data(), n * sizeof(T)), 0);
  // Every rank holds the same bits.
  const auto all = session->rendezvous("all_reduce-result", std::as_bytes(std::span(result)));
  for (std::uint32_t r = 1; r < size(); ++r)
    ASSERT_EQ(std::memcmp(all[r].data(), all[0].data(), n * sizeof(T)), 0) << "rank " << r << " differs from rank 0";

  // The single-process mesh over as many devices (at most 8: this test's runtime).
  const std::size_t global = mesh.size();
  ASSERT_LE(global, 8u);
  const xdev::spmd::Mesh single(host_devices(global), "data");
  std::vector<xdev::AnyArray<T>> reference;
  for (std::size_t g = 0; g < global; ++g) {
    reference.push_back(xdev::empty<T>(single.device(g), shape));
    const auto v = input_of<T>(g, n, integers);
    single.device(g).copy_to_device(std::span<const T>(v), reference.back()).get();
  }
  xdev::spmd::all_reduce(single, "data", std::span(reference), op).get();
  const std::vector<T> expected = to_host(reference[0]);
  for (std::size_t j = 0; j < n; ++j) {
    if (integers) {
      ASSERT_EQ(result[j], expected[j]) << "element " << j;
    } else {
      ASSERT_NEAR(result[j], expected[j], 1e-5 * (1.0 + std::abs(static_cast<double>(expected[j])))) << "element " << j;
    }
  }
}

TEST(GlobalAllReduce, FloatEveryOpMatchesTheSingleProcessMesh) {
  // At most 8 global devices (4 with -np 2 or 4: products of four integers in [-50, 50] are exact).
  const std::size_t local = size() <= 2 ? 2 : 1;
  for (bool integers : {true, false})
    for (auto op : {xdev::spmd::ReduceOp::sum, xdev::spmd::ReduceOp::mean, xdev::spmd::ReduceOp::min,
                    xdev::spmd::ReduceOp::max, xdev::spmd::ReduceOp::prod}) {
      SCOPED_TRACE(::testing::Message() << "op " << static_cast<int>(op) << (integers ? ", integers" : ""));
      check_against_single_process<float>(local, op, integers);
    }
}

TEST(GlobalAllReduce, DoubleAndOneDevicePerRank) {
  for (bool integers : {true, false}) {
    check_against_single_process<double>(1, xdev::spmd::ReduceOp::sum, integers);
    check_against_single_process<double>(2, xdev::spmd::ReduceOp::mean, integers);
  }
}

// ---- GlobalMesh with several axes --------------------------------------------------------------

TEST(GlobalMeshAxes, ShapeNamesCoordinatesAndPrinting) {
  const auto w = static_cast<std::int64_t>(size());
  const dist::GlobalMesh mesh(*session, host_devices(2), {w, 2}, {"host", "local"});
  EXPECT_EQ(mesh.ndim(), 2u);
  EXPECT_EQ(mesh.shape(), (std::vector<std::int64_t>{w, 2}));
  EXPECT_EQ(mesh.axis_names(), (std::vector<std::string>{"host", "local"}));
  EXPECT_EQ(mesh.axis_size("local"), 2);
  EXPECT_EQ(mesh.size(), 2 * size());
  EXPECT_EQ(mesh.local_size(), 2u);
  // Rank r's devices are host = r, local = 0 and 1.
  EXPECT_EQ(mesh.coords(mesh.global_index(1)), (std::vector<std::int64_t>{rank(), 1}));
  EXPECT_THAT(mesh.to_string(), HasSubstr("GlobalMesh(host=" + std::to_string(w) + ", local=2 over "));
  EXPECT_EQ(error_of([&] { (void)mesh.axis_name(); }).condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(error_of([&] { (void)mesh.axis_size("data"); }).what(),
              HasSubstr("no axis 'data'; its axes are host=" + std::to_string(w) + ", local=2"));
  // A one-axis mesh answers the same questions.
  const dist::GlobalMesh flat(*session, host_devices(2), "data");
  EXPECT_EQ(flat.axis_names(), (std::vector<std::string>{"data"}));
  EXPECT_EQ(flat.shape(), (std::vector<std::int64_t>{2 * w}));
  EXPECT_EQ(flat.coords(1), (std::vector<std::int64_t>{1}));
}

TEST(GlobalMeshAxes, ALayoutThatIsWrongAnywhereFailsOnEveryRankNamingIt) {
  const auto w = static_cast<std::int64_t>(size());
  auto e = error_of([&] { dist::GlobalMesh mesh(*session, host_devices(2), {w, 3}, {"host", "local"}); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), HasSubstr("the shape (host=" + std::to_string(w) + ", local=3) holds " + std::to_string(3 * w) +
                                  " devices, but the ranks contribute " + std::to_string(2 * w) + " (rank 0: 2"));
  // A problem on the last rank alone still fails every rank.
  const bool last = rank() + 1 == size();
  e = error_of([&] {
    dist::GlobalMesh mesh(*session, host_devices(2), {w, 2},
                          last ? std::vector<std::string>{"host", "host"} : std::vector<std::string>{"host", "local"});
  });
  EXPECT_THAT(e.what(), HasSubstr("rank " + std::to_string(size() - 1) + ": axis name 'host' is used twice"));
  e = error_of([&] { dist::GlobalMesh mesh(*session, host_devices(2), {2 * w}, {"a", "b"}); });
  EXPECT_THAT(e.what(), HasSubstr("the shape has 1 extents but 2 axis names"));
  if (size() > 1) {
    e = error_of([&] {
      dist::GlobalMesh mesh(*session, host_devices(2),
                            last ? std::vector<std::int64_t>{2 * w, 1} : std::vector<std::int64_t>{w, 2},
                            {"host", "local"});
    });
    EXPECT_THAT(e.what(), HasSubstr("rank " + std::to_string(size() - 1) +
                                    " lays the mesh out as shape (host=" + std::to_string(2 * w) +
                                    ", local=1), rank 0 as shape (host=" + std::to_string(w) + ", local=2)"));
    e = error_of([&] {
      if (last)
        dist::GlobalMesh mesh(*session, host_devices(2), "host");
      else
        dist::GlobalMesh mesh(*session, host_devices(2), {w, 2}, {"host", "local"});
    });
    EXPECT_THAT(e.what(), HasSubstr("as axis 'host', rank 0 as shape (host="));
  }
  EXPECT_FALSE(session->failed());
}

// all_reduce over every set of axes of a GlobalMesh of `shape`, `names` with `local` devices per
// rank, against spmd::all_reduce over the same axes of a single-process mesh of as many devices.
template <class T>
void check_axes_against_single_process(const std::vector<std::int64_t>& shape, const std::vector<std::string>& names,
                                       std::size_t local, xdev::spmd::ReduceOp op, bool integers) {
  const xdev::Shape array_shape{4, 25};
  const std::size_t n = 100;
  const dist::GlobalMesh mesh(*session, host_devices(local), shape, names);
  const std::size_t global = mesh.size();
  ASSERT_LE(global, 8u);
  const xdev::spmd::Mesh single(host_devices(global), shape, names);
  for (std::uint32_t mask = 1; mask < (1u << names.size()); ++mask) {
    std::vector<std::string> axes;
    for (std::size_t a = 0; a < names.size(); ++a)
      if ((mask >> a) & 1u) axes.push_back(names[a]);
    SCOPED_TRACE(::testing::Message() << "over " << ::testing::PrintToString(axes));
    std::vector<xdev::AnyArray<T>> arrays;
    for (std::size_t i = 0; i < local; ++i) {
      const auto& dev = mesh.local_mesh().device(i);
      arrays.push_back(xdev::empty<T>(dev, array_shape));
      const auto v = input_of<T>(mesh.global_index(i), n, integers);
      dev.copy_to_device(std::span<const T>(v), arrays.back()).get();
    }
    dist::all_reduce(mesh, std::span<const std::string>(axes), std::span(arrays), op).get();

    std::vector<xdev::AnyArray<T>> reference;
    for (std::size_t g = 0; g < global; ++g) {
      reference.push_back(xdev::empty<T>(single.device(g), array_shape));
      const auto v = input_of<T>(g, n, integers);
      single.device(g).copy_to_device(std::span<const T>(v), reference.back()).get();
    }
    xdev::spmd::all_reduce(single, std::span<const std::string>(axes), std::span(reference), op).get();
    for (std::size_t i = 0; i < local; ++i) {
      const std::vector<T> got = to_host(arrays[i]);
      const std::vector<T> want = to_host(reference[mesh.global_index(i)]);
      for (std::size_t j = 0; j < n; ++j) {
        if (integers)
          ASSERT_EQ(got[j], want[j]) << "local device " << i << ", element " << j;
        else
          ASSERT_NEAR(got[j], want[j], 1e-5 * (1.0 + std::abs(static_cast<double>(want[j]))))
              << "local device " << i << ", element " << j;
      }
    }
  }
}

enum class Collective { all_gather, reduce_scatter, broadcast, reduce, all_to_all, collective_permute };

// `collective` over `axes` (in the order given) of a GlobalMesh of `shape`, `names` with 2 devices
// per rank, against spmd's over a single-process mesh of as many devices.
void check_over_axes_against_single_process(Collective collective, const std::vector<std::int64_t>& shape,
                                            const std::vector<std::string>& names,
                                            const std::vector<std::string>& axes) {
  SCOPED_TRACE(::testing::Message() << "collective " << static_cast<int>(collective) << ", shape "
                                    << ::testing::PrintToString(shape) << " over " << ::testing::PrintToString(axes));
  const std::size_t local = 2;
  const dist::GlobalMesh mesh(*session, host_devices(local), shape, names);
  const std::size_t global = mesh.size();
  ASSERT_LE(global, 8u);
  const xdev::spmd::Mesh single(host_devices(global), shape, names);
  std::int64_t k = 1;
  for (const auto& a : axes) k *= mesh.axis_size(a);
  xdev::Shape in_shape{3, 4}, out_shape{3, 4};
  if (collective == Collective::all_gather) out_shape = {3 * k, 4};
  if (collective == Collective::reduce_scatter) in_shape = {3 * k, 4};
  if (collective == Collective::all_to_all) in_shape = {2 * k, 3}, out_shape = {2, 3 * k};
  const bool in_place = collective == Collective::broadcast || collective == Collective::reduce;
  const std::int64_t root = k - 1;
  xdev::spmd::PermutePairs pairs;  // a shift by one, position 0 receiving nothing
  for (std::int64_t p = 0; p + 1 < k; ++p) pairs.push_back({p, p + 1});
  auto filled = [](const xdev::AnyDevice& dev, const xdev::Shape& s, std::size_t g) {
    auto a = xdev::empty<std::int32_t>(dev, s);
    const auto v = input_of<std::int32_t>(g, static_cast<std::size_t>(s.numel()), true);
    dev.copy_to_device(std::span<const std::int32_t>(v), a).get();
    return a;
  };
  std::vector<xdev::AnyArray<std::int32_t>> in, out, ref_in, ref_out;
  for (std::size_t i = 0; i < local; ++i) {
    const auto& dev = mesh.local_mesh().device(i);
    in.push_back(filled(dev, in_shape, mesh.global_index(i)));
    out.push_back(filled(dev, out_shape, 100 + mesh.global_index(i)));  // overwritten (or not) by the call
  }
  for (std::size_t g = 0; g < global; ++g) {
    ref_in.push_back(filled(single.device(g), in_shape, g));
    ref_out.push_back(filled(single.device(g), out_shape, 100 + g));
  }
  const std::span<const std::string> over(axes);
  const std::span<const xdev::AnyArray<std::int32_t>> cin(in), cref(ref_in);
  const auto sum = xdev::spmd::ReduceOp::sum;
  switch (collective) {
    case Collective::all_gather:
      dist::all_gather(mesh, over, cin, std::span(out)).get();
      xdev::spmd::all_gather(single, over, cref, std::span(ref_out)).get();
      break;
    case Collective::reduce_scatter:
      dist::reduce_scatter(mesh, over, cin, std::span(out), sum).get();
      xdev::spmd::reduce_scatter(single, over, cref, std::span(ref_out), sum).get();
      break;
    case Collective::broadcast:
      dist::broadcast(mesh, over, std::span(in), root).get();
      xdev::spmd::broadcast(single, over, std::span(ref_in), root).get();
      break;
    case Collective::reduce:
      dist::reduce(mesh, over, std::span(in), sum, root).get();
      xdev::spmd::reduce(single, over, std::span(ref_in), sum, root).get();
      break;
    case Collective::all_to_all:
      dist::all_to_all(mesh, over, cin, std::span(out), 0, 1).get();
      xdev::spmd::all_to_all(single, over, cref, std::span(ref_out), 0, 1).get();
      break;
    case Collective::collective_permute:
      dist::collective_permute(mesh, over, cin, std::span(out), pairs).get();
      xdev::spmd::collective_permute(single, over, cref, std::span(ref_out), pairs).get();
      break;
  }
  for (std::size_t i = 0; i < local; ++i) {
    const std::size_t g = mesh.global_index(i);
    if (in_place)
      ASSERT_EQ(to_host(in[i]), to_host(ref_in[g])) << "local device " << i;
    else
      ASSERT_EQ(to_host(out[i]), to_host(ref_out[g])) << "local device " << i;
  }
}

TEST(GlobalCollectivesAxes, EveryCollectiveMatchesTheSingleProcessMeshInTheOrderTheAxesAreNamed) {
  const auto w = static_cast<std::int64_t>(size());
  for (auto collective : {Collective::all_gather, Collective::reduce_scatter, Collective::broadcast, Collective::reduce,
                          Collective::all_to_all, Collective::collective_permute})
    for (const auto& [shape, names] :
         {std::pair{std::vector<std::int64_t>{w, 2}, std::vector<std::string>{"host", "local"}},
          std::pair{std::vector<std::int64_t>{2, w}, std::vector<std::string>{"x", "y"}}}) {
      check_over_axes_against_single_process(collective, shape, names, {names[0]});
      check_over_axes_against_single_process(collective, shape, names, {names[1]});
      check_over_axes_against_single_process(collective, shape, names, {names[1], names[0]});  // reordered
      check_over_axes_against_single_process(collective, shape, names, {names[0], names[1]});  // every device
    }
}

TEST(GlobalCollectivesAxes, ShapeErrorsNameTheGroupSize) {
  const auto w = static_cast<std::int64_t>(size());
  const dist::GlobalMesh mesh(*session, host_devices(2), {w, 2}, {"host", "local"});
  std::vector<xdev::AnyArray<float>> in, out;
  for (std::size_t i = 0; i < 2; ++i) {
    in.push_back(xdev::empty<float>(mesh.local_mesh().device(i), {3, 4}));
    out.push_back(xdev::empty<float>(mesh.local_mesh().device(i), {3, 4}));
  }
  const std::span<const xdev::AnyArray<float>> cin(in);
  auto e = error_of([&] { dist::all_gather(mesh, "local", cin, std::span(out)).get(); });
  EXPECT_THAT(e.what(), HasSubstr("gathering 2 inputs of shape [3, 4] gives [6, 4]"));
  e = error_of([&] { dist::reduce_scatter(mesh, "local", cin, std::span(out), xdev::spmd::ReduceOp::sum).get(); });
  EXPECT_THAT(e.what(), HasSubstr("must be divisible by 2"));
  e = error_of([&] { dist::all_gather(mesh, {"local", "local"}, cin, std::span(out)).get(); });
  EXPECT_THAT(e.what(), HasSubstr("distributed::all_gather: axis 'local' is named twice"));
  e = error_of([&] { dist::broadcast(mesh, "local", std::span(out), 2).get(); });
  EXPECT_THAT(e.what(), HasSubstr("root 2 is not a position in a group; groups over these axes have 2 devices"));
  e = error_of([&] { dist::reduce(mesh, "local", std::span(out), xdev::spmd::ReduceOp::sum, -1).get(); });
  EXPECT_THAT(e.what(), HasSubstr("root -1 is not a position in a group"));
  e = error_of([&] { dist::all_to_all(mesh, "local", cin, std::span(out), 0, 1).get(); });
  EXPECT_THAT(e.what(), HasSubstr("is not divisible by the group size 2"));
  e = error_of([&] {
    dist::collective_permute(mesh, "local", cin, std::span(out), xdev::spmd::PermutePairs{{0, 2}}).get();
  });
  EXPECT_THAT(e.what(), HasSubstr("pair (0, 2) is out of range"));
  EXPECT_FALSE(session->failed());
}

TEST(GlobalAllReduceAxes, EverySetOfAxesMatchesTheSingleProcessMesh) {
  const auto w = static_cast<std::int64_t>(size());
  using Op = xdev::spmd::ReduceOp;
  // Processes by local devices; then (2, w) over 2 devices per rank, where with 4 ranks axis "y"
  // spans pairs of processes (a sub-communicator each) and "x" joins ranks 0 and 2, 1 and 3.
  for (const auto& [shape, names] :
       {std::pair{std::vector<std::int64_t>{w, 2}, std::vector<std::string>{"host", "local"}},
        std::pair{std::vector<std::int64_t>{2, w}, std::vector<std::string>{"x", "y"}}}) {
    SCOPED_TRACE(::testing::Message() << "shape " << ::testing::PrintToString(shape));
    check_axes_against_single_process<std::int32_t>(shape, names, 2, Op::sum, true);
    check_axes_against_single_process<std::int32_t>(shape, names, 2, Op::max, true);
    check_axes_against_single_process<float>(shape, names, 2, Op::mean, false);
    check_axes_against_single_process<double>(shape, names, 2, Op::min, false);
  }
  // Three axes over one device per process (2 and 4 ranks), the last axis of extent 1.
  if (w % 2 == 0) check_axes_against_single_process<float>({2, w / 2, 1}, {"a", "b", "c"}, 1, Op::sum, true);
}

TEST(GlobalAllReduceAxes, ArgumentErrorsAreThrownBeforeAnythingStarts) {
  const auto w = static_cast<std::int64_t>(size());
  const dist::GlobalMesh mesh(*session, host_devices(2), {w, 2}, {"host", "local"});
  std::vector<xdev::AnyArray<float>> arrays;
  for (std::size_t i = 0; i < 2; ++i) arrays.push_back(xdev::empty<float>(mesh.local_mesh().device(i), {4}));
  auto e = error_of([&] { dist::all_reduce(mesh, "data", std::span(arrays), xdev::spmd::ReduceOp::sum).get(); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), HasSubstr("distributed::all_reduce: GlobalMesh has no axis 'data'"));
  e = error_of([&] { dist::all_reduce(mesh, {"host", "host"}, std::span(arrays), xdev::spmd::ReduceOp::sum).get(); });
  EXPECT_THAT(e.what(), HasSubstr("axis 'host' is named twice"));
  e = error_of([&] {
    dist::all_reduce(mesh, std::span<const std::string>(), std::span(arrays), xdev::spmd::ReduceOp::sum).get();
  });
  EXPECT_THAT(e.what(), HasSubstr("no axis was given; name at least one of the mesh's axes (host="));
  e = error_of([&] { dist::all_reduce(mesh, "host", std::span(arrays).first(1), xdev::spmd::ReduceOp::sum).get(); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  std::vector<xdev::AnyArray<int>> ints;
  for (std::size_t i = 0; i < 2; ++i) ints.push_back(xdev::empty<int>(mesh.local_mesh().device(i), {4}));
  e = error_of([&] { dist::all_reduce(mesh, "host", std::span(ints), xdev::spmd::ReduceOp::mean).get(); });
  EXPECT_THAT(e.what(), HasSubstr("ReduceOp::mean needs floating-point elements"));
  // Nothing started anywhere: the next collective over the mesh works on every rank.
  dist::all_reduce(mesh, "host", std::span(arrays), xdev::spmd::ReduceOp::sum).get();
  EXPECT_FALSE(session->failed());
}

TEST(GlobalAllReduceAxes, ALayoutThatSplitsARanksGroupsAcrossProcessSetsIsRefusedOnEveryRank) {
  if (size() != 2) GTEST_SKIP() << "a layout of 2 ranks";
  // Rank 0 holds three devices and rank 1 one, shape (2, 2): over "b" rank 0's groups are {0, 1}
  // (its own) and {2, 3} (with rank 1); over both axes the mesh is one group.
  const std::size_t local = rank() == 0 ? 3 : 1;
  const dist::GlobalMesh mesh(*session, host_devices(local), {2, 2}, {"a", "b"});
  std::vector<xdev::AnyArray<float>> arrays;
  for (std::size_t i = 0; i < local; ++i) {
    arrays.push_back(xdev::empty<float>(mesh.local_mesh().device(i), {3}));
    const std::vector<float> v(3, static_cast<float>(mesh.global_index(i) + 1));
    mesh.local_mesh().device(i).copy_to_device(std::span<const float>(v), arrays.back()).get();
  }
  const auto e = error_of([&] { dist::all_reduce(mesh, "b", std::span(arrays), xdev::spmd::ReduceOp::sum).get(); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(),
              HasSubstr("rank 0 holds devices of groups that span different sets of processes ({0} and {0, 1})"));
  dist::all_reduce(mesh, {"a", "b"}, std::span(arrays), xdev::spmd::ReduceOp::sum).get();
  EXPECT_EQ(to_host(arrays[0]), std::vector<float>(3, 10.0f));  // 1 + 2 + 3 + 4
  EXPECT_FALSE(session->failed());
}

// From 1 MiB with several local devices the local reduce and the MPI step are pipelined (pieces
// of rows): the same results, on host memory in place and through staging alike.
TEST(GlobalAllReduce, ALargeArrayOverSeveralLocalDevicesIsPipelinedWithTheSameResult) {
  const std::size_t local = size() <= 2 ? 2 : 1;
  for (auto op : {xdev::spmd::ReduceOp::sum, xdev::spmd::ReduceOp::mean, xdev::spmd::ReduceOp::max})
    check_against_single_process<float>(local, op, true, {64, 4099});
  check_against_single_process<double>(local, xdev::spmd::ReduceOp::sum, false, {5, 70001});
  check_against_single_process<std::int32_t>(2, xdev::spmd::ReduceOp::sum, true, {300000});
}

// Asynchronous: collectives started back to back, with futures and a callback token, each complete
// with its own result (they run one after another on the session's collectives thread).
TEST(GlobalAllReduce, TakesCompletionTokensAndRunsCollectivesInTheOrderStarted) {
  const dist::GlobalMesh mesh(*session, host_devices(2), "data");
  const auto global = static_cast<float>(mesh.size());
  std::vector<std::vector<xdev::AnyArray<float>>> sets(3);
  for (std::size_t k = 0; k < sets.size(); ++k)
    for (std::size_t i = 0; i < 2; ++i) {
      const auto& dev = mesh.local_mesh().device(i);
      sets[k].push_back(xdev::empty<float>(dev, {64}));
      xdev::ops::fill(dev, sets[k].back(), static_cast<float>(k + 1)).get();
    }
  std::promise<void> second;
  auto f0 = dist::all_reduce(mesh, std::span(sets[0]), xdev::spmd::ReduceOp::sum);
  dist::all_reduce(mesh, std::span(sets[1]), xdev::spmd::ReduceOp::sum, std::nullopt,
                   [&](std::exception_ptr ep) { ep ? second.set_exception(ep) : second.set_value(); });
  auto f2 = dist::all_reduce(mesh, std::span(sets[2]), xdev::spmd::ReduceOp::max);
  f0.get();
  second.get_future().get();
  f2.get();
  EXPECT_EQ(to_host(sets[0][1]), std::vector<float>(64, 1.0f * global));
  EXPECT_EQ(to_host(sets[1][0]), std::vector<float>(64, 2.0f * global));
  EXPECT_EQ(to_host(sets[2][1]), std::vector<float>(64, 3.0f));
}

// A collective reads the device's memory once the work submitted before the call has run: a fill
// queued behind a slow task, not waited for, is what every rank reduces. Once with the collective
// run by its waiter, once on the collectives thread (a callback).
TEST(GlobalAllReduce, ReducesWhatTheWorkSubmittedBeforeTheCallWrote) {
  const dist::GlobalMesh mesh(*session, host_devices(1), "data");
  const auto& dev = mesh.local_mesh().device(0);
  const auto global = static_cast<float>(mesh.size());
  for (const bool callback : {false, true}) {
    SCOPED_TRACE(callback ? "callback" : "future");
    std::vector<xdev::AnyArray<float>> a;
    a.push_back(xdev::empty<float>(dev, {64}));
    xdev::ops::fill(dev, a[0], 0.0f).get();
    auto slow = dev.execute([] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
    auto filled = xdev::ops::fill(dev, a[0], 2.0f);  // queued behind the slow task
    if (callback) {
      std::promise<void> done;
      dist::all_reduce(mesh, std::span(a), xdev::spmd::ReduceOp::sum, std::nullopt,
                       [&](std::exception_ptr ep) { ep ? done.set_exception(ep) : done.set_value(); });
      done.get_future().get();
    } else {
      dist::all_reduce(mesh, std::span(a), xdev::spmd::ReduceOp::sum).get();
    }
    slow.get();
    filled.get();
    EXPECT_EQ(to_host(a[0]), std::vector<float>(64, 2.0f * global));
  }
}

// Collectives are left to the thread that waits for their future, which then runs them and every
// collective started before them, in order (see Session::post_awaited). Waited for in the reverse
// order, from other threads, through get, wait and a shared future, small ones mixed with a large
// one (which the collectives thread starts sooner when nobody waits) and a callback (the
// collectives thread's): every one completes with its own result.
TEST(GlobalAllReduce, SmallCollectivesWaitedForOutOfOrderFromOtherThreadsRunInTheOrderStarted) {
  const dist::GlobalMesh mesh(*session, host_devices(1), "data");
  const auto& dev = mesh.local_mesh().device(0);
  const auto global = static_cast<float>(mesh.size());
  constexpr std::size_t calls = 24;
  constexpr std::int64_t small = 256;
  constexpr std::int64_t large = (std::int64_t{1} << 20) / 4;  // 1 MiB: past prompt_from_bytes
  for (int round = 0; round < 3; ++round) {
    std::vector<xdev::AnyArray<float>> arrays;
    for (std::size_t k = 0; k < calls; ++k) {
      arrays.push_back(xdev::empty<float>(dev, {k == 5 ? large : small}));
      xdev::ops::fill(dev, arrays.back(), static_cast<float>(k + 1)).get();
    }
    std::vector<xdev::Future<void>> futures(calls);
    std::promise<void> callback_done;
    for (std::size_t k = 0; k < calls; ++k) {
      std::span<xdev::AnyArray<float>> one(&arrays[k], 1);
      // Max, then sum: run out of order, the second would read the other's input.
      if (k == 7)
        dist::all_reduce(mesh, one, xdev::spmd::ReduceOp::sum, std::nullopt, [&](std::exception_ptr ep) {
          ep ? callback_done.set_exception(ep) : callback_done.set_value();
        });
      else
        futures[k] = dist::all_reduce(mesh, one, k % 2 == 0 ? xdev::spmd::ReduceOp::sum : xdev::spmd::ReduceOp::max);
    }
    std::vector<std::thread> waiters;
    for (std::size_t t = 0; t < 3; ++t)
      waiters.emplace_back([&, t] {
        for (std::size_t k = calls; k-- > 0;) {
          if (k % 3 != t || k == 7) continue;
          if (k % 4 == 1)
            futures[k].wait();
          else if (k % 4 == 3)
            futures[k].share().get();
          else
            futures[k].get();
        }
      });
    for (auto& w : waiters) w.join();
    callback_done.get_future().get();
    for (std::size_t k = 0; k < calls; ++k) {
      const float in = static_cast<float>(k + 1);
      const float want = (k % 2 == 0 || k == 7) ? in * global : in;
      EXPECT_EQ(to_host(arrays[k]), std::vector<float>(arrays[k].size(), want)) << "call " << k << ", round " << round;
    }
  }
}

// A collective whose future is held while the program does other work (and never waited on
// with get or wait, which would run it on the waiting thread) is started by the collectives
// thread, small or large, on every rank; each completes with its result.
TEST(GlobalAllReduce, CollectivesWhoseFuturesAreHeldCompleteWithoutTheirWaiter) {
  const dist::GlobalMesh mesh(*session, host_devices(1), "data");
  const auto& dev = mesh.local_mesh().device(0);
  const auto global = static_cast<float>(mesh.size());
  for (const std::int64_t n : {std::int64_t{256}, (std::int64_t{1} << 20) / 4}) {
    std::vector<xdev::AnyArray<float>> a;
    a.push_back(xdev::empty<float>(dev, {n}));
    xdev::ops::fill(dev, a[0], 3.0f).get();
    auto f = dist::all_reduce(mesh, std::span(a), xdev::spmd::ReduceOp::sum);
    // std::future's wait_for, which does not run the collective here.
    ASSERT_EQ(static_cast<std::future<void>&>(f).wait_for(std::chrono::seconds(60)), std::future_status::ready)
        << n << " floats";
    f.get();
    EXPECT_EQ(to_host(a[0]), std::vector<float>(static_cast<std::size_t>(n), 3.0f * global)) << n << " floats";
  }
}

TEST(GlobalAllReduce, ShapeMismatchAcrossRanksFailsOnEveryRank) {
  if (size() < 2) GTEST_SKIP() << "needs a rank 1";
  const dist::GlobalMesh mesh(*session, host_devices(1), "data");
  std::vector<xdev::AnyArray<float>> a;
  a.push_back(xdev::empty<float>(mesh.local_mesh().device(0), {rank() == 1 ? 3 : 4}));
  const auto e = error_of([&] { dist::all_reduce(mesh, std::span(a), xdev::spmd::ReduceOp::sum).get(); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(),
              AllOf(HasSubstr("distributed::all_reduce: rank 0 has 4 elements"), HasSubstr("rank 1 has 3 elements")));
  EXPECT_FALSE(session->failed());
}

TEST(GlobalAllReduce, HostSpan) {
  std::vector<std::int64_t> v(100, rank() + 1);
  dist::all_reduce(std::span(v), MPI_SUM);
  for (auto x : v) ASSERT_EQ(x, static_cast<std::int64_t>(size()) * (size() + 1) / 2);
}

// Each call's terms go to every other rank as a point-to-point message: a run of calls whose terms
// change from one to the next (sizes, kinds) must check each call against the same call on the
// other ranks, never against an earlier or later one (that would throw invalid_argument here).
TEST(GlobalAllReduce, ARunOfCallsWithChangingTermsAgreesCallByCall) {
  for (int i = 0; i < 40; ++i) {
    std::vector<std::int32_t> v(static_cast<std::size_t>(i % 7 + 1), rank() + i);
    dist::all_reduce(std::span(v), MPI_SUM);
    const auto n = static_cast<std::int32_t>(size());
    for (auto x : v) ASSERT_EQ(x, n * (n - 1) / 2 + n * i) << "call " << i;
    if (i % 3 == 0) {
      std::vector<double> b(static_cast<std::size_t>(i + 1), rank() == 0 ? 1.0 * i : -1.0);
      dist::broadcast_master_param(std::span(b));
      for (auto x : b) ASSERT_EQ(x, 1.0 * i) << "call " << i;
    }
  }
  EXPECT_FALSE(session->failed());
}

// Up to DeadlineEngine::blocking_all_reduce_bytes the reduction is the blocking MPI_Allreduce, above
// it MPI_Iallreduce polled to the deadline: both sides of the limit, with values that differ per
// element and rank (a piece left unreduced or reduced twice shows).
TEST(GlobalAllReduce, HostSpanOnEitherSideOfTheBlockingLimit) {
  constexpr std::size_t limit = dist::detail::DeadlineEngine::blocking_all_reduce_bytes / sizeof(std::int32_t);
  const auto n = static_cast<std::int32_t>(size());
  for (const std::size_t count : {limit, limit + 1}) {
    std::vector<std::int32_t> v(count);
    for (std::size_t i = 0; i < count; ++i)
      v[i] = static_cast<std::int32_t>(i % 1000) * static_cast<std::int32_t>(rank() + 1);
    dist::all_reduce(std::span(v), MPI_SUM);
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(v[i], static_cast<std::int32_t>(i % 1000) * n * (n + 1) / 2) << "element " << i << " of " << count;
  }
}

// ---- all_gather, reduce_scatter and broadcast across processes ------------------------------------

// Devices whose memory is not host memory (copies complete inline): the staged paths.
std::vector<xdev::AnyDevice> manual_devices(std::size_t n) {
  static xdev::Runtime<xdev_test::ManualBackend> rt({}, 4, xdev_test::ManualBackend::Mode::inline_completion);
  std::vector<xdev::AnyDevice> out;
  for (std::size_t i = 0; i < n; ++i) out.emplace_back(rt.device(i));
  return out;
}

// One array of `shape` per local device of `mesh`, holding `fill(global index)`.
template <class T, class Fill>
std::vector<xdev::AnyArray<T>> local_arrays(const dist::GlobalMesh& mesh, const xdev::Shape& shape, Fill fill) {
  std::vector<xdev::AnyArray<T>> out;
  for (std::size_t i = 0; i < mesh.local_size(); ++i) {
    const auto& dev = mesh.local_mesh().device(i);
    out.push_back(xdev::empty<T>(dev, shape));
    const std::vector<T> v = fill(mesh.global_index(i));
    dev.copy_to_device(std::span<const T>(v), out.back()).get();
  }
  return out;
}

// A vector of the one array `a` (arrays are move-only: no initializer lists).
template <class T>
std::vector<xdev::AnyArray<T>> just(xdev::AnyArray<T> a) {
  std::vector<xdev::AnyArray<T>> v;
  v.push_back(std::move(a));
  return v;
}

// The local devices of the collectives below: host or manual, and 1 + rank % 2 of them (ranks
// need not have the same number).
std::vector<xdev::AnyDevice> devices_for(bool host) {
  const std::size_t n = size() <= 2 ? 1 + rank() % 2 : 1;
  return host ? host_devices(n) : manual_devices(n);
}

TEST(GlobalCollectives, AllGatherConcatenatesInGlobalOrder) {
  for (bool host : {true, false}) {
    SCOPED_TRACE(host ? "host memory" : "staged");
    const dist::GlobalMesh mesh(*session, devices_for(host), "data");
    const auto g_count = static_cast<std::int64_t>(mesh.size());
    const auto in = local_arrays<float>(mesh, {2, 3}, [](std::size_t g) { return input_of<float>(g, 6, false); });
    std::vector<xdev::AnyArray<float>> out;
    for (std::size_t i = 0; i < mesh.local_size(); ++i)
      out.push_back(xdev::empty<float>(mesh.local_mesh().device(i), {2 * g_count, 3}));
    dist::all_gather(mesh, std::span<const xdev::AnyArray<float>>(in), std::span(out)).get();
    std::vector<float> expected;
    for (std::size_t g = 0; g < mesh.size(); ++g) {
      const auto v = input_of<float>(g, 6, false);
      expected.insert(expected.end(), v.begin(), v.end());
    }
    for (const auto& o : out) ASSERT_EQ(to_host(o), expected);
  }
}

TEST(GlobalCollectives, ReduceScatterMatchesTheSingleProcessMesh) {
  for (bool host : {true, false})
    for (auto op : {xdev::spmd::ReduceOp::sum, xdev::spmd::ReduceOp::mean, xdev::spmd::ReduceOp::min,
                    xdev::spmd::ReduceOp::max, xdev::spmd::ReduceOp::prod}) {
      SCOPED_TRACE(::testing::Message() << (host ? "host memory" : "staged") << ", op " << static_cast<int>(op));
      const dist::GlobalMesh mesh(*session, devices_for(host), "data");
      const std::size_t global = mesh.size();
      const xdev::Shape shape{static_cast<std::int64_t>(4 * global), 5};
      const std::size_t n = 20 * global;
      const auto in = local_arrays<double>(mesh, shape, [&](std::size_t g) { return input_of<double>(g, n, true); });
      std::vector<xdev::AnyArray<double>> out;
      for (std::size_t i = 0; i < mesh.local_size(); ++i)
        out.push_back(xdev::empty<double>(mesh.local_mesh().device(i), {4, 5}));
      dist::reduce_scatter(mesh, std::span<const xdev::AnyArray<double>>(in), std::span(out), op).get();

      // The single-process mesh over as many devices (integer-valued data: exact in any order).
      const xdev::spmd::Mesh single(host_devices(global), "data");
      std::vector<xdev::AnyArray<double>> ref_in;
      std::vector<xdev::AnyArray<double>> ref_out;
      for (std::size_t g = 0; g < global; ++g) {
        ref_in.push_back(xdev::empty<double>(single.device(g), shape));
        const auto v = input_of<double>(g, n, true);
        single.device(g).copy_to_device(std::span<const double>(v), ref_in.back()).get();
        ref_out.push_back(xdev::empty<double>(single.device(g), {4, 5}));
      }
      xdev::spmd::reduce_scatter(single, "data", std::span<const xdev::AnyArray<double>>(ref_in), std::span(ref_out),
                                 op)
          .get();
      for (std::size_t i = 0; i < mesh.local_size(); ++i)
        ASSERT_EQ(to_host(out[i]), to_host(ref_out[mesh.global_index(i)])) << "local device " << i;
    }
}

TEST(GlobalCollectives, AllReduceThroughStagedMemory) {
  const dist::GlobalMesh mesh(*session, devices_for(false), "data");
  auto arrays = local_arrays<float>(mesh, {6}, [](std::size_t g) { return input_of<float>(g, 6, true); });
  dist::all_reduce(mesh, std::span(arrays), xdev::spmd::ReduceOp::sum).get();
  std::vector<float> expected(6, 0.0f);
  for (std::size_t g = 0; g < mesh.size(); ++g) {
    const auto v = input_of<float>(g, 6, true);
    for (std::size_t j = 0; j < 6; ++j) expected[j] += v[j];
  }
  for (const auto& a : arrays) ASSERT_EQ(to_host(a), expected);
}

// The pipelined all_reduce (from 1 MiB over several local devices) through staged memory: each
// piece of rows copied to the host, reduced across the processes and copied back. With 2 ranks
// they hold 1 and 2 devices: the rank of one device cuts the array as the other does.
TEST(GlobalCollectives, ALargeAllReduceThroughStagedMemoryIsPipelined) {
  for (bool host : {false, true}) {
    SCOPED_TRACE(host ? "host memory" : "staged");
    const dist::GlobalMesh mesh(*session, devices_for(host), "data");
    constexpr std::size_t n = 8 * 40000;
    auto arrays = local_arrays<float>(mesh, {8, 40000}, [](std::size_t g) { return input_of<float>(g, n, true); });
    dist::all_reduce(mesh, std::span(arrays), xdev::spmd::ReduceOp::sum).get();
    std::vector<float> expected(n, 0.0f);
    for (std::size_t g = 0; g < mesh.size(); ++g) {
      const auto v = input_of<float>(g, n, true);
      for (std::size_t j = 0; j < n; ++j) expected[j] += v[j];
    }
    for (const auto& a : arrays) ASSERT_EQ(to_host(a), expected);
  }
}

// A local device that never completes its copy: the collective fails on this rank at its
// deadline, naming the copy, before it enters MPI (so the session stays usable); the copy that
// completes afterwards writes into memory that is still alive. Singleton run only: with peers,
// they would then miss their deadline and the job would abort, by design.
TEST(GlobalCollectives, AStalledLocalCopyMissesTheDeadlineNamingIt) {
  if (size() != 1) GTEST_SKIP() << "the singleton run checks this";
  xdev::Runtime<xdev_test::ManualBackend> rt({}, 1, xdev_test::ManualBackend::Mode::queued);
  const dist::GlobalMesh mesh(*session, std::vector<xdev::AnyDevice>{xdev::AnyDevice(rt.device(0))}, "data");
  auto in = just(xdev::empty<float>(mesh.local_mesh().device(0), {4}));
  auto out = just(xdev::empty<float>(mesh.local_mesh().device(0), {4}));
  auto done = dist::all_gather(mesh, std::span<const xdev::AnyArray<float>>(in), std::span(out),
                               std::chrono::milliseconds(100));
  const auto e = error_of([&] { done.get(); });
  EXPECT_EQ(e.condition(), xdev::errc::deadline_exceeded);
  EXPECT_THAT(e.what(), HasSubstr("distributed::all_gather: the deadline passed before this rank's devices "
                                  "completed the copy from MANUAL:0"));
  EXPECT_FALSE(session->failed());
  EXPECT_GE(rt.backend().run_all(), 1u);  // the late copy lands in the collective's staging memory
  rt.device(0).synchronize();
}

TEST(GlobalCollectives, ReduceScatterOfIntegersWraps) {
  const dist::GlobalMesh mesh(*session, host_devices(1), "data");
  const auto global = static_cast<std::int64_t>(mesh.size());
  const auto in = local_arrays<std::int32_t>(
      mesh, {global}, [&](std::size_t) { return std::vector<std::int32_t>(mesh.size(), INT32_MAX); });
  std::vector<xdev::AnyArray<std::int32_t>> out;
  out.push_back(xdev::empty<std::int32_t>(mesh.local_mesh().device(0), {1}));
  dist::reduce_scatter(mesh, std::span<const xdev::AnyArray<std::int32_t>>(in), std::span(out),
                       xdev::spmd::ReduceOp::sum)
      .get();
  const auto wrapped = static_cast<std::int32_t>(static_cast<std::uint32_t>(INT32_MAX) * size());
  EXPECT_EQ(to_host(out[0]), std::vector<std::int32_t>{wrapped});
}

TEST(GlobalCollectives, BroadcastFromEveryGlobalDevice) {
  for (bool host : {true, false}) {
    SCOPED_TRACE(host ? "host memory" : "staged");
    const dist::GlobalMesh mesh(*session, devices_for(host), "data");
    for (std::size_t root = 0; root < mesh.size(); ++root) {
      auto arrays =
          local_arrays<std::int64_t>(mesh, {7}, [](std::size_t g) { return std::vector<std::int64_t>(7, 100 + g); });
      dist::broadcast(mesh, std::span(arrays), static_cast<std::int64_t>(root)).get();
      for (const auto& a : arrays)
        ASSERT_EQ(to_host(a), std::vector<std::int64_t>(7, static_cast<std::int64_t>(100 + root))) << "root " << root;
    }
  }
}

TEST(GlobalCollectives, ReduceLeavesTheResultOnTheRootDeviceOnly) {
  for (bool host : {true, false})
    for (auto op : {xdev::spmd::ReduceOp::sum, xdev::spmd::ReduceOp::mean, xdev::spmd::ReduceOp::max,
                    xdev::spmd::ReduceOp::prod}) {
      SCOPED_TRACE(::testing::Message() << (host ? "host memory" : "staged") << ", op " << static_cast<int>(op));
      const dist::GlobalMesh mesh(*session, devices_for(host), "data");
      const std::size_t global = mesh.size();
      // Integer-valued data: exact in any order (prod: small values).
      auto value_of = [&](std::size_t g) {
        std::vector<double> v = input_of<double>(g, 6, true);
        if (op == xdev::spmd::ReduceOp::prod)
          for (auto& x : v) x = static_cast<double>(static_cast<long>(x) % 3);
        return v;
      };
      std::vector<double> expected = value_of(0);
      for (std::size_t g = 1; g < global; ++g) {
        const auto v = value_of(g);
        for (std::size_t j = 0; j < expected.size(); ++j)
          expected[j] = op == xdev::spmd::ReduceOp::max    ? std::max(expected[j], v[j])
                        : op == xdev::spmd::ReduceOp::prod ? expected[j] * v[j]
                                                           : expected[j] + v[j];
      }
      if (op == xdev::spmd::ReduceOp::mean)
        for (auto& x : expected) x *= 1.0 / static_cast<double>(global);
      for (std::size_t root = 0; root < global; ++root) {
        auto arrays = local_arrays<double>(mesh, {2, 3}, value_of);
        dist::reduce(mesh, std::span(arrays), op, static_cast<std::int64_t>(root)).get();
        for (std::size_t i = 0; i < mesh.local_size(); ++i) {
          const std::size_t g = mesh.global_index(i);
          ASSERT_EQ(to_host(arrays[i]), g == root ? expected : value_of(g)) << "root " << root << ", device " << g;
        }
      }
    }
}

TEST(GlobalCollectives, CollectivePermuteSendsAlongThePairsAcrossProcessesAndZeroFillsTheRest) {
  for (bool host : {true, false}) {
    SCOPED_TRACE(host ? "host memory" : "staged");
    const dist::GlobalMesh mesh(*session, devices_for(host), "data");
    const auto global = static_cast<std::int64_t>(mesh.size());
    const auto in = local_arrays<float>(mesh, {2, 3}, [](std::size_t g) { return input_of<float>(g, 6, false); });
    // A ring shift (device g receives g - 1's input), and a shift the other way that leaves the
    // last device untargeted.
    xdev::spmd::PermutePairs ring, down;
    for (std::int64_t g = 0; g < global; ++g) ring.push_back({g, (g + 1) % global});
    for (std::int64_t g = 1; g < global; ++g) down.push_back({g, g - 1});
    for (const auto* pairs : {&ring, &down}) {
      std::vector<xdev::AnyArray<float>> out;
      for (std::size_t i = 0; i < mesh.local_size(); ++i)
        out.push_back(xdev::empty<float>(mesh.local_mesh().device(i), {2, 3}));
      dist::collective_permute(mesh, std::span<const xdev::AnyArray<float>>(in), std::span(out), *pairs).get();
      for (std::size_t i = 0; i < mesh.local_size(); ++i) {
        const auto g = static_cast<std::int64_t>(mesh.global_index(i));
        const std::int64_t from = pairs == &ring ? (g + global - 1) % global : g + 1;
        ASSERT_EQ(to_host(out[i]), from < global ? input_of<float>(static_cast<std::size_t>(from), 6, false)
                                                 : std::vector<float>(6, 0.0f))
            << (pairs == &ring ? "ring" : "down") << ", device " << g;
      }
    }
  }
}

TEST(GlobalCollectives, AllToAllMatchesTheSingleProcessMeshForEveryPairOfAxes) {
  for (bool host : {true, false})
    for (const auto& [split, concat] : {std::pair{0, 1}, std::pair{1, 0}, std::pair{0, 0}, std::pair{1, 1}}) {
      SCOPED_TRACE(::testing::Message() << (host ? "host memory" : "staged") << ", split " << split << ", concat "
                                        << concat);
      const dist::GlobalMesh mesh(*session, devices_for(host), "data");
      const std::size_t global = mesh.size();
      const auto k = static_cast<std::int64_t>(global);
      const xdev::Shape shape{2 * k, 3 * k};
      const std::size_t n = 6 * global * global;
      const auto in = local_arrays<float>(mesh, shape, [&](std::size_t g) { return input_of<float>(g, n, true); });
      xdev::Shape want = shape;
      want[split] /= k;
      want[concat] *= k;
      std::vector<xdev::AnyArray<float>> out;
      for (std::size_t i = 0; i < mesh.local_size(); ++i)
        out.push_back(xdev::empty<float>(mesh.local_mesh().device(i), want));
      dist::all_to_all(mesh, std::span<const xdev::AnyArray<float>>(in), std::span(out), split, concat).get();

      const xdev::spmd::Mesh single(host_devices(global), "data");
      std::vector<xdev::AnyArray<float>> ref_in, ref_out;
      for (std::size_t g = 0; g < global; ++g) {
        ref_in.push_back(xdev::empty<float>(single.device(g), shape));
        const auto v = input_of<float>(g, n, true);
        single.device(g).copy_to_device(std::span<const float>(v), ref_in.back()).get();
        ref_out.push_back(xdev::empty<float>(single.device(g), want));
      }
      xdev::spmd::all_to_all(single, "data", std::span<const xdev::AnyArray<float>>(ref_in), std::span(ref_out), split,
                             concat)
          .get();
      for (std::size_t i = 0; i < mesh.local_size(); ++i)
        ASSERT_EQ(to_host(out[i]), to_host(ref_out[mesh.global_index(i)])) << "local device " << i;
    }
}

TEST(GlobalCollectives, LocalArgumentErrorsAreThrownBeforeAnythingStarts) {
  const dist::GlobalMesh mesh(*session, host_devices(1), "data");
  const auto& dev = mesh.local_mesh().device(0);
  auto in = just(xdev::empty<float>(dev, {3}));
  auto out = just(xdev::empty<float>(dev, {4}));
  const std::span<const xdev::AnyArray<float>> cin(in);
  auto e = error_of([&] { (void)dist::all_gather(mesh, cin, std::span(out)); });
  EXPECT_THAT(e.what(), HasSubstr("distributed::all_gather: out[0] has shape [4] but gathering"));
  if (mesh.size() > 1) {
    e = error_of([&] { (void)dist::reduce_scatter(mesh, cin, std::span(out), xdev::spmd::ReduceOp::sum); });
    EXPECT_THAT(e.what(), HasSubstr("must be divisible by " + std::to_string(mesh.size())));
  }
  e = error_of([&] { (void)dist::broadcast(mesh, std::span(in), static_cast<std::int64_t>(mesh.size())); });
  EXPECT_THAT(e.what(), HasSubstr("root " + std::to_string(mesh.size()) + " is not a device of the mesh"));
  e = error_of([&] { (void)dist::broadcast(mesh, std::span(in), 0, std::chrono::milliseconds(0)); });
  EXPECT_THAT(e.what(), HasSubstr("the timeout must be > 0"));
  e = error_of([&] { (void)dist::reduce(mesh, std::span(in), xdev::spmd::ReduceOp::sum, -1); });
  EXPECT_THAT(e.what(), HasSubstr("distributed::reduce: root -1 is not a device of the mesh"));
  auto same_shape = just(xdev::empty<float>(dev, {3}));
  e = error_of([&] { (void)dist::collective_permute(mesh, cin, std::span(same_shape), {{0, 0}, {0, 0}}); });
  EXPECT_THAT(e.what(), HasSubstr("distributed::collective_permute: pair (0, 0) names target 0 again"));
  const auto past = static_cast<std::int64_t>(mesh.size());
  e = error_of([&] { (void)dist::collective_permute(mesh, cin, std::span(same_shape), {{0, past}}); });
  EXPECT_THAT(e.what(), HasSubstr("is out of range for axis 'data'"));
  e = error_of([&] { (void)dist::collective_permute(mesh, cin, std::span(out), {{0, 0}}); });
  EXPECT_THAT(e.what(), HasSubstr("out[0] has shape [4] but collective_permute keeps the shape"));
  e = error_of([&] { (void)dist::collective_permute(mesh, cin, std::span(in), {{0, 0}}); });
  EXPECT_THAT(e.what(), HasSubstr("distributed::collective_permute: out[0] is the same array as in[0]"));
  e = error_of([&] { (void)dist::all_to_all(mesh, cin, std::span(same_shape), 0, 1); });
  EXPECT_THAT(e.what(), HasSubstr("distributed::all_to_all: concat_axis 1 is not a dimension of arrays of shape [3]"));
  if (mesh.size() > 1) {
    e = error_of([&] { (void)dist::all_to_all(mesh, cin, std::span(same_shape), 0, 0); });
    EXPECT_THAT(e.what(), HasSubstr("is not divisible by the " + std::to_string(mesh.size()) + " global devices"));
  }
  auto ints = just(xdev::empty<std::int32_t>(dev, {static_cast<std::int64_t>(mesh.size())}));
  auto int_out = just(xdev::empty<std::int32_t>(dev, {1}));
  e = error_of([&] {
    (void)dist::reduce_scatter(mesh, std::span<const xdev::AnyArray<std::int32_t>>(ints), std::span(int_out),
                               xdev::spmd::ReduceOp::mean);
  });
  EXPECT_THAT(e.what(), HasSubstr("ReduceOp::mean needs floating-point elements"));
  EXPECT_FALSE(session->failed());
}

// ---- on windows (xdev::slice) ----------------------------------------------------------------------

// Per local device, an array of `rows + 3` rows of `cols` holding -7 but in rows [1, 1 + rows),
// which hold `fill(global index)` (or -7 too without a fill), and the window onto those rows.
template <class T>
struct Framed {
  std::vector<xdev::AnyArray<T>> arrays;
  std::vector<xdev::AnyArrayView<T>> windows;
  std::int64_t rows = 0;
};
template <class T, class Fill>
Framed<T> framed(const dist::GlobalMesh& mesh, std::int64_t rows, std::int64_t cols, Fill fill) {
  Framed<T> f;
  f.rows = rows;
  for (std::size_t i = 0; i < mesh.local_size(); ++i) {
    const auto& dev = mesh.local_mesh().device(i);
    f.arrays.push_back(xdev::empty<T>(dev, {rows + 3, cols}));
    const std::vector<T> frame(static_cast<std::size_t>((rows + 3) * cols), T(-7));
    dev.copy_to_device(std::span<const T>(frame), f.arrays.back()).get();
  }
  for (std::size_t i = 0; i < mesh.local_size(); ++i) {
    f.windows.push_back(xdev::slice(f.arrays[i], {1, 1 + rows}));
    const std::vector<T> v = fill(mesh.global_index(i));
    if (!v.empty()) mesh.local_mesh().device(i).copy_to_device(std::span<const T>(v), f.windows.back()).get();
  }
  return f;
}
template <class T>
Framed<T> framed(const dist::GlobalMesh& mesh, std::int64_t rows, std::int64_t cols) {
  return framed<T>(mesh, rows, cols, [](std::size_t) { return std::vector<T>(); });
}
// Window i's elements; fails when a row around it changed.
template <class T>
std::vector<T> inside(const Framed<T>& f, std::size_t i) {
  const std::vector<T> all = to_host(f.arrays[i]);
  const std::size_t cols = all.size() / static_cast<std::size_t>(f.rows + 3);
  for (std::size_t e = 0; e < all.size(); ++e) {
    if (e < cols || e >= cols * static_cast<std::size_t>(1 + f.rows)) {
      EXPECT_EQ(all[e], T(-7)) << "element " << e << " of array " << i << ", outside the window, changed";
    }
  }
  return std::vector<T>(all.begin() + static_cast<std::ptrdiff_t>(cols),
                        all.begin() + static_cast<std::ptrdiff_t>(cols * static_cast<std::size_t>(1 + f.rows)));
}

// Every collective on windows gives what it gives on whole arrays of the same contents, and
// writes nothing around its windows: host memory (MPI and the pipeline work on the windows in
// place) and staged memory.
TEST(GlobalCollectivesOnWindows, EachGivesWhatItGivesOnWholeArraysAndWritesNothingAround) {
  using Op = xdev::spmd::ReduceOp;
  for (bool host : {true, false}) {
    SCOPED_TRACE(host ? "host memory" : "staged");
    const dist::GlobalMesh mesh(*session, devices_for(host), "data");
    const std::size_t local = mesh.local_size();
    const auto G = static_cast<std::int64_t>(mesh.size());
    const auto data = [](std::size_t n) { return [n](std::size_t g) { return input_of<float>(g, n, true); }; };
    const auto outputs = [&](const xdev::Shape& shape) {
      std::vector<xdev::AnyArray<float>> out;
      for (std::size_t i = 0; i < local; ++i) out.push_back(xdev::empty<float>(mesh.local_mesh().device(i), shape));
      return out;
    };
    // In place: all_reduce, broadcast, reduce.
    {
      auto w = framed<float>(mesh, 4, 3, data(12));
      auto whole = local_arrays<float>(mesh, {4, 3}, data(12));
      dist::all_reduce(mesh, std::span(w.windows), Op::sum).get();
      dist::all_reduce(mesh, std::span(whole), Op::sum).get();
      for (std::size_t i = 0; i < local; ++i) EXPECT_EQ(inside(w, i), to_host(whole[i])) << "all_reduce " << i;
      dist::broadcast(mesh, std::span(w.windows), G - 1).get();
      dist::reduce(mesh, std::span(w.windows), Op::max, 0).get();
      dist::broadcast(mesh, std::span(whole), G - 1).get();
      dist::reduce(mesh, std::span(whole), Op::max, 0).get();
      for (std::size_t i = 0; i < local; ++i) EXPECT_EQ(inside(w, i), to_host(whole[i])) << "broadcast, reduce " << i;
    }
    // all_gather and reduce_scatter.
    {
      auto in = framed<float>(mesh, 2, 3, data(6));
      auto out = framed<float>(mesh, 2 * G, 3);
      const auto whole_in = local_arrays<float>(mesh, {2, 3}, data(6));
      auto whole_out = outputs({2 * G, 3});
      dist::all_gather(mesh, std::span(in.windows), std::span(out.windows)).get();
      dist::all_gather(mesh, std::span(whole_in), std::span(whole_out)).get();
      for (std::size_t i = 0; i < local; ++i) EXPECT_EQ(inside(out, i), to_host(whole_out[i])) << "all_gather " << i;
      auto scattered = framed<float>(mesh, 2, 3);
      auto whole_scattered = outputs({2, 3});
      dist::reduce_scatter(mesh, std::span(out.windows), std::span(scattered.windows), Op::sum).get();
      dist::reduce_scatter(mesh, std::span(whole_out), std::span(whole_scattered), Op::sum).get();
      for (std::size_t i = 0; i < local; ++i)
        EXPECT_EQ(inside(scattered, i), to_host(whole_scattered[i])) << "reduce_scatter " << i;
    }
    // all_to_all and collective_permute.
    {
      const auto in = framed<float>(mesh, G, 2, data(static_cast<std::size_t>(2 * G)));
      const auto whole_in = local_arrays<float>(mesh, {G, 2}, data(static_cast<std::size_t>(2 * G)));
      auto out = framed<float>(mesh, 1, 2 * G);
      auto whole_out = outputs({1, 2 * G});
      dist::all_to_all(mesh, std::span(in.windows), std::span(out.windows), 0, 1).get();
      dist::all_to_all(mesh, std::span(whole_in), std::span(whole_out), 0, 1).get();
      for (std::size_t i = 0; i < local; ++i) EXPECT_EQ(inside(out, i), to_host(whole_out[i])) << "all_to_all " << i;
      xdev::spmd::PermutePairs ring;
      for (std::int64_t g = 0; g < G; ++g) ring.push_back({g, (g + 1) % G});
      auto moved = framed<float>(mesh, G, 2);
      auto whole_moved = outputs({G, 2});
      dist::collective_permute(mesh, std::span(in.windows), std::span(moved.windows), ring).get();
      dist::collective_permute(mesh, std::span(whole_in), std::span(whole_moved), ring).get();
      for (std::size_t i = 0; i < local; ++i)
        EXPECT_EQ(inside(moved, i), to_host(whole_moved[i])) << "collective_permute " << i;
    }
  }
}

// Over some axes of a mesh of two, the windows of a large all_reduce (pipelined pieces of rows)
// and an all_gather in both orders of the axes.
TEST(GlobalCollectivesOnWindows, OverAxesAndPipelinedAsOnWholeArrays) {
  const auto w = static_cast<std::int64_t>(size());
  const dist::GlobalMesh mesh(*session, host_devices(2), {w, 2}, {"host", "local"});
  const auto data = [](std::size_t n) { return [n](std::size_t g) { return input_of<float>(g, n, true); }; };
  for (const std::vector<std::string>& axes : {std::vector<std::string>{"host"}, {"local"}, {"host", "local"}}) {
    SCOPED_TRACE(axes.size() == 2 ? "both axes" : axes[0]);
    const std::span<const std::string> over(axes);
    const std::int64_t rows = axes.size() == 2 ? 2048 : 4;  // 2048 x 256 floats: 2 MiB, pipelined
    auto win = framed<float>(mesh, rows, 256, data(static_cast<std::size_t>(rows * 256)));
    auto whole = local_arrays<float>(mesh, {rows, 256}, data(static_cast<std::size_t>(rows * 256)));
    dist::all_reduce(mesh, over, std::span(win.windows), xdev::spmd::ReduceOp::sum).get();
    dist::all_reduce(mesh, over, std::span(whole), xdev::spmd::ReduceOp::sum).get();
    for (std::size_t i = 0; i < 2; ++i) ASSERT_EQ(inside(win, i), to_host(whole[i])) << "all_reduce " << i;

    std::int64_t k = 1;
    for (const auto& a : axes) k *= mesh.axis_size(a);
    const auto in = framed<float>(mesh, 2, 3, data(6));
    const auto whole_in = local_arrays<float>(mesh, {2, 3}, data(6));
    auto out = framed<float>(mesh, 2 * k, 3);
    std::vector<xdev::AnyArray<float>> whole_out;
    for (std::size_t i = 0; i < 2; ++i)
      whole_out.push_back(xdev::empty<float>(mesh.local_mesh().device(i), {2 * k, 3}));
    dist::all_gather(mesh, over, std::span(in.windows), std::span(out.windows)).get();
    dist::all_gather(mesh, over, std::span(whole_in), std::span(whole_out)).get();
    for (std::size_t i = 0; i < 2; ++i) ASSERT_EQ(inside(out, i), to_host(whole_out[i])) << "all_gather " << i;
  }
}

// Windows of one array may be an input and an output when they share no element; windows that
// share elements, strided windows and default windows are refused before anything starts.
TEST(GlobalCollectivesOnWindows, WindowsThatShareElementsOrAreStridedAreRefusedNamingThem) {
  const dist::GlobalMesh mesh(*session, host_devices(1), "data");
  const auto G = static_cast<std::int64_t>(mesh.size());
  const auto& dev = mesh.local_mesh().device(0);
  auto a = xdev::empty<float>(dev, {3 * G + 2, 4});
  std::vector<float> v(a.size());
  std::iota(v.begin(), v.end(), 0.0f);
  dev.copy_to_device(std::span<const float>(v), a).get();
  // rows [0, 2) in, rows [2, 2 + 2G) out: one array, no shared element.
  std::vector<xdev::AnyArrayView<float>> in{xdev::slice(a, {0, 2})};
  std::vector<xdev::AnyArrayView<float>> out{xdev::slice(a, {2, 2 + 2 * G})};
  dist::all_gather(mesh, std::span(in), std::span(out)).get();
  // An input may be a window of a const array (`AnyArrayView<const T>`): the same result.
  const auto& ca = a;
  std::vector<xdev::AnyArrayView<const float>> const_in{xdev::slice(ca, {0, 2})};
  dist::all_gather(mesh, std::span(const_in), std::span(out)).get();
  const std::vector<float> after = to_host(a);
  EXPECT_EQ(std::vector<float>(after.begin(), after.begin() + 8), std::vector<float>(v.begin(), v.begin() + 8));
  for (std::size_t j = 0; j < 8; ++j) EXPECT_EQ(after[8 * (1 + static_cast<std::size_t>(rank())) + j], v[j]);

  std::vector<xdev::AnyArrayView<float>> overlapping{xdev::slice(a, {1, 1 + 2 * G})};
  auto e = error_of([&] { (void)dist::all_gather(mesh, std::span(in), std::span(overlapping)); });
  EXPECT_THAT(e.what(), HasSubstr("distributed::all_gather: out[0] and in[0] are windows of one array that share"));
  std::vector<xdev::AnyArrayView<float>> same{xdev::slice(a, {0, 2})};
  e = error_of([&] { (void)dist::collective_permute(mesh, std::span(in), std::span(same), {{0, 0}}); });
  EXPECT_THAT(e.what(), HasSubstr("distributed::collective_permute: out[0] and in[0] are windows of one array"));
  std::vector<xdev::AnyArrayView<float>> column{xdev::slice(a, xdev::all, {0, 1})};
  e = error_of([&] { (void)dist::all_reduce(mesh, std::span(column), xdev::spmd::ReduceOp::sum); });
  EXPECT_THAT(e.what(), HasSubstr("separate runs; collectives take contiguous windows"));
  std::vector<xdev::AnyArrayView<float>> nothing(1);
  e = error_of([&] { (void)dist::broadcast(mesh, std::span(nothing), 0); });
  EXPECT_THAT(e.what(), HasSubstr("a default-constructed window, onto no array"));
  EXPECT_FALSE(session->failed());
}

TEST(GlobalCollectives, MismatchesAcrossRanksFailOnEveryRank) {
  if (size() < 2) GTEST_SKIP() << "needs a rank 1";
  const dist::GlobalMesh mesh(*session, host_devices(1), "data");
  const auto& dev = mesh.local_mesh().device(0);
  const auto g_count = static_cast<std::int64_t>(mesh.size());
  // Rank 1's blocks are [3, 2], everyone else's [2, 3]: same element count, other shape.
  const xdev::Shape block = rank() == 1 ? xdev::Shape{3, 2} : xdev::Shape{2, 3};
  auto in = just(xdev::empty<float>(dev, block));
  auto out = just(xdev::empty<float>(dev, {block[0] * g_count, block[1]}));
  auto e = error_of([&] { dist::all_gather(mesh, std::span<const xdev::AnyArray<float>>(in), std::span(out)).get(); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("distributed::all_gather: rank 0 has blocks of shape [2, 3]"),
                              HasSubstr("rank 1 has blocks of shape [3, 2]")));
  // Different roots.
  e = error_of([&] { dist::broadcast(mesh, std::span(in), rank() == 1 ? 1 : 0).get(); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("distributed::broadcast: rank 0 has"), HasSubstr("root device 0"),
                              HasSubstr("rank 1 has"), HasSubstr("root device 1")));
  // Different ops.
  auto rs_in = just(xdev::empty<float>(dev, {g_count}));
  auto rs_out = just(xdev::empty<float>(dev, {1}));
  e = error_of([&] {
    dist::reduce_scatter(mesh, std::span<const xdev::AnyArray<float>>(rs_in), std::span(rs_out),
                         rank() == 1 ? xdev::spmd::ReduceOp::max : xdev::spmd::ReduceOp::sum)
        .get();
  });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("MPI_SUM"), HasSubstr("rank 1 has"), HasSubstr("MPI_MAX")));
  // Different permutations.
  const xdev::spmd::PermutePairs swap{{0, 1}, {1, 0}}, stay{{0, 0}, {1, 1}};
  auto perm_in = just(xdev::empty<float>(dev, {2}));  // one shape everywhere: only the pairs differ
  auto perm_out = just(xdev::empty<float>(dev, {2}));
  e = error_of([&] {
    dist::collective_permute(mesh, std::span<const xdev::AnyArray<float>>(perm_in), std::span(perm_out),
                             rank() == 1 ? swap : stay)
        .get();
  });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("distributed::collective_permute: rank 0 has"), HasSubstr("2 pairs #"),
                              HasSubstr("rank 1 has")));
  // Different reduce roots.
  e = error_of([&] { dist::reduce(mesh, std::span(rs_out), xdev::spmd::ReduceOp::sum, rank() == 1 ? 1 : 0).get(); });
  EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("to rank 0"), HasSubstr("rank 1 has"), HasSubstr("to rank 1")));
  EXPECT_FALSE(session->failed());
}

// The host-memory building blocks, with ranks contributing different amounts.
TEST(SessionCollectives, AllGatherReduceScatterAndBroadcastOfHostMemory) {
  const std::size_t n = size();
  // all_gather: rank r contributes r + 1 copies of r.
  std::vector<std::int32_t> mine(rank() + 1, static_cast<std::int32_t>(rank()));
  std::vector<std::int32_t> all(n * (n + 1) / 2);
  session->all_gather(std::span<const std::int32_t>(mine), std::span(all));
  std::vector<std::int32_t> expected;
  for (std::uint32_t r = 0; r < n; ++r) expected.insert(expected.end(), r + 1, static_cast<std::int32_t>(r));
  EXPECT_EQ(all, expected);

  // reduce_scatter: rank r receives r + 1 elements of the sum.
  std::vector<double> in(n * (n + 1) / 2);
  std::iota(in.begin(), in.end(), 0.0);
  std::vector<double> out(rank() + 1);
  session->reduce_scatter(std::span<const double>(in), std::span(out), MPI_SUM);
  const std::size_t first = static_cast<std::size_t>(rank()) * (rank() + 1) / 2;
  for (std::size_t j = 0; j < out.size(); ++j) EXPECT_EQ(out[j], static_cast<double>(n * (first + j)));

  // reduce to the last rank: the others keep their data.
  std::vector<std::int64_t> counts(3, static_cast<std::int64_t>(rank()) + 1);
  session->reduce(std::span(counts), MPI_SUM, static_cast<std::uint32_t>(n - 1));
  EXPECT_EQ(counts, std::vector<std::int64_t>(3, rank() + 1 == n ? static_cast<std::int64_t>(n * (n + 1) / 2)
                                                                 : static_cast<std::int64_t>(rank()) + 1));

  // broadcast from the last rank.
  std::vector<float> values(5, static_cast<float>(rank()));
  session->broadcast(std::span(values), static_cast<std::uint32_t>(n - 1));
  EXPECT_EQ(values, std::vector<float>(5, static_cast<float>(n - 1)));

  // Wrong sizes are named on every rank.
  std::vector<std::int32_t> short_all(all.size() + (rank() == 0 ? 1 : 0));
  auto e = error_of([&] { session->all_gather(std::span<const std::int32_t>(mine), std::span(short_all)); });
  EXPECT_THAT(e.what(), AllOf(HasSubstr("distributed::all_gather: the ranks contribute " + std::to_string(all.size())),
                              HasSubstr("rank 0's holds " + std::to_string(all.size() + 1))));
  std::vector<double> big_out(rank() + 2);
  e = error_of([&] { session->reduce_scatter(std::span<const double>(in), std::span(big_out), MPI_SUM); });
  EXPECT_THAT(e.what(), HasSubstr("add up to " + std::to_string(in.size() + n) + ", but the input has " +
                                  std::to_string(in.size())));
  e = error_of([&] { session->broadcast(std::span(values), static_cast<std::uint32_t>(n)); });
  EXPECT_THAT(e.what(), HasSubstr("root " + std::to_string(n) + " is not a rank of the job"));
  e = error_of([&] { session->reduce(std::span(counts), MPI_MAX, static_cast<std::uint32_t>(n)); });
  EXPECT_THAT(e.what(), HasSubstr("distributed::reduce: root " + std::to_string(n) + " is not a rank of the job"));
  EXPECT_FALSE(session->failed());
}

// Fails on the rank named by XDEV_TEST_FAIL_ON_RANK: how the test distributed.mpi.failure_on_one_rank
// checks that one rank's failure is reported and fails the whole job.
TEST(Harness, FailsWhereRequested) {
  const char* where = std::getenv("XDEV_TEST_FAIL_ON_RANK");
  if (where != nullptr && std::to_string(rank()) == where) ADD_FAILURE() << "requested failure";
}

// Non-zero ranks: only failures, each line prefixed with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(std::uint32_t rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %u] %s:%d: Failure\n[rank %u] %s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), rank_, r.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %u] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  std::uint32_t rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* tune = std::getenv("XDEV_TEST_TUNE_COLLECTIVES");
  dist::Session s = dist::init(
      {.timeout = std::chrono::seconds(30), .tune_collectives = tune == nullptr || std::string(tune) != "0"});
  session = &s;
  dist::set_default_timeout(std::chrono::seconds(30));
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (s.rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(s.rank()));
  }
  const int rc = RUN_ALL_TESTS();
  // Every rank learns every rank's outcome, so that all exit with the same status.
  const unsigned char failed = rc != 0 ? 1 : 0;
  const auto all = s.rendezvous("gtest-outcome", std::as_bytes(std::span(&failed, 1)));
  std::string failing;
  for (std::size_t r = 0; r < all.size(); ++r)
    if (all[r].at(0) != std::byte{0}) failing += (failing.empty() ? "" : ", ") + std::to_string(r);
  if (s.rank() == 0)
    std::printf("[distributed] %u ranks: %s\n", s.world_size(),
                failing.empty() ? "all passed" : ("tests failed on rank(s) " + failing).c_str());
  return failing.empty() ? 0 : 1;
}
