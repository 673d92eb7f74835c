#include "core/identifiers.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace strata::internal {
namespace {

using Names = std::vector<std::string>;

TEST_CASE("ExtractIdentifiers ranks defined names, then paths, then frequent names", "[core][identifiers]") {
  const std::string text =
      "Traceback in src/app/models.py: parse_config failed; parse_config again; see MyWidget and "
      "version 1.2.3. The end.\ndef load_settings(path):\n    pass\nclass Parser:\n";
  CHECK(ExtractIdentifiers(text, 10) ==
        Names{"load_settings", "Parser", "src/app/models.py", "parse_config", "MyWidget"});
  // At most `limit`, the best ranked first.
  CHECK(ExtractIdentifiers(text, 2) == Names{"load_settings", "Parser"});
  CHECK(ExtractIdentifiers(text, 0).empty());
}

TEST_CASE("ExtractIdentifiers ignores prose, numbers and sentence punctuation", "[core][identifiers]") {
  CHECK(ExtractIdentifiers("Hello world. This is fine, version 1.2.3 of the tool.", 16).empty());
  CHECK(ExtractIdentifiers("", 16).empty());
  // A trailing dot or slash is punctuation, not part of the name; dotted names keep their dots.
  CHECK(ExtractIdentifiers("Edit os.path.join. Then list build/out/.", 16) == Names{"build/out", "os.path.join"});
}

}  // namespace
}  // namespace strata::internal
