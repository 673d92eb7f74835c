// Signatures of rendered segments and the causes of a prefix break (prefix_signatures.h).
#include "agent/prefix_signatures.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace strata::agent_internal {

uint64_t Fnv64(std::string_view text, uint64_t h) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::vector<Signature> Signatures(const Context& context) {
  std::vector<Signature> out;
  for (SegmentFingerprint& f : context.Fingerprints())  // Fnv64 of each, kept by the context
    out.push_back(Signature{std::move(f.id), f.layer, f.state, std::move(f.version), f.hash});
  return out;
}

nlohmann::json SignaturesToJson(const std::vector<Signature>& sigs) {
  nlohmann::json out = nlohmann::json::array();
  for (const Signature& s : sigs) {
    out.push_back({s.id, static_cast<int>(s.layer), static_cast<int>(s.state), s.version, s.hash});
  }
  return out;
}

std::vector<Signature> SignaturesFromJson(const nlohmann::json& j) {
  std::vector<Signature> out;
  if (!j.is_array()) return out;
  for (const nlohmann::json& e : j) {
    if (!e.is_array() || e.size() != 5) continue;
    out.push_back(Signature{e[0].get<std::string>(), static_cast<Layer>(e[1].get<int>()),
                            static_cast<SegmentState>(e[2].get<int>()), e[3].get<std::string>(),
                            e[4].get<uint64_t>()});
  }
  return out;
}

// Every reason the rendered segments changed from `before` to `now` (stable layers: each change;
// history: "compaction" when this build compacted, else "history segment changed").
std::vector<std::string> BreakCauses(const std::vector<Signature>& before,
                                     const std::vector<Signature>& now, bool compacted,
                                     const std::vector<LintWarning>& warnings,
                                     std::string* first_id, Layer* first_layer) {
  std::vector<std::string> causes;
  auto add = [&](std::string cause) {
    if (std::find(causes.begin(), causes.end(), cause) == causes.end())
      causes.push_back(std::move(cause));
  };
  size_t i = 0;
  while (i < before.size() && i < now.size() && before[i].id == now[i].id &&
         before[i].hash == now[i].hash && before[i].state == now[i].state &&
         before[i].version == now[i].version) {
    ++i;
  }
  const Signature* first = i < now.size() ? &now[i] : (i < before.size() ? &before[i] : nullptr);
  if (first != nullptr) {
    *first_id = first->id;
    *first_layer = first->layer;
  }
  std::map<std::string, const Signature*> old_by_id;
  for (const Signature& s : before) old_by_id[s.id] = &s;
  std::set<std::string> now_ids;
  bool history_changed = false;
  for (const Signature& s : now) {
    now_ids.insert(s.id);
    auto it = old_by_id.find(s.id);
    const Signature* old = it == old_by_id.end() ? nullptr : it->second;
    if (s.layer == Layer::kHistory) {
      if (old != nullptr && (old->hash != s.hash || old->state != s.state)) history_changed = true;
      continue;
    }
    if (old != nullptr && old->hash == s.hash && old->version == s.version) continue;
    std::string lint;
    for (const LintWarning& w : warnings) {
      if (w.segment_id == s.id) lint = "lint hit (" + w.what + ": " + w.excerpt + ")";
    }
    if (!lint.empty()) {
      add(lint);
    } else if (s.layer == Layer::kTools) {
      add("tools changed");
    } else if (s.layer == Layer::kSystem) {
      add("system prompt changed");
    } else if (old == nullptr) {
      add("document added");
    } else if (old->version != s.version) {
      add("doc version change (" + old->version + " -> " + s.version + ")");
    } else {
      add("document changed");
    }
  }
  for (const Signature& s : before) {
    if (now_ids.count(s.id)) continue;
    if (s.layer == Layer::kHistory) {
      history_changed = true;
    } else if (s.layer == Layer::kTools) {
      add("tools changed");
    } else if (s.layer == Layer::kSystem) {
      add("system prompt changed");
    } else {
      add("document removed");
    }
  }
  if (compacted) {
    add("compaction");
  } else if (history_changed) {
    add("history segment changed");
  }
  return causes;
}

std::string JoinCauses(const std::vector<std::string>& causes) {
  std::string out;
  for (size_t i = 0; i < causes.size(); ++i) {
    if (i > 0) out += i + 1 == causes.size() ? " and " : ", ";
    out += causes[i];
  }
  return out.empty() ? "unknown" : out;
}

}  // namespace strata::agent_internal
