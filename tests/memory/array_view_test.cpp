// Views (`xdev::ArrayView`, `xdev::slice`): their geometry, their errors, and transfers of them to
// and from the host on typed devices, through AnyDevice and on streams; the fan-in that completes
// a strided transfer once.
#include "support/error_of.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/async/detail/join.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/memory/array_view.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <numeric>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace {

using Host = xdev::backends::Host;
using xdev::Range;
using xdev_test::expect_error;

// A rows x cols array on `dev` holding 0, 1, 2, ... in row-major order.
template <class Dev>
auto iota_matrix(const Dev& dev, std::int64_t rows, std::int64_t cols) {
  auto a = xdev::empty<float>(dev, {rows, cols});
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  std::iota(v.begin(), v.end(), 0.0f);
  dev.copy_to_device(std::span<const float>(v), a.buffer()).get();
  return a;
}

// The elements of rows [r0, r1) and columns [c0, c1) of a `cols`-wide iota matrix, row-major.
std::vector<float> box_of_iota(std::int64_t cols, std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
  std::vector<float> out;
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t c = c0; c < c1; ++c) out.push_back(static_cast<float>(r * cols + c));
  return out;
}

class ArrayViewTest : public ::testing::Test {
 protected:
  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 2, .threads = 2}};
  xdev::Device<Host> dev = rt.device(0);
};

TEST_F(ArrayViewTest, RowsOfARowMajorArrayAreOneContiguousRunAtTheirOffset) {
  auto a = xdev::empty<float>(dev, {8, 4});
  auto rows = xdev::slice(a, {2, 5});
  static_assert(std::is_same_v<decltype(rows), xdev::ArrayView<float, Host>>);
  EXPECT_EQ(rows.shape(), (xdev::Shape{3, 4}));
  EXPECT_EQ(rows.size(), 12u);
  EXPECT_EQ(rows.offset(), 8u);
  EXPECT_EQ(rows.stride(0), 4);
  EXPECT_EQ(rows.stride(1), 1);
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_EQ(rows.run_count(), 1u);
  EXPECT_EQ(&rows.buffer(), &a.buffer());
  EXPECT_EQ(rows.device(), dev);
}

TEST_F(ArrayViewTest, AColumnBlockIsOneRunPerRowAndSlicesCompose) {
  auto a = xdev::empty<float>(dev, {6, 10});
  auto cols = xdev::slice(a, xdev::all, {3, 7});
  EXPECT_EQ(cols.shape(), (xdev::Shape{6, 4}));
  EXPECT_EQ(cols.offset(), 3u);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(cols.run_count(), 6u);

  auto box = cols.slice({1, 3}, {1});  // rows 1-2 of the block, its columns 1 to the end
  EXPECT_EQ(box.shape(), (xdev::Shape{2, 3}));
  EXPECT_EQ(box.offset(), 1u * 10 + 3 + 1);
  EXPECT_EQ(box.run_count(), 2u);

  auto one_row = xdev::slice(a, {4, 5}, {2, 9});  // one row of a block: contiguous after all
  EXPECT_TRUE(one_row.is_contiguous());
  EXPECT_EQ(one_row.offset(), 42u);

  auto whole = xdev::slice(a, xdev::all);
  EXPECT_TRUE(whole.is_contiguous());
  EXPECT_EQ(whole.size(), a.size());
}

TEST_F(ArrayViewTest, AConstArrayGivesAViewOfConstElements) {
  const auto a = xdev::empty<float>(dev, {4, 4});
  auto v = xdev::slice(a, {1, 2});
  static_assert(std::is_same_v<decltype(v), xdev::ArrayView<const float, Host>>);
  xdev::ArrayView<float, Host> mutable_view;
  xdev::ArrayView<const float, Host> from_mutable = mutable_view;  // converts one way only
  static_assert(!std::is_convertible_v<xdev::ArrayView<const float, Host>, xdev::ArrayView<float, Host>>);
  EXPECT_TRUE(from_mutable.empty());
  EXPECT_EQ(from_mutable.size(), 0u);
  std::vector<float> none;
  expect_error(xdev::errc::invalid_argument, [&] { dev.copy_to_host(from_mutable, std::span<float>(none)).get(); },
               {"no array"});
  EXPECT_EQ(v.size(), 4u);
}

TEST_F(ArrayViewTest, ABadRangeIsAnErrorNamingTheDimensionAndTheShape) {
  auto a = xdev::empty<float>(dev, {4, 6});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 (void)xdev::slice(a, {3, 2});
               },
               {"[3, 2)", "dimension 0", "[4, 6]"});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 (void)xdev::slice(a, xdev::all, {2, 7});
               },
               {"[2, 7)", "dimension 1", "[0, 6)"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)xdev::slice(a, {-1, 2}); }, {"[-1, 2)", "dimension 0"});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 (void)xdev::slice(a, {0, 1}, {0, 1}, {0, 1});
               },
               {"3 ranges", "rank 2"});
  expect_error(xdev::errc::invalid_argument, [&] { (void)xdev::slice(a, xdev::all).stride(2); }, {"dimension 2"});
}

TEST_F(ArrayViewTest, RowsAndABoxGoToTheHostDenselyInRowMajorOrder) {
  auto a = iota_matrix(dev, 5, 7);
  std::vector<float> rows(2 * 7);
  dev.copy_to_host(xdev::slice(a, {1, 3}), std::span<float>(rows)).get();
  EXPECT_EQ(rows, box_of_iota(7, 1, 3, 0, 7));

  std::vector<float> box(3 * 4);
  dev.copy_to_host(xdev::slice(a, {2, 5}, {1, 5}), std::span<float>(box)).get();
  EXPECT_EQ(box, box_of_iota(7, 2, 5, 1, 5));

  const auto& ca = a;  // a const view reads the same
  std::vector<float> col(5);
  dev.copy_to_host(xdev::slice(ca, xdev::all, {6, 7}), std::span<float>(col)).get();
  EXPECT_EQ(col, box_of_iota(7, 0, 5, 6, 7));
}

TEST_F(ArrayViewTest, WritingABoxChangesItsElementsAndNothingAroundIt) {
  auto a = iota_matrix(dev, 4, 5);
  const std::vector<float> patch{-1, -2, -3, -4, -5, -6};
  dev.copy_to_device(std::span<const float>(patch), xdev::slice(a, {1, 3}, {2, 5})).get();
  std::vector<float> all(20);
  dev.copy_to_host(a.buffer(), std::span<float>(all)).get();
  std::vector<float> expected(20);
  std::iota(expected.begin(), expected.end(), 0.0f);
  for (int r = 1; r < 3; ++r)
    for (int c = 2; c < 5; ++c)
      expected[static_cast<std::size_t>(r * 5 + c)] = patch[static_cast<std::size_t>((r - 1) * 3 + c - 2)];
  EXPECT_EQ(all, expected);
}

TEST_F(ArrayViewTest, ARankThreeWindowKeepsItsDenseInnerDimensionsInOneRun) {
  auto a = xdev::empty<float>(dev, {3, 4, 5});
  std::vector<float> v(60);
  std::iota(v.begin(), v.end(), 0.0f);
  dev.copy_to_device(std::span<const float>(v), a.buffer()).get();
  auto mid = xdev::slice(a, xdev::all, {1, 3});  // [3, 2, 5]: one run of 10 per outer index
  EXPECT_EQ(mid.run_count(), 3u);
  std::vector<float> out(30);
  dev.copy_to_host(mid, std::span<float>(out)).get();
  std::vector<float> expected;
  for (int i = 0; i < 3; ++i)
    for (int j = 1; j < 3; ++j)
      for (int k = 0; k < 5; ++k) expected.push_back(static_cast<float>(i * 20 + j * 5 + k));
  EXPECT_EQ(out, expected);

  auto inner = xdev::slice(a, {1, 2}, {0, 4}, {1, 3});  // [1, 4, 2]: one run of 2 per row
  EXPECT_EQ(inner.run_count(), 4u);
  std::vector<float> small(8);
  dev.copy_to_host(inner, std::span<float>(small)).get();
  EXPECT_EQ(small, (std::vector<float>{21, 22, 26, 27, 31, 32, 36, 37}));
}

TEST_F(ArrayViewTest, HostDataOfAWindowIsItsFirstElementAndItsStridesIndexIt) {
  auto a = iota_matrix(dev, 6, 5);
  float* base = a.buffer().host_data();
  auto rows = xdev::slice(a, {2, 4});
  EXPECT_EQ(rows.host_data(), base + 10);
  EXPECT_EQ(*rows.host_data(), 10.0f);
  // A 3 x 2 box at (1, 2): element (i, j) is i * stride(0) + j * stride(1) from its first.
  auto box = xdev::slice(a, {1, 4}, {2, 4});
  float* p = box.host_data();
  ASSERT_EQ(p, base + 7);
  std::vector<float> seen;
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 2; ++j) seen.push_back(p[i * box.stride(0) + j * box.stride(1)]);
  EXPECT_EQ(seen, box_of_iota(5, 1, 4, 2, 4));
  // Through a window of the window, and a const view reads the same element.
  auto inner = box.slice({1, 3}, {1, 2});
  EXPECT_EQ(inner.host_data(), base + 13);
  const auto& ca = a;
  auto cview = xdev::slice(ca, {3, 4});
  static_assert(std::is_same_v<decltype(cview.host_data()), const float*>);
  EXPECT_EQ(cview.host_data(), base + 15);
  EXPECT_EQ(xdev::slice(a, {2, 2}).host_data(), nullptr) << "an empty window has no first element";
  using NoView = xdev::ArrayView<float, Host>;
  EXPECT_THROW((void)NoView{}.host_data(), xdev::error);
}

TEST_F(ArrayViewTest, AnEmptyWindowTransfersNothingAndCompletes) {
  auto a = iota_matrix(dev, 3, 3);
  std::vector<float> none;
  dev.copy_to_host(xdev::slice(a, {2, 2}), std::span<float>(none)).get();
  dev.copy_to_device(std::span<const float>(none), xdev::slice(a, xdev::all, {1, 1})).get();
}

TEST_F(ArrayViewTest, SizeAndDeviceMismatchesAreErrorsBeforeAnythingRuns) {
  auto a = iota_matrix(dev, 4, 4);
  std::vector<float> three(3);
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 dev.copy_to_host(xdev::slice(a, {0, 1}), std::span<float>(three)).get();
               },
               {"copy_to_host"});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 dev.copy_to_device(std::span<const float>(three), xdev::slice(a, {0, 1})).get();
               },
               {"copy_to_device"});
  std::vector<float> four(4);
  auto other = rt.device(1);
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 other.copy_to_host(xdev::slice(a, {0, 1}), std::span<float>(four)).get();
               },
               {"copy_to_host"});
  std::vector<float> all(16);
  dev.copy_to_host(a.buffer(), std::span<float>(all)).get();
  EXPECT_EQ(all, box_of_iota(4, 0, 4, 0, 4)) << "a rejected copy changed the array";
}

TEST_F(ArrayViewTest, ErasedViewsTransferThroughAnyDeviceAndStreams) {
  xdev::AnyDevice any(dev);
  auto a = xdev::empty<float>(any, {6, 8});
  std::vector<float> v(48);
  std::iota(v.begin(), v.end(), 0.0f);
  any.copy_to_device(std::span<const float>(v), a).get();

  auto box = xdev::slice(a, {1, 4}, {2, 6});
  static_assert(std::is_same_v<decltype(box), xdev::AnyArrayView<float>>);
  std::vector<float> out(12);
  any.copy_to_host(box, std::span<float>(out)).get();
  EXPECT_EQ(out, box_of_iota(8, 1, 4, 2, 6));

  // On a second stream, ordered after its own earlier work: write a column block, read it back.
  auto stream = any.make_stream();
  const std::vector<float> col{100, 101, 102, 103, 104, 105};
  auto written = stream.copy_to_device(std::span<const float>(col), xdev::slice(a, xdev::all, {7, 8}));
  std::vector<float> back(6);
  stream.copy_to_host(xdev::slice(a, xdev::all, {7, 8}), std::span<float>(back)).get();
  written.get();
  EXPECT_EQ(back, col);

  const auto& ca = a;
  std::vector<float> first_row(8);
  any.copy_to_host(xdev::slice(ca, {0, 1}), std::span<float>(first_row)).get();
  EXPECT_EQ(first_row, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 100}));
}

// ---- copies between two windows (device to device) ------------------------------------------------

// The whole of a rows x cols array on `dev`, row-major.
template <class Dev, class A>
std::vector<float> whole(const Dev& dev, const A& a) {
  std::vector<float> out(a.size());
  dev.copy_to_host(a.buffer(), std::span<float>(out)).get();
  return out;
}

TEST_F(ArrayViewTest, ABoxCopiesIntoABoxOfAnArrayOnAnotherDeviceAndNothingAroundItChanges) {
  auto a = iota_matrix(dev, 6, 8);
  const auto other = rt.device(1);
  auto b = xdev::empty<float>(other, {6, 10});
  const std::vector<float> minus(60, -1.0f);
  other.copy_to_device(std::span<const float>(minus), b.buffer()).get();

  // Strided to strided (rows of 4 and of 4: one piece per row), then contiguous rows into a strided
  // box (two rows of 8: one piece per destination row), on the source's device.
  dev.copy(xdev::slice(a, {1, 4}, {2, 6}), xdev::slice(b, {0, 3}, {3, 7})).get();
  dev.default_stream().copy(xdev::slice(a, {4, 6}), xdev::slice(b, {4, 6}, {1, 9})).get();
  std::vector<float> expected = minus;
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t c = 0; c < 4; ++c)
      expected[static_cast<std::size_t>(r * 10 + 3 + c)] = float((r + 1) * 8 + 2 + c);
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t c = 0; c < 8; ++c)
      expected[static_cast<std::size_t>((r + 4) * 10 + 1 + c)] = float((r + 4) * 8 + c);
  EXPECT_EQ(whole(other, b), expected);
  EXPECT_EQ(whole(dev, a), box_of_iota(8, 0, 6, 0, 8)) << "the source changed";
  EXPECT_EQ(other.transfer_stats().bytes_from_peer, (12u + 16u) * sizeof(float));
}

TEST_F(ArrayViewTest, WindowsOfOneArrayThatShareNoElementCopyEvenWhenTheyInterleave) {
  auto a = iota_matrix(dev, 4, 3);
  const auto& ca = a;
  dev.copy(xdev::slice(ca, xdev::all, {0, 1}), xdev::slice(a, xdev::all, {1, 2})).get();  // column 0 -> 1
  EXPECT_EQ(whole(dev, a), (std::vector<float>{0, 0, 2, 3, 3, 5, 6, 6, 8, 9, 9, 11}));
}

TEST_F(ArrayViewTest, AWindowCopyWithOtherShapesOrSharedElementsIsAnErrorAndChangesNothing) {
  auto a = iota_matrix(dev, 4, 4);
  auto b = iota_matrix(dev, 4, 4);
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 dev.copy(xdev::slice(a, {0, 2}, {0, 3}), xdev::slice(b, {0, 3}, {0, 2})).get();
               },
               {"copy", "shape [2, 3]", "shape [3, 2]"});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 dev.copy(xdev::slice(a, {0, 3}), xdev::slice(a, {1, 4})).get();
               },
               {"copy", "share elements"});
  // Only element (1, 1) is in both boxes.
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 dev.copy(xdev::slice(a, {0, 2}, {0, 2}), xdev::slice(a, {1, 3}, {1, 3})).get();
               },
               {"share elements"});
  xdev::Runtime<Host> elsewhere{{}, Host::Options{.devices = 1, .threads = 1}};
  auto c = iota_matrix(elsewhere.device(0), 4, 4);
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 dev.copy(xdev::slice(a, {0, 1}), xdev::slice(c, {0, 1})).get();
               },
               {"different runtimes"});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 rt.device(1).copy(xdev::slice(a, {0, 1}), xdev::slice(b, {0, 1})).get();
               },
               {"neither source", "nor destination"});
  EXPECT_EQ(whole(dev, a), box_of_iota(4, 0, 4, 0, 4));
  EXPECT_EQ(whole(dev, b), box_of_iota(4, 0, 4, 0, 4));
}

TEST_F(ArrayViewTest, ErasedWindowsCopyThroughAnyDeviceAndStreams) {
  xdev::AnyDevice any(dev), other(rt.device(1));
  auto a = xdev::empty<float>(any, {5, 6});
  std::vector<float> v(30);
  std::iota(v.begin(), v.end(), 0.0f);
  any.copy_to_device(std::span<const float>(v), a).get();
  auto b = xdev::empty<float>(other, {3, 3});
  const auto& ca = a;
  // A const source on the destination's stream: the box of rows 1-3, columns 2-4.
  other.make_stream().copy(xdev::slice(ca, {1, 4}, {2, 5}), xdev::slice(b, xdev::all)).get();
  std::vector<float> out(9);
  other.copy_to_host(b, std::span<float>(out)).get();
  EXPECT_EQ(out, box_of_iota(6, 1, 4, 2, 5));
  any.copy(xdev::slice(b, {0, 1}), xdev::slice(a, {4, 5}, {0, 3})).get();
  std::vector<float> row(6);
  any.copy_to_host(xdev::slice(a, {4, 5}), std::span<float>(row)).get();
  EXPECT_EQ(row, (std::vector<float>{8, 9, 10, 27, 28, 29}));
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 any.copy(xdev::slice(a, {0, 2}), xdev::slice(a, {1, 3})).get();
               },
               {"share elements"});
}

// ---- detail::start_parts: one completion for many backend calls ----------------------------------

TEST(StartParts, CompletesOnceAfterEveryPartWithTheFirstError) {
  std::vector<xdev::Completion> held;
  int calls = 0;
  std::exception_ptr got;
  xdev::detail::start_parts(
      3, [&](std::size_t, xdev::Completion part) { held.push_back(std::move(part)); },
      [&](std::exception_ptr ep) {
        ++calls;
        got = std::move(ep);
      });
  EXPECT_EQ(calls, 0) << "completed before its parts";
  held[1](std::make_exception_ptr(std::runtime_error("second")));
  held[2](std::make_exception_ptr(std::runtime_error("third")));
  EXPECT_EQ(calls, 0);
  held[0](nullptr);
  ASSERT_EQ(calls, 1);
  try {
    std::rethrow_exception(got);
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "second");
  }
}

TEST(StartParts, APartThatThrowsStopsTheRestAndIsReportedAfterTheStartedOnes) {
  std::vector<xdev::Completion> held;
  std::size_t started = 0;
  int calls = 0;
  std::exception_ptr got;
  xdev::detail::start_parts(
      5,
      [&](std::size_t i, xdev::Completion part) {
        if (i == 2) throw std::runtime_error("part 2 could not start");
        ++started;
        held.push_back(std::move(part));
      },
      [&](std::exception_ptr ep) {
        ++calls;
        got = std::move(ep);
      });
  EXPECT_EQ(started, 2u);
  EXPECT_EQ(calls, 0) << "completed while started parts were still running";
  for (auto& h : held) h(nullptr);
  ASSERT_EQ(calls, 1);
  EXPECT_TRUE(got != nullptr);
}

// A backend may complete a part inside the call that starts it. Completing the whole operation
// there would let its runtime be destroyed while the starting thread is still inside that backend
// call: `done` waits for the loop too.
TEST(StartParts, PartsThatCompleteInsideTheirStartCompleteTheWholeOnlyAfterTheLoop) {
  int calls = 0;
  bool loop_over = false;
  xdev::detail::start_parts(
      3,
      [&](std::size_t, xdev::Completion part) {
        part(nullptr);
        EXPECT_EQ(calls, 0) << "the operation completed inside a part's start";
      },
      [&](std::exception_ptr ep) {
        ++calls;
        loop_over = true;
        EXPECT_FALSE(ep);
      });
  EXPECT_TRUE(loop_over);
  EXPECT_EQ(calls, 1);
}

TEST(StartParts, NoPartsCompletesAtOnce) {
  int calls = 0;
  xdev::detail::start_parts(
      0, [](std::size_t, xdev::Completion) { FAIL() << "no part to start"; },
      [&](std::exception_ptr ep) {
        ++calls;
        EXPECT_FALSE(ep);
      });
  EXPECT_EQ(calls, 1);
}

}  // namespace
