// strata.trim_messages: strata::TrimMessages (sdk/src/agent/trim.cc) with the tokenizer the
// Python caller loaded once, and its answer in the shape the Python side assembles: which input
// message each kept one is (so that it returns the caller's own dict, every key kept), and what
// trimming changed in it (a masked content, a dropped reasoning), or a message of strata's own (a
// summary).
#include <string>

#include <nlohmann/json.hpp>

#include "common.h"

#include "strata/agent.h"
#include "strata/status.h"
#include "strata/tokenizer.h"

namespace strata_py {

strata::StatusOr<std::string> TrimMessagesJson(const std::string& messages_json,
                                               const std::string& budget_json,
                                               const std::string& policy_name,
                                               const strata::Tokenizer& tokenizer,
                                               const std::string& chat_template_name, bool hygiene) {
  STRATA_ASSIGN_OR_RETURN(strata::AgentConfig config, ConfigWith("budget", budget_json));
  STRATA_ASSIGN_OR_RETURN(strata::Budget budget, strata::ResolveBudget(config.budget));
  strata::TrimOptions options;
  options.policy = policy_name;
  options.counting_tokenizer = &tokenizer;
  options.chat_template = chat_template_name;
  options.hygiene = hygiene;
  STRATA_ASSIGN_OR_RETURN(strata::TrimResult trimmed,
                          strata::TrimMessages(messages_json, budget, options));
  json kept = json::array();
  for (const strata::TrimmedMessage& m : trimmed.kept) {
    if (m.input_index < 0) {
      kept.push_back({{"message", json::parse(m.message_json)}});
      continue;
    }
    json entry = {{"i", m.input_index}};
    if (m.masked_content) entry["content"] = *m.masked_content;
    if (m.reasoning_dropped) entry["drop"] = json::array({"reasoning_content"});
    kept.push_back(std::move(entry));
  }
  return json{{"kept", std::move(kept)},
              {"input_tokens", trimmed.input_tokens},
              {"report", trimmed.report ? ReportJson(*trimmed.report) : json()}}
      .dump();
}

}  // namespace strata_py
