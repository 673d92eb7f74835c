# strata_sidecar_metrics: SidecarMetrics (sidecar_metrics.h), the series behind the sidecar's
# /metrics. Included by the sidecar's CMakeLists.txt and by the metrics tests; defined once.
# Depends on: strata::metrics (the exposition), strata::agent (Turn), strata::pools (PoolSet's
# families), nlohmann_json (the config section).
if(TARGET strata_sidecar_metrics)
  return()
endif()
add_library(strata_sidecar_metrics STATIC ${CMAKE_CURRENT_LIST_DIR}/sidecar_metrics.cc)
target_include_directories(strata_sidecar_metrics PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(strata_sidecar_metrics
  PUBLIC strata::metrics strata::agent strata::pools nlohmann_json::nlohmann_json
  PRIVATE strata_build_flags)
