"""Ctrl-C during a non-streaming call: the request waits for the whole answer with the GIL released
and no callback into Python, so nothing would look at Python's SIGINT flag until it returned.
A child interpreter blocks in `complete` against a strata-sim that delays its first byte by ten
minutes; SIGINT must raise KeyboardInterrupt in it long before that, cancel the request, and leave
the agent (or context) as it was, ready for the next call."""

import signal
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

SLOW = "slow-first-byte,delay_ms=600000"  # the answer's first byte after 10 minutes

CHILD = textwrap.dedent("""
    import sys, time
    import strata

    kind, address, store = sys.argv[1:4]
    slow = {"x-strata-sim-fault": %r}
    if kind == "agent":
        target = strata.Agent.create({"identity": {"id": "interrupted"},
                                      "endpoint": {"base_url": address, "stream": False,
                                                   "max_attempts": 1},
                                      "store_path": store})
        target.append_user("question")
        call = lambda headers: target.complete(headers=headers)
    else:
        client = strata.Client(strata.GrpcTransport(address, max_attempts=1), stream=False)
        target = strata.Context({"identity": {"id": "interrupted"}})
        target.append_user("question")
        call = lambda headers: client.complete(target, headers=headers)
    before = target.messages()
    print("calling", flush=True)
    started = time.monotonic()
    try:
        call(slow)
        print("returned", flush=True)
    except KeyboardInterrupt:
        print(f"KeyboardInterrupt after {time.monotonic() - started:.2f} s", flush=True)
    assert target.messages() == before, "the interrupted call changed the context"
    answer = call({})
    content = answer.response.content
    print("next call:", content, flush=True)
""" % SLOW)


def wait_until_the_simulator_has_the_request(sim) -> None:
    """Polls strata-sim's /metrics until it has planned one request (it does so on arrival, before
    the first-byte delay of the fault), so that SIGINT comes while the call is blocked on it."""
    metrics = sim.base_url[:-len("/v1")] + "/metrics"
    deadline = time.monotonic() + 60  # bounds a broken run only
    while time.monotonic() < deadline:
        with urllib.request.urlopen(metrics, timeout=10) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("strata_sim_requests_processed_total ") and \
                        float(line.split()[1]) >= 1:
                    return
        time.sleep(0.01)
    raise AssertionError("strata-sim never received the request")


@pytest.mark.parametrize("kind", ["agent", "client"])
def test_sigint_cancels_a_blocked_non_streaming_call(kind, start_sim, tmp_path, subprocess_env):
    sim = start_sim([{"role": "assistant", "content": "the answer"}], grpc=(kind == "client"))
    address = sim.base_url if kind == "agent" else sim.grpc_target
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen([sys.executable, str(script), kind, address, str(tmp_path / "a.db")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=subprocess_env)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "calling\n", child.stderr.read() if child.stderr else ""
        wait_until_the_simulator_has_the_request(sim)  # it stalls there for 10 minutes
        child.send_signal(signal.SIGINT)
        # Without the cancellation the call would return after the transport's first-byte timeout
        # (5 minutes): far beyond this wait.
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("KeyboardInterrupt after "), out
    assert lines[1] == "next call: the answer", out
    if kind == "agent":
        import strata
        codes = [r.code for r in strata.Store.open(str(tmp_path / "a.db")).requests("interrupted")]
        assert codes == ["OK", "CANCELLED"]  # newest first: the interrupted request was recorded


def test_a_wakeup_fd_set_before_gets_the_signal_and_is_restored(start_sim, tmp_path):
    # asyncio (and other event loops) point Python's wakeup fd at their own pipe: during the call
    # the watch forwards the bytes there, and the fd is theirs again afterwards.
    import os
    import threading

    import strata
    sim = start_sim([{"role": "assistant", "content": "the answer"}])
    agent = strata.Agent.create({"identity": {"id": "forwarded"},
                                 "endpoint": {"base_url": sim.base_url, "stream": False,
                                              "max_attempts": 1}})
    agent.append_user("question")
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    original = signal.set_wakeup_fd(write_fd)
    # SIGINT once the request is at the simulator, where it stalls for ten minutes.
    timer = threading.Thread(target=lambda: (wait_until_the_simulator_has_the_request(sim),
                                             os.kill(os.getpid(), signal.SIGINT)))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            agent.complete(headers={"x-strata-sim-fault": SLOW})
        assert signal.set_wakeup_fd(write_fd) == write_fd  # restored
        assert bytes([signal.SIGINT]) in os.read(read_fd, 64)  # forwarded
    finally:
        timer.join()
        signal.set_wakeup_fd(original)
        os.close(read_fd)
        os.close(write_fd)
    assert agent.complete().response.content == "the answer"
