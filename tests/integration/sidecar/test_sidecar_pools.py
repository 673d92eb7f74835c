"""strata-sidecar with length pools (the configuration's "pools", or --pools FILE): the agents'
requests are scheduled through a strata::PoolSet over strata-sim, and /metrics carries the pools'
families and the pool label of each turn. A bad pools configuration is refused at startup."""

from __future__ import annotations

import json
import re
import time
import urllib.request

from sidecar_testing import complete, pb, write_config

TRAJECTORY = [{"role": "assistant", "content": f"Answer {i}."} for i in range(4)]


def pools_config(base_url):
    return {"pools": [{"name": "short", "max_input_tokens": 2000, "endpoints": [base_url]},
                      {"name": "long", "max_input_tokens": 100000, "endpoints": [base_url]}]}


def http_address(sidecar, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        match = re.search(r"^http listening on (\S+)$", sidecar.output(), re.M)
        if match:
            return match.group(1)
        time.sleep(0.02)
    raise AssertionError("no http listener line: " + sidecar.output())


def metrics(sidecar):
    with urllib.request.urlopen(f"http://{http_address(sidecar)}/metrics", timeout=30) as r:
        return r.read().decode()


def run_short_and_long(sidecar):
    stub = sidecar.stub()
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="s1", spec=pb.AgentSpec()))
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="l1", spec=pb.AgentSpec()))
    _, short = complete(stub, "s1", "A short question.")
    # About 5,000 tokens by the default estimate: only the long pool (100,000) holds it.
    _, long = complete(stub, "l1", "context " * 2500 + "What now?")
    assert short.record.code == "OK" and long.record.code == "OK"
    assert short.record.input_tokens < 2000 < long.record.input_tokens
    return short, long


def check_metrics(text):
    requests = [line for line in text.splitlines()
                if line.startswith("strata_sidecar_requests_total{")]
    assert any('pool="short"' in line for line in requests), requests
    assert any('pool="long"' in line for line in requests), requests
    assert not any('pool="none"' in line for line in requests), requests
    assert re.search(r'^strata_pool_\w+\{[^}]*pool="short"', text, re.M), text
    assert re.search(r'^strata_pool_\w+\{[^}]*pool="long"', text, re.M), text


def test_pools_from_config(tmp_path, start_sim, start_sidecar):
    sim = start_sim(TRAJECTORY)
    config = write_config(tmp_path, {"http_listen": "127.0.0.1:0", "backend": "vllm",
                                     "pools": pools_config(sim.base_url)})
    sidecar = start_sidecar(["--config", str(config)])  # no --upstream: the pools' endpoints
    assert "--upstream is not needed" in sidecar.output()
    run_short_and_long(sidecar)
    check_metrics(metrics(sidecar))
    # GET /v1/models answers for the pools' endpoints (both pools share the simulator: one id).
    with urllib.request.urlopen(f"http://{http_address(sidecar)}/v1/models", timeout=30) as r:
        assert r.status == 200
        assert json.loads(r.read()) == {"object": "list", "data": [
            {"id": "glm-5.3-flash", "object": "model"}]}


def test_pools_flag_overrides_config(tmp_path, start_sim, start_sidecar):
    sim = start_sim(TRAJECTORY)
    # The configuration's pools point at a closed port; --pools replaces them.
    config = write_config(tmp_path, {"http_listen": "127.0.0.1:0", "backend": "vllm",
                                     "pools": {"pools": [{"name": "x", "max_input_tokens": 10,
                                                          "endpoints": ["http://127.0.0.1:1/v1"]}]}})
    pools = write_config(tmp_path, pools_config(sim.base_url), "pools.json")
    sidecar = start_sidecar(["--config", str(config), "--pools", str(pools)])
    run_short_and_long(sidecar)
    check_metrics(metrics(sidecar))


def refused(start_sidecar, args):
    sidecar = start_sidecar(args, expect_listening=False)
    assert sidecar.wait(timeout=60) == 1
    assert "grpc listening" not in sidecar.output()
    return sidecar.output()


def test_bad_pools_refused_at_startup(tmp_path, start_sidecar):
    bad_type = write_config(tmp_path, {"pools": {"pools": [
        {"name": "short", "max_input_tokens": "two thousand", "endpoints": ["http://h/v1"]}]}},
        "bad_type.json")
    out = refused(start_sidecar, ["--config", str(bad_type)])
    assert 'pools: "pools[0].max_input_tokens" must be a number' in out, out

    unknown = write_config(tmp_path, {"pools": {"pools": [], "ladders": ["refuse"]}},
                           "unknown.json")
    assert 'pools: unknown key "ladders"' in refused(start_sidecar, ["--config", str(unknown)])

    not_object = write_config(tmp_path, {"pools": [1]}, "not_object.json")
    assert "pools: expected an object" in refused(start_sidecar, ["--config", str(not_object)])

    # Valid JSON, refused when the pool set is created: a pool without endpoints.
    no_endpoints = write_config(tmp_path, {"pools": {"pools": [
        {"name": "short", "max_input_tokens": 2000}]}}, "no_endpoints.json")
    out = refused(start_sidecar, ["--config", str(no_endpoints)])
    assert 'pools: pool "short" has no endpoints' in out, out

    flag = write_config(tmp_path, {"pools": [{"name": 3}]}, "flag_pools.json")
    out = refused(start_sidecar, ["--pools", str(flag)])
    assert f'--pools {flag}: "pools[0].name" must be a string' in out, out
