"""A failed ``run``/``complete`` changes nothing: for each way it fails (unreachable endpoint, 4xx,
5xx after the retries, deadline, cancellation, an interrupt in a tool handler) the agent's request
and the stored agent are what they were, and a retry leaves one user message (strata-sim built
from this repository, on 127.0.0.1 port 0)."""

import json
import socket

import pytest

import strata

TOOL_CALL = json.dumps({"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1", "type": "function",
     "function": {"name": "read_file", "arguments": "{\"path\": \"a.txt\"}"}}]})
READ_FILE_SCHEMA = {"description": "Reads a file",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}


def dead_base_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def make_agent(base_url, db, agent_id="py-rollback", **endpoint):
    agent = strata.Agent.create({
        "identity": {"id": agent_id}, "tokenizer": "estimate", "store_path": str(db),
        "endpoint": {"base_url": base_url, "max_attempts": 2, **endpoint}})
    agent.set_system_prompt("You are a careful agent.")
    return agent


def users(agent, text):
    return sum(1 for m in agent.messages() if m["role"] == "user" and m["content"] == text)


def observed(agent, db):
    """The request the agent would send, and the same for the agent reopened from its store."""
    return agent.request(), strata.Agent.open(str(db), agent.id).request()


@pytest.mark.parametrize("fault,error", [
    ("400", strata.InvalidArgument),
    ("500", strata.Unavailable),  # every attempt
])
def test_two_failed_runs_then_a_good_one_leave_one_user_message(fault, error, start_sim, tmp_path):
    sim = start_sim()
    db = tmp_path / "a.db"
    agent = make_agent(sim.base_url, db)
    agent.run("first task")
    before = observed(agent, db)
    for _ in range(2):
        with pytest.raises(error):
            agent.run("hi", headers={"x-strata-sim-fault": fault})
        assert observed(agent, db) == before
    agent.run("hi")
    assert users(agent, "hi") == 1
    assert users(strata.Agent.open(str(db), agent.id), "hi") == 1


def test_an_unreachable_endpoint_changes_nothing(start_sim, tmp_path):
    db = tmp_path / "a.db"
    agent = make_agent(dead_base_url(), db, max_attempts=1)
    before = observed(agent, db)
    for _ in range(2):
        with pytest.raises(strata.Unavailable):
            agent.run("hi")
        assert observed(agent, db) == before
    del agent
    sim = start_sim()
    agent = strata.Agent.open(str(db), "py-rollback",
                              endpoint={"base_url": sim.base_url, "max_attempts": 1})
    agent.run("hi")
    assert users(agent, "hi") == 1


def test_a_deadline_and_a_cancellation_change_nothing(start_sim, tmp_path):
    sim = start_sim()
    db = tmp_path / "a.db"
    agent = make_agent(sim.base_url, db, deadline_ms=300)
    agent.run("first task")
    before = observed(agent, db)
    with pytest.raises(strata.DeadlineExceeded):
        agent.run("hi", headers={"x-strata-sim-fault": "slow-first-byte,delay_ms=1500"})
    assert observed(agent, db) == before
    token = strata.CancellationToken()
    token.cancel()
    with pytest.raises(strata.Cancelled):
        agent.run("hi", cancel=token)
    assert observed(agent, db) == before
    agent.run("hi")
    assert users(agent, "hi") == 1


def test_an_interrupt_in_a_tool_handler_undoes_the_run_and_its_tool_results(start_sim, tmp_path):
    sim = start_sim()
    db = tmp_path / "a.db"
    agent = make_agent(sim.base_url, db)
    agent.run("first task")
    interrupt = [True]

    @agent.tool("read_file", READ_FILE_SCHEMA)
    def read_file(path):
        if interrupt[0]:
            raise KeyboardInterrupt
        return "contents of a.txt"

    before = observed(agent, db)
    with pytest.raises(KeyboardInterrupt):
        agent.run("hi", headers={"x-strata-sim-reply": TOOL_CALL})
    assert observed(agent, db) == before
    assert not any(m["role"] == "tool" for m in agent.messages())
    interrupt[0] = False
    agent.run("hi", max_turns=1, headers={"x-strata-sim-reply": TOOL_CALL})
    assert users(agent, "hi") == 1


def test_a_failed_complete_changes_nothing(start_sim, tmp_path):
    sim = start_sim()
    db = tmp_path / "a.db"
    agent = make_agent(sim.base_url, db)
    agent.append_user("hi")
    before = observed(agent, db)
    with pytest.raises(strata.InvalidArgument):
        agent.complete(headers={"x-strata-sim-fault": "400"})
    assert observed(agent, db) == before
    agent.complete()
    assert users(agent, "hi") == 1
