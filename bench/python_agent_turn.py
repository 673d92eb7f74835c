"""Per-turn time of strata.Agent (appends + complete) from Python: the loop of
bench/bench_agent_turn.cc through the bindings. Run by bench/python-agent-turn.

    python_agent_turn.py BUILD_DIR BASE_URL TRACE.jsonl [TURNS] [CONTEXT_BYTES]

CONTEXT_BYTES > 0: a document of that many bytes first (see bench_agent_turn.cc).
"""

import json
import pathlib
import statistics
import sys
import time

build, base_url, trace = sys.argv[1:4]
max_turns = int(sys.argv[4]) if len(sys.argv) > 4 else 40
context_bytes = int(sys.argv[5]) if len(sys.argv) > 5 else 0
sys.path.insert(0, str(pathlib.Path(build) / "python"))
import strata  # noqa: E402

messages = [json.loads(line) for line in open(trace) if line.strip()]
system_prompt = next((m["content"] for m in messages if m["role"] == "system"), "")
config = {"identity": {"id": "bench-agent"}, "endpoint": {"base_url": base_url}}
if context_bytes > 0:
    config["budget"] = {"window": 4 * context_bytes}
agent = strata.Agent.create(config)
agent.set_system_prompt(system_prompt)
if context_bytes > 0:
    parts, size, i = [], 0, 0
    while size < context_bytes:
        line = f"def function_{i}(x):\n    return x + {i}\n"
        parts.append(line)
        size += len(line)
        i += 1
    agent.put_document("context", "".join(parts)[:context_bytes], layer="docs", version="v1")
ms = []
cpu_start = time.process_time()
cpu_after_first = cpu_start  # the first request renders and counts everything
start = None
for m in messages:
    if len(ms) >= max_turns:
        break
    if m["role"] == "system":
        continue
    if start is None:
        start = time.perf_counter()
    if m["role"] == "user":
        agent.append_user(m["content"])
    elif m["role"] == "tool":
        agent.append_tool_result(m["tool_call_id"], m["content"])
    elif m["role"] == "assistant":
        agent.complete()
        ms.append((time.perf_counter() - start) * 1e3)
        if len(ms) == 1:
            cpu_after_first = time.process_time()
        start = None
cpu_end = time.process_time()
cpu_ms = (cpu_end - cpu_start) * 1e3
later_cpu_ms = (cpu_end - cpu_after_first) * 1e3
ordered = sorted(ms)
print(json.dumps({"impl": "Python", "turns": len(ms), "median_ms": ordered[len(ms) // 2],
                  "mean_ms": statistics.fmean(ms), "cpu_ms_per_turn": cpu_ms / len(ms),
                  "cpu_ms_per_later_turn": later_cpu_ms / (len(ms) - 1) if len(ms) > 1 else 0}))
