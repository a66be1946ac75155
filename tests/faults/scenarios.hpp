// The scenarios both fault programs run (alloc_failure_test.cpp, thread_failure_test.cpp): each
// checks its own result, so that a failure that was absorbed still has to give the right answer.
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/mesh.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <span>
#include <vector>

namespace xdev_faults {

using Host = xdev::backends::Host;

inline std::vector<xdev::AnyDevice> devices_of(xdev::Runtime<Host>& rt) {
  std::vector<xdev::AnyDevice> out;
  for (std::size_t i = 0; i < rt.device_count(); ++i) out.emplace_back(rt.device(i));
  return out;
}

// A new host runtime, and four floats to its last device and back.
inline void runtime_and_a_round_trip(const Host::Options& options) {
  xdev::Runtime<Host> rt({}, options);
  const std::vector<float> in{1, 2, 3, 4};
  std::vector<float> out(4);
  auto d = xdev::AnyDevice(rt.device(rt.device_count() - 1));
  auto a = xdev::empty<float>(d, {4});
  d.copy_to_device(std::span<const float>(in), a).get();
  d.copy_to_host(a, std::span<float>(out)).get();
  EXPECT_EQ(out, in);
}

// Ones on every device of `mesh` (one array each, all of one size), summed over axis "data".
inline void all_reduce_of_ones(const xdev::spmd::Mesh& mesh, std::vector<xdev::AnyArray<float>>& arrays) {
  const std::size_t n = arrays.front().size();
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const std::vector<float> ones(n, 1.0f);
    mesh.device(i).copy_to_device(std::span<const float>(ones), arrays[i]).get();
  }
  xdev::spmd::all_reduce(mesh, "data", std::span(arrays), xdev::spmd::ReduceOp::sum).get();
  std::vector<float> out(n);
  mesh.device(arrays.size() - 1).copy_to_host(arrays.back(), std::span<float>(out)).get();
  EXPECT_EQ(out, std::vector<float>(n, static_cast<float>(arrays.size())));
}

}  // namespace xdev_faults
