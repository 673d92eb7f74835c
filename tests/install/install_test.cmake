# cmake -P script: builds the consumer project (every component, no COMPONENTS) and examples/
# against the installed strata (PREFIX, installed by install_prefix.cmake), and runs them.
set(prefix ${PREFIX})
set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
file(REMOVE_RECURSE ${WORK_DIR}/consumer-build ${WORK_DIR}/examples-build)
run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/consumer-build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release ${launcher})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer-build)
run(${WORK_DIR}/consumer-build/strata_consumer)
if(NOT last_output MATCHES "\"model\":\"consumer-model\"")
  message(FATAL_ERROR "consumer printed an unexpected request: ${last_output}")
endif()
message(STATUS "consumer output: ${last_output}")

# examples/ on its own against the installed strata, as a user's project: configure, build, run the
# one that needs no server.
run(${CMAKE_COMMAND} -S ${EXAMPLES_SOURCE_DIR} -B ${WORK_DIR}/examples-build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release ${launcher})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/examples-build)
foreach(example example_quickstart example_agent_loop)
  if(NOT EXISTS ${WORK_DIR}/examples-build/${example})
    message(FATAL_ERROR "examples/ did not build ${example} against the installed strata")
  endif()
endforeach()
run(${WORK_DIR}/examples-build/example_quickstart)
message(STATUS "examples built against the installed strata")
