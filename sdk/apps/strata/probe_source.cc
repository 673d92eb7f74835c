// strata probe: reading the sources and cutting them into the blocks a context shows (probe.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "probe.h"
#include "strata/replay/trace.h"

namespace strata::cli::probe {
namespace {

constexpr size_t kMaxFileBytes = 8u << 20;
constexpr size_t kMaxLineBytes = 2000;  // longer lines are cut (minified files, base64)

const char* RoleName(TraceRole role) {
  switch (role) {
    case TraceRole::kSystem: return "system";
    case TraceRole::kUser: return "user";
    case TraceRole::kAssistant: return "assistant";
    case TraceRole::kTool: return "tool";
  }
  return "user";
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    for (char& c : line) {
      if (c == '\t') c = ' ';  // a tab separates a line's number from its text
    }
    if (line.size() > kMaxLineBytes) {
      size_t cut = kMaxLineBytes;
      while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
      line.resize(cut);
    }
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

// Whether `text` is valid UTF-8 (overlong forms, surrogates and code points past U+10FFFF are not).
bool IsUtf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > text.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) {
      const unsigned char next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (next & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (len > 1 && (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) return false;
    i += len;
  }
  return true;
}

// A trajectory's messages as text; nullopt when `path` is not one.
std::optional<std::string> TrajectoryText(const std::string& path) {
  StatusOr<std::vector<TraceMessage>> messages = ReadTrace(path);
  if (!messages.ok() || messages->empty()) return std::nullopt;
  std::string text;
  for (const TraceMessage& m : *messages) {
    text += "[" + std::string(RoleName(m.role)) + (m.name.empty() ? "" : " " + m.name) + "]\n";
    text += m.content;
    for (const ToolCall& call : m.tool_calls) text += "\n" + call.name + " " + call.arguments;
    text += "\n";
  }
  return text;
}

// Reads `file` into `sources`, or counts it as skipped.
void AddFile(const std::filesystem::path& file, const std::string& shown, SourceSet* sources) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec || size == 0 || size > kMaxFileBytes) {
    ++sources->skipped;
    return;
  }
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (!in.good() && !in.eof()) {
    ++sources->skipped;
    return;
  }
  if (text.find('\0') != std::string::npos || !IsUtf8(text)) {
    ++sources->skipped;
    return;
  }
  if (file.extension() == ".jsonl") {
    if (std::optional<std::string> trajectory = TrajectoryText(file.string())) text = *trajectory;
  }
  sources->bytes += static_cast<int64_t>(text.size());
  sources->files.push_back({shown, SplitLines(text)});
}

}  // namespace

StatusOr<SourceSet> LoadSources(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  SourceSet sources;
  for (const std::string& given : paths) {
    std::error_code ec;
    const fs::path root(given);
    if (fs::is_regular_file(root, ec)) {
      AddFile(root, root.lexically_normal().generic_string(), &sources);
      continue;
    }
    if (!fs::is_directory(root, ec)) {
      return NotFoundError("--source \"" + given + "\" is neither a file nor a directory");
    }
    std::vector<fs::path> files;
    fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec)) files.push_back(it->path());
    }
    if (ec) return UnavailableError("reading --source \"" + given + "\": " + ec.message());
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) AddFile(file, file.lexically_normal().generic_string(), &sources);
  }
  std::sort(sources.files.begin(), sources.files.end(),
            [](const SourceFile& a, const SourceFile& b) { return a.path < b.path; });
  if (sources.files.empty()) {
    return NotFoundError("the sources hold no text file (" + std::to_string(sources.skipped) +
                         " skipped: binary, not UTF-8, empty or over 8 MiB); give --source a "
                         "repository directory or documents");
  }
  return sources;
}

std::vector<Block> CutBlocks(const SourceSet& sources, size_t max_lines, size_t max_bytes) {
  std::vector<Block> blocks;
  for (size_t f = 0; f < sources.files.size(); ++f) {
    const std::vector<std::string>& lines = sources.files[f].lines;
    size_t first = 0;
    while (first < lines.size()) {
      size_t count = 0, bytes = 0;
      while (first + count < lines.size() && count < max_lines &&
             (count == 0 || bytes + lines[first + count].size() <= max_bytes)) {
        bytes += lines[first + count].size() + 1;
        ++count;
      }
      blocks.push_back({f, first, count});
      first += count;
    }
  }
  return blocks;
}

std::string RenderBlock(const SourceSet& sources, const Block& block) {
  const SourceFile& file = sources.files[block.file];
  std::string out = "==> " + file.path + " (lines " + std::to_string(block.first + 1) + "-" +
                    std::to_string(block.first + block.count) + ") <==\n";
  for (size_t i = block.first; i < block.first + block.count && i < file.lines.size(); ++i) {
    out += std::to_string(i + 1);
    out += '\t';
    out += file.lines[i];
    out += '\n';
  }
  return out;
}

}  // namespace strata::cli::probe
