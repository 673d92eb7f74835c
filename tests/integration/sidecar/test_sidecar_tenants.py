"""Tenants of strata-sidecar: bearer tokens, isolation (a table of cross-tenant attempts, all
refused), limits, and secrets that never appear in output, records, the store or errors."""

from __future__ import annotations

import json
import threading
import time

import grpc
import pytest

from sidecar_testing import (Background, complete, pb, rpc_error, sha256_hex, write_config)

C = grpc.StatusCode
ALPHA_TOKEN = "alpha-token-Zq81xv"
BETA_TOKEN = "beta-token-Kp27mw"
UPSTREAM_KEY = "sk-upstream-SECRET-4f9a2c"

ALL_METHODS = [
    ("CreateAgent", pb.CreateAgentRequest(agent_id="x")),
    ("OpenAgent", pb.OpenAgentRequest(agent_id="x")),
    ("DeleteAgent", pb.DeleteAgentRequest(agent_id="x")),
    ("ListAgents", pb.ListAgentsRequest()),
    ("SetSystemPrompt", pb.SetSystemPromptRequest(agent_id="x")),
    ("SetTools", pb.SetToolsRequest(agent_id="x", tools_json="[]")),
    ("PutDocument", pb.PutDocumentRequest(agent_id="x")),
    ("RemoveDocument", pb.RemoveDocumentRequest(agent_id="x")),
    ("AppendUser", pb.AppendUserRequest(agent_id="x")),
    ("AppendAssistant", pb.AppendAssistantRequest(agent_id="x")),
    ("AppendToolResult", pb.AppendToolResultRequest(agent_id="x")),
    ("Build", pb.BuildRequest(agent_id="x")),
    ("Complete", pb.CompleteRequest(agent_id="x")),
    ("Compact", pb.CompactRequest(agent_id="x")),
    ("Recall", pb.RecallRequest(agent_id="x")),
    ("Pin", pb.PinRequest(agent_id="x")),
    ("Fork", pb.ForkRequest(agent_id="x")),
    ("Join", pb.JoinRequest(agent_id="x")),
    ("Growth", pb.GrowthRequest(agent_id="x")),
    ("Records", pb.RecordsRequest(agent_id="x")),
    ("Stats", pb.StatsRequest(agent_id="x")),
    ("GetMessages", pb.GetMessagesRequest(agent_id="x")),
]


def tenant_config(tmp_path, upstream):
    return write_config(tmp_path, {
        "upstream": upstream,
        "upstream_api_key_env": "STRATA_SIDECAR_TEST_KEY",
        "tenants": [
            {"name": "alpha", "token_sha256": [sha256_hex(ALPHA_TOKEN)]},
            {"name": "beta", "token_sha256": [sha256_hex(BETA_TOKEN)],
             "limits": {"max_agents": 3, "max_concurrent_completions": 1,
                        "max_request_bytes": 4096}},
        ]})


@pytest.fixture
def sidecar(tmp_path, start_sim, start_sidecar):
    sim = start_sim(None, ["--output-tokens", "8"])
    return start_sidecar(["--config", str(tenant_config(tmp_path, sim.base_url))],
                         env={"STRATA_SIDECAR_TEST_KEY": UPSTREAM_KEY})


def test_every_rpc_needs_a_known_token(sidecar):
    for token, needle in ((None, "no credentials"), ("wrong-token-Mm3", "unknown bearer token")):
        stub = sidecar.stub(token)
        for method, request in ALL_METHODS:
            error = rpc_error(getattr(stub, method), request)
            assert error.code() == C.UNAUTHENTICATED, method
            assert needle in error.details(), (method, error.details())
            assert "wrong-token-Mm3" not in error.details()
    # Malformed: a token without the scheme.
    channel = sidecar.channel()
    error = rpc_error(channel.unary_unary("/strata.v1.ContextService/ListAgents"), b"",
                      metadata=[("authorization", ALPHA_TOKEN)])
    assert error.code() == C.UNAUTHENTICATED and ALPHA_TOKEN not in error.details()
    # Health needs no token.
    assert channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=10) == b"\x08\x01"
    # With the right token the same calls are served.
    assert list(sidecar.stub(ALPHA_TOKEN).ListAgents(pb.ListAgentsRequest()).agents) == []


def test_cross_tenant_attempts_are_all_refused(sidecar):
    alpha = sidecar.stub(ALPHA_TOKEN)
    beta = sidecar.stub(BETA_TOKEN)
    alpha.CreateAgent(pb.CreateAgentRequest(agent_id="secret", spec=pb.AgentSpec(
        system_prompts=["Alpha's confidential prompt."])))
    alpha.SetTools(pb.SetToolsRequest(agent_id="secret", tools_json=json.dumps([
        {"type": "function", "function": {"name": "lookup"}}])))
    _, turn = complete(alpha, "secret", "Alpha's private question.")
    alpha.Fork(pb.ForkRequest(agent_id="secret", task="Alpha's subtask.", child_id="secret-kid"))
    before = alpha.Build(pb.BuildRequest(agent_id="secret")).body
    records_before = len(alpha.Records(pb.RecordsRequest(agent_id="secret")).records)
    # Beta's own agent, for the calls that name two agents.
    beta.CreateAgent(pb.CreateAgentRequest(agent_id="mine"))

    attempts = [
        ("OpenAgent", beta.OpenAgent, pb.OpenAgentRequest(agent_id="secret")),
        ("DeleteAgent", beta.DeleteAgent, pb.DeleteAgentRequest(agent_id="secret")),
        ("SetSystemPrompt", beta.SetSystemPrompt,
         pb.SetSystemPromptRequest(agent_id="secret", prompts=["hijacked"])),
        ("SetTools", beta.SetTools, pb.SetToolsRequest(agent_id="secret", tools_json="[]")),
        ("PutDocument", beta.PutDocument, pb.PutDocumentRequest(
            agent_id="secret", layer=pb.DOCUMENT_LAYER_DOCS, name="d", content="x")),
        ("RemoveDocument", beta.RemoveDocument, pb.RemoveDocumentRequest(
            agent_id="secret", layer=pb.DOCUMENT_LAYER_DOCS, name="d")),
        ("AppendUser", beta.AppendUser, pb.AppendUserRequest(agent_id="secret", content="x")),
        ("AppendAssistant", beta.AppendAssistant,
         pb.AppendAssistantRequest(agent_id="secret", content="x")),
        ("AppendToolResult", beta.AppendToolResult, pb.AppendToolResultRequest(
            agent_id="secret", tool_call_id="call_1", content="x")),
        ("Build", beta.Build, pb.BuildRequest(agent_id="secret")),
        ("Complete", lambda r: list(beta.Complete(r)), pb.CompleteRequest(agent_id="secret",
                                                                         user_message="x")),
        ("Compact", beta.Compact, pb.CompactRequest(agent_id="secret", force=True)),
        ("Recall", beta.Recall, pb.RecallRequest(agent_id="secret", recall_id="r-0")),
        ("Pin", beta.Pin, pb.PinRequest(agent_id="secret", segment_id="s1", pinned=True)),
        ("Fork", beta.Fork, pb.ForkRequest(agent_id="secret", task="x", child_id="stolen")),
        ("Join (their parent)", beta.Join, pb.JoinRequest(agent_id="secret", child_id="mine")),
        ("Join (their child)", beta.Join, pb.JoinRequest(agent_id="mine",
                                                         child_id="secret-kid")),
        ("Growth", beta.Growth, pb.GrowthRequest(agent_id="secret")),
        ("Records", beta.Records, pb.RecordsRequest(agent_id="secret")),
        ("Stats", beta.Stats, pb.StatsRequest(agent_id="secret")),
        ("GetMessages", beta.GetMessages, pb.GetMessagesRequest(agent_id="secret")),
        ("OpenAgent (child)", beta.OpenAgent, pb.OpenAgentRequest(agent_id="secret-kid")),
        ("OpenAgent (stored id)", beta.OpenAgent, pb.OpenAgentRequest(agent_id="alpha/secret")),
    ]
    for name, call, request in attempts:
        error = rpc_error(call, request)
        # Exactly what an id that exists nowhere gets: nothing tells the agent exists.
        if name == "OpenAgent (stored id)":
            assert error.code() == C.INVALID_ARGUMENT, name
            continue
        assert error.code() == C.NOT_FOUND, (name, error.code(), error.details())
        missing = "secret-kid" if "child" in name else "secret"
        assert error.details() == f'no agent "{missing}"', (name, error.details())
        assert "alpha" not in error.details().lower().replace('"secret', '')

    # Invisible in beta's list; beta may use the same id for its own, separate agent.
    assert [a.agent_id for a in beta.ListAgents(pb.ListAgentsRequest()).agents] == ["mine"]
    beta.CreateAgent(pb.CreateAgentRequest(agent_id="secret"))
    beta.AppendUser(pb.AppendUserRequest(agent_id="secret", content="beta's message"))
    # Alpha's agents are untouched.
    assert alpha.Build(pb.BuildRequest(agent_id="secret")).body == before
    assert len(alpha.Records(pb.RecordsRequest(agent_id="secret")).records) == records_before
    assert sorted(a.agent_id for a in alpha.ListAgents(pb.ListAgentsRequest()).agents) == \
        ["secret", "secret-kid"]
    assert "beta's message" not in before
    assert turn.record.agent_id == "secret"


def test_tenant_limits(sidecar, start_sim, start_sidecar, tmp_path):
    beta = sidecar.stub(BETA_TOKEN)
    for i in range(3):
        beta.CreateAgent(pb.CreateAgentRequest(agent_id=f"b{i}"))
    error = rpc_error(beta.CreateAgent, pb.CreateAgentRequest(agent_id="b3"))
    assert error.code() == C.RESOURCE_EXHAUSTED and "max_agents = 3" in error.details()
    error = rpc_error(beta.Fork, pb.ForkRequest(agent_id="b0", task="t"))
    assert error.code() == C.RESOURCE_EXHAUSTED and "max_agents" in error.details()
    # Alpha has no such limit.
    alpha = sidecar.stub(ALPHA_TOKEN)
    for i in range(4):
        alpha.CreateAgent(pb.CreateAgentRequest(agent_id=f"a{i}"))

    big = "x" * 5000
    error = rpc_error(beta.AppendUser, pb.AppendUserRequest(agent_id="b0", content=big))
    assert error.code() == C.RESOURCE_EXHAUSTED and "max_request_bytes = 4096" in error.details()
    assert alpha.AppendUser(pb.AppendUserRequest(agent_id="a0", content=big)).segment_id
    stats = beta.Stats(pb.StatsRequest(agent_id="b0"))
    assert stats.segments == 1  # the refused message changed nothing

    beta.DeleteAgent(pb.DeleteAgentRequest(agent_id="b2"))
    beta.CreateAgent(pb.CreateAgentRequest(agent_id="b3"))


def test_concurrent_completions_limit(tmp_path, start_sim, start_sidecar):
    slow = start_sim(None, ["--output-tokens", "40", "--decode-us", "50000"])
    sidecar = start_sidecar(["--config", str(tenant_config(tmp_path, slow.base_url))],
                            env={"STRATA_SIDECAR_TEST_KEY": UPSTREAM_KEY})
    beta = sidecar.stub(BETA_TOKEN)
    alpha = sidecar.stub(ALPHA_TOKEN)
    for stub, ids in ((beta, ("b0", "b1")), (alpha, ("a0",))):
        for agent_id in ids:
            stub.CreateAgent(pb.CreateAgentRequest(agent_id=agent_id))
    started = threading.Event()

    def first():
        events = []
        for event in beta.Complete(pb.CompleteRequest(agent_id="b0", user_message="slow one")):
            events.append(event)
            started.set()
        return events

    running = Background(first)
    running.start()
    assert started.wait(30), "the first completion produced no delta"
    error = rpc_error(complete, beta, "b1", "second")
    assert error.code() == C.RESOURCE_EXHAUSTED
    assert "max_concurrent_completions = 1" in error.details() and "beta" in error.details()
    # Another tenant is not limited by beta's completions.
    _, turn = complete(alpha, "a0", "alpha's")
    assert turn.finish_reason in ("stop", "length")
    running.join(60)
    assert running.error is None and running.result[-1].HasField("turn")
    # The slot is free again.
    _, turn = complete(beta, "b1", "now")  # the refused call appended nothing
    assert turn.record.code == "OK"


def test_secrets_never_appear(tmp_path, sidecar):
    alpha = sidecar.stub(ALPHA_TOKEN)
    seen = []
    seen.append(alpha.CreateAgent(pb.CreateAgentRequest(agent_id="s1")))
    _, turn = complete(alpha, "s1", "hello")
    seen.append(turn)
    assert turn.record.code == "OK"
    seen.append(alpha.Records(pb.RecordsRequest(agent_id="s1")))
    seen.append(alpha.OpenAgent(pb.OpenAgentRequest(agent_id="s1")))
    seen.append(alpha.Stats(pb.StatsRequest(agent_id="s1")))
    for token in (BETA_TOKEN + "x", "Bearer " + ALPHA_TOKEN, ALPHA_TOKEN[:-1]):
        error = rpc_error(sidecar.stub(token).ListAgents, pb.ListAgentsRequest())
        seen.append(error.details())
    error = rpc_error(alpha.CreateAgent, pb.CreateAgentRequest(
        agent_id="s2", config_json=json.dumps({"endpoint": {"api_key_env": "STRATA_SIDECAR_TEST_KEY"}})))
    seen.append(error.details())
    sidecar.close()
    texts = [str(m) for m in seen] + [sidecar.output()]
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("sidecar.db*"))
    for secret in (UPSTREAM_KEY, ALPHA_TOKEN, BETA_TOKEN):
        for text in texts:
            assert secret not in text
        assert secret.encode() not in stored
    assert turn.record.agent_id == "s1" and sidecar.output()  # something was checked


def test_prefix_cache_is_not_shared_across_tenants(sidecar):
    """The same prompt from two tenants: the server (strata-sim, which salts its prefix cache
    with cache_salt like vLLM) reuses it within a tenant, never across."""
    prompt = "You are a careful reviewer. " * 100  # under beta's 4096-byte request limit
    alpha = sidecar.stub(ALPHA_TOKEN)
    beta = sidecar.stub(BETA_TOKEN)
    for stub, agent_id in ((alpha, "first"), (alpha, "second"), (beta, "first")):
        stub.CreateAgent(pb.CreateAgentRequest(agent_id=agent_id, spec=pb.AgentSpec(
            system_prompts=[prompt])))
    _, first = complete(alpha, "first", "Review the patch.")
    _, same_tenant = complete(alpha, "second", "Review the patch.")
    _, other_tenant = complete(beta, "first", "Review the patch.")
    assert first.record.cached_tokens_reported == 0
    assert same_tenant.record.cached_tokens_reported > 300  # alpha's prefix, reused
    assert other_tenant.record.cached_tokens_reported == 0   # same bytes, another tenant


def flood_config(tmp_path, upstream, lease_wait_ms):
    return write_config(tmp_path, {
        "upstream": upstream, "max_threads": 8, "lease_wait_ms": lease_wait_ms,
        "tenants": [
            {"name": "alpha", "token_sha256": [sha256_hex(ALPHA_TOKEN)],
             "limits": {"max_concurrent_calls": 4}},
            {"name": "beta", "token_sha256": [sha256_hex(BETA_TOKEN)]},
        ]}, name=f"flood-{lease_wait_ms}.json")


def start_long_completion(stub, agent_id):
    """A Complete that runs for a minute (it holds its agent's lease), started and running."""
    call = stub.Complete(pb.CompleteRequest(agent_id=agent_id, user_message="a long answer"))
    first = next(call)
    assert first.HasField("delta")
    return call


def test_one_tenant_cannot_take_every_thread(tmp_path, start_sim, start_sidecar):
    # 600 tokens at 100 ms: the Complete holds agent "a" for a minute, and every Stats on "a"
    # waits for it. The gRPC pool has 8 threads; alpha floods 24 Stats at once.
    slow = start_sim(None, ["--output-tokens", "600", "--decode-us", "100000"])
    sidecar = start_sidecar(["--config", str(flood_config(tmp_path, slow.base_url, 60000))])
    alpha = sidecar.stub(ALPHA_TOKEN)
    beta = sidecar.stub(BETA_TOKEN)
    alpha.CreateAgent(pb.CreateAgentRequest(agent_id="a"))
    beta.CreateAgent(pb.CreateAgentRequest(agent_id="b"))
    running = start_long_completion(alpha, "a")
    flood = [Background(lambda: alpha.Stats(pb.StatsRequest(agent_id="a"), timeout=90))
             for _ in range(24)]
    for call in flood:
        call.start()
    # Alpha's calls beyond max_concurrent_calls are refused at once, naming the limit; the few it
    # may hold wait on the lease, each on one thread.
    refused = []
    for call in flood:
        call.join(5)
        if not call.is_alive():
            assert isinstance(call.error, grpc.RpcError), call.error
            assert call.error.code() == C.RESOURCE_EXHAUSTED
            refused.append(call.error.details())
    assert len(refused) >= 20
    assert any('tenant "alpha" has 4 calls in progress, its limit max_concurrent_calls = 4'
               in details for details in refused), refused
    # Beta is served meanwhile, while alpha's completion still holds its agent.
    for _ in range(8):
        assert beta.Stats(pb.StatsRequest(agent_id="b"), timeout=20).segments >= 0
    assert [a.agent_id for a in beta.ListAgents(pb.ListAgentsRequest(), timeout=20).agents] == \
        ["b"]
    assert running.running()
    running.cancel()
    for call in flood:
        call.join(60)
        assert call.error is None or call.error.code() == C.RESOURCE_EXHAUSTED


def test_waiting_for_a_busy_agent_is_bounded(tmp_path, start_sim, start_sidecar):
    slow = start_sim(None, ["--output-tokens", "600", "--decode-us", "100000"])
    sidecar = start_sidecar(["--config", str(flood_config(tmp_path, slow.base_url, 300))])
    alpha = sidecar.stub(ALPHA_TOKEN)
    alpha.CreateAgent(pb.CreateAgentRequest(agent_id="a"))
    running = start_long_completion(alpha, "a")
    error = rpc_error(alpha.Stats, pb.StatsRequest(agent_id="a"), timeout=30)
    assert error.code() == C.UNAVAILABLE
    assert 'agent "a" is busy: another call has held it for lease_wait_ms = 300 ms' in \
        error.details()
    running.cancel()
    # Once the cancelled completion has ended, the agent serves again (polled: until then each
    # call gives up after 300 ms).
    for _ in range(200):
        try:
            records = alpha.Records(pb.RecordsRequest(agent_id="a"), timeout=30).records
            break
        except grpc.RpcError as e:
            assert e.code() == C.UNAVAILABLE, e
            time.sleep(0.05)
    assert [r.code for r in records] == ["CANCELLED"]
