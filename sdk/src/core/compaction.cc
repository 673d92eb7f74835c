#include "strata/compaction_policy.h"

#include <nlohmann/json.hpp>

namespace strata {

std::string RecallToolSchema() {
  // Canonical JSON (sorted keys, compact): byte-stable in the tools layer.
  return R"({"function":{"description":"Get back the original content that the context manager )"
         R"(masked, truncated, summarized or evicted. Pass the recall id shown in its place (r-...).",)"
         R"("name":"context_recall","parameters":{"properties":{"recall_id":{"description":"The )"
         R"(recall id, e.g. r-0123456789abcdef","type":"string"}},"required":["recall_id"],"type":"object"}},)"
         R"("type":"function"})";
}

std::string CompactionReportJson(const CompactionReport& c) {
  nlohmann::ordered_json j = {{"policy", c.policy},
                              {"reason", c.reason},
                              {"turn", c.turn},
                              {"tokens_before", c.tokens_before},
                              {"tokens_after", c.tokens_after},
                              {"boundary", c.boundary_segment_id},
                              {"invalidated_tokens", c.invalidated_tokens},
                              {"masked", c.masked},
                              {"evicted", c.evicted},
                              {"summarized", c.summarized},
                              {"reasoning_dropped", c.reasoning_dropped},
                              {"rounds", c.rounds}};
  if (!c.summarizer.empty()) j["summarizer"] = c.summarizer;
  if (!c.summary_request.empty()) j["summary_request"] = c.summary_request;
  if (!c.explanation.empty()) {
    j["expected_saving"] = c.explanation.expected_saving;
    j["invalidation_cost"] = c.explanation.invalidation_cost;
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace strata
