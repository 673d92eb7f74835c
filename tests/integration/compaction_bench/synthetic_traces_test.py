#!/usr/bin/env python3
"""bench/synthetic_traces.py against its consumer, bench_compaction (see CMakeLists.txt)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# Median tool-output length (characters) each shape promises in the generator's documentation.
MEDIAN_OBSERVATION = {"customer-service": (200, 3000), "short-observations": (20, 300),
                      "few-long-outputs": (20, 300)}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read_tree(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                out[os.path.relpath(os.path.join(d, f), root)] = fh.read()
    return out


def check_pairing(name, messages):
    open_calls = set()
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            if open_calls:
                fail("%s: message %d is an assistant message while calls %s are unanswered"
                     % (name, i, sorted(open_calls)))
            open_calls = {c["id"] for c in m.get("tool_calls", [])}
            for c in m.get("tool_calls", []):
                json.loads(c["function"]["arguments"])
        elif m["role"] == "tool":
            if m["tool_call_id"] not in open_calls:
                fail("%s: tool message %d answers %r, which no open call has"
                     % (name, i, m["tool_call_id"]))
            open_calls.discard(m["tool_call_id"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--generator", required=True)
    p.add_argument("--bench", required=True)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        one, two = os.path.join(tmp, "one"), os.path.join(tmp, "two")
        for out in (one, two):
            subprocess.run([sys.executable, a.generator, "--out", out, "--per-shape", "3"],
                           check=True, capture_output=True)
        if read_tree(one) != read_tree(two):
            fail("two runs with the same seed wrote different bytes")
        manifest = [json.loads(l) for l in open(os.path.join(one, "manifest.jsonl"))]
        if sorted({m["source"] for m in manifest}) != sorted(MEDIAN_OBSERVATION):
            fail("manifest sources %s" % sorted({m["source"] for m in manifest}))
        for shape, (lo, hi) in MEDIAN_OBSERVATION.items():
            lengths = []
            for entry in (m for m in manifest if m["source"] == shape):
                messages = [json.loads(l) for l in open(os.path.join(one, entry["file"]))]
                if len(messages) != entry["n_messages"]:
                    fail("%s: manifest says %d messages, file has %d"
                         % (entry["file"], entry["n_messages"], len(messages)))
                check_pairing(entry["file"], messages)
                lengths += [len(m["content"]) for m in messages if m["role"] == "tool"]
            median = statistics.median(lengths)
            if not lo <= median <= hi:
                fail("%s: median observation %d characters, documented %d-%d" % (shape, median, lo, hi))
            if shape == "few-long-outputs" and max(lengths) < 8000:
                fail("few-long-outputs: no observation of 8 KB or more (longest %d)" % max(lengths))
        # The consumer: every shape replays under a budget with strata and the cheapest baselines.
        run = subprocess.run([a.bench, "--tokenizer", "estimate", "--traces", one, "--budgets", "6000",
                              "--policies", "strata,clear-tool-uses,observation-masking",
                              "--threads", "1"], capture_output=True, text=True)
        if run.returncode != 0:
            fail("bench_compaction exited %d: %s" % (run.returncode, run.stderr[-2000:]))
        rows = [l for l in run.stdout.splitlines() if l.startswith("| strata")]
        if not rows:
            fail("bench_compaction printed no strata row:\n" + run.stdout[-2000:])
        cells = [c.strip() for c in rows[0].strip("|").split("|")]
        requests, violations, pairing = int(cells[1]), int(cells[2]), int(cells[3])
        expected = sum(1 for e in manifest for l in open(os.path.join(one, e["file"]))
                       if json.loads(l)["role"] == "assistant")
        if requests != expected:
            fail("bench_compaction replayed %d requests, the traces have %d assistant messages"
                 % (requests, expected))
        if violations or pairing:
            fail("strata: %d budget violations, %d pairing errors" % (violations, pairing))
    print("ok")


if __name__ == "__main__":
    main()
