"""docs/sidecar.md is true: its configuration file starts a sidecar, its Python blocks run in
order against it, its flags exist, and the error line it shows is the one printed."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

from sidecar_testing import REPO, SIDECAR, STUBS, write_config

DOC = (REPO / "docs" / "sidecar.md").read_text()

TRAJECTORY = [
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "read_file", "arguments": "{\"path\": \"README.md\"}"}}]},
    {"role": "assistant", "content": "The README says hello."},
]


def blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", DOC, re.S)


def test_config_and_python_blocks_run(tmp_path, start_sim, start_sidecar):
    sim = start_sim(TRAJECTORY)
    config_text, _pools_text = blocks("json")
    config = write_config(tmp_path, json.loads(config_text), "doc-config.json")
    sidecar = start_sidecar(["--config", str(config), "--upstream", sim.base_url],
                            env={"UPSTREAM_API_KEY": "not-a-real-key"})
    program = tmp_path / "doc_blocks.py"
    python = blocks("python")
    assert len(python) >= 4
    program.write_text("\n".join(python))
    out = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(STUBS), "STRATA_SIDECAR_TARGET": sidecar.target,
             "STRATA_SIDECAR_TOKEN": "search-team-token", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "docs-agent 131072" in text
    assert "tool_calls ['read_file']" in text
    assert "The README says hello." in text
    assert "1 The README says hello." in text  # final_only: the Turn event alone
    assert 'StatusCode.NOT_FOUND no agent "no-such-agent"' in text
    # The second request was predicted to reuse the first one's prefix.
    built = [line for line in text.splitlines() if re.fullmatch(r"\d+ \d+", line)]
    assert built and int(built[0].split()[1]) > 0


def test_pools_block_starts(tmp_path, start_sidecar):
    # The "Length pools" example: accepted, and the sidecar runs without --upstream.
    _, pools_text = blocks("json")
    config = json.loads(pools_text)
    config["store"] = str(tmp_path / "pools.db")
    sidecar = start_sidecar(["--config", str(write_config(tmp_path, config, "pools.json"))])
    assert "length pools short (32768 tokens), long (1048576 tokens)" in sidecar.output()
    assert "--upstream is not needed" in sidecar.output()


def test_flags_in_the_table_exist():
    help_text = subprocess.run([str(SIDECAR), "--help"], capture_output=True, text=True,
                               timeout=30).stdout
    flags = set(re.findall(r"`(--[a-z-]+)", DOC))
    assert len(flags) >= 14
    for flag in flags:
        assert flag in help_text, flag


def test_the_shown_error_line(tmp_path):
    shown = next(line for line in DOC.splitlines()
                 if line.startswith("strata-sidecar: sidecar.json: "))
    good = {"name": "a", "token_sha256": ["a" * 64]}
    bad = {"name": "b", "token_sha256": ["b" * 64], "limits": {"max_agents": "ten"}}
    write_config(tmp_path, {"tenants": [good, bad]}, "sidecar.json")
    result = subprocess.run([str(SIDECAR), "--config", "sidecar.json"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert result.stderr.strip() == shown


# ---- the grpcurl lines ------------------------------------------------------------------------
# Debian has no grpcurl, so the test does what each line asks grpcurl to do, with python3-grpcio:
# the method must exist, the -d document must parse strictly (json_format, as grpcurl does) into
# the method's request type, and the call must succeed against a running sidecar. The health and
# reflection messages are declared here (their field numbers as in grpc's health.proto and
# reflection.proto; python3-grpcio ships no stubs for them), the ContextService ones come from the
# stubs generated at build time.

def grpcurl_commands():
    commands = []
    for block in blocks("sh"):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            if line.strip().startswith("grpcurl "):
                commands.append(shlex.split(line)[1:])
    return commands


def parse_grpcurl(args):
    """(headers, data, target, method) of one grpcurl command; method "list" for a listing."""
    headers, data, positional = [], None, []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-plaintext":
            pass
        elif a == "-H":
            i += 1
            name, value = args[i].split(":", 1)
            headers.append((name.strip().lower(), value.strip()))
        elif a == "-d":
            i += 1
            data = args[i]
        elif a.startswith("-"):
            raise AssertionError(f"grpcurl flag {a} is not understood by this test: {args}")
        else:
            positional.append(a)
        i += 1
    assert len(positional) == 2, args
    return headers, data, positional[0], positional[1]


def standard_messages():
    """HealthCheckRequest/Response and the v1alpha reflection messages the test uses."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()

    def add(name, package, messages):
        f = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3")
        for message, fields in messages:
            m = f.message_type.add(name=message)
            for field, number, kind, type_name, repeated in fields:
                d = m.field.add(name=field, number=number, type=kind,
                                label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
                if type_name:
                    d.type_name = type_name
                if field == "list_services":
                    # A member of the oneof message_request: sent even when "" (its presence is
                    # the request).
                    m.oneof_decl.add(name="message_request")
                    d.oneof_index = 0
        pool.Add(f)

    add("test_health.proto", "grpc.health.v1", [
        ("HealthCheckRequest", [("service", 1, F.TYPE_STRING, None, False)]),
        # status is the enum ServingStatus (SERVING = 1): the same varint on the wire.
        ("HealthCheckResponse", [("status", 1, F.TYPE_INT32, None, False)]),
    ])
    add("test_reflection.proto", "grpc.reflection.v1alpha", [
        ("ServerReflectionRequest", [("host", 1, F.TYPE_STRING, None, False),
                                     ("list_services", 7, F.TYPE_STRING, None, False)]),
        ("ServiceResponse", [("name", 1, F.TYPE_STRING, None, False)]),
        ("ListServiceResponse", [("service", 1, F.TYPE_MESSAGE,
                                  ".grpc.reflection.v1alpha.ServiceResponse", True)]),
        ("ErrorResponse", [("error_code", 1, F.TYPE_INT32, None, False),
                           ("error_message", 2, F.TYPE_STRING, None, False)]),
        ("ServerReflectionResponse", [
            ("valid_host", 1, F.TYPE_STRING, None, False),
            ("list_services_response", 6, F.TYPE_MESSAGE,
             ".grpc.reflection.v1alpha.ListServiceResponse", False),
            ("error_response", 7, F.TYPE_MESSAGE, ".grpc.reflection.v1alpha.ErrorResponse", False)]),
    ])
    factory = message_factory.MessageFactory(pool)

    def cls(full_name):
        descriptor = pool.FindMessageTypeByName(full_name)
        get = getattr(message_factory, "GetMessageClass", None)
        return get(descriptor) if get else factory.GetPrototype(descriptor)

    return cls


def test_grpcurl_lines_run(tmp_path, start_sidecar):
    import grpc
    from google.protobuf import json_format
    from sidecar_testing import pb

    config_text, _ = blocks("json")
    config = write_config(tmp_path, json.loads(config_text), "doc-config.json")
    sidecar = start_sidecar(["--config", str(config)], env={"UPSTREAM_API_KEY": "not-a-real-key"})
    channel = sidecar.channel()
    messages = standard_messages()
    service = pb.DESCRIPTOR.services_by_name["ContextService"]

    commands = [parse_grpcurl(args) for args in grpcurl_commands()]
    methods = [method for _, _, _, method in commands]
    assert methods[:2] == ["list", "grpc.health.v1.Health/Check"], methods
    assert sum(m.startswith("strata.v1.ContextService/") for m in methods) >= 3, methods
    for headers, data, target, method in commands:
        assert target == "127.0.0.1:50051", target  # the documented default address
        metadata = [(k, v.replace("TOKEN", "search-team-token")) for k, v in headers]
        if method == "list":
            call = channel.stream_stream(
                "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=messages(
                    "grpc.reflection.v1alpha.ServerReflectionResponse").FromString)
            request = messages("grpc.reflection.v1alpha.ServerReflectionRequest")(
                list_services="")
            (response,) = list(call(iter([request]), metadata=metadata, timeout=30))
            names = {s.name for s in response.list_services_response.service}
            assert {"strata.v1.ContextService", "grpc.health.v1.Health"} <= names, response
            continue
        service_name, method_name = method.split("/")
        if service_name == "grpc.health.v1.Health":
            assert method_name == "Check"
            request_type = messages("grpc.health.v1.HealthCheckRequest")
            response_type = messages("grpc.health.v1.HealthCheckResponse")
            streaming = False
        else:
            assert service_name == "strata.v1.ContextService", method
            # Every ContextService line carries the bearer token the configuration needs.
            assert ("authorization", "Bearer TOKEN") in headers, (method, headers)
            descriptor = service.methods_by_name.get(method_name)
            assert descriptor is not None, f"{method}: no such method in the proto"
            request_type = getattr(pb, descriptor.input_type.name)
            response_type = getattr(pb, descriptor.output_type.name)
            streaming = descriptor.server_streaming
        request = request_type()
        if data is not None:
            json_format.Parse(data, request)  # strict: an unknown field fails, as in grpcurl
        make = channel.unary_stream if streaming else channel.unary_unary
        call = make(f"/{method}", request_serializer=lambda m: m.SerializeToString(),
                    response_deserializer=response_type.FromString)
        result = call(request, metadata=metadata, timeout=30)
        responses = list(result) if streaming else [result]
        assert responses, method
        if method == "grpc.health.v1.Health/Check":
            assert responses[0].status == 1  # SERVING
        if method_name == "Stats":
            # The lines before it created the agent and appended a message.
            assert responses[0].segments >= 2, responses[0]


def test_a_grpcurl_document_with_a_typo_is_refused():
    # The check above would catch a misspelled field: json_format.Parse is strict.
    from google.protobuf import json_format
    from sidecar_testing import pb
    try:
        json_format.Parse('{"agent_idd": "a1"}', pb.StatsRequest())
    except json_format.ParseError as error:
        assert "agent_idd" in str(error)
    else:
        raise AssertionError("a misspelled field parsed")
