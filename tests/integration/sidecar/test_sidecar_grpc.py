"""Every RPC of strata.v1.ContextService through a strata-sidecar process, with its errors and bad
input; strata-sim is the upstream."""

from __future__ import annotations

import json
import pathlib
import re

import grpc
import pytest
from google.protobuf import descriptor_pb2

from sidecar_testing import Background, complete, pb, rpc_error

C = grpc.StatusCode

READ_FILE = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the repository.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}

TRAJECTORY = [
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "read_file", "arguments": "{\"path\": \"README.md\"}"}}]},
    {"role": "assistant", "content": "The README says hello."},
    {"role": "assistant", "content": "A third answer."},
    {"role": "assistant", "content": "A fourth answer."},
]


@pytest.fixture
def sidecar(start_sim, start_sidecar):
    sim = start_sim(TRAJECTORY)
    return start_sidecar(["--upstream", sim.base_url, "--backend", "vllm"])


def create(stub, agent_id, **spec):
    return stub.CreateAgent(pb.CreateAgentRequest(agent_id=agent_id, spec=pb.AgentSpec(**spec)))


def test_create_open_list_delete(sidecar):
    stub = sidecar.stub()
    info = create(stub, "a1", system_prompts=["You are a test agent."], window=65536,
                  max_output_tokens=256, model="glm-5.3-flash")
    assert info.agent_id == "a1"
    config = json.loads(info.config_json)
    assert config["identity"]["id"] == "a1" and config["identity"]["tenant"] == "default"
    assert config["budget"]["window"] == 65536
    assert config["endpoint"]["max_output_tokens"] == 256
    assert info.segments >= 2  # the system prompt and the tools layer (context_recall)

    error = rpc_error(create, stub, "a1")
    assert error.code() == C.ALREADY_EXISTS and "a1" in error.details()

    for bad in ("a/b", "", "x" * 129, "sp ace"):
        error = rpc_error(create, stub, bad)
        assert error.code() == C.INVALID_ARGUMENT and "agent_id" in error.details()

    # From an AgentConfig document.
    info = stub.CreateAgent(pb.CreateAgentRequest(
        agent_id="a2", config_json=json.dumps({"policy": {"name": "sliding"},
                                               "budget": {"window": 32768}})))
    assert json.loads(info.config_json)["policy"]["name"] == "sliding"
    for document, needle in (
            ({"endpoint": {"base_url": "http://127.0.0.1:1/v1"}}, "endpoint.base_url"),
            ({"endpoint": {"api_key_env": "HOME"}}, "endpoint.api_key_env"),
            ({"store_path": "/tmp/other.db"}, "store_path"),
            ({"identity": {"id": "other"}}, "identity.id"),
            ({"budget": {"window": "big"}}, "budget.window"),
            ({"no_such_key": 1}, "no_such_key")):
        error = rpc_error(stub.CreateAgent, pb.CreateAgentRequest(
            agent_id="a3", config_json=json.dumps(document)))
        assert error.code() == C.INVALID_ARGUMENT, document
        assert needle in error.details(), (needle, error.details())
    error = rpc_error(stub.CreateAgent, pb.CreateAgentRequest(agent_id="a3", config_json="{"))
    assert error.code() == C.INVALID_ARGUMENT
    # A spec that does not make an agent leaves nothing behind.
    error = rpc_error(create, stub, "a3", tokenizer="no-such-tokenizer:x")
    assert error.code() != C.OK
    error = rpc_error(create, stub, "a3", window=-5)
    assert error.code() == C.INVALID_ARGUMENT and "spec.window" in error.details()

    listed = stub.ListAgents(pb.ListAgentsRequest())
    assert [a.agent_id for a in listed.agents] == ["a1", "a2"]

    opened = stub.OpenAgent(pb.OpenAgentRequest(agent_id="a1"))
    assert opened.agent_id == "a1" and json.loads(opened.config_json)["identity"]["id"] == "a1"
    error = rpc_error(stub.OpenAgent, pb.OpenAgentRequest(agent_id="nope"))
    assert error.code() == C.NOT_FOUND and error.details() == 'no agent "nope"'

    stub.DeleteAgent(pb.DeleteAgentRequest(agent_id="a2"))
    assert rpc_error(stub.OpenAgent, pb.OpenAgentRequest(agent_id="a2")).code() == C.NOT_FOUND
    assert rpc_error(stub.DeleteAgent, pb.DeleteAgentRequest(agent_id="a2")).code() == C.NOT_FOUND
    assert [a.agent_id for a in stub.ListAgents(pb.ListAgentsRequest()).agents] == ["a1"]
    # The id can be used again.
    create(stub, "a2")


def test_content_and_build(sidecar):
    stub = sidecar.stub()
    create(stub, "c1")
    error = rpc_error(stub.Build, pb.BuildRequest(agent_id="c1"))
    assert error.code() == C.FAILED_PRECONDITION  # nothing to send yet

    r = stub.SetSystemPrompt(pb.SetSystemPromptRequest(agent_id="c1",
                                                       prompts=["Prompt one.", "Prompt two."]))
    assert r.input_tokens > 0

    stub.SetTools(pb.SetToolsRequest(agent_id="c1", tools_json=json.dumps([READ_FILE])))
    for tools, needle in (("{", "not a JSON array"), ("[1]", "tools_json[0]"),
                          (json.dumps([READ_FILE, READ_FILE]), "a second tool"),
                          (json.dumps([{"type": "function", "function": {}}]), "name"),
                          (json.dumps([{"type": "function",
                                        "function": {"name": "context_recall"}}]),
                           "the agent's own tool")):
        error = rpc_error(stub.SetTools, pb.SetToolsRequest(agent_id="c1", tools_json=tools))
        assert error.code() == C.INVALID_ARGUMENT and needle in error.details(), error.details()

    doc = stub.PutDocument(pb.PutDocumentRequest(
        agent_id="c1", layer=pb.DOCUMENT_LAYER_INDEX, name="api", content="GET /v1/items",
        version="v1"))
    assert doc.segment_id
    again = stub.PutDocument(pb.PutDocumentRequest(
        agent_id="c1", layer=pb.DOCUMENT_LAYER_INDEX, name="api", content="GET /v2/items",
        version="v2"))
    assert again.segment_id == doc.segment_id  # a new version replaces the document in place
    stub.PutDocument(pb.PutDocumentRequest(agent_id="c1", layer=pb.DOCUMENT_LAYER_DOCS,
                                           name="guide", content="Be brief.", order=1))
    error = rpc_error(stub.PutDocument, pb.PutDocumentRequest(agent_id="c1", name="x",
                                                              content="y"))
    assert error.code() == C.INVALID_ARGUMENT and "DOCUMENT_LAYER_INDEX" in error.details()
    error = rpc_error(stub.PutDocument, pb.PutDocumentRequest(
        agent_id="c1", layer=pb.DOCUMENT_LAYER_DOCS, name="", content="y"))
    assert error.code() == C.INVALID_ARGUMENT and "name" in error.details()

    user = stub.AppendUser(pb.AppendUserRequest(agent_id="c1", content="Hello there."))
    assert user.segment_id and user.input_tokens > r.input_tokens

    built = stub.Build(pb.BuildRequest(agent_id="c1"))
    body = json.loads(built.body)
    names = [t["function"]["name"] for t in body["tools"]]
    assert names == ["context_recall", "read_file"]
    text = json.dumps(body["messages"])
    assert "Prompt one." in text and "Prompt two." in text
    assert "GET /v2/items" in text and "GET /v1/items" not in text and "Be brief." in text
    assert body["messages"][-1] == {"role": "user", "content": "Hello there."}
    assert built.input_tokens > 0 and not built.compaction_due
    assert [layer.layer for layer in built.layers] == \
        ["system", "tools", "index", "docs", "history", "volatile"]
    assert built.predicted_cached_tokens == 0  # nothing sent yet
    assert len(built.stable_prefix_hash) == 64

    stub.RemoveDocument(pb.RemoveDocumentRequest(agent_id="c1", layer=pb.DOCUMENT_LAYER_DOCS,
                                                 name="guide"))
    assert "Be brief." not in stub.Build(pb.BuildRequest(agent_id="c1")).body
    error = rpc_error(stub.RemoveDocument, pb.RemoveDocumentRequest(
        agent_id="c1", layer=pb.DOCUMENT_LAYER_DOCS, name="guide"))
    assert error.code() == C.NOT_FOUND

    # Replacing the tools with none keeps only the agent's own tool.
    stub.SetTools(pb.SetToolsRequest(agent_id="c1", tools_json="[]"))
    body = json.loads(stub.Build(pb.BuildRequest(agent_id="c1")).body)
    assert [t["function"]["name"] for t in body["tools"]] == ["context_recall"]

    # Assistant messages with tool calls, and their results.
    stub.AppendAssistant(pb.AppendAssistantRequest(
        agent_id="c1", content="", tool_calls=[pb.ToolCall(id="call_9", name="read_file",
                                                            arguments='{"path": "a.txt"}')]))
    error = rpc_error(stub.AppendUser, pb.AppendUserRequest(agent_id="c1", content="more"))
    assert error.code() == C.FAILED_PRECONDITION
    error = rpc_error(stub.AppendToolResult, pb.AppendToolResultRequest(
        agent_id="c1", tool_call_id="call_0", content="x"))
    assert error.code() == C.INVALID_ARGUMENT and "call_9" in error.details()
    error = rpc_error(stub.AppendToolResult, pb.AppendToolResultRequest(agent_id="c1",
                                                                        content="x"))
    assert error.code() == C.INVALID_ARGUMENT and "tool_call_id" in error.details()
    result = stub.AppendToolResult(pb.AppendToolResultRequest(
        agent_id="c1", tool_call_id="call_9", content="contents of a.txt"))
    assert result.segment_id
    error = rpc_error(stub.AppendAssistant, pb.AppendAssistantRequest(
        agent_id="c1", tool_calls=[pb.ToolCall(id="", name="read_file", arguments="{}")]))
    assert error.code() == C.INVALID_ARGUMENT

    # Pin.
    pinned = stub.Pin(pb.PinRequest(agent_id="c1", segment_id=user.segment_id, pinned=True))
    assert pinned.segment_id == user.segment_id
    assert rpc_error(stub.Pin, pb.PinRequest(agent_id="c1", segment_id="s999",
                                             pinned=True)).code() == C.NOT_FOUND
    assert rpc_error(stub.Pin, pb.PinRequest(agent_id="c1", segment_id="",
                                             pinned=True)).code() == C.INVALID_ARGUMENT

    # Every RPC refuses an unknown agent the same way.
    for call, request in ((stub.SetSystemPrompt, pb.SetSystemPromptRequest(agent_id="zz")),
                          (stub.AppendUser, pb.AppendUserRequest(agent_id="zz", content="x")),
                          (stub.Build, pb.BuildRequest(agent_id="zz")),
                          (stub.Stats, pb.StatsRequest(agent_id="zz"))):
        error = rpc_error(call, request)
        assert (error.code(), error.details()) == (C.NOT_FOUND, 'no agent "zz"')


def test_complete_records_growth_stats(sidecar):
    stub = sidecar.stub()
    create(stub, "w1", system_prompts=["You read files."])
    stub.SetTools(pb.SetToolsRequest(agent_id="w1", tools_json=json.dumps([READ_FILE])))

    deltas, turn = complete(stub, "w1", "What does the README say?")
    assert turn.user_segment_id and turn.assistant_segment_id
    assert turn.finish_reason == "tool_calls"
    assert [(c.id, c.name) for c in turn.tool_calls] == [("call_1", "read_file")]
    assert json.loads(turn.tool_calls[0].arguments) == {"path": "README.md"}
    assert any(d.kind == pb.Delta.KIND_TOOL_CALL_ARGUMENTS for d in deltas)
    record = turn.record
    assert record.agent_id == "w1" and record.code == "OK" and record.input_tokens > 0
    assert record.http_status == 200 and record.finish_reason == "tool_calls"
    assert turn.growth.turn >= 1 and len(turn.growth.layers) == 6
    assert turn.growth.summary_input_tokens == 0  # no compaction: no summary request
    assert turn.growth.summary_cached_tokens == turn.growth.summary_output_tokens == 0

    # The call is open: a new request would be malformed.
    error = rpc_error(complete, stub, "w1")
    assert error.code() == C.FAILED_PRECONDITION

    stub.AppendToolResult(pb.AppendToolResultRequest(agent_id="w1", tool_call_id="call_1",
                                                     content="# README\nhello"))
    built = stub.Build(pb.BuildRequest(agent_id="w1"))
    assert built.predicted_cached_tokens > 0  # the first request's prefix is cached
    deltas, turn = complete(stub, "w1")
    assert turn.content == "The README says hello." and turn.finish_reason == "stop"
    assert "".join(d.text for d in deltas if d.kind == pb.Delta.KIND_CONTENT) == turn.content
    assert turn.record.cached_tokens_predicted > 0
    assert turn.record.HasField("cached_tokens_reported")
    assert not turn.HasField("prefix_break")

    _, turn3 = complete(stub, "w1", "And then?")
    assert turn3.content == "A third answer."

    # Four records: three answers and the refused request (records are written for failures too).
    page = stub.Records(pb.RecordsRequest(agent_id="w1", page_size=3))
    assert len(page.records) == 3 and page.next_page_token
    assert page.records[0].request_id == turn3.record.request_id  # newest first
    assert page.records[2].code == "FAILED_PRECONDITION" and page.records[2].error
    rest = stub.Records(pb.RecordsRequest(agent_id="w1", page_size=3,
                                          page_token=page.next_page_token))
    assert len(rest.records) == 1 and rest.next_page_token == ""
    assert rest.records[0].finish_reason == "tool_calls"
    assert len(stub.Records(pb.RecordsRequest(agent_id="w1")).records) == 4
    for request, needle in ((pb.RecordsRequest(agent_id="w1", page_size=1001), "page_size"),
                            (pb.RecordsRequest(agent_id="w1", page_size=-1), "page_size"),
                            (pb.RecordsRequest(agent_id="w1", page_token="abc"), "page_token")):
        error = rpc_error(stub.Records, request)
        assert error.code() == C.INVALID_ARGUMENT and needle in error.details()

    growth = stub.Growth(pb.GrowthRequest(agent_id="w1"))
    assert [p.turn for p in growth.points] == sorted(p.turn for p in growth.points)
    assert len(growth.points) == 3

    stats = stub.Stats(pb.StatsRequest(agent_id="w1"))
    assert stats.requests == 4 and stats.turns == 3 and stats.input_tokens > 0
    assert stats.segments >= 6 and len(stats.layers) == 6

    error = rpc_error(complete, stub, "nope", "hi")
    assert error.code() == C.NOT_FOUND


def test_complete_without_upstream(start_sidecar):
    sidecar = start_sidecar([])
    stub = sidecar.stub()
    create(stub, "n1", system_prompts=["You answer."])
    before = stub.Build(pb.BuildRequest(agent_id="n1")).body
    for _ in range(2):
        error = rpc_error(complete, stub, "n1", "hello")
        assert error.code() == C.FAILED_PRECONDITION and "no endpoint" in error.details()
        # A failed call changes nothing: the user message is not left behind, and the error says so.
        assert "nothing was appended" in error.details()
        assert stub.Build(pb.BuildRequest(agent_id="n1")).body == before


def test_a_failed_upstream_leaves_the_agent_unchanged(start_sim, start_sidecar):
    sim = start_sim(TRAJECTORY, ["--fault", "400"])  # every request is refused
    sidecar = start_sidecar(["--upstream", sim.base_url, "--backend", "vllm"])
    stub = sidecar.stub()
    create(stub, "f1", system_prompts=["You read files."])
    stub.AppendUser(pb.AppendUserRequest(agent_id="f1", content="An earlier question."))
    before = stub.Build(pb.BuildRequest(agent_id="f1")).body
    for _ in range(2):
        error = rpc_error(complete, stub, "f1", "hi")
        assert error.code() == C.INVALID_ARGUMENT
        assert stub.Build(pb.BuildRequest(agent_id="f1")).body == before
    messages = json.loads(stub.Build(pb.BuildRequest(agent_id="f1")).body)["messages"]
    assert not any(m["role"] == "user" and m["content"] == "hi" for m in messages)


def test_compact_and_recall(sidecar):
    stub = sidecar.stub()
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="r1", config_json=json.dumps(
        {"budget": {"window": 65536}, "policy": {"name": "last-n", "last_n": 1}})))
    stub.AppendUser(pb.AppendUserRequest(agent_id="r1", content="Show me the log."))
    stub.AppendAssistant(pb.AppendAssistantRequest(
        agent_id="r1", tool_calls=[pb.ToolCall(id="call_1", name="bash",
                                               arguments='{"cmd": "cat log"}')]))
    log = "".join(f"line {i}: the build step {i % 17} finished with value {i * 7919 % 10007}\n"
                  for i in range(6000))
    stub.AppendToolResult(pb.AppendToolResultRequest(agent_id="r1", tool_call_id="call_1",
                                                     content=log))
    body = stub.Build(pb.BuildRequest(agent_id="r1")).body
    ids = set(re.findall(r"r-[0-9a-f]{16}", json.dumps(json.loads(body)["messages"])))
    assert len(ids) == 1, "the long tool output was truncated with a recall id"
    recall_id = ids.pop()
    page = stub.Recall(pb.RecallRequest(agent_id="r1", recall_id=recall_id, max_tokens=500))
    assert page.offset == 0 and page.total_bytes == len(log.encode())
    assert log.startswith(page.content) and page.remaining_bytes > 0 and page.tokens > 0
    second = stub.Recall(pb.RecallRequest(agent_id="r1", recall_id=recall_id,
                                          offset=len(page.content.encode()), max_tokens=500))
    assert log.encode()[len(page.content.encode()):].startswith(second.content.encode())
    for request, code in (
            (pb.RecallRequest(agent_id="r1", recall_id="r-0000000000000000"), C.NOT_FOUND),
            (pb.RecallRequest(agent_id="r1", recall_id=recall_id, offset=10 ** 9),
             C.OUT_OF_RANGE),
            (pb.RecallRequest(agent_id="r1", recall_id=recall_id, offset=-1),
             C.INVALID_ARGUMENT),
            (pb.RecallRequest(agent_id="r1", recall_id=""), C.INVALID_ARGUMENT)):
        assert rpc_error(stub.Recall, request).code() == code, request

    # last-n(1) masks every tool result but the newest: nothing to do with one result.
    not_due = stub.Compact(pb.CompactRequest(agent_id="r1"))
    assert not not_due.compacted
    stub.AppendAssistant(pb.AppendAssistantRequest(
        agent_id="r1", tool_calls=[pb.ToolCall(id="call_2", name="bash",
                                               arguments='{"cmd": "ls"}')]))
    stub.AppendToolResult(pb.AppendToolResultRequest(agent_id="r1", tool_call_id="call_2",
                                                     content="a.txt b.txt"))
    before = stub.Build(pb.BuildRequest(agent_id="r1"))
    assert before.compaction_due and before.compaction.masked == 1
    done = stub.Compact(pb.CompactRequest(agent_id="r1"))
    assert done.compacted and done.report.masked == 1
    assert done.report.tokens_after < done.report.tokens_before
    assert done.report.policy.startswith("last-n")
    assert json.loads(done.report.json)["tokens_after"] == done.report.tokens_after
    after = stub.Build(pb.BuildRequest(agent_id="r1"))
    # Build's counts are those after a due compaction; its body is the rendering before it.
    assert "Old tool output omitted" not in before.body
    assert "Old tool output omitted" in after.body
    assert after.input_tokens == before.input_tokens < done.report.tokens_before
    assert stub.Stats(pb.StatsRequest(agent_id="r1")).compactions == 1
    # The masked original is still recallable.
    again = stub.Recall(pb.RecallRequest(agent_id="r1", recall_id=recall_id, max_tokens=500))
    assert again.content == page.content


def test_fork_and_join(start_sim, start_sidecar):
    sim = start_sim(None, ["--output-tokens", "12"])  # generated replies
    sidecar = start_sidecar(["--upstream", sim.base_url])
    stub = sidecar.stub()
    create(stub, "parent", system_prompts=["You split work into subtasks."])
    _, turn = complete(stub, "parent", "Plan the work.")
    assert turn.finish_reason == "stop"

    child = stub.Fork(pb.ForkRequest(agent_id="parent", task="Do part one.", child_id="kid"))
    assert (child.agent_id, child.parent_id) == ("kid", "parent") and child.task_segment_id
    assert json.loads(child.config_json)["identity"]["id"] == "kid"
    parent_body = json.loads(stub.Build(pb.BuildRequest(agent_id="parent")).body)
    child_body = json.loads(stub.Build(pb.BuildRequest(agent_id="kid")).body)
    assert child_body["messages"][0] == parent_body["messages"][0]  # the same stable prefix
    assert child_body["messages"][-1] == {"role": "user", "content": "Do part one."}
    _, child_turn = complete(stub, "kid")
    assert child_turn.record.cached_tokens_predicted > 0  # the parent's prefix

    named = stub.Fork(pb.ForkRequest(agent_id="parent", task="Part two."))
    assert named.agent_id.startswith("parent.fork-")
    ids = [a.agent_id for a in stub.ListAgents(pb.ListAgentsRequest()).agents]
    assert ids == sorted(["parent", "kid", named.agent_id])

    joined = stub.Join(pb.JoinRequest(agent_id="parent", child_id="kid", max_tokens=200))
    assert joined.segment_id
    last = json.loads(stub.Build(pb.BuildRequest(agent_id="parent")).body)["messages"][-1]
    assert last["role"] == "user" and child_turn.content[:20] in last["content"]

    for request, code, needle in (
            (pb.ForkRequest(agent_id="parent", task=""), C.INVALID_ARGUMENT, "task"),
            (pb.ForkRequest(agent_id="parent", task="x", child_id="kid"), C.ALREADY_EXISTS,
             "kid"),
            (pb.ForkRequest(agent_id="parent", task="x", child_id="a/b"), C.INVALID_ARGUMENT,
             "child_id"),
            (pb.ForkRequest(agent_id="nope", task="x"), C.NOT_FOUND, "nope")):
        error = rpc_error(stub.Fork, request)
        assert error.code() == code and needle in error.details(), error.details()
    for request, code in ((pb.JoinRequest(agent_id="parent", child_id="parent"),
                           C.INVALID_ARGUMENT),
                          (pb.JoinRequest(agent_id="parent", child_id="nope"), C.NOT_FOUND),
                          (pb.JoinRequest(agent_id="parent", child_id="kid", max_tokens=-1),
                           C.INVALID_ARGUMENT)):
        assert rpc_error(stub.Join, request).code() == code


def _fields(data: bytes):
    """(field number, wire type, value) of a protobuf message's top-level fields."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        yield number, wire, value


def _varint(data: bytes, i: int):
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def test_health_and_reflection(sidecar):
    channel = sidecar.channel()
    check = channel.unary_unary("/grpc.health.v1.Health/Check")
    # HealthCheckResponse{status: SERVING (1)}
    assert check(b"", timeout=10) == b"\x08\x01"

    reflect = channel.stream_stream(
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
    symbol = b"strata.v1.ContextService"
    requests = [b"\x3a\x00",  # list_services: ""
                b"\x22" + bytes([len(symbol)]) + symbol]  # file_containing_symbol
    responses = list(reflect(iter(requests), timeout=10))
    assert len(responses) == 2
    services = []
    for number, _, value in _fields(responses[0]):
        if number == 6:  # list_services_response
            for n, _, service in _fields(value):
                if n == 1:
                    services.append(dict((k, v) for k, _, v in _fields(service))[1].decode())
    assert "strata.v1.ContextService" in services and "grpc.health.v1.Health" in services
    files = []
    for number, _, value in _fields(responses[1]):
        if number == 4:  # file_descriptor_response
            files += [v for n, _, v in _fields(value) if n == 1]
    descriptors = [descriptor_pb2.FileDescriptorProto.FromString(f) for f in files]
    mine = next(d for d in descriptors if d.package == "strata.v1")
    assert mine.name == "strata/v1/context_service.proto"
    methods = {m.name for m in mine.service[0].method}
    assert methods == {"CreateAgent", "OpenAgent", "DeleteAgent", "ListAgents",
                       "SetSystemPrompt", "SetTools", "PutDocument", "RemoveDocument",
                       "AppendUser", "AppendAssistant", "AppendToolResult", "Build", "Complete",
                       "Compact", "Recall", "Pin", "Fork", "Join", "Growth", "Records", "Stats",
                       "GetMessages"}


def test_a_request_that_does_not_parse_gets_a_message(sidecar):
    # Raw request bytes, past the Python stubs: StatsRequest{agent_id (field 1)}.
    channel = sidecar.channel()
    for method, request in (
            ("Stats", b"\x0a\x05ab"),                    # a length of 5, 2 bytes follow
            ("Stats", b"\x0a\x02\xc3\x28"),              # agent_id is not UTF-8
            ("Complete", b"\x0a\x02\xff\xfe")):          # CompleteRequest.agent_id likewise
        call = channel.unary_unary(f"/strata.v1.ContextService/{method}") if \
            method != "Complete" else channel.unary_stream(f"/strata.v1.ContextService/{method}")
        error = rpc_error(call, request, timeout=10)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, request)
        assert error.details() == (
            f"the request of /strata.v1.ContextService/{method} does not parse as its protobuf "
            "message: it is truncated or malformed, or a string field holds bytes that are not "
            "UTF-8 (proto3 strings must be valid UTF-8)")


def handler_threads(sidecar):
    """The ids of the sidecar's gRPC handler threads (named by gRPC's synchronous server)."""
    tasks = pathlib.Path(f"/proc/{sidecar.process.pid}/task")
    threads = set()
    for task in tasks.iterdir():
        try:
            if (task / "comm").read_text().startswith("grpcpp_sync_ser"):
                threads.add(task.name)
        except FileNotFoundError:  # a thread that ended while listed
            pass
    return threads


def test_concurrent_calls_reuse_the_handler_threads(start_sim, start_sidecar):
    # Each completion takes 5 tokens 100 ms apart, so the six calls of a batch overlap.
    sim = start_sim(None, ["--output-tokens", "5", "--decode-us", "100000"])
    sidecar = start_sidecar(["--upstream", sim.base_url])
    stub = sidecar.stub()
    for i in range(6):
        create(stub, f"a{i}")

    def batch():
        calls = [Background(lambda i=i: complete(stub, f"a{i}", "hello")) for i in range(6)]
        for call in calls:
            call.start()
        for call in calls:
            call.join(60)
            assert not call.is_alive()
            assert call.error is None, call.error

    batch()
    kept = handler_threads(sidecar)
    # The threads the first batch needed stay, polling for the next calls (gRPC's default keeps
    # two and ends the rest as their calls end, so every batch would start its threads again).
    assert len(kept) >= 6, kept
    batch()
    kept |= handler_threads(sidecar)  # and any this batch added (gRPC starts one when none polls)
    batch()
    batch()
    assert handler_threads(sidecar) - kept == set()
