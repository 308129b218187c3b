# cmake -DCXX=<compiler> -DSOURCE=<file.cpp> [-DINCLUDE_DIRS=a|b] [-DDEFINITIONS=A=1|B]
#       [-DIMPLICIT_DIRS=a|b] [-DFLAGS=x|y] -P CheckCompileFail.cmake
# (lists are separated by |)
#
# Passes when SOURCE does not compile and the first compiler output line containing "error:"
# contains the sentence given on SOURCE's first line, `// EXPECT: <sentence>` (a plain substring
# match, not a regex).
cmake_minimum_required(VERSION 3.25)

foreach(_var IN ITEMS CXX SOURCE)
    if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
        message(FATAL_ERROR "CheckCompileFail.cmake: -D${_var}=... is required")
    endif()
endforeach()

file(STRINGS "${SOURCE}" _first LIMIT_COUNT 1)
if(NOT _first MATCHES "^[ \t]*//[ \t]*EXPECT:[ \t]*(.*[^ \t])[ \t]*$")
    message(FATAL_ERROR "${SOURCE}: the first line must be `// EXPECT: <sentence>`, got `${_first}`")
endif()
set(_expected "${CMAKE_MATCH_1}")

set(_args -std=c++20 -fsyntax-only -fdiagnostics-color=never)
string(REPLACE "|" ";" _implicit "${IMPLICIT_DIRS}")
string(REPLACE "|" ";" _dirs "${INCLUDE_DIRS}")
foreach(_dir IN LISTS _dirs)
    if(NOT _dir STREQUAL "" AND NOT _dir IN_LIST _implicit)
        list(APPEND _args "-I${_dir}")
    endif()
endforeach()
string(REPLACE "|" ";" _defs "${DEFINITIONS}")
foreach(_def IN LISTS _defs)
    if(NOT _def STREQUAL "")
        list(APPEND _args "-D${_def}")
    endif()
endforeach()
if(DEFINED FLAGS AND NOT "${FLAGS}" STREQUAL "")
    string(REPLACE "|" ";" _flags "${FLAGS}")
    list(APPEND _args ${_flags})
endif()

# Prints `text` as is (message(FATAL_ERROR) would re-wrap it), then fails with `summary`.
function(fail summary text)
    message("${text}")
    message(FATAL_ERROR "${summary}")
endfunction()

# Untranslated messages with plain quotes.
set(ENV{LC_ALL} C)
set(ENV{LANG} C)
execute_process(
    COMMAND "${CXX}" ${_args} "${SOURCE}"
    RESULT_VARIABLE _rc
    OUTPUT_VARIABLE _out
    ERROR_VARIABLE _out)   # both streams into one, in order

if(_rc EQUAL 0)
    fail("${SOURCE} compiled, but it must fail with: ${_expected}" "${_out}")
endif()

string(REPLACE "\r" "" _out "${_out}")
# Escape ; so splitting into lines keeps each line whole.
string(REPLACE ";" "\\;" _escaped "${_out}")
string(REPLACE "\n" ";" _lines "${_escaped}")
set(_first_error "")
foreach(_line IN LISTS _lines)
    string(FIND "${_line}" "error:" _pos)
    if(_pos GREATER_EQUAL 0)
        set(_first_error "${_line}")
        break()
    endif()
endforeach()

if(_first_error STREQUAL "")
    fail("${SOURCE}: the compiler failed (exit ${_rc}) without an `error:` line; expected: ${_expected}"
         "--- compiler output ---\n${_out}")
endif()

string(FIND "${_first_error}" "${_expected}" _found)
if(_found LESS 0)
    fail("the first error is not the expected one (${SOURCE})"
         "--- compiler output ---\n${_out}--- end ---\nexpected:    ${_expected}\nfirst error: ${_first_error}")
endif()
message(STATUS "ok: ${_first_error}")
