// strata probe's HTML report: self-contained, its cells carrying the results' numbers, text escaped.
#include <catch2/catch.hpp>

#include "probe.h"

namespace strata::cli::probe {
namespace {

// Results as ResultsJson writes them: two endpoints, one length, two depths.
nlohmann::ordered_json Results() {
  using Json = nlohmann::ordered_json;
  auto bucket = [](const char* length, double depth, int probes, int correct) {
    return Json{{"length", length}, {"depth", depth}, {"probes", probes}, {"correct", correct},
                {"accuracy", static_cast<double>(correct) / probes}, {"interval", {0.1, 0.9}}, {"failed", 0},
                {"discarded", 0}, {"ttft_ms_mean", 5.0}, {"cached_share", 0.5}, {"tokens_mean", 4000},
                {"depth_actual_mean", depth}};
  };
  auto endpoint = [&](const char* name, int deep_correct) {
    return Json{{"name", name}, {"url", "http://x/v1"}, {"probes", 8}, {"correct", 4 + deep_correct},
                {"accuracy", 0.5}, {"failed", 0},
                {"buckets", {bucket("4k", 0.1, 4, 4), bucket("4k", 0.9, 4, deep_correct)}},
                {"by_kind", {{{"kind", "constant"}, {"probes", 8}, {"correct", 4 + deep_correct}, {"accuracy", 0.5},
                              {"interval", {0.2, 0.8}}}}}};
  };
  return Json{{"seed", 1}, {"sources", {{"files", 3}, {"content_tokens", 100}}}, {"probes_planned", 8},
              {"discarded", 0}, {"discarded_by_reason", Json::object()}, {"min_recovery", 0.95},
              {"lengths", {{{"label", "4k"}, {"tokens", 4096}}}}, {"depths", {0.1, 0.9}},
              {"endpoints", {endpoint("A", 4), endpoint("B", 2)}},
              {"recovery", {{{"length", "4k"}, {"depth", 0.1}, {"recovery", 1.0}},
                            {{"length", "4k"}, {"depth", 0.9}, {"recovery", 0.5}}}},
              {"recovery_by_kind", {{{"kind", "constant"}, {"recovery", 0.75}}}},
              {"failing", {"length 4k, depth 0.90: recovery 0.50 < --min-recovery 0.95"}},
              {"worst", {{{"probe", "4k/0.9/1"}, {"kind", "constant"}, {"endpoint", "B"}, {"tokens", 4000},
                          {"depth", 0.9}, {"depth_actual", 0.9}, {"question", "q"}, {"expected", "<4096>"},
                          {"given", "\"5\" & more"}}}}};
}

TEST_CASE("the HTML report is self-contained and its cells carry the results' numbers", "[probe]") {
  const std::string html = RenderHtml(Results());
  CHECK_THAT(html, Catch::Contains("data-endpoint=\"B\" data-length=\"4k\" data-depth=\"0.9\" data-accuracy=\"0.5000\" "
                                   "data-probes=\"4\" data-correct=\"2\""));
  CHECK_THAT(html, Catch::Contains("data-endpoint=\"A\" data-length=\"4k\" data-depth=\"0.1\" data-accuracy=\"1.0000\""));
  CHECK_THAT(html, Catch::Contains("class=\"recovery fail\" data-length=\"4k\" data-depth=\"0.9\" data-recovery=\"0.5000\""));
  CHECK_THAT(html, Catch::Contains("data-kind-recovery=\"0.7500\""));
  CHECK_THAT(html, Catch::Contains("length 4k, depth 0.90: recovery 0.50"));
  // The worst probes' answers are text, escaped.
  CHECK_THAT(html, Catch::Contains("&lt;4096&gt;") && Catch::Contains("&quot;5&quot; &amp; more"));
  for (const char* fetches : {"<script", "<link", "src=", "url(http", "@import"}) {
    CHECK(html.find(fetches) == std::string::npos);  // nothing is fetched
  }
}

}  // namespace
}  // namespace strata::cli::probe
