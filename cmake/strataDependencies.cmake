# How a project using the installed strata package finds each imported target that a strata library
# links. strata's libraries are static, so a consumer links their private dependencies too and must
# find them; strataConfig.cmake looks up only those of the components it loads. The top-level
# CMakeLists.txt refuses, at configure time, a component that links an imported target missing here.
#
# _strata_find_target(<target> <mode> <found_var> <how_var>)
#   mode CHECK: only tells whether <target> is listed here (found_var TRUE or FALSE); no lookup.
#   mode QUIET: looks it up without the status lines of the lookup and of the dependency's own
#               config (gRPC's looks up ZLIB, Protobuf, OpenSSL, c-ares, absl and RE2 loudly): for
#               components that are optional. One line remains: CMake itself prints gRPC's config
#               mode lookup of c-ares, "Could NOT find c-ares (missing: c-ares_DIR)", before its
#               module finds c-ares; only not looking gRPC up (COMPONENTS) avoids it.
#   mode LOUD:  looks it up as find_package() normally does: for components that are required.
#   found_var is TRUE when <target> exists afterwards; how_var names the lookup, for messages.
function(_strata_find_target target mode found_var how_var)
  set(package "")
  set(pkg_config_module "")
  if(target STREQUAL "Threads::Threads")
    set(package Threads)
  elseif(target STREQUAL "nlohmann_json::nlohmann_json")
    set(package nlohmann_json CONFIG)
  elseif(target STREQUAL "OpenSSL::Crypto")
    set(package OpenSSL COMPONENTS Crypto)
  elseif(target STREQUAL "CURL::libcurl")
    set(package CURL)
  elseif(target STREQUAL "SQLite::SQLite3")
    set(package SQLite3)
  elseif(target STREQUAL "zstd::libzstd_shared" OR target STREQUAL "zstd::libzstd_static")
    set(package zstd CONFIG)
  elseif(target STREQUAL "ICU::uc")
    set(package ICU COMPONENTS uc)
  elseif(target STREQUAL "gRPC::grpc++")
    set(package gRPC CONFIG)
  elseif(target STREQUAL "protobuf::libprotobuf")
    set(package Protobuf)
  elseif(target STREQUAL "PkgConfig::PCRE2")
    set(pkg_config_module PCRE2 libpcre2-8)
  elseif(target STREQUAL "PkgConfig::ZSTD")
    set(pkg_config_module ZSTD libzstd)
  endif()
  if(package)
    string(REPLACE ";" " " how "find_package(${package})")
  elseif(pkg_config_module)
    list(GET pkg_config_module 1 module)
    set(how "pkg-config ${module}")
  else()
    set(${found_var} FALSE PARENT_SCOPE)
    set(${how_var} "" PARENT_SCOPE)
    return()
  endif()
  set(${how_var} "${how}" PARENT_SCOPE)
  if(mode STREQUAL "CHECK")
    set(${found_var} TRUE PARENT_SCOPE)
    return()
  endif()
  if(NOT TARGET ${target})
    set(quiet "")
    if(mode STREQUAL "QUIET")
      set(quiet QUIET)
      # QUIET does not reach the lookups a dependency's config makes itself (gRPC's are all loud);
      # in this function scope message(STATUS) prints nothing. --log-level still wins.
      set(CMAKE_MESSAGE_LOG_LEVEL NOTICE)
    endif()
    if(package)
      find_package(${package} ${quiet})
    else()
      find_package(PkgConfig ${quiet})
      if(PKG_CONFIG_FOUND)
        list(GET pkg_config_module 0 prefix)
        pkg_check_modules(${prefix} ${quiet} IMPORTED_TARGET ${module})
      endif()
    endif()
  endif()
  if(TARGET ${target})
    set(${found_var} TRUE PARENT_SCOPE)
  else()
    set(${found_var} FALSE PARENT_SCOPE)
  endif()
endfunction()
