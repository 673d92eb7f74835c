// strata/chat_template.h — the prompt text a server builds from a Chat Completions request, so that
// strata counts the input tokens the server will count: tokens = tokenizer(template(request)).
//
// Two templates:
//  - GLM-5 family (MakeGlm5ChatTemplate): renders the exact prompt of the public GLM-4.7 style
//    chat_template.jinja (compact form: `[gMASK]<sop>`, `<|system|>`, `<|user|>`, `<|assistant|>`,
//    `<|observation|>`, tools block in a leading system turn, `<tool_call>name<arg_key>k</arg_key>
//    <arg_value>v</arg_value></tool_call>`, `<tool_response>`, `<think>` handling, generation
//    prompt). docs/tokenizers.md lists the cases covered and what differs from the Jinja original.
//  - Generic (MakeGenericChatTemplate): role + content text plus a fixed per-message overhead, for
//    models whose template strata does not know.
//
//   std::unique_ptr<strata::ChatTemplate> glm = strata::MakeGlm5ChatTemplate();
//   STRATA_ASSIGN_OR_RETURN(std::string prompt, glm->Render(request_body_json));
//   STRATA_ASSIGN_OR_RETURN(strata::RequestTokenCount n,
//                           strata::CountRequestTokens(*glm, *tokenizer, request_body_json));
//
// The request is an OpenAI Chat Completions body: "messages" (roles system, developer, user,
// assistant with optional "tool_calls" whose "arguments" is a JSON string, tool), optional "tools",
// optional "reasoning_effort", optional "chat_template_kwargs" {"enable_thinking",
// "clear_thinking"}.
//
// Thread safety: templates are immutable after creation; Render and the free functions may be
// called concurrently.
#ifndef STRATA_CHAT_TEMPLATE_H_
#define STRATA_CHAT_TEMPLATE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "strata/status.h"
#include "strata/tokenizer.h"

namespace strata {

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;

  // Stable name and version, persisted with counts it produced, e.g. "glm5:1".
  virtual std::string Name() const = 0;

  // The prompt text for `request_json` (a Chat Completions body), generation prompt included.
  // Special tokens appear as text ("<|user|>"); an exact tokenizer whose file declares them as
  // added tokens counts each as one token. Errors: INVALID_ARGUMENT for a body that is not JSON,
  // lacks "messages", has an unknown role or tool-call arguments that are not a JSON object.
  virtual StatusOr<std::string> Render(std::string_view request_json) const = 0;

  // Tokens the server adds that the rendered text does not show (the generic template's per-message
  // overhead). 0 for templates that render every token. Errors as Render.
  virtual StatusOr<size_t> OverheadTokens(std::string_view request_json) const = 0;
};

struct Glm5TemplateOptions {
  // Render a `<|system|>Reasoning Effort: <effort>` turn after the tools block when the request has
  // "reasoning_effort". Default true. The public GLM-4.x templates have no such line; it is an
  // assumption about GLM-5's template, to be checked against the deployed chat_template.jinja.
  bool reasoning_effort_line = true;
  // Append the generation prompt (`<|assistant|>` + `<think>` or `</think>`), as servers do for
  // a completion request. Default true.
  bool add_generation_prompt = true;
};

std::unique_ptr<ChatTemplate> MakeGlm5ChatTemplate(Glm5TemplateOptions options = {});

struct GenericTemplateOptions {
  // Tokens each message costs beyond its text (role markers, separators). Default 4 (OpenAI's
  // documented figure for its chat models).
  size_t per_message_tokens = 4;
  // Tokens each request costs once (the assistant generation prompt). Default 3.
  size_t per_request_tokens = 3;
};

// Renders "role\ncontent\n" per message (tool calls as "name arguments", tools as their JSON).
std::unique_ptr<ChatTemplate> MakeGenericChatTemplate(GenericTemplateOptions options = {});

struct RequestTokenCount {
  size_t tokens = 0;       // tokenizer.Count(Render(request)) + OverheadTokens(request)
  bool estimated = false;  // the tokenizer is an estimator
};

// Input tokens of a whole request. Errors: those of Render.
StatusOr<RequestTokenCount> CountRequestTokens(const ChatTemplate& chat_template,
                                               const Tokenizer& tokenizer,
                                               std::string_view request_json);

// A RequestTokenCounter (strata/tokenizer.h) that counts CountRequestTokens(chat_template,
// tokenizer, body). Neither argument is owned; both must outlive the counter.
std::unique_ptr<RequestTokenCounter> MakeRequestTokenCounter(const ChatTemplate& chat_template,
                                                             const Tokenizer& tokenizer);

}  // namespace strata

#endif  // STRATA_CHAT_TEMPLATE_H_
