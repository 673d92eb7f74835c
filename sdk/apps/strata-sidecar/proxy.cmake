# strata_sidecar_proxy: the sidecar's OpenAI-compatible HTTP side: reconcile.h (keeping an agent's
# history in step with a client's message list), proxy.h (chat completions through a managed agent,
# /v1/models), http_server.h (the listener on Debian's cpp-httplib, with OpenSSL for TLS).
# Included by the sidecar's CMakeLists.txt.
# Depends on: strata_sidecar_lib (tenants, registry), strata::agent, cpp-httplib, OpenSSL.
find_package(PkgConfig REQUIRED)
pkg_check_modules(CPP_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
add_library(strata_sidecar_proxy STATIC
  ${CMAKE_CURRENT_LIST_DIR}/reconcile.cc
  ${CMAKE_CURRENT_LIST_DIR}/proxy.cc
  ${CMAKE_CURRENT_LIST_DIR}/proxy_notes.cc
  ${CMAKE_CURRENT_LIST_DIR}/proxy_recall.cc
  ${CMAKE_CURRENT_LIST_DIR}/proxy_turn.cc
  ${CMAKE_CURRENT_LIST_DIR}/json_body.cc
  ${CMAKE_CURRENT_LIST_DIR}/chat_body.cc
  ${CMAKE_CURRENT_LIST_DIR}/chat_message.cc
  ${CMAKE_CURRENT_LIST_DIR}/client_view.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_connection.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_server.cc)
# sdk/src: core/json_text.h (CheckJsonDepth on request bodies), and core/chunk_text.h, which
# client_view.h's ClientView holds (so its users see it too).
target_include_directories(strata_sidecar_proxy PUBLIC ${CMAKE_CURRENT_LIST_DIR}
  ${PROJECT_SOURCE_DIR}/sdk/src)
target_link_libraries(strata_sidecar_proxy
  PUBLIC strata_sidecar_lib strata::agent nlohmann_json::nlohmann_json
  PRIVATE PkgConfig::CPP_HTTPLIB OpenSSL::SSL OpenSSL::Crypto strata_build_flags)
