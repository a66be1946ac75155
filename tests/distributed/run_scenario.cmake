# cmake -DLAUNCH=<mpiexec and its flags, a list> -DPROGRAM=<exe> -DSCENARIO=<name> -DEXPECT_STATUS=nonzero|<n>
#       -DEXPECT_OUTPUT=<regexes, a list> -DMAX_SECONDS=<s> -P run_scenario.cmake
#
# Runs one failure scenario of mpi_scenarios.cpp under mpirun and checks that the job ended with
# the expected status, that its output (stdout and stderr of every rank) matches every regex, that
# it ended within MAX_SECONDS (a job that hangs, or waits for a stalled rank, fails the test), and
# that none of its processes outlived it (an orphaned rank).
cmake_minimum_required(VERSION 3.25)

string(TIMESTAMP _start "%s%f" UTC)
execute_process(COMMAND ${LAUNCH} "${PROGRAM}" "${SCENARIO}" RESULT_VARIABLE _rc OUTPUT_VARIABLE _out
                ERROR_VARIABLE _out TIMEOUT 60)
string(TIMESTAMP _end "%s%f" UTC)
math(EXPR _ms "(${_end} - ${_start}) / 1000")
message(STATUS "scenario ${SCENARIO}: status ${_rc} after ${_ms} ms; output:\n${_out}")

set(_problems)
if(EXPECT_STATUS STREQUAL "nonzero")
  if(NOT _rc MATCHES "^[0-9]+$" OR _rc EQUAL 0)
    list(APPEND _problems "the job's status is \"${_rc}\", expected a non-zero exit status")
  endif()
elseif(NOT _rc STREQUAL EXPECT_STATUS)
  list(APPEND _problems "the job's status is \"${_rc}\", expected ${EXPECT_STATUS}")
endif()
foreach(_regex IN LISTS EXPECT_OUTPUT)
  if(NOT _out MATCHES "${_regex}")
    list(APPEND _problems "the output does not match \"${_regex}\"")
  endif()
endforeach()
math(EXPR _limit "${MAX_SECONDS} * 1000")
if(_ms GREATER _limit)
  list(APPEND _problems "the job took ${_ms} ms, more than ${MAX_SECONDS} s")
endif()
# Every process still running this program with this scenario. The script receives the two in
# the other order, so that its own command line does not match.
execute_process(
  COMMAND sh -c [[for f in /proc/[0-9]*/cmdline; do
                   c=$(tr '\000' ' ' < "$f" 2>/dev/null); case "$c" in *"$2 $1 "*) echo "$c";; esac
                 done]]
          sh "${SCENARIO}" "${PROGRAM}"
  OUTPUT_VARIABLE _left OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _left STREQUAL "")
  list(APPEND _problems "processes of the job outlived it:\n    ${_left}")
endif()
if(_problems)
  list(JOIN _problems "\n  " _text)
  message(FATAL_ERROR "scenario ${SCENARIO} failed:\n  ${_text}")
endif()
message(STATUS "scenario ${SCENARIO}: passed (${_ms} ms)")
