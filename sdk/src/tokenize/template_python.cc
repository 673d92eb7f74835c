// Python-compatible output for the chat templates: json.dumps as transformers' `tojson` filter
// calls it, and the Python string methods the templates use (chat_template_internal.h).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/json_text.h"
#include "tokenize/chat_template_internal.h"

namespace strata::chat_template_internal {
namespace {

// Python's repr of a float, from nlohmann's shortest round-trip digits: the two agree except that
// Python writes a decimal exponent of 16 digits in full ("1000000000000000.0", not "1e+15").
std::string PyFloat(const ojson& v) {
  std::string s = v.dump();
  size_t e = s.find('e');
  if (e == std::string::npos) return s;
  int exponent = std::atoi(s.c_str() + e + 1);
  if (exponent != 15) return s;
  std::string mantissa = s.substr(0, e);
  bool negative = !mantissa.empty() && mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits.push_back(c);
  digits.resize(16, '0');
  return (negative ? "-" : "") + digits + ".0";
}

void PyJsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
          out->append(buf);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// Decodes the UTF-8 code point at s[i] (length in *len); invalid bytes decode as themselves.
uint32_t CodePointAt(std::string_view s, size_t i, size_t* len) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + n > s.size()) n = 1;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  *len = n;
  return cp;
}

// Python's str.isspace(): Unicode White_Space plus the ASCII separators 0x1c-0x1f.
bool IsPySpace(uint32_t cp) {
  return cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 ||
         cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}


}  // namespace

// ---------------------------------------------------------------------------------------------
// Bounded JSON handling.

Status CheckNesting(std::string_view text, const std::string& what) {
  return internal::CheckJsonDepth(text, "chat template: " + what, kChatTemplateMaxJsonDepth);
}

// Python json.dumps(value, ensure_ascii=False) with its default separators. `depth` bounds the
// recursion (the input was nesting-checked; this is the second line of defence).
Status PyJson(const ojson& v, std::string* out, size_t depth) {
  if (depth > kChatTemplateMaxJsonDepth) {
    return InvalidArgumentError("chat template: JSON nested deeper than " +
                                std::to_string(kChatTemplateMaxJsonDepth) + " levels");
  }
  switch (v.type()) {
    case ojson::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out->append(", ");
        first = false;
        PyJsonString(it.key(), out);
        out->append(": ");
        STRATA_RETURN_IF_ERROR(PyJson(it.value(), out, depth + 1));
      }
      out->push_back('}');
      return Status::Ok();
    }
    case ojson::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const auto& e : v) {
        if (!first) out->append(", ");
        first = false;
        STRATA_RETURN_IF_ERROR(PyJson(e, out, depth + 1));
      }
      out->push_back(']');
      return Status::Ok();
    }
    case ojson::value_t::string:
      PyJsonString(v.get_ref<const std::string&>(), out);
      return Status::Ok();
    case ojson::value_t::boolean:
      out->append(v.get<bool>() ? "true" : "false");
      return Status::Ok();
    case ojson::value_t::null:
      out->append("null");
      return Status::Ok();
    case ojson::value_t::number_float:
      out->append(PyFloat(v));
      return Status::Ok();
    default:
      out->append(v.dump());  // integers
      return Status::Ok();
  }
}

// ---------------------------------------------------------------------------------------------
// Python string semantics.

std::string PyStrip(std::string_view s) {
  size_t b = 0;
  while (b < s.size()) {
    size_t len;
    if (!IsPySpace(CodePointAt(s, b, &len))) break;
    b += len;
  }
  size_t e = s.size();
  while (e > b) {
    size_t start = e - 1;  // back up to the start of the last code point
    while (start > b && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80 && e - start < 4)
      --start;
    size_t len;
    uint32_t cp = CodePointAt(s, start, &len);
    if (start + len != e || !IsPySpace(cp)) break;
    e = start;
  }
  return std::string(s.substr(b, e - b));
}

std::string_view RStripChar(std::string_view s, char c) {
  while (!s.empty() && s.back() == c) s.remove_suffix(1);
  return s;
}

std::string_view LStripChar(std::string_view s, char c) {
  while (!s.empty() && s.front() == c) s.remove_prefix(1);
  return s;
}

// s.split(sep)[0] and s.split(sep)[-1].
std::string_view BeforeFirst(std::string_view s, std::string_view sep) {
  size_t at = s.find(sep);
  return at == std::string_view::npos ? s : s.substr(0, at);
}
std::string_view AfterLast(std::string_view s, std::string_view sep) {
  size_t at = s.rfind(sep);
  return at == std::string_view::npos ? s : s.substr(at + sep.size());
}

// Jinja truthiness of a JSON value (undefined/missing is false).
bool Truthy(const ojson* v) {
  if (v == nullptr) return false;
  switch (v->type()) {
    case ojson::value_t::null:
      return false;
    case ojson::value_t::boolean:
      return v->get<bool>();
    case ojson::value_t::string:
      return !v->get_ref<const std::string&>().empty();
    case ojson::value_t::array:
    case ojson::value_t::object:
      return !v->empty();
    case ojson::value_t::number_float:
      return v->get<double>() != 0.0;
    case ojson::value_t::number_integer:
    case ojson::value_t::number_unsigned:
      return v->get<int64_t>() != 0;
    default:
      return true;
  }
}

const ojson* Field(const ojson& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// What `{{ value }}` prints for a scalar (strings verbatim, numbers as Python prints them).
std::string ScalarText(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_number_float()) return PyFloat(v);
  return v.dump();
}

}  // namespace strata::chat_template_internal
