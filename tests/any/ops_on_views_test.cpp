// Ops on windows of arrays (`xdev::slice`): every op takes contiguous views, writes only its
// window, and runs natively where the backend can move a handle on (`offset_handle`: the host
// backend) or through the CPU fallback, which stages only the window, where it cannot; on typed
// devices and through AnyDevice. Strided views, partial overlaps and outputs that share an input's
// memory are errors that change nothing.
#include "support/error_of.hpp"

#include <xdev/any/any_device.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/core/metrics.hpp>
#include <xdev/device/device.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/memory/array.hpp>
#include <xdev/memory/array_view.hpp>
#include <xdev/ops/ops.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <future>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using Host = xdev::backends::Host;
using xdev::Range;
using xdev_test::expect_error;

// The host backend without `offset_handle`: an op on a window at an offset runs through the CPU
// fallback, as on a backend whose handles are not addresses (a plugin, OpenCL).
class HostWithoutOffsets : public Host {
 public:
  HostWithoutOffsets() : Host(Host::Options{.devices = 1, .threads = 2, .name = "NOOFFSETS"}) {}
  HostWithoutOffsets(const HostWithoutOffsets&) = delete;
  HostWithoutOffsets& operator=(const HostWithoutOffsets&) = delete;
  memory_handle offset_handle(memory_handle, std::size_t) const noexcept = delete;
};
static_assert(xdev::concepts::OffsetsHandles<Host>);
static_assert(!xdev::concepts::OffsetsHandles<HostWithoutOffsets>);

struct Fixture {
  xdev::Runtime<Host> host{{}, Host::Options{.devices = 1, .threads = 2}};
  xdev::Runtime<HostWithoutOffsets> plain{};
};

// The four kinds of queue: typed or erased, on a backend that offsets handles or not.
struct TypedHost {
  static constexpr bool native = true;
  static auto device(Fixture& f) { return f.host.device(0); }
};
struct TypedPlain {
  static constexpr bool native = false;
  static auto device(Fixture& f) { return f.plain.device(0); }
};
struct ErasedHost {
  static constexpr bool native = true;
  static xdev::AnyDevice device(Fixture& f) { return f.host.device(0); }
};
struct ErasedPlain {
  static constexpr bool native = false;
  static xdev::AnyDevice device(Fixture& f) { return f.plain.device(0); }
};

template <class Dev, class T>
auto array_of(const Dev& dev, xdev::Shape shape, const std::vector<T>& values) {
  auto a = xdev::empty<T>(dev, shape);
  dev.copy_to_device(std::span<const T>(values), a.buffer()).get();
  return a;
}

template <class Dev, class T>
std::vector<T> host_of(const Dev& dev, const xdev::Array<T, typename Dev::backend_type>& a) {
  std::vector<T> v(a.size());
  dev.copy_to_host(a.buffer(), std::span<T>(v)).get();
  return v;
}

std::vector<float> iota(std::size_t n, float from = 0.0f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

std::uint64_t fallbacks() {
  std::uint64_t n = 0;
  for (const char* op :
       {"fill", "scale", "axpy", "add", "mul", "exp", "sum", "dot", "gemm", "gather", "convert", "rng_uniform"})
    n += xdev::metrics::value(std::string("fallback.") + op);
  return n;
}

template <class Kind>
class OpsOnViews : public ::testing::Test {
 protected:
  Fixture f;
  decltype(Kind::device(f)) dev = Kind::device(f);

  // Whether the ops since `before` ran natively (no fallback) or through the fallback (every op).
  void expect_path(std::uint64_t before, std::uint64_t ops) const {
    if (Kind::native)
      EXPECT_EQ(fallbacks(), before) << "an op on a window ran through the fallback on " << dev.name();
    else
      EXPECT_EQ(fallbacks(), before + ops)
          << "an op on a window at an offset ran natively on " << dev.name() << ", which cannot offset handles";
  }
};

using Kinds = ::testing::Types<TypedHost, TypedPlain, ErasedHost, ErasedPlain>;
TYPED_TEST_SUITE(OpsOnViews, Kinds);

TYPED_TEST(OpsOnViews, ElementWiseOpsWriteTheirWindowAndNothingAroundIt) {
  const auto& dev = this->dev;
  auto a = array_of(dev, {6, 4}, iota(24));
  auto b = array_of(dev, {3, 4}, std::vector<float>(12, -1.0f));
  std::vector<float> want = iota(24), want_b(12, -1.0f);
  const auto before = fallbacks();

  xdev::ops::scale(dev, xdev::slice(a, {2, 4}), 2.0f).get();  // rows 2-3 doubled
  for (std::size_t i = 8; i < 16; ++i) want[i] *= 2.0f;
  xdev::ops::fill(dev, xdev::slice(b, {1, 2}), 7.0f).get();  // row 1 of b
  for (std::size_t i = 4; i < 8; ++i) want_b[i] = 7.0f;
  // Two windows of one array that share nothing: y (rows 4-5) += 0.5 * x (rows 0-1).
  xdev::ops::axpy(dev, 0.5f, xdev::slice(std::as_const(a), {0, 2}), xdev::slice(a, {4, 6})).get();
  for (std::size_t i = 0; i < 8; ++i) want[16 + i] += 0.5f * want[i];
  // row 2 of b = row 0 of a + row 5 of a
  xdev::ops::add(dev, xdev::slice(a, {0, 1}), xdev::slice(a, {5, 6}), xdev::slice(b, {2, 3})).get();
  for (std::size_t i = 0; i < 4; ++i) want_b[8 + i] = want[i] + want[20 + i];
  // In place: row 1 of a = row 1 of a * row 3 of a (the output is the input itself).
  xdev::ops::mul(dev, xdev::slice(a, {1, 2}), xdev::slice(a, {3, 4}), xdev::slice(a, {1, 2})).get();
  for (std::size_t i = 0; i < 4; ++i) want[4 + i] *= want[12 + i];
  xdev::ops::exp(dev, xdev::slice(b, {0, 1}), xdev::slice(b, {0, 1})).get();
  for (std::size_t i = 0; i < 4; ++i) want_b[i] = std::exp(want_b[i]);
  this->expect_path(before, 5);  // `exp` on row 0 is at offset 0: natively everywhere

  EXPECT_EQ(host_of(dev, a), want);
  const auto got_b = host_of(dev, b);
  for (std::size_t i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(got_b[i], want_b[i]) << "element " << i << " of b";
}

TYPED_TEST(OpsOnViews, ReductionsReadOnlyTheirWindow) {
  const auto& dev = this->dev;
  auto a = array_of(dev, {6, 4}, iota(24));
  auto out = array_of(dev, {8}, std::vector<float>(8, -1.0f));
  const auto before = fallbacks();

  EXPECT_EQ(xdev::ops::sum(dev, xdev::slice(a, {2, 4})).get(), 8.0f + 9 + 10 + 11 + 12 + 13 + 14 + 15);
  float dot = 0;
  for (int i = 0; i < 4; ++i) dot += static_cast<float>(4 + i) * static_cast<float>(20 + i);
  EXPECT_EQ(xdev::ops::dot(dev, xdev::slice(a, {1, 2}), xdev::slice(a, {5, 6})).get(), dot);
  // Rows 1-3 summed down their columns into elements 2-5 of `out`.
  xdev::ops::sum(dev, xdev::slice(a, {1, 4}), 0, xdev::slice(out, {2, 6})).get();
  this->expect_path(before, 3);
  EXPECT_EQ(host_of(dev, out), (std::vector<float>{-1, -1, 4 + 8 + 12, 5 + 9 + 13, 6 + 10 + 14, 7 + 11 + 15, -1, -1}));
}

TYPED_TEST(OpsOnViews, GemmGatherConvertAndRandomNumbersOnWindows) {
  const auto& dev = this->dev;
  // A: rows 1-2 of a 4x3 iota; B: 3x2; C: rows 2-3 of a 5x2 array of -1.
  auto a = array_of(dev, {4, 3}, iota(12));
  auto b = array_of(dev, {3, 2}, iota(6, 1.0f));
  auto c = array_of(dev, {5, 2}, std::vector<float>(10, -1.0f));
  const auto before = fallbacks();
  xdev::ops::gemm(dev, xdev::slice(a, {1, 3}), b, xdev::slice(c, {2, 4})).get();
  std::vector<float> want_c(10, -1.0f);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      float s = 0;
      for (int k = 0; k < 3; ++k) s += static_cast<float>((1 + i) * 3 + k) * static_cast<float>(k * 2 + j + 1);
      want_c[static_cast<std::size_t>(4 + i * 2 + j)] = s;
    }
  EXPECT_EQ(host_of(dev, c), want_c);

  // Rows of a table window, picked by a window of the indices, into a window of the output.
  auto index = xdev::empty<std::int32_t>(dev, {4});
  const std::vector<std::int32_t> idx{9, 1, 0, 9};
  dev.copy_to_device(std::span<const std::int32_t>(idx), index.buffer()).get();
  auto rows = array_of(dev, {4, 3}, std::vector<float>(12, -1.0f));
  xdev::ops::gather(dev, xdev::slice(a, {2, 4}), xdev::slice(index, {1, 3}), xdev::slice(rows, {1, 3})).get();
  EXPECT_EQ(host_of(dev, rows), (std::vector<float>{-1, -1, -1, 9, 10, 11, 6, 7, 8, -1, -1, -1}));

  auto wide = array_of(dev, {2, 3}, std::vector<double>(6, 0.0));
  xdev::ops::convert(dev, xdev::slice(a, {3, 4}), xdev::slice(wide, {1, 2})).get();
  EXPECT_EQ(host_of(dev, wide), (std::vector<double>{0, 0, 0, 9, 10, 11}));

  // A window gets the same numbers as an array of its size with the same stream.
  auto r = array_of(dev, {20}, std::vector<float>(20, 0.0f));
  auto alone = array_of(dev, {10}, std::vector<float>(10, 0.0f));
  xdev::ops::rng_uniform(dev, xdev::slice(r, {5, 15}), {.seed = 42}).get();
  xdev::ops::rng_uniform(dev, alone, {.seed = 42}).get();
  this->expect_path(before, TypeParam::native ? 0 : 4);  // `alone` is at offset 0: natively everywhere
  const auto got = host_of(dev, r), want = host_of(dev, alone);
  for (std::size_t i = 0; i < 20; ++i) EXPECT_EQ(got[i], i >= 5 && i < 15 ? want[i - 5] : 0.0f) << "element " << i;
}

// `c = alpha * op(a) * op(b) + beta * c` on the host, over row-major matrices with row strides.
std::vector<float> reference_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
                                  const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
                                  std::vector<float> c, std::size_t c0, std::size_t ldc) {
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      float s = 0;
      for (std::size_t p = 0; p < k; ++p)
        s += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      float& out = c[c0 + i * ldc + j];
      out = alpha * s + beta * out;
    }
  return c;
}

TYPED_TEST(OpsOnViews, GemmTakesBlocksOfColumnsThroughItsRowStrides) {
  const auto& dev = this->dev;
  // A: columns 1-3 of a 4x6 array (lda 6, offset 1); B^T: columns 2-4 of a 2x7 array; C: columns
  // 2-3 of a 4x5 array of ones, with beta 0.5 (read and written, the columns around kept).
  const auto ha = iota(24), hb = iota(14, 1.0f);
  const std::vector<float> hc(20, 1.0f);
  auto a = array_of(dev, {4, 6}, ha);
  auto b = array_of(dev, {2, 7}, hb);
  auto c = array_of(dev, {4, 5}, hc);
  const auto before = fallbacks();
  xdev::ops::gemm(dev, xdev::slice(a, xdev::all, {1, 4}), xdev::slice(b, xdev::all, {2, 5}),
                  xdev::slice(c, xdev::all, {2, 4}), {.trans_b = true, .alpha = 2.0f, .beta = 0.5f})
      .get();
  this->expect_path(before, 1);
  const auto want = reference_gemm(false, true, 4, 2, 3, 2.0f, ha.data() + 1, 6, hb.data() + 2, 7, 0.5f, hc, 2, 5);
  EXPECT_EQ(host_of(dev, c), want);

  // op(a) = a^T with `a` a block of columns; beta 0: c's columns are not read, the others kept.
  auto d = array_of(dev, {3, 6}, std::vector<float>(18, -1.0f));
  xdev::ops::gemm(dev, xdev::slice(a, xdev::all, {3, 6}), xdev::slice(a, xdev::all, {0, 2}),
                  xdev::slice(d, xdev::all, {4, 6}), {.trans_a = true})
      .get();
  const auto want_d = reference_gemm(true, false, 3, 2, 4, 1.0f, ha.data() + 3, 6, ha.data(), 6, 0.0f,
                                     std::vector<float>(18, -1.0f), 4, 6);
  EXPECT_EQ(host_of(dev, d), want_d);

  // Interleaved blocks of one array share no element: c may be a block beside a and b.
  auto e = array_of(dev, {2, 6}, iota(12));
  xdev::ops::gemm(dev, xdev::slice(e, xdev::all, {0, 2}), xdev::slice(e, xdev::all, {2, 4}),
                  xdev::slice(e, xdev::all, {4, 6}))
      .get();
  const auto he = iota(12);
  EXPECT_EQ(host_of(dev, e),
            reference_gemm(false, false, 2, 2, 2, 1.0f, he.data(), 6, he.data() + 2, 6, 0.0f, he, 4, 6));
}

TYPED_TEST(OpsOnViews, GemmsIntoNeighbouringColumnBlocksOnTwoStreamsKeepEachOthersColumns) {
  // Through the fallback, `c` comes back row by row: the block beside it, written at the same
  // time by another stream, is not overwritten with what was staged.
  const auto& dev = this->dev;
  auto a = array_of(dev, {8, 8}, std::vector<float>(64, 1.0f));
  auto c = array_of(dev, {8, 8}, std::vector<float>(64, 0.0f));
  auto s1 = dev.make_stream();
  auto s2 = dev.make_stream();
  std::vector<std::future<void>> pending;
  for (int i = 0; i < 10; ++i) {
    pending.push_back(xdev::ops::gemm(s1, a, xdev::slice(std::as_const(a), xdev::all, {0, 4}),
                                      xdev::slice(c, xdev::all, {0, 4}), {.beta = 1.0f}));
    pending.push_back(xdev::ops::gemm(s2, a, xdev::slice(std::as_const(a), xdev::all, {4, 8}),
                                      xdev::slice(c, xdev::all, {4, 8}), {.alpha = 2.0f, .beta = 1.0f}));
  }
  for (auto& p : pending) p.get();
  const auto got = host_of(dev, c);
  for (std::size_t i = 0; i < 64; ++i) ASSERT_EQ(got[i], i % 8 < 4 ? 80.0f : 160.0f) << "element " << i;
}

TYPED_TEST(OpsOnViews, WindowsOfOneArrayOnTwoStreamsAtOnceKeepEachOthersResults) {
  // The fallback writes back only its window: two ops on disjoint halves, in flight together on
  // two streams, must not undo each other.
  const auto& dev = this->dev;
  auto a = array_of(dev, {2, 512}, std::vector<float>(1024, 1.0f));
  auto s1 = dev.make_stream();
  auto s2 = dev.make_stream();
  std::vector<std::future<void>> pending;
  for (int i = 0; i < 20; ++i) {
    pending.push_back(xdev::ops::scale(s1, xdev::slice(a, {0, 1}), 2.0f));
    pending.push_back(xdev::ops::scale(s2, xdev::slice(a, {1, 2}), 0.5f));
  }
  for (auto& p : pending) p.get();
  const auto got = host_of(dev, a);
  for (std::size_t i = 0; i < 1024; ++i) ASSERT_EQ(got[i], i < 512 ? 1048576.0f : 1.0f / 1048576.0f) << "element " << i;
}

TYPED_TEST(OpsOnViews, StridedWindowsOverlapsAndSharedOutputsAreErrorsThatChangeNothing) {
  const auto& dev = this->dev;
  auto a = array_of(dev, {4, 4}, iota(16));
  auto column = xdev::slice(a, xdev::all, {1, 2});
  expect_error(xdev::errc::invalid_argument, [&] { xdev::ops::scale(dev, column, 2.0f).get(); },
               {"scale", "x is a strided view", "[4, 1]", "4 contiguous runs", "ops take arrays and contiguous views"});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 xdev::ops::add(dev, xdev::slice(a, {0, 2}), xdev::slice(a, {2, 4}), xdev::slice(a, {1, 3})).get();
               },
               {"add", "out overlaps a in part"});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 xdev::ops::gemm(dev, xdev::slice(a, {0, 2}), xdev::slice(a, {2, 4}), xdev::slice(a, {1, 3})).get();
               },
               {"gemm", "c shares memory with a"});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 xdev::ops::gemm(dev, xdev::slice(a, {0, 2}, {0, 2}), xdev::slice(a, {2, 4}, {0, 2}),
                                 column.slice({0, 2}))
                     .get();
               },
               {"gemm", "c shares memory with a"});  // column 1 of rows 0-1 is inside a
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 xdev::ops::fill(dev, decltype(xdev::slice(a, {0, 1})){}, 1.0f).get();
               },
               {"fill", "x is a default-constructed ArrayView"});
  expect_error(xdev::errc::invalid_argument,
               [&] {
                 xdev::ops::axpy(dev, 1.0f, xdev::slice(a, {0, 1}), xdev::slice(a, {2, 4})).get();
               },
               {"axpy", "x has shape [1, 4] but y has shape [2, 4]"});
  EXPECT_EQ(host_of(dev, a), iota(16));
}

// What the fallback stages for a window: its own bytes, in and out, and no more.
TEST(OpsOnViewsStaging, AWindowAtAnOffsetStagesOnlyItsBytes) {
  Fixture f;
  xdev::AnyDevice dev = f.plain.device(0);
  auto a = array_of(dev, {64, 16}, iota(1024));
  const auto before = dev.transfer_stats();
  xdev::ops::scale(dev, xdev::slice(a, {10, 12}), 3.0f).get();
  const auto after = dev.transfer_stats();
  EXPECT_EQ(after.bytes_to_host - before.bytes_to_host, 2 * 16 * sizeof(float));
  EXPECT_EQ(after.bytes_from_host - before.bytes_from_host, 2 * 16 * sizeof(float));
}

// A host backend without `offset_handle` whose transfers complete inside the call (which the
// completion rule allows: docs/writing-a-backend.md).
class InlineTransfers : public HostWithoutOffsets {
 public:
  void copy_to_device(std::size_t, const void* src, memory_handle dst, std::size_t offset, std::size_t bytes,
                      xdev::Completion done) {
    std::memcpy(static_cast<std::byte*>(dst) + offset, src, bytes);
    done(nullptr);
  }
  void copy_to_host(std::size_t, memory_handle src, std::size_t offset, void* dst, std::size_t bytes,
                    xdev::Completion done) {
    std::memcpy(dst, static_cast<const std::byte*>(src) + offset, bytes);
    done(nullptr);
  }
};

TEST(OpsOnViewsStaging, ATallBlockOfColumnsGoesBackWithoutNestingACallPerRow) {
  // 200 000 rows written back one transfer each, every one completing inside its call: started
  // in a loop, not chained (a chain would nest a call per row, past any thread's stack).
  xdev::Runtime<InlineTransfers> rt{};
  const auto dev = rt.device(0);
  constexpr std::size_t rows = 200000;
  auto a = array_of(dev, {rows, 1}, std::vector<float>(rows, 2.0f));
  auto b = array_of(dev, {1, 1}, std::vector<float>{3.0f});
  auto c = array_of(dev, {rows, 2}, std::vector<float>(2 * rows, -1.0f));
  const auto before = xdev::metrics::value("fallback.gemm");
  xdev::ops::gemm(dev, a, b, xdev::slice(c, xdev::all, {1, 2})).get();
  EXPECT_EQ(xdev::metrics::value("fallback.gemm"), before + 1);
  const auto got = host_of(dev, c);
  for (std::size_t i = 0; i < 2 * rows; ++i) ASSERT_EQ(got[i], i % 2 == 0 ? -1.0f : 6.0f) << "element " << i;
}

// A backend whose handles cannot be moved on but which opens windows (`concepts::OpensWindows`,
// as OpenCL's sub-buffers): only at multiples of 16 bytes here. Ops on such windows run its own
// members, on typed devices and through AnyDevice; every window closes once its op's member
// returned; an op on a window elsewhere runs through the fallback.
class HostWithWindows : public HostWithoutOffsets {
 public:
  std::optional<memory_handle> open_window(std::size_t, memory_handle h, std::size_t bytes) {
    if (bytes % 16 != 0) return std::nullopt;
    ++opened;
    return static_cast<std::byte*>(h) + bytes;
  }
  void close_window(std::size_t, memory_handle) noexcept { ++closed; }
  int opened = 0;
  int closed = 0;
};
static_assert(xdev::concepts::OpensWindows<HostWithWindows>);

template <class Dev>
void ops_on_opened_windows(const Dev& dev, HostWithWindows& backend) {
  auto a = array_of(dev, {4, 4}, iota(16));
  const auto before = fallbacks();
  xdev::ops::scale(dev, xdev::slice(a, {1, 3}), 2.0f).get();                                          // at 16 bytes
  xdev::ops::add(dev, xdev::slice(a, {0, 1}), xdev::slice(a, {1, 2}), xdev::slice(a, {3, 4})).get();  // 16, 48
  EXPECT_EQ(fallbacks(), before);
  EXPECT_EQ(backend.opened, 3);
  EXPECT_EQ(backend.closed, 3);
  xdev::ops::scale(dev, xdev::slice(a, {0, 1}, {1, 3}), -1.0f).get();  // at 4 bytes: no window there
  EXPECT_EQ(fallbacks(), before + 1);
  EXPECT_EQ(backend.opened, 3);
  std::vector<float> got(16);
  dev.copy_to_host(a.buffer(), std::span<float>(got)).get();
  EXPECT_EQ(got, (std::vector<float>{0, -1, -2, 3, 8, 10, 12, 14, 16, 18, 20, 22, 8, 11, 14, 17}));
}

TEST(OpsOnViewsWindows, ABackendThatOpensWindowsRunsOpsOnThemOnTypedDevices) {
  xdev::Runtime<HostWithWindows> rt{};
  ops_on_opened_windows(rt.device(0), rt.backend());
}

TEST(OpsOnViewsWindows, ABackendThatOpensWindowsRunsOpsOnThemThroughAnyDevice) {
  xdev::Runtime<HostWithWindows> rt{};
  ops_on_opened_windows(xdev::AnyDevice(rt.device(0)), rt.backend());
}

}  // namespace
