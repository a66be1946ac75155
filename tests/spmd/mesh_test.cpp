// xdev::spmd::Mesh: construction errors, the row-major correspondence between flat positions and
// coordinates, axis look-up, collective groups over one and two axes, printing and equality.
#include <xdev/spmd/mesh.hpp>

#include <xdev/any/any_device.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "support/error_of.hpp"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Host = xdev::backends::Host;
using xdev::AnyDevice;
using xdev::spmd::Mesh;

using xdev_test::expect_error;

class MeshTest : public ::testing::Test {
 protected:
  // The first `n` host devices, in ordinal order.
  std::vector<AnyDevice> devices(std::size_t n) {
    std::vector<AnyDevice> out;
    for (std::size_t i = 0; i < n; ++i) out.emplace_back(rt.device(i));
    return out;
  }

  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 12, .threads = 2}};
};

// ---- construction errors ----------------------------------------------------------------------

TEST_F(MeshTest, ShapeProductMustEqualDeviceCount) {
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 Mesh(devices(4), {2, 3}, {"data", "model"});
               },
               {"mesh shape [2, 3] holds 6 devices, but 4 were given"});
}

TEST_F(MeshTest, RejectsADeviceListedTwice) {
  auto devs = devices(4);
  devs[3] = devs[1];
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 Mesh(devs, {2, 2}, {"data", "model"});
               },
               {"device HOST:1 appears twice in the mesh (at 1 and 3)"});
}

TEST_F(MeshTest, RejectsAnAxisNameUsedTwice) {
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 Mesh(devices(4), {2, 2}, {"data", "data"});
               },
               {"mesh axis name 'data' is used twice"});
}

TEST_F(MeshTest, RejectsNamesAndShapeOfDifferentLengths) {
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 Mesh(devices(4), {2, 2}, {"data"});
               },
               {"mesh shape [2, 2] has 2 axes but 1 axis name(s) were given"});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 Mesh(devices(4), {4}, {"data", "model"});
               },
               {"has 1 axes but 2 axis name(s)"});
}

TEST_F(MeshTest, RejectsOtherMalformedMeshes) {
  expect_error(xdev::errc::invalid_argument, [&] { Mesh(devices(1), {}, {}); }, {"at least one axis"});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 Mesh(devices(1), {1, 0}, {"a", "b"});
               },
               {"mesh axis 'b' has extent 0"});
  expect_error(xdev::errc::invalid_argument, [&] { Mesh(devices(2), {2}, {""}); }, {"mesh axis 0 has an empty name"});
  expect_error(xdev::errc::invalid_argument, [&] { Mesh({AnyDevice{}}, "data"); },
               {"mesh device 0 is an empty AnyDevice"});
  expect_error(xdev::errc::invalid_argument, [&] { Mesh({}, "data"); }, {"mesh axis 'data' has extent 0"});
}

// ---- coordinates ------------------------------------------------------------------------------

TEST_F(MeshTest, CoordinatesAreRowMajorAndRoundTrip) {
  const auto devs = devices(6);
  const Mesh mesh(devs, {2, 3}, {"data", "model"});
  EXPECT_EQ(mesh.size(), 6U);
  EXPECT_EQ(mesh.ndim(), 2U);
  EXPECT_THAT(mesh.shape(), ElementsAre(2, 3));
  EXPECT_THAT(mesh.axis_names(), ElementsAre("data", "model"));
  EXPECT_THAT(mesh.coords(0), ElementsAre(0, 0));
  EXPECT_THAT(mesh.coords(1), ElementsAre(0, 1));
  EXPECT_THAT(mesh.coords(3), ElementsAre(1, 0));
  EXPECT_THAT(mesh.coords(5), ElementsAre(1, 2));
  for (std::size_t flat = 0; flat < mesh.size(); ++flat) {
    const auto c = mesh.coords(flat);
    EXPECT_EQ(mesh.flat_index(c), flat);
    EXPECT_EQ(mesh.at(c), devs[flat]);
    EXPECT_EQ(mesh.device(flat), devs[flat]);
    EXPECT_EQ(mesh.coord(flat, "data"), c[0]);
    EXPECT_EQ(mesh.coord(flat, "model"), c[1]);
    EXPECT_EQ(mesh.index_of(devs[flat]), flat);
  }
  EXPECT_EQ(mesh.at({1, 2}), devs[5]);
}

TEST_F(MeshTest, ThreeAxesRoundTrip) {
  const Mesh mesh(devices(8), {2, 2, 2}, {"a", "b", "c"});
  for (std::size_t flat = 0; flat < mesh.size(); ++flat) {
    const auto c = mesh.coords(flat);
    EXPECT_EQ(static_cast<std::size_t>(c[0] * 4 + c[1] * 2 + c[2]), flat);
    EXPECT_EQ(mesh.flat_index(c), flat);
  }
}

TEST_F(MeshTest, OutOfRangePositionsAreErrors) {
  const Mesh mesh(devices(6), {2, 3}, {"data", "model"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)mesh.coords(6); }, {"mesh device index 6", "6 devices"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)mesh.device(7); }, {"mesh device index 7"});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 (void)mesh.at({1, 3});
               },
               {"mesh coordinate 3 on axis 'model' is out of range [0, 3)"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)mesh.at({1}); }, {"have 1 entries, but the mesh has 2 axes"});
  EXPECT_EQ(mesh.index_of(rt.device(7)), std::nullopt);
  EXPECT_EQ(mesh.index_of(AnyDevice{}), std::nullopt);
}

TEST_F(MeshTest, AxisLookUp) {
  const Mesh mesh(devices(6), {2, 3}, {"data", "model"});
  EXPECT_TRUE(mesh.has_axis("model"));
  EXPECT_FALSE(mesh.has_axis("modl"));
  EXPECT_EQ(mesh.axis_index("model"), 1U);
  EXPECT_EQ(mesh.axis_size("data"), 2);
  EXPECT_EQ(mesh.axis_size("model"), 3);
  expect_error(xdev::errc::invalid_argument, [&] { (void)mesh.axis_size("modl"); },
               {"mesh has no axis 'modl'; its axes are ('data', 'model')"});
}

TEST_F(MeshTest, OneAxisConstructorListsDevicesInOrder) {
  const auto devs = devices(4);
  const Mesh mesh(devs, "data");
  EXPECT_THAT(mesh.shape(), ElementsAre(4));
  EXPECT_THAT(mesh.axis_names(), ElementsAre("data"));
  EXPECT_EQ(mesh.devices(), devs);
  EXPECT_TRUE(Mesh().empty());
  EXPECT_EQ(Mesh().size(), 0U);
}

// ---- groups -----------------------------------------------------------------------------------

TEST_F(MeshTest, GroupsAlongOneAxis) {
  // (data, model): 0=(0,0) 1=(0,1) 2=(0,2) 3=(1,0) 4=(1,1) 5=(1,2)
  const Mesh mesh(devices(6), {2, 3}, {"data", "model"});
  using G = std::vector<std::vector<std::size_t>>;
  EXPECT_EQ(mesh.groups("data"), (G{{0, 3}, {1, 4}, {2, 5}}));
  EXPECT_EQ(mesh.groups("model"), (G{{0, 1, 2}, {3, 4, 5}}));
}

TEST_F(MeshTest, GroupsOverTwoAxesFollowTheGivenOrder) {
  const Mesh mesh(devices(6), {2, 3}, {"data", "model"});
  using G = std::vector<std::vector<std::size_t>>;
  const std::vector<std::string> data_model{"data", "model"};
  const std::vector<std::string> model_data{"model", "data"};
  EXPECT_EQ(mesh.groups(data_model), (G{{0, 1, 2, 3, 4, 5}}));
  // Row-major over (model, data): model outermost.
  EXPECT_EQ(mesh.groups(model_data), (G{{0, 3, 1, 4, 2, 5}}));
  EXPECT_EQ(mesh.groups(std::span<const std::string>{}), (G{{0}, {1}, {2}, {3}, {4}, {5}}));
  // Braces name two axes (not one name spanning two string literals).
  EXPECT_EQ(mesh.groups({"model", "data"}), (G{{0, 3, 1, 4, 2, 5}}));
}

TEST_F(MeshTest, GroupsOnAThreeAxisMesh) {
  const Mesh mesh(devices(8), {2, 2, 2}, {"a", "b", "c"});
  using G = std::vector<std::vector<std::size_t>>;
  const std::vector<std::string> ac{"a", "c"};
  EXPECT_EQ(mesh.groups(ac), (G{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(mesh.groups("b"), (G{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
}

// Every ordered choice of axes of a {2, 3, 2} mesh against a reference written from the
// definition: a device's group is keyed by its coordinates on the other axes, its position by its
// coordinates on the chosen ones (row-major in the order given), and groups are ordered by their
// first member.
TEST_F(MeshTest, GroupsMatchTheirDefinitionForEveryOrderOfAxes) {
  const std::vector<std::int64_t> shape{2, 3, 2};
  const std::vector<std::string> names{"a", "b", "c"};
  const Mesh mesh(devices(12), shape, names);
  auto coords = [&](std::size_t flat) {
    std::vector<std::size_t> c(3);
    for (std::size_t a = 3; a-- > 0;) {
      c[a] = flat % static_cast<std::size_t>(shape[a]);
      flat /= static_cast<std::size_t>(shape[a]);
    }
    return c;
  };
  auto reference = [&](const std::vector<std::size_t>& along) {
    std::vector<std::vector<std::size_t>> keys;  // per group: the other coordinates
    std::vector<std::vector<std::size_t>> out;
    std::size_t size = 1;
    for (auto a : along) size *= static_cast<std::size_t>(shape[a]);
    for (std::size_t flat = 0; flat < 12; ++flat) {
      const auto c = coords(flat);
      std::vector<std::size_t> key;
      for (std::size_t a = 0; a < 3; ++a)
        if (std::find(along.begin(), along.end(), a) == along.end()) key.push_back(c[a]);
      std::size_t pos = 0;
      for (auto a : along) pos = pos * static_cast<std::size_t>(shape[a]) + c[a];
      auto it = std::find(keys.begin(), keys.end(), key);
      if (it == keys.end()) {
        keys.push_back(key);
        out.emplace_back(size);
        it = keys.end() - 1;
      }
      out[static_cast<std::size_t>(it - keys.begin())][pos] = flat;
    }
    return out;
  };
  const std::vector<std::vector<std::size_t>> orders{{0},    {1},    {2},    {0, 1},    {1, 0},    {0, 2},
                                                     {2, 0}, {1, 2}, {2, 1}, {0, 1, 2}, {2, 1, 0}, {1, 2, 0}};
  for (const auto& along : orders) {
    std::vector<std::string> axes;
    std::string label;
    for (auto a : along) {
      axes.push_back(names[a]);
      label += names[a];
    }
    EXPECT_EQ(mesh.groups(std::span<const std::string>(axes)), reference(along)) << "axes " << label;
  }
}

TEST_F(MeshTest, GroupsRejectUnknownOrRepeatedAxes) {
  const Mesh mesh(devices(6), {2, 3}, {"data", "model"});
  const std::vector<std::string> twice{"data", "data"};
  expect_error(xdev::errc::invalid_argument, [&] { (void)mesh.groups(twice); }, {"axis 'data' is named twice"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)mesh.groups("x"); }, {"mesh has no axis 'x'"});
}

// ---- printing and equality --------------------------------------------------------------------

TEST_F(MeshTest, PrintsAxesAndDevices) {
  const Mesh mesh(devices(6), {2, 3}, {"data", "model"});
  EXPECT_EQ(mesh.to_string(), "Mesh(data=2, model=3: HOST:0 HOST:1 HOST:2 HOST:3 HOST:4 HOST:5)");
  std::ostringstream os;
  os << Mesh(devices(2), "x");
  EXPECT_EQ(os.str(), "Mesh(x=2: HOST:0 HOST:1)");
}

TEST_F(MeshTest, EqualityComparesDevicesShapeAndNames) {
  const auto devs = devices(4);
  EXPECT_EQ(Mesh(devs, {2, 2}, {"a", "b"}), Mesh(devs, {2, 2}, {"a", "b"}));
  EXPECT_NE(Mesh(devs, {2, 2}, {"a", "b"}), Mesh(devs, {2, 2}, {"b", "a"}));
  EXPECT_NE(Mesh(devs, {2, 2}, {"a", "b"}), Mesh(devs, {4, 1}, {"a", "b"}));
  const std::vector<AnyDevice> reversed(devs.rbegin(), devs.rend());
  EXPECT_NE(Mesh(devs, "a"), Mesh(reversed, "a"));
}

}  // namespace
