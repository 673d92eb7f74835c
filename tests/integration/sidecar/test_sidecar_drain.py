"""strata-sidecar's drain from outside, as a load balancer and its clients see it: on SIGTERM
/readyz answers 503 and the gRPC health service NOT_SERVING at once, while both listeners still
accept connections; new completions are refused (HTTP 503 with Retry-After, gRPC UNAVAILABLE with
retry-after) while a stream in flight goes on to its end; then the process exits 0."""

from __future__ import annotations

import json
import signal
import subprocess
import threading

import grpc

from sidecar_testing import Background, pb

C = grpc.StatusCode


def _http_port(sidecar) -> int:
    line = sidecar.wait_for_output("http listening on ").split("http listening on ")[1]
    return int(line.split()[0].rsplit(":", 1)[1])


def _curl(port: int, path: str, body=None):
    """(status, headers lower-cased, body) of one request made by curl."""
    args = ["curl", "-s", "-i", "--max-time", "30", f"http://127.0.0.1:{port}{path}"]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "-H", "X-Strata-Agent: fresh",
                 "--data-binary", json.dumps(body)]
    out = subprocess.run(args, capture_output=True, timeout=60)
    assert out.returncode == 0, f"curl failed ({out.returncode}): {out.stderr}"
    head, _, text = out.stdout.decode().partition("\r\n\r\n")
    lines = head.split("\r\n")
    headers = dict((k.strip().lower(), v.strip()) for k, _, v in
                   (line.partition(":") for line in lines[1:]))
    return int(lines[0].split()[1]), headers, text


def _health(channel) -> bytes:
    return channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=10)


def test_drain_keeps_listeners_open_and_refuses_new_completions(start_sim, start_sidecar):
    # Each answer is 40 tokens at 50 ms each: two seconds, well inside the drain deadline.
    slow = start_sim(None, ["--output-tokens", "40", "--decode-us", "50000"])
    sidecar = start_sidecar(["--upstream", slow.base_url, "--drain-timeout-ms", "60000",
                             "--http-listen", "127.0.0.1:0"])
    port = _http_port(sidecar)
    channel = sidecar.channel()
    stub = sidecar.stub()
    assert _curl(port, "/readyz")[0] == 200
    assert _health(channel) == b"\x08\x01"  # SERVING
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="d"))

    started_grpc, started_http = threading.Event(), threading.Event()

    def grpc_stream():
        events = []
        for event in stub.Complete(pb.CompleteRequest(agent_id="d", user_message="long answer")):
            events.append(event)
            started_grpc.set()
        return events

    def http_stream():
        body = json.dumps({"messages": [{"role": "user", "content": "long too"}],
                           "stream": True})
        process = subprocess.Popen(
            ["curl", "-s", "-N", "-i", "--max-time", "60", "-H", "Content-Type: application/json",
             "-H", "X-Strata-Agent: h", "--data-binary", body,
             f"http://127.0.0.1:{port}/v1/chat/completions"],
            stdout=subprocess.PIPE, text=True)
        text = ""
        for line in process.stdout:
            text += line
            if "chat.completion.chunk" in line:
                started_http.set()
        process.wait()
        return text

    calls = [Background(grpc_stream), Background(http_stream)]
    for call in calls:
        call.start()
    assert started_grpc.wait(30) and started_http.wait(30)
    sidecar.signal(signal.SIGTERM)
    sidecar.wait_for_output("received SIGTERM: draining")

    # The listeners still accept connections: readiness and health say "drain me".
    status, _, text = _curl(port, "/readyz")
    assert status == 503 and "draining" in text
    assert _health(channel) == b"\x08\x02"  # NOT_SERVING
    assert _curl(port, "/healthz")[0] == 200  # the process itself is alive
    # New completions are refused, each saying when to retry.
    status, headers, text = _curl(port, "/v1/chat/completions",
                                  {"messages": [{"role": "user", "content": "new"}]})
    assert status == 503 and headers.get("retry-after") == "1", (status, headers)
    assert json.loads(text)["error"]["type"] == "service_unavailable"
    refused = stub.Complete(pb.CompleteRequest(agent_id="d", user_message="new"), timeout=30)
    try:
        list(refused)
        raise AssertionError("a Complete during the drain was not refused")
    except grpc.RpcError as e:
        assert e.code() == C.UNAVAILABLE and "draining" in e.details(), e
        assert ("retry-after", "1") in tuple(e.trailing_metadata() or ()), e.trailing_metadata()
    # Other calls still work while draining; the refused completion created no agent.
    assert [a.agent_id for a in stub.ListAgents(pb.ListAgentsRequest(), timeout=30).agents] == \
        ["d", "h"]

    # The streams in flight finish whole, then the process exits 0.
    assert sidecar.wait(timeout=60) == 0
    for call in calls:
        call.join(60)
        assert call.error is None, call.error
    turn = calls[0].result[-1].turn
    assert turn.record.code == "OK" and turn.record.output_tokens == 40
    assert calls[1].result.startswith("HTTP/1.1 200"), calls[1].result[:200]
    assert "data: [DONE]" in calls[1].result and '"error"' not in calls[1].result
    output = sidecar.output()
    assert "drained in" in output
    # Now closed: nothing listens any more.
    assert subprocess.run(["curl", "-s", f"http://127.0.0.1:{port}/healthz"]).returncode == 7


def test_idle_drain_exits_at_once(start_sim, start_sidecar):
    # Nothing in flight: the drain does not wait for its deadline.
    sim = start_sim(None, ["--output-tokens", "5"])
    sidecar = start_sidecar(["--upstream", sim.base_url, "--drain-timeout-ms", "600000",
                             "--http-listen", "127.0.0.1:0"])
    _http_port(sidecar)
    sidecar.signal(signal.SIGTERM)
    assert sidecar.wait(timeout=30) == 0
    drained = int(sidecar.output().split("drained in ")[1].split(" ms")[0])
    assert drained < 600000


def test_drain_grace_keeps_an_idle_sidecar_answering_not_ready(start_sim, start_sidecar):
    # Nothing in flight, but --drain-grace-ms: a load balancer's checks get 503 and NOT_SERVING,
    # not a refused connection, until the grace has passed; then the process exits 0.
    sim = start_sim(None, ["--output-tokens", "5"])
    sidecar = start_sidecar(["--upstream", sim.base_url, "--drain-grace-ms", "3000",
                             "--http-listen", "127.0.0.1:0"])
    port = _http_port(sidecar)
    channel = sidecar.channel()
    assert _curl(port, "/readyz")[0] == 200
    sidecar.signal(signal.SIGTERM)
    sidecar.wait_for_output("draining")
    # The log line comes just before the drain begins: a check made in between may still pass.
    status = _curl(port, "/readyz")[0]
    if status == 200:
        status = _curl(port, "/readyz")[0]
    assert status == 503
    assert _health(channel) == b"\x08\x02"  # NOT_SERVING
    assert sidecar.wait(timeout=30) == 0
    drained = int(sidecar.output().split("drained in ")[1].split(" ms")[0])
    assert drained >= 3000
