// strata probe: planning probes and rendering each one's request, filled to its length (probe.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "probe.h"

namespace strata::cli::probe {
namespace {

// How far (in tokens) a needle may sit from its depth at a word boundary before it splits a
// word: words are shorter than this, runs without a space (minified JSON) are not.
constexpr double kWordSlackTokens = 16;

constexpr char kSystemPrompt[] =
    "You answer questions about the files and memos in the user's message. Answer with the exact "
    "string asked for and nothing else.";

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A small deterministic generator (the standard distributions differ between libraries).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix(state_++); }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }
  double Uniform() { return static_cast<double>(Next() >> 11) / 9007199254740992.0; }

 private:
  uint64_t state_;
};

std::string DepthLabel(double depth) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", depth);
  return buf;
}

// The candidates whose key has one line in all the sources (a key on several lines could not be
// unique in a context that shows them all, and is likely not unique in one that shows some).
std::vector<Candidate> KeepUniqueKeys(std::vector<Candidate> candidates) {
  std::map<std::pair<int, std::string>, std::set<std::pair<size_t, size_t>>> lines;
  for (const Candidate& c : candidates) lines[{static_cast<int>(c.kind), c.key}].insert({c.file, c.line});
  std::vector<Candidate> kept;
  for (Candidate& c : candidates) {
    if (lines[{static_cast<int>(c.kind), c.key}].size() == 1) kept.push_back(std::move(c));
  }
  return kept;
}

}  // namespace

class ProbeGenerator::Impl {
 public:
  SourceSet sources;
  const Tokenizer* tokenizer = nullptr;
  const RequestTokenCounter* counter = nullptr;
  GenerateOptions options;
  std::vector<Block> blocks;
  std::vector<int64_t> block_tokens;
  std::vector<size_t> order;  // the filler's block order, one for the whole run
  std::vector<Candidate> candidates;
  std::vector<std::vector<size_t>> by_kind;  // candidate indices per ProbeKind
  std::vector<std::string> words;            // names memo keys and values are made of
  int64_t content_tokens = 0;

  // Whether the candidate's needles answer its question once (a needle block holding a second
  // definition or a second assignment never makes an unambiguous probe). `memo`: per candidate, -1
  // not known yet, else the answer.
  bool AnsweredOnce(size_t index, std::vector<signed char>* memo) const {
    signed char& known = (*memo)[index];
    if (known < 0) {
      const Candidate& c = candidates[index];
      std::string needles = RenderBlock(sources, NeedleBlock(c));
      if (c.kind == ProbeKind::kTwoHop) needles += "\n" + RenderBlock(sources, NeedleBlock(HopConstant(c)));
      known = CountAnswers(needles, c) == 1 ? 1 : 0;
    }
    return known == 1;
  }

  // The filler blocks that would answer a probe's question again, found as the fill reaches them.
  struct Answering {
    std::string needles;             // the probe's needles, one after another ("" for memos)
    std::vector<signed char> again;  // per block: -1 not known yet, else whether it does
  };

  // Whether block `index` (rendered as `text`) beside the probe's needles gives its question a
  // second answer (a two-hop's count is not a sum: a block may define what its function uses).
  bool AnswersAgain(const ProbeSpec& spec, size_t index, const std::string& text, Answering* a) const {
    if (spec.kind == ProbeKind::kMrcr) return false;
    if (a->again.empty()) a->again.assign(blocks.size(), -1);
    signed char& known = a->again[index];
    if (known < 0) known = CountAnswers(a->needles + "\n" + text, spec.candidate) > 1 ? 1 : 0;
    return known == 1;
  }

  std::string Body(const std::string& context, const std::string& question) const {
    nlohmann::ordered_json body;
    body["model"] = options.model;
    body["messages"] = nlohmann::ordered_json::array(
        {{{"role", "system"}, {"content", kSystemPrompt}},
         {{"role", "user"}, {"content", context + "\n" + question}}});
    body["max_tokens"] = options.max_output_tokens;
    body["temperature"] = 0;
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }

  // The needle of a source-kind probe: the lines around the answer, from its anchor on.
  Block NeedleBlock(const Candidate& c) const {
    const size_t lines = sources.files[c.file].lines.size();
    const size_t first = std::min(c.anchor, c.line) >= 6 ? std::min(c.anchor, c.line) - 6 : 0;
    const size_t last = std::min(lines, c.line + (c.kind == ProbeKind::kTwoHop ? kHopWindow + 1 : 7));
    return {c.file, first, last - first};
  }

  // A two-hop candidate's constant, as a constant candidate (the answer's block).
  static Candidate HopConstant(const Candidate& c) {
    Candidate constant = c;
    constant.kind = ProbeKind::kConstant;
    constant.file = c.hop_file;
    constant.line = constant.anchor = c.hop_line;
    return constant;
  }

  // The tokens a probe of `c` inserts: its needle block, and a two-hop's constant block.
  int64_t NeedleTokens(const Candidate& c) const {
    size_t tokens = tokenizer->Count(RenderBlock(sources, NeedleBlock(c)) + "\n");
    if (c.kind == ProbeKind::kTwoHop) tokens += tokenizer->Count(RenderBlock(sources, NeedleBlock(HopConstant(c))) + "\n");
    return static_cast<int64_t>(tokens);
  }

  // What goes into a context at a depth: a needle block or a memo.
  struct Insert {
    double depth = 0;
    std::string text;
    int64_t tokens = 0;
    bool asked = false;  // where the answer is (depth_actual measures it)
  };

  std::vector<Insert> Inserts(const ProbeSpec& spec) const {
    std::vector<Insert> inserts;
    if (spec.kind == ProbeKind::kMrcr) {
      for (size_t i = 0; i < spec.memo_values.size(); ++i) {
        inserts.push_back({spec.memo_depths[i], MemoLine(spec.candidate.key, spec.memo_values[i]) + "\n", 0,
                           static_cast<int>(i + 1) == spec.ordinal});
      }
    } else if (spec.kind == ProbeKind::kTwoHop) {
      inserts.push_back({spec.hop_depth, RenderBlock(sources, NeedleBlock(spec.candidate)) + "\n", 0, false});
      inserts.push_back({spec.depth, RenderBlock(sources, NeedleBlock(HopConstant(spec.candidate))) + "\n", 0, true});
    } else {
      inserts.push_back({spec.depth, RenderBlock(sources, NeedleBlock(spec.candidate)) + "\n", 0, true});
    }
    for (Insert& insert : inserts) insert.tokens = static_cast<int64_t>(tokenizer->Count(insert.text));
    std::sort(inserts.begin(), inserts.end(), [](const Insert& a, const Insert& b) { return a.depth < b.depth; });
    return inserts;
  }

  struct Assembled {
    std::string context;
    double depth_actual = 0;
    double tokens = 0;  // the context's tokens by its pieces' own counts (what depth is relative to)
    int passes = 1;
  };

  // `assembled` with filler appended at its end, at most `tokens` tokens of the first filler block
  // this probe may use that does not answer it (null when there is none): for a fill that no
  // budget lands close enough to its target, because one more budget token moves an insert or a
  // block boundary past it.
  std::optional<Assembled> Padded(const ProbeSpec& spec, const Assembled& assembled, int64_t tokens,
                                  Answering* answering) const {
    for (size_t index : order) {
      const Block& block = blocks[index];
      if (spec.kind != ProbeKind::kMrcr &&
          (block.file == spec.candidate.file ||
           (spec.kind == ProbeKind::kTwoHop && block.file == spec.candidate.hop_file))) {
        continue;
      }
      std::string text = RenderBlock(sources, block);
      if (AnswersAgain(spec, index, text, answering)) continue;
      auto [cut, cut_tokens] = CutToTokens(std::move(text), tokens);
      if (cut_tokens > tokens || cut.empty()) continue;
      bool answers = false;  // a memo's value in the padding
      for (const std::string& v : spec.memo_values) answers = answers || CountOccurrences(cut, v) > 0;
      if (answers) continue;
      Assembled out = assembled;
      out.context += cut;
      out.tokens += static_cast<double>(cut_tokens);
      if (out.tokens > 0) out.depth_actual = assembled.depth_actual * assembled.tokens / out.tokens;
      return out;
    }
    return std::nullopt;
  }

  // The end of a block cut to about `tokens` tokens (at a UTF-8 boundary, ending in a newline),
  // and its exact count.
  std::pair<std::string, int64_t> CutToTokens(std::string text, int64_t tokens) const {
    int64_t count = static_cast<int64_t>(tokenizer->Count(text));
    for (int i = 0; i < 6 && count > tokens && !text.empty(); ++i) {
      size_t bytes = static_cast<size_t>(static_cast<double>(text.size()) * static_cast<double>(tokens) /
                                         static_cast<double>(count) * (i == 0 ? 1.0 : 0.97));
      bytes = std::min(bytes, text.size() - 1);
      while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
      text.resize(bytes);
      text += '\n';
      count = static_cast<int64_t>(tokenizer->Count(text));
    }
    return {text, count};
  }

  // Where to split `text` (`text_tokens` tokens) so that the tokens before the split come nearest
  // `want`: after a newline or a space (0 and text.size() too), found by counting, since lines and
  // words differ in length (a table row, a long paragraph, one line of a trajectory's tool output).
  size_t SplitNearest(const std::string& text, int64_t text_tokens, double want) const {
    auto head_tokens = [&](size_t bytes) -> double {
      if (bytes == 0) return 0;
      if (bytes >= text.size()) return static_cast<double>(text_tokens);
      return static_cast<double>(tokenizer->Count(std::string_view(text).substr(0, bytes)));
    };
    size_t below = 0, reach = text.size();  // head_tokens(below) < want <= head_tokens(reach)
    while (reach - below > 1) {
      const size_t mid = below + (reach - below) / 2;
      (head_tokens(mid) >= want ? reach : below) = mid;
    }
    std::vector<size_t> splits;  // line boundaries first: they win a tie
    for (char boundary : {'\n', ' '}) {
      const size_t before = text.rfind(boundary, reach - 1);
      if (before != std::string::npos) splits.push_back(before + 1);
      const size_t after = text.find(boundary, reach);
      if (after != std::string::npos) splits.push_back(after + 1);
    }
    splits.push_back(0);
    splits.push_back(text.size());
    size_t best = text.size();
    double best_error = std::numeric_limits<double>::infinity();
    for (size_t split : splits) {
      const double error = std::fabs(head_tokens(split) - want);
      if (error < best_error) {
        best = split;
        best_error = error;
      }
    }
    // A long run without a space (minified JSON, a hash): any character boundary, when no word
    // boundary comes within a few tokens.
    if (best_error > kWordSlackTokens) {
      for (size_t split : {below, reach}) {
        while (split > 0 && split < text.size() && (static_cast<unsigned char>(text[split]) & 0xC0) == 0x80) --split;
        const double error = std::fabs(head_tokens(split) - want);
        if (error < best_error) {
          best = split;
          best_error = error;
        }
      }
    }
    return best;
  }

  // The context: filler blocks up to `filler_budget` tokens (by their own counts), the needle (or
  // each memo) inserted where the tokens before it reach its depth, splitting the block it falls
  // in; the last block is cut to the budget.
  Assembled Assemble(const ProbeSpec& spec, const std::vector<Insert>& inserts, int64_t needle_tokens,
                     int64_t filler_budget, Answering* answering) const {
    Assembled out;
    const bool memos = spec.kind == ProbeKind::kMrcr;
    const double total = static_cast<double>(filler_budget + needle_tokens);
    size_t next_insert = 0;
    int64_t filler = 0, placed = 0;
    double needle_at = -1;
    auto at = [&] { return static_cast<double>(filler + placed); };
    auto due = [&] { return next_insert < inserts.size() ? inserts[next_insert].depth * total : 1e300; };
    auto place = [&] {
      if (inserts[next_insert].asked) needle_at = at();
      out.context += inserts[next_insert].text;
      placed += inserts[next_insert++].tokens;
    };
    auto emit = [&](const std::string& text, int64_t tokens) {
      out.context += text;
      out.context += '\n';
      filler += tokens;
    };
    size_t k = 0, added_this_pass = 0;
    while (filler < filler_budget) {
      if (k == order.size()) {
        if (added_this_pass == 0) break;  // nothing but the needle's file: no filler
        k = 0;
        added_this_pass = 0;
        ++out.passes;
      }
      const size_t index = order[k++];
      const Block& block = blocks[index];
      if (!memos && (block.file == spec.candidate.file ||
                     (spec.kind == ProbeKind::kTwoHop && block.file == spec.candidate.hop_file))) {
        continue;
      }
      std::string text = RenderBlock(sources, block);
      if (AnswersAgain(spec, index, text, answering)) continue;
      ++added_this_pass;
      while (due() <= at()) place();
      int64_t t = block_tokens[index];
      // Where the filler ends when it is filled to the budget: an insert due there or beyond (a
      // deep one, larger than the rest of the content) goes after it, not before the last block.
      auto end = [&] { return static_cast<double>(filler_budget + placed); };
      // Each insert due inside this block: its text up to the line or word boundary nearest the
      // insert's depth, the insert, then the rest (split again for the next insert); or the insert
      // before or after the block.
      while (due() < at() + static_cast<double>(t) && due() < end()) {
        const size_t split = SplitNearest(text, t, due() - at());
        if (split == 0) {
          place();
          continue;
        }
        if (split >= text.size()) break;
        const std::string head = text.substr(0, split);
        const int64_t head_tokens = static_cast<int64_t>(tokenizer->Count(head));
        if (filler + head_tokens >= filler_budget) break;
        emit(head, head_tokens);
        place();
        text.erase(0, split);
        t = static_cast<int64_t>(tokenizer->Count(text));
      }
      while (due() < at() + static_cast<double>(t) && 2 * due() < 2 * at() + static_cast<double>(t) &&
             due() < end()) {
        place();
      }
      if (filler + t > filler_budget) {
        auto [cut, tokens] = CutToTokens(std::move(text), filler_budget - filler);
        if (tokens <= filler_budget - filler) emit(cut, tokens);
        break;
      }
      emit(text, t);
    }
    while (next_insert < inserts.size()) place();
    const double final_total = at();
    out.tokens = final_total;
    out.depth_actual = final_total > 0 && needle_at >= 0 ? needle_at / final_total : 0;
    return out;
  }

  void PlanMemos(Rng& rng, ProbeSpec* spec) const {
    const std::string& word = words[rng.Below(words.size())];
    spec->candidate.kind = ProbeKind::kMrcr;
    spec->candidate.key = "probe." + word + "." + std::to_string(100 + rng.Below(900));
    const size_t count = 2 + rng.Below(3);
    std::vector<std::pair<double, std::string>> memos;
    memos.emplace_back(spec->depth, words[rng.Below(words.size())] + "-" + std::to_string(1000 + rng.Below(9000)));
    const std::string asked = memos[0].second;
    while (memos.size() < count) {
      double d = 0.02 + 0.96 * rng.Uniform();
      if (std::fabs(d - spec->depth) < 0.04) continue;
      memos.emplace_back(d, words[rng.Below(words.size())] + "-" + std::to_string(1000 + rng.Below(9000)));
    }
    std::sort(memos.begin(), memos.end());
    for (size_t i = 0; i < memos.size(); ++i) {
      spec->memo_depths.push_back(memos[i].first);
      spec->memo_values.push_back(memos[i].second);
      if (memos[i].second == asked) spec->ordinal = static_cast<int>(i + 1);
    }
    spec->candidate.answer = asked;
  }
};

ProbeGenerator::ProbeGenerator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProbeGenerator::~ProbeGenerator() = default;

StatusOr<std::unique_ptr<ProbeGenerator>> ProbeGenerator::Create(SourceSet sources, const Tokenizer* tokenizer,
                                                                 const RequestTokenCounter* counter,
                                                                 GenerateOptions options) {
  if (tokenizer == nullptr || counter == nullptr) return InvalidArgumentError("a probe generator needs a tokenizer and a counter");
  if (options.lengths.empty()) return InvalidArgumentError("--lengths is empty; give e.g. 32k,128k");
  if (options.depths.empty()) return InvalidArgumentError("--depths is empty; give e.g. 0.1,0.5,0.9");
  for (double d : options.depths) {
    if (!(d >= 0 && d <= 1)) return InvalidArgumentError("depth " + DepthLabel(d) + " is not in [0, 1]");
  }
  if (options.probes_per_bucket < 1) return InvalidArgumentError("--probes-per-bucket must be at least 1");
  if (options.max_output_tokens < 1 || options.window_tokens <= options.max_output_tokens + 256) {
    return InvalidArgumentError("--window " + std::to_string(options.window_tokens) +
                                " leaves no room beside --max-output-tokens " + std::to_string(options.max_output_tokens));
  }
  auto impl = std::make_unique<Impl>();
  impl->sources = std::move(sources);
  impl->tokenizer = tokenizer;
  impl->counter = counter;
  impl->options = std::move(options);
  Impl& g = *impl;
  g.blocks = CutBlocks(g.sources, g.options.block_lines, g.options.block_bytes);
  for (const Block& b : g.blocks) {
    g.block_tokens.push_back(static_cast<int64_t>(tokenizer->Count(RenderBlock(g.sources, b))));
    g.content_tokens += g.block_tokens.back();
  }
  g.order.resize(g.blocks.size());
  for (size_t i = 0; i < g.order.size(); ++i) g.order[i] = i;
  Rng rng(Mix(g.options.seed));
  for (size_t i = g.order.size(); i > 1; --i) std::swap(g.order[i - 1], g.order[rng.Below(i)]);
  g.candidates = KeepUniqueKeys(FindCandidates(g.sources));
  for (Candidate& hop : TwoHopCandidates(g.sources, g.candidates)) g.candidates.push_back(std::move(hop));
  g.by_kind.assign(kProbeKinds, {});
  for (size_t i = 0; i < g.candidates.size(); ++i) {
    g.by_kind[static_cast<size_t>(g.candidates[i].kind)].push_back(i);
    if (g.candidates[i].kind != ProbeKind::kTable && g.candidates[i].kind != ProbeKind::kTwoHop) {
      g.words.push_back(g.candidates[i].key);
    }
  }
  if (g.words.empty()) g.words = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"};
  std::sort(g.words.begin(), g.words.end());
  g.words.erase(std::unique(g.words.begin(), g.words.end()), g.words.end());
  g.by_kind[static_cast<size_t>(ProbeKind::kMrcr)] = {0};  // memos are made, not found
  bool any = false;
  for (ProbeKind k : g.options.kinds) any = any || !g.by_kind[static_cast<size_t>(k)].empty();
  if (!any) return InvalidArgumentError("the sources hold no candidate for the probe kinds asked");
  return std::unique_ptr<ProbeGenerator>(new ProbeGenerator(std::move(impl)));
}

std::vector<ProbeSpec> ProbeGenerator::Plan() const {
  const Impl& g = *impl_;
  std::vector<ProbeKind> kinds;
  for (ProbeKind k : g.options.kinds) {
    if (!g.by_kind[static_cast<size_t>(k)].empty()) kinds.push_back(k);
  }
  std::vector<ProbeSpec> plan;
  std::vector<signed char> answered_once(g.candidates.size(), -1);
  const int64_t room = g.options.window_tokens - g.options.max_output_tokens;
  for (size_t li = 0; li < g.options.lengths.size(); ++li) {
    for (size_t di = 0; di < g.options.depths.size(); ++di) {
      for (int i = 0; i < g.options.probes_per_bucket; ++i) {
        ProbeSpec spec;
        spec.length_index = li;
        spec.depth_index = di;
        spec.depth = g.options.depths[di];
        spec.target_tokens = std::min(g.options.lengths[li].tokens, room);
        spec.id = g.options.lengths[li].label + "/" + DepthLabel(spec.depth) + "/" + std::to_string(i);
        spec.seed = Mix(g.options.seed ^ Mix((li + 1) * 1000003u + (di + 1) * 1009u + static_cast<uint64_t>(i)));
        Rng rng(spec.seed);
        spec.kind = kinds[(static_cast<size_t>(i) + li + di) % kinds.size()];
        if (spec.kind == ProbeKind::kMrcr) {
          g.PlanMemos(rng, &spec);
        } else {
          // A needle is placed whole, so one that is a large share of the length (a table of long
          // rows, in a short probe) could not sit at a deep depth: the first of up to 16 draws whose
          // needle is at most an eighth of the length (nearly always the first), else the smallest.
          // A draw whose own needle answers its question twice is passed over.
          const std::vector<size_t>& pool = g.by_kind[static_cast<size_t>(spec.kind)];
          int64_t smallest = std::numeric_limits<int64_t>::max();
          for (int draw = 0; draw < 16; ++draw) {
            size_t index = pool[rng.Below(pool.size())];
            if (!g.AnsweredOnce(index, &answered_once)) {
              if (draw < 15 || smallest != std::numeric_limits<int64_t>::max()) continue;
              // No draw was unambiguous: the next candidate of the pool from this one that is
              // (this one when none is, discarded at Render).
              const size_t at = static_cast<size_t>(std::find(pool.begin(), pool.end(), index) - pool.begin());
              for (size_t k = 1; k < pool.size(); ++k) {
                if (g.AnsweredOnce(pool[(at + k) % pool.size()], &answered_once)) {
                  index = pool[(at + k) % pool.size()];
                  break;
                }
              }
            }
            const Candidate& drawn = g.candidates[index];
            const int64_t tokens = g.NeedleTokens(drawn);
            if (tokens < smallest) {
              smallest = tokens;
              spec.candidate = drawn;
            }
            if (tokens <= spec.target_tokens / 8) break;
          }
          // The function's block, away from the constant's.
          do {
            spec.hop_depth = 0.02 + 0.96 * rng.Uniform();
          } while (std::fabs(spec.hop_depth - spec.depth) < 0.1);
        }
        spec.question = QuestionText(spec.kind, spec.candidate.key, spec.candidate.column, spec.ordinal);
        spec.expected = spec.candidate.answer;
        plan.push_back(std::move(spec));
      }
    }
  }
  return plan;
}

StatusOr<RenderedProbe> ProbeGenerator::Render(const ProbeSpec& spec) const {
  const Impl& g = *impl_;
  const std::vector<Impl::Insert> inserts = g.Inserts(spec);
  int64_t needle_tokens = 0;
  Impl::Answering answering;
  for (const Impl::Insert& insert : inserts) {
    needle_tokens += insert.tokens;
    if (spec.kind != ProbeKind::kMrcr) answering.needles += insert.text;
  }
  STRATA_ASSIGN_OR_RETURN(size_t overhead, g.counter->CountRequest(g.Body("", spec.question)));
  const int64_t target = spec.target_tokens;
  const int64_t tolerance = std::max<int64_t>(32, target / 200);
  // The filler budget is searched for: each step moves it by the miss, kept strictly between the
  // largest budget known to land at or under the target and the smallest known to land over it
  // (halving that bracket when the step would leave it), so that a text on which the count does not
  // follow the budget closely (a block cut short, a needle that moves) still converges; the fullest
  // context at or under the target is the one kept.
  int64_t budget = target - static_cast<int64_t>(overhead) - needle_tokens;
  int64_t under = -1, over = std::numeric_limits<int64_t>::max();
  RenderedProbe out;
  Impl::Assembled assembled;
  bool have_fit = false;
  for (int iteration = 0; iteration < 16; ++iteration) {
    Impl::Assembled tried = g.Assemble(spec, inserts, needle_tokens, std::max<int64_t>(0, budget), &answering);
    std::string body = g.Body(tried.context, spec.question);
    STRATA_ASSIGN_OR_RETURN(size_t exact, g.counter->CountRequest(body));
    const int64_t tokens = static_cast<int64_t>(exact);
    if (tokens <= target) {
      under = std::max(under, budget);
      if (!have_fit || tokens > out.tokens) {
        have_fit = true;
        out.body = std::move(body);
        out.tokens = tokens;
        assembled = std::move(tried);
      }
      if (target - tokens <= tolerance) break;
    } else {
      over = std::min(over, budget);
      if (budget <= 0) break;  // the needle and question alone are too long
      if (!have_fit) {
        out.body = std::move(body);
        out.tokens = tokens;
      }
    }
    // Under the target: grow by the difference; over it: shrink a little past it.
    int64_t next = budget + (tokens <= target ? target - tokens : target - tokens - tolerance / 2);
    const bool bracketed = under >= 0 && over != std::numeric_limits<int64_t>::max();
    if (bracketed && (next <= under || next >= over)) next = under + (over - under) / 2;
    next = std::max<int64_t>(0, next);
    if (next == budget || (under >= 0 && next <= under)) break;  // the bracket is closed
    budget = next;
  }
  if (!have_fit) {
    out.discard_reason = "needle and question alone exceed the length";
    return out;
  }
  // No budget landed within 1% of the target: the fullest fit is padded at its end with filler cut
  // to the room left (less by the miss of each try that went over), until it is within the
  // tolerance.
  const bool short_of_target = target - out.tokens > target / 100;
  for (int64_t room = target - out.tokens;
       short_of_target && room > tolerance / 2 && target - out.tokens > tolerance;) {
    const std::optional<Impl::Assembled> padded = g.Padded(spec, assembled, room, &answering);
    if (!padded) break;
    std::string body = g.Body(padded->context, spec.question);
    STRATA_ASSIGN_OR_RETURN(size_t exact, g.counter->CountRequest(body));
    const int64_t tokens = static_cast<int64_t>(exact);
    if (tokens <= target && tokens > out.tokens) {
      out.body = std::move(body);
      out.tokens = tokens;
      assembled = *padded;
      room = target - tokens;
    } else {
      room -= std::max<int64_t>(1, tokens - target);
      if (tokens <= target) break;
    }
  }
  out.depth_actual = assembled.depth_actual;
  out.content_passes = assembled.passes;
  out.answers = CountAnswers(assembled.context, spec.candidate);
  out.unique = spec.kind == ProbeKind::kMrcr ? out.answers == spec.memo_values.size() : out.answers == 1;
  for (const std::string& v : spec.memo_values) out.unique = out.unique && CountOccurrences(assembled.context, v) == 1;
  if (!out.unique) out.discard_reason = "answer not unique in its context";
  return out;
}

const GenerateOptions& ProbeGenerator::options() const { return impl_->options; }
const SourceSet& ProbeGenerator::sources() const { return impl_->sources; }
int64_t ProbeGenerator::content_tokens() const { return impl_->content_tokens; }
std::vector<size_t> ProbeGenerator::candidate_counts() const {
  std::vector<size_t> counts;
  for (const auto& pool : impl_->by_kind) counts.push_back(pool.size());
  counts[static_cast<size_t>(ProbeKind::kMrcr)] = impl_->words.size();
  return counts;
}

StatusOr<int64_t> ParseTokens(std::string s) {
  const std::string given = s;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int64_t multiplier = 1;
  if (!s.empty() && s.back() == 'k') multiplier = 1024;
  if (!s.empty() && s.back() == 'm') multiplier = 1048576;
  if (multiplier != 1) s.pop_back();
  char* end = nullptr;
  const long long value = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end == nullptr || *end != '\0' || value <= 0 || value > (int64_t{1} << 40) / multiplier) {
    return InvalidArgumentError("\"" + given + "\" is not a token count (e.g. 32k, 1m, 4096)");
  }
  return value * multiplier;
}

}  // namespace strata::cli::probe
