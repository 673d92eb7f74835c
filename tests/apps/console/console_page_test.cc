// The console's page (sdk/apps/console/console_page.h): assets inlined, data embedded safely.
#include "console_page.h"

#include <catch2/catch.hpp>
#include <string>

namespace strata::console {
namespace {

TEST_CASE("the page inlines its script and loads nothing from elsewhere", "[console]") {
  const std::string html = ConsolePage(SidecarBoot());
  CHECK(html.find("/*STRATA_SCRIPT*/") == std::string::npos);
  CHECK(html.find("/*STRATA_BOOT*/") == std::string::npos);
  CHECK(html.find("{\"mode\":\"sidecar\"}") != std::string::npos);
  CHECK(html.find("function timelineSvg") != std::string::npos);
  CHECK(html.find("<script src") == std::string::npos);
  CHECK(html.find("connect-src 'self'") != std::string::npos);
  if (HasChartJs()) CHECK(html.find("Chart.js v") != std::string::npos);
}

TEST_CASE("the growth table has columns for the summary requests' tokens", "[console]") {
  const std::string html = ConsolePage(SidecarBoot());
  for (const char* key :
       {"summary_input_tokens", "summary_cached_tokens", "summary_output_tokens"}) {
    INFO(key);
    CHECK(html.find(std::string("key: '") + key + "'") != std::string::npos);
  }
}

TEST_CASE("embedded data cannot close its script element", "[console]") {
  nlohmann::json page = {{"agent", {{"id", "</script><script>alert(1)</script>"}}}};
  const std::string html = ConsolePage(FileBoot(page));
  CHECK(html.find("</script><script>alert(1)") == std::string::npos);
  CHECK(html.find("\\u003c/script>\\u003cscript>alert(1)") != std::string::npos);
  CHECK(html.find("\"mode\":\"file\"") != std::string::npos);
}

}  // namespace
}  // namespace strata::console
