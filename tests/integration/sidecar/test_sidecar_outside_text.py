"""Upstream text through a strata-sidecar process, read back by Python clients: an error body with
invalid UTF-8 gives a record that grpcio can read (also after a restart), and an upstream that
quotes the API key has it redacted from gRPC errors, records, the proxy's answers, /v1/models and
the store."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.error
import urllib.request

import grpc
import pytest

from sidecar_testing import complete, pb, rpc_error

KEY = "sk-py-upstream-secret-4242"
KEY_VARIABLE = "STRATA_TEST_OUTSIDE_TEXT_KEY"


class Upstream:
    """An HTTP upstream on 127.0.0.1 answering each path with what the test set: (status,
    content type, body bytes); b"{auth}" in a body becomes the request's Authorization header."""

    def __init__(self):
        self.answers = {}
        self.authorizations = []
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                upstream.authorizations.append(self.headers.get("Authorization"))
                status, content_type, body = upstream.answers.get(
                    self.path, (404, "text/plain", b"no such path"))
                body = body.replace(b"{auth}", (self.headers.get("Authorization") or "").encode())
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def upstream():
    server = Upstream()
    yield server
    server.close()


def create(stub, agent_id):
    return stub.CreateAgent(pb.CreateAgentRequest(agent_id=agent_id, spec=pb.AgentSpec()))


def test_an_error_body_with_invalid_utf8_gives_records_python_reads(tmp_path, upstream,
                                                                   start_sidecar):
    # A text/plain 400 with bytes that are not UTF-8 (the probe's: a client then failed with
    # "INTERNAL: Exception deserializing response!", even after a restart).
    upstream.answers["/v1/chat/completions"] = (400, "text/plain",
                                                b"bad \xff\xfe request \xc3")
    args = ["--upstream", upstream.base_url, "--backend", "vllm"]
    sidecar = start_sidecar(args)
    stub = sidecar.stub()
    create(stub, "u1")
    error = rpc_error(complete, stub, "u1", "hello")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "bad \ufffd\ufffd request \ufffd" in error.details()

    def check_records(records_stub):
        records = records_stub.Records(pb.RecordsRequest(agent_id="u1")).records
        assert len(records) == 1
        assert records[0].code == "INVALID_ARGUMENT"
        assert "bad \ufffd\ufffd request \ufffd" in records[0].error, records[0].error

    check_records(stub)
    sidecar.close()
    restarted = start_sidecar(args, store=sidecar.store)
    check_records(restarted.stub())


def http_address(sidecar) -> str:
    output = sidecar.wait_for_output("http listening on ")
    line = next(l for l in output.splitlines() if l.startswith("http listening on "))
    return line[len("http listening on "):].strip()


def http_post(url: str, body: dict):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_an_upstream_quoting_the_key_has_it_redacted_everywhere(tmp_path, upstream,
                                                                 start_sidecar):
    upstream.answers["/v1/chat/completions"] = (
        401, "application/json",
        b'{"error":{"message":"Incorrect API key provided: {auth}.","type":"invalid_request_error"}}')
    upstream.answers["/v1/models"] = (401, "text/plain", b"you sent\nAuthorization: {auth}\n")
    sidecar = start_sidecar(["--upstream", upstream.base_url, "--backend", "vllm",
                             "--upstream-api-key-env", KEY_VARIABLE,
                             "--http-listen", "127.0.0.1:0"], env={KEY_VARIABLE: KEY})
    stub = sidecar.stub()
    create(stub, "k1")
    error = rpc_error(complete, stub, "k1", "hello")
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "Incorrect API key provided: Bearer [redacted]." in error.details(), error.details()
    assert KEY not in error.details()
    records = stub.Records(pb.RecordsRequest(agent_id="k1")).records
    assert records and "[redacted]" in records[0].error and KEY not in records[0].error

    base = f"http://{http_address(sidecar)}"
    for stream in (False, True):
        status, body = http_post(f"{base}/v1/chat/completions", {
            "model": "glm-5.3-flash", "stream": stream,
            "messages": [{"role": "user", "content": "hi"}]})
        text = body.decode()
        assert KEY not in text and "[redacted]" in text, (stream, status, text)
        # Refused before the first byte: its status, streamed or not.
        assert status == 502, (stream, status, text)
    try:
        urllib.request.urlopen(f"{base}/v1/models", timeout=30)
        raise AssertionError("GET /v1/models succeeded; the upstream answered 401")
    except urllib.error.HTTPError as models:
        assert models.code == 401
        text = models.read().decode()
        assert "Authorization: [redacted]" in text and KEY not in text, text

    # The upstream did get the key, and the key went nowhere but there.
    assert f"Bearer {KEY}" in upstream.authorizations
    sidecar.close()
    assert KEY not in sidecar.output()
    for path in tmp_path.glob("sidecar.db*"):
        assert KEY.encode() not in path.read_bytes(), path
