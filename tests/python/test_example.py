"""examples/python/tool_agent.py runs against strata-sim with its scripted replies, then reopens the
agent from its store in a second run."""

import subprocess
import sys

from conftest import REPO

EXAMPLE = REPO / "examples" / "python"


def test_the_tool_agent_example_runs_and_reopens(start_sim, tmp_path, subprocess_env):
    lines = (EXAMPLE / "tool_agent_trajectory.jsonl").read_text().splitlines()
    import json
    sim = start_sim([json.loads(line) for line in lines], "--chat-template", "glm5")
    args = [sys.executable, str(EXAMPLE / "tool_agent.py"), "--endpoint", sim.base_url,
            "--store", str(tmp_path / "agents.db")]
    first = subprocess.run(args, env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "answer after 1 tool call(s): It runs a strata agent" in first.stdout
    second = subprocess.run(args, env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "reopened python-example with 5 messages" in second.stdout
    assert "Same answer, from the reopened agent." in second.stdout
