// strata-sim --answer retrieve (see sim_retrieve.h). The lookups read the plain-text layout that
// strata probe renders (docs/probe.md): file blocks headed `==> PATH (lines A-B) <==` whose lines
// are `N<TAB>text`, memo lines `[memo] The value of KEY is now VALUE.`, markdown tables. They are
// written apart from the generator's, so that a probe the two disagree on shows up in the tests.
#include "sim_retrieve.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace strata::sim {
namespace {

constexpr std::string_view kQuestionMarker = "Question [strata-probe ";

struct Line {
  size_t offset = 0;       // of the line's first byte in the message
  std::string_view text;   // the whole line
};

std::vector<Line> SplitLines(std::string_view text) {
  std::vector<Line> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back({start, text.substr(start, end - start)});
    start = end + 1;
  }
  return lines;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A numbered line "N<TAB>text": its text and number; other lines: themselves and 0.
std::string_view Content(std::string_view line, long* number) {
  size_t tab = line.find('\t');
  *number = 0;
  if (tab == std::string_view::npos || tab == 0 || tab > 9) return line;
  for (size_t i = 0; i < tab; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(line[i]))) return line;
  }
  *number = std::strtol(std::string(line.substr(0, tab)).c_str(), nullptr, 10);
  return line.substr(tab + 1);
}

// Positions where `word` occurs in `s` as a whole identifier.
std::vector<size_t> WordPositions(std::string_view s, std::string_view word) {
  std::vector<size_t> out;
  for (size_t pos = s.find(word); pos != std::string_view::npos; pos = s.find(word, pos + 1)) {
    const bool left = pos == 0 || !IsIdentChar(s[pos - 1]);
    const bool right = pos + word.size() >= s.size() || !IsIdentChar(s[pos + word.size()]);
    if (left && right) out.push_back(pos);
  }
  return out;
}

// The value after `=` (or after #define NAME): a quoted string through its closing quote, else up
// to the first ';', ',', ')' or blank.
std::string ValueAt(std::string_view rest) {
  rest = Trim(rest);
  if (rest.empty()) return "";
  if (rest[0] == '"' || rest[0] == '\'') {
    size_t close = rest.find(rest[0], 1);
    return std::string(close == std::string_view::npos ? rest : rest.substr(0, close + 1));
  }
  size_t end = rest.find_first_of(";,) \t");
  return std::string(rest.substr(0, end));
}

struct Found {
  std::string answer;
  size_t offset = 0;  // of the evidence line
};

std::optional<Found> FindConstant(const std::vector<Line>& lines, std::string_view name) {
  for (const Line& line : lines) {
    long number;
    std::string_view content = Content(line.text, &number);
    std::string_view trimmed = Trim(content);
    if (trimmed.rfind("#define ", 0) == 0) {
      std::string_view rest = Trim(trimmed.substr(8));
      if (rest.rfind(name, 0) == 0 && rest.size() > name.size() &&
          std::isspace(static_cast<unsigned char>(rest[name.size()]))) {
        return Found{ValueAt(rest.substr(name.size())), line.offset};
      }
      continue;
    }
    for (size_t pos : WordPositions(content, name)) {
      std::string_view rest = Trim(content.substr(pos + name.size()));
      if (rest.size() >= 2 && rest[0] == '=' && rest[1] != '=') {
        return Found{ValueAt(rest.substr(1)), line.offset};
      }
    }
  }
  return std::nullopt;
}

bool StartsWithAny(std::string_view s, std::initializer_list<std::string_view> prefixes) {
  for (std::string_view p : prefixes) {
    if (s.rfind(p, 0) == 0) return true;
  }
  return false;
}

// A line that defines function `name`: def/class/function/fn/func NAME, or an unindented line
// declaring NAME( after a return type and not ending in ';'.
bool DefinesFunction(std::string_view content, std::string_view name) {
  std::string_view trimmed = Trim(content);
  for (size_t pos : WordPositions(content, name)) {
    const size_t after = pos + name.size();
    std::string_view before = Trim(content.substr(0, pos));
    if (StartsWithAny(trimmed, {"def ", "async def ", "class ", "function ", "fn ", "func ", "pub fn "}) &&
        (before == "def" || before == "async def" || before == "class" || before == "function" ||
         before == "fn" || before == "func" || before == "pub fn")) {
      return true;
    }
    if (after >= content.size() || content[after] != '(') continue;
    if (content.empty() || std::isspace(static_cast<unsigned char>(content[0]))) continue;
    if (before.empty() || trimmed.back() == ';') continue;
    const char prev = content[pos - 1];
    if (prev != ' ' && prev != ':' && prev != '*' && prev != '&') continue;
    if (StartsWithAny(trimmed, {"return", "if ", "if(", "while", "for ", "for(", "else", "#", "//", "case "})) {
      continue;
    }
    return true;
  }
  return false;
}

// The path of the file block holding line `index`: its nearest `==> PATH ... <==` header above.
std::string HeaderPath(const std::vector<Line>& lines, size_t index) {
  for (size_t i = index + 1; i-- > 0;) {
    std::string_view text = lines[i].text;
    if (text.rfind("==> ", 0) != 0) continue;
    text.remove_prefix(4);
    size_t end = text.find(" (lines ");
    if (end == std::string_view::npos) end = text.find(" <==");
    return std::string(text.substr(0, end));
  }
  return "";
}

std::optional<Found> FindDefinition(const std::vector<Line>& lines, std::string_view name) {
  for (size_t i = 0; i < lines.size(); ++i) {
    long number;
    std::string_view content = Content(lines[i].text, &number);
    if (number == 0 || !DefinesFunction(content, name)) continue;
    return Found{HeaderPath(lines, i) + ":" + std::to_string(number), lines[i].offset};
  }
  return std::nullopt;
}

// kCamelCase or UPPER_CASE with a letter, 3 characters at least: a constant's name.
bool LooksConstant(std::string_view id) {
  if (id.size() < 3) return false;
  if (id[0] == 'k' && std::isupper(static_cast<unsigned char>(id[1]))) return true;
  bool letter = false;
  for (char c : id) {
    if (std::islower(static_cast<unsigned char>(c))) return false;
    letter = letter || std::isupper(static_cast<unsigned char>(c));
  }
  return letter;
}

// The value of the constant function `name` uses: the first constant-like identifier in the lines
// after its definition (to the end of its block) that some line of the prompt defines.
std::optional<Found> FindTwoHop(const std::vector<Line>& lines, std::string_view name) {
  for (size_t i = 0; i < lines.size(); ++i) {
    long number;
    if (!DefinesFunction(Content(lines[i].text, &number), name) || number == 0) continue;
    for (size_t j = i + 1; j < lines.size() && !lines[j].text.empty(); ++j) {
      std::string_view content = Content(lines[j].text, &number);
      for (size_t k = 0; k < content.size();) {
        if (!IsIdentChar(content[k]) || std::isdigit(static_cast<unsigned char>(content[k]))) {
          ++k;
          continue;
        }
        size_t end = k;
        while (end < content.size() && IsIdentChar(content[end])) ++end;
        std::string_view id = content.substr(k, end - k);
        if (id != name && LooksConstant(id)) {
          if (std::optional<Found> constant = FindConstant(lines, id)) return constant;
        }
        k = end;
      }
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::vector<std::string> TableCells(std::string_view content) {
  std::vector<std::string> cells;
  std::string_view row = Trim(content);
  if (row.empty() || row[0] != '|') return cells;
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

std::optional<Found> FindTableCell(const std::vector<Line>& lines, std::string_view column,
                                   std::string_view row) {
  for (size_t i = 0; i < lines.size(); ++i) {
    long number;
    std::vector<std::string> cells = TableCells(Content(lines[i].text, &number));
    if (cells.empty() || cells[0] != row) continue;
    size_t top = i;
    while (top > 0 && !TableCells(Content(lines[top - 1].text, &number)).empty()) --top;
    std::vector<std::string> header = TableCells(Content(lines[top].text, &number));
    auto col = std::find(header.begin(), header.end(), column);
    if (col == header.end()) continue;
    const size_t index = static_cast<size_t>(col - header.begin());
    if (index < cells.size()) return Found{cells[index], lines[i].offset};
  }
  return std::nullopt;
}

// Every memo for `key`, in order.
std::vector<Found> FindMemos(const std::vector<Line>& lines, std::string_view key) {
  std::vector<Found> memos;
  const std::string prefix = "[memo] The value of " + std::string(key) + " is now ";
  for (const Line& line : lines) {
    if (line.text.rfind(prefix, 0) != 0) continue;
    std::string_view value = line.text.substr(prefix.size());
    if (!value.empty() && value.back() == '.') value.remove_suffix(1);
    memos.push_back({std::string(value), line.offset});
  }
  return memos;
}

std::vector<std::string> BacktickParams(std::string_view question) {
  std::vector<std::string> params;
  size_t open = question.find('`');
  while (open != std::string_view::npos) {
    size_t close = question.find('`', open + 1);
    if (close == std::string_view::npos) break;
    params.emplace_back(question.substr(open + 1, close - open - 1));
    open = question.find('`', close + 1);
  }
  return params;
}

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double Uniform(uint64_t seed, std::string_view question, int64_t prompt_tokens) {
  uint64_t h = 1469598103934665603ull ^ Mix(seed);
  for (char c : question) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  h = Mix(h ^ static_cast<uint64_t>(prompt_tokens));
  return static_cast<double>(h >> 11) / 9007199254740992.0;
}

bool Holds(const DegradeCondition& c, double depth, int64_t length) {
  const double v = c.variable == DegradeCondition::Variable::kDepth ? depth : static_cast<double>(length);
  switch (c.op) {
    case DegradeCondition::Op::kGreater: return v > c.threshold;
    case DegradeCondition::Op::kGreaterEqual: return v >= c.threshold;
    case DegradeCondition::Op::kLess: return v < c.threshold;
    case DegradeCondition::Op::kLessEqual: return v <= c.threshold;
  }
  return false;
}

// A plausible wrong answer: the last digit moved on by one, else a suffix.
std::string Corrupt(const std::string& answer) {
  std::string out = answer;
  for (size_t i = out.size(); i-- > 0;) {
    if (std::isdigit(static_cast<unsigned char>(out[i]))) {
      out[i] = static_cast<char>('0' + (out[i] - '0' + 1) % 10);
      return out;
    }
  }
  return out + "_2";
}

std::optional<Found> Lookup(const std::string& kind, const std::vector<std::string>& params,
                            const std::vector<Line>& lines, std::vector<Found>* memos) {
  if (kind == "constant" && params.size() >= 1) return FindConstant(lines, params[0]);
  if (kind == "definition" && params.size() >= 1) return FindDefinition(lines, params[0]);
  if (kind == "table" && params.size() >= 2) return FindTableCell(lines, params[0], params[1]);
  if (kind == "twohop" && params.size() >= 1) return FindTwoHop(lines, params[0]);
  if (kind == "mrcr" && params.size() >= 2) {
    *memos = FindMemos(lines, params[0]);
    const long n = std::strtol(params[1].c_str(), nullptr, 10);
    if (n >= 1 && static_cast<size_t>(n) <= memos->size()) return (*memos)[static_cast<size_t>(n - 1)];
  }
  return std::nullopt;
}

}  // namespace

StatusOr<std::vector<DegradeRule>> ParseDegradeSpec(const std::string& spec) {
  std::vector<DegradeRule> rules;
  auto bad = [](std::string_view rule, const std::string& why) {
    return InvalidArgumentError("--degrade rule \"" + std::string(rule) + "\": " + why +
                                " (expected e.g. depth>0.5:p=0.3 or depth>=0.5&length>=128k:p=0.5)");
  };
  size_t start = 0;
  while (start < spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    std::string_view rule = Trim(std::string_view(spec).substr(start, comma - start));
    start = comma + 1;
    const size_t colon = rule.rfind(":p=");
    if (colon == std::string_view::npos) return bad(rule, "no \":p=P\"");
    DegradeRule parsed;
    std::string p(rule.substr(colon + 3));
    char* end = nullptr;
    parsed.p = std::strtod(p.c_str(), &end);
    if (p.empty() || *end != '\0' || !(parsed.p >= 0 && parsed.p <= 1)) return bad(rule, "p must be in [0, 1]");
    std::string_view conds = rule.substr(0, colon);
    size_t cstart = 0;
    while (cstart <= conds.size()) {
      size_t amp = conds.find('&', cstart);
      if (amp == std::string_view::npos) amp = conds.size();
      std::string_view text = Trim(conds.substr(cstart, amp - cstart));
      cstart = amp + 1;
      DegradeCondition c;
      if (text.rfind("depth", 0) == 0) {
        text.remove_prefix(5);
      } else if (text.rfind("length", 0) == 0) {
        c.variable = DegradeCondition::Variable::kLength;
        text.remove_prefix(6);
      } else {
        return bad(rule, "a condition must start with depth or length");
      }
      if (text.rfind(">=", 0) == 0) c.op = DegradeCondition::Op::kGreaterEqual, text.remove_prefix(2);
      else if (text.rfind("<=", 0) == 0) c.op = DegradeCondition::Op::kLessEqual, text.remove_prefix(2);
      else if (text.rfind(">", 0) == 0) c.op = DegradeCondition::Op::kGreater, text.remove_prefix(1);
      else if (text.rfind("<", 0) == 0) c.op = DegradeCondition::Op::kLess, text.remove_prefix(1);
      else return bad(rule, "a condition needs >, >=, < or <=");
      std::string number(text);
      double scale = 1;
      if (!number.empty() && (number.back() == 'k' || number.back() == 'K')) scale = 1024, number.pop_back();
      else if (!number.empty() && (number.back() == 'm' || number.back() == 'M')) scale = 1048576, number.pop_back();
      c.threshold = std::strtod(number.c_str(), &end) * scale;
      if (number.empty() || *end != '\0' || !std::isfinite(c.threshold)) return bad(rule, "\"" + std::string(text) + "\" is not a number");
      parsed.conditions.push_back(c);
    }
    rules.push_back(std::move(parsed));
  }
  return rules;
}

RetrieveResult AnswerProbe(const std::string& user_message, int64_t prompt_tokens,
                           const RetrieveOptions& options) {
  RetrieveResult result;
  result.answer = "I found no strata probe question.";
  const size_t q = user_message.rfind(kQuestionMarker);
  if (q == std::string::npos) return result;
  const size_t close = user_message.find(']', q);
  if (close == std::string::npos) return result;
  result.kind = user_message.substr(q + kQuestionMarker.size(), close - q - kQuestionMarker.size());
  const std::string_view question = std::string_view(user_message).substr(q);
  const std::vector<std::string> params = BacktickParams(question.substr(question.find(']')));
  const std::vector<Line> lines = SplitLines(std::string_view(user_message).substr(0, q));
  std::vector<Found> memos;
  std::optional<Found> found = Lookup(result.kind, params, lines, &memos);
  if (!found) {
    result.answer = "I could not find the answer in the context.";
    return result;
  }
  result.found = true;
  result.answer = found->answer;
  result.depth = user_message.empty() ? 0 : static_cast<double>(found->offset) / static_cast<double>(q);
  double p = 0;
  for (const DegradeRule& rule : options.degrade) {
    bool all = true;
    for (const DegradeCondition& c : rule.conditions) all = all && Holds(c, result.depth, prompt_tokens);
    if (all) p = std::max(p, rule.p);
  }
  if (p > 0 && Uniform(options.seed, question, prompt_tokens) < p) {
    result.degraded = true;
    // Long-context failures mostly answer with a neighbour: for a memo, the one before or after.
    result.answer = Corrupt(found->answer);
    for (size_t i = 0; i < memos.size(); ++i) {
      if (memos[i].offset != found->offset) continue;
      const size_t neighbour = i + 1 < memos.size() ? i + 1 : i > 0 ? i - 1 : i;
      if (memos[neighbour].answer != found->answer) result.answer = memos[neighbour].answer;
    }
  }
  return result;
}

std::string AnswerRetrieve(const std::string& request_json, int64_t prompt_tokens,
                           const RetrieveOptions& options) {
  nlohmann::json request = nlohmann::json::parse(request_json, nullptr, false);
  if (request.is_discarded() || !request.contains("messages") || !request["messages"].is_array()) {
    return "I found no messages.";
  }
  const nlohmann::json& messages = request["messages"];
  for (size_t i = messages.size(); i-- > 0;) {
    const nlohmann::json& m = messages[i];
    if (m.is_object() && m.value("role", "") == "user" && m.contains("content") && m["content"].is_string()) {
      return AnswerProbe(m["content"].get<std::string>(), prompt_tokens, options).answer;
    }
  }
  return "I found no user message.";
}

}  // namespace strata::sim
