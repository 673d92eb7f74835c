"""examples/python/tool_agent.py runs against strata-sim with its scripted replies, then reopens the
agent from its store in a second run."""

import json
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


def test_the_growth_curves_example_writes_the_stored_curve_as_csv(start_sim, tmp_path,
                                                                  subprocess_env):
    import csv
    import strata
    sim = start_sim([{"role": "assistant", "content": f"answer {i}"} for i in range(3)])
    db = tmp_path / "agents.db"
    agent = strata.Agent.create({"identity": {"id": "curve"}, "endpoint": {"base_url": sim.base_url},
                                 "store_path": str(db)})
    turns = [agent.run(f"question {i}").turns[0] for i in range(3)]
    out = tmp_path / "growth.csv"
    run = subprocess.run([sys.executable, str(EXAMPLE / "growth_curves.py"), str(db), "curve",
                          "--csv", str(out)], env=subprocess_env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    rows = list(csv.DictReader(out.open()))
    assert [int(r["turn"]) for r in rows] == [t.growth.turn for t in turns]
    assert int(rows[-1]["history"]) == turns[-1].growth.layer_tokens["history"]
    assert int(rows[-1]["total"]) == turns[-1].growth.total_tokens
    assert int(rows[-1]["summary_input_tokens"]) == turns[-1].growth.summary_input_tokens == 0
    assert {"summary_cached_tokens", "summary_output_tokens"} <= set(rows[-1])
    missing = subprocess.run([sys.executable, str(EXAMPLE / "growth_curves.py"), str(db), "nobody"],
                             env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr


def test_the_trim_history_example_fits_the_budget(tmp_path, subprocess_env):
    import strata
    history = [{"role": "system", "content": "You are terse."}]
    for i in range(60):
        history.append({"role": "user", "content": f"question {i} " + "detail " * 40})
        history.append({"role": "assistant", "content": f"answer {i}"})
    path = tmp_path / "history.json"
    path.write_text(json.dumps(history))
    run = subprocess.run([sys.executable, str(EXAMPLE / "trim_history.py"), str(path),
                          "--max-tokens", "3000"], env=subprocess_env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    trimmed = json.loads(run.stdout)
    assert trimmed[0] == history[0] and len(trimmed) < len(history)
    assert trimmed == strata.trim_messages(history, 3000).messages
    assert "summarized" in run.stderr and "-> " in run.stderr
    bad = subprocess.run([sys.executable, str(EXAMPLE / "trim_history.py"), "-", "--max-tokens",
                          "10"], input='[{"role": "wizard"}]', env=subprocess_env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "INVALID_ARGUMENT" in bad.stderr


def test_the_client_loop_example_runs_over_http_and_grpc(start_sim, tmp_path, subprocess_env):
    lines = (EXAMPLE / "tool_agent_trajectory.jsonl").read_text().splitlines()
    for transport in ("http", "grpc"):
        sim = start_sim([json.loads(line) for line in lines], "--chat-template", "glm5",
                        grpc=(transport == "grpc"))
        where = ["--endpoint", sim.base_url] if transport == "http" else ["--grpc", sim.grpc_target]
        run = subprocess.run([sys.executable, str(EXAMPLE / "client_loop.py"), *where],
                             cwd=EXAMPLE, env=subprocess_env, capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 0, run.stderr
        requests = [line for line in run.stdout.splitlines() if line.startswith("request ")]
        assert len(requests) == 2 and all(line.endswith(f"over {transport}") for line in requests)
        assert "answer: It runs a strata agent" in run.stdout
