#include "strata/compaction.h"

namespace strata {

std::string RecallToolSchema() {
  // Canonical JSON (sorted keys, compact): byte-stable in the tools layer.
  return R"({"function":{"description":"Get back the original content that the context manager )"
         R"(masked, truncated, summarized or evicted. Pass the recall id shown in its place (r-...).",)"
         R"("name":"context_recall","parameters":{"properties":{"recall_id":{"description":"The )"
         R"(recall id, e.g. r-0123456789abcdef","type":"string"}},"required":["recall_id"],"type":"object"}},)"
         R"("type":"function"})";
}

}  // namespace strata
