# cmake -P script: installs the build into PREFIX (emptied first); every install test builds
# against it (the ctest fixture strata_installed).
#   -DSTRATA_BUILD_DIR=... -DPREFIX=...
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${STRATA_BUILD_DIR} --prefix ${PREFIX}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc}):\n${out}\n${err}")
endif()
file(GLOB exports ${PREFIX}/lib*/cmake/strata/strata_*Targets.cmake)
list(LENGTH exports count)
message(STATUS "installed into ${PREFIX}: ${count} component exports")
