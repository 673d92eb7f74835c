"""asyncio forms: complete_async / run_async run off the event loop; cancelling the task cancels
the request in flight through strata's CancellationToken."""

import asyncio

import pytest

import strata

STALL = {"x-strata-sim-fault": "stall,after=2,delay_ms=600000"}  # in flight for 10 minutes


def make_agent(sim, tmp_path, agent_id="a"):
    return strata.Agent.create({"identity": {"id": agent_id},
                                "endpoint": {"base_url": sim.base_url},
                                "store_path": str(tmp_path / "agents.db")})


def test_complete_async_and_run_async_return_what_the_blocking_calls_return(start_sim, tmp_path):
    sim = start_sim([{"role": "assistant", "content": "async answer"}])
    first, second = make_agent(sim, tmp_path, "a1"), make_agent(sim, tmp_path, "a2")
    first.append_user("question")

    async def main():
        return await asyncio.gather(first.complete_async(), second.run_async("question"))

    turn, run = asyncio.run(main())
    assert isinstance(turn, strata.Turn) and turn.response.content == "async answer"
    assert isinstance(run, strata.RunResult) and run.answer == "async answer"


def test_cancelling_the_task_stops_the_request(start_sim, tmp_path):
    sim = start_sim([{"role": "assistant", "content": "a long answer " * 20}], "--chunk-bytes", "4")
    agent = make_agent(sim, tmp_path)
    agent.append_user("question")
    before = agent.messages()

    async def main():
        loop = asyncio.get_running_loop()
        in_flight = asyncio.Event()
        deltas = []

        def on_delta(delta):  # runs on the worker thread
            deltas.append(delta)
            loop.call_soon_threadsafe(in_flight.set)

        task = asyncio.create_task(agent.complete_async(on_delta=on_delta, headers=STALL))
        await in_flight.wait()  # the answer has started streaming, then the simulator stalls
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return deltas

    deltas = asyncio.run(asyncio.wait_for(main(), timeout=300))
    assert deltas and "".join(d.text for d in deltas) != "a long answer " * 20
    assert agent.messages() == before  # nothing appended: the request was cancelled
    # The agent is idle again (a call still stalled would hold the agent's lock for 10 minutes).
    assert agent.complete().response.content == "a long answer " * 20


def test_a_cancellation_token_cancels_a_blocking_call_from_another_thread(start_sim, tmp_path):
    import threading
    sim = start_sim([{"role": "assistant", "content": "x" * 100}], "--chunk-bytes", "4")
    agent = make_agent(sim, tmp_path)
    agent.append_user("question")
    token = strata.CancellationToken()
    assert not token.cancelled
    streaming = threading.Event()

    def on_delta(delta):
        streaming.set()

    canceller = threading.Thread(target=lambda: (streaming.wait(), token.cancel()))
    canceller.start()
    with pytest.raises(strata.Cancelled):
        agent.complete(on_delta=on_delta, cancel=token, headers=STALL)
    canceller.join()
    assert token.cancelled
    assert agent.messages()[-1]["role"] == "user"


def test_ctrl_c_during_a_streaming_call_cancels_it(start_sim, tmp_path):
    import os
    import signal
    import threading
    # A slow stream (one byte per chunk, 5 ms per token): fragments keep arriving while SIGINT is
    # delivered to this process; the next fragment sees it and cancels the request.
    sim = start_sim([{"role": "assistant", "content": "y" * 4000}], "--chunk-bytes", "1",
                    "--decode-us", "5000")
    agent = make_agent(sim, tmp_path)
    agent.append_user("question")
    before = agent.messages()
    streaming = threading.Event()
    killer = threading.Thread(target=lambda: (streaming.wait(), os.kill(os.getpid(), signal.SIGINT)))
    killer.start()
    deltas = []

    def on_delta(delta):
        deltas.append(delta)
        streaming.set()

    with pytest.raises(KeyboardInterrupt):
        agent.complete(on_delta=on_delta)
    killer.join()
    assert len("".join(d.text for d in deltas)) < 4000
    assert agent.messages() == before


def test_eight_agents_are_in_flight_at_once_on_stratas_executor(start_sim, tmp_path):
    # The simulator holds each request until 8 have arrived: every answer says all 8 arrived only
    # if the 8 run_async calls were in flight together (asyncio's default executor has
    # min(32, CPUs + 4) workers: 6 on 2 CPUs, and the held requests would time out).
    sim = start_sim(None, "--hold-until", "8", "--hold-timeout-ms", "60000")
    assert strata.async_workers() >= 8

    async def main():
        agents = await asyncio.gather(*[
            strata.Agent.create_async({"identity": {"id": f"agent-{i}"},
                                       "endpoint": {"base_url": sim.base_url}})
            for i in range(8)])
        return await asyncio.gather(*[a.run_async("question") for a in agents])

    results = asyncio.run(asyncio.wait_for(main(), timeout=300))
    assert [r.answer for r in results] == ["all 8 requests arrived"] * 8


def test_the_executor_size_is_an_option(start_sim, tmp_path):
    sim = start_sim(None, "--hold-until", "3", "--hold-timeout-ms", "3000")
    strata.set_async_workers(2)
    try:
        assert strata.async_workers() == 2

        async def main():
            agents = [make_agent(sim, tmp_path, f"s{i}") for i in range(3)]
            return await asyncio.gather(*[a.run_async("question") for a in agents])

        answers = sorted(r.answer for r in asyncio.run(asyncio.wait_for(main(), timeout=300)))
        # Two workers: two requests wait in the simulator until its hold gives up; the third is
        # sent only when one of them has its answer. Each held request's hold gives up 3 s after
        # it arrived, so when the second arrived later than the third takes to arrive after the
        # first's answer (a loaded machine), the third finds it still held and both say all 3
        # arrived; the first can never. With three workers all three would.
        timed_out = "hold timed out with 2 of 3 requests arrived"
        assert timed_out in answers
        assert set(answers) <= {"all 3 requests arrived", timed_out}
        with pytest.raises(ValueError, match="workers must be an int >= 1"):
            strata.set_async_workers(0)
    finally:
        strata.set_async_workers(64)


def test_open_async_reopens_a_stored_agent(tmp_path):
    db = str(tmp_path / "agents.db")
    strata.Agent.create({"identity": {"id": "stored"}, "store_path": db}).set_system_prompt("hi")
    agent = asyncio.run(strata.Agent.open_async(db, "stored"))
    assert agent.messages()[0]["content"] == "hi"
