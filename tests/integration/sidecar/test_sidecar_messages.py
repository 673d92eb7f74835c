"""GetMessages reads an agent's conversation back as a client would send it (paged, originals, open
tool calls marked), and Complete with nothing to send is FAILED_PRECONDITION and records nothing."""

from __future__ import annotations

import json

import grpc
import pytest

from sidecar_testing import complete, pb, rpc_error

C = grpc.StatusCode

READ_FILE = {"type": "function", "function": {
    "name": "read_file", "parameters": {"type": "object", "properties": {}}}}

TRAJECTORY = [
    {"role": "assistant", "content": "Reading it.", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "read_file", "arguments": "{\"path\": \"README.md\"}"}}]},
    {"role": "assistant", "content": "The README says hello."},
    {"role": "assistant", "content": "A third answer."},
]


@pytest.fixture
def stub(start_sim, start_sidecar):
    sim = start_sim(TRAJECTORY)
    return start_sidecar(["--upstream", sim.base_url]).stub()


def messages(stub, agent_id, page_size=0):
    out, token = [], ""
    while True:
        page = stub.GetMessages(pb.GetMessagesRequest(agent_id=agent_id, page_size=page_size,
                                                      page_token=token))
        out += list(page.messages)
        token = page.next_page_token
        if not token:
            return out


def test_get_messages_reads_the_conversation_back(stub):
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="m", spec=pb.AgentSpec(
        system_prompts=["You read files."])))
    stub.SetTools(pb.SetToolsRequest(agent_id="m", tools_json=json.dumps([READ_FILE])))
    _, turn = complete(stub, "m", "What does the README say?")
    assert [c.id for c in turn.tool_calls] == ["call_1"]

    # The tool call is open: marked, and the conversation ends with it.
    got = messages(stub, "m")
    assert [(m.role, m.content) for m in got] == [
        ("system", "You read files."), ("user", "What does the README say?"),
        ("assistant", "Reading it.")]
    assert [c.arguments for c in got[2].tool_calls] == ["{\"path\": \"README.md\"}"]
    assert list(got[2].open_tool_call_ids) == ["call_1"] and got[2].state == "live"

    stub.AppendToolResult(pb.AppendToolResultRequest(agent_id="m", tool_call_id="call_1",
                                                     content="hello " * 20))
    complete(stub, "m")
    got = messages(stub, "m")
    assert [m.role for m in got] == ["system", "user", "assistant", "tool", "assistant"]
    assert list(got[2].open_tool_call_ids) == [] and got[3].tool_call_id == "call_1"
    assert got[3].content == "hello " * 20 and got[4].content == "The README says hello."
    # Pages of two give the same messages.
    assert [m.segment_id for m in messages(stub, "m", page_size=2)] == \
        [m.segment_id for m in got]
    error = rpc_error(stub.GetMessages, pb.GetMessagesRequest(agent_id="m", page_token="x"))
    assert error.code() == C.INVALID_ARGUMENT and "page_token" in error.details()
    error = rpc_error(stub.GetMessages, pb.GetMessagesRequest(agent_id="nobody"))
    assert error.code() == C.NOT_FOUND


def test_complete_with_nothing_to_send_is_refused_without_a_record(stub):
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="n"))
    complete(stub, "n", "First question")  # answered with tool call_1
    stub.AppendToolResult(pb.AppendToolResultRequest(agent_id="n", tool_call_id="call_1",
                                                     content="hello"))
    complete(stub, "n")  # the reply: "The README says hello."
    before = stub.Stats(pb.StatsRequest(agent_id="n")).requests
    error = rpc_error(lambda r: list(stub.Complete(r, timeout=30)),
                      pb.CompleteRequest(agent_id="n"))
    assert error.code() == C.FAILED_PRECONDITION, error
    assert "nothing to send" in error.details() and "user_message" in error.details()
    assert stub.Stats(pb.StatsRequest(agent_id="n")).requests == before
    assert len(stub.Records(pb.RecordsRequest(agent_id="n")).records) == before
    # With a user message it goes on.
    _, turn = complete(stub, "n", "And then?")
    assert turn.record.code == "OK"
