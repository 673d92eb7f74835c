// strata-sidecar's handling of an OpenAI client's request (the proxy, proxy.h and reconcile.h):
// the input is a Chat Completions body, parsed as the proxy parses it; its "messages" go through
// ParseChatMessages, and a parsed conversation is reconciled into a new in-memory agent
// (Reconcile), the way every proxy request starts. Invariants: a refusal has a reason; the derived
// agent id and the message digests have their documented shape; a new agent takes every message
// (nothing kept, nothing replaced); the same conversation sent again keeps every message and
// appends nothing; the client view survives its JSON. The input is also read as a stored client view
// (ClientView::FromJson, what a damaged store hands the proxy): refused with a reason or round-trips.
// The field checks of the whole body (model, n, stream, tools, forwarded and agent-owned fields,
// ParseChatRequest) and the turn that follows are fuzz_sidecar_proxy.cc's.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_util.h"
#include "proxy.h"
#include "reconcile.h"
#include "strata/agent.h"

namespace {

bool IsHex(const std::string& s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

void CheckView(const strata::sidecar::ClientView& view) {
  const std::string json = view.ToJson();
  strata::StatusOr<strata::sidecar::ClientView> again = strata::sidecar::ClientView::FromJson(json);
  STRATA_FUZZ_CHECK(again.ok(), "a client view's own JSON is refused: " + again.status().ToString());
  STRATA_FUZZ_CHECK(again->ToJson() == json, "a client view does not round-trip:\n" + json);
}

void Reconcile(const strata::sidecar::ParsedChat& chat) {
  strata::AgentConfig config;
  config.identity.id = "fuzz";
  config.tokenizer = "estimate";
  config.budget.enforce = false;
  config.recall.expose_tool = false;
  strata::StatusOr<std::unique_ptr<strata::Agent>> agent = strata::Agent::Create(config);
  STRATA_FUZZ_CHECK(agent.ok(), "the harness's agent: " + agent.status().ToString());
  strata::sidecar::ClientView view;
  strata::StatusOr<strata::sidecar::ReconcileOutcome> first =
      strata::sidecar::Reconcile(chat, **agent, &view);
  if (!first.ok()) {
    // A message the context refuses (e.g. invalid UTF-8): the view says what the agent holds.
    STRATA_FUZZ_CHECK(!first.status().message().empty(), "a reconcile refused without a reason");
    STRATA_FUZZ_CHECK(view.entries().size() <= chat.history.size(),
                      "the view holds more than was sent");
    CheckView(view);
    return;
  }
  STRATA_FUZZ_CHECK(first->kept == 0 && !first->replaced,
                    "a new agent kept or replaced messages: " + first->reason);
  STRATA_FUZZ_CHECK(view.entries().size() == chat.history.size(),
                    "the view does not hold every message of a new agent");
  CheckView(view);
  strata::StatusOr<strata::sidecar::ReconcileOutcome> again =
      strata::sidecar::Reconcile(chat, **agent, &view);
  STRATA_FUZZ_CHECK(again.ok(), "the same conversation is refused the second time: " +
                                    again.status().ToString());
  STRATA_FUZZ_CHECK(again->kept == chat.history.size() && again->appended == 0 && !again->replaced &&
                        !again->system_changed,
                    "the same conversation sent again changed the agent: " + again->reason);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = strata::fuzz::AsText(data, size);

  strata::StatusOr<strata::sidecar::ClientView> stored = strata::sidecar::ClientView::FromJson(text);
  if (stored.ok()) {
    CheckView(*stored);
  } else {
    STRATA_FUZZ_CHECK(!stored.status().message().empty(), "a client view refused without a reason");
  }

  // As Proxy::ChatCompletions parses a body.
  const nlohmann::json request = nlohmann::json::parse(text, nullptr, false);
  if (!request.is_object() || !request.contains("messages")) return 0;
  strata::StatusOr<strata::sidecar::ParsedChat> chat =
      strata::sidecar::ParseChatMessages(request["messages"]);
  if (!chat.ok()) {
    STRATA_FUZZ_CHECK(!chat.status().message().empty(), "messages refused without a reason");
    return 0;
  }
  const std::string id = strata::sidecar::Proxy::DerivedAgentId(*chat);
  const std::string prefix = strata::sidecar::kDerivedAgentPrefix;
  STRATA_FUZZ_CHECK(id.size() == prefix.size() + 16 && id.compare(0, prefix.size(), prefix) == 0 &&
                        IsHex(id.substr(prefix.size())),
                    "a derived agent id out of shape: " + id);
  for (const strata::sidecar::ChatEntry& m : chat->history) {
    const std::string digest = strata::sidecar::MessageDigest(*m);
    STRATA_FUZZ_CHECK(m->digest == digest, "a message read with a stale digest");
    STRATA_FUZZ_CHECK(digest.size() == 32 && IsHex(digest), "a message digest out of shape: " + digest);
  }
  Reconcile(*chat);
  return 0;
}
