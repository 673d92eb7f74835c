// A program built with CMAKE_CXX_STANDARD=14 against an installed strata: strata::core's compile
// feature cxx_std_17 must raise its standard to C++17, or strata/status.h does not compile.
#include <iostream>
#include <string>

#include "strata/status.h"

static_assert(__cplusplus >= 201703L, "strata's targets must raise the standard to C++17");

int main() {
  strata::StatusOr<std::string> missing = strata::NotFoundError("no value");
  std::cout << "C++ " << __cplusplus << ": " << missing.value_or("fallback") << "\n";
  return 0;
}
