// xdev::spmd::reduce, all_to_all and collective_permute: results against a host reference on
// 1x4 and 2x2 meshes with every algorithm, on host devices (shared memory) and on devices whose
// memory is not host memory (region copies), each validation error, the deadline, and tokens.
#include <xdev/spmd/collectives.hpp>
#include <xdev/spmd/exchange.hpp>

#include "spmd/algorithms.hpp"
#include "support/manual_backend.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/spmd/mesh.hpp>

#include <boost/asio/deferred.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <initializer_list>
#include <latch>
#include <span>
#include <string>
#include <string_view>
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
using xdev_test::ManualBackend;
using namespace std::chrono_literals;

using xdev_test::copy_algorithms;
using xdev_test::every_algorithm;
using xdev_test::name_of;

// Element j of mesh device i's input: distinct, small integers (exact in every op, products of 4
// included).
std::int32_t value(std::size_t i, std::size_t j) {
  return static_cast<std::int32_t>((i * 37 + j * 11) % 19) - 9;
}

std::vector<std::int32_t> values(std::size_t i, std::size_t n) {
  std::vector<std::int32_t> v(n);
  for (std::size_t j = 0; j < n; ++j) v[j] = value(i, j);
  return v;
}

AnyArray<std::int32_t> upload(const AnyDevice& d, Shape shape, const std::vector<std::int32_t>& h) {
  auto a = xdev::empty<std::int32_t>(d, shape);
  d.copy_to_device(std::span<const std::int32_t>(h), a).get();
  return a;
}

std::vector<std::int32_t> download(const AnyArray<std::int32_t>& a) {
  std::vector<std::int32_t> h(a.size());
  a.device().copy_to_host(a, std::span<std::int32_t>(h)).get();
  return h;
}

std::vector<AnyArray<std::int32_t>> inputs_for(const Mesh& mesh, Shape shape) {
  std::vector<AnyArray<std::int32_t>> out;
  for (std::size_t i = 0; i < mesh.size(); ++i)
    out.push_back(upload(mesh.device(i), shape, values(i, static_cast<std::size_t>(shape.numel()))));
  return out;
}

// Outputs filled with a marker value, so that a region nobody wrote shows.
std::vector<AnyArray<std::int32_t>> outputs_for(const Mesh& mesh, Shape shape) {
  std::vector<AnyArray<std::int32_t>> out;
  for (std::size_t i = 0; i < mesh.size(); ++i)
    out.push_back(
        upload(mesh.device(i), shape, std::vector<std::int32_t>(static_cast<std::size_t>(shape.numel()), 77)));
  return out;
}

std::int32_t combine(ReduceOp op, std::int32_t a, std::int32_t b) {
  switch (op) {
    case ReduceOp::min:
      return b < a ? b : a;
    case ReduceOp::max:
      return a < b ? b : a;
    case ReduceOp::prod:
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) * static_cast<std::uint32_t>(b));
    default:
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
  }
}

std::vector<std::size_t> strides_of(const Shape& s) {
  std::vector<std::size_t> st(s.rank(), 1);
  for (std::size_t d = s.rank(); d-- > 1;) st[d - 1] = st[d] * static_cast<std::size_t>(s[d]);
  return st;
}

// all_to_all's definition, element by element: out_j[idx] comes from in_q with q = idx[ca] / E
// (E = the received block's extent along ca), at idx with idx[ca] -= q*E and idx[sa] += j*B.
std::vector<std::int32_t> all_to_all_reference(const std::vector<std::size_t>& group, std::size_t j, const Shape& s,
                                               std::size_t sa, std::size_t ca) {
  const std::size_t k = group.size();
  const auto block = static_cast<std::size_t>(s[sa]) / k;
  Shape o = s;
  o[sa] = s[sa] / static_cast<Shape::value_type>(k);
  o[ca] = o[ca] * static_cast<Shape::value_type>(k);
  const std::size_t extent = sa == ca ? block : static_cast<std::size_t>(s[ca]);
  const auto in_strides = strides_of(s), out_strides = strides_of(o);
  std::vector<std::int32_t> out(static_cast<std::size_t>(o.numel()));
  for (std::size_t flat = 0; flat < out.size(); ++flat) {
    std::vector<std::size_t> idx(o.rank());
    std::size_t rest = flat;
    for (std::size_t d = 0; d < o.rank(); ++d) {
      idx[d] = rest / out_strides[d];
      rest %= out_strides[d];
    }
    const std::size_t q = idx[ca] / extent;
    idx[ca] -= q * extent;
    idx[sa] += j * block;
    std::size_t at = 0;
    for (std::size_t d = 0; d < s.rank(); ++d) at += idx[d] * in_strides[d];
    out[flat] = value(group[q], at);
  }
  return out;
}

class Exchange : public ::testing::Test {
 protected:
  Mesh host_line() { return Mesh(devices(rt), "data"); }
  Mesh host_square() { return Mesh(devices(rt), {2, 2}, {"data", "model"}); }
  // Devices whose memory is not host memory: the region-copy path.
  Mesh manual_line() { return Mesh(devices(manual), "data"); }

  template <class R>
  static std::vector<AnyDevice> devices(R& r) {
    std::vector<AnyDevice> out;
    for (std::size_t i = 0; i < 4; ++i) out.emplace_back(r.device(i));
    return out;
  }

  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 4}};
  xdev::Runtime<ManualBackend> manual{{}, 4, ManualBackend::Mode::inline_completion};
};

// ---- reduce ----------------------------------------------------------------------------------------

void check_reduce(const Mesh& mesh, std::vector<std::string> axes, std::size_t n, ReduceOp op, std::int64_t root,
                  CollectiveAlgorithm alg) {
  const std::string what = std::string(name_of(alg)) + " root " + std::to_string(root) + " op " +
                           std::to_string(static_cast<int>(op)) + " n " + std::to_string(n);
  auto arrays = inputs_for(mesh, {static_cast<Shape::value_type>(n)});
  spmd::reduce(mesh, std::span<const std::string>(axes), std::span(arrays), op, root, {.algorithm = alg}).get();
  for (const auto& g : mesh.groups(std::span<const std::string>(axes)))
    for (std::size_t r = 0; r < g.size(); ++r) {
      if (r != static_cast<std::size_t>(root)) {
        EXPECT_EQ(download(arrays[g[r]]), values(g[r], n)) << what << ": a non-root array changed";
        continue;
      }
      std::vector<std::int32_t> want = values(g[0], n);
      for (std::size_t q = 1; q < g.size(); ++q)
        for (std::size_t j = 0; j < n; ++j) want[j] = combine(op, want[j], value(g[q], j));
      EXPECT_EQ(download(arrays[g[r]]), want) << what;
    }
}

TEST_F(Exchange, ReduceLeavesTheReductionOnTheRootOnly) {
  for (auto alg : every_algorithm)
    for (auto op : {ReduceOp::sum, ReduceOp::max, ReduceOp::prod})
      for (std::int64_t root : {0, 3})
        for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{40000}})
          check_reduce(host_line(), {"data"}, n, op, root, alg);
  for (auto alg : every_algorithm) {
    check_reduce(host_square(), {"model"}, 101, ReduceOp::min, 1, alg);
    check_reduce(host_square(), {"data", "model"}, 101, ReduceOp::sum, 2, alg);
  }
}

TEST_F(Exchange, ReduceWhereMemoryIsNotHostMemory) {
  for (auto alg : copy_algorithms)
    for (auto op : {ReduceOp::sum, ReduceOp::prod}) check_reduce(manual_line(), {"data"}, 1001, op, 2, alg);
}

TEST_F(Exchange, ReduceOfFloatsTakesTheMean) {
  const Mesh mesh = host_line();
  std::vector<AnyArray<float>> arrays;
  for (std::size_t i = 0; i < 4; ++i) {
    arrays.push_back(xdev::empty<float>(mesh.device(i), {3}));
    const std::vector<float> h(3, static_cast<float>(i + 1));
    mesh.device(i).copy_to_device(std::span<const float>(h), arrays.back()).get();
  }
  spmd::reduce(mesh, "data", std::span(arrays), ReduceOp::mean, 1).get();
  std::vector<float> got(3);
  mesh.device(1).copy_to_host(arrays[1], std::span<float>(got)).get();
  EXPECT_EQ(got, std::vector<float>(3, 2.5f));
}

// ---- all_to_all ------------------------------------------------------------------------------------

void check_all_to_all(const Mesh& mesh, std::vector<std::string> axes, const Shape& s, std::size_t sa, std::size_t ca,
                      CollectiveAlgorithm alg) {
  const std::string what = std::string(name_of(alg)) + " shape " + xdev::to_string(s) + " split " + std::to_string(sa) +
                           " concat " + std::to_string(ca);
  const auto groups = mesh.groups(std::span<const std::string>(axes));
  const auto k = static_cast<Shape::value_type>(groups[0].size());
  Shape o = s;
  o[sa] = s[sa] / k;
  o[ca] = o[ca] * k;
  const auto in = inputs_for(mesh, s);
  auto out = outputs_for(mesh, o);
  spmd::all_to_all(mesh, std::span<const std::string>(axes), in, std::span(out), static_cast<std::int64_t>(sa),
                   static_cast<std::int64_t>(ca), {.algorithm = alg})
      .get();
  for (const auto& g : groups)
    for (std::size_t j = 0; j < g.size(); ++j)
      EXPECT_EQ(download(out[g[j]]), all_to_all_reference(g, j, s, sa, ca)) << what << ", device " << g[j];
}

TEST_F(Exchange, AllToAllMatchesItsDefinition) {
  for (auto alg : every_algorithm) {
    check_all_to_all(host_line(), {"data"}, {8, 6}, 0, 1, alg);
    check_all_to_all(host_line(), {"data"}, {8, 6}, 0, 0, alg);
    check_all_to_all(host_line(), {"data"}, {3, 8, 5}, 1, 0, alg);
    check_all_to_all(host_line(), {"data"}, {3, 8, 5}, 1, 2, alg);
    check_all_to_all(host_line(), {"data"}, {2, 3, 12}, 2, 2, alg);
    check_all_to_all(host_square(), {"model"}, {4, 6}, 1, 0, alg);
    check_all_to_all(host_square(), {"data", "model"}, {4, 4}, 0, 1, alg);
  }
  for (auto alg : copy_algorithms) {
    check_all_to_all(manual_line(), {"data"}, {8, 6}, 0, 1, alg);
    check_all_to_all(manual_line(), {"data"}, {3, 8, 5}, 1, 1, alg);
  }
}

TEST_F(Exchange, AllToAllRejectsWhatItCannotSplit) {
  const Mesh mesh = host_line();
  const auto in = inputs_for(mesh, {6, 4});
  auto out = outputs_for(mesh, {2, 16});
  auto expect_invalid = [&](std::initializer_list<std::string_view> parts, std::int64_t sa, std::int64_t ca,
                            std::vector<AnyArray<std::int32_t>>& o) {
    try {
      (void)spmd::all_to_all(mesh, "data", in, std::span(o), sa, ca);
      ADD_FAILURE() << "no error";
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
      for (auto p : parts) EXPECT_THAT(e.what(), HasSubstr(std::string(p)));
    }
  };
  expect_invalid({"all_to_all", "dimension 0 (6) is not divisible by the 4 devices"}, 0, 1, out);
  expect_invalid({"split_axis 2 is not a dimension of arrays of shape [6, 4]"}, 2, 0, out);
  expect_invalid({"concat_axis -1"}, 1, -1, out);
  auto wrong = outputs_for(mesh, {6, 4});
  expect_invalid({"out[0] on HOST:0 has shape [6, 4] but all_to_all of [6, 4] over 4 devices", "gives [24, 1]"}, 1, 0,
                 wrong);
  // The same arrays as input and output: not in place.
  auto both = inputs_for(mesh, {4, 4});
  try {
    (void)spmd::all_to_all(mesh, "data", both, std::span(both), 0, 0);
    ADD_FAILURE() << "no error";
  } catch (const xdev::error& e) {
    EXPECT_THAT(e.what(), HasSubstr("out[0] is the same array as in[0]"));
  }
}

// ---- collective_permute ----------------------------------------------------------------------------

void check_permute(const Mesh& mesh, std::vector<std::string> axes, const spmd::PermutePairs& pairs,
                   CollectiveAlgorithm alg) {
  std::string what = std::string(name_of(alg)) + " pairs";
  for (const auto& [a, b] : pairs) what += " (" + std::to_string(a) + "," + std::to_string(b) + ")";
  const std::size_t n = 1000;
  const auto in = inputs_for(mesh, {10, 100});
  auto out = outputs_for(mesh, {10, 100});
  spmd::collective_permute(mesh, std::span<const std::string>(axes), in, std::span(out), pairs, {.algorithm = alg})
      .get();
  for (const auto& g : mesh.groups(std::span<const std::string>(axes)))
    for (std::size_t t = 0; t < g.size(); ++t) {
      std::vector<std::int32_t> want(n, 0);
      for (const auto& [from, to] : pairs)
        if (static_cast<std::size_t>(to) == t) want = values(g[static_cast<std::size_t>(from)], n);
      EXPECT_EQ(download(out[g[t]]), want) << what << ", device " << g[t];
    }
}

TEST_F(Exchange, CollectivePermuteSendsAlongThePairsAndZeroFillsTheRest) {
  const spmd::PermutePairs shift{{0, 1}, {1, 2}, {2, 3}, {3, 0}};
  const spmd::PermutePairs pipeline{{0, 1}, {1, 2}, {2, 3}};  // position 0 receives nothing
  const spmd::PermutePairs swap_and_self{{0, 1}, {1, 0}, {2, 2}};
  for (auto alg : every_algorithm) {
    check_permute(host_line(), {"data"}, shift, alg);
    check_permute(host_line(), {"data"}, pipeline, alg);
    check_permute(host_line(), {"data"}, swap_and_self, alg);
    check_permute(host_line(), {"data"}, {}, alg);
    check_permute(host_square(), {"data"}, {{1, 0}}, alg);
  }
  for (auto alg : copy_algorithms) {
    check_permute(manual_line(), {"data"}, shift, alg);
    check_permute(manual_line(), {"data"}, pipeline, alg);
  }
}

TEST_F(Exchange, CollectivePermuteRejectsPairsThatDoNotFormAPermutation) {
  const Mesh mesh = host_line();
  const auto in = inputs_for(mesh, {5});
  auto out = outputs_for(mesh, {5});
  auto expect_invalid = [&](const spmd::PermutePairs& pairs, std::initializer_list<std::string_view> parts) {
    try {
      (void)spmd::collective_permute(mesh, "data", in, std::span(out), pairs);
      ADD_FAILURE() << "no error";
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.condition(), xdev::errc::invalid_argument);
      for (auto p : parts) EXPECT_THAT(e.what(), HasSubstr(std::string(p)));
    }
  };
  expect_invalid({{0, 4}}, {"collective_permute", "pair (0, 4) is out of range for axis 'data' of size 4"});
  expect_invalid({{-1, 0}}, {"pair (-1, 0) is out of range"});
  expect_invalid({{0, 1}, {2, 1}}, {"pair (2, 1) names target 1 again (it already receives from 0)"});
  expect_invalid({{0, 1}, {0, 2}}, {"pair (0, 2) names source 0 again"});
  auto wrong = outputs_for(mesh, {6});
  try {
    (void)spmd::collective_permute(mesh, "data", in, std::span(wrong), {{0, 1}});
    ADD_FAILURE() << "no error";
  } catch (const xdev::error& e) {
    EXPECT_THAT(e.what(), HasSubstr("out[0] on HOST:0 has shape [6] but the inputs of its group have shape [5]"));
  }
}

// ---- deadline and tokens ---------------------------------------------------------------------------

TEST_F(Exchange, DeadlineNamesTheDeviceThatDidNotArrive) {
  for (auto alg : {CollectiveAlgorithm::shared_memory, CollectiveAlgorithm::direct}) {
    const Mesh mesh = host_line();
    const auto in = inputs_for(mesh, {8, 4});
    auto out = outputs_for(mesh, {2, 16});
    std::latch release(1);
    auto blocker = mesh.device(3).execute([&] { release.wait(); });
    auto f = spmd::all_to_all(mesh, "data", in, std::span(out), 0, 1, {.timeout = 150ms, .algorithm = alg});
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << name_of(alg);
    try {
      f.get();
      ADD_FAILURE() << "no deadline error";
    } catch (const xdev::error& e) {
      EXPECT_EQ(e.condition(), xdev::errc::deadline_exceeded);
      EXPECT_THAT(e.what(), HasSubstr("all_to_all over axis 'data' did not complete within 150 ms"));
      EXPECT_THAT(e.what(), HasSubstr("HOST:3 did not arrive"));
    }
    release.count_down();
    blocker.get();
    for (const auto& d : mesh.devices()) d.synchronize();
  }
}

TEST_F(Exchange, TakeCompletionTokens) {
  const Mesh mesh = host_line();
  const auto in = inputs_for(mesh, {4});
  auto out = outputs_for(mesh, {4});
  auto deferred = spmd::collective_permute(mesh, "data", in, std::span(out), {{0, 3}}, {}, boost::asio::deferred);
  EXPECT_EQ(download(out[3]), std::vector<std::int32_t>(4, 77));  // nothing started yet
  std::promise<void> done;
  std::move(deferred)([&](std::exception_ptr ep) {
    if (ep)
      done.set_exception(ep);
    else
      done.set_value();
  });
  done.get_future().get();
  EXPECT_EQ(download(out[3]), values(0, 4));
  auto arrays = inputs_for(mesh, {4});
  std::promise<void> reduced;
  spmd::reduce(mesh, "data", std::span(arrays), ReduceOp::sum, 0, {}, [&](std::exception_ptr ep) {
    EXPECT_FALSE(ep);
    reduced.set_value();
  });
  reduced.get_future().get();
  std::vector<std::int32_t> want(4, 0);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) want[j] += value(i, j);
  EXPECT_EQ(download(arrays[0]), want);
}

}  // namespace
