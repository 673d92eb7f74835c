"""Helpers of the strata-sidecar integration tests: processes (strata-sim, strata-sidecar), stubs
with a bearer token, and a test CA made with the openssl command."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence

REPO = pathlib.Path(os.environ.get("STRATA_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[3]))
BUILD = pathlib.Path(os.environ.get("STRATA_BUILD_DIR", REPO / "build")).resolve()
SIDECAR = BUILD / "sdk" / "apps" / "strata-sidecar" / "strata-sidecar"
SIM = BUILD / "sdk" / "apps" / "strata-sim" / "strata-sim"
STUBS = BUILD / "sdk" / "apps" / "strata-sidecar" / "python"


def missing_programs() -> List[str]:
    needed = [SIDECAR, SIM, STUBS / "context_service_pb2.py", STUBS / "context_service_pb2_grpc.py"]
    return [str(p) for p in needed if not p.exists()]


sys.path.insert(0, str(STUBS))
import grpc  # noqa: E402
import context_service_pb2 as pb  # noqa: E402,F401
import context_service_pb2_grpc as pb_grpc  # noqa: E402


class Sim:
    """strata-sim on 127.0.0.1, port 0: the sidecar's upstream."""

    def __init__(self, tmp: pathlib.Path, trajectory: Optional[List[dict]] = None,
                 extra: Sequence[str] = ()):
        args = [str(SIM), "--host", "127.0.0.1", "--port", "0", "--grpc-port", "-1", *extra]
        if trajectory is not None:
            path = tmp / f"trajectory-{id(self)}.jsonl"
            path.write_text("".join(json.dumps(m) + "\n" for m in trajectory))
            args += ["--trajectory", str(path)]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        fields = dict(f.split("=", 1) for f in line.split()[1:])
        if "http" not in fields:
            self.close()
            raise RuntimeError(f"strata-sim printed no address: {line!r}")
        self.base_url = f"http://{fields['http']}/v1"

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


class Sidecar:
    """A strata-sidecar process; `target` is the HOST:PORT it printed. Its stdout and stderr are
    kept in files (`output()`), for the tests that read what it logged."""

    def __init__(self, tmp: pathlib.Path, args: Sequence[str], env: Optional[Dict[str, str]] = None,
                 store: Optional[pathlib.Path] = None, expect_listening: bool = True,
                 listen: Optional[str] = "127.0.0.1:0"):
        self.tmp = tmp
        self.store = store or tmp / "sidecar.db"
        self.args = [str(SIDECAR), "--store", str(self.store), *args]
        if listen is not None:
            self.args += ["--grpc-listen", listen]
        n = len(list(tmp.glob("sidecar-*.out")))
        self.out_path = tmp / f"sidecar-{n}.out"
        self.err_path = tmp / f"sidecar-{n}.err"
        self._out = open(self.out_path, "w+")
        self._err = open(self.err_path, "w+")
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.process = subprocess.Popen(self.args, stdout=self._out, stderr=self._err,
                                        env=full_env)
        self.target = ""
        if expect_listening:
            self.target = self._wait_for_line()

    def _poll(self, find, timeout: float):
        """find()'s first result other than None, polled until the process exits or `timeout`
        seconds pass (then one last try); None when it never found anything."""
        deadline = time.time() + timeout
        while time.time() < deadline and self.process.poll() is None:
            found = find()
            if found is not None:
                return found
            time.sleep(0.02)
        return find()

    def _wait_for_line(self, timeout: float = 30) -> str:
        def listener() -> Optional[str]:
            for line in self.out_path.read_text().splitlines():
                if line.startswith("grpc listening on "):
                    return line[len("grpc listening on "):].strip()
            return None

        target = self._poll(listener, timeout)
        if target is not None:
            return target
        if self.process.poll() is not None:
            raise RuntimeError(f"strata-sidecar exited with {self.process.returncode}: "
                               f"{self.err_path.read_text()}")
        raise RuntimeError("strata-sidecar printed no listener line: " + self.err_path.read_text())

    def output(self) -> str:
        return self.out_path.read_text() + self.err_path.read_text()

    def wait_for_output(self, text: str, timeout: float = 30) -> str:
        """The output once it contains `text`: lines logged after the listener line (the
        "serving ..." line) may not be written yet when the constructor returns."""
        def containing() -> Optional[str]:
            output = self.output()
            return output if text in output else None

        output = self._poll(containing, timeout)
        assert output is not None, f"strata-sidecar did not print {text!r}:\n{self.output()}"
        return output

    def stub(self, token: Optional[str] = None, credentials=None, options=()) -> "pb_grpc.ContextServiceStub":
        return pb_grpc.ContextServiceStub(self.channel(token, credentials, options))

    def channel(self, token: Optional[str] = None, credentials=None, options=()):
        if credentials is None:
            channel = grpc.insecure_channel(self.target, options=options)
        else:
            channel = grpc.secure_channel(self.target, credentials, options=options)
        if token is not None:
            channel = grpc.intercept_channel(channel, BearerToken(token))
        return channel

    def signal(self, sig: int) -> None:
        self.process.send_signal(sig)

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"strata-sidecar did not exit within {timeout} s; it printed:\n"
                                 f"{self.output()}") from None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()
        self._err.close()


class BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds `authorization: Bearer <token>` to every call."""

    def __init__(self, token: str):
        self.token = token

    def _details(self, details):
        metadata = list(details.metadata or []) + [("authorization", f"Bearer {self.token}")]
        return details._replace(metadata=metadata) if hasattr(details, "_replace") else \
            _CallDetails(details.method, details.timeout, metadata, details.credentials,
                         getattr(details, "wait_for_ready", None),
                         getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


def sha256_hex(token: str) -> str:
    import hashlib
    return hashlib.sha256(token.encode()).hexdigest()


def write_config(tmp: pathlib.Path, config: dict, name: str = "sidecar.json") -> pathlib.Path:
    path = tmp / name
    path.write_text(json.dumps(config, indent=2))
    return path


def complete(stub, agent_id: str, user_message: str = "", timeout: float = 60,
             final_only: bool = False):
    """Runs Complete; returns (deltas, turn)."""
    deltas = []
    turn = None
    request = pb.CompleteRequest(agent_id=agent_id, user_message=user_message,
                                 final_only=final_only)
    for event in stub.Complete(request, timeout=timeout):
        if event.HasField("delta"):
            deltas.append(event.delta)
        else:
            assert turn is None, "two Turn events"
            turn = event.turn
    assert turn is not None, "the stream ended without a Turn event"
    return deltas, turn


def rpc_error(fn, *args, **kwargs) -> grpc.RpcError:
    """Calls fn and returns the RpcError it raised (fails when it did not)."""
    try:
        result = fn(*args, **kwargs)
        if hasattr(result, "__iter__") and not isinstance(result, (str, bytes)) and \
                not hasattr(result, "ListFields"):
            list(result)  # a stream: its error arrives while reading
    except grpc.RpcError as error:
        return error
    raise AssertionError(f"{getattr(fn, '_method', fn)} succeeded; an error was expected")


def make_ca(tmp: pathlib.Path, name: str = "ca") -> Dict[str, pathlib.Path]:
    """A test CA and, signed by it, a server certificate for 127.0.0.1/localhost and a client
    certificate, made with the openssl command."""
    d = tmp / name
    d.mkdir()

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
        f"/CN=strata test {name}", "-keyout", "ca.key", "-out", "ca.pem")
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout",
        "server.key", "-out", "server.csr")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "server.ext", "-out", "server.pem")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=strata test client", "-keyout",
        "client.key", "-out", "client.csr")
    run("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-out", "client.pem")
    return {k: d / f for k, f in {"ca": "ca.pem", "cert": "server.pem", "key": "server.key",
                                  "client_cert": "client.pem",
                                  "client_key": "client.key"}.items()}


class Background(threading.Thread):
    """Runs fn in a thread, keeping its result or exception."""

    def __init__(self, fn):
        super().__init__(daemon=True)
        self.fn = fn
        self.result = None
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 (reported by the test)
            self.error = e
