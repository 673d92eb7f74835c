"""strata-sidecar against what a tenant or a wrong setting could do to the host: tokenizers only
from the operator's allow-list (no file of the server named by a tenant), settings every agent
would fail on refused at startup naming the flag, core dumps off by default, the upstream's
address hidden from tenants' records."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess

import grpc
import pytest

from sidecar_testing import REPO, SIDECAR, complete, pb, rpc_error, write_config

C = grpc.StatusCode
TINY_TOKENIZER = REPO / "tests" / "fuzz" / "corpus" / "tokenizer_json" / "bytelevel-bpe.json"


def run_sidecar(args, env=None, timeout=60):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([str(SIDECAR), *args], capture_output=True, text=True, timeout=timeout,
                          env=full_env)


def test_tenants_name_only_the_operators_tokenizers(tmp_path, start_sidecar):
    assert TINY_TOKENIZER.is_file()
    config = write_config(tmp_path, {"tokenizers": {"tiny": f"hf:{TINY_TOKENIZER}",
                                                    "rough": "estimate:3"}})
    sidecar = start_sidecar(["--config", str(config)])
    stub = sidecar.stub()

    made = stub.CreateAgent(pb.CreateAgentRequest(agent_id="a", spec=pb.AgentSpec(tokenizer="tiny")))
    # The tenant sees the name, never the operator's path.
    assert json.loads(made.config_json)["tokenizer"] == "tiny"
    assert str(TINY_TOKENIZER) not in made.config_json
    made = stub.CreateAgent(pb.CreateAgentRequest(agent_id="b", config_json=json.dumps(
        {"tokenizer": "rough"})))
    assert json.loads(made.config_json)["tokenizer"] == "estimate:3"
    # Round trip: the document a tenant was shown makes the same agent again.
    shown = json.loads(stub.OpenAgent(pb.OpenAgentRequest(agent_id="a")).config_json)
    del shown["identity"]
    again = stub.CreateAgent(pb.CreateAgentRequest(agent_id="c", config_json=json.dumps(shown)))
    assert json.loads(again.config_json)["tokenizer"] == "tiny"

    # A readable file, a missing one, one only the sidecar's user may read, the sidecar's own
    # configuration and the allowed file's own path: one answer for all, with no hash.
    secret = tmp_path / "secret.json"
    secret.write_text('{"model": {"type": "BPE"}}')
    secret.chmod(0o600)
    files = ["/etc/passwd", "/nonexistent/tokenizer.json", str(secret), str(config),
             "/proc/self/environ", str(TINY_TOKENIZER), "/dev/zero"]
    expected = (' is not one of the allowed tokenizers: rough, tiny (or a spec that reads no '
                'file: estimate, estimate:BYTES_PER_TOKEN, estimate:FAMILY)')
    for path in files:
        for spec in (f"hf:{path}", f"spm:{path}"):
            error = rpc_error(stub.CreateAgent, pb.CreateAgentRequest(
                agent_id="x", spec=pb.AgentSpec(tokenizer=spec)))
            assert error.code() == C.INVALID_ARGUMENT, spec
            assert_refused(error.details(), 'spec.tokenizer "', spec, expected)
            error = rpc_error(stub.CreateAgent, pb.CreateAgentRequest(
                agent_id="x", config_json=json.dumps({"tokenizer": spec})))
            assert error.code() == C.INVALID_ARGUMENT, spec
            assert_refused(error.details(), 'config_json: tokenizer "', spec, expected)
            assert not re.search(r"[0-9a-f]{64}", error.details())
    assert [a.agent_id for a in stub.ListAgents(pb.ListAgentsRequest()).agents] == ["a", "b", "c"]


def assert_refused(details, prefix, spec, expected):
    # The message quotes the spec (a long one cut, ending in "...") and says nothing else about
    # the file: the same text whether it exists, is unreadable or is missing.
    assert details.startswith(prefix) and details.endswith('"' + expected), details
    quoted = details[len(prefix):-len('"' + expected)]
    assert quoted == spec or (quoted.endswith("...") and spec.startswith(quoted[:-3])), details


def test_a_file_default_tokenizer_is_shown_as_default(tmp_path, start_sidecar):
    sidecar = start_sidecar(["--tokenizer", f"hf:{TINY_TOKENIZER}"])
    stub = sidecar.stub()
    made = stub.CreateAgent(pb.CreateAgentRequest(agent_id="a"))
    assert json.loads(made.config_json)["tokenizer"] == "default"
    named = stub.CreateAgent(pb.CreateAgentRequest(agent_id="b", spec=pb.AgentSpec(
        tokenizer="default")))
    assert json.loads(named.config_json)["tokenizer"] == "default"


def test_records_do_not_show_the_upstream(start_sim, start_sidecar):
    sim = start_sim(None, ["--output-tokens", "5"])
    sidecar = start_sidecar(["--upstream", sim.base_url])
    stub = sidecar.stub()
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="a"))
    _, turn = complete(stub, "a", "hello")
    assert turn.record.code == "OK" and turn.record.endpoint == "upstream"
    records = stub.Records(pb.RecordsRequest(agent_id="a")).records
    assert [r.endpoint for r in records] == ["upstream"]
    assert sim.base_url not in str(records) and sim.base_url not in str(turn)


@pytest.mark.parametrize("args, env, message", [
    (["--backend", "tgi"], {}, '--backend (backend): unknown backend "tgi"'),
    (["--template", "chatml"], {}, "--template (template): "),
    (["--tokenizer", "hf:/nonexistent/tokenizer.json"], {}, "tokenizer (--tokenizer): cannot open"),
    (["--tokenizer", "hf:/dev/zero"], {}, "is a character device, not a regular file"),
    (["--upstream", "ftp://models.example/v1"], {},
     '--upstream (upstream): "ftp://models.example/v1" is not an http:// or https:// URL'),
    (["--upstream", "http://127.0.0.1:8000/v1", "--upstream-api-key-env", "STRATA_TEST_UNSET_KEY"],
     {}, "STRATA_TEST_UNSET_KEY is not set"),
    (["--upstream", "http://127.0.0.1:8000/v1", "--upstream-api-key-env", "STRATA_TEST_KEY"],
     {"STRATA_TEST_KEY": "sk-secret\r\n"}, "holds a control character"),
    (["--upstream", "http://models.example:8000/v1", "--upstream-api-key-env", "STRATA_TEST_KEY"],
     {"STRATA_TEST_KEY": "sk-secret"}, "sent in plain text to models.example"),
])
def test_settings_every_agent_would_fail_on_are_refused_at_startup(tmp_path, args, env, message):
    os.environ.pop("STRATA_TEST_UNSET_KEY", None)
    store = tmp_path / "x.db"
    result = run_sidecar(["--grpc-listen", "127.0.0.1:0", "--store", str(store), *args], env)
    assert result.returncode == 1, result.stderr
    assert message in result.stderr, result.stderr
    assert "sk-secret" not in result.stderr and "sk-secret" not in result.stdout
    assert "listening" not in result.stdout
    assert not store.exists()  # nothing was created


def test_a_fifo_tokenizer_is_refused_at_startup_without_waiting(tmp_path):
    fifo = tmp_path / "tokenizer.json"
    os.mkfifo(fifo)
    config = write_config(tmp_path, {"tokenizers": {"pipe": f"hf:{fifo}"}})
    # timeout: a sidecar that waited for a writer would fail the test, not hang it.
    result = run_sidecar(["--config", str(config), "--grpc-listen", "127.0.0.1:0",
                          "--store", str(tmp_path / "x.db")], timeout=30)
    assert result.returncode == 1
    assert f'tokenizers.pipe: "{fifo}" is a FIFO, not a regular file' in result.stderr


def core_limit(pid: int) -> str:
    with open(f"/proc/{pid}/limits") as limits:
        for line in limits:
            if line.startswith("Max core file size"):
                return " ".join(line.split()[4:6])
    raise AssertionError("no core limit in /proc/PID/limits")


def test_core_dumps_are_disabled_unless_allowed(start_sidecar):
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if hard == 0:
        pytest.skip("this process may not have core dumps (hard RLIMIT_CORE 0): nothing to "
                    "disable or keep")
    wanted = hard if hard != resource.RLIM_INFINITY else 1 << 30
    resource.setrlimit(resource.RLIMIT_CORE, (wanted, hard))
    try:
        default = start_sidecar([])
        assert core_limit(default.process.pid) == "0 0"
        allowed = start_sidecar(["--allow-core-dumps"], store=default.store.with_name("b.db"))
        assert core_limit(allowed.process.pid) != "0 0"
        allowed.wait_for_output("core dumps allowed")
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))
