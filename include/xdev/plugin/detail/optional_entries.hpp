/// \file
/// `detail::OptionalEntries`: which of a plugin table's optional entries `PluginBackend` may call,
/// decided once, by ABI minor, from the table alone. An entry counts only when the table's minor
/// has it and its `struct_size` covers it (an older table is never read past its end), and a
/// group of entries (native queues, markers, user kernels, pinned memory, strided transfers, op
/// windows) only when all of them are there. The next minor's entries go here.
#pragma once

#include <xdev/plugin/abi.h>
#include <xdev/plugin/table.hpp>

#include <cstddef>

namespace xdev::plugin::detail {

struct OptionalEntries {
  bool host_memory = false;  ///< XDEV_PLUGIN_HOST_MEMORY (1.9): memory handles are host addresses
  decltype(xdev_plugin_api::describe_device) describe_device = nullptr;      ///< 1.3
  decltype(xdev_plugin_api::device_properties) device_properties = nullptr;  ///< 1.8
  decltype(xdev_plugin_api::create_queue) create_queue = nullptr;            ///< native queues (1.5)
  decltype(xdev_plugin_api::destroy_queue) destroy_queue = nullptr;
  decltype(xdev_plugin_api::bind_queue) bind_queue = nullptr;
  decltype(xdev_plugin_api::record_marker) record_marker = nullptr;  ///< native markers (1.6), with the queues
  decltype(xdev_plugin_api::wait_marker) wait_marker = nullptr;
  decltype(xdev_plugin_api::release_marker) release_marker = nullptr;
  decltype(xdev_plugin_api::create_kernel) create_kernel = nullptr;  ///< user kernels (1.9)
  decltype(xdev_plugin_api::launch_kernel) launch_kernel = nullptr;
  decltype(xdev_plugin_api::destroy_kernel) destroy_kernel = nullptr;
  decltype(xdev_plugin_api::allocate_host) allocate_host = nullptr;  ///< pinned host memory (1.9)
  decltype(xdev_plugin_api::deallocate_host) deallocate_host = nullptr;
  decltype(xdev_plugin_api::copy_to_host_strided) copy_to_host_strided = nullptr;  ///< strided transfers (1.11)
  decltype(xdev_plugin_api::copy_to_device_strided) copy_to_device_strided = nullptr;
  decltype(xdev_plugin_api::copy_between_strided) copy_between_strided = nullptr;  ///< 1.11, on its own
  decltype(xdev_plugin_api::open_window) open_window = nullptr;                    ///< windows for operations (1.12)
  decltype(xdev_plugin_api::close_window) close_window = nullptr;

  /// The entries of `api` (a table that passed `check_table_header`).
  static OptionalEntries read(const xdev_plugin_api* api) noexcept {
    OptionalEntries o;
    // A 1.1 or 1.2 table ends before `describe_device`: never read past its `struct_size`.
    if (table_has(api, describe_device_minor,
                  offsetof(xdev_plugin_api, describe_device) + sizeof(api->describe_device)))
      o.describe_device = api->describe_device;
    // A table older than 1.8 ends before `device_properties`.
    if (table_has(api, device_properties_minor,
                  offsetof(xdev_plugin_api, device_properties) + sizeof(api->device_properties)))
      o.device_properties = api->device_properties;
    // The host-memory flag means something only from 1.9 on (an older plugin's bits are unknown).
    o.host_memory = api->abi_minor >= host_memory_minor && (api->flags & XDEV_PLUGIN_HOST_MEMORY) != 0;
    // Native queues (1.5): all three entries, in a table that covers them.
    if (table_has(api, queues_minor, offsetof(xdev_plugin_api, bind_queue) + sizeof(api->bind_queue)) &&
        api->create_queue != nullptr && api->destroy_queue != nullptr && api->bind_queue != nullptr) {
      o.create_queue = api->create_queue;
      o.destroy_queue = api->destroy_queue;
      o.bind_queue = api->bind_queue;
      // Native markers (1.6): all three entries, with the queues, in a table that covers them.
      if (table_has(api, markers_minor, offsetof(xdev_plugin_api, release_marker) + sizeof(api->release_marker)) &&
          api->record_marker != nullptr && api->wait_marker != nullptr && api->release_marker != nullptr) {
        o.record_marker = api->record_marker;
        o.wait_marker = api->wait_marker;
        o.release_marker = api->release_marker;
      }
    }
    // User kernels (1.9): all three entries, in a table that covers them.
    if (table_has(api, kernels_minor, offsetof(xdev_plugin_api, destroy_kernel) + sizeof(api->destroy_kernel)) &&
        api->create_kernel != nullptr && api->launch_kernel != nullptr && api->destroy_kernel != nullptr) {
      o.create_kernel = api->create_kernel;
      o.launch_kernel = api->launch_kernel;
      o.destroy_kernel = api->destroy_kernel;
    }
    // Pinned host memory (1.9): both entries, in a table that covers them.
    if (table_has(api, pinned_minor, offsetof(xdev_plugin_api, deallocate_host) + sizeof(api->deallocate_host)) &&
        api->allocate_host != nullptr && api->deallocate_host != nullptr) {
      o.allocate_host = api->allocate_host;
      o.deallocate_host = api->deallocate_host;
    }
    // Strided transfers (1.11): both entries, in a table that covers them.
    if (table_has(api, strided_minor,
                  offsetof(xdev_plugin_api, copy_to_device_strided) + sizeof(api->copy_to_device_strided)) &&
        api->copy_to_host_strided != nullptr && api->copy_to_device_strided != nullptr) {
      o.copy_to_host_strided = api->copy_to_host_strided;
      o.copy_to_device_strided = api->copy_to_device_strided;
    }
    if (table_has(api, strided_minor,
                  offsetof(xdev_plugin_api, copy_between_strided) + sizeof(api->copy_between_strided)))
      o.copy_between_strided = api->copy_between_strided;
    // Windows for operations (1.12): both entries, in a table that covers them.
    if (table_has(api, windows_minor, offsetof(xdev_plugin_api, close_window) + sizeof(api->close_window)) &&
        api->open_window != nullptr && api->close_window != nullptr) {
      o.open_window = api->open_window;
      o.close_window = api->close_window;
    }
    return o;
  }
};

}  // namespace xdev::plugin::detail
