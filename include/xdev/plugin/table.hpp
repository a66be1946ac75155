/// \file
/// The rules a plugin's table must follow (<xdev/plugin/abi.h>), as the host checks them: the C
/// enumerations are the C++ ones, the ABI minors and what each appended, which fields of a table of
/// a given minor and size may be read (`detail::table_has`), `check_table` (what the loader runs
/// before anything but the entry) and `initialize_plugin`.
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/core/dtype.hpp>
#include <xdev/core/error.hpp>
#include <xdev/ops/op_args.hpp>
#include <xdev/plugin/detail/abi_bridge.hpp>
#include <xdev/plugin/detail/call.hpp>
#include <xdev/plugin/detail/op_marshal.hpp>
#include <xdev/version.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace xdev::plugin {

// The C enumerations of <xdev/plugin/abi.h> are the values of the C++ ones.
static_assert(static_cast<std::uint32_t>(ops::OpKind::fill) == XDEV_OP_FILL &&
                  static_cast<std::uint32_t>(ops::OpKind::scale) == XDEV_OP_SCALE &&
                  static_cast<std::uint32_t>(ops::OpKind::axpy) == XDEV_OP_AXPY &&
                  static_cast<std::uint32_t>(ops::OpKind::binary) == XDEV_OP_BINARY &&
                  static_cast<std::uint32_t>(ops::OpKind::sum) == XDEV_OP_SUM &&
                  static_cast<std::uint32_t>(ops::OpKind::sum_axis) == XDEV_OP_SUM_AXIS &&
                  static_cast<std::uint32_t>(ops::OpKind::dot) == XDEV_OP_DOT &&
                  static_cast<std::uint32_t>(ops::OpKind::gemm) == XDEV_OP_GEMM &&
                  static_cast<std::uint32_t>(ops::OpKind::gather) == XDEV_OP_GATHER &&
                  static_cast<std::uint32_t>(ops::OpKind::rng) == XDEV_OP_RNG &&
                  static_cast<std::uint32_t>(ops::OpKind::convert) == XDEV_OP_CONVERT &&
                  static_cast<std::uint32_t>(ops::OpKind::exp) == XDEV_OP_EXP,
              "xdev::ops::OpKind and the XDEV_OP_* values of <xdev/plugin/abi.h> disagree");
static_assert(static_cast<int>(DType::bool_) == XDEV_DTYPE_BOOL && static_cast<int>(DType::u8) == XDEV_DTYPE_U8 &&
                  static_cast<int>(DType::i32) == XDEV_DTYPE_I32 && static_cast<int>(DType::i64) == XDEV_DTYPE_I64 &&
                  static_cast<int>(DType::f16) == XDEV_DTYPE_F16 && static_cast<int>(DType::bf16) == XDEV_DTYPE_BF16 &&
                  static_cast<int>(DType::f32) == XDEV_DTYPE_F32 && static_cast<int>(DType::f64) == XDEV_DTYPE_F64,
              "xdev::DType and the XDEV_DTYPE_* values of <xdev/plugin/abi.h> disagree");
static_assert(static_cast<int>(ops::BinaryOp::add) == XDEV_BINARY_ADD &&
                  static_cast<int>(ops::BinaryOp::mul) == XDEV_BINARY_MUL &&
                  static_cast<int>(ops::BinaryOp::min) == XDEV_BINARY_MIN &&
                  static_cast<int>(ops::BinaryOp::max) == XDEV_BINARY_MAX,
              "xdev::ops::BinaryOp and XDEV_BINARY_* disagree");
static_assert(detail::binary_code(ops::BinaryOp::min) == XDEV_BINARY_MIN &&
                  detail::binary_code(ops::BinaryOp::max) == XDEV_BINARY_MAX,
              "detail::binary_code and XDEV_BINARY_* disagree");

/// The ABI minor that added the binary operators `min` and `max` (`XDEV_BINARY_MIN`, `_MAX`).
inline constexpr std::uint32_t binary_min_max_minor = 2;
static_assert(binary_min_max_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates binary min/max");

/// The ABI minor that appended `describe_device` to the table (`PluginBackend::device_description`).
inline constexpr std::uint32_t describe_device_minor = 3;
static_assert(describe_device_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates describe_device");

/// The ABI minor that added the operation `exp` (`XDEV_OP_EXP`, the table's last op entry).
inline constexpr std::uint32_t exp_minor = 4;
static_assert(exp_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates exp");

/// The ABI minor that appended the native queue entries (`create_queue`, `destroy_queue`,
/// `bind_queue`).
inline constexpr std::uint32_t queues_minor = 5;
static_assert(queues_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates native queues");

/// The ABI minor that appended the native marker entries (`record_marker`, `wait_marker`,
/// `release_marker`).
inline constexpr std::uint32_t markers_minor = 6;
static_assert(markers_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates native markers");

/// The ABI minor that appended `device_times` to `xdev_completion` (the table is unchanged).
inline constexpr std::uint32_t device_times_minor = 7;
static_assert(device_times_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates device times");
// (detail::completion_size_v1_1, in detail/abi_bridge.hpp, is the completion's size before it.)

/// The ABI minor that appended `device_properties` to the table (`PluginBackend::device_properties`).
inline constexpr std::uint32_t device_properties_minor = 8;
static_assert(device_properties_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates device properties");

/// The ABI minor that added the flag XDEV_PLUGIN_HOST_MEMORY, and appended the user-kernel entries
/// (`create_kernel`, `launch_kernel`, `destroy_kernel`).
inline constexpr std::uint32_t host_memory_minor = 9;
inline constexpr std::uint32_t kernels_minor = 9;
/// The ABI minor that appended pinned host memory (`allocate_host`, `deallocate_host`).
inline constexpr std::uint32_t pinned_minor = 9;
static_assert(host_memory_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates host-memory plugins");

/// The ABI minor that appended `offsets` to `xdev_kernel_launch` (kernels on views; the table is
/// unchanged).
inline constexpr std::uint32_t kernel_offsets_minor = 10;
static_assert(kernel_offsets_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates kernel windows");

/// The ABI minor that appended strided transfers (`copy_to_host_strided`, `copy_to_device_strided`).
inline constexpr std::uint32_t strided_minor = 11;
static_assert(strided_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates strided transfers");

/// The ABI minor that appended windows for operations (`open_window`, `close_window`).
inline constexpr std::uint32_t windows_minor = 12;
static_assert(windows_minor <= XDEV_ABI_MINOR, "this <xdev/plugin/abi.h> predates op windows");

namespace detail {

/// The size of a table of ABI 1.11: everything before `open_window`, which 1.12 appended.
inline constexpr std::size_t table_size_v1_11 = offsetof(xdev_plugin_api, open_window);

/// The size of a table of ABI 1.9 and 1.10 (1.10 changed only the kernel launch): everything
/// before `copy_to_host_strided`, which 1.11 appended.
inline constexpr std::size_t table_size_v1_9 = offsetof(xdev_plugin_api, copy_to_host_strided);

/// The size of a table of ABI 1.8: everything before `create_kernel`, which 1.9 appended.
inline constexpr std::size_t table_size_v1_8 = offsetof(xdev_plugin_api, create_kernel);

/// The size of a table of ABI 1.6 and 1.7 (1.7 changed only the completion): everything before
/// `device_properties`, which 1.8 appended.
inline constexpr std::size_t table_size_v1_6 = offsetof(xdev_plugin_api, device_properties);

/// The size of a table of ABI 1.5: everything before `record_marker`, which 1.6 appended.
inline constexpr std::size_t table_size_v1_5 = offsetof(xdev_plugin_api, record_marker);

/// The size of a table of ABI 1.4: everything before `create_queue`, which 1.5 appended.
inline constexpr std::size_t table_size_v1_4 = offsetof(xdev_plugin_api, create_queue);

/// The size of a table of ABI 1.3: everything before `exp`, which 1.4 appended.
inline constexpr std::size_t table_size_v1_3 = offsetof(xdev_plugin_api, exp);

/// The size of a table of ABI 1.1 and 1.2 (1.2 changed no layout): everything before
/// `describe_device`, which 1.3 appended. The smallest table `check_table` accepts.
inline constexpr std::size_t table_size_v1_1 = offsetof(xdev_plugin_api, describe_device);

/// True when `api` is a table of ABI `minor` or newer that is large enough to hold the field ending
/// at `end` (`offsetof(field) + sizeof(field)`): only then may that field be read. (A pointer, not
/// a reference: the table may be smaller than `xdev_plugin_api`, and a reference would let the
/// compiler assume all of it readable.)
inline bool table_has(const xdev_plugin_api* api, std::uint32_t minor, std::size_t end) noexcept {
  return api->abi_minor >= minor && api->struct_size >= end;
}

/// The version string xdev passes to plugins in `xdev_host_info` ("0.1.0").
inline const char* host_version() noexcept {
  static const std::string v = std::to_string(XDEV_VERSION_MAJOR) + "." + std::to_string(XDEV_VERSION_MINOR) + "." +
                               std::to_string(XDEV_VERSION_PATCH);
  return v.c_str();
}

/// The checks every table must pass before any of its fields beyond the versions is read: a table,
/// the same major, a supported minor, at least the v1.1 size (`table_size_v1_1`: a 1.1 or 1.2 table
/// ends before the fields 1.3 appended), and a valid name.
inline void check_table_header(const xdev_plugin_api* api, std::string_view where) {
  const std::string at = std::string(where) + ": ";
  if (api == nullptr) throw error(errc::incompatible_abi, at + "the plugin's entry returned no table (null)");
  constexpr std::size_t versions_end = offsetof(xdev_plugin_api, abi_minor) + sizeof(std::uint32_t);
  if (api->struct_size < versions_end)
    throw error(errc::incompatible_abi, at + "xdev_plugin_api: expected at least " + std::to_string(table_size_v1_1) +
                                            " bytes, got " + std::to_string(api->struct_size));
  const std::string version = std::to_string(api->abi_major) + "." + std::to_string(api->abi_minor);
  const std::string supported = "this xdev accepts ABI " + std::to_string(XDEV_ABI_MAJOR) + "." +
                                std::to_string(XDEV_ABI_MIN_MINOR) + " and newer minors of major " +
                                std::to_string(XDEV_ABI_MAJOR);
  if (api->abi_major != XDEV_ABI_MAJOR)
    throw error(errc::incompatible_abi, at + "the plugin was built for ABI major " + std::to_string(api->abi_major) +
                                            " (ABI " + version + "), " + supported);
  if (api->abi_minor < XDEV_ABI_MIN_MINOR)
    throw error(errc::incompatible_abi, at + "the plugin was built for ABI " + version + ", older than " +
                                            std::to_string(XDEV_ABI_MAJOR) + "." + std::to_string(XDEV_ABI_MIN_MINOR) +
                                            "; " + supported);
  if (api->struct_size < table_size_v1_1)
    throw error(errc::incompatible_abi, at + "xdev_plugin_api of ABI " + version + ": expected at least " +
                                            std::to_string(table_size_v1_1) + " bytes, got " +
                                            std::to_string(api->struct_size));
  if (api->name == nullptr) throw error(errc::invalid_argument, at + "the plugin has no name (null)");
  if (!is_plugin_name(api->name))
    throw error(errc::invalid_argument, at + "the plugin's name \"" + std::string(api->name) +
                                            "\" is not accepted: use upper case letters, digits and '_', starting "
                                            "with a letter ([A-Z][A-Z0-9_]*, e.g. \"OPENCL\")");
}

}  // namespace detail

/// Checks a plugin table against the ABI rules of <xdev/plugin/abi.h> before anything but its
/// entry has run; `where` (the library's path, say) starts every message. A newer minor with a
/// larger table is accepted (only the fields this header knows are read), and so is a 1.1 or 1.2
/// table, which ends before the 1.3 field `describe_device` (its devices have no description).
/// \throws xdev::error
/// - `errc::incompatible_abi` for a null table, an `abi_major` other than XDEV_ABI_MAJOR (naming
///   both), an `abi_minor` below XDEV_ABI_MIN_MINOR, a `struct_size` smaller than the v1.1 table
///   ("xdev_plugin_api of ABI 1.1: expected at least 232 bytes, got 200": the size of a 1.1 or 1.2
///   table, `detail::table_size_v1_1`), or a null required entry (naming it);
/// - `errc::invalid_argument` for a null name or one not matching `[A-Z][A-Z0-9_]*`.
inline void check_table(const xdev_plugin_api* api, std::string_view where) {
  detail::check_table_header(api, where);
  const auto require = [&](const void* entry, const char* entry_name) {
    if (entry == nullptr)
      throw error(errc::incompatible_abi,
                  std::string(where) + ": plugin " + api->name + ": the required entry `" + entry_name +
                      "` is null (only op_dtypes, the operations, describe_device and the entries of "
                      "later minors may be)");
  };
  require(reinterpret_cast<const void*>(api->initialize), "initialize");
  require(reinterpret_cast<const void*>(api->create), "create");
  require(reinterpret_cast<const void*>(api->destroy), "destroy");
  require(reinterpret_cast<const void*>(api->capabilities), "capabilities");
  require(reinterpret_cast<const void*>(api->device_count), "device_count");
  require(reinterpret_cast<const void*>(api->allocate), "allocate");
  require(reinterpret_cast<const void*>(api->deallocate), "deallocate");
  require(reinterpret_cast<const void*>(api->copy_to_device), "copy_to_device");
  require(reinterpret_cast<const void*>(api->copy_to_host), "copy_to_host");
  require(reinterpret_cast<const void*>(api->copy_between), "copy_between");
  require(reinterpret_cast<const void*>(api->execute), "execute");
}

/// Calls the plugin's `initialize` (what the loader does once per loaded library; call it yourself
/// only for a table you obtained without the loader, once per process, after `check_table`).
/// \throws xdev::error with the plugin's code and message: "REF: initialize: <message>".
inline void initialize_plugin(const xdev_plugin_api& api) {
  const xdev_host_info host{sizeof(xdev_host_info), XDEV_ABI_MAJOR, XDEV_ABI_MINOR,
                            detail::host_version(), nullptr,        nullptr};
  detail::ErrorSink sink;
  if (api.initialize == nullptr)
    throw error(errc::unimplemented, std::string(api.name) + ": initialize: the plugin does not provide this entry");
  const xdev_status s = api.initialize(&host, &sink.c);
  if (s != XDEV_OK)
    throw error(detail::errc_of(s), std::string(api.name) + ": initialize: " + detail::status_text(s, sink.text()));
}

}  // namespace xdev::plugin
