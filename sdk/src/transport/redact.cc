#include "transport/redact.h"

#include <cctype>
#include <cstdio>

#include "core/utf8.h"

namespace strata {
namespace {

// [start, end) of the authority of a URL ("scheme://authority/..."); npos start when none.
std::pair<size_t, size_t> Authority(std::string_view url) {
  size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return {std::string_view::npos, 0};
  size_t start = scheme + 3;
  size_t end = url.find_first_of("/?#", start);
  if (end == std::string_view::npos) end = url.size();
  return {start, end};
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string RedactUrl(std::string_view url) {
  auto [start, end] = Authority(url);
  if (start == std::string_view::npos) return std::string(url);
  size_t at = url.rfind('@', end == 0 ? 0 : end - 1);
  if (at == std::string_view::npos || at < start) return std::string(url);
  return std::string(url.substr(0, start)) + "[redacted]@" + std::string(url.substr(at + 1));
}

namespace transport_internal {

std::string UrlPassword(std::string_view url) {
  auto [start, end] = Authority(url);
  if (start == std::string_view::npos) return "";
  size_t at = url.rfind('@', end == 0 ? 0 : end - 1);
  if (at == std::string_view::npos || at < start) return "";
  std::string_view userinfo = url.substr(start, at - start);
  size_t colon = userinfo.find(':');
  return colon == std::string_view::npos ? "" : std::string(userinfo.substr(colon + 1));
}

bool IsLoopbackUrl(std::string_view url) {
  auto [start, end] = Authority(url);
  if (start == std::string_view::npos) return false;
  std::string_view host = url.substr(start, end - start);
  size_t at = host.rfind('@');
  if (at != std::string_view::npos) host.remove_prefix(at + 1);
  if (!host.empty() && host.front() == '[') {
    size_t close = host.find(']');
    return close != std::string_view::npos && host.substr(1, close - 1) == "::1";
  }
  host = host.substr(0, host.find(':'));
  std::string lower = Lower(host);
  if (lower == "localhost" || lower == "localhost.") return true;
  // 127.0.0.0/8 written as a dotted quad.
  unsigned a, b, c, d;
  char tail;
  return std::sscanf(lower.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 &&
         b < 256 && c < 256 && d < 256;
}

bool ValidHeader(std::string_view name, std::string_view value) {
  if (name.empty()) return false;
  for (char ch : name) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7f || c == ':') return false;
  }
  for (char ch : value) {
    unsigned char c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

std::string Printable(std::string_view text) {
  std::string out;
  for (char ch : text.substr(0, internal::Utf8Floor(text, 200))) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string Scrub(std::string_view text, const std::vector<std::string>& secrets) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    std::string_view line = text.substr(pos, end - pos);
    std::string lower = Lower(line.substr(0, 20));
    if (lower.rfind("authorization:", 0) == 0 || lower.rfind("proxy-authorization:", 0) == 0) {
      size_t colon = line.find(':');
      out.append(line.substr(0, colon + 1));
      out += " [redacted]";
      if (nl != std::string_view::npos)
        out += line.size() >= 2 && line[line.size() - 2] == '\r' ? "\r\n" : "\n";
    } else {
      out.append(line);
    }
    pos = end;
  }
  for (const std::string& secret : secrets) {
    if (secret.empty()) continue;
    for (size_t at = out.find(secret); at != std::string::npos; at = out.find(secret, at)) {
      out.replace(at, secret.size(), "[redacted]");
      at += 10;
    }
  }
  return out;
}

Status UpstreamStatus(const Status& status, const std::vector<std::string>& secrets) {
  if (status.ok()) return status;
  return Status(status.code(), internal::ToValidUtf8(Scrub(status.message(), secrets)));
}

}  // namespace transport_internal
}  // namespace strata
