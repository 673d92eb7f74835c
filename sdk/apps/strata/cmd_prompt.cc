// `strata prompt REQUEST.json [--template NAME] [--tokenizer SPEC] [--blocks N]`: prints the prompt
// text a server builds from a Chat Completions body with the chat template (strata/chat_template.h)
// — the text it tokenizes and caches. Standard output is exactly that text (no newline added);
// everything else (template name, token count, block boundaries) goes to standard error, one
// "key: value" line each, so `strata prompt req.json > prompt.txt` captures the prompt alone.
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "strata/chat_template.h"
#include "strata/tokenizer_spec.h"

namespace strata::cli {
namespace {

struct PromptArgs {
  std::string request;
  std::string template_name;
  std::string tokenizer;
  size_t blocks = 0;
};

std::string ReadRequest(const std::string& path) {
  std::ostringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CLI::ValidationError("REQUEST", "cannot read \"" + path + "\"");
  text << in.rdbuf();
  return text.str();
}

// The body's "model", or "" (the body is checked by the template afterwards).
std::string ModelOf(const std::string& body) {
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
  if (parsed.is_object() && parsed.contains("model") && parsed["model"].is_string())
    return parsed["model"].get<std::string>();
  return "";
}

// A short printable excerpt: JSON-quoted, invalid UTF-8 replaced.
std::string Quote(std::string_view text) {
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void PrintBlocks(const std::string& prompt, const Tokenizer& tokenizer,
                 const std::vector<int32_t>& ids, size_t block_tokens) {
  size_t full = ids.size() / block_tokens;
  // A server computes the last prompt token itself, so only full blocks before it can be reused.
  size_t cacheable = ids.empty() ? 0 : std::min(full, (ids.size() - 1) / block_tokens);
  std::cerr << "blocks: " << full << " full blocks of " << block_tokens << " tokens, " << cacheable
            << " reusable by a later request (" << cacheable * block_tokens << " tokens)\n";
  size_t offset = 0;
  bool offsets_known = true;
  for (size_t b = 0; b < full; ++b) {
    std::vector<int32_t> block(ids.begin() + b * block_tokens,
                               ids.begin() + (b + 1) * block_tokens);
    StatusOr<std::string> text = Decode(tokenizer, block);
    std::cerr << "block " << b << ": tokens " << b * block_tokens << "-" << (b + 1) * block_tokens;
    // Byte offsets while decoded blocks line up with the prompt (a block boundary inside a
    // multi-byte character stops them).
    if (offsets_known && text.ok() && prompt.compare(offset, text->size(), *text) == 0) {
      std::cerr << ", bytes " << offset << "-" << offset + text->size();
      offset += text->size();
    } else {
      offsets_known = false;
    }
    if (text.ok()) {
      std::string_view tail(*text);
      if (tail.size() > 32) tail.remove_prefix(tail.size() - 32);
      std::cerr << ", ends " << Quote(tail);
    }
    std::cerr << "\n";
  }
}

void Run(const PromptArgs& args) {
  if (args.blocks > 0 && args.tokenizer.empty())
    throw CLI::ValidationError("--blocks", "needs --tokenizer (blocks are counted in tokens)");
  const std::string body = ReadRequest(args.request);
  std::string name = args.template_name;
  if (name.empty()) {
    std::string model = ModelOf(body);
    name = model.empty() ? "glm-5.3" : DefaultChatTemplateName(model);
  }
  StatusOr<std::unique_ptr<ChatTemplate>> chat_template = MakeChatTemplate(name);
  if (!chat_template.ok())
    throw CLI::ValidationError("--template", chat_template.status().message());

  std::unique_ptr<Tokenizer> tokenizer;
  if (!args.tokenizer.empty()) {
    StatusOr<std::unique_ptr<Tokenizer>> made = MakeTokenizer(args.tokenizer);
    if (!made.ok()) {
      if (made.status().code() == StatusCode::kInvalidArgument &&
          args.tokenizer.rfind("hf:", 0) != 0)
        throw CLI::ValidationError("--tokenizer", made.status().message());
      throw CommandFailed{made.status().message()};
    }
    tokenizer = std::move(made).value();
    if (args.blocks > 0 && tokenizer->IsEstimate())
      throw CLI::ValidationError("--blocks", "tokenizer \"" + args.tokenizer +
                                                 "\" is an estimator; block boundaries need "
                                                 "token ids (use hf: or spm:)");
  }

  StatusOr<std::string> prompt = (*chat_template)->Render(body);
  if (!prompt.ok()) throw CLI::ValidationError("REQUEST", prompt.status().message());
  StatusOr<size_t> overhead = (*chat_template)->OverheadTokens(body);
  if (!overhead.ok()) throw CLI::ValidationError("REQUEST", overhead.status().message());

  std::cout.write(prompt->data(), static_cast<std::streamsize>(prompt->size()));
  std::cout.flush();  // the prompt before the figures on stderr (main.cc checks that it was written)

  std::cerr << "template: " << (*chat_template)->Name() << "\n";
  std::cerr << "bytes: " << prompt->size() << "\n";
  if (tokenizer == nullptr) return;
  std::vector<int32_t> ids;
  size_t text_tokens = 0;
  if (tokenizer->IsEstimate()) {
    text_tokens = tokenizer->Count(*prompt);
  } else {
    ids = tokenizer->Encode(*prompt);
    text_tokens = ids.size();
  }
  std::cerr << "tokens: " << text_tokens + *overhead;
  if (*overhead > 0)
    std::cerr << " (text " << text_tokens << " + template overhead " << *overhead << ")";
  if (tokenizer->IsEstimate()) std::cerr << " (estimated)";
  std::cerr << "\n";
  if (args.blocks > 0) PrintBlocks(*prompt, *tokenizer, ids, args.blocks);
}

}  // namespace

void RegisterPrompt(CLI::App& app) {
  auto args = std::make_shared<PromptArgs>();
  CLI::App* cmd = app.add_subcommand(
      "prompt", "Print the prompt text a server builds from a Chat Completions request");
  cmd->add_option("request", args->request,
                  "Chat Completions request body (JSON file, - for stdin)")
      ->required();
  std::string names;
  for (const std::string& n : ChatTemplateNames()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("--template", args->template_name,
                  "chat template: " + names +
                      " (default: by the body's model, glm-5.3 for GLM-5 models and bodies "
                      "without a model)");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "count the prompt's tokens: hf:PATH/tokenizer.json, spm:PATH/model.model or "
                  "estimate[:BYTES_PER_TOKEN|FAMILY]");
  cmd->add_option("--blocks", args->blocks,
                  "with an exact --tokenizer, print the boundaries of N-token cache blocks")
      ->check(CLI::PositiveNumber);
  cmd->footer(
      "Standard output: the prompt text, byte for byte (no newline added). Standard error: "
      "\"template:\", \"bytes:\", \"tokens:\" and \"block i:\" lines. Exit status: 0 ok, 2 bad "
      "request or usage, 1 failure (unreadable tokenizer, write error).");
  cmd->callback([args] { Run(*args); });
}

}  // namespace strata::cli
