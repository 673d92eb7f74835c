"""Every ```python block of docs/python.md runs, in order, as one program against strata-sim
started the way the page says (the example's scripted replies, the GLM-5 template)."""

import json
import re
import subprocess
import sys

from conftest import REPO


def python_blocks():
    text = (REPO / "docs" / "python.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_docs_python_blocks_run(start_sim, tmp_path, subprocess_env):
    blocks = python_blocks()
    assert len(blocks) >= 8
    trajectory = REPO / "examples" / "python" / "tool_agent_trajectory.jsonl"
    sim = start_sim([json.loads(line) for line in trajectory.read_text().splitlines()],
                    "--chat-template", "glm5")
    program = tmp_path / "docs_python.py"
    program.write_text("\n".join(blocks))
    env = dict(subprocess_env, STRATA_ENDPOINT=sim.base_url)
    out = subprocess.run([sys.executable, str(program)], cwd=REPO / "examples" / "python", env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "1 answer" in out.stdout
    assert "It runs a strata agent" in out.stdout
    # The lower-level block's loop (Context + Client) reaches the same answer.
    assert out.stdout.count("It runs a strata agent") >= 2
    assert "{'role': 'user', 'content': 'What does tool_agent.py do?'}" in out.stdout
    assert "INVALID_ARGUMENT budget.window: expected an integer" in out.stdout
