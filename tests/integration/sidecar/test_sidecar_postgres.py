"""Several strata-sidecars sharing one PostgreSQL store: each agent is served by one of them at a
time (its lease), a call for an agent another live sidecar serves waits and then fails UNAVAILABLE
naming it, a drained sidecar releases its agents at once, a SIGKILLed one's agents are taken over
after the lease TTL with every acknowledged turn kept once, and a database restart makes calls
fail UNAVAILABLE and succeed again afterwards.

The PostgreSQL server is a real one (Debian's postgresql, installed by scripts/setup), started in
a temporary directory on a free port, as `nobody` when the test runs as root; a missing server is
a failure."""

from __future__ import annotations

import glob
import json
import os
import pathlib
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import grpc
import pytest

from sidecar_testing import Background, Sidecar, complete, pb, rpc_error

TTL_MS = 500  # --lease-ttl-ms of every sidecar here: takeovers after a SIGKILL take this long


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """A PostgreSQL server of one test (trust authentication, fsync off)."""

    def __init__(self):
        initdb = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        assert initdb, "no PostgreSQL server under /usr/lib/postgresql: run scripts/setup"
        self.bin = pathlib.Path(initdb[-1]).parent
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="strata-pg-"))
        self.as_user = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            self.as_user = ["runuser", "-u", "nobody", "--"]
        self.data = self.dir / "data"
        self.run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                 "--no-sync")
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.start()

    def run(self, program: str, *args: str) -> None:
        subprocess.run([*self.as_user, str(self.bin / program), *args], check=True,
                       capture_output=True)

    def start(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"), "-o",
                 f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off",
                 "-w", "start")

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def close(self) -> None:
        subprocess.run([*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m",
                        "immediate", "-w", "stop"], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def postgres():
    server = Postgres()
    yield server
    server.close()


def start_shared(tmp_path, sidecars, postgres, sim, extra=(), ttl_ms=TTL_MS):
    sidecar = Sidecar(tmp_path, ["--upstream", sim.base_url, "--lease-ttl-ms", str(ttl_ms),
                                 *extra], store=postgres.url)
    sidecars.append(sidecar)
    return sidecar


@pytest.fixture
def shared(tmp_path, postgres, start_sim):
    """Starts sidecars on one database and one strata-sim; `start.request_log` is the file where
    strata-sim writes every request body it receives (--request-log), one JSON line each."""
    sidecars = []
    request_log = tmp_path / "upstream-requests.jsonl"
    sim = start_sim(None, ["--output-tokens", "10", "--decode-us", "20000", "--request-log",
                           str(request_log)])

    def start(extra=(), ttl_ms=TTL_MS):
        return start_shared(tmp_path, sidecars, postgres, sim, extra, ttl_ms)

    start.request_log = request_log
    yield start
    for sidecar in sidecars:
        sidecar.close()


def user_messages(stub, agent_id: str):
    body = json.loads(stub.Build(pb.BuildRequest(agent_id=agent_id)).body)
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_an_agent_served_elsewhere_waits_then_names_its_server_and_drain_hands_it_over(shared):
    # A lease of a minute: only a release lets the second serve the agent within its wait.
    first = shared(ttl_ms=60000)
    second = shared(["--owner-wait-ms", "300", "--http-listen", "127.0.0.1:0"], ttl_ms=60000)
    assert "postgresql://postgres@127.0.0.1" in first.wait_for_output("serving ")
    stub = first.stub()
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="a"))
    complete(stub, "a", "served by the first")
    error = rpc_error(complete, second.stub(), "a", "refused")
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
    assert "is served by" in error.details() and "waited 300 ms" in error.details()
    # The OpenAI-compatible proxy answers 409 Conflict, naming the sidecar that serves it.
    output = second.wait_for_output("http listening on ")
    http = next(l for l in output.splitlines() if l.startswith("http listening on "))
    request = urllib.request.Request(
        f"http://{http[len('http listening on '):].strip()}/v1/chat/completions",
        data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode(),
        method="POST", headers={"Content-Type": "application/json", "X-Strata-Agent": "a"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == 409
    assert b"is served by" in refused.value.read()
    first.signal(signal.SIGTERM)  # drain: every lease released before exit
    assert first.wait() == 0
    # At once, within the 300 ms wait, long before the lease would lapse: it was released.
    complete(second.stub(), "a", "served by the second")
    assert user_messages(second.stub(), "a") == ["served by the first", "served by the second"]


def upstream_bodies(request_log: pathlib.Path):
    """The chat completion bodies strata-sim received, in order."""
    if not request_log.exists():
        return []
    return [json.loads(line)["body"] for line in request_log.read_text().splitlines()
            if line.strip()]


def last_user_message(body: str):
    messages = json.loads(body)["messages"]
    return messages[-1]["content"] if messages and messages[-1]["role"] == "user" else None


def upstream_body_ending_with(request_log: pathlib.Path, user_message: str) -> str:
    """The last body strata-sim received whose last message is `user_message` (it logs a request
    as it answers, so the line may follow the answer by a moment)."""
    deadline = time.time() + 30
    while True:
        found = [b for b in upstream_bodies(request_log) if last_user_message(b) == user_message]
        if found:
            return found[-1]
        assert time.time() < deadline, f"strata-sim logged no request ending with {user_message!r}"
        time.sleep(0.01)


def up_to_last_message(body: str) -> str:
    """`body`'s bytes up to the end of its last message: what the next turn's request must start
    with (it only appends messages, so a prefix cache keeps every token of it)."""
    start = body.index('"messages":') + len('"messages":')
    start += len(body[start:]) - len(body[start:].lstrip())
    _, end = json.JSONDecoder().raw_decode(body, start)
    assert body[end - 1] == "]"
    return body[:end - 1]


def test_sigkill_of_the_serving_sidecar_mid_turn_loses_no_acknowledged_turn(shared):
    serving, other = shared(), shared()
    serving.stub().CreateAgent(pb.CreateAgentRequest(agent_id="k"))
    acknowledged = []
    for round_ in range(30):
        message = f"turn {round_}"
        complete(serving.stub(), "k", message)
        acknowledged.append(message)
        # A turn in flight (the upstream takes ~200 ms) when the serving sidecar is killed.
        in_flight = Background(lambda: complete(serving.stub(), "k", f"in flight {round_}"))
        in_flight.start()
        time.sleep(0.05)
        serving.signal(signal.SIGKILL)
        serving.wait()
        in_flight.join(timeout=30)
        # The other serves the agent once the killed one's lease lapsed (it waits for it).
        after = f"after kill {round_}"
        complete(other.stub(), "k", after)
        acknowledged.append(after)
        # The taking-over sidecar renders the agent exactly as the killed one did: its first
        # upstream request starts with the bytes of the last acknowledged one, so the model
        # server's prefix cache keeps serving the conversation.
        previous = upstream_body_ending_with(shared.request_log, message)
        taken_over = upstream_body_ending_with(shared.request_log, after)
        assert taken_over.startswith(up_to_last_message(previous)), (previous, taken_over)
        stored = user_messages(other.stub(), "k")
        assert len(stored) == len(set(stored)), stored  # none twice
        assert [m for m in stored if not m.startswith("in flight")] == acknowledged
        serving, other = other, shared()  # a replacement joins; the survivor serves now


def test_a_database_restart_fails_calls_unavailable_and_loses_nothing_acknowledged(
        shared, postgres):
    sidecar = shared()
    stub = sidecar.stub()
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="r"))
    complete(stub, "r", "before the restart")
    postgres.stop()
    error = rpc_error(complete, stub, "r", "while down")
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
    postgres.start()
    deadline = time.time() + 30
    while True:
        try:
            complete(stub, "r", "after the restart")
            break
        except grpc.RpcError as retry:
            assert retry.code() == grpc.StatusCode.UNAVAILABLE, retry.details()
            assert time.time() < deadline, retry.details()
            time.sleep(0.1)
    assert user_messages(stub, "r") == ["before the restart", "after the restart"]
