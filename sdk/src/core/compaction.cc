#include "strata/compaction_policy.h"

#include <nlohmann/json.hpp>

namespace strata {

std::string RecallToolSchema() {
  // Canonical JSON (sorted keys, compact): byte-stable in the tools layer, and the bytes of the
  // tool an Agent offers (the test "context_recall: the Agent offers RecallToolSchema()").
  return R"j({"function":{"description":"Get back the original of content that was shortened to )j"
         R"j(keep the context small (a masked, truncated, folded, summarized or evicted tool )j"
         R"j(result, or a joined subtask), by the recall id its placeholder names. Long )j"
         R"j(originals come in pages: the answer says how many bytes remain and the offset to )j"
         R"j(continue from.","name":"context_recall",)j"
         R"j("parameters":{"properties":{"max_tokens":{"description":"At most this many tokens )j"
         R"j((default and upper bound: the agent's recall share)","type":"integer"},)j"
         R"j("offset":{"description":"Byte offset in the original to start from (default 0)",)j"
         R"j("type":"integer"},"recall_id":{"description":"The recall id, e.g. )j"
         R"j(r-0123456789abcdef","type":"string"}},"required":["recall_id"],"type":"object"}},)j"
         R"j("type":"function"})j";
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
