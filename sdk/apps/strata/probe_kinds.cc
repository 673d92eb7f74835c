// strata probe: the probe kinds (probe.h): finding candidates in the sources, the questions' fixed
// text, and counting how many places of a rendered context answer a question.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string_view>

#include "probe.h"

namespace strata::cli::probe {
namespace {

bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

// kCamelCase or UPPER_CASE (with a letter, 3 characters at least): names a constant.
bool IsConstantName(std::string_view name) {
  if (name.size() < 3 || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!IsIdentChar(c)) return false;
  }
  if (name[0] == 'k' && std::isupper(static_cast<unsigned char>(name[1]))) return true;
  bool letter = false;
  for (char c : name) {
    if (std::islower(static_cast<unsigned char>(c))) return false;
    letter = letter || std::isupper(static_cast<unsigned char>(c));
  }
  return letter;
}

// A number (decimal, hex, float, with C suffixes and digit separators) or a short quoted string.
bool IsLiteral(std::string_view v) {
  if (v.empty() || v.size() > 40 || v.find('`') != std::string_view::npos) return false;
  if (v[0] == '"' || v[0] == '\'') {
    if (v.size() < 3 || v.back() != v[0]) return false;
    std::string_view inner = v.substr(1, v.size() - 2);
    return inner.find_first_of("\"'\\") == std::string_view::npos;
  }
  size_t i = v[0] == '-' ? 1 : 0;
  if (i >= v.size() || !std::isdigit(static_cast<unsigned char>(v[i]))) return false;
  for (; i < v.size(); ++i) {
    const char c = v[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '\'' && c != '_') return false;
  }
  return true;
}

std::string_view LastIdentifier(std::string_view s) {
  s = Trim(s);
  size_t start = s.size();
  while (start > 0 && IsIdentChar(s[start - 1])) --start;
  return s.substr(start);
}

// `NAME = literal` (C/C++ const/constexpr or a bare assignment, Python, shell) or `#define NAME
// literal`: the name and the literal.
std::optional<std::pair<std::string, std::string>> ParseConstant(std::string_view line) {
  std::string_view t = Trim(line);
  if (StartsWith(t, "#define ")) {
    std::string_view rest = Trim(t.substr(8));
    size_t space = rest.find_first_of(" \t");
    if (space == std::string_view::npos) return std::nullopt;
    std::string_view name = rest.substr(0, space), value = Trim(rest.substr(space));
    if (!IsConstantName(name) || !IsLiteral(value)) return std::nullopt;
    return std::make_pair(std::string(name), std::string(value));
  }
  size_t eq = t.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 >= t.size() || t[eq + 1] == '=') return std::nullopt;
  if (std::string_view("!<>+-*/%&|^:").find(t[eq - 1]) != std::string_view::npos) return std::nullopt;
  std::string_view left = Trim(t.substr(0, eq));
  std::string_view name = LastIdentifier(left);
  if (!IsConstantName(name)) return std::nullopt;
  const bool bare = left == name;
  const bool declared = left.find("const ") != std::string_view::npos ||
                        left.find("constexpr ") != std::string_view::npos ||
                        left.find("final ") != std::string_view::npos;
  if (!bare && !declared) return std::nullopt;
  std::string_view value = Trim(t.substr(eq + 1));
  for (std::string_view comment : {" //", " #", ";"}) {
    size_t cut = value.find(comment);
    if (cut != std::string_view::npos && value[0] != '"' && value[0] != '\'') value = Trim(value.substr(0, cut));
  }
  if (!value.empty() && value.back() == ';') value = Trim(value.substr(0, value.size() - 1));
  if (!IsLiteral(value)) return std::nullopt;
  return std::make_pair(std::string(name), std::string(value));
}

// The function a line defines: Python def/class, JS function, Rust fn, Go func, or an unindented
// C-family definition (`Type Name(...)` not ending in ';').
std::optional<std::string> ParseDefinition(std::string_view line) {
  std::string_view t = Trim(line);
  for (std::string_view kw : {"def ", "async def ", "class ", "function ", "fn ", "pub fn ", "func "}) {
    if (!StartsWith(t, kw)) continue;
    std::string_view rest = t.substr(kw.size());
    size_t end = 0;
    while (end < rest.size() && IsIdentChar(rest[end])) ++end;
    if (end < 3 || end >= rest.size() || (rest[end] != '(' && rest[end] != ':')) return std::nullopt;
    return std::string(rest.substr(0, end));
  }
  if (line.empty() || !std::isalpha(static_cast<unsigned char>(line[0])) || t.back() == ';') return std::nullopt;
  for (std::string_view kw : {"return", "if", "else", "while", "for", "switch", "case", "using", "namespace",
                              "typedef", "struct", "template", "static_assert", "TEST_CASE", "import", "from"}) {
    if (StartsWith(t, kw) && (t.size() == kw.size() || !IsIdentChar(t[kw.size()]))) return std::nullopt;
  }
  // `Type Name(` with the parenthesis right after the name, a short type, and a line that ends
  // as a signature does (prose like "the script works (...)" is not one).
  const size_t paren = t.find('(');
  if (paren == std::string_view::npos || paren == 0 || !IsIdentChar(t[paren - 1])) return std::nullopt;
  std::string_view before = t.substr(0, paren);
  if (before.find_first_of("=.,\"'<>`?!") != std::string_view::npos) return std::nullopt;
  if (std::count(before.begin(), before.end(), ' ') > 3) return std::nullopt;
  const char end = t.back();
  if (end != '{' && end != ')' && end != ',' && end != '(' && t.find(") const") == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view name = LastIdentifier(before);
  std::string_view type = Trim(before.substr(0, before.size() - name.size()));
  if (name.size() < 3 || type.empty()) return std::nullopt;
  const char last = type.back();
  if (!IsIdentChar(last) && last != '*' && last != '&' && last != ':') return std::nullopt;
  return std::string(name);
}

std::vector<std::string> TableCells(std::string_view line) {
  std::vector<std::string> cells;
  std::string_view row = Trim(line);
  if (row.size() < 2 || row[0] != '|') return cells;
  row.remove_prefix(1);
  if (!row.empty() && row.back() == '|') row.remove_suffix(1);
  size_t start = 0;
  while (start <= row.size()) {
    size_t bar = row.find('|', start);
    if (bar == std::string_view::npos) bar = row.size();
    cells.emplace_back(Trim(row.substr(start, bar - start)));
    start = bar + 1;
  }
  return cells;
}

bool IsSeparatorRow(const std::vector<std::string>& cells) {
  if (cells.empty()) return false;
  for (const std::string& c : cells) {
    if (c.empty() || c.find_first_not_of("-: ") != std::string::npos) return false;
  }
  return true;
}

// A cell worth asking for: a short number-like value.
bool IsNumberCell(const std::string& cell) {
  if (cell.empty() || cell.size() > 24 || cell.find('`') != std::string::npos) return false;
  return std::isdigit(static_cast<unsigned char>(cell[0])) ||
         (cell.size() > 1 && cell[0] == '-' && std::isdigit(static_cast<unsigned char>(cell[1])));
}

bool IsLabel(const std::string& s) {
  return !s.empty() && s.size() <= 60 && s.find('`') == std::string::npos;
}

// The table candidates of one file: for each table, each data row with a label and each
// number-like cell under a labelled column whose name no other column of the table has (a question
// naming a repeated column has more than one answer).
void AddTableCandidates(const SourceFile& file, size_t f, std::vector<Candidate>* out) {
  const std::vector<std::string>& lines = file.lines;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    std::vector<std::string> header = TableCells(lines[i]);
    if (header.size() < 2 || !IsSeparatorRow(TableCells(lines[i + 1]))) continue;
    size_t row = i + 2;
    for (; row < lines.size(); ++row) {
      std::vector<std::string> cells = TableCells(lines[row]);
      if (cells.empty()) break;
      if (!IsLabel(cells[0])) continue;
      for (size_t c = 1; c < cells.size() && c < header.size(); ++c) {
        if (!IsLabel(header[c]) || !IsNumberCell(cells[c])) continue;
        if (std::count(header.begin(), header.end(), header[c]) != 1) continue;
        out->push_back({ProbeKind::kTable, f, row, i, cells[0], header[c], cells[c]});
      }
    }
    i = row - 1;
  }
}

// The text of the line of `context` that holds `pos`, without its "N<TAB>" prefix.
std::string_view LineContent(std::string_view context, size_t pos) {
  size_t start = context.rfind('\n', pos);
  start = start == std::string_view::npos ? 0 : start + 1;
  size_t end = context.find('\n', pos);
  std::string_view line = context.substr(start, (end == std::string_view::npos ? context.size() : end) - start);
  size_t tab = line.find('\t');
  if (tab != std::string_view::npos && tab > 0 && tab < 10 &&
      std::all_of(line.begin(), line.begin() + static_cast<long>(tab), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return line.substr(tab + 1);
  }
  return line;
}

// The distinct lines of `context` holding `word` as a whole word that `pred` accepts.
template <typename Pred>
size_t CountLines(const std::string& context, const std::string& word, Pred pred) {
  size_t count = 0;
  std::optional<size_t> last_line;  // the line last counted (npos: the first line)
  for (size_t pos = context.find(word); pos != std::string::npos; pos = context.find(word, pos + 1)) {
    const bool left = pos == 0 || !IsIdentChar(context[pos - 1]);
    const bool right = pos + word.size() >= context.size() || !IsIdentChar(context[pos + word.size()]);
    if (!left || !right) continue;
    size_t line_start = context.rfind('\n', pos);
    if (line_start == last_line) continue;
    std::string_view content = LineContent(context, pos);
    if (pred(content)) {
      ++count;
      last_line = line_start;
    }
  }
  return count;
}

// The identifiers of `line`, in order.
std::vector<std::string> Identifiers(std::string_view line) {
  std::vector<std::string> ids;
  size_t i = 0;
  while (i < line.size()) {
    if (!IsIdentChar(line[i]) || std::isdigit(static_cast<unsigned char>(line[i]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < line.size() && IsIdentChar(line[end])) ++end;
    ids.emplace_back(line.substr(i, end - i));
    i = end;
  }
  return ids;
}

size_t CountTwoHopAnswers(const std::string& context, const Candidate& c);

}  // namespace

std::vector<Candidate> TwoHopCandidates(const SourceSet& sources, const std::vector<Candidate>& candidates) {
  std::map<std::string, const Candidate*> constants;
  for (const Candidate& c : candidates) {
    if (c.kind == ProbeKind::kConstant) constants[c.key] = &c;
  }
  std::vector<Candidate> hops;
  for (const Candidate& d : candidates) {
    if (d.kind != ProbeKind::kDefinition) continue;
    const std::vector<std::string>& lines = sources.files[d.file].lines;
    std::set<std::string> used;
    for (size_t i = d.line + 1; i < lines.size() && i <= d.line + kHopWindow; ++i) {
      for (const std::string& id : Identifiers(lines[i])) {
        auto it = constants.find(id);
        if (it != constants.end() && it->second->file != d.file) used.insert(id);
      }
    }
    if (used.size() != 1) continue;
    const Candidate& k = *constants[*used.begin()];
    Candidate hop = d;
    hop.kind = ProbeKind::kTwoHop;
    hop.column = k.key;
    hop.answer = k.answer;
    hop.hop_file = k.file;
    hop.hop_line = k.line;
    hops.push_back(std::move(hop));
  }
  return hops;
}

namespace {

// A two-hop question has one answer when the function is defined once, and exactly one of the
// identifiers in the lines after its definition (to its block's end) is defined as a constant in
// the context: the asked one, once.
size_t CountTwoHopAnswers(const std::string& context, const Candidate& c) {
  Candidate def = c;
  def.kind = ProbeKind::kDefinition;
  const size_t defs = CountAnswers(context, def);
  if (defs != 1) return defs;
  size_t pos = 0;
  for (pos = context.find(c.key + "("); pos != std::string::npos; pos = context.find(c.key + "(", pos + 1)) {
    if (ParseDefinition(LineContent(context, pos)) == c.key) break;
  }
  if (pos == std::string::npos) return 0;
  std::set<std::string> ids;
  size_t line = context.find('\n', pos);
  while (line != std::string::npos && line + 1 < context.size() && context[line + 1] != '\n') {
    size_t end = context.find('\n', line + 1);
    for (std::string& id : Identifiers(LineContent(context, line + 1))) {
      if (IsConstantName(id) && id != c.key) ids.insert(std::move(id));
    }
    line = end;
  }
  size_t defined = 0;
  bool asked_once = false;
  for (const std::string& id : ids) {
    Candidate constant;
    constant.kind = ProbeKind::kConstant;
    constant.key = id;
    const size_t n = CountAnswers(context, constant);
    defined += n > 0 ? 1 : 0;
    asked_once = asked_once || (id == c.column && n == 1);
  }
  return asked_once ? defined : defined + 1;
}

}  // namespace

const char* KindName(ProbeKind kind) {
  switch (kind) {
    case ProbeKind::kConstant: return "constant";
    case ProbeKind::kDefinition: return "definition";
    case ProbeKind::kTable: return "table";
    case ProbeKind::kMrcr: return "mrcr";
    case ProbeKind::kTwoHop: return "twohop";
  }
  return "constant";
}

std::optional<ProbeKind> KindFromName(const std::string& name) {
  for (int k = 0; k < kProbeKinds; ++k) {
    if (name == KindName(static_cast<ProbeKind>(k))) return static_cast<ProbeKind>(k);
  }
  return std::nullopt;
}

std::vector<Candidate> FindCandidates(const SourceSet& sources) {
  std::vector<Candidate> out;
  for (size_t f = 0; f < sources.files.size(); ++f) {
    const SourceFile& file = sources.files[f];
    for (size_t i = 0; i < file.lines.size(); ++i) {
      if (auto constant = ParseConstant(file.lines[i])) {
        out.push_back({ProbeKind::kConstant, f, i, i, constant->first, "", constant->second});
      } else if (auto name = ParseDefinition(file.lines[i])) {
        out.push_back({ProbeKind::kDefinition, f, i, i, *name, "",
                       file.path + ":" + std::to_string(i + 1)});
      }
    }
    AddTableCandidates(file, f, &out);
  }
  return out;
}

std::string QuestionText(ProbeKind kind, const std::string& key, const std::string& column, int ordinal) {
  const std::string head = std::string("Question [strata-probe ") + KindName(kind) + "]: ";
  switch (kind) {
    case ProbeKind::kConstant:
      return head + "What value is the constant `" + key +
             "` set to where it is defined in the files above? Answer with the value only.";
    case ProbeKind::kDefinition:
      return head + "In which file and at which line of the files above is the function `" + key +
             "` defined? Answer as PATH:LINE, with the path of the file's ==> header and the line "
             "number shown before the line.";
    case ProbeKind::kTable:
      return head + "In the table above that has a column `" + column + "`, what does the row whose first cell is `" +
             key + "` hold in that column? Answer with the cell only.";
    case ProbeKind::kMrcr:
      return head + "The memos above set `" + key + "` several times. What value does memo number `" +
             std::to_string(ordinal) + "` for it give, counting from the top? Answer with the value only.";
    case ProbeKind::kTwoHop:
      return head + "The function `" + key + "` in the files above uses a constant that another file above "
             "defines. What value is that constant set to? Answer with the value only.";
  }
  return head;
}

std::string MemoLine(const std::string& key, const std::string& value) {
  return "[memo] The value of " + key + " is now " + value + ".\n";
}

size_t CountOccurrences(const std::string& context, const std::string& text) {
  size_t count = 0;
  if (text.empty()) return 0;
  for (size_t pos = context.find(text); pos != std::string::npos; pos = context.find(text, pos + 1)) ++count;
  return count;
}

size_t CountAnswers(const std::string& context, const Candidate& c) {
  switch (c.kind) {
    case ProbeKind::kConstant:
      // Every assignment of the name counts (the question would be ambiguous), constant or not.
      return CountLines(context, c.key, [&](std::string_view line) {
        std::string_view t = Trim(line);
        if (StartsWith(t, "#define ")) return Trim(t.substr(8)).rfind(c.key, 0) == 0;
        size_t at = line.find(c.key);
        while (at != std::string_view::npos) {
          std::string_view rest = Trim(line.substr(at + c.key.size()));
          if (rest.size() >= 2 && rest[0] == '=' && rest[1] != '=') return true;
          at = line.find(c.key, at + 1);
        }
        return false;
      });
    case ProbeKind::kDefinition:
      // A definition, or any unindented line naming NAME( (a call at top level looks like one).
      return CountLines(context, c.key, [&](std::string_view line) {
        if (ParseDefinition(line) == c.key) return true;
        return !line.empty() && !std::isspace(static_cast<unsigned char>(line[0])) &&
               line.find(c.key + "(") != std::string_view::npos;
      });
    case ProbeKind::kTable:
      return CountLines(context, c.key, [&](std::string_view line) {
        std::vector<std::string> cells = TableCells(line);
        return !cells.empty() && cells[0] == c.key;
      });
    case ProbeKind::kMrcr:
      return CountOccurrences(context, "[memo] The value of " + c.key + " is now ");
    case ProbeKind::kTwoHop:
      return CountTwoHopAnswers(context, c);
  }
  return 0;
}

}  // namespace strata::cli::probe
