// The names that moved keep working for one release through their forwarding headers.
#include <xdev/ops/host_kernels.hpp>

#include <gtest/gtest.h>

#include <vector>

TEST(Forwarding, OpsHostNamesTheKernels) {
  std::vector<float> x{1.0f, 2.0f, 3.5f};
  const xdev::ops::host::Parallel serial{};
  EXPECT_EQ(xdev::ops::host::sum(serial, x.data(), x.size()), 6.5f);
  EXPECT_EQ(xdev::ops::host::sum(serial, x.data(), x.size()), xdev::kernels::sum(serial, x.data(), x.size()));
  xdev::ops::host::scale(serial, x.data(), x.size(), 2.0f);
  EXPECT_EQ(x[2], 7.0f);
}
