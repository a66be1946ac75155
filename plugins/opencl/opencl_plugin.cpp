// The OPENCL plugin: xdev_opencl::OpenCL as a shared library (libxdev_plugin_opencl.so).
//
// Never unloaded: the OpenCL runtime calls back into this library (its event callbacks) from its
// own threads, and keeps those threads, and the ICD loader, alive until the process exits.
#include "opencl_backend.hpp"

#include <xdev/plugin/define.hpp>

XDEV_DEFINE_PLUGIN_WITH(xdev_opencl::OpenCL, .flags = XDEV_PLUGIN_NEVER_UNLOAD);
