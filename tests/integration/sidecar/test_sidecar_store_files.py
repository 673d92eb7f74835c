"""strata-sidecar when its store's database file is removed while it runs: every write is refused
with UNAVAILABLE saying so (nothing acknowledged that a restart would not find), /readyz answers
503 and the gRPC health service reports NOT_SERVING."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

import grpc

from sidecar_testing import pb, rpc_error

SERVING, NOT_SERVING = b"\x08\x01", b"\x08\x02"  # HealthCheckResponse{status}


def readyz(address: str) -> int:
    try:
        with urllib.request.urlopen(f"http://{address}/readyz", timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_removed_store_refuses_writes_and_reports_not_serving(start_sidecar):
    sidecar = start_sidecar(["--http-listen", "127.0.0.1:0"])
    stub = sidecar.stub()
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="a1", spec=pb.AgentSpec(
        system_prompts=["You are a test agent."])))
    stub.AppendUser(pb.AppendUserRequest(agent_id="a1", content="kept"))
    output = sidecar.wait_for_output("http listening on ")
    http = re.search(r"^http listening on (\S+)$", output, re.M).group(1)
    check = sidecar.channel().unary_unary("/grpc.health.v1.Health/Check")
    assert readyz(http) == 200 and check(b"", timeout=10) == SERVING

    sidecar.store.unlink()
    error = rpc_error(stub.AppendUser, pb.AppendUserRequest(agent_id="a1", content="refused"))
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
    assert f"{sidecar.store} was removed while the store was open" in error.details()
    body = json.loads(stub.Build(pb.BuildRequest(agent_id="a1")).body)
    assert [m["content"] for m in body["messages"] if m["role"] == "user"] == ["kept"]
    assert readyz(http) == 503
    # The health service follows the store once a second while the sidecar waits for signals.
    deadline = time.time() + 30
    while check(b"", timeout=10) != NOT_SERVING and time.time() < deadline:
        time.sleep(0.05)
    assert check(b"", timeout=10) == NOT_SERVING
    assert "NOT_SERVING" in sidecar.wait_for_output("every write is refused")
