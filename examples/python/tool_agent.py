"""A tool-using strata agent in Python.

Start the endpoint simulator with the scripted replies next to this file, then run the agent:

    strata-sim --port 8000 --trajectory examples/python/tool_agent_trajectory.jsonl &
    python3 examples/python/tool_agent.py --endpoint http://127.0.0.1:8000/v1 --store agents.db

The model (here the simulator) asks for a file; the Python tool reads it from this directory; the
answer comes back with the request record of each turn. Run it again with the same --store and the
agent is reopened from the store instead of created.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import strata

HERE = pathlib.Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True, help="OpenAI-compatible base URL, e.g. .../v1")
    parser.add_argument("--store", default="", help="SQLite file keeping the agent across runs")
    parser.add_argument("--id", default="python-example", help="agent id")
    args = parser.parse_args(argv)

    try:
        if not args.store:
            raise strata.NotFound("no store")
        agent = strata.Agent.open(args.store, args.id, endpoint={"base_url": args.endpoint})
        print(f"reopened {agent.id} with {len(agent.messages())} messages")
    except strata.NotFound:
        agent = strata.Agent.create({
            "identity": {"id": args.id},
            "endpoint": {"base_url": args.endpoint},
            "store_path": args.store,
            "budget": {"window": 32768},
        })
        agent.set_system_prompt("You answer questions about the files of this directory.")

    @agent.tool("read_file", {
        "description": "Reads a file of the example directory",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]},
    })
    def read_file(path: str) -> str | strata.ToolOutput:
        target = (HERE / path).resolve()
        if HERE not in target.parents:
            return strata.ToolOutput(f"{path} is outside the example directory", is_error=True)
        return target.read_text()

    try:
        result = agent.run("What does tool_agent.py do?",
                           on_delta=lambda d: print(d.text, end="", flush=True)
                           if d.kind == "content" else None)
    except strata.Unavailable as e:
        print(f"\nthe endpoint is unreachable: {e.message}", file=sys.stderr)
        return 1
    print()
    for turn in result.turns:
        r = turn.record
        print(f"turn: input {r.input_tokens} tokens, cached {r.cached_tokens_reported} "
              f"(predicted {r.cached_tokens_predicted}), {r.total_ms:.1f} ms, {r.finish_reason}")
    print(f"answer after {result.tool_calls} tool call(s): {result.answer}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
