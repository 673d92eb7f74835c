# strata_sidecar_proxy: the sidecar's OpenAI-compatible HTTP side (reconcile.h: keeping an agent's
# history in step with a client's message list). Included by the sidecar's CMakeLists.txt and by
# the proxy's tests; defined once.
# Depends on: strata::agent, nlohmann_json, OpenSSL (SHA-256 digests).
if(TARGET strata_sidecar_proxy)
  return()
endif()
add_library(strata_sidecar_proxy STATIC ${CMAKE_CURRENT_LIST_DIR}/reconcile.cc)
target_include_directories(strata_sidecar_proxy PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(strata_sidecar_proxy
  PUBLIC strata::agent nlohmann_json::nlohmann_json
  PRIVATE OpenSSL::Crypto strata_build_flags)
