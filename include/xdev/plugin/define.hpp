/// \file
/// `XDEV_DEFINE_PLUGIN(Backend)`: turns a typed backend into a plugin, a shared library that xdev
/// loads at run time (the C boundary is <xdev/plugin/abi.h>; the host side is
/// <xdev/plugin/plugin_backend.hpp>). In ONE source file of the shared library, at global scope:
///
///     #include "my_npu.hpp"                 // struct acme::Npu, an xdev::concepts::Backend
///     #include <xdev/plugin/define.hpp>
///     XDEV_DEFINE_PLUGIN(acme::Npu);
///
/// or, to set what the backend type does not say itself (members of `xdev::plugin::PluginInfo`):
///
///     XDEV_DEFINE_PLUGIN_WITH(acme::Npu, .version = "1.2.0", .platform = "Acme NPU v3",
///                             .flags = XDEV_PLUGIN_NEVER_UNLOAD);
///
/// and build it with CMake's `xdev_add_plugin(acme_npu SOURCES npu_plugin.cpp)` (cmake/xdevPlugin.cmake).
///
/// What the generated table does, from the backend type `B`:
/// - name: `B::name` (or `.name`), which must match `[A-Z][A-Z0-9_]*` (checked at compile time);
///   version and platform: the macro's `.version` / `.platform`, else the optional static members
///   `B::plugin_version` / `B::plugin_platform` (anything convertible to `std::string_view` at
///   compile time), else "".
/// - `initialize` calls the optional hook `static void B::initialize()` once per loaded library
///   (again on the next call if it threw).
/// - `create` constructs `B` from `const xdev::plugin::ClientOptions&` when `B` accepts them, else
///   with its default constructor; `destroy` deletes it.
/// - `capabilities`: `b.runtime_capabilities()` when `B` has that member, else `B::capabilities::set`.
/// - `describe_device` (ABI 1.3) is non-null when `B` has `device_description(std::size_t) const`
///   returning something convertible to `std::string` (`xdev::concepts::DescribesDevices`): each
///   call asks the backend (a device out of range is `errc::invalid_argument`), and the client keeps
///   the text, so the pointer handed out stays valid while the backend object lives. Without the
///   member the entry is null, and xdev describes the devices as "".
/// - `device_properties` (ABI 1.8) is non-null when `B` has `device_properties(std::size_t) const`
///   returning an `xdev::DeviceProperties` (`xdev::concepts::ReportsDeviceProperties`): each call
///   asks the backend, and the client keeps its texts as it keeps descriptions. Without the member
///   the entry is null, and xdev reports every field unknown.
/// - `create_queue`, `destroy_queue` and `bind_queue` (ABI 1.5) are non-null when `B` has native
///   in-order queues (`xdev::concepts::NativeQueues`; `bind_queue` with queue 0 calls
///   `unbind_queue`); else null, and xdev orders each stream on the host.
/// - `record_marker`, `wait_marker` and `release_marker` (ABI 1.6) are non-null when `B` also has
///   native markers (`xdev::concepts::NativeMarkers`); else null, and a stream that waits for
///   another stream's event is held on the host.
/// - `create_kernel`, `launch_kernel` and `destroy_kernel` (ABI 1.9) are non-null when `B` runs
///   kernels given as source (`xdev::concepts::RunsSourceKernels`); the incoming source and launch
///   structs are checked (a parameter of no known kind or dtype, dims outside [1, 3], a zero extent,
///   a work-group that does not divide the range are `errc::invalid_argument`).
/// - `copy_to_host_strided` and `copy_to_device_strided` (ABI 1.11) are non-null when `B` copies
///   strided windows (`xdev::concepts::StridedTransfers`); the incoming region is checked (a short
///   struct or rows that overlap are `errc::invalid_argument`). Without them xdev copies a strided
///   window one row at a time.
/// - `open_window` and `close_window` (ABI 1.12) are non-null when `B` moves handles on
///   (`xdev::concepts::OffsetsHandles`: the window is the moved handle) or opens windows
///   (`xdev::concepts::OpensWindows`); without them xdev stages an op's window through its fallback.
/// - An operation entry is non-null when `B` has that op member for at least one dtype, and
///   `op_dtypes` reports exactly the dtypes (and pairs, for gather and convert) whose `ops::*Args`
///   its members accept, checked per dtype with a requires-expression. Constrain your op templates
///   (`requires std::floating_point<T>`): an unconstrained template claims, and is instantiated
///   for, every dtype. xdev runs its CPU fallback for what the masks leave out.
/// - `B::memory_handle` must be trivially copyable and at most 8 bytes: it travels as its bits in
///   an `xdev_memory`.
/// - `flags` gets `XDEV_PLUGIN_HOST_MEMORY` (ABI 1.9) when `B` is an
///   `xdev::concepts::HostAccessibleBackend` whose `memory_handle` is a pointer: `host_address(h)`
///   must then be `h` itself, and `B` must accept the address of any live host memory as a handle
///   (xdev adopts DLPack tensors that way). xdev then runs user C++ kernels on the plugin's devices
///   and exports their arrays through DLPack.
/// - Every entry converts exceptions into a status and a message: an `xdev::error` keeps its
///   `errc`, `std::bad_alloc` becomes `errc::out_of_memory`, anything else `errc::internal` with
///   its `what()`. A completion the host passes becomes the `xdev::Completion` the member receives;
///   it calls the host's `complete` exactly once (an exception becomes its status and message), and
///   never when the entry returns an error (a member that throws before completing). A completion
///   the backend destroys without calling reports `errc::internal`.
/// - Every struct received is checked: one smaller than this header's version is rejected with
///   `errc::incompatible_abi` ("xdev_fill_args: expected at least 40 bytes, got 16"); a larger one
///   (from a newer host) is accepted.
///
/// The plugin's name is also written into an ELF note (<xdev/plugin/name_note.hpp>), which the
/// loader reads without loading the file: looking up another plugin by name never runs this one's
/// code, and a second plugin of a taken name is skipped unopened.
///
/// The entry is exported as XDEV_PLUGIN_ENTRY_NAME through Boost.DLL's alias mechanism
/// (`BOOST_DLL_ALIAS`); it is the only symbol the library needs to export. Only this header
/// includes Boost.DLL, and only <boost/dll/alias.hpp>.
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/plugin/detail/plugin_table.hpp>
#include <xdev/plugin/name_note.hpp>

#include <boost/dll/alias.hpp>

#include <string_view>

/// Defines the plugin entry of backend type `Backend` (see the file comment). Use it once per
/// shared library, at global scope, followed by a semicolon.
#define XDEV_DEFINE_PLUGIN(Backend) XDEV_DEFINE_PLUGIN_WITH(Backend)

/// As `XDEV_DEFINE_PLUGIN`, with the designated initializers of an `xdev::plugin::PluginInfo`
/// after the backend type: `XDEV_DEFINE_PLUGIN_WITH(acme::Npu, .version = "1.2.0")`.
#define XDEV_DEFINE_PLUGIN_WITH(Backend, ...)                                                                  \
  namespace xdev_plugin_generated {                                                                            \
  struct info {                                                                                                \
    static constexpr ::xdev::plugin::PluginInfo value{__VA_ARGS__};                                            \
  };                                                                                                           \
  static_assert(::xdev::plugin::detail::check_plugin<Backend, info>());                                        \
  /* Returns the table; never does anything else (xdev calls it before checking the ABI version). */           \
  const ::xdev_plugin_api* entry() {                                                                           \
    return &::xdev::plugin::detail::plugin_api<Backend, info>;                                                 \
  }                                                                                                            \
  static_assert(::std::string_view(XDEV_PLUGIN_ENTRY_NAME) == "xdev_plugin_entry_v1",                          \
                "XDEV_DEFINE_PLUGIN exports xdev_plugin_entry_v1; update it with XDEV_ABI_MAJOR");             \
  /* The name, readable from the file without loading it (name_note.hpp). */                                   \
  [[gnu::section(".note.xdev.plugin"), gnu::used]] alignas(4) constexpr auto name_note =                       \
      ::xdev::plugin::detail::make_name_note<::xdev::plugin::detail::NameOf<Backend, info>::value.size() + 1>( \
          ::xdev::plugin::detail::NameOf<Backend, info>::value);                                               \
  }                                                                                                            \
  BOOST_DLL_ALIAS(xdev_plugin_generated::entry, xdev_plugin_entry_v1)                                          \
  static_assert(true, "a semicolon after XDEV_DEFINE_PLUGIN(...)")
