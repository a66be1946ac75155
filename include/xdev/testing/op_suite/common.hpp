/// \file
/// The common part of xdev's op conformance suite (<xdev/testing/op_suite.hpp>): the suite's
/// declaration and the helpers every part uses. Included by each part; not meant to be included
/// on its own.
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/core/half.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/ops/autocast.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/ops/ops.hpp>
#include <xdev/random/stream.hpp>
#include <xdev/testing/arrays.hpp>
#include <xdev/testing/device_test.hpp>
#include <xdev/testing/expect_error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

/// The suite's tests and helpers. Only `XDEV_INSTANTIATE_OP_SUITE` is meant to be used from outside.
namespace xdev::testing::op_suite {

XDEV_DEVICE_TEST_SUITE_P(Ops);

// ---- helpers --------------------------------------------------------------------------------

inline xdev::Shape sh(std::size_t n) {
  return xdev::Shape{static_cast<std::int64_t>(n)};
}
inline xdev::Shape sh(std::size_t m, std::size_t n) {
  return xdev::Shape{static_cast<std::int64_t>(m), static_cast<std::int64_t>(n)};
}

// Uniform values in [-1, 1) with full mantissas.
template <class T>
std::vector<T> noise(std::size_t n, unsigned seed) {
  std::mt19937_64 g(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(static_cast<double>(g() >> 11) * 0x1p-52 - 1.0);
  return v;
}

// Multiples of 1/1024 in [-8, 8): at most 14 significant bits, so a product with a number of at
// most 10 significant bits is exact, whether or not the compiler fuses it into an FMA.
template <class T>
std::vector<T> grid(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(-8192, 8191);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(g)) / T(1024);
  return v;
}

// Integers in [-r, r]: sums and products of a few thousand of them are exact in f32, in any order.
template <class T>
std::vector<T> small_ints(std::size_t n, unsigned seed, int r = 3) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(-r, r);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(g));
  return v;
}

// The values of every `fallback.*` counter.
inline std::map<std::string, std::uint64_t> fallback_counters() {
  std::map<std::string, std::uint64_t> out;
  for (const auto& [name, v] : xdev::metrics::snapshot())
    if (name.rfind("fallback.", 0) == 0) out.emplace(name, v);
  return out;
}

}  // namespace xdev::testing::op_suite
