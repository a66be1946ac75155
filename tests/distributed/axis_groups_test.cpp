// The groups and process sets of a collective over some axes of a GlobalMesh with several axes
// (<xdev/distributed/detail/axis_groups.hpp>): index arithmetic, tested without MPI over layouts
// of 1 to 4 processes, including those whose axes cross process boundaries and those refused.
#include <xdev/distributed/detail/axis_groups.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using xdev::distributed::detail::axis_groups;
using xdev::distributed::detail::group_members;
using Groups = std::vector<std::vector<std::size_t>>;

const std::vector<std::string> ab{"a", "b"};

TEST(AxisGroups, HostAndLocalAxesOfTwoProcessesOfTwoDevices) {
  const std::vector<std::size_t> offsets{0, 2, 4};  // rank 0: devices 0, 1; rank 1: 2, 3
  // Over "a" (across the processes): {0, 2} and {1, 3}, both over ranks {0, 1}.
  auto over_a = axis_groups({2, 2}, ab, 0b01, offsets, 1);
  EXPECT_EQ(over_a.problem, "");
  EXPECT_EQ(over_a.group_size, 2u);
  EXPECT_EQ(over_a.color, (std::vector<int>{0, 0}));
  EXPECT_TRUE(over_a.crosses_processes());
  EXPECT_EQ(over_a.local, (Groups{{0}, {1}}));
  // Over "b" (within each process): no MPI at all.
  auto over_b = axis_groups({2, 2}, ab, 0b10, offsets, 1);
  EXPECT_EQ(over_b.color, (std::vector<int>{-1, -1}));
  EXPECT_FALSE(over_b.crosses_processes());
  EXPECT_EQ(over_b.local, (Groups{{0, 1}}));
  // Over both: one group of four; over none: one group per device.
  auto both = axis_groups({2, 2}, ab, 0b11, offsets, 0);
  EXPECT_EQ(both.group_size, 4u);
  EXPECT_EQ(both.local, (Groups{{0, 1}}));
  EXPECT_EQ(both.color, (std::vector<int>{0, 0}));
  auto none = axis_groups({2, 2}, ab, 0, offsets, 0);
  EXPECT_EQ(none.group_size, 1u);
  EXPECT_EQ(none.local, (Groups{{0}, {1}}));
  EXPECT_FALSE(none.crosses_processes());
}

TEST(AxisGroups, AnAxisThatSpansTwoOfFourProcessesGetsASubCommunicatorPerPair) {
  // Four ranks of two devices, shape (2, 4): device g = 4x + y is on rank g / 2.
  const std::vector<std::size_t> offsets{0, 2, 4, 6, 8};
  // Over "b": x = 0 is {0..3} on ranks {0, 1}, x = 1 is {4..7} on ranks {2, 3}.
  auto over_b = axis_groups({2, 4}, ab, 0b10, offsets, 3);
  EXPECT_EQ(over_b.problem, "");
  EXPECT_EQ(over_b.color, (std::vector<int>{0, 0, 2, 2}));
  EXPECT_EQ(over_b.local, (Groups{{0, 1}}));
  EXPECT_EQ(over_b.group_size, 4u);
  // Over "a": column y is {y, 4 + y} on ranks {y / 2, 2 + y / 2}; rank 1 holds columns 2 and 3.
  auto over_a = axis_groups({2, 4}, ab, 0b01, offsets, 1);
  EXPECT_EQ(over_a.problem, "");
  EXPECT_EQ(over_a.color, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(over_a.local, (Groups{{0}, {1}}));
  EXPECT_EQ(over_a.group_size, 2u);
}

TEST(AxisGroups, ALayoutThatGivesARankTwoProcessSetsIsRefusedNamingThem) {
  // Rank 0 holds devices 0, 1, 2 and rank 1 device 3, shape (2, 2): over "b", rank 0's groups are
  // {0, 1} (itself) and {2, 3} (ranks 0 and 1).
  const std::vector<std::size_t> offsets{0, 3, 4};
  for (std::uint32_t rank : {0u, 1u}) {
    auto over_b = axis_groups({2, 2}, ab, 0b10, offsets, rank);
    EXPECT_EQ(over_b.problem,
              "over the axes 'b' rank 0 holds devices of groups that span different sets of processes ({0} and "
              "{0, 1}); choose a shape whose axes divide the devices along process boundaries");
    EXPECT_THAT(axis_groups({2, 2}, ab, 0b01, offsets, rank).problem, ::testing::HasSubstr("'a' rank 0"));
    EXPECT_EQ(axis_groups({2, 2}, ab, 0b11, offsets, rank).problem, "");
  }
}

TEST(AxisGroups, UnequalProcessesWhoseGroupsStayApartAreAccepted) {
  // Ranks of 2, 1 and 1 devices, shape (2, 2): over "b", {0, 1} is rank 0's own, {2, 3} spans
  // ranks 1 and 2. Rank 0 takes no part in the MPI step but still crosses_processes().
  const std::vector<std::size_t> offsets{0, 2, 3, 4};
  auto seen_by_0 = axis_groups({2, 2}, ab, 0b10, offsets, 0);
  EXPECT_EQ(seen_by_0.problem, "");
  EXPECT_EQ(seen_by_0.color, (std::vector<int>{-1, 1, 1}));
  EXPECT_TRUE(seen_by_0.crosses_processes());
  EXPECT_EQ(seen_by_0.local, (Groups{{0, 1}}));
  EXPECT_EQ(axis_groups({2, 2}, ab, 0b10, offsets, 2).local, (Groups{{0}}));
}

TEST(AxisGroups, OneProcessNeverNeedsMpi) {
  for (std::uint32_t mask = 0; mask < 8; ++mask) {
    auto g = axis_groups({2, 2, 2}, {"a", "b", "c"}, mask, {0, 8}, 0);
    EXPECT_EQ(g.problem, "");
    EXPECT_FALSE(g.crosses_processes());
    std::size_t members = 0;
    for (const auto& group : g.local) members += group.size();
    EXPECT_EQ(members, 8u);
    EXPECT_EQ(g.local.size() * g.group_size, 8u) << "mask " << mask;
  }
  // Over "c" of (2, 2, 2): groups {0, 1}, {2, 3}, ... in order.
  EXPECT_EQ(axis_groups({2, 2, 2}, {"a", "b", "c"}, 0b100, {0, 8}, 0).local, (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  // Over "a": {0, 4}, {1, 5}, ...
  EXPECT_EQ(axis_groups({2, 2, 2}, {"a", "b", "c"}, 0b001, {0, 8}, 0).local, (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(AxisGroups, MembersFollowTheOrderTheAxesAreNamedIn) {
  // Shape (2, 3): device 3x + y. The group of base 0 over both axes.
  EXPECT_EQ(group_members({2, 3}, {0, 1}, 0), (std::vector<std::size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(group_members({2, 3}, {1, 0}, 0), (std::vector<std::size_t>{0, 3, 1, 4, 2, 5}));
  // Over one axis, from another base.
  EXPECT_EQ(group_members({2, 3}, {0}, 2), (std::vector<std::size_t>{2, 5}));
  EXPECT_EQ(group_members({2, 3}, {1}, 3), (std::vector<std::size_t>{3, 4, 5}));
  // The bases of a rank's groups come with them.
  EXPECT_EQ(axis_groups({2, 3}, ab, 0b01, {0, 3, 6}, 1).base, (std::vector<std::size_t>{0, 1, 2}));
}

}  // namespace
