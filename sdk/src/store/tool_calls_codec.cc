// The tool calls of a segment as the store keeps them (tool_calls_codec.h).
#include "store/tool_calls_codec.h"

#include <cstdint>
#include <cstring>

namespace strata::store_internal {
namespace {

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool GetU32(std::string_view& in, uint32_t& v) {
  if (in.size() < 4) return false;
  v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  in.remove_prefix(4);
  return true;
}

void PutString(std::string& out, std::string_view s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

bool GetString(std::string_view& in, std::string& s) {
  uint32_t n = 0;
  if (!GetU32(in, n) || in.size() < n) return false;
  s.assign(in.data(), n);
  in.remove_prefix(n);
  return true;
}

}  // namespace

// Tool calls as length-prefixed bytes: arguments are kept byte for byte, whatever they hold.
std::string EncodeToolCalls(const std::vector<ToolCall>& calls) {
  std::string out;
  if (calls.empty()) return out;
  PutU32(out, static_cast<uint32_t>(calls.size()));
  for (const ToolCall& call : calls) {
    PutString(out, call.id);
    PutString(out, call.name);
    PutString(out, call.arguments);
  }
  return out;
}

bool DecodeToolCalls(std::string_view in, std::vector<ToolCall>& calls) {
  calls.clear();
  if (in.empty()) return true;
  uint32_t n = 0;
  if (!GetU32(in, n)) return false;
  for (uint32_t i = 0; i < n; ++i) {
    ToolCall call;
    if (!GetString(in, call.id) || !GetString(in, call.name) || !GetString(in, call.arguments)) {
      return false;
    }
    calls.push_back(std::move(call));
  }
  return in.empty();
}

}  // namespace strata::store_internal
