/* <xdev/plugin/abi.h> is the plugin boundary and must be plain C: this file is compiled as C99
 * with warnings as errors, and fills a table the way a plugin in C would. */
#include <xdev/plugin/abi.h>

static xdev_status initialize(const xdev_host_info* host, xdev_error* err) {
  (void)host;
  (void)err;
  return XDEV_OK;
}

static xdev_status describe_device(void* backend, uint64_t device, const char** out, xdev_error* err) {
  (void)backend;
  (void)device;
  (void)err;
  *out = "a device described in C";
  return XDEV_OK;
}

const xdev_plugin_api* xdev_abi_c_check_table(void);

const xdev_plugin_api* xdev_abi_c_check_table(void) {
  static xdev_plugin_api api;
  api.struct_size = sizeof(xdev_plugin_api);
  api.abi_major = XDEV_ABI_MAJOR;
  api.abi_minor = XDEV_ABI_MINOR;
  api.name = "CPLUGIN";
  api.initialize = &initialize;
  api.describe_device = &describe_device; /* ABI 1.3 */
  return &api;
}
