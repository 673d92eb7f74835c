// `strata probe`: long-context fidelity probes built from the user's own content (docs/probe.md).
//
//   sources   (probe_source.cc)   the files of --source, cut into blocks as the context shows them
//   kinds     (probe_kinds.cc)    the probe kinds: candidates in the sources, questions, and how
//                                 often a rendered context answers a question (uniqueness)
//   generate  (probe_generate.cc) probes at lengths x depths, each a Chat Completions body filled
//                                 to its length (by the tokenizer and chat template) with the same
//                                 content, the needle at its depth; deterministic for a seed
//   run       (probe_run.cc)      sending them to the endpoints (bounded concurrency, retries)
//   report    (probe_report.cc)   answer normalization, Wilson intervals, the JSON results
//   html      (probe_html.cc)     the self-contained HTML report
//
// A context is plain text: file blocks `==> PATH (lines A-B) <==` followed by their lines as
// `N<TAB>text`, a blank line after each block, and memo lines `[memo] The value of KEY is now
// VALUE.`; the question is the last paragraph of the user message, in the fixed form
// `Question [strata-probe KIND]: ...` with its parameters in backticks (strata-sim --answer
// retrieve reads it).
//
// Thread safety: ProbeGenerator::Render and the free functions are thread-safe.
#ifndef STRATA_APPS_STRATA_PROBE_H_
#define STRATA_APPS_STRATA_PROBE_H_

#include <chrono>
#include <cstdint>
#include <ostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "strata/status.h"
#include "strata/tokenizer.h"
#include "strata/transport.h"

namespace strata::cli::probe {

// ---- sources ----

// One text file of the sources, split into lines (without their line ends).
struct SourceFile {
  std::string path;  // as given on the command line, joined with the path inside a directory
  std::vector<std::string> lines;
};

// The content probes are made of.
struct SourceSet {
  std::vector<SourceFile> files;  // sorted by path
  size_t skipped = 0;             // files left out: binary, not UTF-8, empty or over 8 MiB
  int64_t bytes = 0;              // of the files read
};

// Reads every regular file of `paths` (files, or directories walked recursively, skipping names
// that start with '.'). A trajectory (*.jsonl that strata/replay/trace.h reads) becomes the text of
// its messages, each under a `[role]` line. NOT_FOUND for a path that does not exist or sources
// that hold no text file.
StatusOr<SourceSet> LoadSources(const std::vector<std::string>& paths);

// Consecutive lines of one file, as a context shows them.
struct Block {
  size_t file = 0;
  size_t first = 0;  // 0-based index of the first line
  size_t count = 0;  // lines
};

// The files cut into blocks of at most `max_lines` lines and about `max_bytes` bytes.
std::vector<Block> CutBlocks(const SourceSet& sources, size_t max_lines, size_t max_bytes);

// The block's text: its `==> PATH (lines A-B) <==` header and numbered lines, each ending in '\n'.
std::string RenderBlock(const SourceSet& sources, const Block& block);

// ---- kinds ----

enum class ProbeKind : int {
  kConstant = 0,    // a constant's value
  kDefinition = 1,  // a function's defining file and line (PATH:LINE)
  kTable = 2,       // a number in a markdown table, by row and column
  kMrcr = 3,        // the N-th of several memos setting the same key (MRCR-style)
  kTwoHop = 4,      // the value of the one constant a function uses, defined in another file
};
inline constexpr int kProbeKinds = 5;

// Lines after a function's definition that a two-hop probe shows and looks for the constant in.
inline constexpr size_t kHopWindow = 14;

// "constant", "definition", "table", "mrcr", "twohop".
const char* KindName(ProbeKind kind);
// The kind of a name KindName gives; nullopt for another.
std::optional<ProbeKind> KindFromName(const std::string& name);

// A question the sources can answer (constant, definition, table): where, and what.
struct Candidate {
  ProbeKind kind = ProbeKind::kConstant;
  size_t file = 0;
  size_t line = 0;    // the answer's line (0-based)
  size_t anchor = 0;  // the first line the needle block must show (a table's header row)
  std::string key;     // constant or function name; a table row's first cell
  std::string column;  // table: the column's header; twohop: the constant's name (not asked)
  std::string answer;  // as written in the source
  size_t hop_file = 0;  // twohop: where the constant is defined (the second needle)
  size_t hop_line = 0;
};

// Every candidate of the three source kinds, in file and line order.
std::vector<Candidate> FindCandidates(const SourceSet& sources);
// Two-hop candidates: each definition among `candidates` whose kHopWindow lines name exactly one
// of the constants among `candidates` defined in another file.
std::vector<Candidate> TwoHopCandidates(const SourceSet& sources, const std::vector<Candidate>& candidates);

// The question text of a probe (the fixed format). `ordinal`: the memo asked for (mrcr, 1-based).
std::string QuestionText(ProbeKind kind, const std::string& key, const std::string& column,
                         int ordinal);

// How many places of `context` answer the question of `candidate` (1: unique). For mrcr, the
// memos for `key` (each value must occur once: see MemoValueCount).
size_t CountAnswers(const std::string& context, const Candidate& candidate);
// Occurrences of `text` in `context`.
size_t CountOccurrences(const std::string& context, const std::string& text);
// The memo line for `key` and `value`, with its '\n'.
std::string MemoLine(const std::string& key, const std::string& value);

// ---- generate ----

// One length of --lengths: its label as given ("32k") and its tokens.
struct LengthTarget {
  std::string label;
  int64_t tokens = 0;
};

// What probes to generate.
struct GenerateOptions {
  std::vector<LengthTarget> lengths;  // context lengths, in tokens of the whole request
  std::vector<double> depths = {0.1, 0.5, 0.9};  // where the needle sits, 0..1 of the content
  int probes_per_bucket = 4;                      // per (length, depth)
  uint64_t seed = 1;
  // The model's context window and the output reserve: a length is cut to window - output.
  int64_t window_tokens = 1048576;
  int64_t max_output_tokens = 64;
  std::string model = "default";
  std::vector<ProbeKind> kinds = {ProbeKind::kConstant, ProbeKind::kDefinition, ProbeKind::kTable,
                                  ProbeKind::kMrcr, ProbeKind::kTwoHop};
  size_t block_lines = 60;     // lines per filler block
  size_t block_bytes = 6000;   // bytes per filler block, about
};

// One probe: the question and where its needle goes (the body is rendered on demand).
struct ProbeSpec {
  std::string id;  // "<length label>/<depth>/<index>"
  ProbeKind kind = ProbeKind::kConstant;
  size_t length_index = 0;
  size_t depth_index = 0;
  int64_t target_tokens = 0;  // the length, cut to window - output
  double depth = 0;
  uint64_t seed = 0;     // this probe's own seed
  Candidate candidate;   // mrcr: key, answer; file unused
  std::vector<std::string> memo_values;  // mrcr: every memo's value, in context order
  std::vector<double> memo_depths;       // mrcr: their depths
  int ordinal = 0;                       // mrcr: the memo asked for (1-based)
  double hop_depth = 0;  // twohop: the function's block (the constant's, the answer, is at depth)
  std::string question;
  std::string expected;
};

// A probe's request.
struct RenderedProbe {
  std::string body;         // Chat Completions request JSON
  int64_t tokens = 0;       // exact input tokens (tokenizer + chat template)
  double depth_actual = 0;  // tokens of content before the needle / content tokens
  size_t answers = 0;       // places the context answers the question (CountAnswers)
  bool unique = false;      // answers == 1 (and, mrcr, every memo value occurs once)
  int content_passes = 1;   // times the filler went through the content (> 1: repeated)
  // Why the probe is not sent ("" when it is): its answer is not unique in its context, or its
  // needle and question alone do not fit its length.
  std::string discard_reason;
};

// Makes probes from `sources`. Counts with `tokenizer` and `counter` (not owned; must outlive it).
class ProbeGenerator {
 public:
  // INVALID_ARGUMENT when the sources hold no candidate of any asked kind, or an option is out of
  // range (the message names it).
  static StatusOr<std::unique_ptr<ProbeGenerator>> Create(SourceSet sources,
                                                          const Tokenizer* tokenizer,
                                                          const RequestTokenCounter* counter,
                                                          GenerateOptions options);
  ~ProbeGenerator();

  // Every probe: lengths x depths x probes_per_bucket, deterministic for options.seed.
  std::vector<ProbeSpec> Plan() const;
  // The probe's request, filled to its length. Deterministic; thread-safe.
  StatusOr<RenderedProbe> Render(const ProbeSpec& spec) const;

  const GenerateOptions& options() const;
  const SourceSet& sources() const;
  // Candidates found per kind (index: ProbeKind), and content tokens in all.
  std::vector<size_t> candidate_counts() const;
  int64_t content_tokens() const;

  class Impl;

 private:
  explicit ProbeGenerator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "32k" -> 32768, "1m" -> 1048576, "4096" -> 4096. INVALID_ARGUMENT otherwise.
StatusOr<int64_t> ParseTokens(std::string text);

// ---- report ----

// The answer as compared: a <think>...</think> block dropped, surrounding whitespace trimmed, then
// surrounding quotes (" ' `) and a trailing period stripped while any remain, trimmed again.
std::string NormalizeAnswer(const std::string& text);

// Wilson score interval (95%, z = 1.96) of `correct` out of `n`; {0, 1} when n = 0.
std::pair<double, double> WilsonInterval(int64_t correct, int64_t n);

// One probe sent to one endpoint.
struct ProbeOutcome {
  size_t probe = 0;     // index into the plan
  size_t endpoint = 0;  // index into the endpoints
  bool discarded = false;  // not sent: RenderedProbe::discard_reason says why
  std::string discard_reason;
  bool failed = false;     // the request failed after retries (not a wrong answer)
  std::string error;       // failed: why
  bool correct = false;
  std::string given;       // the answer's text as received
  int64_t tokens = 0;      // exact input tokens of the probe
  double depth_actual = 0;
  double ttft_ms = 0;
  int64_t prompt_tokens = 0;  // as the server reported them
  std::optional<int64_t> cached_tokens;
  int attempts = 0;
};

// The --json results (see docs/probe.md for the fields). `endpoints`: the names shown (A, B) and
// their URLs; `min_recovery` < 0: none.
nlohmann::ordered_json ResultsJson(const ProbeGenerator& generator,
                                   const std::vector<ProbeSpec>& plan,
                                   const std::vector<std::pair<std::string, std::string>>& endpoints,
                                   const std::vector<ProbeOutcome>& outcomes, double min_recovery);

// The buckets whose recovery is under the results' min_recovery (or that no probe answered), as
// "length 32k, depth 0.5: recovery 0.80".
std::vector<std::string> FailingBuckets(const nlohmann::ordered_json& results);

// The self-contained HTML report of ResultsJson's `results` (no scripts or styles from outside).
std::string RenderHtml(const nlohmann::ordered_json& results);

// ---- run ----

// How RunProbes sends.
struct RunOptions {
  int concurrency = 4;  // probes in flight at once
  // Whole-call retries of a failed request, beyond the transport's own (which does not re-send a
  // stream broken after its first byte). A request still failing is reported apart, not as wrong.
  int retries = 2;
  std::chrono::milliseconds deadline{600000};  // per attempt
  std::ostream* progress = nullptr;            // progress lines; nullptr none
};

// Renders every probe of `plan` and sends it to each of `transports` (not owned; thread-safe),
// the same body to each. A probe with a discard_reason is discarded (not sent). Returns one
// outcome per (probe, endpoint), probe-major; the first render error (the counter failed) instead.
StatusOr<std::vector<ProbeOutcome>> RunProbes(const ProbeGenerator& generator,
                                              const std::vector<ProbeSpec>& plan,
                                              const std::vector<Transport*>& transports,
                                              const RunOptions& options);

}  // namespace strata::cli::probe

#endif  // STRATA_APPS_STRATA_PROBE_H_
