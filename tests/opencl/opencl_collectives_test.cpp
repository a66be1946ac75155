// The SPMD collectives over a mesh of three backend types (two HOST devices, a REF plugin device
// and an OPENCL device on PoCL), against the same collectives on a mesh of host devices only: every
// collective, over each axis of a 2x2 mesh and over both, with each algorithm that applies.
#include <xdev/memory/array_view.hpp>
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/exchange.hpp>

#include "opencl_plugin_devices.hpp"
#include "spmd/algorithms.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/spmd/mesh.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace {

namespace spmd = xdev::spmd;
using ::testing::HasSubstr;
using Host = xdev::backends::Host;
using spmd::CollectiveAlgorithm;
using spmd::Mesh;
using spmd::ReduceOp;
using xdev::AnyArray;
using xdev::AnyDevice;
using xdev::Shape;

std::int32_t value(std::size_t i, std::size_t j) {
  return static_cast<std::int32_t>((i * 37 + j * 11) % 19) - 9;
}

std::vector<AnyArray<std::int32_t>> inputs_for(const Mesh& mesh, Shape shape) {
  std::vector<AnyArray<std::int32_t>> out;
  for (std::size_t i = 0; i < mesh.size(); ++i) {
    std::vector<std::int32_t> h(static_cast<std::size_t>(shape.numel()));
    for (std::size_t j = 0; j < h.size(); ++j) h[j] = value(i, j);
    out.push_back(xdev::empty<std::int32_t>(mesh.device(i), shape));
    mesh.device(i).copy_to_device(std::span<const std::int32_t>(h), out.back()).get();
  }
  return out;
}

std::vector<AnyArray<std::int32_t>> outputs_for(const Mesh& mesh, Shape shape) {
  std::vector<AnyArray<std::int32_t>> out;
  for (std::size_t i = 0; i < mesh.size(); ++i) out.push_back(xdev::empty<std::int32_t>(mesh.device(i), shape));
  return out;
}

std::vector<std::vector<std::int32_t>> download(const std::vector<AnyArray<std::int32_t>>& arrays) {
  std::vector<std::vector<std::int32_t>> out;
  for (const auto& a : arrays) {
    out.emplace_back(a.size());
    a.device().copy_to_host(a, std::span<std::int32_t>(out.back())).get();
  }
  return out;
}

// One collective, run on a mesh: its outputs (or its in-place arrays) on the host afterwards.
using Collective =
    std::function<std::vector<std::vector<std::int32_t>>(const Mesh&, std::vector<std::string>, CollectiveAlgorithm)>;

class MixedMeshCollectives : public xdev_test::OpenCLPluginDevices {
 protected:
  void SetUp() override {
    OpenCLPluginDevices::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const auto ref = reg.devices("REF");
    ASSERT_FALSE(ref.empty());
    mixed = Mesh(std::vector<AnyDevice>{AnyDevice(host.device(0)), AnyDevice(host.device(1)), ref[0], devices[0]},
                 {2, 2}, {"data", "model"});
    only_host = Mesh(std::vector<AnyDevice>{AnyDevice(reference.device(0)), AnyDevice(reference.device(1)),
                                            AnyDevice(reference.device(2)), AnyDevice(reference.device(3))},
                     {2, 2}, {"data", "model"});
  }

  // Runs `run` on both meshes over each axis and both, with ring, direct and automatic, and
  // expects the same results.
  void expect_same(const std::string& what, const Collective& run) {
    for (std::vector<std::string> axes : {std::vector<std::string>{"data"}, {"model"}, {"data", "model"}})
      for (auto alg : xdev_test::copy_algorithms) {
        std::string label = what + " over";
        for (const auto& a : axes) label += " " + a;
        label += std::string(" ") + xdev_test::name_of(alg);
        const auto want = run(only_host, axes, CollectiveAlgorithm::automatic);
        EXPECT_EQ(run(mixed, axes, alg), want) << label;
      }
  }

  Host::Options two{.devices = 2};
  xdev::Runtime<Host> host{{}, two};
  xdev::Runtime<Host> reference{{}, Host::Options{.devices = 4}};
  Mesh mixed;
  Mesh only_host;
};

TEST_F(MixedMeshCollectives, EveryCollectiveGivesWhatAHostOnlyMeshGives) {
  for (auto op : {ReduceOp::sum, ReduceOp::max, ReduceOp::prod})
    expect_same("all_reduce " + std::to_string(static_cast<int>(op)),
                [op](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
                  auto a = inputs_for(m, {1001});
                  spmd::all_reduce(m, std::span<const std::string>(axes), std::span(a), op, {.algorithm = alg}).get();
                  return download(a);
                });
  expect_same("all_gather", [](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
    const auto in = inputs_for(m, {3, 5});
    const auto k = static_cast<Shape::value_type>(m.groups(std::span<const std::string>(axes))[0].size());
    auto out = outputs_for(m, {3 * k, 5});
    spmd::all_gather(m, std::span<const std::string>(axes), in, std::span(out), {.algorithm = alg}).get();
    return download(out);
  });
  expect_same("reduce_scatter", [](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
    const auto in = inputs_for(m, {8, 3});
    const auto k = static_cast<Shape::value_type>(m.groups(std::span<const std::string>(axes))[0].size());
    auto out = outputs_for(m, {8 / k, 3});
    spmd::reduce_scatter(m, std::span<const std::string>(axes), in, std::span(out), ReduceOp::sum, {.algorithm = alg})
        .get();
    return download(out);
  });
  expect_same("broadcast", [](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
    auto a = inputs_for(m, {700});
    spmd::broadcast(m, std::span<const std::string>(axes), std::span(a), 1, {.algorithm = alg}).get();
    return download(a);
  });
  expect_same("reduce", [](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
    auto a = inputs_for(m, {700});
    spmd::reduce(m, std::span<const std::string>(axes), std::span(a), ReduceOp::min, 1, {.algorithm = alg}).get();
    return download(a);
  });
  expect_same("all_to_all", [](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
    const auto in = inputs_for(m, {4, 8, 3});
    const auto k = static_cast<Shape::value_type>(m.groups(std::span<const std::string>(axes))[0].size());
    auto out = outputs_for(m, {4 * k, 8 / k, 3});
    spmd::all_to_all(m, std::span<const std::string>(axes), in, std::span(out), 1, 0, {.algorithm = alg}).get();
    return download(out);
  });
  expect_same("collective_permute", [](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
    const auto in = inputs_for(m, {6, 7});
    auto out = outputs_for(m, {6, 7});
    spmd::collective_permute(m, std::span<const std::string>(axes), in, std::span(out), {{1, 0}}, {.algorithm = alg})
        .get();
    return download(out);
  });
}

// Rows [2, 5) of a [6, 50] array on each device: the window at a byte offset inside a REF and an
// OpenCL buffer, reduced in place, the other rows left alone.
TEST_F(MixedMeshCollectives, CollectivesInPlaceOnWindowsGiveWhatAHostOnlyMeshGives) {
  expect_same("all_reduce on windows", [](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
    auto a = inputs_for(m, {6, 50});
    std::vector<xdev::AnyArrayView<std::int32_t>> w;
    for (auto& x : a) w.push_back(xdev::slice(x, {2, 5}));
    spmd::all_reduce(m, std::span<const std::string>(axes), std::span(w), ReduceOp::sum, {.algorithm = alg}).get();
    return download(a);
  });
  expect_same("broadcast on windows", [](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
    auto a = inputs_for(m, {6, 50});
    std::vector<xdev::AnyArrayView<std::int32_t>> w;
    for (auto& x : a) w.push_back(xdev::slice(x, {2, 5}));
    spmd::broadcast(m, std::span<const std::string>(axes), std::span(w), 1, {.algorithm = alg}).get();
    return download(a);
  });
  expect_same("all_gather into windows", [](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
    const auto k = static_cast<Shape::value_type>(m.groups(std::span<const std::string>(axes))[0].size());
    auto in = inputs_for(m, {6, 5});
    auto out = inputs_for(m, {3 * k + 4, 5});  // the rows around the window hold values
    std::vector<xdev::AnyArrayView<std::int32_t>> win, wout;
    for (auto& x : in) win.push_back(xdev::slice(x, {1, 4}));
    for (auto& x : out) wout.push_back(xdev::slice(x, {2, 2 + 3 * k}));
    spmd::all_gather(m, std::span<const std::string>(axes), std::span<const xdev::AnyArrayView<std::int32_t>>(win),
                     std::span(wout), {.algorithm = alg})
        .get();
    return download(out);
  });
  expect_same("all_to_all between windows", [](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
    const auto k = static_cast<Shape::value_type>(m.groups(std::span<const std::string>(axes))[0].size());
    auto in = inputs_for(m, {10, 8, 3});
    auto out = inputs_for(m, {6 * k, 8 / k, 3});
    std::vector<xdev::AnyArrayView<std::int32_t>> win, wout;
    for (auto& x : in) win.push_back(xdev::slice(x, {3, 7}));
    for (auto& x : out) wout.push_back(xdev::slice(x, {k, 5 * k}));
    spmd::all_to_all(m, std::span<const std::string>(axes), std::span<const xdev::AnyArrayView<std::int32_t>>(win),
                     std::span(wout), 1, 0, {.algorithm = alg})
        .get();
    return download(out);
  });
  expect_same("collective_permute between windows",
              [](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
                auto in = inputs_for(m, {9, 7});
                auto out = inputs_for(m, {8, 7});
                std::vector<xdev::AnyArrayView<std::int32_t>> win, wout;
                for (auto& x : in) win.push_back(xdev::slice(x, {2, 8}));
                for (auto& x : out) wout.push_back(xdev::slice(x, {1, 7}));
                spmd::collective_permute(m, std::span<const std::string>(axes),
                                         std::span<const xdev::AnyArrayView<std::int32_t>>(win), std::span(wout),
                                         {{1, 0}}, {.algorithm = alg})
                    .get();
                return download(out);
              });
  expect_same("reduce on windows", [](const Mesh& m, std::vector<std::string> axes, CollectiveAlgorithm alg) {
    auto a = inputs_for(m, {6, 50});
    std::vector<xdev::AnyArrayView<std::int32_t>> w;
    for (auto& x : a) w.push_back(xdev::slice(x, {2, 5}));
    spmd::reduce(m, std::span<const std::string>(axes), std::span(w), ReduceOp::min, 1, {.algorithm = alg}).get();
    return download(a);
  });
}

TEST_F(MixedMeshCollectives, SharedMemoryIsRefusedNamingTheOpenCLDevice) {
  auto a = inputs_for(mixed, {10});
  try {
    (void)spmd::all_reduce(mixed, {"data", "model"}, std::span(a), ReduceOp::sum,
                           {.algorithm = CollectiveAlgorithm::shared_memory});
    ADD_FAILURE() << "no error";
  } catch (const xdev::error& e) {
    EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr(devices[0].name() + "'s is not"));
  }
}

}  // namespace
