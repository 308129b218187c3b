# Builds and runs examples/consumer against this build of Tempura. Run by CTest (consumer_install,
# consumer_subdirectory); everything stays under WORK_DIR and nothing touches the network.
#
#   cmake -DMODE=install|subdirectory -DSOURCE_DIR=<tempura source> -DBUILD_DIR=<tempura build>
#         -DWORK_DIR=<scratch dir> [-DCONFIG=Release] [-DGENERATOR=Ninja] [-DMAKE_PROGRAM=...]
#         [-DCXX_COMPILER=...] [-DCXX_LAUNCHER=ccache] [-DCXX_FLAGS=...] [-DEXE_LINKER_FLAGS=...]
#         [-DWERROR=ON] -P RunConsumerTest.cmake
#
# install:      cmake --install BUILD_DIR --prefix WORK_DIR/prefix, then configure the consumer
#               with CMAKE_PREFIX_PATH=WORK_DIR/prefix (find_package(tempura CONFIG REQUIRED)).
# subdirectory: configure the consumer with TEMPURA_SOURCE_DIR=SOURCE_DIR (add_subdirectory).
cmake_minimum_required(VERSION 3.25)

foreach(_var IN ITEMS MODE SOURCE_DIR BUILD_DIR WORK_DIR)
    if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
        message(FATAL_ERROR "RunConsumerTest.cmake: -D${_var}=... is required")
    endif()
endforeach()
if(NOT CONFIG)
    set(CONFIG Release)
endif()
if(NOT GENERATOR)
    set(GENERATOR Ninja)
endif()

function(run_step what)
    message(STATUS "[consumer ${MODE}] ${what}: ${ARGN}")
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
    if(NOT _rc EQUAL 0)
        message(FATAL_ERROR "[consumer ${MODE}] ${what} failed (exit ${_rc}):\n${_out}")
    endif()
    set(step_output "${_out}" PARENT_SCOPE)
endfunction()

set(_consumer_build "${WORK_DIR}/build")
# A build folder configured from another source folder (the consumer moved) cannot be reused.
if(EXISTS "${_consumer_build}/CMakeCache.txt")
    file(STRINGS "${_consumer_build}/CMakeCache.txt" _home REGEX "^CMAKE_HOME_DIRECTORY:")
    if(NOT _home STREQUAL "CMAKE_HOME_DIRECTORY:INTERNAL=${SOURCE_DIR}/examples/consumer")
        file(REMOVE_RECURSE "${_consumer_build}")
    endif()
endif()
set(_configure
    "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/examples/consumer" -B "${_consumer_build}"
    -G "${GENERATOR}"
    "-DCMAKE_BUILD_TYPE=${CONFIG}"
    "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
    "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}"
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
    -DFETCHCONTENT_FULLY_DISCONNECTED=ON)
if(MAKE_PROGRAM)
    list(APPEND _configure "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CXX_COMPILER)
    list(APPEND _configure "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(CXX_LAUNCHER)
    list(APPEND _configure "-DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER}")
endif()

if(MODE STREQUAL "install")
    set(_prefix "${WORK_DIR}/prefix")
    file(REMOVE_RECURSE "${_prefix}")
    run_step("install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${_prefix}" --config "${CONFIG}")
    list(APPEND _configure "-DCMAKE_PREFIX_PATH=${_prefix}" "-DTEMPURA_SOURCE_DIR=")
elseif(MODE STREQUAL "subdirectory")
    list(APPEND _configure "-DTEMPURA_SOURCE_DIR=${SOURCE_DIR}" "-DCMAKE_PREFIX_PATH=")
    if(DEFINED WERROR AND NOT WERROR STREQUAL "")
        list(APPEND _configure "-DTEMPURA_WERROR=${WERROR}")
    endif()
else()
    message(FATAL_ERROR "RunConsumerTest.cmake: MODE must be install or subdirectory, got '${MODE}'")
endif()

run_step("configure" ${_configure})
message("${step_output}")
if(MODE STREQUAL "install")
    # Make sure it was this prefix that find_package took, not some other tempura on the system.
    file(STRINGS "${_consumer_build}/CMakeCache.txt" _dir_line REGEX "^tempura_DIR:")
    string(FIND "${_dir_line}" "${_prefix}/" _pos)
    if(_pos LESS 0)
        message(FATAL_ERROR "[consumer install] find_package(tempura) did not take ${_prefix}: ${_dir_line}")
    endif()
endif()
run_step("build" "${CMAKE_COMMAND}" --build "${_consumer_build}" --config "${CONFIG}" --parallel 2)

set(_exe "${_consumer_build}/consumer")
if(NOT EXISTS "${_exe}" AND EXISTS "${_consumer_build}/${CONFIG}/consumer")
    set(_exe "${_consumer_build}/${CONFIG}/consumer")
endif()
run_step("run" "${_exe}")
message("${step_output}")
message(STATUS "[consumer ${MODE}] passed")
