#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "strata/compact.h"
#include "strata/transport.h"

namespace strata {
namespace {

std::string FirstLine(const std::string& text, size_t max_bytes) {
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return "";
  size_t end = text.find('\n', start);
  std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (line.size() > max_bytes) {
    size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
    line = line.substr(0, cut) + "...";
  }
  return line;
}

// The assistant's stated decision: the first line after a "THOUGHT:" marker, else its first line.
std::string Decision(const std::string& content) {
  size_t thought = content.find("THOUGHT:");
  if (thought != std::string::npos) return FirstLine(content.substr(thought + 8), 200);
  return FirstLine(content, 200);
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
      lines.push_back(FirstLine(line, 160));
    }
    start = end + 1;
  }
  return lines;
}

std::string RecallIdOf(const Segment& s) { return s.recall_id.empty() ? RecallIdFor(s.content) : s.recall_id; }

// The recall ids ("r-" and 16 hex digits) a line of an earlier summary carries.
std::vector<std::string> RecallIdsIn(const std::string& line) {
  std::vector<std::string> ids;
  for (size_t at = line.find("r-"); at != std::string::npos; at = line.find("r-", at + 2)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(line[at - 1])) || line[at - 1] == '-')) continue;
    size_t end = at + 2;
    while (end < line.size() && std::isxdigit(static_cast<unsigned char>(line[end]))) ++end;
    if (end - at == 18) ids.push_back(line.substr(at, 18));
  }
  return ids;
}

class ExtractiveSummarizer final : public Summarizer {
 public:
  std::string Name() const override { return "extractive@1"; }

  StatusOr<std::string> Summarize(const std::vector<const Segment*>& span, size_t max_tokens,
                                  const Tokenizer& tokenizer) override {
    if (span.empty()) return InvalidArgumentError("nothing to summarize");
    std::vector<std::string> items;
    // The recall ids each item stands for: an omitted item leaves them in the summary, so nothing a
    // summary drops is out of reach (the originals are kept under these ids when summarized).
    std::vector<std::vector<std::string>> item_ids;
    auto add_item = [&](std::string line, std::vector<std::string> ids) {
      items.push_back(std::move(line));
      item_ids.push_back(std::move(ids));
    };
    std::set<std::string> files, errors;
    size_t tokens = 0;
    int64_t first_turn = span.front()->turn, last_turn = span.back()->turn;
    for (const Segment* s : span) {
      if (s->kind != SegmentKind::kSummary) first_turn = std::min(first_turn, s->turn);
    }
    // Calls by id, to pair results with what produced them.
    std::vector<const ToolCall*> calls;
    for (const Segment* s : span) {
      tokens += s->tokens;
      switch (s->kind) {
        case SegmentKind::kUser:
          add_item("- user: " + FirstLine(s->content, 300), {RecallIdOf(*s)});
          break;
        case SegmentKind::kSummary: {
          // Merge an earlier summary: keep its items, not just its header.
          const size_t header_end = s->content.find('\n');
          const size_t turns_at = s->content.find("summary of turns ");
          if (turns_at != std::string::npos && turns_at < header_end) {
            first_turn = std::min<int64_t>(first_turn, std::atoll(s->content.c_str() + turns_at + 17));
          }
          if (header_end == std::string::npos) break;
          size_t start = header_end + 1;
          while (start < s->content.size()) {
            size_t end = s->content.find('\n', start);
            if (end == std::string::npos) end = s->content.size();
            std::string line = s->content.substr(start, end - start);
            if (!line.empty()) {
              std::vector<std::string> ids = RecallIdsIn(line);
              add_item(std::move(line), std::move(ids));
            }
            start = end + 1;
          }
          break;
        }
        case SegmentKind::kAssistant:
        case SegmentKind::kToolCall: {
          std::string decision = Decision(s->content);
          std::string line = "- turn " + std::to_string(s->turn) + ": " + decision;
          for (const ToolCall& call : s->tool_calls) {
            calls.push_back(&call);
            std::string arguments = call.arguments;
            nlohmann::json args = nlohmann::json::parse(arguments, nullptr, false);
            if (args.is_object() && args.size() == 1 && args.begin()->is_string()) {
              arguments = args.begin()->get<std::string>();
            }
            line += (decision.empty() ? "" : " ") + std::string("-> ") + call.name + ": " +
                    FirstLine(arguments, 160);
          }
          add_item(std::move(line), {RecallIdOf(*s)});
          break;
        }
        case SegmentKind::kToolResult:
        case SegmentKind::kErrorLog: {
          std::string result;
          if (s->state == SegmentState::kMasked) {
            result = "  " + FirstLine(s->content, 600);  // the placeholder already says it all
          } else {
            result = "  result (" + std::to_string(s->content.size()) + " bytes";
            std::vector<std::string> names = ExtractIdentifiers(s->content, 12);
            for (size_t k = 0; k < names.size(); ++k) result += (k ? ", " : "; mentions: ") + names[k];
            result += "; recall " + RecallIdOf(*s) + ")";
          }
          add_item(std::move(result), {RecallIdOf(*s)});
          for (const std::string& id : ExtractIdentifiers(s->content, 8)) {
            if (id.find('/') != std::string::npos) files.insert(id);
          }
          for (const std::string& line : ErrorLines(s->content, 3)) errors.insert(line);
          break;
        }
        default:
          break;
      }
    }
    std::string header = "[strata: summary of turns " + std::to_string(first_turn) + "-" +
                         std::to_string(last_turn) + " (" + std::to_string(span.size()) +
                         " messages, about " + std::to_string(tokens) +
                         " tokens); originals are recallable by their recall ids]";
    std::string tail;
    if (!files.empty()) {
      tail += "\nfiles seen:";
      size_t n = 0;
      for (const std::string& f : files) {
        if (n++ == 25) break;
        tail += " " + f;
      }
    }
    {
      // The names the span's messages and outputs mention, most defined/frequent first, in up to
      // 40% of the summary's bound: what an agent most often needs again.
      std::string all_text;
      for (const Segment* s : span) {
        all_text += s->content;
        all_text.push_back('\n');
        for (const ToolCall& call : s->tool_calls) {
          all_text += call.arguments;
          all_text.push_back('\n');
        }
      }
      const size_t names_budget = max_tokens * 2 / 5;
      std::string names_line;
      size_t added = 0;
      for (const std::string& name : ExtractIdentifiers(all_text, 2000)) {
        if (files.count(name)) continue;
        std::string candidate = names_line + (names_line.empty() ? "\nnames seen: " : ", ") + name;
        if (++added % 16 == 0 && tokenizer.Count(candidate) > names_budget) break;
        names_line = std::move(candidate);
      }
      while (!names_line.empty() && tokenizer.Count(names_line) > names_budget) {
        names_line.resize(names_line.rfind(", "));
      }
      tail += names_line;
    }
    if (!errors.empty()) {
      tail += "\nerrors seen:";
      size_t n = 0;
      for (const std::string& e : errors) {
        if (n++ == 8) break;
        tail += "\n  " + e;
      }
    }
    // Drop items from the middle (keeping the oldest and the latest) until the summary fits.
    std::vector<bool> keep(items.size(), true);
    // A run of omitted items becomes one line with their recall ids. When even the ids do not fit
    // the bound (about 7 tokens each), the newest `id_cap` are listed and the line says how many
    // were left out.
    size_t id_cap = static_cast<size_t>(-1);
    auto render = [&]() {
      std::vector<std::pair<size_t, std::vector<std::string>>> runs;  // omitted count, ids
      size_t total_ids = 0;
      std::set<std::string> seen;
      std::vector<std::string> kept_lines(items.size());
      for (size_t i = 0; i < items.size(); ++i) {
        if (keep[i]) continue;
        if (i == 0 || keep[i - 1]) runs.push_back({0, {}});
        // An omitted earlier "... items omitted" line counts its own items.
        const bool earlier_run = items[i].rfind("- ... (", 0) == 0;
        runs.back().first += earlier_run ? std::max<long long>(1, std::atoll(items[i].c_str() + 7)) : 1;
        for (const std::string& id : item_ids[i]) {
          if (seen.insert(id).second) {
            runs.back().second.push_back(id);
            ++total_ids;
          }
        }
      }
      size_t skip = total_ids > id_cap ? total_ids - id_cap : 0;  // oldest ids first
      std::string out = header;
      size_t run = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        if (keep[i]) {
          out += "\n" + items[i];
          continue;
        }
        if (i + 1 < items.size() && !keep[i + 1]) continue;  // the run's line goes at its end
        const auto& [count, ids] = runs[run++];
        std::string line = "\n- ... (" + std::to_string(count) + " items omitted";
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
      return out + tail;
    };
    std::string out = render();
    size_t kept = items.size();
    // Remove the kept items nearest the middle (the oldest and the latest stay), several at once
    // when far over; then list fewer ids; then drop the last items too.
    auto drop_middle = [&](size_t min_kept) {
      while (kept > min_kept && tokenizer.Count(out) > max_tokens) {
        const size_t over = tokenizer.Count(out) - max_tokens;
        size_t drop = std::max<size_t>(1, std::min(kept - min_kept, over / 64));
        for (; drop > 0 && kept > min_kept; --drop) {
          size_t middle = items.size() / 2, best = items.size();
          for (size_t d = 0; d <= items.size(); ++d) {
            if (middle >= d && keep[middle - d]) { best = middle - d; break; }
            if (middle + d < items.size() && keep[middle + d]) { best = middle + d; break; }
          }
          if (best == items.size()) break;
          keep[best] = false;
          --kept;
        }
        out = render();
      }
    };
    drop_middle(2);
    while (tokenizer.Count(out) > max_tokens && id_cap > 0) {
      size_t listed = 0;
      for (const auto& ids : item_ids) listed += ids.size();
      const size_t cap = std::min(id_cap, listed);
      const size_t fewer = std::max((tokenizer.Count(out) - max_tokens) / 4 + 1, cap / 8);
      id_cap = cap > fewer ? cap - fewer : 0;
      out = render();
    }
    drop_middle(0);
    if (tokenizer.Count(out) > max_tokens) {
      out = header;  // the header alone always fits any sensible limit
      if (!tail.empty() && tokenizer.Count(out + tail) <= max_tokens) out += tail;
    }
    return out;
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
    const size_t limit = std::min(max_tokens, options_.max_output_tokens);
    if (transport_ != nullptr) {
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
        Status sent = transport_->Send(body, call, &response);
        if (!sent.ok()) continue;
        const std::string& text = response.content;
        // Validation: non-empty, bounded, not cut off.
        if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;
        if (response.finish_reason == "length" || tokenizer.Count(text) > limit) continue;
        return "[strata: summary by " + options_.model + "]\n" + text;
      }
    }
    return fallback_->Summarize(span, max_tokens, tokenizer);
  }

 private:
  Transport* transport_;
  LlmSummarizerOptions options_;
  std::unique_ptr<Summarizer> fallback_;
};

}  // namespace

std::unique_ptr<Summarizer> MakeExtractiveSummarizer() { return std::make_unique<ExtractiveSummarizer>(); }

std::unique_ptr<Summarizer> MakeLlmSummarizer(Transport* transport, LlmSummarizerOptions options) {
  return std::make_unique<LlmSummarizer>(transport, std::move(options));
}

}  // namespace strata
