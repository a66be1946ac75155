/// \file
/// The backend contract: `xdev::concepts::Backend<B>` and `xdev::check_backend<B>()`.
///
/// A backend is a class whose objects are a device type's run-time state (one per process,
/// owned by an `xdev::Runtime<B>`). It states, in order of the concepts below:
///
///     struct MyBackend {
///       static constexpr std::string_view name = "MINE";                  // HasName
///       using capabilities = xdev::Capabilities<xdev::MaxInflight<8>>;     // HasCapabilities
///       using memory_handle = void*;                                      // HasMemoryHandle
///       std::size_t device_count() const;                                 // EnumeratesDevices
///       memory_handle allocate(std::size_t device, std::size_t bytes);     // Allocates
///       void deallocate(std::size_t device, memory_handle, std::size_t bytes) noexcept;
///       void copy_to_device(std::size_t device, const void* src, memory_handle dst,
///                           std::size_t dst_offset, std::size_t bytes, xdev::Completion done);  // Transfers
///       void copy_to_host(std::size_t device, memory_handle src, std::size_t src_offset,
///                         void* dst, std::size_t bytes, xdev::Completion done);
///       void copy_between(std::size_t src_device, memory_handle src, std::size_t src_offset,
///                         std::size_t dst_device, memory_handle dst, std::size_t dst_offset,
///                         std::size_t bytes, xdev::Completion done);
///       void execute(std::size_t device, xdev::HostTask task, xdev::Completion done);  // Submits
///     };
///
/// Every asynchronous member returns at once and later calls `done` exactly once. `allocate`
/// throws `xdev::error` (`errc::out_of_memory`) when the device has no room. See
/// docs/writing-a-backend.md for each requirement in detail.
///
/// Optional hooks, for a backend that only knows at run time what it is (a plugin, a backend
/// configured from a file). Each one, when present, wins over the static member it stands for,
/// everywhere xdev reads it:
///
///     std::string_view runtime_name() const noexcept;             // HasRuntimeName: not B::name
///     xdev::CapabilitySet runtime_capabilities() const noexcept;  // HasRuntimeCapabilities: not the list
///     bool implements(xdev::ops::OpKind op, xdev::DType t, xdev::DType t2) const noexcept;  // DeclaresOps
///
/// `implements` is asked before an op member runs: false sends that call through the CPU fallback
/// (counted in `fallback.<op>`) although the member exists. `t2` is the index dtype for `gather`,
/// the destination dtype for `convert`, and `t` for every other op.
///
/// And one hook that stands for nothing static, only for people:
///
///     std::string device_description(std::size_t device) const;  // DescribesDevices
///
/// says what a device is ("host memory, 8 worker threads"; a plugin's "PoCL 3.1 / pthread (CPU),
/// 2 compute units, ..."): `Device<B>::description()` and `AnyDevice::description()` return it
/// ("" without the hook), xdev-info prints it, and a plugin's table exports it (`describe_device`,
/// plugin ABI 1.3). It may throw `xdev::error`. Its typed counterpart,
///
///     xdev::DeviceProperties device_properties(std::size_t device) const;  // ReportsDeviceProperties
///
/// gives name, vendor, driver version, compute units, work-group size and memory total and free
/// (`Device<B>::properties()`, `AnyDevice::properties()`; plugin ABI 1.8).
#pragma once

#include <xdev/backend/completion.hpp>
#include <xdev/backend/device_properties.hpp>
#include <xdev/backend/strided_region.hpp>
#include <xdev/core/op_kind.hpp>
#include <xdev/policy/capabilities.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace xdev::concepts {

// clang-format 14 mangles concept definitions.
// clang-format off

/// `B::name` is a compile-time string naming the device type ("HOST", "OPENCL").
template <class B>
concept HasName = requires {
  { B::name } -> std::convertible_to<std::string_view>;
  std::integral_constant<std::size_t, std::string_view(B::name).size()>::value;
};

/// `B::capabilities` is an `xdev::Capabilities<...>` list.
template <class B>
concept HasCapabilities = requires { typename B::capabilities; } && is_capabilities_v<typename B::capabilities>;

/// `B::memory_handle` is a trivially copyable, equality-comparable, value-initializable handle to
/// device memory (its value-initialized state means "no memory").
template <class B>
concept HasMemoryHandle = requires { typename B::memory_handle; } &&
                          std::is_trivially_copyable_v<typename B::memory_handle> &&
                          std::equality_comparable<typename B::memory_handle> &&
                          std::default_initializable<typename B::memory_handle>;

/// `b.device_count()` tells how many devices this backend drives.
template <class B>
concept EnumeratesDevices = requires(const B& b) {
  { b.device_count() } -> std::convertible_to<std::size_t>;
};

/// `b.allocate(device, bytes)` returns a `memory_handle`; `b.deallocate(device, h, bytes)` is noexcept.
template <class B>
concept Allocates = HasMemoryHandle<B> && requires(B& b, std::size_t n, typename B::memory_handle h) {
  { b.allocate(n, n) } -> std::same_as<typename B::memory_handle>;
  { b.deallocate(n, h, n) } noexcept;
};

/// Host→device transfer: `b.copy_to_device(device, src, dst, dst_offset, bytes, done)`.
template <class B>
concept CopiesToDevice = HasMemoryHandle<B> &&
    requires(B& b, std::size_t n, const void* src, typename B::memory_handle h, Completion c) {
  b.copy_to_device(n, src, h, n, n, std::move(c));
};

/// Device→host transfer: `b.copy_to_host(device, src, src_offset, dst, bytes, done)`.
template <class B>
concept CopiesToHost = HasMemoryHandle<B> &&
    requires(B& b, std::size_t n, void* dst, typename B::memory_handle h, Completion c) {
  b.copy_to_host(n, h, n, dst, n, std::move(c));
};

/// Device→device transfer, also between two devices of the backend:
/// `b.copy_between(src_device, src, src_offset, dst_device, dst, dst_offset, bytes, done)`.
template <class B>
concept CopiesBetweenDevices = HasMemoryHandle<B> &&
    requires(B& b, std::size_t n, typename B::memory_handle h, Completion c) {
  b.copy_between(n, h, n, n, h, n, n, std::move(c));
};

/// All three transfer directions.
template <class B>
concept Transfers = CopiesToDevice<B> && CopiesToHost<B> && CopiesBetweenDevices<B>;

/// `b.execute(device, task, done)` runs a host function in device order and reports through `done`.
template <class B>
concept Submits = requires(B& b, std::size_t n, HostTask t, Completion c) {
  b.execute(n, std::move(t), std::move(c));
};

/// Everything xdev needs from a device type. Use `xdev::check_backend<B>()` to get one sentence
/// per missing requirement instead of a concept trace.
template <class B>
concept Backend = HasName<B> && HasCapabilities<B> && HasMemoryHandle<B> && EnumeratesDevices<B> && Allocates<B> &&
    Transfers<B> && Submits<B>;

/// A backend whose memory handles are host addresses (`b.host_address(h)` returns `void*`), so
/// host code can read device memory directly (the host backend).
template <class B>
concept HostAccessibleBackend = Backend<B> && requires(const B& b, typename B::memory_handle h) {
  { b.host_address(h) } -> std::same_as<void*>;
};

/// Optional: `b.offset_handle(h, bytes)` is a handle to the memory of `h` from byte `bytes` on,
/// good wherever `h` is (the host backend: the address plus `bytes`). With it, an op on a window
/// of an array at an offset (`xdev::ArrayView`) runs the backend's own member; without it, such an
/// op runs through the CPU fallback, which stages only the window.
template <class B>
concept OffsetsHandles = HasMemoryHandle<B> && requires(const B& b, typename B::memory_handle h, std::size_t n) {
  { b.offset_handle(h, n) } noexcept -> std::same_as<typename B::memory_handle>;
};

/// Optional, for a backend whose handles cannot simply be moved on (OpenCL's `cl_mem`): windows
/// opened for one op. `b.open_window(device, h, bytes)` is a handle to the memory of `h` from byte
/// `bytes` on, which the backend's op members accept like an allocation's (`clCreateSubBuffer`),
/// or `std::nullopt` when the device cannot start one there (an offset below its base alignment):
/// that op then runs through the CPU fallback. `b.close_window(device, w)` is called once per
/// window, after the op's member returned (work it queued may still run: the backend keeps what
/// that work uses, as OpenCL retains a sub-buffer for its commands). A backend with
/// `OffsetsHandles` needs neither.
template <class B>
concept OpensWindows = HasMemoryHandle<B> && requires(B& b, std::size_t d, typename B::memory_handle h, std::size_t n) {
  { b.open_window(d, h, n) } -> std::same_as<std::optional<typename B::memory_handle>>;
  { b.close_window(d, h) } noexcept;
};

/// Optional: transfers of a strided window in one call each way (`clEnqueueReadBufferRect` /
/// `clEnqueueWriteBufferRect`, `cudaMemcpy3DAsync`): `b.copy_to_host_strided(device, h, region,
/// dst, done)` copies the rows of `region` (a `StridedRegion` of `h`'s memory) densely to `dst`,
/// and `b.copy_to_device_strided(device, src, h, region, done)` the other way. With it, copying a
/// non-contiguous `xdev::ArrayView` (a column block, a sub-box) makes one backend call per region;
/// without it, one plain transfer per contiguous run of the window.
template <class B>
concept StridedTransfers = HasMemoryHandle<B> && requires(B& b, std::size_t n, typename B::memory_handle h,
                                                           const StridedRegion& r, void* dst, const void* src,
                                                           Completion c) {
  b.copy_to_host_strided(n, h, r, dst, std::move(c));
  b.copy_to_device_strided(n, src, h, r, std::move(c));
};

/// Optional: a copy between strided windows of two allocations in one call
/// (`clEnqueueCopyBufferRect`, `cudaMemcpy3DPeerAsync`): `b.copy_between_strided(src_device, src,
/// src_region, dst_device, dst, dst_region, done)` copies each row of `src_region` to the same row
/// of `dst_region` (the two have the same rows; their offsets and pitches differ). With it, a copy
/// between two windows (`copy(view, view)`) makes one backend call per region; without it, one
/// `copy_between` per piece common to both windows' runs.
template <class B>
concept StridedCopies = HasMemoryHandle<B> && requires(B& b, std::size_t n, typename B::memory_handle h,
                                                        const StridedRegion& r, Completion c) {
  b.copy_between_strided(n, h, r, n, h, r, std::move(c));
};

/// Optional: the backend learns at run time whether its memory is host memory (a plugin that says
/// so: `XDEV_PLUGIN_HOST_MEMORY`). `b.runtime_host_accessible()` answers for the whole backend, and
/// `b.runtime_host_address(h)` is then the host address of `h` (null when it is not). A backend
/// that always knows uses `HostAccessibleBackend` instead; only that one gives typed `Buffer`s a
/// `host_data()`.
template <class B>
concept RuntimeHostAccess = requires(const B& b, typename B::memory_handle h) {
  { b.runtime_host_accessible() } noexcept -> std::same_as<bool>;
  { b.runtime_host_address(h) } noexcept -> std::same_as<void*>;
};

/// Optional: host memory the device reads and writes fast (page-locked or device-mapped:
/// `cudaHostAlloc`, a mapped OpenCL `CL_MEM_ALLOC_HOST_PTR` buffer), for `xdev::pinned`.
/// `allocate_pinned(device, bytes)` returns its host address, or null when the backend has none to
/// give (xdev then uses ordinary host memory); `deallocate_pinned` gives it back (xdev calls it
/// after the work submitted before the release).
template <class B>
concept AllocatesPinned = requires(B& b, std::size_t device, std::size_t bytes, void* p) {
  { b.allocate_pinned(device, bytes) } -> std::same_as<void*>;
  { b.deallocate_pinned(device, p, bytes) } noexcept;
};

/// Optional: `b.runtime_name()` names the device type at run time ("NAME" of "NAME:0"), instead
/// of `B::name`.
template <class B>
concept HasRuntimeName = requires(const B& b) {
  { b.runtime_name() } noexcept -> std::convertible_to<std::string_view>;
};

/// Optional: `b.runtime_capabilities()` gives the capabilities in force at run time, instead of
/// `B::capabilities::set`.
template <class B>
concept HasRuntimeCapabilities = requires(const B& b) {
  { b.runtime_capabilities() } noexcept -> std::same_as<CapabilitySet>;
};

/// Optional: `b.implements(op, t, t2)` says whether the backend's member for `op` handles these
/// dtypes; false runs the CPU fallback instead.
template <class B>
concept DeclaresOps = requires(const B& b, ops::OpKind op, DType t) {
  { b.implements(op, t, t) } noexcept -> std::convertible_to<bool>;
};

/// Optional backend hook: `b.implements_binary(op)` says whether the backend's `binary` member
/// handles the element-wise operator `op` at all; false runs that call through the CPU fallback
/// (counted in `fallback.<name>`, "fallback.minimum" say) although the member exists. Asked before
/// `implements` (`DeclaresOps`), which decides by dtype. `PluginBackend` refuses `min` and `max`
/// for a plugin of ABI 1.1, which predates them.
///
///     bool implements_binary(xdev::ops::BinaryOp op) const noexcept;
template <class B>
concept DeclaresBinaryOps = requires(const B& b, ops::BinaryOp op) {
  { b.implements_binary(op) } noexcept -> std::convertible_to<bool>;
};

/// Optional: `b.device_description(device)` says what device `device` is, for people (free-form
/// text, "" for none): what `Device<B>::description()`, `AnyDevice::description()` and xdev-info
/// show, and what a plugin's `describe_device` entry exports.
template <class B>
concept DescribesDevices = requires(const B& b, std::size_t device) {
  { b.device_description(device) } -> std::convertible_to<std::string>;
};

/// Optional: `b.device_properties(device)` says what device `device` is as typed fields (name,
/// vendor, compute units, memory total and free, ...): what `Device<B>::properties()` and
/// `AnyDevice::properties()` return (xdev fills in host accessibility and dtypes), and what a
/// plugin's `device_properties` entry exports.
template <class B>
concept ReportsDeviceProperties = requires(const B& b, std::size_t device) {
  { b.device_properties(device) } -> std::convertible_to<DeviceProperties>;
};

/// Optional: native in-order queues (OpenCL command queues, CUDA streams, SYCL in-order queues).
/// xdev creates one per stream (`create_queue`) and, while it starts an operation of that stream,
/// binds it to the calling thread (`bind_queue` ... `unbind_queue`): the backend then enqueues the
/// work of its calls for that device on that queue. xdev hands a stream's operations over as soon
/// as they hold an in-flight slot, without waiting for the ones before, and relies on the queue
/// to run them in order. Everything a backend with queues does for a bound call must therefore be
/// ordered by that queue, host tasks included (an OpenCL user event, `cudaLaunchHostFunc`); a
/// call that cannot be (a step that is issued later, from a completion) calls
/// `note_multi_step_launch()`. `native_queues()`, when present, may decline at run time (a plugin
/// whose table predates queues).
template <class B>
concept NativeQueues = requires { typename B::queue_handle; } &&
    requires(B& b, std::size_t device, typename B::queue_handle q) {
  { b.create_queue(device) } -> std::same_as<typename B::queue_handle>;
  { b.destroy_queue(device, q) } noexcept;
  { b.bind_queue(device, q) } noexcept;
  { b.unbind_queue(device) } noexcept;
};

/// Optional, with native queues: markers, so that a stream waiting for an event recorded on
/// another stream of the same device gets a dependency the device resolves (an OpenCL marker event
/// and a barrier on it; a CUDA event and `cudaStreamWaitEvent`) instead of a hold on the host.
/// `record_marker` enqueues a marker on the bound queue and calls `done` once everything enqueued
/// before it on that queue has completed; `wait_marker` makes the work enqueued later on the bound
/// queue wait for a marker of any queue of the same device; `release_marker` lets go of a marker
/// (xdev releases each one once, when its event is ready, and never waits on it afterwards). A
/// handle is an integer or a pointer. `native_markers()`, when present, may decline at run time.
template <class B>
concept NativeMarkers = NativeQueues<B> && requires { typename B::marker_handle; } &&
    (std::is_integral_v<typename B::marker_handle> || std::is_pointer_v<typename B::marker_handle>) &&
    sizeof(typename B::marker_handle) <= sizeof(std::uint64_t) &&
    requires(B& b, std::size_t device, typename B::marker_handle m, Completion done) {
  { b.record_marker(device, std::move(done)) } -> std::same_as<typename B::marker_handle>;
  b.wait_marker(device, m);
  { b.release_marker(device, m) } noexcept;
};

// clang-format on

}  // namespace xdev::concepts

namespace xdev {

namespace detail {
// `B::capabilities` and `B::memory_handle`, or a stand-in when `B` lacks them: a class template
// over a backend that failed `check_backend` (Device<B>) then reports only its sentence, not also
// every member declaration that names the missing type (g++ goes on instantiating them).
template <class B>
struct capabilities_type_of {
  using type = Capabilities<>;
};
template <concepts::HasCapabilities B>
struct capabilities_type_of<B> {
  using type = typename B::capabilities;
};
template <class B>
struct memory_handle_of {
  using type = void*;
};
template <concepts::HasMemoryHandle B>
struct memory_handle_of<B> {
  using type = typename B::memory_handle;
};

/// The name of backend `b`'s device type: `b.runtime_name()` when it has one, else `B::name`.
template <class B>
[[nodiscard]] std::string_view backend_name(const B& b) noexcept {
  if constexpr (concepts::HasRuntimeName<B>)
    return b.runtime_name();
  else
    return B::name;
}

/// The capabilities in force for backend `b`: `b.runtime_capabilities()` when it has one, else
/// `B::capabilities::set`.
template <class B>
[[nodiscard]] CapabilitySet backend_capabilities(const B& b) noexcept {
  if constexpr (concepts::HasRuntimeCapabilities<B>)
    return b.runtime_capabilities();
  else
    return B::capabilities::set;
}

/// True when the host addresses backend `b`'s memory: always for a `HostAccessibleBackend`, at
/// run time for a `RuntimeHostAccess` one, else never.
template <class B>
[[nodiscard]] bool backend_host_accessible(const B& b) noexcept {
  if constexpr (concepts::HostAccessibleBackend<B>)
    return (void)b, true;
  else if constexpr (concepts::RuntimeHostAccess<B>)
    return b.runtime_host_accessible();
  else
    return (void)b, false;
}

/// The host address of backend `b`'s memory `h`, or null when `b`'s memory is not host memory.
template <class B>
[[nodiscard]] void* backend_host_address(const B& b, const typename B::memory_handle& h) noexcept {
  if constexpr (concepts::HostAccessibleBackend<B>)
    return b.host_address(h);
  else if constexpr (concepts::RuntimeHostAccess<B>)
    return b.runtime_host_accessible() ? b.runtime_host_address(h) : nullptr;
  else
    return (void)b, (void)h, nullptr;
}

/// What device `device` of backend `b` is: `b.device_description(device)` when it has that hook,
/// else "".
template <class B>
[[nodiscard]] std::string backend_description(const B& b, std::size_t device) {
  if constexpr (concepts::DescribesDevices<B>)
    return std::string(b.device_description(device));
  else
    return std::string();
}

/// What device `device` of backend `b` is, as typed fields: `b.device_properties(device)` when it
/// has that hook, else empty ones.
template <class B>
[[nodiscard]] DeviceProperties backend_properties(const B& b, std::size_t device) {
  if constexpr (concepts::ReportsDeviceProperties<B>)
    return DeviceProperties(b.device_properties(device));
  else
    return DeviceProperties{};
}
}  // namespace detail

/// Checks `B` against the backend contract with one messaged `static_assert` per requirement,
/// so a mistake reads as a sentence naming the missing member. Returns true when `B` is a backend:
///
///     static_assert(xdev::check_backend<MyBackend>());
template <class B>
consteval bool check_backend() {
  static_assert(concepts::HasName<B>,
                "xdev backend: missing `static constexpr std::string_view name = \"...\";` naming the device type");
  static_assert(concepts::HasCapabilities<B>,
                "xdev backend: missing `using capabilities = xdev::Capabilities<...>;` "
                "(write xdev::Capabilities<> to take every default)");
  static_assert(concepts::HasMemoryHandle<B>,
                "xdev backend: missing `using memory_handle = ...;` (it must be a trivially copyable, "
                "equality-comparable, default-initializable handle to device memory)");
  static_assert(concepts::EnumeratesDevices<B>, "xdev backend: missing `std::size_t device_count() const`");
  static_assert(!concepts::HasMemoryHandle<B> || concepts::Allocates<B>,
                "xdev backend: allocation must be `memory_handle allocate(std::size_t device, std::size_t bytes)` and "
                "`void deallocate(std::size_t device, memory_handle, std::size_t bytes) noexcept`");
  static_assert(!concepts::HasMemoryHandle<B> || concepts::CopiesToDevice<B>,
                "xdev backend: missing host-to-device transfer `void copy_to_device(std::size_t device, const void* "
                "src, memory_handle dst, std::size_t dst_offset, std::size_t bytes, xdev::Completion done)`");
  static_assert(!concepts::HasMemoryHandle<B> || concepts::CopiesToHost<B>,
                "xdev backend: missing device-to-host transfer `void copy_to_host(std::size_t device, memory_handle "
                "src, std::size_t src_offset, void* dst, std::size_t bytes, xdev::Completion done)`");
  static_assert(!concepts::HasMemoryHandle<B> || concepts::CopiesBetweenDevices<B>,
                "xdev backend: missing device-to-device transfer `void copy_between(std::size_t src_device, "
                "memory_handle src, std::size_t src_offset, std::size_t dst_device, memory_handle dst, std::size_t "
                "dst_offset, std::size_t bytes, xdev::Completion done)`");
  static_assert(concepts::Submits<B>,
                "xdev backend: missing submission `void execute(std::size_t device, xdev::HostTask task, "
                "xdev::Completion done)` that runs work asynchronously and calls done exactly once");
  if constexpr (concepts::HasCapabilities<B>) {
    // Instantiates the list so that a duplicate, non-policy or invalid argument is reported here too,
    // by the list's or the policy's own static_assert (this condition itself always holds).
    static_assert(sizeof(typename B::capabilities) != 0);
  }
  return concepts::Backend<B>;
}

}  // namespace xdev
