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
