// DLPack interop (<xdev/any/dlpack.hpp>): an exported array read through the real dlpack.h and
// freed by its deleter; a hand-made tensor adopted without a copy, worked on by an op, and given
// back through its deleter exactly once; the round trip; and every form xdev cannot represent.
#if __has_include(<dlpack/dlpack.h>)
#include <xdev/any/any_device.hpp>
#include <xdev/any/dlpack.hpp>
#include <xdev/any/parallel.hpp>
#include <xdev/backends/host.hpp>
#include <xdev/device/runtime.hpp>
#include <xdev/ops/elementwise.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "support/error_of.hpp"
#include "support/test_targets.hpp"

namespace {

using ::testing::HasSubstr;
using xdev::AnyDevice;
using xdev::backends::Host;

using xdev_test::error_of;

// A tensor made by "another framework": it owns a vector, and its deleter counts its calls.
struct Foreign {
  std::vector<double> data;
  std::vector<std::int64_t> shape;
  DLManagedTensor tensor{};
  std::atomic<int>* deletes;

  static DLManagedTensor* make(std::vector<double> d, std::vector<std::int64_t> s, std::atomic<int>* deletes) {
    auto* f = new Foreign{std::move(d), std::move(s), {}, deletes};
    DLTensor& t = f->tensor.dl_tensor;
    t.data = f->data.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = static_cast<std::int32_t>(f->shape.size());
    t.dtype = DLDataType{kDLFloat, 64, 1};
    t.shape = f->shape.data();
    t.strides = nullptr;
    t.byte_offset = 0;
    f->tensor.manager_ctx = f;
    f->tensor.deleter = [](DLManagedTensor* self) {
      auto* me = static_cast<Foreign*>(self->manager_ctx);
      ++*me->deletes;
      delete me;
    };
    return &f->tensor;
  }
};

class DLPack : public ::testing::Test {
 protected:
  xdev::Runtime<Host> rt{{}, Host::Options{.devices = 2, .threads = 2}};
  AnyDevice dev{rt.device(1)};
};

TEST_F(DLPack, AnExportedArrayIsReadThroughTheTensorAndFreedByItsDeleter) {
  auto a = xdev::empty<float>(dev, {2, 3});
  float* p = xdev::host_data(a);
  xdev::parallel_for(dev, 6, [p](std::size_t i) { p[i] = static_cast<float>(i) + 0.5f; });  // not waited for
  DLManagedTensor* t = xdev::to_dlpack(std::move(a));
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(a.buffer().device().valid()) << "the array moved into the tensor";
  const DLTensor& d = t->dl_tensor;
  EXPECT_EQ(d.device.device_type, kDLCPU);
  EXPECT_EQ(d.device.device_id, 1);
  ASSERT_EQ(d.ndim, 2);
  EXPECT_EQ(d.shape[0], 2);
  EXPECT_EQ(d.shape[1], 3);
  EXPECT_EQ(d.strides, nullptr);
  EXPECT_EQ(d.dtype.code, kDLFloat);
  EXPECT_EQ(d.dtype.bits, 32);
  EXPECT_EQ(d.dtype.lanes, 1);
  EXPECT_EQ(d.data, p) << "no copy";
  for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<const float*>(d.data)[i], static_cast<float>(i) + 0.5f);
  EXPECT_GT(dev.memory_stats().bytes_in_use, 0u);
  t->deleter(t);
  dev.synchronize();
  EXPECT_EQ(dev.memory_stats().bytes_in_use, 0u) << "the deleter gave the memory back";
}

TEST_F(DLPack, AnAdoptedTensorIsWorkedOnInPlaceAndItsDeleterRunsOnceAfterTheWork) {
  std::atomic<int> deletes{0};
  DLManagedTensor* t = Foreign::make({1, 2, 3, 4, 5, 6}, {3, 2}, &deletes);
  const double* storage = static_cast<const double*>(t->dl_tensor.data);
  {
    xdev::AnyArray<double> a = xdev::from_dlpack<double>(t, dev);
    EXPECT_EQ(a.shape(), (xdev::Shape{3, 2}));
    EXPECT_EQ(xdev::host_data(a), storage) << "no copy";
    EXPECT_EQ(a.buffer().device(), dev) << "the array is on the device it was adopted by";
    EXPECT_EQ(dev.memory_stats().bytes_in_use, 0u) << "adopted memory is not the allocator's";
    xdev::ops::scale(dev, a, 10.0);  // queued, and the array dropped before it ran
  }
  dev.synchronize();
  EXPECT_EQ(deletes.load(), 1) << "given back once, after the work";
}

TEST_F(DLPack, ARoundTripKeepsTheSameMemory) {
  auto a = xdev::empty<double>(dev, {4});
  double* p = xdev::host_data(a);
  xdev::parallel_for(dev, 4, [p](std::size_t i) { p[i] = static_cast<double>(i * i); }).get();
  xdev::AnyArray<double> back = xdev::from_dlpack<double>(xdev::to_dlpack(std::move(a)), dev);
  EXPECT_EQ(xdev::host_data(back), p);
  EXPECT_EQ(back.shape(), (xdev::Shape{4}));
  EXPECT_EQ(p[3], 9.0);
  back = {};
  dev.synchronize();
  EXPECT_EQ(dev.memory_stats().bytes_in_use, 0u);
}

TEST_F(DLPack, WhatXdevCannotRepresentIsRefusedAndTheTensorStaysTheCallers) {
  std::atomic<int> deletes{0};
  DLManagedTensor* t = Foreign::make({1, 2, 3, 4}, {2, 2}, &deletes);
  DLTensor& d = t->dl_tensor;
  auto refused = [&](auto&& call, const char* part) {
    const auto e = error_of(call);
    EXPECT_EQ(e.code(), xdev::errc::invalid_argument) << part;
    EXPECT_THAT(e.what(), HasSubstr(part));
  };
  refused([&] { (void)xdev::from_dlpack<float>(t, dev); }, "the tensor's dtype float64 is not f32 (float32)");
  d.device.device_type = kDLCUDA;
  refused([&] { (void)xdev::from_dlpack<double>(t, dev); }, "device type 2 is not kDLCPU (1)");
  d.device.device_type = kDLCPU;
  std::int64_t column_major[] = {1, 2};
  d.strides = column_major;
  refused([&] { (void)xdev::from_dlpack<double>(t, dev); }, "strides are not dense row-major");
  std::int64_t dense[] = {2, 1};
  d.strides = dense;
  EXPECT_NO_THROW({
    auto ok = xdev::from_dlpack<double>(t, dev);
    (void)ok;
    ASSERT_EQ(deletes.load(), 0);
  });
  dev.synchronize();
  EXPECT_EQ(deletes.load(), 1) << "explicit dense strides are accepted (and the adopted tensor was given back)";

  std::atomic<int> more{0};
  t = Foreign::make({1, 2}, {2}, &more);
  t->dl_tensor.dtype.lanes = 2;
  refused([&] { (void)xdev::from_dlpack<double>(t, dev); }, "float64x2 is not f64");
  t->dl_tensor.dtype.lanes = 1;
  t->dl_tensor.ndim = 9;
  refused([&] { (void)xdev::from_dlpack<double>(t, dev); }, "rank 9 is not in [0, 8]");
  t->dl_tensor.ndim = 1;
  t->dl_tensor.shape[0] = -2;
  refused([&] { (void)xdev::from_dlpack<double>(t, dev); }, "extent -2 of dimension 0 is negative");
  t->dl_tensor.shape[0] = 1;
  t->dl_tensor.byte_offset = 4;
  refused([&] { (void)xdev::from_dlpack<double>(t, dev); }, "not aligned for f64");
  t->dl_tensor.byte_offset = 0;
  refused([&] { (void)xdev::from_dlpack<double>(nullptr, dev); }, "the tensor is null");

  xdev::Runtime<xdev_test::F32OnlyBackend> other;
  const auto e = error_of([&] { (void)xdev::from_dlpack<double>(t, AnyDevice(other.device(0))); });
  EXPECT_EQ(e.code(), xdev::errc::unimplemented);
  EXPECT_THAT(e.what(), HasSubstr("from_dlpack: the memory of F32ONLY:0 is not host memory"));
  EXPECT_EQ(more.load(), 0) << "a refused tensor is not consumed";
  t->deleter(t);
  EXPECT_EQ(more.load(), 1);
}

// Host memory whose handles are not the addresses they name (a header before the data): exported,
// but never given outside memory as a handle.
class HeaderedBackend : public xdev_test::PolicyBackend<xdev::Capabilities<>> {
 public:
  static constexpr std::string_view name = "HEADERED";
  using PolicyBackend::PolicyBackend;
  [[nodiscard]] void* host_address(memory_handle h) const noexcept { return static_cast<std::byte*>(h) + 64; }
};

TEST_F(DLPack, ADeviceWhoseHandlesAreNotAddressesDoesNotAdopt) {
  xdev::Runtime<HeaderedBackend> other;
  std::atomic<int> deletes{0};
  DLManagedTensor* t = Foreign::make({1, 2}, {2}, &deletes);
  const auto e = error_of([&] { (void)xdev::from_dlpack<double>(t, AnyDevice(other.device(0))); });
  EXPECT_EQ(e.code(), xdev::errc::unimplemented);
  EXPECT_THAT(e.what(), HasSubstr("from_dlpack: the memory handles of HEADERED:0 are not host addresses"));
  EXPECT_EQ(deletes.load(), 0) << "a refused tensor is not consumed";
  t->deleter(t);
}

TEST_F(DLPack, AnArrayWhoseMemoryIsNotHostAccessibleIsNotExported) {
  xdev::Runtime<xdev_test::F32OnlyBackend> other;
  auto a = xdev::empty<float>(AnyDevice(other.device(0)), {3});
  const auto e = error_of([&] { (void)xdev::to_dlpack(std::move(a)); });
  EXPECT_EQ(e.code(), xdev::errc::unimplemented);
  EXPECT_THAT(e.what(), HasSubstr("to_dlpack: the memory of F32ONLY:0 is not host-accessible"));
  EXPECT_EQ(a.size(), 3u) << "the array is left as it was";
}

TEST_F(DLPack, BoolTravelsAsEightBitUnsignedAndEmptyTensorsWork) {
  auto flags = xdev::empty<bool>(dev, {5});
  DLManagedTensor* t = xdev::to_dlpack(std::move(flags));
  EXPECT_EQ(t->dl_tensor.dtype.code, kDLUInt);
  EXPECT_EQ(t->dl_tensor.dtype.bits, 8);
  xdev::AnyArray<bool> back = xdev::from_dlpack<bool>(t, dev);
  EXPECT_EQ(back.size(), 5u);

  std::atomic<int> deletes{0};
  DLManagedTensor* empty = Foreign::make({}, {0, 3}, &deletes);
  xdev::AnyArray<double> none = xdev::from_dlpack<double>(empty, dev);
  EXPECT_EQ(none.shape(), (xdev::Shape{0, 3}));
  EXPECT_EQ(deletes.load(), 1) << "nothing to adopt: the tensor is given back at once";
}

}  // namespace
#else
#include <gtest/gtest.h>
TEST(DLPack, NeedsTheDLPackHeader) {
  GTEST_SKIP() << "dlpack/dlpack.h (libdlpack-dev) is not installed";
}
#endif
