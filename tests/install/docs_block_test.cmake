# cmake -P script: the ```cmake block under "## Link" in docs/getting-started.md, as the whole
# find_package and link part of a project (after add_executable(my_agent ...)), builds and runs a
# program using strata::agent against the installed strata.
#   -DDOC=docs/getting-started.md -DPREFIX=... -DBUILD_DIR=... -DGENERATOR=... -DMAIN=agent_main.cc
file(READ ${DOC} text)
string(FIND "${text}" "## Link\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${DOC} has no \"## Link\" section")
endif()
string(SUBSTRING "${text}" ${at} -1 text)
if(NOT text MATCHES "```cmake\n([^`]*)```")
  message(FATAL_ERROR "the \"## Link\" section of ${DOC} has no ```cmake block")
endif()
set(block "${CMAKE_MATCH_1}")
set(project_dir ${BUILD_DIR}-project)
file(REMOVE_RECURSE ${project_dir})
file(WRITE ${project_dir}/CMakeLists.txt
  "cmake_minimum_required(VERSION 3.20)\nproject(docs_link_block LANGUAGES CXX)\n"
  "add_executable(my_agent main.cc)\n# From ${DOC}:\n${block}")
configure_file(${MAIN} ${project_dir}/main.cc COPYONLY)
set(SOURCE_DIR ${project_dir})
set(PROGRAM my_agent)
include(${CMAKE_CURRENT_LIST_DIR}/consumer_test.cmake)
