// The CUDA plugin: xdev_cuda::Cuda as a shared library (libxdev_plugin_cuda.so).
//
// Never unloaded: the CUDA runtime keeps threads of its own (host functions run on one) and the
// driver's state until the process exits.
#include "cuda_backend.hpp"

#include <xdev/plugin/define.hpp>

XDEV_DEFINE_PLUGIN_WITH(xdev_cuda::Cuda, .flags = XDEV_PLUGIN_NEVER_UNLOAD);
