"""examples/python/sidecar_client.py runs a tool-using agent through strata-sidecar."""

from __future__ import annotations

import json
import subprocess

from sidecar_testing import REPO, STUBS, pb, sha256_hex, write_config

TRAJECTORY = [
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "read_file", "arguments": "{\"path\": \"notes.txt\"}"}}]},
    {"role": "assistant", "content": "The notes say the build is green."},
]


def test_python_client_example(tmp_path, start_sim, start_sidecar):
    sim = start_sim(TRAJECTORY)
    token = "example-token-W4"
    config = write_config(tmp_path, {
        "upstream": sim.base_url,
        "tenants": [{"name": "example", "token_sha256": [sha256_hex(token)]}]})
    sidecar = start_sidecar(["--config", str(config)])
    (tmp_path / "notes.txt").write_text("build: green\n")
    result = subprocess.run(
        ["/usr/bin/python3", str(REPO / "examples" / "python" / "sidecar_client.py"),
         "--target", sidecar.target, "--root", str(tmp_path), "--stubs", str(STUBS),
         "What do the notes say?"],
        capture_output=True, text=True, timeout=120,
        env={"STRATA_SIDECAR_TOKEN": token, "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert '[tool read_file({"path": "notes.txt"}) -> 13 bytes]' in out
    assert "The notes say the build is green." in out
    assert out.count("[request ") == 2 and "finish stop" in out
    # The sidecar kept the context: the tool result is in the agent's history.
    stub = sidecar.stub(token)
    messages = json.loads(
        stub.Build(pb.BuildRequest(agent_id="sidecar-example")).body)["messages"]
    assert {"role": "tool", "tool_call_id": "call_1", "content": "build: green\n"} in messages
    assert stub.Stats(pb.StatsRequest(agent_id="sidecar-example")).requests == 2
