#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "compact/common.h"
#include "compact/continuation_request.h"
#include "core/identifiers.h"
#include "core/utf8.h"
#include "strata/builtin_policies.h"
#include "strata/clock.h"
#include "strata/record.h"
#include "strata/transport.h"

namespace strata {

using internal::ExtractIdentifiers;

namespace {

using compact_internal::RecallIdOf;

// Bytes of a message's text the extractive summary quotes on one line.
constexpr size_t kUserLineBytes = 300;      // a user message's first line
constexpr size_t kDecisionBytes = 200;      // an assistant message's stated decision
constexpr size_t kArgumentLineBytes = 160;  // a tool call's arguments
constexpr size_t kErrorLineBytes = 160;     // an error line of a tool result
constexpr size_t kMaskedLineBytes = 600;    // a masked result's placeholder
// Identifiers listed per tool result ("mentions: ..."), and those searched for file paths.
constexpr size_t kResultMentions = 12;
constexpr size_t kResultPathCandidates = 8;
constexpr size_t kErrorLinesPerResult = 3;  // error lines taken from one tool result
constexpr size_t kMaxFilesListed = 25;      // "files seen:" entries
constexpr size_t kMaxErrorsListed = 8;      // "errors seen:" entries
// The "names seen:" line: at most this share of the summary's bound (numerator / denominator),
// taken from the span's most defined/frequent kNameCandidates identifiers, its tokens recounted
// every kNamesPerRecount names while it grows.
constexpr size_t kNamesShareNumerator = 2;
constexpr size_t kNamesShareDenominator = 5;
constexpr size_t kNameCandidates = 2000;
constexpr size_t kNamesPerRecount = 16;
// Fitting: one item is dropped per this many tokens above the bound (at least one per pass).
constexpr size_t kTokensOverPerDroppedItem = 64;
// Fitting: one recall id fewer per this many tokens above the bound (an id costs about 7 tokens,
// so this never removes more than needed), but at least 1/kMinIdCutDivisor of the listed ids.
constexpr size_t kTokensOverPerDroppedId = 4;
constexpr size_t kMinIdCutDivisor = 8;

constexpr std::string_view kThoughtMarker = "THOUGHT:";           // an assistant's stated decision
constexpr std::string_view kTurnsMarker = "summary of turns ";    // in a summary's header
constexpr std::string_view kOmittedItemsPrefix = "- ... (";       // a line of omitted items
constexpr size_t kRecallIdLength = 18;                            // "r-" and 16 hex digits

std::string FirstLine(const std::string& text, size_t max_bytes) {
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return "";
  size_t end = text.find('\n', start);
  std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
  return internal::Utf8Prefix(line, max_bytes);
}

// The assistant's stated decision: the first line after a "THOUGHT:" marker, else its first line.
std::string Decision(const std::string& content) {
  size_t thought = content.find(kThoughtMarker);
  if (thought != std::string::npos) {
    return FirstLine(content.substr(thought + kThoughtMarker.size()), kDecisionBytes);
  }
  return FirstLine(content, kDecisionBytes);
}

std::vector<std::string> ErrorLines(const std::string& text, size_t limit) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size() && lines.size() < limit) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (line.find("Error") != std::string::npos || line.find("error:") != std::string::npos ||
        line.find("Exception") != std::string::npos || line.find("FAILED") != std::string::npos) {
      lines.push_back(FirstLine(line, kErrorLineBytes));
    }
    start = end + 1;
  }
  return lines;
}


// The recall ids ("r-" and 16 hex digits) a line of an earlier summary carries.
std::vector<std::string> RecallIdsIn(const std::string& line) {
  std::vector<std::string> ids;
  for (size_t at = line.find("r-"); at != std::string::npos; at = line.find("r-", at + 2)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(line[at - 1])) || line[at - 1] == '-')) continue;
    size_t end = at + 2;
    while (end < line.size() && std::isxdigit(static_cast<unsigned char>(line[end]))) ++end;
    if (end - at == kRecallIdLength) ids.push_back(line.substr(at, kRecallIdLength));
  }
  return ids;
}

// What a span yields before fitting: one item (a line) per message with the recall ids it stands
// for, the files and error lines its tool results show, its turns and its tokens.
struct SpanDigest {
  std::vector<std::string> items;
  // The recall ids each item stands for: an omitted item leaves them in the summary, so nothing a
  // summary drops is out of reach (the originals are kept under these ids when summarized).
  std::vector<std::vector<std::string>> item_ids;
  std::set<std::string> files, errors;
  size_t tokens = 0;
  int64_t first_turn = 0, last_turn = 0;

  void Add(std::string line, std::vector<std::string> ids) {
    items.push_back(std::move(line));
    item_ids.push_back(std::move(ids));
  }
};

// Merges an earlier summary: keeps its items, not just its header, and its first turn.
void AddEarlierSummary(const Segment& s, SpanDigest& digest) {
  const size_t header_end = s.content.find('\n');
  const size_t turns_at = s.content.find(kTurnsMarker);
  if (turns_at != std::string::npos && turns_at < header_end) {
    digest.first_turn = std::min<int64_t>(
        digest.first_turn, std::atoll(s.content.c_str() + turns_at + kTurnsMarker.size()));
  }
  if (header_end == std::string::npos) return;
  size_t start = header_end + 1;
  while (start < s.content.size()) {
    size_t end = s.content.find('\n', start);
    if (end == std::string::npos) end = s.content.size();
    std::string line = s.content.substr(start, end - start);
    if (!line.empty()) {
      std::vector<std::string> ids = RecallIdsIn(line);
      digest.Add(std::move(line), std::move(ids));
    }
    start = end + 1;
  }
}

// "- turn T: <decision> -> tool: <arguments>" for an assistant message and its calls.
std::string AssistantLine(const Segment& s) {
  std::string decision = Decision(s.content);
  std::string line = "- turn " + std::to_string(s.turn) + ": " + decision;
  for (const ToolCall& call : s.tool_calls) {
    std::string arguments = call.arguments;
    nlohmann::json args = nlohmann::json::parse(arguments, nullptr, false);
    if (args.is_object() && args.size() == 1 && args.begin()->is_string()) {
      arguments = args.begin()->get<std::string>();
    }
    line += (decision.empty() ? "" : " ") + std::string("-> ") + call.name + ": " +
            FirstLine(arguments, kArgumentLineBytes);
  }
  return line;
}

// A tool result's line (its size, the names it mentions, its recall id), and its files and errors.
void AddToolResult(const Segment& s, SpanDigest& digest) {
  std::string result;
  if (s.state == SegmentState::kMasked) {
    result = "  " + FirstLine(s.content, kMaskedLineBytes);  // the placeholder already says it all
  } else {
    result = "  result (" + std::to_string(s.content.size()) + " bytes";
    std::vector<std::string> names = ExtractIdentifiers(s.content, kResultMentions);
    for (size_t k = 0; k < names.size(); ++k) result += (k ? ", " : "; mentions: ") + names[k];
    result += "; recall " + RecallIdOf(s) + ")";
  }
  digest.Add(std::move(result), {RecallIdOf(s)});
  for (const std::string& id : ExtractIdentifiers(s.content, kResultPathCandidates)) {
    if (id.find('/') != std::string::npos) digest.files.insert(id);
  }
  for (const std::string& line : ErrorLines(s.content, kErrorLinesPerResult)) {
    digest.errors.insert(line);
  }
}

SpanDigest Digest(const std::vector<const Segment*>& span) {
  SpanDigest digest;
  digest.first_turn = span.front()->turn;
  digest.last_turn = span.back()->turn;
  for (const Segment* s : span) {
    if (s->kind != SegmentKind::kSummary) digest.first_turn = std::min(digest.first_turn, s->turn);
  }
  for (const Segment* s : span) {
    digest.tokens += s->tokens;
    switch (s->kind) {
      case SegmentKind::kUser:
        digest.Add("- user: " + FirstLine(s->content, kUserLineBytes), {RecallIdOf(*s)});
        break;
      case SegmentKind::kSummary:
        AddEarlierSummary(*s, digest);
        break;
      case SegmentKind::kAssistant:
      case SegmentKind::kToolCall:
        digest.Add(AssistantLine(*s), {RecallIdOf(*s)});
        break;
      case SegmentKind::kToolResult:
      case SegmentKind::kErrorLog:
        AddToolResult(*s, digest);
        break;
      default:
        break;
    }
  }
  return digest;
}

// The names the span's messages and outputs mention, most defined/frequent first, within its share
// of the summary's bound: what an agent most often needs again. Files already listed are left out.
std::string NamesLine(const std::vector<const Segment*>& span, const std::set<std::string>& files,
                      size_t max_tokens, const Tokenizer& tokenizer) {
  std::string all_text;
  for (const Segment* s : span) {
    all_text += s->content;
    all_text.push_back('\n');
    for (const ToolCall& call : s->tool_calls) {
      all_text += call.arguments;
      all_text.push_back('\n');
    }
  }
  const size_t names_budget = max_tokens * kNamesShareNumerator / kNamesShareDenominator;
  std::string names_line;
  size_t added = 0;
  for (const std::string& name : ExtractIdentifiers(all_text, kNameCandidates)) {
    if (files.count(name)) continue;
    std::string candidate = names_line + (names_line.empty() ? "\nnames seen: " : ", ") + name;
    if (++added % kNamesPerRecount == 0 && tokenizer.Count(candidate) > names_budget) break;
    names_line = std::move(candidate);
  }
  while (!names_line.empty() && tokenizer.Count(names_line) > names_budget) {
    names_line.resize(names_line.rfind(", "));
  }
  return names_line;
}

// "\n<heading>:" and the first `max` entries, each after `separator`; "" when there are none.
std::string Listing(const char* heading, const std::set<std::string>& entries, size_t max,
                    const char* separator) {
  if (entries.empty()) return "";
  std::string out = std::string("\n") + heading + ":";
  size_t n = 0;
  for (const std::string& entry : entries) {
    if (n++ == max) break;
    out += separator + entry;
  }
  return out;
}

// What follows the items: the files, the names and the errors seen.
std::string Tail(const std::vector<const Segment*>& span, const SpanDigest& digest,
                 size_t max_tokens, const Tokenizer& tokenizer) {
  return Listing("files seen", digest.files, kMaxFilesListed, " ") +
         NamesLine(span, digest.files, max_tokens, tokenizer) +
         Listing("errors seen", digest.errors, kMaxErrorsListed, "\n  ");
}

// Fits a summary (header, items, tail) into a token bound: drops items from the middle (the oldest
// and the latest stay), then lists fewer recall ids, then drops the last items too; a run of
// omitted items becomes one line with their recall ids. When even the ids do not fit, the newest
// `id_cap_` are listed and the line says how many were left out. As a last resort, the header
// (with the tail if it fits) alone.
class SummaryFitter {
 public:
  SummaryFitter(const SpanDigest& digest, std::string header, std::string tail, size_t max_tokens,
                const Tokenizer& tokenizer)
      : items_(digest.items),
        item_ids_(digest.item_ids),
        header_(std::move(header)),
        tail_(std::move(tail)),
        max_tokens_(max_tokens),
        tokenizer_(tokenizer),
        keep_(items_.size(), true),
        kept_(items_.size()) {}

  std::string Fit() {
    out_ = Render();
    DropMiddle(2);
    ListFewerIds();
    DropMiddle(0);
    if (tokenizer_.Count(out_) > max_tokens_) {
      out_ = header_;  // the header alone always fits any sensible limit
      if (!tail_.empty() && tokenizer_.Count(out_ + tail_) <= max_tokens_) out_ += tail_;
    }
    return out_;
  }

 private:
  // The summary with the kept items, each run of omitted ones as one line.
  std::string Render() const {
    std::vector<std::pair<size_t, std::vector<std::string>>> runs;  // omitted count, ids
    size_t total_ids = 0;
    std::set<std::string> seen;
    for (size_t i = 0; i < items_.size(); ++i) {
      if (keep_[i]) continue;
      if (i == 0 || keep_[i - 1]) runs.push_back({0, {}});
      // An omitted earlier "... items omitted" line counts its own items.
      const bool earlier_run = items_[i].rfind(kOmittedItemsPrefix, 0) == 0;
      runs.back().first +=
          earlier_run
              ? std::max<long long>(1, std::atoll(items_[i].c_str() + kOmittedItemsPrefix.size()))
              : 1;
      for (const std::string& id : item_ids_[i]) {
        if (seen.insert(id).second) {
          runs.back().second.push_back(id);
          ++total_ids;
        }
      }
    }
    size_t skip = total_ids > id_cap_ ? total_ids - id_cap_ : 0;  // oldest ids first
    std::string out = header_;
    size_t run = 0;
    for (size_t i = 0; i < items_.size(); ++i) {
      if (keep_[i]) {
        out += "\n" + items_[i];
        continue;
      }
      if (i + 1 < items_.size() && !keep_[i + 1]) continue;  // the run's line goes at its end
      const auto& [count, ids] = runs[run++];
      std::string line = "\n" + std::string(kOmittedItemsPrefix) + std::to_string(count) +
                         " items omitted";
      size_t listed = 0, left_out = 0;
      for (const std::string& id : ids) {
        if (skip > 0) {
          --skip;
          ++left_out;
          continue;
        }
        line += (listed++ ? " " : "; recall ") + id;
      }
      if (left_out) line += "; " + std::to_string(left_out) + " older recall ids left out";
      out += line + ")";
    }
    return out + tail_;
  }

  // The kept item nearest the middle, or items_.size() when none is kept.
  size_t NearestToMiddle() const {
    const size_t middle = items_.size() / 2;
    for (size_t d = 0; d <= items_.size(); ++d) {
      if (middle >= d && keep_[middle - d]) return middle - d;
      if (middle + d < items_.size() && keep_[middle + d]) return middle + d;
    }
    return items_.size();
  }

  // Removes the kept items nearest the middle, several at once when far over, until the summary
  // fits or only `min_kept` items are left.
  void DropMiddle(size_t min_kept) {
    while (kept_ > min_kept && tokenizer_.Count(out_) > max_tokens_) {
      const size_t over = tokenizer_.Count(out_) - max_tokens_;
      size_t drop = std::max<size_t>(1, std::min(kept_ - min_kept, over / kTokensOverPerDroppedItem));
      for (; drop > 0 && kept_ > min_kept; --drop) {
        const size_t best = NearestToMiddle();
        if (best == items_.size()) break;
        keep_[best] = false;
        --kept_;
      }
      out_ = Render();
    }
  }

  // Lowers the number of recall ids listed until the summary fits or none is listed.
  void ListFewerIds() {
    while (tokenizer_.Count(out_) > max_tokens_ && id_cap_ > 0) {
      size_t listed = 0;
      for (const auto& ids : item_ids_) listed += ids.size();
      const size_t cap = std::min(id_cap_, listed);
      const size_t fewer = std::max(
          (tokenizer_.Count(out_) - max_tokens_) / kTokensOverPerDroppedId + 1, cap / kMinIdCutDivisor);
      id_cap_ = cap > fewer ? cap - fewer : 0;
      out_ = Render();
    }
  }

  const std::vector<std::string>& items_;
  const std::vector<std::vector<std::string>>& item_ids_;
  const std::string header_;
  const std::string tail_;
  const size_t max_tokens_;
  const Tokenizer& tokenizer_;
  std::vector<bool> keep_;  // keep_[i]: item i is listed
  size_t kept_;             // items listed
  size_t id_cap_ = static_cast<size_t>(-1);  // recall ids listed at most (newest kept)
  std::string out_;         // the last rendering
};

class ExtractiveSummarizer final : public Summarizer {
 public:
  std::string Name() const override { return "extractive@1"; }

  StatusOr<std::string> Summarize(const std::vector<const Segment*>& span, size_t max_tokens,
                                  const Tokenizer& tokenizer) override {
    if (span.empty()) return InvalidArgumentError("nothing to summarize");
    const SpanDigest digest = Digest(span);
    std::string header = "[strata: summary of turns " + std::to_string(digest.first_turn) + "-" +
                         std::to_string(digest.last_turn) + " (" + std::to_string(span.size()) +
                         " messages, about " + std::to_string(digest.tokens) +
                         " tokens); originals are recallable by their recall ids]";
    std::string tail = Tail(span, digest, max_tokens, tokenizer);
    return SummaryFitter(digest, std::move(header), std::move(tail), max_tokens, tokenizer).Fit();
  }
};

class LlmSummarizer final : public Summarizer {
 public:
  LlmSummarizer(Transport* transport, LlmSummarizerOptions options)
      : transport_(transport), options_(std::move(options)), fallback_(MakeExtractiveSummarizer()) {
    if (options_.instruction.empty()) {
      options_.instruction =
          "Summarize this part of an agent's conversation for the agent itself. Keep every decision "
          "and its reason, the files and functions involved, commands run and their outcomes, errors "
          "still unresolved, and open tasks. Be terse. Keep recall ids (r-...) verbatim.";
    }
  }

  std::string Name() const override { return "llm@1(" + options_.model + ")"; }

  StatusOr<std::string> Summarize(const std::vector<const Segment*>& span, size_t max_tokens,
                                  const Tokenizer& tokenizer) override {
    STRATA_ASSIGN_OR_RETURN(SummaryResult result, SummarizeFor(span, max_tokens, tokenizer, nullptr));
    return std::move(result.text);
  }

  StatusOr<SummaryResult> SummarizeFor(const std::vector<const Segment*>& span, size_t max_tokens,
                                       const Tokenizer& tokenizer,
                                       const SummaryRequestContext* previous) override {
    const size_t limit = std::min(max_tokens, options_.max_output_tokens);
    SummaryResult result;
    std::string why_not;  // why the cache-keeping request was not used
    if (transport_ == nullptr) {
      why_not = "no transport";
    } else if (!options_.keep_cache) {
      why_not = "off (LlmSummarizerOptions::keep_cache)";
    } else if (previous == nullptr || previous->body.empty()) {
      why_not = "no previous request";
    } else if (previous->endpoint != transport_->Endpoint()) {
      why_not = "the summarizer's endpoint is not the agent's";
    } else if (std::optional<std::string> text =
                   CacheKeeping(span, limit, tokenizer, *previous, &why_not, &result)) {
      result.text = std::move(*text);
      result.request = "cache-keeping";
      return result;
    }
    if (transport_ != nullptr) {
      if (std::optional<std::string> text = Transcript(span, limit, tokenizer, previous, &result)) {
        result.text = std::move(*text);
        result.request = "transcript (cache-keeping not used: " + why_not + ")";
        return result;
      }
    }
    STRATA_ASSIGN_OR_RETURN(result.text, fallback_->Summarize(span, max_tokens, tokenizer));
    result.request = "extractive (cache-keeping not used: " + why_not +
                     (transport_ != nullptr ? "; the transcript request failed too)" : ")");
    return result;
  }

 private:
  // Non-empty, not cut off and within `limit`: the answer's text, else nullopt.
  static std::optional<std::string> Valid(const Response& response, size_t limit,
                                          const Tokenizer& tokenizer) {
    const std::string& text = response.content;
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) return std::nullopt;
    if (response.finish_reason == "length" || tokenizer.Count(text) > limit) return std::nullopt;
    return text;
  }

  // The span as a new request: the instruction, then a transcript of the span. With `previous`
  // (nullable), it is sent with the agent's request id and each attempt's record goes to
  // previous->records; every attempt's tokens are added to *tally.
  std::optional<std::string> Transcript(const std::vector<const Segment*>& span, size_t limit,
                                        const Tokenizer& tokenizer,
                                        const SummaryRequestContext* previous, SummaryResult* tally) {
    std::string transcript;
    for (const Segment* s : span) {
      transcript += "\n[" + std::string(SegmentKindName(s->kind)) + "] " + s->content;
      for (const ToolCall& call : s->tool_calls) transcript += "\n  call " + call.name + " " + call.arguments;
    }
    nlohmann::json request = {
        {"model", options_.model},
        {"messages", {{{"role", "system"}, {"content", options_.instruction}},
                      {{"role", "user"}, {"content", transcript}}}},
        {"max_tokens", limit},
        {"stream", false}};
    const std::string body = request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    for (int attempt = 0; attempt < std::max(1, options_.attempts); ++attempt) {
      Response response;
      CallOptions call;
      call.deadline = options_.deadline;
      if (previous != nullptr) call.request_id = previous->request_id;
      const int64_t started_ms = SystemClock()->UnixMillis();
      Status sent = transport_->Send(body, call, &response);
      Tally(response, /*cached_predicted=*/0, tally);
      if (previous != nullptr) Record(*previous, options_.model, started_ms, /*cached_predicted=*/0, sent, response);
      if (!sent.ok()) continue;
      if (std::optional<std::string> text = Valid(response, limit, tokenizer)) {
        return "[strata: summary by " + options_.model + "]\n" + *text;
      }
    }
    return std::nullopt;
  }

  // The agent's previous request and one instruction (compact/continuation_request.h); each
  // attempt's record goes to previous.records and its tokens to *tally. nullopt with *why_not when
  // it gives no summary.
  std::optional<std::string> CacheKeeping(const std::vector<const Segment*>& span, size_t limit,
                                          const Tokenizer& tokenizer,
                                          const SummaryRequestContext& previous,
                                          std::string* why_not, SummaryResult* tally) {
    StatusOr<compact_internal::ContinuationRequest> request =
        compact_internal::MakeContinuationRequest(previous.body, span, limit, options_.instruction,
                                                  previous.request_id);
    if (!request.ok()) {
      *why_not = request.status().message();
      return std::nullopt;
    }
    *why_not = "no answer";
    for (int attempt = 0; attempt < std::max(1, options_.attempts); ++attempt) {
      Response response;
      CallOptions call;
      call.deadline = options_.deadline;
      call.headers = previous.headers;
      call.request_id = previous.request_id;
      const int64_t started_ms = SystemClock()->UnixMillis();
      Status sent = transport_->Send(request->body, call, &response);
      Tally(response, previous.cached_tokens_predicted, tally);
      Record(previous, request->model, started_ms, previous.cached_tokens_predicted, sent, response);
      if (!sent.ok()) {
        *why_not = "the request failed: " + sent.message();
        continue;
      }
      std::optional<std::string> text = Valid(response, limit, tokenizer);
      if (text) {
        std::string summary = "[strata: summary by " + request->model + "]\n" + *text;
        summary += compact_internal::OmittedRecallIdsLine(span, *text);
        if (tokenizer.Count(summary) <= limit) return summary;
      }
      *why_not = "the answer failed validation (empty, cut off, or above " +
                 std::to_string(limit) + " tokens with the recall ids it leaves out)";
    }
    return std::nullopt;
  }

  // Adds one attempt's tokens to *tally: the prompt tokens the server reported, of which
  // `cached_predicted` (at most all of them) cached, and the completion tokens.
  static void Tally(const Response& response, int64_t cached_predicted, SummaryResult* tally) {
    tally->request_input_tokens += response.usage.prompt_tokens;
    tally->request_cached_tokens += std::min(cached_predicted, response.usage.prompt_tokens);
    tally->request_output_tokens += response.usage.completion_tokens;
  }

  // The summary request's RequestRecord (purpose "compaction"), to previous.records.
  void Record(const SummaryRequestContext& previous, const std::string& model, int64_t started_ms,
              int64_t cached_predicted, const Status& sent, const Response& response) {
    if (previous.records == nullptr) return;
    RequestRecord r;
    r.agent_id = previous.agent_id;
    r.request_id = previous.request_id;
    r.endpoint = transport_->Endpoint();
    r.model = model;
    r.purpose = "compaction";
    r.started_unix_ms = started_ms;
    r.input_tokens = response.usage.prompt_tokens;
    r.cached_tokens_reported = response.usage.cached_tokens;
    r.cached_tokens_predicted = cached_predicted;
    r.output_tokens = response.usage.completion_tokens;
    r.reasoning_tokens = response.usage.reasoning_tokens;
    r.ttft_ms = response.timings.ttft_ms;
    r.decode_ms = response.timings.decode_ms;
    r.total_ms = response.timings.total_ms;
    r.finish_reason = sent.ok() ? response.finish_reason : "";
    r.attempts = response.attempts;
    r.http_status = response.http_status;
    r.code = sent.code();
    r.error = sent.ok() ? "" : sent.message();
    previous.records->Write(r).IgnoreError();  // a refused record never fails the compaction
  }

  Transport* transport_;
  LlmSummarizerOptions options_;
  std::unique_ptr<Summarizer> fallback_;
};

}  // namespace

StatusOr<SummaryResult> Summarizer::SummarizeFor(const std::vector<const Segment*>& span,
                                                 size_t max_tokens, const Tokenizer& tokenizer,
                                                 const SummaryRequestContext* /*previous*/) {
  SummaryResult result;
  STRATA_ASSIGN_OR_RETURN(result.text, Summarize(span, max_tokens, tokenizer));
  return result;
}

std::unique_ptr<Summarizer> MakeExtractiveSummarizer() { return std::make_unique<ExtractiveSummarizer>(); }

std::unique_ptr<Summarizer> MakeLlmSummarizer(Transport* transport, LlmSummarizerOptions options) {
  return std::make_unique<LlmSummarizer>(transport, std::move(options));
}

}  // namespace strata
