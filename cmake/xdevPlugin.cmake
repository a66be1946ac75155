# xdev_add_plugin(): builds an xdev plugin, a shared library made with XDEV_DEFINE_PLUGIN
# (<xdev/plugin/define.hpp>). Available after find_package(xdev CONFIG) and in xdev's own build.
#
#   xdev_add_plugin(<target> SOURCES <source>...
#                   [OUTPUT_NAME <name>]          # default: <target>
#                   [OUTPUT_DIRECTORY <dir>]      # default: ${CMAKE_BINARY_DIR}/plugins
#                   [INSTALL]                     # install into XDEV_INSTALL_PLUGINDIR
#                   [ALLOW_UNDEFINED])            # skip the link-time check for unresolved symbols
#
# The library is a MODULE (loaded at run time, never linked against) linked to xdev::xdev. Its file
# is ${CMAKE_SHARED_MODULE_PREFIX}<name>${CMAKE_SHARED_MODULE_SUFFIX}: "lib<name>.so" on Linux
# (OUTPUT_NAME xdev_plugin_ref gives libxdev_plugin_ref.so), "<name>.dll" on Windows; xdev's loader
# reads the plugin's name from its table, never from the file name. $<TARGET_FILE:<target>> is
# the path. Symbols are hidden: the only export is the entry that XDEV_DEFINE_PLUGIN defines
# (xdev_plugin_entry_v1; on ELF platforms a linker version script enforces it, which also lets the
# library be unloaded). On ELF platforms the link fails on an unresolved symbol
# (--no-undefined), so a plugin that would fail to load fails to build instead; ALLOW_UNDEFINED
# turns that off, and so does a sanitizer build (the sanitizer runtime lives in the executable).
#
# INSTALL installs the file into XDEV_INSTALL_PLUGINDIR, where xdev's loader looks after
# XDEV_PLUGIN_PATH: in xdev's own build, a path relative to CMAKE_INSTALL_PREFIX (a cache
# variable); from an installed xdev package, the absolute plugin directory of that package,
# computed from where the package was found. Set XDEV_INSTALL_PLUGINDIR before calling to install
# elsewhere.
#
#   find_package(xdev CONFIG REQUIRED)
#   xdev_add_plugin(acme_npu SOURCES npu_plugin.cpp OUTPUT_NAME xdev_plugin_acme INSTALL)
include_guard(GLOBAL)

function(xdev_add_plugin target)
  cmake_parse_arguments(PARSE_ARGV 1 _xp "INSTALL;ALLOW_UNDEFINED" "OUTPUT_NAME;OUTPUT_DIRECTORY" "SOURCES")
  if(_xp_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "xdev_add_plugin(${target}): unknown arguments \"${_xp_UNPARSED_ARGUMENTS}\"; accepted: "
                        "SOURCES <source>..., OUTPUT_NAME <name>, OUTPUT_DIRECTORY <dir>, INSTALL, ALLOW_UNDEFINED")
  endif()
  if(NOT _xp_SOURCES)
    message(FATAL_ERROR "xdev_add_plugin(${target}): SOURCES is required (the file that uses XDEV_DEFINE_PLUGIN, "
                        "and any others)")
  endif()
  if(NOT TARGET xdev::xdev)
    message(FATAL_ERROR "xdev_add_plugin(${target}): target xdev::xdev does not exist; call find_package(xdev "
                        "CONFIG) or add_subdirectory(<xdev>) first")
  endif()
  if(NOT _xp_OUTPUT_NAME)
    set(_xp_OUTPUT_NAME "${target}")
  endif()
  if(NOT _xp_OUTPUT_DIRECTORY)
    set(_xp_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/plugins")
  endif()

  add_library(${target} MODULE ${_xp_SOURCES})
  target_link_libraries(${target} PRIVATE xdev::xdev)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "${_xp_OUTPUT_NAME}"
    PREFIX "${CMAKE_SHARED_MODULE_PREFIX}"
    LIBRARY_OUTPUT_DIRECTORY "${_xp_OUTPUT_DIRECTORY}"
    RUNTIME_OUTPUT_DIRECTORY "${_xp_OUTPUT_DIRECTORY}"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)

  # Unresolved symbols fail the link on ELF platforms (macOS and Windows do so already), except
  # under a sanitizer, whose runtime only the executable links.
  set(_flags "${CMAKE_CXX_FLAGS} ${CMAKE_MODULE_LINKER_FLAGS}")
  if(CMAKE_BUILD_TYPE)
    string(TOUPPER "${CMAKE_BUILD_TYPE}" _config)
    string(APPEND _flags " ${CMAKE_CXX_FLAGS_${_config}}")
  endif()
  if(NOT _xp_ALLOW_UNDEFINED AND NOT APPLE AND NOT WIN32 AND NOT _flags MATCHES "-fsanitize="
     AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  # On ELF platforms a version script exports the entry alone. Header-only dependencies give some
  # symbols default visibility despite the preset (Boost.Asio's, for one), and g++ makes a few of
  # them STB_GNU_UNIQUE, which would keep the library mapped forever after dlclose.
  if(NOT APPLE AND NOT WIN32)
    set(_map "${CMAKE_BINARY_DIR}/xdev_plugin_exports.map")
    file(CONFIGURE OUTPUT "${_map}" CONTENT "{\n  global: xdev_plugin_entry_v1;\n  local: *;\n};\n")
    target_link_options(${target} PRIVATE "LINKER:--version-script=${_map}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${_map}")
  endif()

  if(_xp_INSTALL)
    if(NOT XDEV_INSTALL_PLUGINDIR)
      message(FATAL_ERROR "xdev_add_plugin(${target} INSTALL): XDEV_INSTALL_PLUGINDIR is not set")
    endif()
    install(TARGETS ${target} LIBRARY DESTINATION "${XDEV_INSTALL_PLUGINDIR}" RUNTIME
            DESTINATION "${XDEV_INSTALL_PLUGINDIR}")
  endif()
endfunction()
