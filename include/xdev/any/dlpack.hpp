/// \file
/// DLPack interop (`torch.from_dlpack`, `jax.dlpack`): `to_dlpack` hands an array to another
/// framework without a copy, `from_dlpack` takes one in without a copy. Needs the DLPack header
/// (`libdlpack-dev`, DLPack 0.6 or newer), which is why <xdev/xdev.hpp> does not include this one.
///
///     DLManagedTensor* t = xdev::to_dlpack(std::move(array));   // the consumer calls t->deleter
///     xdev::AnyArray<float> a = xdev::from_dlpack<float>(t, host_device);   // a owns t now
///
/// Both sides keep the deleter contract: the tensor `to_dlpack` returns owns the array until its
/// deleter is called (once); the array `from_dlpack` returns calls the tensor's deleter once its
/// memory is released, after the work already submitted on it (as every buffer is freed).
#pragma once

#include <xdev/any/any_device.hpp>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/core/half.hpp>
#include <xdev/core/shape.hpp>

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xdev {

namespace detail {

// The DLPack dtype of element type `T` (bool travels as an 8-bit unsigned integer, as DLPack 0.6,
// which has no bool code, and PyTorch before it do).
template <class T>
DLDataType dlpack_dtype() noexcept {
  DLDataType d{};
  d.lanes = 1;
  d.bits = static_cast<std::uint8_t>(8 * sizeof(T));
  if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>)
    d.code = kDLUInt;
  else if constexpr (std::is_same_v<T, bf16>)
    d.code = kDLBfloat;
  else if constexpr (std::is_same_v<T, f16> || std::is_floating_point_v<T>)
    d.code = kDLFloat;
  else
    d.code = kDLInt;
  return d;
}

inline std::string dlpack_dtype_text(DLDataType d) {
  const char* code = d.code == kDLInt      ? "int"
                     : d.code == kDLUInt   ? "uint"
                     : d.code == kDLFloat  ? "float"
                     : d.code == kDLBfloat ? "bfloat"
                                           : "code ";
  std::string s = code;
  if (d.code > kDLBfloat) s += std::to_string(d.code) + " ";
  s += std::to_string(d.bits);
  if (d.lanes != 1) s += "x" + std::to_string(d.lanes);
  return s;
}

// An `AnyDevice` model that is `base` in every respect except its memory: one block it adopted
// from outside (handed out by the one `allocate`), given back by `release(context)` (after the work
// submitted before the release, as the device frees memory) instead of to the device's allocator.
class AdoptedMemoryModel final : public AnyDeviceModel {
 public:
  AdoptedMemoryModel(AnyDevice base, void* data, std::size_t bytes, void (*release)(void*), void* context)
      : AnyDeviceModel(base.owner(), base.model().identity),
        base_(std::move(base)),
        data_(data),
        bytes_(bytes),
        release_(release),
        context_(context) {}

  std::string description() const override { return b().description(); }
  DeviceProperties properties() const override { return b().properties(); }
  void* host_address(erased_handle h) const noexcept override { return unerase_handle<void*>(h); }
  erased_handle allocate(std::size_t bytes) const override {
    if (handed_out_ || bytes != bytes_)
      throw error(errc::internal, "adopted memory of " + identity.name + " is handed out once, whole");
    handed_out_ = true;
    return erase_handle<void*>(data_);
  }
  void deallocate(erased_handle, std::size_t) const noexcept override {
    // The model may be gone when the release runs: it carries what it needs.
    identity.queue->release_after_work([release = release_, context = context_] { release(context); });
  }
  MemoryStats memory_stats() const override { return b().memory_stats(); }
  void reset_peak_memory_stats() const override { b().reset_peak_memory_stats(); }
  void set_memory_limit(std::optional<std::size_t> bytes) const override { b().set_memory_limit(bytes); }
  void release_cached_memory() const override { b().release_cached_memory(); }
  random::GeneratorState& generator() const override { return b().generator(); }
  void copy_to_device(const void* src, erased_handle dst, std::size_t dst_offset, std::size_t bytes,
                      Completion done) const override {
    b().copy_to_device(src, dst, dst_offset, bytes, std::move(done));
  }
  void copy_to_host(erased_handle src, std::size_t src_offset, void* dst, std::size_t bytes,
                    Completion done) const override {
    b().copy_to_host(src, src_offset, dst, bytes, std::move(done));
  }
  void copy_between(std::size_t src_device, erased_handle src, std::size_t src_offset, std::size_t dst_device,
                    erased_handle dst, std::size_t dst_offset, std::size_t bytes, Completion done) const override {
    b().copy_between(src_device, src, src_offset, dst_device, dst, dst_offset, bytes, std::move(done));
  }
  void copy_to_host_strided(erased_handle src, const StridedRegion& region, void* dst, Completion done) const override {
    b().copy_to_host_strided(src, region, dst, std::move(done));
  }
  void copy_to_device_strided(const void* src, erased_handle dst, const StridedRegion& region,
                              Completion done) const override {
    b().copy_to_device_strided(src, dst, region, std::move(done));
  }
  void copy_between_strided(std::size_t src_device, erased_handle src, const StridedRegion& src_region,
                            std::size_t dst_device, erased_handle dst, const StridedRegion& dst_region,
                            Completion done) const override {
    b().copy_between_strided(src_device, src, src_region, dst_device, dst, dst_region, std::move(done));
  }
  void execute(HostTask task, Completion done) const override { b().execute(std::move(task), std::move(done)); }
  void launch(ops::LaunchArgs args, Completion done) const override { b().launch(std::move(args), std::move(done)); }
  bool run(ops::OpKind op, DType t, DType t2, const void* args, const ops::detail::OperandOffsets& offsets,
           Completion& done) const override {
    return b().run(op, t, t2, args, offsets, done);
  }
  const void* target(const std::type_info& backend) const noexcept override { return b().target(backend); }
  std::unique_ptr<NativeQueue> make_native_queue() const override { return b().make_native_queue(); }
  PinnedBlock allocate_pinned(std::size_t bytes) const override { return b().allocate_pinned(bytes); }
  void deallocate_pinned(PinnedBlock block, std::size_t bytes) const noexcept override {
    b().deallocate_pinned(block, bytes);
  }
  std::uint64_t create_kernel(const KernelSource& source) const override { return b().create_kernel(source); }
  void destroy_kernel(std::uint64_t kernel) const noexcept override { b().destroy_kernel(kernel); }
  void launch_kernel(std::uint64_t kernel, KernelLaunchArgs<erased_handle> args, Completion done) const override {
    b().launch_kernel(kernel, std::move(args), std::move(done));
  }

 private:
  const AnyDeviceModel& b() const noexcept { return base_.model(); }
  AnyDevice base_;
  void* data_;
  std::size_t bytes_;
  void (*release_)(void*);
  void* context_;
  mutable bool handed_out_ = false;  // set once, by the one thread that builds the array
};

// What a tensor from `to_dlpack` owns: the array, and its shape as DLPack's int64 extents.
template <class T>
struct DLPackExport {
  AnyArray<T> array;
  std::vector<std::int64_t> shape;
  DLManagedTensor tensor{};
};

}  // namespace detail

/// Hands `array` to a DLPack consumer without a copy: the returned tensor owns it until its deleter
/// is called. Waits for the work submitted to the array's device first (DLPack 0.6 has no streams,
/// so the consumer may read the data at once). The tensor is dense row-major (`strides` null),
/// `kDLCPU` with the device's ordinal as `device_id`.
/// \throws xdev::error `errc::unimplemented` when the device's memory is not host-accessible (its
///         data could not be read by a `kDLCPU` consumer), `errc::invalid_argument` for an array of
///         no device; what `synchronize` raises. On a throw, `array` is left as it was.
template <class T>
[[nodiscard]] DLManagedTensor* to_dlpack(AnyArray<T>&& array) {
  const AnyDevice dev = array.buffer().device();
  if (!dev.valid()) throw error(errc::invalid_argument, "to_dlpack: the array has no device");
  if (!dev.host_accessible())
    throw error(errc::unimplemented, "to_dlpack: the memory of " + dev.name() +
                                         " is not host-accessible, and only kDLCPU tensors are exported");
  dev.synchronize();
  auto owner = std::make_unique<detail::DLPackExport<T>>();
  for (std::size_t i = 0; i < array.shape().rank(); ++i) owner->shape.push_back(array.shape()[i]);
  void* data = array.buffer().empty() ? nullptr : dev.model().host_address(array.buffer().native_handle());
  owner->array = std::move(array);
  DLTensor& t = owner->tensor.dl_tensor;
  t.data = data;
  t.device = DLDevice{kDLCPU, static_cast<std::int32_t>(dev.ordinal())};
  t.ndim = static_cast<std::int32_t>(owner->shape.size());
  t.dtype = detail::dlpack_dtype<T>();
  t.shape = owner->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  owner->tensor.manager_ctx = owner.get();
  owner->tensor.deleter = [](DLManagedTensor* self) {
    delete static_cast<detail::DLPackExport<T>*>(self->manager_ctx);
  };
  return &owner.release()->tensor;
}

/// Takes a DLPack tensor in without a copy, as an array on `device`: a device whose memory handles
/// are host addresses (the host backend's, a plugin's with `XDEV_PLUGIN_HOST_MEMORY` such as REF). The array owns the
/// tensor: its deleter is called once the array's memory is released, after the work submitted on it. \throws
/// xdev::error `errc::invalid_argument` naming what xdev cannot represent: a null tensor or
///         data, a device type other than `kDLCPU`, a dtype other than `T`'s (bool also accepts
///         8-bit unsigned), vector lanes, a rank above `Shape::max_rank`, a negative extent, strides
///         that are not dense row-major, data not aligned for `T`; `errc::unimplemented` for a
///         device whose memory is not host memory with address handles. On a throw the tensor is not consumed: the
///         caller still owns it (and calls its deleter).
template <class T>
[[nodiscard]] AnyArray<T> from_dlpack(DLManagedTensor* managed, const AnyDevice& device) {
  auto bad = [](const std::string& what) { return error(errc::invalid_argument, "from_dlpack: " + what); };
  if (managed == nullptr) throw bad("the tensor is null");
  if (!device.valid()) throw bad("the device handle names no device");
  if (!device.host_accessible())
    throw error(errc::unimplemented, "from_dlpack: the memory of " + device.name() +
                                         " is not host memory; adopted memory goes to devices whose memory is (HOST, "
                                         "a plugin with XDEV_PLUGIN_HOST_MEMORY)");
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCPU)
    throw bad("device type " + std::to_string(static_cast<int>(t.device.device_type)) +
              " is not kDLCPU (1): only host memory can be adopted");
  const DLDataType want = detail::dlpack_dtype<T>();
  const bool same = t.dtype.code == want.code && t.dtype.bits == want.bits && t.dtype.lanes == want.lanes;
  if (!same)
    throw bad("the tensor's dtype " + detail::dlpack_dtype_text(t.dtype) + " is not " +
              std::string(name_of(dtype_of<T>)) + " (" + detail::dlpack_dtype_text(want) + ")");
  if (t.ndim < 0 || static_cast<std::size_t>(t.ndim) > Shape::max_rank)
    throw bad("rank " + std::to_string(t.ndim) + " is not in [0, " + std::to_string(Shape::max_rank) + "]");
  if (t.ndim > 0 && t.shape == nullptr) throw bad("the shape is null");
  std::vector<std::int64_t> extents(t.shape, t.shape + t.ndim);
  std::int64_t numel = 1;
  for (int i = 0; i < t.ndim; ++i) {
    if (extents[static_cast<std::size_t>(i)] < 0)
      throw bad("extent " + std::to_string(extents[static_cast<std::size_t>(i)]) + " of dimension " +
                std::to_string(i) + " is negative");
    numel *= extents[static_cast<std::size_t>(i)];
  }
  if (t.strides != nullptr) {
    std::int64_t expect = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      const auto d = static_cast<std::size_t>(i);
      if (extents[d] != 1 && t.strides[d] != expect)
        throw bad("strides are not dense row-major (dimension " + std::to_string(i) + ": stride " +
                  std::to_string(t.strides[d]) + ", dense is " + std::to_string(expect) +
                  "); xdev arrays are dense: copy it to a contiguous tensor first");
      expect *= extents[d];
    }
  }
  const Shape shape{std::span<const std::int64_t>(extents)};
  const auto n = static_cast<std::size_t>(numel);
  if (n != 0 && t.data == nullptr) throw bad("the data pointer is null");
  void* data = t.data == nullptr ? nullptr : static_cast<std::byte*>(t.data) + t.byte_offset;
  if (reinterpret_cast<std::uintptr_t>(data) % alignof(T) != 0)
    throw bad("the data is not aligned for " + std::string(name_of(dtype_of<T>)));
  // Adoption hands the device `data` itself as a memory handle: only a device whose handles are
  // the addresses they name can take it.
  if (data != nullptr && device.model().host_address(detail::erase_handle<void*>(data)) != data)
    throw error(errc::unimplemented, "from_dlpack: the memory handles of " + device.name() +
                                         " are not host addresses, so it cannot adopt outside memory");
  if (n == 0) {  // no memory to adopt: the tensor is done with
    AnyArray<T> empty_array(device.template allocate<T>(0), shape);
    if (managed->deleter != nullptr) managed->deleter(managed);
    return empty_array;
  }
  auto release = [](void* m) {
    auto* tensor = static_cast<DLManagedTensor*>(m);
    if (tensor->deleter != nullptr) tensor->deleter(tensor);
  };
  const AnyDevice adopted{std::shared_ptr<const detail::AnyDeviceModel>(
      std::make_shared<const detail::AdoptedMemoryModel>(device, data, n * sizeof(T), release, managed))};
  return AnyArray<T>(adopted.template allocate<T>(n), shape);
}

}  // namespace xdev
