// strata/chat_template.h — the prompt text a server builds from a Chat Completions request, so that
// strata counts the input tokens the server will count (tokens = tokenizer(template(request))) and
// predicts its prefix-cache blocks from the same text.
//
// Templates, selected by name with MakeChatTemplate(name):
//  - "glm-5.3": GLM-5.3-Flash's published chat_template.jinja (zai-org/GLM-5.3-Flash). The default
//    for GLM-5 models (DefaultChatTemplateName("glm-5.3-flash")). Alias "glm5".
//  - "glm-4.7": GLM-4.7's published chat_template.jinja (zai-org/GLM-4.7), the compact form also
//    served for GLM-4.7-Flash.
//  - "generic": role + content text plus a fixed per-message overhead, for models whose template
//    strata does not know.
// docs/templates.md lists what each renders, branch by branch.
//
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::ChatTemplate> glm,
//                           strata::MakeChatTemplate("glm-5.3"));
//   STRATA_ASSIGN_OR_RETURN(std::string prompt, glm->Render(request_body_json));
//   STRATA_ASSIGN_OR_RETURN(strata::RequestTokenCount n,
//                           strata::CountRequestTokens(*glm, *tokenizer, request_body_json));
//
// The request is an OpenAI Chat Completions body: "messages" (roles system, developer, user,
// assistant with optional "tool_calls" whose "arguments" is a JSON string or object, tool),
// optional "tools", optional "reasoning_effort", optional "add_generation_prompt" (default true),
// optional "chat_template_kwargs" {"enable_thinking", "clear_thinking", "reasoning_effort"}. It is
// rendered the way vLLM hands it to the template: tool-call "arguments" strings parsed into
// objects, null content as "", a message's "reasoning" field as its "reasoning_content".
//
// Thread safety: templates are immutable after creation; Render and the free functions may be
// called concurrently.
#ifndef STRATA_CHAT_TEMPLATE_H_
#define STRATA_CHAT_TEMPLATE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"
#include "strata/tokenizer.h"  // Tokenizer, RequestTokenCounter, ChatTemplate, RenderedPrompt

namespace strata {

// JSON in a request (the body itself, or a tool call's "arguments" string) nested deeper than this
// many arrays/objects is refused with INVALID_ARGUMENT naming the limit, before any of it is
// walked. Python's json module (and so vLLM and SGLang) gives up near 1,000 levels.
inline constexpr size_t kChatTemplateMaxJsonDepth = 512;

// The names MakeChatTemplate accepts (aliases not included): "glm-5.3", "glm-4.7", "generic".
std::vector<std::string> ChatTemplateNames();

// The template called `name` (one of ChatTemplateNames(), or the alias "glm5" for "glm-5.3").
// INVALID_ARGUMENT listing the known names for any other name.
StatusOr<std::unique_ptr<ChatTemplate>> MakeChatTemplate(std::string_view name);

// The template name for a model id: "glm-5.3" for GLM-5 models (e.g. "glm-5.3-flash",
// "zai-org/GLM-5.3-Flash"), "glm-4.7" for GLM-4 models, "generic" otherwise. Case-insensitive.
std::string DefaultChatTemplateName(std::string_view model);

// Options of the GLM templates (MakeGlm5ChatTemplate, MakeGlm47ChatTemplate).
struct Glm5TemplateOptions {
  // Append the generation prompt, as servers do for a completion request, unless the request's
  // "add_generation_prompt" says otherwise. Default true.
  bool add_generation_prompt = true;
};

// The "glm-5.3" template with options (MakeChatTemplate("glm-5.3") uses the defaults).
std::unique_ptr<ChatTemplate> MakeGlm5ChatTemplate(Glm5TemplateOptions options = {});

// The "glm-4.7" template with options.
std::unique_ptr<ChatTemplate> MakeGlm47ChatTemplate(Glm5TemplateOptions options = {});

// Options of the "generic" template (MakeGenericChatTemplate).
struct GenericTemplateOptions {
  // Tokens each message costs beyond its text (role markers, separators). Default 4 (OpenAI's
  // documented figure for its chat models).
  size_t per_message_tokens = 4;
  // Tokens each request costs once (the assistant generation prompt). Default 3.
  size_t per_request_tokens = 3;
};

// Renders "role\ncontent\n" per message (tool calls as "name arguments", tools as their JSON).
std::unique_ptr<ChatTemplate> MakeGenericChatTemplate(GenericTemplateOptions options = {});

// The input tokens of a request (CountRequestTokens).
struct RequestTokenCount {
  size_t tokens = 0;       // tokenizer.Count(Render(request)) + OverheadTokens(request)
  bool estimated = false;  // the tokenizer is an estimator
};

// Input tokens of a whole request. Errors: those of Render.
StatusOr<RequestTokenCount> CountRequestTokens(const ChatTemplate& chat_template,
                                               const Tokenizer& tokenizer,
                                               std::string_view request_json);

// A RequestTokenCounter (strata/tokenizer.h) that counts CountRequestTokens(chat_template,
// tokenizer, body), incrementally: it keeps the last few prompts it counted with the token count at
// each place the tokenizer allows a prompt to be cut (a Hugging Face byte-level BPE tokenizer: before
// an added token, and after a newline that nothing merges across), and counts a new prompt from the
// last such place inside its common prefix with one of them, so an agent's turn costs its new bytes.
// With strata's own templates the prompt is the template's kept rendering (not copied, parsed
// once for the render and the overhead), and a rendering that continues one counted before
// continues that one's count without comparing the bytes it kept; other templates' prompts are
// compared with each kept one. Other tokenizers count each distinct prompt whole. Neither argument
// is owned; both must outlive the counter.
std::unique_ptr<RequestTokenCounter> MakeRequestTokenCounter(const ChatTemplate& chat_template,
                                                             const Tokenizer& tokenizer);

}  // namespace strata

#endif  // STRATA_CHAT_TEMPLATE_H_
