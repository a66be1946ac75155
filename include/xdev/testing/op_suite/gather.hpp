/// \file
/// Part of xdev's op conformance suite (<xdev/testing/op_suite.hpp>): gather. Include the
/// suite's header, not this one.
#pragma once

#include <xdev/testing/op_suite/common.hpp>

namespace xdev::testing::op_suite {

// ---- gather ---------------------------------------------------------------------------------

template <class T, class I, class Dev>
void check_gather(const Dev& dev, std::size_t rows, std::size_t cols, std::size_t n) {
  std::vector<T> table(rows * cols);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<T>(static_cast<int>(i * 7 % 1000) - 500);
  if constexpr (std::is_floating_point_v<T>) {
    if (table.size() > 2) {
      table[1] = T(-0.0);
      table[2] = std::numeric_limits<T>::quiet_NaN();
    }
  }
  std::mt19937 g(19);
  std::vector<I> index(n);
  for (std::size_t i = 0; i < n; ++i) index[i] = static_cast<I>(g() % rows);
  if (n >= 2) {
    index[0] = 0;
    index[1] = static_cast<I>(rows - 1);
  }
  std::vector<T> ref(n * cols);
  for (std::size_t i = 0; i < n; ++i)
    std::memcpy(&ref[i * cols], &table[static_cast<std::size_t>(index[i]) * cols], cols * sizeof(T));
  auto dt = to_device(dev, sh(rows, cols), table);
  auto di = to_device(dev, sh(n), index);
  auto out = to_device(dev, sh(n, cols), std::vector<T>(n * cols, T(1)));
  ops::gather(dev, dt, di, out).get();
  EXPECT_TRUE(same_bits(to_host(out), ref))
      << "rows=" << rows << " cols=" << cols << " n=" << n << " index bits=" << 8 * sizeof(I);
}

XDEV_DEVICE_TEST_P(Ops, Gather) {
  const auto dev = this->device();
  check_gather<float, std::int32_t>(dev, 37, 13, 50);
  check_gather<float, std::int64_t>(dev, 37, 13, 50);
  check_gather<double, std::int32_t>(dev, 1, 5, 9);
  check_gather<double, std::int64_t>(dev, 1000, 1, 3000);
  check_gather<std::int32_t, std::int64_t>(dev, 10, 600, 7);
  check_gather<xdev::f16, std::int32_t>(dev, 5, 3, 8);
  check_gather<float, std::int32_t>(dev, 4, 3, 0);
}

template <class I, class Dev>
void check_gather_out_of_range(const Dev& dev, std::vector<I> index, std::string_view value,
                               std::string_view position) {
  auto table = to_device(dev, {37, 2}, std::vector<float>(74, 1.0f));
  auto di = to_device(dev, sh(index.size()), index);
  auto out = to_device(dev, sh(index.size(), 2), std::vector<float>(2 * index.size(), 7.0f));
  auto f = ops::gather(dev, table, di, out);
  expect_error(xdev::errc::invalid_argument, [&] { f.get(); },
               {"gather", "index " + std::string(value) + " at position " + std::string(position), "37 rows"});
  EXPECT_TRUE(same_bits(to_host(out), std::vector<float>(2 * index.size(), 7.0f))) << "out must be untouched";
}

XDEV_DEVICE_TEST_P(Ops, GatherIndexOutOfRangeFailsTheFutureAndLeavesOutUntouched) {
  const auto dev = this->device();
  check_gather_out_of_range<std::int32_t>(dev, {1, 2, 37, 5}, "37", "2");
  check_gather_out_of_range<std::int64_t>(dev, {-1, 2, 40}, "-1", "0");
  check_gather_out_of_range<std::int64_t>(dev, {0, 1, 2, 3, std::int64_t{1} << 40}, "1099511627776", "4");
}

}  // namespace xdev::testing::op_suite
