/// \file
/// The single source of xdev's version. CMake reads these three macros.
#pragma once

#define XDEV_VERSION_MAJOR 0
#define XDEV_VERSION_MINOR 1
#define XDEV_VERSION_PATCH 0

/// The version as one comparable number: major * 10000 + minor * 100 + patch.
#define XDEV_VERSION (XDEV_VERSION_MAJOR * 10000 + XDEV_VERSION_MINOR * 100 + XDEV_VERSION_PATCH)
