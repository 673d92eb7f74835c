"""docs/sidecar.md is true: its configuration file starts a sidecar, its Python blocks run in
order against it, its flags exist, and the error line it shows is the one printed."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from sidecar_testing import REPO, SIDECAR, STUBS, write_config

DOC = (REPO / "docs" / "sidecar.md").read_text()

TRAJECTORY = [
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "read_file", "arguments": "{\"path\": \"README.md\"}"}}]},
    {"role": "assistant", "content": "The README says hello."},
]


def blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", DOC, re.S)


def test_config_and_python_blocks_run(tmp_path, start_sim, start_sidecar):
    sim = start_sim(TRAJECTORY)
    config_text, _pools_text = blocks("json")
    config = write_config(tmp_path, json.loads(config_text), "doc-config.json")
    sidecar = start_sidecar(["--config", str(config), "--upstream", sim.base_url],
                            env={"UPSTREAM_API_KEY": "not-a-real-key"})
    program = tmp_path / "doc_blocks.py"
    python = blocks("python")
    assert len(python) >= 4
    program.write_text("\n".join(python))
    out = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(STUBS), "STRATA_SIDECAR_TARGET": sidecar.target,
             "STRATA_SIDECAR_TOKEN": "search-team-token", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "docs-agent 131072" in text
    assert "tool_calls ['read_file']" in text
    assert "The README says hello." in text
    assert 'StatusCode.NOT_FOUND no agent "no-such-agent"' in text
    # The second request was predicted to reuse the first one's prefix.
    built = [line for line in text.splitlines() if re.fullmatch(r"\d+ \d+", line)]
    assert built and int(built[0].split()[1]) > 0


def test_pools_block_starts(tmp_path, start_sidecar):
    # The "Length pools" example: accepted, and the sidecar runs without --upstream.
    _, pools_text = blocks("json")
    config = json.loads(pools_text)
    config["store"] = str(tmp_path / "pools.db")
    sidecar = start_sidecar(["--config", str(write_config(tmp_path, config, "pools.json"))])
    assert "length pools short (32768 tokens), long (1048576 tokens)" in sidecar.output()
    assert "--upstream is not needed" in sidecar.output()


def test_flags_in_the_table_exist():
    help_text = subprocess.run([str(SIDECAR), "--help"], capture_output=True, text=True,
                               timeout=30).stdout
    flags = set(re.findall(r"`(--[a-z-]+)", DOC))
    assert len(flags) >= 14
    for flag in flags:
        assert flag in help_text, flag


def test_the_shown_error_line(tmp_path):
    shown = next(line for line in DOC.splitlines()
                 if line.startswith("strata-sidecar: sidecar.json: "))
    good = {"name": "a", "token_sha256": ["a" * 64]}
    bad = {"name": "b", "token_sha256": ["b" * 64], "limits": {"max_agents": "ten"}}
    write_config(tmp_path, {"tenants": [good, bad]}, "sidecar.json")
    result = subprocess.run([str(SIDECAR), "--config", "sidecar.json"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert result.stderr.strip() == shown
