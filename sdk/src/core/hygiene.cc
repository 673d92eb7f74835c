#include "core/hygiene.h"

#include <cmath>
#include <vector>

#include "core/identifiers.h"
#include "core/text_util.h"
#include "core/utf8.h"

namespace strata::internal {
namespace {

constexpr std::string_view kTracebackHeader = "Traceback (most recent call last):";

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool IsErrorLine(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' ||
                             line[i] == '.'))
    ++i;
  std::string_view word = line.substr(0, i);
  if (i < line.size() && line[i] == ':' && i > 0) {
    if (word.size() >= 5 && (word.substr(word.size() - 5) == "Error" ||
                             (word.size() >= 9 && word.substr(word.size() - 9) == "Exception")))
      return true;
    if (word == "error" || word == "ERROR" || word == "fatal" || word == "panic" || word == "FATAL")
      return true;
  }
  return false;
}

// A Python frame line: two spaces then `File "`.
bool IsFrameLine(std::string_view line) { return StartsWith(line, "  File \""); }

}  // namespace

bool LooksLikeErrorLog(std::string_view text) {
  if (text.find(kTracebackHeader) != std::string_view::npos) return true;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (IsErrorLine(text.substr(start, end - start))) return true;
    start = end + 1;
  }
  return false;
}

std::optional<std::string> FoldErrorLog(std::string_view text, const HygieneOptions& options,
                                         std::string_view recall_id) {
  const std::vector<std::string_view> lines = SplitLines(text);
  std::vector<std::string> out;
  out.reserve(lines.size());
  const size_t min_run = options.min_repeat_run < 2 ? 2 : options.min_repeat_run;

  for (size_t i = 0; i < lines.size();) {
    // Python traceback: header, then frames ("  File ..." followed by indented source lines).
    if (lines[i] == kTracebackHeader) {
      out.emplace_back(lines[i]);
      size_t j = i + 1;
      std::vector<std::pair<size_t, size_t>> frames;  // [begin, end) line ranges
      while (j < lines.size() && IsFrameLine(lines[j])) {
        size_t begin = j++;
        while (j < lines.size() && StartsWith(lines[j], "    ")) ++j;
        frames.emplace_back(begin, j);
      }
      if (frames.size() > 2) {
        for (size_t k = frames.front().first; k < frames.front().second; ++k)
          out.emplace_back(lines[k]);
        // Name the omitted frames (file:function), so their identifiers stay in the request.
        std::string omitted;
        for (size_t f = 1; f + 1 < frames.size() && f <= 12; ++f) {
          std::string_view frame = lines[frames[f].first];
          const size_t file_begin = frame.find('"') + 1, file_end = frame.find('"', file_begin);
          const size_t in_at = frame.rfind(", in ");
          if (file_end == std::string_view::npos || in_at == std::string_view::npos) continue;
          omitted += (omitted.empty() ? "" : ", ") + std::string(frame.substr(file_begin, file_end - file_begin)) +
                     ":" + std::string(frame.substr(in_at + 5));
        }
        // ...and the names their source lines mention.
        std::string omitted_text;
        for (size_t f = 1; f + 1 < frames.size(); ++f) {
          for (size_t k = frames[f].first + 1; k < frames[f].second; ++k) {
            omitted_text.append(lines[k]).push_back('\n');
          }
        }
        std::string names;
        for (const std::string& name : ExtractIdentifiers(omitted_text, 16)) {
          names += (names.empty() ? "; mentions: " : ", ") + name;
        }
        out.push_back("  [strata: " + std::to_string(frames.size() - 2) + " frames omitted" +
                      (omitted.empty() ? "" : " (" + omitted + ")") + names + "; recall id " +
                      std::string(recall_id) + "]");
        for (size_t k = frames.back().first; k < frames.back().second; ++k)
          out.emplace_back(lines[k]);
      } else {
        for (size_t k = i + 1; k < j; ++k) out.emplace_back(lines[k]);
      }
      i = j;
      continue;
    }
    size_t run = 1;
    while (i + run < lines.size() && lines[i + run] == lines[i]) ++run;
    out.emplace_back(lines[i]);
    if (run >= min_run) {
      out.push_back("[strata: previous line repeated " + std::to_string(run - 1) + " more times]");
    } else {
      for (size_t k = 1; k < run; ++k) out.emplace_back(lines[i]);
    }
    i += run;
  }

  std::string folded;
  folded.reserve(text.size());
  for (size_t k = 0; k < out.size(); ++k) {
    if (k) folded.push_back('\n');
    folded += out[k];
  }
  if (folded.size() >= text.size()) return std::nullopt;
  return folded;
}

std::string WithThousands(size_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string KeepHeadAndTail(std::string_view text, size_t head_bytes, size_t tail_bytes,
                            double bytes_per_token, std::string_view recall_id) {
  if (head_bytes + tail_bytes >= text.size()) return std::string(text);
  // Prefer ending the head after a newline, if one lies in the head's second half.
  size_t head_end = Utf8Floor(text, head_bytes);
  size_t newline = text.rfind('\n', head_end == 0 ? 0 : head_end - 1);
  if (newline != std::string_view::npos && newline + 1 >= head_end / 2 && newline + 1 <= head_end)
    head_end = newline + 1;
  size_t tail_begin = Utf8Floor(text, text.size() - tail_bytes);
  if (tail_begin < head_end) tail_begin = head_end;
  size_t next_newline = text.find('\n', tail_begin);
  if (next_newline != std::string_view::npos && next_newline + 1 < text.size() &&
      next_newline + 1 - tail_begin <= tail_bytes / 2)
    tail_begin = next_newline + 1;

  const size_t cut = tail_begin - head_end;
  const size_t cut_tokens =
      static_cast<size_t>(std::ceil(static_cast<double>(cut) / (bytes_per_token > 0 ? bytes_per_token : 4)));
  std::string out;
  out.reserve(head_end + (text.size() - tail_begin) + 160);
  out.append(text.substr(0, head_end));
  if (!out.empty() && out.back() != '\n') out.push_back('\n');
  out += "[strata: cut " + WithThousands(cut) + " of " + WithThousands(text.size()) +
         " bytes (about " + WithThousands(cut_tokens) + " tokens) from the middle of this output; recall id " +
         std::string(recall_id) + "]\n";
  out.append(text.substr(tail_begin));
  return out;
}

std::string DuplicateReference(std::string_view earlier_call_id, std::string_view tool_name,
                               std::string_view output, std::string_view recall_id) {
  std::string text = "[strata: output identical to the result of call " + std::string(earlier_call_id) + " (" +
                     std::string(tool_name) + ", same arguments, " + WithThousands(output.size()) + " bytes";
  const std::vector<std::string> names = ExtractIdentifiers(std::string(output), 16);
  for (size_t i = 0; i < names.size(); ++i) text += (i ? ", " : "; mentions: ") + names[i];
  return text + "); recall id " + std::string(recall_id) + "]";
}

}  // namespace strata::internal
