// The REF plugin: xdev_ref::Ref as a shared library (libxdev_plugin_ref.so).
#include "ref_backend.hpp"

#include <xdev/plugin/define.hpp>

XDEV_DEFINE_PLUGIN(xdev_ref::Ref);
