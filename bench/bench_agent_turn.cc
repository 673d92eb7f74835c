// Per-turn time of strata::Agent (AppendUser + Complete) against an OpenAI-compatible endpoint,
// the C++ side of bench/python-agent-turn (which runs bench/python_agent_turn.py, the same loop
// through the Python bindings, against the same strata-sim).
//
//   bench_agent_turn BASE_URL TRACE.jsonl [TURNS] [CONTEXT_BYTES]
//
// CONTEXT_BYTES > 0 first puts a document of that many bytes in the docs layer (the filler of
// bench/python_agent_turn.py, byte for byte) with a budget window far above it: a long context
// (4,194,304 bytes are about 1M tokens with the estimator) to which each turn adds only the
// trace's messages.
// The trace's system message becomes the system prompt; its user and tool messages are appended
// and each of its assistant messages is one Complete() (strata-sim replays them as the replies). A
// turn is timed from its first append to the end of Complete(). Prints one JSON line: {"impl":
// "C++", "turns": n, "median_ms": ..., "mean_ms": ..., "cpu_ms_per_turn": ...,
// "cpu_ms_per_later_turn": ...} (process CPU time: this process's share, the simulator's excluded;
// the second without the first request, which renders and counts the whole context).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/agent.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: bench_agent_turn BASE_URL TRACE.jsonl [TURNS] [CONTEXT_BYTES]\n";
    return 2;
  }
  const int max_turns = argc > 3 ? std::atoi(argv[3]) : 40;
  const long long context_bytes = argc > 4 ? std::atoll(argv[4]) : 0;
  std::ifstream in(argv[2]);
  if (!in) {
    std::cerr << "bench_agent_turn: cannot open " << argv[2] << "\n";
    return 2;
  }
  std::string system_prompt;
  std::vector<nlohmann::json> messages;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json m = nlohmann::json::parse(line);
    if (m.value("role", "") == "system") {
      if (system_prompt.empty()) system_prompt = m.value("content", "");
    } else {
      messages.push_back(std::move(m));
    }
  }
  strata::AgentConfig config;
  config.identity.id = "bench-agent";
  config.endpoint.base_url = argv[1];
  if (context_bytes > 0) config.budget.window = 4 * context_bytes;
  auto agent = strata::Agent::Create(config);
  if (!agent.ok()) {
    std::cerr << "bench_agent_turn: " << agent.status().ToString() << "\n";
    return 1;
  }
  if (strata::Status s = (*agent)->SetSystemPrompt(system_prompt); !s.ok()) {
    std::cerr << "bench_agent_turn: " << s.ToString() << "\n";
    return 1;
  }
  if (context_bytes > 0) {
    // The same filler as python_agent_turn.py: numbered lines of code.
    std::string filler;
    for (long long i = 0; static_cast<long long>(filler.size()) < context_bytes; ++i) {
      filler += "def function_" + std::to_string(i) + "(x):\n    return x + " + std::to_string(i) +
                "\n";
    }
    filler.resize(static_cast<size_t>(context_bytes));
    strata::Status put = (*agent)->PutDocument(strata::Layer::kDocs, {"context", filler, "v1", 0}).status();
    if (!put.ok()) {
      std::cerr << "bench_agent_turn: " << put.ToString() << "\n";
      return 1;
    }
  }
  std::vector<double> ms;
  const std::clock_t cpu_start = std::clock();
  std::clock_t cpu_after_first = cpu_start;  // the first request renders and counts everything
  auto start = std::chrono::steady_clock::now();
  bool turn_open = false;
  for (const nlohmann::json& m : messages) {
    if (static_cast<int>(ms.size()) >= max_turns) break;
    const std::string role = m.value("role", "");
    if (!turn_open) start = std::chrono::steady_clock::now();
    turn_open = true;
    strata::Status status;
    if (role == "user") {
      status = (*agent)->AppendUser(m.value("content", "")).status();
    } else if (role == "tool") {
      status = (*agent)
                   ->AppendToolResult({m.value("tool_call_id", ""), m.value("content", ""), false})
                   .status();
    } else if (role == "assistant") {
      status = (*agent)->Complete().status();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             start)
                       .count());
      if (ms.size() == 1) cpu_after_first = std::clock();
      turn_open = false;
    }
    if (!status.ok()) {
      std::cerr << "bench_agent_turn: turn " << ms.size() << ": " << status.ToString() << "\n";
      return 1;
    }
  }
  const std::clock_t cpu_end = std::clock();
  const double cpu_ms = 1000.0 * static_cast<double>(cpu_end - cpu_start) / CLOCKS_PER_SEC;
  const double later_cpu_ms =
      1000.0 * static_cast<double>(cpu_end - cpu_after_first) / CLOCKS_PER_SEC;
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  const double mean = ms.empty() ? 0 : std::accumulate(ms.begin(), ms.end(), 0.0) / ms.size();
  std::cout << nlohmann::json{{"impl", "C++"},
                              {"turns", ms.size()},
                              {"median_ms", median},
                              {"mean_ms", mean},
                              {"cpu_ms_per_turn", ms.empty() ? 0 : cpu_ms / ms.size()},
                              {"cpu_ms_per_later_turn",
                               ms.size() < 2 ? 0 : later_cpu_ms / (ms.size() - 1)}}
                   .dump()
            << std::endl;
  return 0;
}
