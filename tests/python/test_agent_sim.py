"""strata.Agent against strata-sim (built from this repository, on 127.0.0.1 port 0): the loop with
a Python tool, streaming, recall, fork/join, and a restart in a second interpreter."""

import json
import re
import subprocess
import sys
import textwrap

import pytest

import strata

README = "strata keeps the prefix byte-stable. " * 300  # ~11 KB: truncated by hygiene below

SCRIPT = [
    {"role": "user", "content": "What does the README say?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "read_file", "arguments": "{\"path\": \"README.md\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "..."},
    {"role": "assistant", "content": "It says the prefix stays byte-stable — für alle Fälle ✓."},
    {"role": "user", "content": "And after the restart?"},
    {"role": "assistant", "content": "Still here after the restart."},
]

READ_FILE_SCHEMA = {
    "description": "Reads a file of the repository",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]},
}


def config(sim, db, agent_id="py-agent", **extra):
    c = {"identity": {"id": agent_id}, "endpoint": {"base_url": sim.base_url},
         "store_path": str(db), "hygiene": {"max_segment_tokens": 200}}
    c.update(extra)
    return c


def test_run_answers_a_tool_call_with_a_python_handler(start_sim, tmp_path):
    sim = start_sim(SCRIPT)
    agent = strata.Agent.create(config(sim, tmp_path / "a.db"))
    agent.set_system_prompt("You answer questions about the repository.")
    calls = []

    @agent.tool("read_file", READ_FILE_SCHEMA)
    def read_file(path):
        calls.append(path)
        return README

    result = agent.run("What does the README say?")
    assert calls == ["README.md"]
    assert result.stopped == "answer"
    assert result.answer == SCRIPT[3]["content"]
    assert (result.tool_calls, result.tool_errors) == (1, 0)
    assert len(result.turns) == 2
    first, second = result.turns
    assert first.response.tool_calls[0]["function"]["name"] == "read_file"
    assert first.response.message["tool_calls"][0]["id"] == "call_1"
    assert isinstance(second.record, strata.RequestRecord)
    assert second.record.agent_id == "py-agent" and second.record.input_tokens > 0
    assert second.response.finish_reason == "stop"
    body = json.loads(second.body)
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool"]
    assert second.growth.turn >= 1 and second.growth.layer_tokens["history"] > 0
    d = result.to_dict()
    assert d["turns"][1]["record"] == second.record.to_dict()
    assert json.loads(json.dumps(d)) == d  # plain JSON all the way down
    # The tool's output was truncated by hygiene; its original is recallable page by page.
    messages = agent.messages()
    tool_message = next(m for m in messages if m["role"] == "tool")
    assert len(tool_message["content"]) < len(README)
    recall_id = re.search(r"r-[0-9a-f]{16}", tool_message["content"]).group(0)
    page = agent.recall(recall_id, 0, 100)
    assert page.total_bytes == len(README) and page.offset == 0
    assert README.startswith(page.content) and page.remaining_bytes == len(README) - len(page.content)
    following = agent.recall(recall_id, len(page.content), 100)
    assert README[len(page.content):].startswith(following.content)
    with pytest.raises(strata.OutOfRange):
        agent.recall(recall_id, len(README) + 1)


def test_tool_exceptions_and_unknown_tools_become_error_results(start_sim, tmp_path):
    sim = start_sim(SCRIPT)
    agent = strata.Agent.create(config(sim, tmp_path / "a.db"))

    @agent.tool("read_file", READ_FILE_SCHEMA)
    def read_file(path):
        raise FileNotFoundError(f"no such file: {path}")

    result = agent.run("What does the README say?")
    assert (result.tool_calls, result.tool_errors) == (1, 1)
    tool_message = next(m for m in agent.messages() if m["role"] == "tool")
    assert "FileNotFoundError" in tool_message["content"]
    assert "no such file: README.md" in tool_message["content"]


def test_register_tool_refuses_bad_schemas_and_taken_names():
    agent = strata.Agent.create({"identity": {"id": "a"}})
    agent.register_tool("t", READ_FILE_SCHEMA, lambda path: path)
    with pytest.raises(strata.InvalidArgument):
        agent.register_tool("t", READ_FILE_SCHEMA, lambda path: path)
    with pytest.raises(strata.InvalidArgument):
        agent.register_tool("context_recall", READ_FILE_SCHEMA, lambda path: path)
    with pytest.raises(strata.InvalidArgument):
        agent.register_tool("u", "{not json", lambda: "")
    with pytest.raises(TypeError):
        agent.register_tool("v", READ_FILE_SCHEMA, "not callable")  # type: ignore[arg-type]
    agent.append_user("hi")
    tools = agent.request()["tools"]
    assert "t" in [t["function"]["name"] for t in tools]


def test_streamed_deltas_assemble_into_the_final_message(start_sim, tmp_path):
    # One byte per chunk: deltas end inside multi-byte UTF-8 characters.
    sim = start_sim(SCRIPT, "--chunk-bytes", "1")
    agent = strata.Agent.create(config(sim, tmp_path / "a.db"))
    agent.register_tool("read_file", READ_FILE_SCHEMA, lambda path: "short file")
    deltas = []
    result = agent.run("What does the README say?", on_delta=deltas.append)
    content = "".join(d.text for d in deltas if d.kind == "content")
    assert content == result.answer == SCRIPT[3]["content"]
    arguments = "".join(d.text for d in deltas if d.kind == "tool_call_arguments")
    assert arguments == result.turns[0].response.tool_calls[0]["function"]["arguments"]
    assert len(deltas) > 10


def test_stream_iterates_deltas_and_keeps_the_turn(start_sim, tmp_path):
    sim = start_sim([{"role": "assistant", "content": "Streaming answer ✓"}], "--chunk-bytes", "3")
    agent = strata.Agent.create(config(sim, tmp_path / "a.db"))
    agent.append_user("Say something")
    stream = agent.stream()
    texts = [d.text for d in stream]
    assert "".join(texts) == "Streaming answer ✓"
    assert stream.turn is not None and stream.turn.response.content == "Streaming answer ✓"


def test_an_exception_in_the_delta_callback_stops_the_call_and_propagates(start_sim, tmp_path):
    sim = start_sim([{"role": "assistant", "content": "x" * 200}], "--chunk-bytes", "1")
    agent = strata.Agent.create(config(sim, tmp_path / "a.db"))
    agent.append_user("Say something")
    before = agent.messages()

    def on_delta(delta):
        raise KeyError("stop here")

    # The simulator stalls the stream after a few chunks: the request is in flight when the
    # callback raises, and only the cancellation can end it.
    stall = {"x-strata-sim-fault": "stall,after=3,delay_ms=600000"}
    with pytest.raises(KeyError, match="stop here"):
        agent.complete(on_delta=on_delta, headers=stall)
    assert agent.messages() == before
    assert agent.complete().response.content == "x" * 200  # the agent is usable again


def test_restart_in_a_second_interpreter_restores_the_agent(start_sim, tmp_path, subprocess_env):
    sim = start_sim(SCRIPT)
    db = tmp_path / "agents.db"
    agent = strata.Agent.create(config(sim, db))
    agent.set_system_prompt("You answer questions about the repository.")
    agent.register_tool("read_file", READ_FILE_SCHEMA, lambda path: "short file")
    agent.run("What does the README say?")
    messages = agent.messages()
    prediction = agent.predict()
    del agent
    second = textwrap.dedent("""
        import json, sys, strata
        db, base_url = sys.argv[1], sys.argv[2]
        agent = strata.Agent.open(db, "py-agent", endpoint={"base_url": base_url})
        before = agent.messages()
        prediction = agent.predict().to_dict()
        result = agent.run("And after the restart?")
        print(json.dumps({"before": before, "prediction": prediction, "answer": result.answer,
                          "config": agent.config}))
    """)
    out = subprocess.run([sys.executable, "-c", second, str(db), sim.base_url], env=subprocess_env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["before"] == messages
    assert report["prediction"] == prediction.to_dict()
    assert report["answer"] == "Still here after the restart."
    assert report["config"]["hygiene"]["max_segment_tokens"] == 200
    reopened = strata.Agent.open(str(db), "py-agent")
    assert reopened.messages()[-1] == {"role": "assistant",
                                       "content": "Still here after the restart."}


def test_fork_and_join(start_sim, tmp_path):
    sim = start_sim([{"role": "assistant", "content": "The child found the answer: 42."}])
    parent = strata.Agent.create(config(sim, tmp_path / "a.db", agent_id="parent"))
    parent.set_system_prompt("You split big tasks.")
    parent.put_document("guide", "How to compute answers.", version="v1")
    child = parent.fork("Compute the answer.", id="parent.child")
    assert child.id == "parent.child"
    assert child.messages()[0] == parent.messages()[0]
    assert child.messages()[-1] == {"role": "user", "content": "Compute the answer."}
    assert child.run().answer == "The child found the answer: 42."
    parent.join(child)
    last = parent.messages()[-1]
    assert last["role"] == "user" and "The child found the answer: 42." in last["content"]
    with pytest.raises(TypeError):
        parent.join("child")  # type: ignore[arg-type]


def test_content_calls_predict_and_documents():
    agent = strata.Agent.create({"identity": {"id": "a"}, "recall": {"expose_tool": False}})
    agent.set_system_prompt(["First system prompt.", "Second."])
    doc_id = agent.put_document("api", "GET /v1/things", layer="index", version="1")
    assert doc_id
    agent.append_user("hi")
    agent.set_volatile("time", "12:00")
    messages = agent.messages()
    assert messages[0]["role"] == "system" and "First system prompt." in messages[0]["content"]
    assert any("GET /v1/things" in m["content"] for m in messages)
    assert "12:00" in messages[-1]["content"]
    p = agent.predict()
    assert p.input_tokens == agent.input_tokens() > 0
    assert p.predicted_cached_tokens == 0 and not p.compaction_due
    agent.remove_document("api", layer="index")
    assert not any("GET /v1/things" in m["content"] for m in agent.messages())
    assert agent.config["identity"]["id"] == "a"
    assert json.loads(agent.config_json()) == agent.config
    assert strata.normalize_config({"identity": {"id": "a"}})["budget"]["window"] == 1048576


def test_an_own_loop_with_complete_and_tool_results(start_sim, tmp_path):
    sim = start_sim(SCRIPT)
    agent = strata.Agent.create(config(sim, tmp_path / "a.db"))
    agent.append_user("What does the README say?")
    turn = agent.complete()
    call = turn.response.tool_calls[0]
    assert turn.response.finish_reason == "tool_calls" and call["id"] == "call_1"
    agent.append_tool_result(call["id"], "the README text")
    assert agent.messages()[-1] == {"role": "tool", "tool_call_id": "call_1",
                                    "content": "the README text"}
    assert agent.complete().response.content == SCRIPT[3]["content"]


def test_dispatch_tool_calls_answers_open_calls_with_the_handlers(start_sim, tmp_path):
    sim = start_sim(SCRIPT)
    agent = strata.Agent.create(config(sim, tmp_path / "a.db"))
    agent.register_tool("read_file", READ_FILE_SCHEMA,
                        lambda path: strata.ToolOutput(f"cannot read {path}", is_error=True))
    agent.append_user("What does the README say?")
    agent.complete()
    stats = agent.dispatch_tool_calls()
    assert (stats.tool_calls, stats.tool_errors) == (1, 1)
    assert agent.messages()[-1]["content"].startswith("cannot read README.md")


def test_records_copy_pickle_and_compare(start_sim, tmp_path):
    import copy
    import pickle
    sim = start_sim(SCRIPT)
    agent = strata.Agent.create(config(sim, tmp_path / "a.db"))
    agent.append_user("What does the README say?")
    turn = agent.complete()
    assert copy.deepcopy(turn) == turn
    assert pickle.loads(pickle.dumps(turn)) == turn
    with pytest.raises(AttributeError, match="no attribute .no_such_field"):
        turn.record.no_such_field
    with pytest.raises(AttributeError):
        turn.record.input_tokens = 5


def test_open_with_another_tokenizer_needs_retokenize(tmp_path):
    from conftest import SPM_MODEL
    db = str(tmp_path / "a.db")
    agent = strata.Agent.create({"identity": {"id": "tok"}, "store_path": db})
    agent.set_system_prompt("A system prompt to recount.")
    agent.append_user("hello")
    del agent
    spec = f"spm:{SPM_MODEL}"
    with pytest.raises(strata.FailedPrecondition) as info:
        strata.Agent.open(db, "tok", tokenizer=spec)
    assert "retokenize" in info.value.message
    reopened = strata.Agent.open(db, "tok", tokenizer=spec, retokenize=True)
    assert reopened.config["tokenizer"] == spec
    assert strata.Agent.open(db, "tok").config["tokenizer"] == spec  # stored with the agent


def test_the_interpreter_exits_cleanly_with_live_agents_holding_python_tools(subprocess_env):
    program = textwrap.dedent("""
        import strata
        agent = strata.Agent.create({"identity": {"id": "a"}})
        agent.register_tool("t", {"description": "d", "parameters": {"type": "object"}},
                            lambda: "x")
        child = agent.fork("task")
        cycle = {"agent": agent}
        cycle["self"] = cycle
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", program], env=subprocess_env,
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "ok"), out.stderr


def test_the_body_crosses_as_bytes_and_decodes_on_access(start_sim, tmp_path):
    import pickle
    sim = start_sim(SCRIPT)
    agent = strata.Agent.create(config(sim, tmp_path / "a.db"))
    agent.append_user("What does the README say?")
    turn = agent.complete()
    assert not isinstance(turn.raw_body, (str, bytes))  # the extension's buffer, not a copy
    view = memoryview(turn.raw_body)
    assert view.readonly and len(view) == len(turn.raw_body)
    assert json.loads(turn.body)["messages"][-1]["content"] == "What does the README say?"
    assert view.tobytes().decode() == turn.body
    assert pickle.loads(pickle.dumps(turn)).body == turn.body
    assert turn.to_dict()["body"] == turn.body and "raw_body" not in turn.to_dict()
