// Context, the stable layers: system prompts, tool schemas, and the versioned documents of the
// index and docs layers. Each change replaces the layer's segments and rebuilds the request header
// (context_render.cc), so that the bytes before the history change only when these layers do.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/context_impl.h"
#include "core/json_text.h"
#include "core/text_util.h"

namespace strata {

using internal::JoinNames;
using internal::LayerIndex;
using internal::RenderOrderLess;
using internal::ValidateUtf8;

Status Context::Impl::SetSystemPrompts(std::vector<std::string> prompts) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    STRATA_RETURN_IF_ERROR(ValidateUtf8(prompts[i], "system prompt " + std::to_string(i)));
  }
  const std::vector<Segment>& current = StableSlot(Layer::kSystem);
  if (current.size() == prompts.size() &&
      std::equal(current.begin(), current.end(), prompts.begin(),
                 [](const Segment& s, const std::string& p) { return s.content == p; })) {
    return Status::Ok();  // unchanged: keep ids, bytes and the journal quiet
  }
  std::vector<Segment> fresh;
  uint64_t seq = next_seq_;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Segment s = NewSegment(seq++, SegmentKind::kSystem, Layer::kSystem);
    s.content = std::move(prompts[i]);
    s.position = static_cast<int64_t>(i);
    s.pinned = true;
    s.tokens = CountTokens(s);
    fresh.push_back(std::move(s));
  }
  return ReplaceStableLayer(Layer::kSystem, std::move(fresh), seq);
}

Status Context::Impl::SetTools(std::string_view tools_json) {
  STRATA_RETURN_IF_ERROR(ValidateUtf8(tools_json, "tools JSON"));
  STRATA_RETURN_IF_ERROR(
      internal::CheckJsonDepth(tools_json, "tools JSON"));  // each tool is re-printed
  nlohmann::json tools = nlohmann::json::parse(tools_json.begin(), tools_json.end(), nullptr,
                                               /*allow_exceptions=*/false);
  if (tools.is_discarded()) {
    STRATA_RETURN_IF_ERROR(internal::CanonicalizeJson(tools_json, "tools JSON").status());
    return InvalidArgumentError("tools JSON is malformed");
  }
  if (!tools.is_array()) {
    return InvalidArgumentError(std::string("tools JSON must be an array of tool objects, got a ") +
                                tools.type_name() +
                                R"(; pass [{"type":"function","function":{"name":...}}, ...])");
  }
  std::vector<Segment> fresh;
  std::set<std::string> names;
  uint64_t seq = next_seq_;
  for (size_t i = 0; i < tools.size(); ++i) {
    const nlohmann::json& tool = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) return InvalidArgumentError(where + " is not an object");
    auto type = tool.find("type");
    if (type == tool.end() || !type->is_string() || *type != "function") {
      return InvalidArgumentError(where + R"( must have "type": "function")");
    }
    auto function = tool.find("function");
    if (function == tool.end() || !function->is_object()) {
      return InvalidArgumentError(where + R"( has no "function" object)");
    }
    auto name = function->find("name");
    if (name == function->end() || !name->is_string() || name->get<std::string>().empty()) {
      return InvalidArgumentError(where + R"(.function has no non-empty "name" string)");
    }
    if (!names.insert(name->get<std::string>()).second) {
      return InvalidArgumentError(where + ": duplicate tool name \"" + name->get<std::string>() +
                                  "\"; each tool must have a unique name");
    }
    Segment s = NewSegment(seq++, SegmentKind::kTools, Layer::kTools);
    s.name = name->get<std::string>();
    s.content = tool.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
    s.position = static_cast<int64_t>(i);
    s.pinned = true;
    s.tokens = CountTokens(s);
    fresh.push_back(std::move(s));
  }
  const std::vector<Segment>& current = StableSlot(Layer::kTools);
  if (current.size() == fresh.size() &&
      std::equal(current.begin(), current.end(), fresh.begin(),
                 [](const Segment& a, const Segment& b) { return a.content == b.content; })) {
    return Status::Ok();
  }
  return ReplaceStableLayer(Layer::kTools, std::move(fresh), seq);
}

Status Context::Impl::ValidateDocument(Layer layer, const Document& doc) {
  if (layer != Layer::kIndex && layer != Layer::kDocs) {
    return InvalidArgumentError("documents belong to the index or docs layer, not \"" +
                                std::string(LayerName(layer)) + "\"");
  }
  if (doc.name.empty()) return InvalidArgumentError("document name is empty; give it a name");
  STRATA_RETURN_IF_ERROR(ValidateUtf8(doc.name, "document name"));
  STRATA_RETURN_IF_ERROR(ValidateUtf8(doc.version, "version of document \"" + doc.name + "\""));
  STRATA_RETURN_IF_ERROR(ValidateUtf8(doc.content, "content of document \"" + doc.name + "\""));
  return Status::Ok();
}

StatusOr<std::string> Context::Impl::AddDocument(Layer layer, Document doc) {
  STRATA_RETURN_IF_ERROR(ValidateDocument(layer, doc));
  if (FindDocument(layer, doc.name) != nullptr) {
    return AlreadyExistsError("document \"" + doc.name + "\" already exists in the " +
                              std::string(LayerName(layer)) +
                              " layer; use UpdateDocument or PutDocument to change it");
  }
  Segment s = NewSegment(next_seq_,
                         layer == Layer::kIndex ? SegmentKind::kIndex : SegmentKind::kDoc, layer);
  s.name = std::move(doc.name);
  s.content = std::move(doc.content);
  s.version = std::move(doc.version);
  s.order = doc.order;
  s.position = static_cast<int64_t>(s.seq);
  s.tokens = CountTokens(s);
  std::vector<Segment> layer_segments = StableLayer(layer);
  layer_segments.push_back(s);
  ContextChange change;
  change.upserted.push_back(s);
  STRATA_RETURN_IF_ERROR(Record(change, turn_));
  ++next_seq_;
  SetStableLayer(layer, std::move(layer_segments));
  return s.id;
}

Status Context::Impl::UpdateDocument(Layer layer, Document doc) {
  STRATA_RETURN_IF_ERROR(ValidateDocument(layer, doc));
  const Segment* existing = FindDocument(layer, doc.name);
  if (existing == nullptr) {
    return NotFoundError("no document \"" + doc.name + "\" in the " +
                         std::string(LayerName(layer)) +
                         " layer (known: " + JoinNames(DocumentNames(layer)) +
                         "); use AddDocument or PutDocument to add it");
  }
  if (existing->content == doc.content && existing->version == doc.version &&
      existing->order == doc.order) {
    return Status::Ok();
  }
  Segment s = *existing;
  s.content = std::move(doc.content);
  s.version = std::move(doc.version);
  s.order = doc.order;
  s.state = SegmentState::kLive;
  s.tokens = CountTokens(s);
  std::vector<Segment> layer_segments = StableLayer(layer);
  for (Segment& candidate : layer_segments) {
    if (candidate.id == s.id) candidate = s;
  }
  ContextChange change;
  change.upserted.push_back(std::move(s));
  STRATA_RETURN_IF_ERROR(Record(change, turn_));
  SetStableLayer(layer, std::move(layer_segments));
  return Status::Ok();
}

StatusOr<std::string> Context::Impl::PutDocument(Layer layer, Document doc) {
  STRATA_RETURN_IF_ERROR(ValidateDocument(layer, doc));
  if (const Segment* existing = FindDocument(layer, doc.name)) {
    std::string id = existing->id;
    STRATA_RETURN_IF_ERROR(UpdateDocument(layer, std::move(doc)));
    return id;
  }
  return AddDocument(layer, std::move(doc));
}

Status Context::Impl::RemoveDocument(Layer layer, std::string_view name) {
  if (layer != Layer::kIndex && layer != Layer::kDocs) {
    return InvalidArgumentError("documents belong to the index or docs layer, not \"" +
                                std::string(LayerName(layer)) + "\"");
  }
  const Segment* existing = FindDocument(layer, name);
  if (existing == nullptr) {
    return NotFoundError("no document \"" + std::string(name) + "\" in the " +
                         std::string(LayerName(layer)) +
                         " layer (known: " + JoinNames(DocumentNames(layer)) + ")");
  }
  std::vector<Segment> layer_segments = StableLayer(layer);
  ContextChange change;
  change.removed_ids.push_back(existing->id);
  layer_segments.erase(std::remove_if(layer_segments.begin(), layer_segments.end(),
                                      [&](const Segment& s) { return s.name == name; }),
                       layer_segments.end());
  STRATA_RETURN_IF_ERROR(Record(change, turn_));
  SetStableLayer(layer, std::move(layer_segments));
  return Status::Ok();
}

Status Context::Impl::ReplaceStableLayer(Layer layer, std::vector<Segment> fresh,
                                         uint64_t next_seq) {
  ContextChange change;
  change.upserted = fresh;
  for (const Segment& old : StableSlot(layer)) change.removed_ids.push_back(old.id);
  STRATA_RETURN_IF_ERROR(Record(change, turn_));
  next_seq_ = next_seq;
  SetStableLayer(layer, std::move(fresh));
  return Status::Ok();
}

void Context::Impl::SetStableLayer(Layer layer, std::vector<Segment> segments) {
  std::vector<Segment>& slot = StableSlot(layer);
  for (const Segment& old : slot) index_.erase(old.id);
  std::stable_sort(segments.begin(), segments.end(), RenderOrderLess);
  slot = std::move(segments);
  ReindexStable(layer);
  RebuildHeader();
}

void Context::Impl::ReindexStable(Layer layer) {
  const std::vector<Segment>& slot = StableSlot(layer);
  LayerUsage usage;
  for (size_t i = 0; i < slot.size(); ++i) {
    index_[slot[i].id] = {layer, i};
    usage.segments += 1;
    usage.bytes += ContentBytes(slot[i]);
    usage.tokens += slot[i].tokens;
  }
  Usage(layer) = usage;
}

const Segment* Context::Impl::FindDocument(Layer layer, std::string_view name) const {
  for (const Segment& s : StableSlot(layer)) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::vector<std::string> Context::Impl::DocumentNames(Layer layer) const {
  std::vector<std::string> names;
  for (const Segment& s : StableSlot(layer)) names.push_back(s.name);
  return names;
}

}  // namespace strata
