"""A short tool-using agent that keeps its context in strata-sidecar, over gRPC.

The sidecar holds the agent's context (system prompt, tools, history), renders cache-stable
requests, compacts and records them; this program only runs the tools. Stubs come from
proto/strata/v1/context_service.proto (the build generates them into
build/sdk/apps/strata-sidecar/python; or run grpc_tools/protoc yourself).

    strata-sidecar --grpc-listen 127.0.0.1:50051 --upstream http://127.0.0.1:8000/v1 &
    /usr/bin/python3 examples/python/sidecar_client.py --target 127.0.0.1:50051 \\
        "What does README.md say?"

With tenants configured, pass the tenant's token in STRATA_SIDECAR_TOKEN.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question")
    parser.add_argument("--target", default="127.0.0.1:50051", help="the sidecar's HOST:PORT")
    parser.add_argument("--agent", default="sidecar-example", help="agent id (created if new)")
    parser.add_argument("--root", default=".", help="directory read_file may read")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--ca", help="PEM of the CA that signed the sidecar's certificate (TLS)")
    parser.add_argument("--stubs", default=os.environ.get(
        "STRATA_SIDECAR_STUBS", str(REPO / "build" / "sdk" / "apps" / "strata-sidecar" / "python")),
        help="directory of context_service_pb2*.py")
    return parser.parse_args()


args = parse_args()
sys.path.insert(0, args.stubs)
import grpc  # noqa: E402  (Debian: python3-grpcio)
import context_service_pb2 as pb  # noqa: E402
import context_service_pb2_grpc as pb_grpc  # noqa: E402

READ_FILE = {"type": "function", "function": {
    "name": "read_file", "description": "Read a text file of the project.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}


def read_file(root: pathlib.Path, arguments: str) -> tuple[str, bool]:
    """The tool: (content, is_error). Only files under `root`."""
    try:
        path = (root / json.loads(arguments)["path"]).resolve()
    except (ValueError, KeyError, TypeError) as e:
        return f"bad arguments {arguments!r}: {e}", True
    if root.resolve() not in path.parents or not path.is_file():
        return f"no such file under {root}: {path.name}", True
    return path.read_text(errors="replace"), False


def main() -> int:
    token = os.environ.get("STRATA_SIDECAR_TOKEN")
    metadata = [("authorization", f"Bearer {token}")] if token else []
    if args.ca:
        credentials = grpc.ssl_channel_credentials(pathlib.Path(args.ca).read_bytes())
        channel = grpc.secure_channel(args.target, credentials)
    else:
        channel = grpc.insecure_channel(args.target)
    stub = pb_grpc.ContextServiceStub(channel)
    agent = args.agent

    try:
        stub.OpenAgent(pb.OpenAgentRequest(agent_id=agent), metadata=metadata)
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.NOT_FOUND:
            raise
        stub.CreateAgent(pb.CreateAgentRequest(agent_id=agent, spec=pb.AgentSpec(
            system_prompts=["You answer questions about a project by reading its files."])),
            metadata=metadata)
        stub.SetTools(pb.SetToolsRequest(agent_id=agent, tools_json=json.dumps([READ_FILE])),
                      metadata=metadata)

    message = args.question
    for _ in range(args.max_turns):
        turn = None
        for event in stub.Complete(pb.CompleteRequest(agent_id=agent, user_message=message),
                                   metadata=metadata):
            if event.HasField("delta") and event.delta.kind == pb.Delta.KIND_CONTENT:
                print(event.delta.text, end="", flush=True)
            elif event.HasField("turn"):
                turn = event.turn
        message = ""
        record = turn.record
        print(f"\n[request {record.request_id}: {record.input_tokens} input tokens, "
              f"{record.cached_tokens_predicted} predicted cached, finish {turn.finish_reason}]")
        if not turn.tool_calls:
            return 0
        for call in turn.tool_calls:
            if call.name == "read_file":
                content, is_error = read_file(pathlib.Path(args.root), call.arguments)
            else:
                content, is_error = f"unknown tool {call.name}", True
            print(f"[tool {call.name}({call.arguments}) -> {len(content)} bytes"
                  f"{', error' if is_error else ''}]")
            stub.AppendToolResult(pb.AppendToolResultRequest(
                agent_id=agent, tool_call_id=call.id, content=content, is_error=is_error),
                metadata=metadata)
    print(f"stopped after {args.max_turns} model calls")
    return 1


if __name__ == "__main__":
    sys.exit(main())
