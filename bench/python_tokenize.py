"""strata.Tokenizer (Python) encoding and counting throughput on every message content of the
traces, next to the C++ figure of bench_tokenize and the Hugging Face reference tokenizer's
(bench/python_tokenize_hf.js) measured in the same run.

    bench/python-tokenize [BUILD_DIR] [TRACES_DIR]

Run through bench/python-tokenize, which builds nothing: BUILD_DIR needs bench_tokenize
(-DSTRATA_BUILD_BENCH=ON) and the Python extension (-DSTRATA_BUILD_PYTHON=ON).
"""

import json
import pathlib
import sys
import time

build, traces, tokenizer_file, cpp_json, hf_jsonl = sys.argv[1:6]
sys.path.insert(0, str(pathlib.Path(build) / "python"))
import strata  # noqa: E402

texts = []
for trace in sorted(p for d in pathlib.Path(traces).iterdir() if d.is_dir()
                    for p in d.glob("*.jsonl")):
    for line in trace.read_text().splitlines():
        content = json.loads(line).get("content") if line.strip() else None
        if isinstance(content, str):  # as scripts/tokenizer-corpus.js traceTexts reads them
            texts.append(content)
total_bytes = sum(len(t.encode()) for t in texts)
tok = strata.Tokenizer.from_spec(f"hf:{tokenizer_file}")


def measure(name, fn, passes=3):
    best_cpu = best_wall = float("inf")
    tokens = 0
    for _ in range(passes):
        c0, w0 = time.process_time(), time.perf_counter()
        tokens = fn()
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return {"impl": name, "cpu": total_bytes / best_cpu / 1e6, "wall": total_bytes / best_wall / 1e6,
            "tokens": tokens}


rows = []
cpp = [b for b in json.load(open(cpp_json))["benchmarks"] if b["name"].startswith("strata_bpe/qwen3")]
for b in cpp:
    bytes_per_pass = b["bytes_per_second"] * b["cpu_time"] / 1e3
    rows.append({"impl": "C++ Tokenizer::Encode (bench_tokenize strata_bpe/qwen3)",
                 "cpu": b["bytes_per_second"] / 1e6,
                 "wall": bytes_per_pass / (b["real_time"] / 1e3) / 1e6, "tokens": b.get("tokens")})
rows.append(measure("Python strata.Tokenizer.count, one call per text",
                    lambda: sum(tok.count(t) for t in texts)))
rows.append(measure("Python strata.Tokenizer.encode, one call per text (ids as a list)",
                    lambda: sum(len(tok.encode(t)) for t in texts)))
HF_NAMES = {
    "hf_tokenizers_rust_per_text": "Hugging Face tokenizers (Rust, Node binding), one call per text",
    "hf_tokenizers_rust_batch": "Hugging Face tokenizers (Rust, Node binding), one encodeBatch",
}
for line in open(hf_jsonl):
    r = json.loads(line)
    if r["bytes"] != total_bytes:
        sys.exit(f"python_tokenize.py: the Node side read {r['bytes']} bytes, this side {total_bytes}")
    rows.append({"impl": HF_NAMES[r["impl"]], "cpu": r["bytes"] / r["cpu_seconds"] / 1e6,
                 "wall": r["bytes"] / r["wall_seconds"] / 1e6, "tokens": r["tokens"]})
print(f"{len(texts)} texts, {total_bytes / 1e6:.2f} MB")
print("| implementation | MB/s (CPU time) | MB/s (wall) | tokens |")
print("|---|---|---|---|")
for r in rows:
    tokens = f"{int(r['tokens']):,}" if r["tokens"] is not None else "n/a"
    print(f"| {r['impl']} | {r['cpu']:.1f} | {r['wall']:.1f} | {tokens} |")
