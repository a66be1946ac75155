// expect: the plugin's name (B::name, or the `.name` option) must match
// Mistake: a plugin named in lower case (XDEV_DEVICE and the registry use upper-case names).
#include "complete_backend.hpp"

#include <xdev/plugin/define.hpp>

XDEV_DEFINE_PLUGIN_WITH(CompleteBackend<xdev::Capabilities<>>, .name = "mine");
