# Driver of one compile-fail test (cmake -P), registered by tests/compile_fail/CMakeLists.txt:
#
#   cmake -DSETTINGS=<settings.cmake> -DSOURCE=<file.cpp> -P run_compile_fail.cmake
#
# Compiles SOURCE with -fsyntax-only and the compiler, flags and xdev include directories of the
# build (from SETTINGS). The first line of SOURCE says what must happen:
#
#   // expect: <text>   compilation fails and its output contains <text>
#   // expect-success   compilation succeeds
#
# The test fails when compilation succeeds where it must fail, fails without <text> (a mistake
# caught for the wrong reason, or a message that changed), or fails where it must succeed; the
# compiler's error lines are printed in each case.
cmake_minimum_required(VERSION 3.25)

foreach(_var SETTINGS SOURCE)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "run_compile_fail.cmake: -D${_var}=... is required")
  endif()
endforeach()
include("${SETTINGS}")

# The expectation, from the first line. Read as text (not file(STRINGS)) so that semicolons and
# brackets in the expected message stay part of it.
file(READ "${SOURCE}" _head LIMIT 4096)
string(REGEX MATCH "^[^\n]*" _first_line "${_head}")
string(REGEX REPLACE "[ \t\r]+$" "" _first_line "${_first_line}")
if(_first_line MATCHES "^// expect-success$")
  set(_must_compile TRUE)
elseif(_first_line MATCHES "^// expect: (.+)$")
  set(_must_compile FALSE)
  set(_expected "${CMAKE_MATCH_1}")
else()
  message(FATAL_ERROR "${SOURCE}: the first line must be `// expect: <text of the diagnostic>` or "
                      "`// expect-success`, not: ${_first_line}")
endif()

# The compile command: this build's compiler and flags, xdev::xdev's include directories (minus the
# compiler's own, which must not be repeated with -I) and definitions.
set(_command "${CXX_COMPILER}")
separate_arguments(_flags NATIVE_COMMAND "${CXX_FLAGS}")
list(APPEND _command ${_flags} ${CXX_STANDARD_OPTION} -fsyntax-only -fdiagnostics-color=never)
if(CXX_SYSROOT)
  list(APPEND _command "--sysroot=${CXX_SYSROOT}")
endif()
foreach(_dir IN LISTS INCLUDE_DIRS)
  if(NOT _dir IN_LIST IMPLICIT_INCLUDE_DIRS)
    list(APPEND _command "-I${_dir}")
  endif()
endforeach()
foreach(_definition IN LISTS COMPILE_DEFINITIONS)
  list(APPEND _command "-D${_definition}")
endforeach()
list(APPEND _command "${SOURCE}")

execute_process(COMMAND ${_command} RESULT_VARIABLE _result OUTPUT_VARIABLE _output ERROR_VARIABLE _output)
# Clang prints a static_assert message as a string literal (quotes escaped); compare the text.
string(REPLACE "\\\"" "\"" _output "${_output}")

# Prints the command and the compiler's first error lines, then fails the test with `why`.
function(_fail why)
  list(JOIN _command " " _shown)
  # Semicolons (frequent in the messages) would split the lines as CMake lists; hide them meanwhile.
  string(REPLACE ";" "<semicolon>" _text "${_output}")
  string(REGEX MATCHALL "[^\n]*error:[^\n]*" _errors "${_text}")
  list(LENGTH _errors _error_count)
  list(SUBLIST _errors 0 5 _errors)
  list(JOIN _errors "\n  " _errors)
  string(REPLACE "<semicolon>" ";" _errors "${_errors}")
  string(REGEX MATCHALL "[^\n]*\n" _lines "${_text}")
  list(LENGTH _lines _line_count)
  message("command: ${_shown}")
  message("compiler exit status: ${_result}; ${_line_count} line(s) of output, ${_error_count} error line(s)")
  if(_error_count GREATER 0)
    message("first error lines:\n  ${_errors}")
  endif()
  message(FATAL_ERROR "${SOURCE}: ${why}")
endfunction()

if(_must_compile)
  if(NOT _result EQUAL 0)
    _fail("must compile, but the compiler rejected it")
  endif()
  message(STATUS "compiled, as expected")
  return()
endif()

if(_result EQUAL 0)
  _fail("compiled, but this mistake must be rejected with: ${_expected}")
endif()
string(FIND "${_output}" "${_expected}" _found)
if(_found EQUAL -1)
  _fail("rejected, but the diagnostics do not contain the expected text: ${_expected}")
endif()
message(STATUS "rejected with: ${_expected}")
