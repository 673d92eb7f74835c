// Chat templates by name and by model, and a request's token count through a template. The
// templates themselves are in the files chat_template_internal.h lists.
#include "strata/chat_template.h"

#include <atomic>
#include <cctype>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/chat_template_internal.h"
#include "tokenize/template_memo.h"

namespace strata {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

namespace tokenize_internal {

namespace {
std::atomic<size_t> in_place_bodies{0};
std::atomic<size_t> in_place_renders{0};
std::atomic<size_t> in_place_bodies_moved{0};
}  // namespace

InPlaceStats ChatTemplateInPlaceStats() {
  InPlaceStats stats;
  stats.bodies = in_place_bodies.load();
  stats.renders = in_place_renders.load();
  stats.bodies_moved = in_place_bodies_moved.load();
  return stats;
}

void CountInPlace(bool render, bool moved) {
  (render ? in_place_renders : in_place_bodies).fetch_add(1);
  if (moved) in_place_bodies_moved.fetch_add(1);
}

void ClearChatTemplateMemos() {
  chat_template_internal::ClearRequestMemos();
  chat_template_internal::ClearRenderMemo();
}

}  // namespace tokenize_internal

std::vector<std::string> ChatTemplateNames() { return {"glm-5.3", "glm-4.7", "generic"}; }

StatusOr<std::unique_ptr<ChatTemplate>> MakeChatTemplate(std::string_view name) {
  if (name == "glm-5.3" || name == "glm5") return MakeGlm5ChatTemplate();
  if (name == "glm-4.7") return MakeGlm47ChatTemplate();
  if (name == "generic") return MakeGenericChatTemplate();
  std::string known;
  for (const std::string& n : ChatTemplateNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgumentError("unknown chat template \"" + std::string(name) +
                              "\" (known: " + known + "; alias glm5 = glm-5.3)");
}

std::string DefaultChatTemplateName(std::string_view model) {
  std::string m = Lower(model);
  if (m.find("glm-5") != std::string::npos || m.find("glm5") != std::string::npos) return "glm-5.3";
  if (m.find("glm-4") != std::string::npos || m.find("glm4") != std::string::npos) return "glm-4.7";
  return "generic";
}

StatusOr<RequestTokenCount> CountRequestTokens(const ChatTemplate& chat_template,
                                               const Tokenizer& tokenizer,
                                               std::string_view request_json) {
  STRATA_ASSIGN_OR_RETURN(std::string prompt, chat_template.Render(request_json));
  STRATA_ASSIGN_OR_RETURN(size_t overhead, chat_template.OverheadTokens(request_json));
  RequestTokenCount count;
  count.tokens = tokenizer.Count(prompt) + overhead;
  count.estimated = tokenizer.IsEstimate();
  return count;
}

}  // namespace strata
