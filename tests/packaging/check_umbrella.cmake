# cmake -DXDEV_INCLUDE_DIR=<dir> [-DXDEV_UMBRELLA_EXCLUDE_REGEX=<regex>] -P check_umbrella.cmake
#
# Checks that <xdev/xdev.hpp> includes every public header whose path (relative to the include
# directory) does not match XDEV_UMBRELLA_EXCLUDE_REGEX, that it includes only headers that
# exist, and that no xdev header includes the umbrella itself (STYLE.md, convention 1).
cmake_minimum_required(VERSION 3.25)

if(NOT IS_DIRECTORY "${XDEV_INCLUDE_DIR}/xdev")
  message(FATAL_ERROR "XDEV_INCLUDE_DIR=\"${XDEV_INCLUDE_DIR}\" has no xdev/ directory")
endif()

file(GLOB_RECURSE _headers RELATIVE "${XDEV_INCLUDE_DIR}" "${XDEV_INCLUDE_DIR}/xdev/*.hpp"
     "${XDEV_INCLUDE_DIR}/xdev/*.h")
list(SORT _headers)
set(_umbrella "xdev/xdev.hpp")
file(STRINGS "${XDEV_INCLUDE_DIR}/${_umbrella}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*<xdev/")
set(_included)
foreach(_line IN LISTS _lines)
  string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*<([^>]+)>.*" "\\1" _name "${_line}")
  list(APPEND _included "${_name}")
endforeach()

set(_problems)
foreach(_header IN LISTS _headers)
  if(_header STREQUAL _umbrella)
    continue()
  endif()
  file(STRINGS "${XDEV_INCLUDE_DIR}/${_header}" _self REGEX "^[ \t]*#[ \t]*include[ \t]*<xdev/xdev\\.hpp>")
  if(_self)
    list(APPEND _problems "<${_header}> includes the umbrella <${_umbrella}>; include what it uses instead")
  endif()
  if(XDEV_UMBRELLA_EXCLUDE_REGEX AND _header MATCHES "${XDEV_UMBRELLA_EXCLUDE_REGEX}")
    continue()
  endif()
  if(NOT _header IN_LIST _included)
    list(APPEND _problems "<${_umbrella}> does not include <${_header}>")
  endif()
endforeach()
foreach(_name IN LISTS _included)
  if(NOT _name IN_LIST _headers)
    list(APPEND _problems "<${_umbrella}> includes <${_name}>, which does not exist")
  elseif(XDEV_UMBRELLA_EXCLUDE_REGEX AND _name MATCHES "${XDEV_UMBRELLA_EXCLUDE_REGEX}")
    list(APPEND _problems "<${_umbrella}> includes <${_name}>, which is excluded from the umbrella "
                          "(internal or an optional component)")
  endif()
endforeach()

list(LENGTH _headers _count)
if(_problems)
  list(JOIN _problems "\n  " _text)
  message(FATAL_ERROR "umbrella check failed:\n  ${_text}\n(exclusion regex: \"${XDEV_UMBRELLA_EXCLUDE_REGEX}\")")
endif()
list(LENGTH _included _n)
message(STATUS "<${_umbrella}> includes ${_n} of ${_count} headers; the rest match \"${XDEV_UMBRELLA_EXCLUDE_REGEX}\"")
