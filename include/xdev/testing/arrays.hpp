/// \file
/// Small helpers for device tests: moving arrays between host vectors and devices, and comparing
/// results bit for bit with a readable failure. See docs/testing.md.
#pragma once

#include <xdev/core/half.hpp>
#include <xdev/core/shape.hpp>
#include <xdev/device/device.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/ops/ops.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <span>
#include <sstream>
#include <type_traits>
#include <vector>

namespace xdev::testing {

/// A new array of `shape` on `dev` (a `Device<B>`, giving an `Array<T, B>`, or an `AnyDevice`,
/// giving an `AnyArray<T>`) holding `values` (row-major), copied there before it returns (an empty
/// array is not copied, so no zero-byte transfer reaches the backend). Blocks: for test code, not
/// for hot paths.
/// \throws xdev::error `errc::invalid_argument` when `values` does not hold `shape.numel()` elements,
/// and what the allocation and the transfer throw.
template <class T, concepts::DeviceHandle D>
Array<T, typename D::backend_type> to_device(const D& dev, Shape shape, std::span<const T> values) {
  auto a = Array<T, typename D::backend_type>(dev.template allocate<T>(values.size()), shape);
  if (!values.empty()) dev.copy_to_device(values, a.buffer()).get();
  return a;
}

/// `to_device` from a vector.
template <class T, concepts::DeviceHandle D>
Array<T, typename D::backend_type> to_device(const D& dev, Shape shape, const std::vector<T>& values) {
  return to_device(dev, shape, std::span<const T>(values));
}

/// The elements of `a` (an `Array<T, B>` or an `AnyArray<T>`), copied to the host after the work
/// submitted before on the default stream of `a`'s device (an empty array gives an empty vector
/// without a transfer).
template <class T, class B>
std::vector<T> to_host(const Array<T, B>& a) {
  std::vector<T> out(a.size());
  if (!out.empty()) a.device().copy_to_host(a.buffer(), std::span<T>(out)).get();
  return out;
}

namespace detail {
template <class T>
std::string describe(T v) {
  std::ostringstream os;
  using Bits = std::conditional_t<sizeof(T) == 1, std::uint8_t,
                                  std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                                     std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;
  Bits bits{};
  std::memcpy(&bits, &v, sizeof(T));
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>)
    os << std::setprecision(9) << to_float(v);
  else if constexpr (std::is_floating_point_v<T>)
    os << std::setprecision(17) << v;
  else
    os << +v;
  os << " (bits 0x" << std::hex << std::setw(2 * sizeof(T)) << std::setfill('0') << +bits << ")";
  return os.str();
}
}  // namespace detail

/// Success when `actual` and `expected` have the same size and the same bytes (so NaN payloads and
/// signed zeros count, and a NaN equals itself); otherwise a failure naming the first differing
/// position, both values and their bit patterns, and how many positions differ.
///
///     EXPECT_TRUE(xdev::testing::same_bits(xdev::testing::to_host(out), expected));
template <class T>
requires(std::is_trivially_copyable_v<T>)::testing::AssertionResult
    same_bits(const std::vector<T>& actual, const std::vector<T>& expected) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "sizes differ: " << actual.size() << " vs expected " << expected.size();
  std::size_t first = actual.size(), count = 0;
  for (std::size_t i = 0; i < actual.size(); ++i)
    if (std::memcmp(&actual[i], &expected[i], sizeof(T)) != 0) {
      if (count++ == 0) first = i;
    }
  if (count == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << count << " of " << actual.size() << " elements differ; the first at " << first
                                       << ": " << detail::describe(actual[first]) << " vs expected "
                                       << detail::describe(expected[first]);
}

/// Success when `actual` and `expected` have the same size and equal values: `==` for every
/// element, except that a NaN matches a NaN (whatever its payload) and -0.0 matches +0.0. For
/// results whose value is exact but whose zero sign may depend on the order of operations.
template <class T>
requires(std::is_arithmetic_v<T>)::testing::AssertionResult
    same_values(const std::vector<T>& actual, const std::vector<T>& expected) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "sizes differ: " << actual.size() << " vs expected " << expected.size();
  std::size_t first = actual.size(), count = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const bool both_nan = actual[i] != actual[i] && expected[i] != expected[i];
    if (!(actual[i] == expected[i] || both_nan)) {
      if (count++ == 0) first = i;
    }
  }
  if (count == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << count << " of " << actual.size() << " elements differ; the first at " << first
                                       << ": " << detail::describe(actual[first]) << " vs expected "
                                       << detail::describe(expected[first]);
}

}  // namespace xdev::testing
