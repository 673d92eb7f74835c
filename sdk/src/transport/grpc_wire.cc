#include "transport/grpc_wire.h"

#include <cctype>

namespace strata::transport_internal {
namespace {

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void PutBytes(std::string& out, int field, std::string_view bytes) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | 2);
  PutVarint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

bool GetVarint(std::string_view& in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    uint8_t b = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    *v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Calls on_field(field, wire_type, varint, bytes) for each field; false when malformed.
template <typename F>
bool ForEachField(std::string_view in, F&& on_field) {
  while (!in.empty()) {
    uint64_t key;
    if (!GetVarint(in, &key)) return false;
    int field = static_cast<int>(key >> 3);
    int type = static_cast<int>(key & 7);
    uint64_t varint = 0;
    std::string_view bytes;
    switch (type) {
      case 0:
        if (!GetVarint(in, &varint)) return false;
        break;
      case 1:
        if (in.size() < 8) return false;
        in.remove_prefix(8);
        break;
      case 2: {
        uint64_t len;
        if (!GetVarint(in, &len) || len > in.size()) return false;
        bytes = in.substr(0, len);
        in.remove_prefix(len);
        break;
      }
      case 5:
        if (in.size() < 4) return false;
        in.remove_prefix(4);
        break;
      default:
        return false;
    }
    on_field(field, type, varint, bytes);
  }
  return true;
}

}  // namespace

std::string EncodeOpenAIRequest(std::string_view json_body,
                                const std::vector<std::pair<std::string, std::string>>& trace_headers) {
  std::string out;
  PutBytes(out, 1, json_body);
  for (const auto& [key, value] : trace_headers) {
    std::string entry;
    PutBytes(entry, 1, key);
    PutBytes(entry, 2, value);
    PutBytes(out, 2, entry);
  }
  return out;
}

std::string EncodeAbortRequest(std::string_view rid, bool abort_all) {
  std::string out;
  if (!rid.empty()) PutBytes(out, 1, rid);
  if (abort_all) {
    PutVarint(out, (2 << 3) | 0);
    PutVarint(out, 1);
  }
  return out;
}

bool DecodeOpenAIStreamChunk(std::string_view bytes, std::string* json_chunk, bool* finished) {
  json_chunk->clear();
  *finished = false;
  return ForEachField(bytes, [&](int field, int type, uint64_t varint, std::string_view data) {
    if (field == 1 && type == 2) json_chunk->assign(data.data(), data.size());
    if (field == 2 && type == 0) *finished = varint != 0;
  });
}

bool DecodeBoolField1(std::string_view bytes, bool* value) {
  *value = false;
  return ForEachField(bytes, [&](int field, int type, uint64_t varint, std::string_view) {
    if (field == 1 && type == 0) *value = varint != 0;
  });
}

std::string FrameGrpcMessage(std::string_view message) {
  std::string out(5, '\0');
  uint32_t n = static_cast<uint32_t>(message.size());
  out[1] = static_cast<char>(n >> 24);
  out[2] = static_cast<char>(n >> 16);
  out[3] = static_cast<char>(n >> 8);
  out[4] = static_cast<char>(n);
  out.append(message.data(), message.size());
  return out;
}

bool GrpcFrameReader::Next(std::string* message, bool* compressed) {
  if (buffer_.size() < 5) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data());
  uint32_t n = (uint32_t{p[1]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 8) | uint32_t{p[4]};
  if (buffer_.size() < 5 + static_cast<size_t>(n)) return false;
  *compressed = p[0] != 0;
  message->assign(buffer_, 5, n);
  buffer_.erase(0, 5 + static_cast<size_t>(n));
  return true;
}

std::string DecodeGrpcMessage(std::string_view value) {
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] == '%' && i + 2 < value.size()) {
      int hi = std::isxdigit(static_cast<unsigned char>(value[i + 1])) ? value[i + 1] : -1;
      int lo = std::isxdigit(static_cast<unsigned char>(value[i + 2])) ? value[i + 2] : -1;
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(std::stoi(std::string(value.substr(i + 1, 2)), nullptr, 16));
        i += 2;
        continue;
      }
    }
    out += value[i];
  }
  return out;
}

}  // namespace strata::transport_internal
