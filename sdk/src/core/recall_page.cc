// The context_recall contract's pages (recall_page.h).
#include "core/recall_page.h"

#include <nlohmann/json.hpp>

#include "core/utf8.h"

namespace strata::internal {

StatusOr<RecallRequest> ParseRecallArguments(std::string_view arguments) {
  const nlohmann::json args = nlohmann::json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  if (!args.is_object() || !args.contains("recall_id") || !args["recall_id"].is_string()) {
    return InvalidArgumentError(
        "context_recall needs {\"recall_id\": \"r-...\"} (optional offset, max_tokens); got " +
        Utf8Prefix(arguments, 200));
  }
  RecallRequest request;
  request.recall_id = args["recall_id"].get<std::string>();
  if (args.contains("offset") && args["offset"].is_number_unsigned()) {
    request.offset = args["offset"].get<size_t>();
  }
  if (args.contains("max_tokens") && args["max_tokens"].is_number_unsigned()) {
    request.max_tokens = args["max_tokens"].get<size_t>();
  }
  return request;
}

StatusOr<RecallPage> PageOf(std::string_view recall_id, std::string_view original, size_t offset,
                            size_t max_tokens, const Tokenizer& tokenizer) {
  if (offset > original.size()) {
    return OutOfRangeError("offset " + std::to_string(offset) + " is past the end of " +
                           std::string(recall_id) + " (" + std::to_string(original.size()) +
                           " bytes)");
  }
  std::string_view rest = original.substr(Utf8Floor(original, offset));
  RecallPage page;
  page.recall_id = std::string(recall_id);
  page.offset = original.size() - rest.size();
  page.total_bytes = original.size();
  size_t take = rest.size();
  if (max_tokens > 0 && tokenizer.Count(rest) > max_tokens) {
    // The longest prefix within the limit (binary search on bytes), preferably ending a line.
    size_t lo = 0, hi = rest.size();  // rest[0, lo) fits; rest[0, hi) does not
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      if (tokenizer.Count(rest.substr(0, mid)) <= max_tokens) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    take = Utf8Floor(rest, lo);
    const size_t nl = rest.substr(0, take).rfind('\n');
    if (nl != std::string_view::npos && nl + 1 >= take * 4 / 5) take = nl + 1;
  }
  page.content = std::string(rest.substr(0, take));
  page.remaining_bytes = rest.size() - take;
  page.tokens = tokenizer.Count(page.content);
  return page;
}

std::string RecallAnswerText(const RecallPage& page) {
  const size_t end = page.offset + page.content.size();
  std::string text = "[" + page.recall_id + ": bytes " + std::to_string(page.offset) + "-" +
                     std::to_string(end) + " of " + std::to_string(page.total_bytes) + "]\n" +
                     page.content;
  if (page.remaining_bytes > 0) {
    text += "\n[" + std::to_string(page.remaining_bytes) +
            " bytes remain: call context_recall with recall_id \"" + page.recall_id +
            "\" and offset " + std::to_string(end) + "]";
  } else {
    text += "\n[end of " + page.recall_id + "]";
  }
  return text;
}

}  // namespace strata::internal
