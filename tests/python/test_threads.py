"""The GIL is released in long C++ calls: shown by behaviour that cannot happen with the GIL held,
never by timing.

With the switch interval raised to an hour, a thread holding the GIL keeps it until it blocks or a
C++ call releases it. A worker sets `started`, enters the C++ call, and sets `done` only after the
call returns. The main thread, waiting for `started`, can run again before `done` is set only if
the call released the GIL: with the GIL held throughout, the worker would set `done` before
anything else ran."""

import sys
import threading

import pytest

import strata
from conftest import SPM_MODEL

TEXT = "The quick brown fox jumps over the lazy dog, again and again. " * 3000


@pytest.fixture
def long_switch_interval():
    previous = sys.getswitchinterval()
    sys.setswitchinterval(3600.0)
    yield
    sys.setswitchinterval(previous)


def runs_with_gil_released(call, tries=5):
    """True when another Python thread ran while `call` (on a worker thread) was in C++.

    A short C++ call may end before the operating system schedules the waiting thread, so the
    check is repeated: a call that releases the GIL is seen to do so in one of the tries, while a
    call that holds it can never be (the worker keeps the GIL until it finishes).
    """
    for _ in range(tries):
        started = threading.Event()
        done = []
        result = []

        def worker():
            started.set()
            result.append(call())
            done.append(True)

        thread = threading.Thread(target=worker)
        thread.start()
        started.wait()
        progressed_during_call = not done  # the main thread runs; the worker has not finished
        thread.join()
        assert result, "the call did not return"
        if progressed_during_call:
            return True
    return False


def test_tokenizer_count_releases_the_gil(long_switch_interval):
    tok = strata.Tokenizer.from_spec(f"spm:{SPM_MODEL}")
    assert runs_with_gil_released(lambda: tok.count(TEXT))


def test_tokenizer_encode_releases_the_gil(long_switch_interval):
    tok = strata.Tokenizer.from_spec(f"spm:{SPM_MODEL}")
    assert runs_with_gil_released(lambda: tok.encode(TEXT))


def test_the_check_detects_a_call_that_holds_the_gil(long_switch_interval):
    # The same check on pure Python work (which holds the GIL) must say so: the test above could
    # not pass by accident.
    assert not runs_with_gil_released(lambda: sum(len(w) for w in TEXT.split()))


def test_render_and_trim_release_the_gil(long_switch_interval):
    ct = strata.ChatTemplate.glm5()
    messages = [{"role": "user", "content": TEXT * 10}]
    assert runs_with_gil_released(lambda: ct.render(messages))
    many = [{"role": "user" if i % 2 == 0 else "assistant", "content": TEXT[:5000]}
            for i in range(60)]
    assert runs_with_gil_released(lambda: strata.trim_messages(many, 20000))


def test_agent_complete_releases_the_gil(long_switch_interval, start_sim, tmp_path):
    sim = start_sim([{"role": "assistant", "content": "answer"}])
    agent = strata.Agent.create({"identity": {"id": "a"}, "endpoint": {"base_url": sim.base_url},
                                 "store_path": str(tmp_path / "a.db")})
    agent.append_user("question")
    assert runs_with_gil_released(lambda: agent.complete())
    assert agent.messages()[-1] == {"role": "assistant", "content": "answer"}


def test_parallel_tokenization_gives_the_sequential_counts():
    tok = strata.Tokenizer.from_spec(f"spm:{SPM_MODEL}")
    texts = [TEXT[i * 1000:] for i in range(4)]
    expected = [tok.count(t) for t in texts]
    got = [0] * 4

    def work(i):
        got[i] = tok.count(texts[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == expected


def test_agents_complete_in_parallel_threads(start_sim, tmp_path):
    sim = start_sim([{"role": "assistant", "content": "parallel answer"}])
    agents = [strata.Agent.create({"identity": {"id": f"a{i}"},
                                   "endpoint": {"base_url": sim.base_url},
                                   "store_path": str(tmp_path / "agents.db")}) for i in range(4)]
    errors = []

    def work(agent):
        try:
            agent.run(f"question for {agent.id}")
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for agent in agents:
        assert agent.messages()[-1] == {"role": "assistant", "content": "parallel answer"}
