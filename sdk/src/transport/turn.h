// One request of a context, from build to record: the turn that strata::Client::Complete and
// strata::Agent::Complete both run (private to strata::transport; the agent includes it as
// "transport/turn.h").
//
// A TurnRun builds the context's request (Context::Build, which may compact first), renders and
// counts its prompt and cuts it into prefix-cache blocks (PromptModel), predicts the cached tokens
// (PrefixCacheModel::Lookup), finds whether it breaks the agent's previous prefix and why
// (PrefixReference, BreakCauses), sends it (Transport::Send), fills the RequestRecord from the
// answer, tells a server-side cache shortfall apart from a changed prompt, and writes the record
// and the break event to a RecordSink. A sink that refuses a write never fails the request: the
// refusal becomes one warning of the turn (TurnRun::warnings(), carried by Completion::warnings
// and Turn::warnings) and one count of TurnRun's failure counter.
//
//   TurnRun run(env, ids.Next(agent_id));
//   STRATA_RETURN_IF_ERROR(run.Build(context, fields, reference));   // Fail() on error
//   Status sent = run.Send(run.CallFor(call), &response);            // Fail() on error
//   run.Finish(response, &reference);  // before appending: the server holds the blocks now
//   ... append the reply (Fail() on error) ...
//   run.Emit(sink);  // the break event, then the record
//
// One signature scheme (FNV-1a over each segment's content, reasoning and tool calls) and one
// request-id scheme ("<agent>-<6 hex digits>-<n>") serve every caller.
//
// Thread safety: RequestIds is thread-safe; a TurnRun is used by one thread.
#ifndef STRATA_SRC_TRANSPORT_TURN_H_
#define STRATA_SRC_TRANSPORT_TURN_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/clock.h"
#include "strata/context.h"
#include "strata/prefix_cache.h"
#include "strata/record.h"
#include "strata/status.h"
#include "strata/tokenizer.h"
#include "strata/transport.h"

namespace strata::turn_internal {

// FNV-1a 64 of `text`, continuing from `h`. The default offset basis is strata's own
// (1469598103934665603, not FNV's published 14695981039346656037): stored signatures and cache
// states were written with it, so it stays.
uint64_t Fnv64(std::string_view text, uint64_t h = 1469598103934665603ULL);

// What identifies a rendered segment, to tell which ones changed between two requests: the
// context's fingerprint of it (Context::Fingerprints(); its hash is Fnv64 of content, reasoning
// and tool calls). A signature read back from a stored cache state has no kind (kUser).
using SegmentSignature = SegmentFingerprint;

// Every reason the rendered segments changed from `before` to `now` (stable layers: each change;
// history: "compaction" when this build compacted or a history segment's state changed (masked,
// truncated, ...: a compaction made before this build), else "history segment changed" when a
// history segment's content changed or one is gone); the first changed segment into *first_id
// and *first_layer. With `before_from`, `now` holds only the signatures after the first
// `before_from` of `before`, which are the request's too (Context::FingerprintsAfter).
std::vector<std::string> BreakCauses(const std::vector<SegmentSignature>& before,
                                     const std::vector<SegmentSignature>& now, bool compacted,
                                     const std::vector<LintWarning>& warnings,
                                     std::string* first_id, Layer* first_layer,
                                     size_t before_from = 0);

// "a, b and c" ("unknown" for none).
std::string JoinCauses(const std::vector<std::string>& causes);

// Request ids "<agent>-<tag>-<n>": a random tag of 6 hex digits per RequestIds object (from
// Clock::Random64) and a sequence number counted from 1.
class RequestIds {
 public:
  explicit RequestIds(Clock* clock);
  std::string Next(const std::string& agent_id);

 private:
  std::string tag_;
  std::atomic<uint64_t> sequence_{0};
};

// A request's prompt as a PromptModel renders it: the text may be shared with the renderer's memo
// (so that rendering a request the renderer just rendered costs no copy), and never changes.
struct SharedPrompt {
  std::shared_ptr<const std::string> text;  // never null
  std::vector<size_t> message_offsets;      // as PromptText::message_offsets
  size_t tools_bytes = 0;                   // as PromptText::tools_bytes
};

// How the prompt of a request body is rendered, counted and cut into blocks.
class PromptModel {
 public:
  virtual ~PromptModel() = default;
  // The prompt text of `body`; message_offsets when the renderer knows them (else empty).
  virtual StatusOr<SharedPrompt> Render(std::string_view body) = 0;
  // Called before the context builds the request that RenderBuilt is asked for next.
  virtual void BeginBuild() {}
  // The prompt text of `body`, the request the context has built since BeginBuild(): a model whose
  // context's request counter renders through it returns the render that count made (the
  // request's body is the one counted last), not a second render of the same body.
  virtual StatusOr<SharedPrompt> RenderBuilt(std::string_view body) { return Render(body); }
  // Tokens of `text`.
  virtual size_t Count(std::string_view text) = 0;
  // The block hash chain of `text` under `salt` (a model may keep it, to continue it next time).
  virtual std::shared_ptr<const PromptBlocks> Hash(std::string_view text, std::string_view salt) = 0;
  // Counts are a real tokenizer's (the boundary block of the history is then not counted stable).
  virtual bool exact() const = 0;
  // Bytes per token of the estimator (for counts without an exact tokenizer).
  virtual size_t bytes_per_token() const = 0;
};

// A PromptModel over a chat template (nullptr: RenderPromptText's GLM-5.3 default) and a
// tokenizer (nullptr: bytes), with HashPrompt. Nothing is owned.
class TemplatePromptModel final : public PromptModel {
 public:
  TemplatePromptModel(const ChatTemplate* chat_template, const Tokenizer* tokenizer,
                      PrefixCacheOptions options)
      : template_(chat_template), tokenizer_(tokenizer), options_(options) {}
  StatusOr<SharedPrompt> Render(std::string_view body) override;
  size_t Count(std::string_view text) override;
  std::shared_ptr<const PromptBlocks> Hash(std::string_view text, std::string_view salt) override;
  bool exact() const override { return tokenizer_ != nullptr && !tokenizer_->IsEstimate(); }
  size_t bytes_per_token() const override { return options_.bytes_per_token; }

 private:
  const ChatTemplate* template_;
  const Tokenizer* tokenizer_;
  PrefixCacheOptions options_;
};

// What an agent's previous request left for the next one to be compared with.
struct PrefixReference {
  std::vector<uint64_t> hashes;  // block hashes up to the end of the previous request's history
  int64_t history_blocks = 0;    // how many blocks that history held
  std::vector<SegmentSignature> signatures;  // the previous request's segments
  // The serial Context::FingerprintsAfter gave `signatures` (0: not known), so that the next
  // request compares only the segments its context changed since.
  uint64_t signatures_serial = 0;
};

// What a TurnRun works with. Nothing is owned.
struct TurnEnv {
  Transport* transport = nullptr;
  Clock* clock = nullptr;
  PrefixCacheModel* model = nullptr;
  PromptModel* prompt = nullptr;
  std::string salt;  // the cache salt the blocks are hashed under
  // The record's KV estimate: per-token bytes and a per-sequence constant.
  int64_t kv_bytes_per_token = 7600;
  int64_t kv_bytes_per_sequence = 136LL << 20;
  // Counts the writes a sink refused (may be nullptr).
  std::atomic<int64_t>* write_failures = nullptr;
};

// One request in flight (see the file comment).
class TurnRun {
 public:
  // A record with agent, endpoint, model, request id and start time set.
  TurnRun(const TurnEnv& env, const Context& context, std::string request_id);

  RequestRecord& record() { return record_; }
  const BuiltRequest& built() const { return built_; }
  BuiltRequest& mutable_built() { return built_; }
  const PromptBlocks& blocks() const { return *blocks_; }
  int64_t history_blocks() const { return history_blocks_; }
  const std::optional<PrefixBreakEvent>& changed() const { return changed_; }
  const std::vector<std::string>& break_causes() const { return break_causes_; }
  const std::optional<PrefixBreakEvent>& prefix_break() const { return prefix_break_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Builds the request (Context::Build(fields)) and analyses it (Analyze).
  Status Build(Context& context, const BuildOptions& fields, const PrefixReference& reference);
  // Renders, counts and hashes `built`, predicts its cached tokens and finds whether it breaks
  // `reference` (`compacted`: a compaction preceded it). The request analysed becomes `built`.
  // Nothing changes when the prompt cannot be rendered. `just_built`: `built` is what `context`
  // built since PromptModel::BeginBuild() (its render is the count's, PromptModel::RenderBuilt).
  Status Analyze(const Context& context, BuiltRequest built, const PrefixReference& reference,
                 bool compacted, bool just_built = false);
  // Hashes `body`, sent instead of the built request (a fork's), and predicts it; the reference
  // and its signatures stay (that request is not this agent's history).
  Status AnalyzeInstead(const BuiltRequest& sent, const PrefixReference& reference);
  // Takes the signatures of `context` as it is now (a compaction after the analysis, whose
  // request was then sent as built), against `reference`, the one the run is analysed against.
  void Resign(const Context& context, const PrefixReference& reference);
  // `call` with the request id and prompt size set (the prompt size scales the first-byte timeout
  // to the prefill and is what a PoolSet admits by).
  CallOptions CallFor(CallOptions call) const;
  // Sends the built body through the transport; the answer's attempts, status and timings go into
  // the record.
  Status Send(const CallOptions& call, Response* response);
  // After a successful send: the server's usage into the record, the blocks into the model, the
  // prefix break of the request, and *reference, the one the run was analysed against, advanced
  // in place to the next request's (its hashes left as they are with `keep_reference`): what it
  // shares with this request stays, the rest is replaced, so that a turn copies what it changed.
  void Finish(const Response& response, PrefixReference* reference, bool keep_reference = false);
  // A failed request: its code, error and duration into the record, and no prefix break (a
  // failed request reports none).
  void Fail(const Status& status);
  // Writes the prefix break if any, then the record, to `sink` (nullptr: nowhere); a refused write
  // is a warning and a count of TurnEnv::write_failures. `on_break` is called with the break.
  void Emit(RecordSink* sink,
            const std::function<void(const PrefixBreakEvent&)>& on_break = nullptr);
  // Adds a warning (e.g. a store's refusal) and counts it as a failed write.
  void Warn(std::string warning);

 private:
  int64_t HistoryBlocks(const SharedPrompt& prompt) const;
  std::optional<PrefixBreakEvent> Shortfall(const PrefixReference& reference) const;
  // The segment that starts rendered message `message`, and its layer (kSingleMessage: the
  // stable layers share one; the volatile segments share one), from the signatures of the
  // request (the first signatures_kept_ of `reference`'s, then signatures_); nullopt when the
  // request's messages do not number `messages`.
  std::optional<std::pair<std::string, Layer>> MessageStart(const PrefixReference& reference,
                                                            size_t message, size_t messages) const;
  void StampDuration();

  TurnEnv env_;
  RequestRecord record_;
  int64_t start_us_ = 0;
  BuiltRequest built_;
  SharedPrompt prompt_;
  std::shared_ptr<const PromptBlocks> blocks_ = std::make_shared<const PromptBlocks>();
  int64_t history_blocks_ = 0;
  int64_t previous_history_blocks_ = 0;
  // The request's signatures: the first signatures_kept_ of the reference's, then signatures_.
  size_t signatures_kept_ = 0;
  std::vector<SegmentSignature> signatures_;
  uint64_t signatures_serial_ = 0;  // the serial of the request's signatures
  // For locating a shortfall: whether the prompt's messages are known to be the request's
  // segments, the layout of the stable layers, and the first volatile segment (its message's).
  bool locate_messages_ = false;
  SystemLayout system_layout_ = SystemLayout::kSingleMessage;
  std::optional<std::string> volatile_start_;
  std::optional<PrefixBreakEvent> changed_;
  std::vector<std::string> break_causes_;
  std::optional<PrefixBreakEvent> prefix_break_;
  std::vector<std::string> warnings_;
};

}  // namespace strata::turn_internal

#endif  // STRATA_SRC_TRANSPORT_TURN_H_
