// Tool schemas as a coding agent declares them, for benchmarks: `count` OpenAI function tools of
// about 750 bytes each, as a JSON array.
#ifndef STRATA_BENCH_TOOL_SCHEMAS_H_
#define STRATA_BENCH_TOOL_SCHEMAS_H_

#include <string>

namespace strata::bench {

inline std::string ToolSchemas(int count = 32) {
  std::string tools = "[";
  for (int i = 0; i < count; ++i) {
    if (i > 0) tools += ",";
    const std::string name = "tool_" + std::to_string(i);
    tools += R"({"type":"function","function":{"name":")" + name + R"(","description":")" +
             std::string(400, 'd') +
             R"(","parameters":{"type":"object","properties":{"path":{"type":"string",)"
             R"("description":"the file"},"line":{"type":"integer","description":"1-based"},)"
             R"("text":{"type":"string","description":"what to write"}},"required":["path"]}}})";
  }
  return tools + "]";
}

}  // namespace strata::bench

#endif  // STRATA_BENCH_TOOL_SCHEMAS_H_
