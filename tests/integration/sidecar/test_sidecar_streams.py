"""strata-sidecar's streamed answers: the fragments the upstream sends together reach the client
together (one gRPC Delta, or one proxy chunk, per part), and still join into the whole answer."""

from __future__ import annotations

import json
import urllib.request

from sidecar_testing import complete, pb

ANSWER = "The README says hello, and nothing else."
REASONING = "Read it first."
# strata-sim sends one event per byte (--chunk-bytes 1), all in one write: it has no decode time.
TRAJECTORY = [{"role": "assistant", "content": ANSWER, "reasoning_content": REASONING}] * 2


def _http_port(sidecar) -> int:
    line = sidecar.wait_for_output("http listening on ").split("http listening on ")[1]
    return int(line.split()[0].rsplit(":", 1)[1])


def test_grpc_deltas_that_arrive_together_are_one_message_per_part(start_sim, start_sidecar):
    sim = start_sim(TRAJECTORY, ["--chunk-bytes", "1"])
    sidecar = start_sidecar(["--upstream", sim.base_url, "--backend", "vllm"])
    stub = sidecar.stub()
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="s1"))
    deltas, turn = complete(stub, "s1", "What does the README say?")
    content = [d.text for d in deltas if d.kind == pb.Delta.KIND_CONTENT]
    reasoning = [d.text for d in deltas if d.kind == pb.Delta.KIND_REASONING]
    assert "".join(content) == ANSWER == turn.content
    assert "".join(reasoning) == REASONING
    # Without joining there is one Delta per byte the upstream sent.
    assert len(content) < len(ANSWER) and len(reasoning) < len(REASONING), (content, reasoning)
    # The parts keep their order: the reasoning comes before the content.
    kinds = [d.kind for d in deltas]
    assert kinds.index(pb.Delta.KIND_CONTENT) > max(
        i for i, k in enumerate(kinds) if k == pb.Delta.KIND_REASONING)


def test_grpc_final_only_sends_the_turn_alone(start_sim, start_sidecar):
    sim = start_sim(TRAJECTORY, ["--chunk-bytes", "1"])
    sidecar = start_sidecar(["--upstream", sim.base_url, "--backend", "vllm"])
    stub = sidecar.stub()
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="f1"))
    deltas, turn = complete(stub, "f1", "What does the README say?", final_only=True)
    assert deltas == []
    assert turn.content == ANSWER and turn.reasoning == REASONING
    # The next call of the same agent streams again when it does not ask otherwise.
    deltas, turn = complete(stub, "f1", "And again?")
    assert "".join(d.text for d in deltas if d.kind == pb.Delta.KIND_CONTENT) == ANSWER
    assert turn.content == ANSWER


def test_proxy_chunks_that_arrive_together_are_one_chunk_per_part(start_sim, start_sidecar):
    sim = start_sim(TRAJECTORY, ["--chunk-bytes", "1"])
    sidecar = start_sidecar(["--upstream", sim.base_url, "--backend", "vllm",
                             "--http-listen", "127.0.0.1:0"])
    body = {"model": "glm-5.3-flash", "stream": True,
            "messages": [{"role": "user", "content": "What does the README say?"}]}
    request = urllib.request.Request(
        f"http://127.0.0.1:{_http_port(sidecar)}/v1/chat/completions", method="POST",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-Strata-Agent": "p1"})
    with urllib.request.urlopen(request, timeout=60) as response:
        text = response.read().decode()
    events = [line[len("data: "):] for line in text.split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    deltas = [json.loads(e)["choices"][0]["delta"] for e in events[:-1]
              if json.loads(e).get("choices")]
    content = [d["content"] for d in deltas if d.get("content")]
    reasoning = [d["reasoning_content"] for d in deltas if d.get("reasoning_content")]
    assert "".join(content) == ANSWER and "".join(reasoning) == REASONING
    assert len(content) < len(ANSWER) and len(reasoning) < len(REASONING), (content, reasoning)
