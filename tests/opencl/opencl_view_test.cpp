// Views (`xdev::slice`) on devices whose memory the host cannot address: a strided box and rows of
// an OPENCL array (PoCL) and of a REF plugin array go to and from the host through the backends'
// offset transfers, one per contiguous run.
#include "opencl/opencl_plugin_devices.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/memory/array_view.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace {

using PluginViews = xdev_test::OpenCLPluginDevices;

// Writes a box into an iota matrix on `dev`, then reads back the whole array, a box and rows.
void check_views_on(const xdev::AnyDevice& dev) {
  SCOPED_TRACE(dev.name());
  constexpr std::int64_t rows = 9, cols = 13;
  auto a = xdev::empty<std::int32_t>(dev, {rows, cols});
  std::vector<std::int32_t> v(rows * cols);
  std::iota(v.begin(), v.end(), 0);
  dev.copy_to_device(std::span<const std::int32_t>(v), a).get();

  std::vector<std::int32_t> patch(4 * 5);
  std::iota(patch.begin(), patch.end(), 1000);
  dev.copy_to_device(std::span<const std::int32_t>(patch), xdev::slice(a, {2, 6}, {7, 12})).get();
  for (std::int64_t r = 2; r < 6; ++r)
    for (std::int64_t c = 7; c < 12; ++c)
      v[static_cast<std::size_t>(r * cols + c)] = 1000 + static_cast<std::int32_t>((r - 2) * 5 + c - 7);

  std::vector<std::int32_t> all(v.size());
  dev.copy_to_host(a, std::span<std::int32_t>(all)).get();
  EXPECT_EQ(all, v);

  std::vector<std::int32_t> box(3 * 6), expected_box;
  dev.copy_to_host(xdev::slice(a, {1, 4}, {6, 12}), std::span<std::int32_t>(box)).get();
  for (std::int64_t r = 1; r < 4; ++r)
    for (std::int64_t c = 6; c < 12; ++c) expected_box.push_back(v[static_cast<std::size_t>(r * cols + c)]);
  EXPECT_EQ(box, expected_box);

  std::vector<std::int32_t> tail(2 * cols);
  dev.copy_to_host(xdev::slice(a, {7}), std::span<std::int32_t>(tail)).get();
  EXPECT_EQ(tail, std::vector<std::int32_t>(v.end() - 2 * cols, v.end()));
}

TEST_F(PluginViews, AStridedBoxAndRowsTransferOnOpenCL) {
  check_views_on(devices.at(0));
}

TEST_F(PluginViews, AStridedBoxAndRowsTransferOnTheReferencePlugin) {
  check_views_on(reg.devices("REF").at(0));
}

}  // namespace
