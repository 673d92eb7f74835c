"""The lower level from Python: Budget, Context, HttpTransport / GrpcTransport and Client against
strata-sim, records, and their errors."""

import json
import threading

import pytest

import strata
from test_threads import TEXT, long_switch_interval, runs_with_gil_released  # noqa: F401

TOOL = {"type": "function", "function": {"name": "read_file", "description": "Reads a file",
                                         "parameters": {"type": "object", "properties": {}}}}


def test_budget_figures_come_from_the_cpp_budget():
    budget = strata.Budget(window=8192, reserve_output=1024, trigger=0.5, target=2000)
    # Unset reserves are scaled to the window (window / 16); usable = window - reserves.
    assert (budget.reserve_reasoning, budget.reserve_headroom) == (512, 512)
    assert budget.usable_input_tokens == 8192 - 1024 - 512 - 512
    assert budget.trigger_tokens == budget.usable_input_tokens // 2
    assert budget.target_tokens == 2000
    assert budget.config()["target"] == {"tokens": 2000}
    assert budget.to_dict()["trigger_tokens"] == budget.trigger_tokens
    assert strata.resolve_budget(budget.config())["usable_input_tokens"] == 6144


def test_budget_errors_carry_the_cpp_message():
    with pytest.raises(strata.InvalidArgument) as info:
        strata.Budget(window=4096, trigger=0.5, target=0.9)
    assert "target" in info.value.message and "trigger" in info.value.message
    with pytest.raises(strata.InvalidArgument):
        strata.Budget(window=1000, reserve_output=2000)
    with pytest.raises(TypeError):
        strata.Budget(trigger="most")  # type: ignore[arg-type]


def test_context_renders_layers_byte_stably():
    ctx = strata.Context({"identity": {"id": "ctx-1"}, "tokenizer": "estimate:4"})
    ctx.set_system_prompt("You are terse.")
    ctx.set_tools([TOOL])
    doc_id = ctx.put_document("guide", "How the repository is laid out.", version="v1")
    ctx.append_user("What is in the guide?")
    ctx.set_volatile("time", "12:00")
    built = ctx.build(extra_fields={"max_completion_tokens": 64})
    request = built.request
    assert request["tools"][0]["function"]["name"] == "read_file"
    assert request["max_completion_tokens"] == 64
    messages = built.messages
    assert messages[0]["role"] == "system" and "You are terse." in messages[0]["content"]
    assert "How the repository is laid out." in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": "What is in the guide?"}
    assert messages[-1] == {"role": "user", "content": "time: 12:00"}
    assert built.layers["docs"]["segments"] == 1 and built.layers["history"]["segments"] == 1
    assert 0 < built.stable_prefix_bytes < built.history_end_bytes < len(built.body.encode())
    # Appending keeps every byte up to the end of the history.
    ctx.append_assistant("Layout notes.")
    again = ctx.build(extra_fields={"max_completion_tokens": 64})
    assert again.body.encode()[:built.history_end_bytes] == built.body.encode()[:built.history_end_bytes]
    assert again.stable_prefix_hash == built.stable_prefix_hash
    assert [s["id"] for s in ctx.segments() if s["layer"] == "docs"] == [doc_id]
    assert ctx.stats()["segments"] == len([s for s in ctx.segments() if s["layer"] != "volatile"])


def test_context_tool_calls_and_results_round_trip_as_openai_dicts():
    ctx = strata.Context({"identity": {"id": "ctx-2"}})
    ctx.append({"role": "user", "content": "read it"})
    call = {"id": "call_1", "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}
    ctx.append({"role": "assistant", "content": "", "tool_calls": [call]})
    assert ctx.open_tool_calls() == ["call_1"]
    with pytest.raises(strata.FailedPrecondition):
        ctx.build()  # a tool call is unanswered
    with pytest.raises(strata.InvalidArgument) as info:
        ctx.append_tool_result("call_9", "x")
    assert "call_1" in info.value.message  # the C++ message lists the open calls
    ctx.append({"role": "tool", "tool_call_id": "call_1", "content": "file contents"})
    messages = ctx.messages()
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == '{"path": "a.txt"}'
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "file contents"}
    with pytest.raises(strata.InvalidArgument):
        ctx.append_assistant("x", tool_calls=[{"id": "c", "function": {"arguments": "{}"}}])
    with pytest.raises(ValueError):
        ctx.append({"role": "system", "content": "no"})


def test_context_built_and_budgeted_from_python_compacts_within_its_budget():
    budget = strata.Budget(window=4096, reserve_output=256, reserve_reasoning=0,
                           reserve_headroom=256, trigger=0.8, target=0.5)
    ctx = strata.Context({"identity": {"id": "ctx-3"}, "tokenizer": "estimate:4",
                          "chat_template": "", "budget": budget,
                          "policy": {"name": "sliding"}})
    assert ctx.config["budget"]["window"] == 4096
    ctx.set_system_prompt("You summarize logs.")
    for i in range(40):
        ctx.append_user(f"log chunk {i}: " + "line of output " * 20)
        ctx.append_assistant(f"noted {i}")
    assert ctx.input_tokens() > budget.trigger_tokens
    with pytest.raises(strata.ResourceExhausted):
        ctx.preview()  # over the limit, and preview never compacts
    ctx.append_user("What did the last chunk say?")
    predicted = ctx.preview_build()  # the compaction build() applies, on a copy
    assert predicted.compaction is not None
    assert ctx.compactions() == []
    built = ctx.build()
    assert built.body == predicted.body
    assert built.compaction == predicted.compaction
    assert built.compaction is not None
    assert built.compaction.tokens_after < built.compaction.tokens_before
    assert built.input_tokens == built.compaction.tokens_after <= built.limit_tokens
    assert built.limit_tokens == budget.usable_input_tokens
    assert ctx.compactions()[-1] == built.compaction
    assert built.messages[-1] == {"role": "user", "content": "What did the last chunk say?"}


def test_context_hygiene_truncates_and_recall_returns_the_original():
    ctx = strata.Context({"identity": {"id": "ctx-4"}, "tokenizer": "estimate:4",
                          "hygiene": {"max_segment_tokens": 64}})
    ctx.append_user("cat the log")
    ctx.append_assistant(tool_calls=[{"id": "c1", "type": "function",
                                      "function": {"name": "bash", "arguments": "{}"}}])
    original = "".join(f"line {i} of a long log\n" for i in range(200))
    seg = ctx.append_tool_result("c1", original)
    segment = next(s for s in ctx.segments() if s["id"] == seg)
    assert segment["hygiene"] != "none" and segment["recall_id"]
    assert len(segment["content"]) < len(original)
    assert ctx.recall(segment["recall_id"]) == original
    with pytest.raises(strata.NotFound):
        ctx.recall("r-unknown")


def test_context_config_errors():
    with pytest.raises(strata.InvalidArgument) as info:
        strata.Context({"identity": {"id": "x"}, "endpoint": {"base_url": "http://x"}})
    assert "endpoint" in info.value.message
    with pytest.raises(strata.InvalidArgument) as info:
        strata.Context({"identity": {"id": "x"}, "budget": {"window": "big"}})
    assert "budget.window" in info.value.message
    with pytest.raises(strata.InvalidArgument):
        strata.Context({"identity": {"id": ""}})
    with pytest.raises(strata.InvalidArgument):
        strata.Context({"identity": {"id": "x"}}).put_document("d", "c", layer="history")


def complete_through(transport, sim_answer="strata answer"):
    client = strata.Client(transport, backend="vllm", tokenizer="estimate")
    ctx = strata.Context({"identity": {"id": "client-agent"}})
    ctx.set_system_prompt("Be brief.")
    ctx.append_user("question")
    done = client.complete(ctx)
    assert isinstance(done, strata.Completion)
    assert done.response.content == sim_answer
    assert done.response.finish_reason == "stop"
    assert ctx.messages()[-1] == {"role": "assistant", "content": sim_answer}
    assert done.assistant_segment_id == ctx.segments()[-1]["id"]
    sent = json.loads(done.body)
    assert sent["messages"][:2] == ctx.messages()[:2]
    assert sent["cache_salt"] == client.cache_salt_for(ctx)  # the vLLM profile's fields
    records = client.records()
    assert len(records) == 1 and records[0] == done.record
    assert done.record.agent_id == "client-agent" and done.record.code == "OK"
    assert done.record.input_tokens > 0
    assert done.to_dict()["record"]["endpoint"] == transport.endpoint
    return client, ctx


def test_client_completes_against_strata_sim_over_http(start_sim):
    sim = start_sim([{"role": "assistant", "content": "strata answer"}])
    transport = strata.HttpTransport(sim.base_url, max_attempts=1)
    assert transport.name == "http" and transport.endpoint == sim.base_url
    transport.health_check(5000)
    complete_through(transport)
    with pytest.raises(strata.Unimplemented):
        transport.abort("req-1")  # HTTP has no abort: a CancellationToken cancels the call


def test_client_completes_against_strata_sim_over_grpc(start_sim):
    sim = start_sim([{"role": "assistant", "content": "strata answer"}], grpc=True)
    transport = strata.GrpcTransport(sim.grpc_target, max_attempts=1)
    assert transport.name == "grpc" and transport.endpoint == sim.grpc_target
    transport.health_check(5000)
    client, ctx = complete_through(transport)
    # The server's gRPC answer reports no HTTP status; the record says so.
    assert client.records()[0].http_status == 0


def test_transport_send_streams_deltas(start_sim):
    sim = start_sim([{"role": "assistant", "content": "streamed words arrive in pieces"}],
                    "--chunk-bytes", "5")
    transport = strata.HttpTransport(sim.base_url)
    deltas = []
    response = transport.send({"model": "m", "stream": True,
                               "messages": [{"role": "user", "content": "hi"}]},
                              on_delta=deltas.append)
    assert response.streamed and response.content == "streamed words arrive in pieces"
    assert len(deltas) > 1 and "".join(d.text for d in deltas) == response.content


def test_client_failure_raises_with_the_record_and_appends_nothing(start_sim):
    sim = start_sim([{"role": "assistant", "content": "never"}])
    client = strata.Client(strata.HttpTransport(sim.base_url, max_attempts=1))
    ctx = strata.Context({"identity": {"id": "failing"}})
    ctx.append_user("question")
    before = ctx.messages()
    with pytest.raises(strata.Unavailable) as info:
        client.complete(ctx, headers={"X-Strata-Sim-Fault": "503"})
    assert info.value.record is not None and info.value.record.code == "UNAVAILABLE"
    assert info.value.record.http_status == 503
    assert ctx.messages() == before
    assert [r.code for r in client.records()] == ["UNAVAILABLE"]


def test_transport_options_are_checked():
    with pytest.raises(strata.InvalidArgument) as info:
        strata.HttpTransport("ftp://example")
    assert "ftp://example" in info.value.message
    with pytest.raises(strata.InvalidArgument):
        strata.GrpcTransport("http://127.0.0.1:1")  # a target has no scheme
    with pytest.raises(strata.InvalidArgument) as info:
        strata.HttpTransport("http://127.0.0.1:1", connect_timeout_ms=-5)
    assert "connect_timeout_ms" in info.value.message
    with pytest.raises(strata.InvalidArgument):
        strata.Client(strata.HttpTransport("http://127.0.0.1:1"), backend="tgi")
    with pytest.raises(TypeError):
        strata.Client("http://127.0.0.1:1")  # type: ignore[arg-type]


def test_context_build_and_client_complete_release_the_gil(long_switch_interval, start_sim):  # noqa: F811
    ctx = strata.Context({"identity": {"id": "gil"}, "tokenizer": "estimate"})
    for i in range(30):
        ctx.append_user(f"{i} " + TEXT[:20000])
        ctx.append_assistant("ok")
    ctx.append_user("last")
    assert runs_with_gil_released(lambda: ctx.build())
    sim = start_sim([{"role": "assistant", "content": "answer"}])
    client = strata.Client(strata.HttpTransport(sim.base_url))

    def complete_then_reset():
        client.complete(ctx)
        ctx.append_user("again")
        return True

    assert runs_with_gil_released(complete_then_reset)


def test_contexts_complete_in_parallel_through_one_client(start_sim):
    sim = start_sim([{"role": "assistant", "content": "parallel"}])
    client = strata.Client(strata.HttpTransport(sim.base_url))
    contexts = [strata.Context({"identity": {"id": f"c{i}"}}) for i in range(4)]
    errors = []

    def work(ctx):
        try:
            ctx.append_user("question")
            client.complete(ctx)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(c,)) for c in contexts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(c.messages()[-1]["content"] == "parallel" for c in contexts)
    assert sorted(r.agent_id for r in client.records()) == ["c0", "c1", "c2", "c3"]


def test_a_cancellation_token_stops_client_complete_and_transport_send(start_sim):
    sim = start_sim([{"role": "assistant", "content": "late"}])
    transport = strata.HttpTransport(sim.base_url, max_attempts=1)
    client = strata.Client(transport, stream=False)
    ctx = strata.Context({"identity": {"id": "cancelled"}})
    ctx.append_user("question")
    before = ctx.messages()
    slow = {"x-strata-sim-fault": "slow-first-byte,delay_ms=600000"}
    for call in (lambda token: client.complete(ctx, cancel=token, headers=slow),
                 lambda token: transport.send({"model": "m", "messages": before}, cancel=token,
                                              headers=slow)):
        token = strata.CancellationToken()
        outcome = []

        def work():
            try:
                call(token)
            except BaseException as e:  # checked below
                outcome.append(e)

        thread = threading.Thread(target=work)
        thread.start()
        thread.join(timeout=0.5)
        assert thread.is_alive()  # blocked on the simulator's 10-minute first byte
        token.cancel()
        thread.join(timeout=120)
        assert not thread.is_alive() and isinstance(outcome[0], strata.Cancelled), outcome
    assert ctx.messages() == before
    assert [r.code for r in client.records()] == ["CANCELLED"]
