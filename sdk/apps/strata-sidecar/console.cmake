# strata_sidecar_console: the console's routes on the sidecar's HTTP listener (console_routes.h),
# over strata_console_lib (sdk/apps/console: the JSON documents and the page, shared with
# `strata inspect --html`). Included by the sidecar's CMakeLists.txt.
add_library(strata_sidecar_console STATIC ${CMAKE_CURRENT_LIST_DIR}/console_routes.cc)
target_include_directories(strata_sidecar_console PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(strata_sidecar_console
  PUBLIC strata_sidecar_proxy strata_sidecar_lib strata_console_lib strata::pools
  PRIVATE strata_build_flags)
