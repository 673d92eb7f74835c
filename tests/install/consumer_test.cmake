# cmake -P script: configures a consumer project against the installed strata (PREFIX), then either
# expects the configure to fail with a message, or builds the project and runs its program.
#   -DPREFIX=... -DSOURCE_DIR=... -DBUILD_DIR=... -DGENERATOR=...
#   -DARGS=a|b|...               more configure arguments, separated by |
#   -DLAUNCHER=ccache            the compiler launcher of the strata build, if any
#   -DFAIL_MATCHING=regex        the configure must fail, and its output (whitespace runs made
#                                one space) match regex
#   -DFORBID=regex               the configure output must not match regex
#   -DPROGRAM=name -DOUTPUT=regex  after building, run BUILD_DIR/name; its output must match regex
file(REMOVE_RECURSE ${BUILD_DIR})
string(REPLACE "|" ";" args "${ARGS}")
if(LAUNCHER)
  list(APPEND args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release ${args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(configure_output "${out}\n${err}")
if(DEFINED FAIL_MATCHING)
  # CMake wraps the lines of an error message: match it with its whitespace made single spaces.
  string(REGEX REPLACE "[ \t\r\n]+" " " flat_output "${configure_output}")
  if(rc EQUAL 0)
    message(FATAL_ERROR "the configure succeeded; it had to fail with \"${FAIL_MATCHING}\":\n"
                        "${configure_output}")
  endif()
  if(NOT flat_output MATCHES "${FAIL_MATCHING}")
    message(FATAL_ERROR "the configure failed without saying \"${FAIL_MATCHING}\":\n"
                        "${configure_output}")
  endif()
  message(STATUS "the configure failed as expected:\n${err}")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the configure failed (${rc}):\n${configure_output}")
endif()
if(DEFINED FORBID AND configure_output MATCHES "${FORBID}")
  message(FATAL_ERROR "the configure printed \"${CMAKE_MATCH_0}\":\n${configure_output}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the build failed (${rc}):\n${out}\n${err}")
endif()
if(DEFINED PROGRAM)
  execute_process(COMMAND ${BUILD_DIR}/${PROGRAM} RESULT_VARIABLE rc OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${OUTPUT}")
    message(FATAL_ERROR "${PROGRAM} exited ${rc}, printing (expected \"${OUTPUT}\"):\n${out}\n${err}")
  endif()
  message(STATUS "${PROGRAM}: ${out}")
endif()
