#include "core/json_text.h"

#include <nlohmann/json.hpp>

#include "core/json_scan.h"

namespace strata::internal {
namespace {

// Escape class of each byte: 0 = pass through, 1 = two-character escape, 2 = \u00xx.
struct EscapeTable {
  unsigned char kind[256];
  char short_form[256];
  constexpr EscapeTable() : kind(), short_form() {
    for (int c = 0; c < 0x20; ++c) kind[c] = 2;
    kind['"'] = 1, short_form['"'] = '"';
    kind['\\'] = 1, short_form['\\'] = '\\';
    kind['\b'] = 1, short_form['\b'] = 'b';
    kind['\f'] = 1, short_form['\f'] = 'f';
    kind['\n'] = 1, short_form['\n'] = 'n';
    kind['\r'] = 1, short_form['\r'] = 'r';
    kind['\t'] = 1, short_form['\t'] = 't';
  }
};
constexpr EscapeTable kEscapes;

// Whether `t` is already canonical without parsing it: true, false, null, or a string of
// printable ASCII without quotes or backslashes inside (a request id, a model name), which the
// dump of CanonicalizeJson would print byte for byte.
bool PlainlyCanonical(std::string_view t) {
  if (t == "true" || t == "false" || t == "null") return true;
  if (t.size() < 2 || t.front() != '"' || t.back() != '"') return false;
  for (size_t i = 1; i + 1 < t.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(t[i]);
    if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') return false;
  }
  return true;
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view text) {
  out.push_back('"');
  const char* run = text.data();
  const char* end = text.data() + text.size();
  for (const char* p = run; p != end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (kEscapes.kind[c] == 0) continue;
    out.append(run, p - run);
    if (kEscapes.kind[c] == 1) {
      out.push_back('\\');
      out.push_back(kEscapes.short_form[c]);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      out.append(esc, 6);
    }
    run = p + 1;
  }
  out.append(run, end - run);
  out.push_back('"');
}

size_t JsonStringSize(std::string_view text) {
  size_t size = 2 + text.size();
  for (unsigned char c : text) {
    if (kEscapes.kind[c] == 1) size += 1;
    else if (kEscapes.kind[c] == 2) size += 5;
  }
  return size;
}

Status CheckJsonDepth(std::string_view json_text, std::string_view what, size_t max_depth) {
  size_t depth = 0;
  for (size_t i = 0; i < json_text.size(); ++i) {
    const char c = json_text[i];
    if (c == '"') {
      i = SkipJsonString(json_text, i);        // one past the string's closing quote
      if (i == std::string_view::npos) break;  // an unterminated string nests nothing further
      --i;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return InvalidArgumentError(std::string(what) + ": JSON nested deeper than " +
                                    std::to_string(max_depth) + " levels (at byte " + std::to_string(i) +
                                    "); strata refuses deeper nesting, flatten the value");
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return Status::Ok();
}

StatusOr<std::string> CanonicalizeJson(std::string_view json_text, std::string_view what) {
  if (PlainlyCanonical(json_text)) return std::string(json_text);
  STRATA_RETURN_IF_ERROR(CheckJsonDepth(json_text, what));
  nlohmann::json value = nlohmann::json::parse(json_text.begin(), json_text.end(), nullptr,
                                               /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // Re-parse with exceptions only to obtain the position for the message.
    std::string detail = "malformed JSON";
    try {
      nlohmann::json probe = nlohmann::json::parse(json_text.begin(), json_text.end());
      (void)probe;
    } catch (const nlohmann::json::parse_error& e) {
      detail = "malformed JSON at byte " + std::to_string(e.byte);
    } catch (const nlohmann::json::out_of_range&) {
      // The only range error the parser raises: a number beyond a double (e.g. 1e400).
      detail = "a number too large to represent (beyond about 1.8e308)";
    }
    return InvalidArgumentError(std::string(what) + ": " + detail +
                                "; pass one complete JSON value");
  }
  // nlohmann::json keeps object keys in a std::map (sorted by bytes) and prints numbers in
  // shortest round-trip form; its string escaping matches AppendJsonString (lowercase \u00xx).
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::strict);
}

}  // namespace strata::internal
