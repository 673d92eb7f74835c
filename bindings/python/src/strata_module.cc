// strata._strata — the pybind11 extension under the `strata` Python package.
//
// The extension is deliberately thin: strings (JSON documents) cross the boundary, and the pure
// Python package (bindings/python/strata/) turns them into dicts, objects and exceptions. Every
// call that tokenizes, renders, touches the store or the network runs with the GIL released; a
// Python tool handler or delta callback runs with the GIL re-acquired on the calling thread.
//
// Errors: a non-OK strata::Status becomes the strata.Error subclass of its code (made by
// strata._errors.from_status), carrying the C++ message unchanged.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.h"

#include "strata/agent.h"
#include "strata/chat_template.h"
#include "strata/client.h"
#include "strata/compaction_policy.h"
#include "strata/status.h"
#include "strata/store.h"
#include "strata/tokenizer.h"
#include "strata/tokenizer_spec.h"
#include "strata/transport.h"

namespace {

using namespace strata_py;  // NOLINT: the helpers of this extension

json GrowthJson(const strata::GrowthPoint& g) {
  json layers = json::object();
  for (int i = 0; i < strata::kLayerCount; ++i) {
    layers[std::string(strata::LayerName(static_cast<strata::Layer>(i)))] = g.layer_tokens[i];
  }
  return {{"agent_id", g.agent_id},
          {"turn", g.turn},
          {"unix_ms", g.unix_ms},
          {"layer_tokens", layers},
          {"total_tokens", g.TotalTokens()},
          {"compactions", g.compactions},
          {"invalidated_tokens", g.invalidated_tokens},
          {"summary_input_tokens", g.summary_input_tokens},
          {"summary_cached_tokens", g.summary_cached_tokens},
          {"summary_output_tokens", g.summary_output_tokens}};
}

json EventJson(const strata::StoredEvent& e) {
  return {{"id", e.id},
          {"agent_id", e.agent_id},
          {"turn", e.turn},
          {"unix_ms", e.unix_ms},
          {"type", e.type},
          {"payload", json::parse(e.payload_json, nullptr, false)}};
}

// One JSON object of each record type the package has a generated class for (strata/_records.py),
// with every optional key present: tests/python/test_records.py checks that the classes' fields
// are exactly these keys, so a key added to the C++ JSON without regenerating fails.
std::string RecordSamples() {
  strata::RequestRecord record;
  record.cached_tokens_reported = 1;
  record.degradation = "compact";
  record.degradation_notes = "notes";
  record.purpose = "compaction";  // "turn", the default, is left out of the JSON
  strata::PrefixBreakEvent event;
  event.reported_cached_tokens = 1;
  strata::CompactionReport report;
  report.summarizer = "s@1";
  report.explanation.mode = "trigger";
  report.summary_request = "cache-keeping";  // "" is left out of the JSON
  strata::Response response;
  response.usage.cached_tokens = 1;
  json r = ResponseJson(response);
  return json{{"RequestRecord", json::parse(strata::RecordToJson(record))},
              {"PrefixBreak", json::parse(strata::PrefixBreakToJson(event))},
              {"CompactionReport", ReportJson(report)},
              {"GrowthPoint", GrowthJson(strata::GrowthPoint{})},
              {"Usage", r["usage"]},
              {"Timings", r["timings"]},
              {"StoredEvent", EventJson(strata::StoredEvent{})}}
      .dump();
}

json TurnJson(const strata::Turn& t) {
  json compactions = json::array();
  for (const strata::CompactionReport& c : t.compactions) compactions.push_back(ReportJson(c));
  return {{"response", ResponseJson(t.response)},
          {"record", json::parse(strata::RecordToJson(t.record))},
          {"assistant_segment_id", t.assistant_segment_id},
          {"compactions", compactions},
          {"prefix_break",
           t.prefix_break ? json::parse(strata::PrefixBreakToJson(*t.prefix_break)) : json()},
          {"break_causes", t.break_causes},
          {"growth", GrowthJson(t.growth)}};
}

// What Complete/Run hand back to Python: the turns' JSON without their bodies, and the bodies
// (moved, not copied), which cross as Body objects: at 1M tokens a body is 4 MB, and escaping it
// into the JSON and parsing it back in Python cost more than the turn itself.
struct TurnsOut {
  std::string json;
  std::vector<std::string> bodies;
};

py::tuple ToPython(TurnsOut out) {
  py::list bodies;
  for (std::string& body : out.bodies) bodies.append(BodyObject(std::move(body)));
  return py::make_tuple(py::str(out.json), bodies);
}

json RunJson(const strata::RunResult& r) {
  json turns = json::array();
  for (const strata::Turn& t : r.turns) turns.push_back(TurnJson(t));
  return {{"answer", r.answer},
          {"stopped", r.stopped},
          {"turns", turns},
          {"tool_calls", r.tool_calls},
          {"tool_errors", r.tool_errors}};
}


// ---- Agent ----------------------------------------------------------------------------------

class PyAgent {
 public:
  explicit PyAgent(std::unique_ptr<strata::Agent> agent) : agent_(std::move(agent)) {}
  // Closing an agent may write to its store: done without the GIL (the tool handlers it drops
  // take the GIL back to release their Python objects).
  ~PyAgent() {
    py::gil_scoped_release release;
    agent_.reset();
  }
  PyAgent(const PyAgent&) = delete;
  PyAgent& operator=(const PyAgent&) = delete;

  static std::unique_ptr<PyAgent> Create(const std::string& config_json) {
    strata::StatusOr<std::unique_ptr<strata::Agent>> agent = strata::InternalError("unset");
    {
      py::gil_scoped_release release;
      strata::StatusOr<strata::AgentConfig> config = strata::AgentConfigFromJson(config_json);
      if (!config.ok()) {
        agent = config.status();
      } else {
        agent = strata::Agent::Create(std::move(*config));
      }
    }
    return std::make_unique<PyAgent>(Take(std::move(agent)));
  }

  static std::unique_ptr<PyAgent> Open(const std::string& store_path, const std::string& id,
                                       const std::string& tokenizer, const std::string& chat_template,
                                       bool retokenize, std::optional<std::string> endpoint_json) {
    strata::StatusOr<std::unique_ptr<strata::Agent>> agent = strata::InternalError("unset");
    {
      py::gil_scoped_release release;
      strata::OpenOptions options;
      options.tokenizer = tokenizer;
      options.chat_template = chat_template;
      options.retokenize = retokenize;
      strata::Status status;
      if (endpoint_json) {
        strata::StatusOr<strata::AgentConfig> c = ConfigWith("endpoint", *endpoint_json);
        if (c.ok()) options.endpoint = c->endpoint;
        else status = c.status();
      }
      if (status.ok()) {
        agent = strata::Agent::Open(store_path, id, std::move(options));
      } else {
        agent = status;
      }
    }
    return std::make_unique<PyAgent>(Take(std::move(agent)));
  }

  std::string id() const { return agent_->id(); }
  std::string ConfigJson() const { return agent_->ConfigJson(); }

  void SetSystemPrompt(std::string prompt) {
    Check(Unlocked([&] { return agent_->SetSystemPrompt(std::move(prompt)); }));
  }
  void SetSystemPrompts(std::vector<std::string> prompts) {
    Check(Unlocked([&] { return agent_->SetSystemPrompts(std::move(prompts)); }));
  }
  std::string PutDocument(const std::string& layer, std::string name, std::string content,
                          std::string version, int64_t order) {
    strata::Layer l = ParseLayerOrRaise(layer);
    strata::Document doc{std::move(name), std::move(content), std::move(version), order};
    return Take(Unlocked([&] { return agent_->PutDocument(l, std::move(doc)); }));
  }
  void RemoveDocument(const std::string& layer, const std::string& name) {
    strata::Layer l = ParseLayerOrRaise(layer);
    Check(Unlocked([&] { return agent_->RemoveDocument(l, name); }));
  }
  std::string AppendUser(std::string content) {
    return Take(Unlocked([&] { return agent_->AppendUser(std::move(content)); }));
  }
  std::string AppendToolResult(std::string tool_call_id, std::string content, bool is_error) {
    strata::ToolResult result{std::move(tool_call_id), std::move(content), is_error};
    return Take(Unlocked([&] { return agent_->AppendToolResult(std::move(result)); }));
  }
  void SetVolatile(std::string key, std::string value) {
    Check(Unlocked([&] { return agent_->SetVolatile(std::move(key), std::move(value)); }));
  }
  void RegisterTool(std::string name, const std::string& schema_json, py::object handler) {
    strata::ToolHandler h = MakeToolHandler(std::move(handler));
    Check(Unlocked([&] { return agent_->RegisterTool(std::move(name), schema_json, std::move(h)); }));
  }

  py::tuple Complete(py::object on_delta, strata::CancellationToken* cancel,
                     std::vector<std::pair<std::string, std::string>> headers) {
    CallState state;
    if (cancel != nullptr) state.token = cancel;
    strata::TurnOptions options;
    options.cancel = state.token;
    options.headers = std::move(headers);
    options.on_delta = MakeDeltaCallback(std::move(on_delta));
    strata::StatusOr<TurnsOut> out = BlockingCall(state, [&]() -> strata::StatusOr<TurnsOut> {
      strata::StatusOr<strata::Turn> turn = agent_->Complete(options);
      options.on_delta = nullptr;  // drops the callback's reference (Hold takes the GIL)
      if (!turn.ok()) return turn.status();
      TurnsOut o{TurnJson(*turn).dump(), {}};
      o.bodies.push_back(std::move(turn->body));
      return o;
    });
    return ToPython(Take(std::move(out)));
  }

  py::tuple Run(std::string user_message, int max_turns, py::object on_delta,
                  strata::CancellationToken* cancel,
                  std::vector<std::pair<std::string, std::string>> headers) {
    CallState state;
    if (cancel != nullptr) state.token = cancel;
    strata::RunOptions options;
    options.max_turns = max_turns;
    options.turn.cancel = state.token;
    options.turn.headers = std::move(headers);
    options.turn.on_delta = MakeDeltaCallback(std::move(on_delta));
    strata::StatusOr<TurnsOut> out = BlockingCall(state, [&]() -> strata::StatusOr<TurnsOut> {
      strata::StatusOr<strata::RunResult> run = agent_->Run(std::move(user_message), options);
      options.turn.on_delta = nullptr;
      if (!run.ok()) return run.status();
      TurnsOut o{RunJson(*run).dump(), {}};
      for (strata::Turn& t : run->turns) o.bodies.push_back(std::move(t.body));
      return o;
    });
    return ToPython(Take(std::move(out)));
  }

  std::string DispatchToolCalls() {
    CallState state;
    strata::StatusOr<std::string> out = BlockingCall(state, [&]() -> strata::StatusOr<std::string> {
      strata::RunResult stats;
      strata::Status status = agent_->DispatchToolCalls(&stats);
      if (!status.ok()) return status;
      return RunJson(stats).dump();
    });
    return Take(std::move(out));
  }

  std::string Predict() const {
    strata::StatusOr<strata::CachePrediction> p =
        Unlocked([&] { return agent_->PredictCachedTokens(); });
    strata::CachePrediction prediction = Take(std::move(p));
    json out = {{"input_tokens", prediction.input_tokens},
                {"input_tokens_exact", prediction.input_tokens_exact},
                {"predicted_cached_tokens", prediction.predicted_cached_tokens},
                {"compaction_due", prediction.compaction_due},
                {"compaction", prediction.compaction ? ReportJson(*prediction.compaction) : json()}};
    return out.dump();
  }

  // Whether the context holds anything a request would carry as a message (a new agent does not).
  bool HasMessages() const {
    for (const strata::Segment& s : std::as_const(*agent_).context().Segments()) {
      if (s.layer != strata::Layer::kTools) return true;
    }
    return false;
  }

  int64_t InputTokens() const { return Take(Unlocked([&] { return agent_->InputTokens(); })); }

  std::string Recall(const std::string& recall_id, size_t offset, size_t max_tokens) const {
    strata::RecallPage page =
        Take(Unlocked([&] { return agent_->Recall(recall_id, offset, max_tokens); }));
    return json{{"recall_id", page.recall_id},
                {"content", page.content},
                {"offset", page.offset},
                {"total_bytes", page.total_bytes},
                {"remaining_bytes", page.remaining_bytes},
                {"tokens", page.tokens}}
        .dump();
  }

  // The request body the next Complete() would send, rendered without compacting.
  std::string Request() const {
    strata::StatusOr<strata::BuiltRequest> built = Unlocked([&] {
      return std::as_const(*agent_).context().Preview();
    });
    return Take(std::move(built)).body;
  }

  std::unique_ptr<PyAgent> Fork(std::string task, std::string id,
                                std::optional<std::string> budget_json) {
    strata::ForkOptions options;
    options.id = std::move(id);
    if (budget_json) options.budget = Take(ConfigWith("budget", *budget_json)).budget;
    return std::make_unique<PyAgent>(
        Take(Unlocked([&] { return agent_->Fork(std::move(task), options); })));
  }

  std::string Join(PyAgent& child, size_t max_tokens) {
    if (&child == this) Check(strata::InvalidArgumentError("an agent cannot join itself"));
    strata::JoinOptions options;
    options.max_tokens = max_tokens;
    return Take(Unlocked([&] { return agent_->Join(*child.agent_, options); }));
  }

 private:
  static strata::Layer ParseLayerOrRaise(const std::string& name) {
    std::optional<strata::Layer> layer = strata::ParseLayer(name);
    if (!layer) {
      Check(strata::InvalidArgumentError(
          "unknown layer \"" + name + "\" (use system, tools, index, docs, history or volatile)"));
    }
    return *layer;
  }

  std::unique_ptr<strata::Agent> agent_;
};

// ---- Lower level ----------------------------------------------------------------------------

class PyTokenizer {
 public:
  explicit PyTokenizer(std::unique_ptr<strata::Tokenizer> t) : tokenizer_(std::move(t)) {}
  static std::unique_ptr<PyTokenizer> FromSpec(const std::string& spec) {
    strata::StatusOr<std::unique_ptr<strata::Tokenizer>> t = strata::InternalError("unset");
    {
      py::gil_scoped_release release;
      t = strata::MakeTokenizer(spec);
    }
    return std::make_unique<PyTokenizer>(Take(std::move(t)));
  }
  std::string Name() const { return tokenizer_->Name(); }
  bool IsEstimate() const { return tokenizer_->IsEstimate(); }
  std::vector<int32_t> Encode(const std::string& text) const {
    py::gil_scoped_release release;
    return tokenizer_->Encode(text);
  }
  size_t Count(const std::string& text) const {
    py::gil_scoped_release release;
    return tokenizer_->Count(text);
  }
  std::string Decode(const std::vector<int32_t>& ids) const {
    strata::StatusOr<std::string> text = strata::InternalError("unset");
    {
      py::gil_scoped_release release;
      text = strata::Decode(*tokenizer_, ids);
    }
    return Take(std::move(text));
  }
  const strata::Tokenizer& get() const { return *tokenizer_; }

 private:
  std::unique_ptr<strata::Tokenizer> tokenizer_;
};

class PyChatTemplate {
 public:
  explicit PyChatTemplate(std::unique_ptr<strata::ChatTemplate> t) : template_(std::move(t)) {}
  std::string Name() const { return template_->Name(); }
  std::string Render(const std::string& request_json) const {
    strata::StatusOr<std::string> text = strata::InternalError("unset");
    {
      py::gil_scoped_release release;
      text = template_->Render(request_json);
    }
    return Take(std::move(text));
  }
  size_t OverheadTokens(const std::string& request_json) const {
    strata::StatusOr<size_t> n = strata::InternalError("unset");
    {
      py::gil_scoped_release release;
      n = template_->OverheadTokens(request_json);
    }
    return Take(std::move(n));
  }
  std::pair<size_t, bool> CountRequestTokens(const std::string& request_json,
                                             const PyTokenizer& tokenizer) const {
    strata::StatusOr<strata::RequestTokenCount> n = strata::InternalError("unset");
    {
      py::gil_scoped_release release;
      n = strata::CountRequestTokens(*template_, tokenizer.get(), request_json);
    }
    strata::RequestTokenCount count = Take(std::move(n));
    return {count.tokens, count.estimated};
  }

 private:
  std::unique_ptr<strata::ChatTemplate> template_;
};

// ---- Store (reading what agents recorded) ----------------------------------------------------

class PyStore {
 public:
  explicit PyStore(std::unique_ptr<strata::Store> store) : store_(std::move(store)) {}
  ~PyStore() {
    py::gil_scoped_release release;
    store_.reset();
  }
  PyStore(const PyStore&) = delete;
  PyStore& operator=(const PyStore&) = delete;
  static std::unique_ptr<PyStore> Open(const std::string& path, bool read_only,
                                       bool create_if_missing) {
    strata::StoreOptions options;
    options.read_only = read_only;
    options.create_if_missing = create_if_missing;
    return std::make_unique<PyStore>(
        Take(Unlocked([&] { return strata::OpenStore(path, options); })));
  }
  std::string path() const { return store_->path(); }

  std::string Agents() {
    std::vector<strata::StoredAgent> agents = Take(Unlocked([&] { return store_->ListAgents(); }));
    json out = json::array();
    for (const strata::StoredAgent& a : agents) {
      out.push_back({{"id", a.options.agent.id},
                     {"tokenizer_name", a.tokenizer_name},
                     {"created_unix_ms", a.created_unix_ms},
                     {"updated_unix_ms", a.updated_unix_ms},
                     {"turn", a.turn},
                     {"segments", a.segments},
                     {"tokens", a.tokens},
                     {"requests", a.requests},
                     {"compactions", a.compactions}});
    }
    return out.dump();
  }
  std::string Requests(const std::string& agent_id, size_t limit) {
    std::vector<strata::RequestRecord> records =
        Take(Unlocked([&] { return store_->RecentRequests(agent_id, limit); }));
    json out = json::array();
    for (const strata::RequestRecord& r : records) out.push_back(json::parse(strata::RecordToJson(r)));
    return out.dump();
  }
  std::string Events(const std::string& agent_id, const std::string& type) {
    std::vector<strata::StoredEvent> events =
        Take(Unlocked([&] { return store_->Events(agent_id, type); }));
    json out = json::array();
    for (const strata::StoredEvent& e : events) out.push_back(EventJson(e));
    return out.dump();
  }
  std::string Growth(const std::string& agent_id) {
    std::vector<strata::GrowthPoint> points =
        Take(Unlocked([&] { return store_->Growth(agent_id); }));
    json out = json::array();
    for (const strata::GrowthPoint& g : points) out.push_back(GrowthJson(g));
    return out.dump();
  }
  std::string Stats() {
    strata::StoreStats s = Take(Unlocked([&] { return store_->Stats(); }));
    return json{{"schema_version", s.schema_version},   {"file_bytes", s.file_bytes},
                {"agents", s.agents},                   {"segments", s.segments},
                {"blobs", s.blobs},                     {"blob_raw_bytes", s.blob_raw_bytes},
                {"blob_stored_bytes", s.blob_stored_bytes}, {"requests", s.requests},
                {"events", s.events}}
        .dump();
  }
  void Backup(const std::string& destination) {
    Check(Unlocked([&] { return store_->Backup(destination); }));
  }

 private:
  std::unique_ptr<strata::Store> store_;
};

std::string TrimMessages(const std::string& messages_json, const std::string& budget_json,
                         const std::string& policy, const PyTokenizer& tokenizer,
                         const std::string& chat_template, bool hygiene) {
  return Take(Unlocked([&] {
    return TrimMessagesJson(messages_json, budget_json, policy, tokenizer.get(), chat_template,
                            hygiene);
  }));
}

std::string NormalizeConfig(const std::string& config_json) {
  strata::StatusOr<strata::AgentConfig> config = strata::AgentConfigFromJson(config_json);
  return strata::AgentConfigToJson(Take(std::move(config)));
}

std::string ResolveBudgetJson(const std::string& budget_json) {
  strata::Budget b = Take(strata::ResolveBudget(Take(ConfigWith("budget", budget_json)).budget));
  return json{{"window", b.window},
              {"reserve_output", b.reserve_output},
              {"reserve_reasoning", b.reserve_reasoning},
              {"reserve_headroom", b.reserve_headroom},
              {"usable_input_tokens", strata::UsableInputTokens(b)},
              {"trigger_tokens", strata::TriggerTokens(b)},
              {"target_tokens", strata::TargetTokens(b)}}
      .dump();
}

}  // namespace

PYBIND11_MODULE(_strata, m) {
  m.doc() = "strata's C++ core; use the `strata` package, which wraps this module.";

  py::class_<strata::CancellationToken, std::shared_ptr<strata::CancellationToken>>(
      m, "CancellationToken")
      .def(py::init<>())
      .def("cancel", &strata::CancellationToken::Cancel)
      .def_property_readonly("cancelled", &strata::CancellationToken::cancelled);

  py::class_<PyBody>(m, "Body", py::buffer_protocol())
      .def_buffer([](PyBody& b) {
        return py::buffer_info(b.data.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.data.size())}, {1}, /*readonly=*/true);
      })
      .def("__len__", [](const PyBody& b) { return b.data.size(); })
      .def("__eq__", [](const PyBody& a, const PyBody& b) { return a.data == b.data; })
      .def(py::pickle([](const PyBody& b) { return py::bytes(b.data); },
                      [](const py::bytes& data) { return PyBody{std::string(data)}; }));

  py::class_<PyTokenizer>(m, "Tokenizer")
      .def_static("from_spec", &PyTokenizer::FromSpec, py::arg("spec"))
      .def_property_readonly("name", &PyTokenizer::Name)
      .def_property_readonly("is_estimate", &PyTokenizer::IsEstimate)
      .def("encode", &PyTokenizer::Encode, py::arg("text"))
      .def("count", &PyTokenizer::Count, py::arg("text"))
      .def("decode", &PyTokenizer::Decode, py::arg("ids"));

  py::class_<PyChatTemplate>(m, "ChatTemplate")
      .def_static(
          "glm5",
          [](bool add_generation_prompt) {
            strata::Glm5TemplateOptions o;
            o.add_generation_prompt = add_generation_prompt;
            return std::make_unique<PyChatTemplate>(strata::MakeGlm5ChatTemplate(o));
          },
          py::arg("add_generation_prompt") = true)
      .def_static(
          "glm47",
          [](bool add_generation_prompt) {
            strata::Glm5TemplateOptions o;
            o.add_generation_prompt = add_generation_prompt;
            return std::make_unique<PyChatTemplate>(strata::MakeGlm47ChatTemplate(o));
          },
          py::arg("add_generation_prompt") = true)
      .def_static(
          "from_name",
          [](const std::string& name) {
            return std::make_unique<PyChatTemplate>(Take(strata::MakeChatTemplate(name)));
          },
          py::arg("name"))
      .def_static("names", &strata::ChatTemplateNames)
      .def_static(
          "generic",
          [](size_t per_message_tokens, size_t per_request_tokens) {
            strata::GenericTemplateOptions o;
            o.per_message_tokens = per_message_tokens;
            o.per_request_tokens = per_request_tokens;
            return std::make_unique<PyChatTemplate>(strata::MakeGenericChatTemplate(o));
          },
          py::arg("per_message_tokens") = 4, py::arg("per_request_tokens") = 3)
      .def_property_readonly("name", &PyChatTemplate::Name)
      .def("render", &PyChatTemplate::Render, py::arg("request_json"))
      .def("overhead_tokens", &PyChatTemplate::OverheadTokens, py::arg("request_json"))
      .def("count_request_tokens", &PyChatTemplate::CountRequestTokens, py::arg("request_json"),
           py::arg("tokenizer"));

  py::class_<PyAgent>(m, "Agent")
      .def_static("create", &PyAgent::Create, py::arg("config_json"))
      .def_static("open", &PyAgent::Open, py::arg("store_path"), py::arg("id"),
                  py::arg("tokenizer") = "", py::arg("chat_template") = "",
                  py::arg("retokenize") = false, py::arg("endpoint_json") = py::none())
      .def_property_readonly("id", &PyAgent::id)
      .def("config_json", &PyAgent::ConfigJson)
      .def("set_system_prompt", &PyAgent::SetSystemPrompt, py::arg("prompt"))
      .def("set_system_prompts", &PyAgent::SetSystemPrompts, py::arg("prompts"))
      .def("put_document", &PyAgent::PutDocument, py::arg("layer"), py::arg("name"),
           py::arg("content"), py::arg("version"), py::arg("order"))
      .def("remove_document", &PyAgent::RemoveDocument, py::arg("layer"), py::arg("name"))
      .def("append_user", &PyAgent::AppendUser, py::arg("content"))
      .def("append_tool_result", &PyAgent::AppendToolResult, py::arg("tool_call_id"),
           py::arg("content"), py::arg("is_error"))
      .def("set_volatile", &PyAgent::SetVolatile, py::arg("key"), py::arg("value"))
      .def("register_tool", &PyAgent::RegisterTool, py::arg("name"), py::arg("schema_json"),
           py::arg("handler"))
      .def("complete", &PyAgent::Complete, py::arg("on_delta"), py::arg("cancel"),
           py::arg("headers"))
      .def("run", &PyAgent::Run, py::arg("user_message"), py::arg("max_turns"), py::arg("on_delta"),
           py::arg("cancel"), py::arg("headers"))
      .def("dispatch_tool_calls", &PyAgent::DispatchToolCalls)
      .def("predict", &PyAgent::Predict)
      .def("input_tokens", &PyAgent::InputTokens)
      .def("has_messages", &PyAgent::HasMessages)
      .def("recall", &PyAgent::Recall, py::arg("recall_id"), py::arg("offset"),
           py::arg("max_tokens"))
      .def("request", &PyAgent::Request)
      .def("fork", &PyAgent::Fork, py::arg("task"), py::arg("id"), py::arg("budget_json"))
      .def("join", &PyAgent::Join, py::arg("child"), py::arg("max_tokens"));

  py::class_<PyStore>(m, "Store")
      .def_static("open", &PyStore::Open, py::arg("path"), py::arg("read_only"),
                  py::arg("create_if_missing"))
      .def_property_readonly("path", &PyStore::path)
      .def("agents", &PyStore::Agents)
      .def("requests", &PyStore::Requests, py::arg("agent_id"), py::arg("limit"))
      .def("events", &PyStore::Events, py::arg("agent_id"), py::arg("type"))
      .def("growth", &PyStore::Growth, py::arg("agent_id"))
      .def("stats", &PyStore::Stats)
      .def("backup", &PyStore::Backup, py::arg("destination"));

  DefineLowLevel(m);

  m.def("trim_messages", &TrimMessages, py::arg("messages_json"), py::arg("budget_json"),
        py::arg("policy"), py::arg("tokenizer"), py::arg("chat_template"), py::arg("hygiene"));
  m.def("normalize_config", &NormalizeConfig, py::arg("config_json"));
  m.def("_record_samples", &RecordSamples);
  m.def("resolve_budget", &ResolveBudgetJson, py::arg("budget_json"));
}
