// `strata tokens --tokenizer SPEC [--ids] FILE...`: counts the tokens of each file with a tokenizer
// spec (strata/tokenizer_spec.h) and prints one JSON line per file: {"file": ..., "tokens": N},
// plus "ids": [...] with --ids, plus "estimated": true when the spec is an estimator.
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "strata/tokenizer_spec.h"

namespace strata::cli {
namespace {

struct TokensArgs {
  std::string tokenizer;
  bool ids = false;
  std::vector<std::string> files;
};

void Run(const TokensArgs& args) {
  StatusOr<std::unique_ptr<Tokenizer>> made = MakeTokenizer(args.tokenizer);
  if (!made.ok()) {
    // A spec that names a file failed on the file (exit 1); any other is a usage error (exit 2).
    const bool names_file =
        args.tokenizer.rfind("hf:", 0) == 0 || args.tokenizer.rfind("spm:", 0) == 0;
    if (made.status().code() == StatusCode::kInvalidArgument && !names_file)
      throw CLI::ValidationError("--tokenizer", made.status().message());
    throw CommandFailed{made.status().message()};
  }
  const Tokenizer& tokenizer = **made;
  if (args.ids && tokenizer.IsEstimate())
    throw CLI::ValidationError("--ids",
                               "tokenizer \"" + args.tokenizer +
                                   "\" is an estimator and has no token ids; use hf: or spm:");
  // Each file is read in chunks and counted as it streams (StreamEncoder), so a large file is
  // counted in memory bounded by the chunk and the longest line, not the file (--ids keeps the ids:
  // 4 bytes per token).
  constexpr size_t kChunkBytes = 1u << 20;
  std::string chunk(kChunkBytes, '\0');
  for (const std::string& file : args.files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw CommandFailed{"cannot read \"" + file + "\""};
    StreamEncoder encoder(tokenizer);
    std::vector<int32_t> ids;
    std::vector<int32_t>* ids_out = args.ids ? &ids : nullptr;
    while (in) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      const std::streamsize got = in.gcount();
      if (got > 0)
        encoder.Append(std::string_view(chunk.data(), static_cast<size_t>(got)), ids_out);
    }
    if (in.bad()) throw CommandFailed{"reading \"" + file + "\" failed"};
    const size_t tokens = encoder.Finish(ids_out);
    nlohmann::ordered_json line;
    line["file"] = file;
    line["tokens"] = tokens;
    if (args.ids) line["ids"] = ids;
    if (tokenizer.IsEstimate()) line["estimated"] = true;
    std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
}

}  // namespace

void RegisterTokens(CLI::App& app) {
  auto args = std::make_shared<TokensArgs>();
  CLI::App* cmd = app.add_subcommand("tokens", "Count the tokens of files with a tokenizer");
  cmd->add_option(
         "--tokenizer", args->tokenizer,
         "hf:PATH/tokenizer.json, spm:PATH/model.model, estimate, estimate:BYTES_PER_TOKEN "
         "or estimate:FAMILY (qwen3, deepseek_v3, glm, spm-test)")
      ->required();
  cmd->add_flag("--ids", args->ids, "Also print the token ids");
  cmd->add_option("files", args->files, "Files to count (UTF-8 text)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->footer(
      "Prints one JSON line per file: {\"file\": ..., \"tokens\": N} (+ \"ids\"). Exit status: 0 "
      "ok, "
      "2 usage error, 1 failure (unreadable tokenizer or file).");
  cmd->callback([args] { Run(*args); });
}

}  // namespace strata::cli
