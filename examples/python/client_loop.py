"""An agent loop on the lower level: a strata.Context with a budget, a strata.Client over HTTP or
gRPC, and the program's own tool dispatch (what strata.Agent does for you).

    strata-sim --port 8000 --grpc-port 30001 --chat-template glm5 \\
        --trajectory examples/python/tool_agent_trajectory.jsonl &
    cd examples/python
    python3 client_loop.py --endpoint http://127.0.0.1:8000/v1
    python3 client_loop.py --grpc 127.0.0.1:30001

Prints each request's record (input tokens, cached tokens reported and predicted) and the answer.
"""

import argparse
import json
import sys
from typing import Callable, Dict

import strata

READ_FILE = {"type": "function", "function": {
    "name": "read_file", "description": "Reads a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}


def read_file(path: str) -> str:
    with open(path) as f:
        return f.read()


TOOLS: Dict[str, Callable[..., str]] = {"read_file": read_file}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--endpoint", help="base URL of an OpenAI-compatible endpoint")
    where.add_argument("--grpc", help="host:port of SGLang's gRPC service (or strata-sim's)")
    parser.add_argument("--question", default="What does tool_agent.py do?")
    parser.add_argument("--max-turns", type=int, default=8)
    args = parser.parse_args()

    transport: strata.Transport = (strata.GrpcTransport(args.grpc) if args.grpc
                                   else strata.HttpTransport(args.endpoint))
    client = strata.Client(transport, backend="sglang" if args.grpc else "vllm")
    context = strata.Context({"identity": {"id": "client-loop"},
                              "budget": strata.Budget(window=32768)})
    context.set_system_prompt("You answer questions about the files of this directory.")
    context.set_tools([READ_FILE])
    context.append_user(args.question)
    try:
        for _ in range(args.max_turns):
            done = client.complete(context)
            record = done.record
            print(f"request {record.request_id}: {record.input_tokens} input tokens, "
                  f"{record.cached_tokens_reported} cached (predicted "
                  f"{record.cached_tokens_predicted}) over {transport.name}")
            if not done.response.tool_calls:
                print("answer:", done.response.content)
                return 0
            for call in done.response.tool_calls:
                function = call["function"]
                handler = TOOLS.get(function["name"])
                try:
                    if handler is None:
                        raise LookupError(f"no tool named {function['name']}")
                    result, is_error = handler(**json.loads(function["arguments"])), False
                except Exception as e:  # the model sees the error and may try again
                    result, is_error = f"{type(e).__name__}: {e}", True
                context.append_tool_result(call["id"], result, is_error=is_error)
    except strata.Error as e:
        print(f"strata: {e}", file=sys.stderr)
        return 1
    print(f"no answer within {args.max_turns} turns", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
