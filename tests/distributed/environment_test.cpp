// <xdev/distributed/environment.hpp>: the launcher's variables and their cross-check against MPI,
// as pure functions (no MPI, no launcher).
#include <xdev/distributed/environment.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace dist = xdev::distributed;
using ::testing::AllOf;
using ::testing::HasSubstr;

using Env = std::map<std::string, std::string>;

dist::EnvLookup lookup(const Env& env) {
  return [env](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

dist::EnvPlacement read(const Env& env) {
  return dist::read_environment(lookup(env));
}

// The message of the xdev::error `f` throws, which must be errc::invalid_argument.
template <class F>
std::string invalid(F&& f) {
  try {
    f();
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.condition(), xdev::errc::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no xdev::error thrown";
  return {};
}

std::optional<dist::EnvValue> value(std::uint32_t v, const char* name) {
  return dist::EnvValue{v, name};
}

TEST(ReadEnvironment, NothingSetIsEmpty) {
  EXPECT_TRUE(read({}).empty());
  EXPECT_TRUE(read({{"RANK", ""}, {"WORLD_SIZE", ""}}).empty());  // empty counts as unset
}

TEST(ReadEnvironment, Torchrun) {
  const auto p =
      read({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}, {"GROUP_RANK", "1"}});
  EXPECT_EQ(p.rank, value(5, "RANK"));
  EXPECT_EQ(p.world_size, value(8, "WORLD_SIZE"));
  EXPECT_EQ(p.local_rank, value(1, "LOCAL_RANK"));
  EXPECT_EQ(p.local_world_size, value(4, "LOCAL_WORLD_SIZE"));
  EXPECT_EQ(p.host_index, value(1, "GROUP_RANK"));
}

TEST(ReadEnvironment, OpenMpi) {
  const auto p = read({{"OMPI_COMM_WORLD_RANK", "3"},
                       {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                       {"OMPI_COMM_WORLD_NODE_RANK", "1"}});  // not a host index: ignored
  EXPECT_EQ(p.rank, value(3, "OMPI_COMM_WORLD_RANK"));
  EXPECT_EQ(p.world_size, value(4, "OMPI_COMM_WORLD_SIZE"));
  EXPECT_EQ(p.local_rank, value(1, "OMPI_COMM_WORLD_LOCAL_RANK"));
  EXPECT_EQ(p.local_world_size, value(2, "OMPI_COMM_WORLD_LOCAL_SIZE"));
  EXPECT_FALSE(p.host_index);
}

TEST(ReadEnvironment, Pmi) {
  const auto p = read({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "1"}});
  EXPECT_EQ(p.rank, value(0, "PMI_RANK"));
  EXPECT_EQ(p.world_size, value(2, "PMI_SIZE"));
  EXPECT_EQ(p.local_rank, value(0, "MPI_LOCALRANKID"));
  EXPECT_EQ(p.local_world_size, value(1, "MPI_LOCALNRANKS"));
  // PMI_RANK/PMI_SIZE alone are enough.
  EXPECT_FALSE(read({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}).local_rank);
}

TEST(ReadEnvironment, FamiliesThatAgreeMerge) {
  // torchrun-style values set by hand under mpirun: the same process, so accepted; the first
  // family names the value, and a family fills what another lacks.
  const auto p = read({{"RANK", "1"},
                       {"WORLD_SIZE", "2"},
                       {"OMPI_COMM_WORLD_RANK", "1"},
                       {"OMPI_COMM_WORLD_SIZE", "2"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(p.rank, value(1, "RANK"));
  EXPECT_EQ(p.local_world_size, value(2, "OMPI_COMM_WORLD_LOCAL_SIZE"));
}

TEST(ReadEnvironment, FamiliesThatDisagreeAreNamed) {
  EXPECT_THAT(
      invalid([] {
        read({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
      }),
      HasSubstr("RANK=1 and OMPI_COMM_WORLD_RANK=0 disagree"));
  EXPECT_THAT(invalid([] {
                read({{"WORLD_SIZE", "4"}, {"RANK", "0"}, {"PMI_RANK", "0"}, {"PMI_SIZE", "2"}});
              }),
              HasSubstr("WORLD_SIZE=4 and PMI_SIZE=2 disagree"));
  EXPECT_THAT(invalid([] {
                read({{"OMPI_COMM_WORLD_RANK", "0"},
                      {"OMPI_COMM_WORLD_SIZE", "2"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                      {"PMI_RANK", "0"},
                      {"PMI_SIZE", "2"},
                      {"MPI_LOCALRANKID", "0"},
                      {"MPI_LOCALNRANKS", "1"}});
              }),
              HasSubstr("OMPI_COMM_WORLD_LOCAL_SIZE=2 and MPI_LOCALNRANKS=1 disagree"));
}

TEST(ReadEnvironment, MalformedValuesNameTheVariable) {
  EXPECT_THAT(invalid([] {
                read({{"RANK", "x"}, {"WORLD_SIZE", "2"}});
              }),
              HasSubstr("RANK=\"x\" is not an integer in [0, 2147483646]"));
  EXPECT_THAT(invalid([] {
                read({{"RANK", "0"}, {"WORLD_SIZE", "0"}});
              }),
              HasSubstr("WORLD_SIZE=\"0\" is not an integer in [1, 2147483647]"));
  EXPECT_THAT(invalid([] {
                read({{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
              }),
              HasSubstr("OMPI_COMM_WORLD_RANK=\"-1\""));
  EXPECT_THAT(invalid([] { read({{"PMI_RANK", "1 "}, {"PMI_SIZE", "2"}}); }), HasSubstr("PMI_RANK=\"1 \""));
  EXPECT_THAT(invalid([] { read({{"GROUP_RANK", "3000000000"}}); }), HasSubstr("GROUP_RANK=\"3000000000\""));
  EXPECT_THAT(invalid([] {
                read({{"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2x"}});
              }),
              HasSubstr("LOCAL_WORLD_SIZE=\"2x\""));
}

TEST(ReadEnvironment, MissingPartnerIsNamed) {
  EXPECT_THAT(invalid([] { read({{"RANK", "0"}}); }), HasSubstr("RANK is set but WORLD_SIZE is not"));
  EXPECT_THAT(invalid([] { read({{"WORLD_SIZE", "2"}}); }), HasSubstr("WORLD_SIZE is set but RANK is not"));
  EXPECT_THAT(invalid([] {
                read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}});
              }),
              HasSubstr("LOCAL_RANK is set but LOCAL_WORLD_SIZE is not"));
  EXPECT_THAT(invalid([] {
                read({{"OMPI_COMM_WORLD_SIZE", "2"}});
              }),
              HasSubstr("OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not"));
  EXPECT_THAT(invalid([] { read({{"PMI_RANK", "0"}}); }), HasSubstr("PMI_RANK is set but PMI_SIZE is not"));
  EXPECT_EQ(read({{"GROUP_RANK", "2"}}).host_index, value(2, "GROUP_RANK"));  // may stand alone
}

TEST(ReadEnvironment, RanksMustBeBelowTheirSizes) {
  EXPECT_THAT(invalid([] {
                read({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
              }),
              HasSubstr("RANK=4 is not below WORLD_SIZE=4"));
  EXPECT_THAT(invalid([] {
                read({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}});
              }),
              HasSubstr("LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"));
  EXPECT_THAT(invalid([] {
                read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "4"}});
              }),
              HasSubstr("LOCAL_WORLD_SIZE=4 exceeds WORLD_SIZE=2"));
  EXPECT_THAT(invalid([] {
                read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"GROUP_RANK", "2"}});
              }),
              HasSubstr("GROUP_RANK=2 is not below WORLD_SIZE=2"));
  EXPECT_THAT(invalid([] {
                read({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
              }),
              HasSubstr("OMPI_COMM_WORLD_RANK=2 is not below OMPI_COMM_WORLD_SIZE=2"));
  // Across families: the rank from one, the size from another.
  EXPECT_THAT(invalid([] {
                read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "3"}});
              }),
              HasSubstr("MPI_LOCALNRANKS=3 exceeds WORLD_SIZE=2"));
}

std::vector<dist::PeerInfo> hosts(std::initializer_list<const char*> names) {
  std::vector<dist::PeerInfo> out;
  for (const char* n : names) out.push_back({n, std::nullopt});
  return out;
}

TEST(ResolvePlacement, FromMpiAlone) {
  const auto peers = hosts({"a", "a", "b", "b", "a"});
  const auto p = dist::resolve_placement({}, 2, peers);
  EXPECT_EQ(p,
            (dist::Placement{
                .rank = 2, .world_size = 5, .local_rank = 0, .local_world_size = 2, .host_index = 1, .host_count = 2}));
  const auto q = dist::resolve_placement({}, 4, peers);
  EXPECT_EQ(q.local_rank, 2u);
  EXPECT_EQ(q.local_world_size, 3u);
  EXPECT_EQ(q.host_index, 0u);
  EXPECT_EQ(dist::resolve_placement({}, 0, hosts({"only"})), dist::Placement{});
}

TEST(ResolvePlacement, AgreeingEnvironment) {
  const auto env = read({{"OMPI_COMM_WORLD_RANK", "1"},
                         {"OMPI_COMM_WORLD_SIZE", "2"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  const auto p = dist::resolve_placement(env, 1, hosts({"h", "h"}));
  EXPECT_EQ(p.rank, 1u);
  EXPECT_EQ(p.local_rank, 1u);
}

TEST(ResolvePlacement, DisagreementsNameEveryVariable) {
  const auto env = read({{"RANK", "0"}, {"WORLD_SIZE", "3"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}});
  EXPECT_THAT(invalid([&] {
                dist::resolve_placement(env, 1, hosts({"h", "h"}));
              }),
              AllOf(HasSubstr("RANK=0 disagrees with MPI: this process's rank is 1"),
                    HasSubstr("WORLD_SIZE=3 disagrees with MPI: the job's process count is 2"),
                    HasSubstr("LOCAL_RANK=0 disagrees with MPI: its rank among the processes on host \"h\" is 1"),
                    HasSubstr("LOCAL_WORLD_SIZE=1 disagrees with MPI: the processes on host \"h\" are 2")));
}

TEST(ResolvePlacement, GroupRank) {
  auto peers = hosts({"a", "a", "b"});
  for (auto& p : peers) p.host_index = p.host == "a" ? 1u : 0u;  // torchrun numbered b first
  EXPECT_EQ(dist::resolve_placement({}, 0, peers).host_index, 1u);
  EXPECT_EQ(dist::resolve_placement({}, 2, peers).host_index, 0u);

  auto partial = peers;
  partial[1].host_index.reset();
  EXPECT_THAT(invalid([&] { dist::resolve_placement({}, 0, partial); }),
              HasSubstr("GROUP_RANK is set on some ranks but not on rank 1"));
  auto split = peers;
  split[1].host_index = 0;  // same host as rank 0, another GROUP_RANK
  EXPECT_THAT(invalid([&] { dist::resolve_placement({}, 0, split); }),
              HasSubstr("GROUP_RANK=1 on rank 0 (host \"a\") and GROUP_RANK=0 on rank 1 (host \"a\") disagree"));
  auto merged = peers;
  merged[2].host_index = 1;  // another host, the same GROUP_RANK
  EXPECT_THAT(invalid([&] { dist::resolve_placement({}, 0, merged); }), HasSubstr("on rank 2 (host \"b\")"));
}

TEST(ResolvePlacement, RankOutOfRange) {
  EXPECT_THAT(invalid([] { dist::resolve_placement({}, 2, hosts({"a", "a"})); }), HasSubstr("rank 2"));
}

}  // namespace
