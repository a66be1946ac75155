// <xdev/distributed/mpi.hpp> under mpirun (tests/distributed/CMakeLists.txt runs it with 2 and 4
// processes). Every rank runs every test; only rank 0 prints the usual GoogleTest output, the
// others print their failures prefixed with their rank, and every rank exits non-zero when any
// rank had a failure.
#include <xdev/any/registry.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/distributed/mpi.hpp>
#include <xdev/memory/array.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
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

template <class F>
xdev::error error_of(F&& f) {
  try {
    f();
  } catch (const xdev::error& e) {
    return e;
  }
  ADD_FAILURE() << "no xdev::error thrown";
  return xdev::error(xdev::errc::internal, "none");
}

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
  dist::Session s = dist::init({.timeout = std::chrono::seconds(30)});
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
