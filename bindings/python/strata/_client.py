"""The lower level: Budget, Context, transports (HTTP, gRPC) and Client, for programs that wire the
pieces themselves instead of using an Agent (which owns one of each)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _strata
from ._agent import CancellationToken, DeltaHandler, Headers, _delta_callback, _headers, _json_arg
from ._errors import Error
from ._types import (CompactionReport, PrefixBreak, RequestRecord, Response, _decoded_body,
                     _ToDict, _with_body)

Limit = Union[float, int]


def _limit(name: str, value: Limit) -> Dict[str, Any]:
    # A float is a fraction of the usable input, an int an absolute token count.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"Budget.{name} must be a float (a fraction of the usable input) or an "
                        f"int (tokens), not {type(value).__name__}")
    return {"tokens": value} if isinstance(value, int) else {"fraction": value}


@dataclasses.dataclass(frozen=True)
class Budget(_ToDict):
    """How many input tokens a context may use, and when compaction starts (``trigger``) and
    stops (``target``): each a float (a fraction of the usable input) or an int (tokens).
    Reserves left None are scaled to the window (min(32768, window/8) for the output, ...).
    Validated by the C++ core when made: InvalidArgument names the bad field.

    ``usable_input_tokens``, ``trigger_tokens`` and ``target_tokens`` are the figures the context
    enforces."""

    window: int = 1048576
    reserve_output: Optional[int] = None
    reserve_reasoning: Optional[int] = None
    reserve_headroom: Optional[int] = None
    trigger: Limit = 0.85
    target: Limit = 0.60
    usable_input_tokens: int = dataclasses.field(init=False, default=0)
    trigger_tokens: int = dataclasses.field(init=False, default=0)
    target_tokens: int = dataclasses.field(init=False, default=0)

    def __post_init__(self) -> None:
        resolved = json.loads(_strata.resolve_budget(json.dumps(self.config())))
        for name in ("reserve_output", "reserve_reasoning", "reserve_headroom",
                     "usable_input_tokens", "trigger_tokens", "target_tokens"):
            object.__setattr__(self, name, int(resolved[name]))

    def config(self) -> Dict[str, Any]:
        """The budget as the agent configuration writes it (``{"window": ..., "trigger":
        {"fraction": 0.85}, ...}``), for ``Agent.create`` or ``Context``."""
        doc: Dict[str, Any] = {"window": self.window, "trigger": _limit("trigger", self.trigger),
                               "target": _limit("target", self.target)}
        for name in ("reserve_output", "reserve_reasoning", "reserve_headroom"):
            value = getattr(self, name)
            if value is not None:
                doc[name] = value
        return doc


@dataclasses.dataclass(frozen=True)
class BuiltRequest(_ToDict):
    """A rendered request: ``body`` (the Chat Completions JSON text, byte-stable), where its
    stable prefix and its history end, its stable-prefix hash, token counts per layer and in all,
    lint warnings, and the compaction the build applied (if any)."""

    body: str
    stable_prefix_bytes: int
    history_end_bytes: int
    stable_prefix_hash: str
    message_count: int
    layers: Dict[str, Dict[str, int]]
    total_tokens: int
    input_tokens: int
    input_tokens_exact: bool
    limit_tokens: int
    tokens_estimated: bool
    warnings: List[Dict[str, Any]]
    compaction: Optional[CompactionReport]

    @property
    def request(self) -> Dict[str, Any]:
        """The body as a dict."""
        return dict(json.loads(self.body))

    @property
    def messages(self) -> List[Dict[str, Any]]:
        """The request's OpenAI message dicts."""
        return list(self.request["messages"])

    @staticmethod
    def _from(d: Dict[str, Any]) -> "BuiltRequest":
        c = d.pop("compaction")
        return BuiltRequest(compaction=CompactionReport._from(c) if c is not None else None, **d)


class Context:
    """One agent's layered context and its byte-stable rendering (C++ ``strata::Context``),
    without an endpoint or a store: ``build()`` renders the request body; a ``Client`` sends it.

    ``config`` is the part of an agent configuration a context uses: ``identity`` (``id``
    required), ``tokenizer``, ``chat_template``, ``budget`` (a dict or a ``Budget``; none: no
    limit), ``policy``, ``hygiene``, ``render``, ``keep_originals``, ``message_overhead_tokens``.
    Calls are serialized (a C++ Context is used by one thread at a time) and release the GIL."""

    def __init__(self, config: Union[Mapping[str, Any], str]) -> None:
        if isinstance(config, Mapping) and isinstance(config.get("budget"), Budget):
            config = dict(config, budget=config["budget"].config())
        self._impl = _strata.Context.create(_json_arg(config, "config"))

    @property
    def id(self) -> str:
        return str(self._impl.id)

    @property
    def config(self) -> Dict[str, Any]:
        """The configuration with every default filled in."""
        return dict(json.loads(self._impl.config_json()))

    # ---- Stable layers ------------------------------------------------------------------------

    def set_system_prompt(self, prompt: Union[str, Sequence[str]]) -> None:
        self._impl.set_system_prompts([prompt] if isinstance(prompt, str) else list(prompt))

    def set_tools(self, tools: Union[Sequence[Mapping[str, Any]], str]) -> None:
        """OpenAI tool objects (``{"type": "function", "function": {"name": ...}}``)."""
        self._impl.set_tools(tools if isinstance(tools, str) else json.dumps(list(tools)))

    def put_document(self, name: str, content: str, *, layer: str = "docs", version: str = "",
                     order: int = 0) -> str:
        return str(self._impl.put_document(layer, name, content, version, order))

    def remove_document(self, name: str, *, layer: str = "docs") -> None:
        self._impl.remove_document(layer, name)

    # ---- History ------------------------------------------------------------------------------

    def append_user(self, content: str) -> str:
        return str(self._impl.append_user(content))

    def append_assistant(self, content: str = "", *, reasoning: str = "",
                         tool_calls: Sequence[Mapping[str, Any]] = ()) -> str:
        """An assistant message; tool calls in the OpenAI shape (``{"id", "type": "function",
        "function": {"name", "arguments"}}``), arguments kept byte for byte."""
        return str(self._impl.append_assistant(content, reasoning, json.dumps(list(tool_calls))))

    def append_tool_result(self, tool_call_id: str, content: str, *, is_error: bool = False) -> str:
        return str(self._impl.append_tool_result(tool_call_id, content, is_error))

    def append(self, message: Mapping[str, Any]) -> str:
        """Appends one OpenAI message dict (user, assistant or tool)."""
        role = message.get("role")
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise TypeError(f"message content must be a str, not {type(content).__name__}")
        if role == "user":
            return self.append_user(content)
        if role == "assistant":
            return self.append_assistant(
                content, reasoning=str(message.get("reasoning_content") or ""),
                tool_calls=list(message.get("tool_calls") or []))
        if role == "tool":
            return self.append_tool_result(str(message.get("tool_call_id", "")), content)
        raise ValueError(f"cannot append a message with role {role!r} (user, assistant or tool; "
                         "system prompts go through set_system_prompt)")

    def set_pinned(self, segment_id: str, pinned: bool = True) -> None:
        self._impl.set_pinned(segment_id, pinned)

    def open_tool_calls(self) -> List[str]:
        return list(self._impl.open_tool_calls())

    # ---- Volatile layer -----------------------------------------------------------------------

    def set_volatile(self, key: str, value: str) -> None:
        self._impl.set_volatile(key, value)

    def remove_volatile(self, key: str) -> None:
        self._impl.remove_volatile(key)

    def clear_volatile(self) -> None:
        self._impl.clear_volatile()

    # ---- Rendering and compaction -------------------------------------------------------------

    def build(self, *, extra_fields: Optional[Mapping[str, Any]] = None) -> BuiltRequest:
        """Renders the request, compacting first when the budget and policy say so; never above
        the budget. ``extra_fields`` are top-level request fields
        (``{"max_completion_tokens": 4096}``)."""
        extra = [(k, json.dumps(v)) for k, v in (extra_fields or {}).items()]
        return BuiltRequest._from(json.loads(self._impl.build(extra)))

    def preview(self, *, extra_fields: Optional[Mapping[str, Any]] = None) -> BuiltRequest:
        """Renders the request the context holds now and never changes the context:
        ResourceExhausted where ``build()`` would have to compact first to fit the budget."""
        extra = [(k, json.dumps(v)) for k, v in (extra_fields or {}).items()]
        return BuiltRequest._from(json.loads(self._impl.preview(extra)))

    def preview_build(self, *, extra_fields: Optional[Mapping[str, Any]] = None) -> BuiltRequest:
        """The request ``build()`` would return now, its compaction included (``compaction``),
        without changing the context: the policy plans on the context, and a plan that compacts is
        applied to a copy. ResourceExhausted where ``build()`` would fail."""
        extra = [(k, json.dumps(v)) for k, v in (extra_fields or {}).items()]
        return BuiltRequest._from(json.loads(self._impl.preview_build(extra)))

    def messages(self) -> List[Dict[str, Any]]:
        """The context as OpenAI message dicts (``preview()``: never compacts)."""
        return self.preview().messages

    def input_tokens(self) -> int:
        return int(self._impl.input_tokens())

    def compact(self, *, force: bool = False) -> Optional[CompactionReport]:
        """Asks the policy for a compaction and applies it (``force``: even below the trigger).
        None when nothing was done."""
        report = json.loads(self._impl.compact(force))
        return CompactionReport._from(report) if report is not None else None

    def compactions(self) -> List[CompactionReport]:
        return [CompactionReport._from(r) for r in json.loads(self._impl.compactions())]

    def recall(self, recall_id: str) -> str:
        """The original content kept under ``recall_id`` (NotFound if unknown)."""
        return str(self._impl.recall(recall_id))

    def segments(self) -> List[Dict[str, Any]]:
        """Every segment in render order: id, kind, layer, content, tokens, pinned, state, ..."""
        return list(json.loads(self._impl.segments()))

    def stats(self) -> Dict[str, Any]:
        return dict(json.loads(self._impl.stats()))

    def __repr__(self) -> str:
        return f"strata.Context(id={self.id!r})"


class Transport:
    """Sends Chat Completions bodies to an endpoint (``HttpTransport`` or ``GrpcTransport``).
    Thread-safe; ``send`` releases the GIL and Ctrl-C cancels it."""

    def __init__(self, impl: Any) -> None:
        if not isinstance(impl, _strata.Transport):
            raise TypeError("use HttpTransport(base_url) or GrpcTransport(target)")
        self._impl = impl

    @property
    def name(self) -> str:
        """"http" or "grpc"."""
        return str(self._impl.name)

    @property
    def endpoint(self) -> str:
        return str(self._impl.endpoint)

    def send(self, body: Union[Mapping[str, Any], str], *, deadline_ms: int = 0,
             request_id: str = "", headers: Headers = None,
             on_delta: Optional[DeltaHandler] = None,
             cancel: Optional[CancellationToken] = None) -> Response:
        """Sends one request body (sent byte for byte when a str) and returns the parsed answer.
        Errors: Unavailable, DeadlineExceeded, ResourceExhausted, Cancelled, ... (the C++
        transport's codes)."""
        text = body if isinstance(body, str) else json.dumps(body)
        out = self._impl.send(text, deadline_ms, request_id, _headers(headers),
                              _delta_callback(on_delta), cancel)
        return Response._from(json.loads(out))

    def health_check(self, timeout_ms: int = 5000) -> None:
        """Returns when the endpoint answers its health check; raises otherwise."""
        self._impl.health_check(timeout_ms)

    def abort(self, request_id: str) -> None:
        """Asks the server to abort the request sent with ``request_id`` (gRPC; over HTTP it
        raises Unimplemented: cancel the call with a CancellationToken instead)."""
        self._impl.abort(request_id)

    def __repr__(self) -> str:
        return f"strata.{type(self).__name__}({self.endpoint!r})"


def _transport_options(options: Dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in options.items() if v is not None})


class HttpTransport(Transport):
    """HTTP/1.1 over libcurl to an OpenAI-compatible endpoint (vLLM, SGLang, Z.ai, strata-sim).
    Timeouts in milliseconds; ``max_attempts`` counts retries of connection failures, 429 and
    5xx. An ``api_key`` over plain http to a non-loopback host needs ``allow_insecure``."""

    def __init__(self, base_url: str, *, api_key: str = "", allow_insecure: bool = False,
                 headers: Headers = None, connect_timeout_ms: Optional[int] = None,
                 first_byte_timeout_ms: Optional[int] = None,
                 idle_timeout_ms: Optional[int] = None, total_timeout_ms: Optional[int] = None,
                 max_attempts: Optional[int] = None,
                 initial_backoff_ms: Optional[int] = None) -> None:
        super().__init__(_strata.Transport.http(_transport_options({
            "base_url": base_url, "api_key": api_key, "allow_insecure": allow_insecure,
            "headers": _headers(headers), "connect_timeout_ms": connect_timeout_ms,
            "first_byte_timeout_ms": first_byte_timeout_ms, "idle_timeout_ms": idle_timeout_ms,
            "total_timeout_ms": total_timeout_ms, "max_attempts": max_attempts,
            "initial_backoff_ms": initial_backoff_ms})))


class GrpcTransport(Transport):
    """gRPC to SGLang's native ``sglang.runtime.v1.SglangService`` (or ``strata-sim
    --grpc-port``): ``target`` is "host:port" without a scheme. TLS and a bearer token are
    optional (a token needs TLS unless ``allow_token_without_tls``)."""

    def __init__(self, target: str, *, use_tls: bool = False, tls_root_certs_pem: str = "",
                 tls_client_cert_pem: str = "", tls_client_key_pem: str = "",
                 tls_server_name: str = "", bearer_token: str = "",
                 allow_token_without_tls: bool = False, metadata: Headers = None,
                 connect_timeout_ms: Optional[int] = None,
                 first_byte_timeout_ms: Optional[int] = None,
                 idle_timeout_ms: Optional[int] = None, total_timeout_ms: Optional[int] = None,
                 max_attempts: Optional[int] = None,
                 initial_backoff_ms: Optional[int] = None) -> None:
        super().__init__(_strata.Transport.grpc(_transport_options({
            "target": target, "use_tls": use_tls, "tls_root_certs_pem": tls_root_certs_pem,
            "tls_client_cert_pem": tls_client_cert_pem, "tls_client_key_pem": tls_client_key_pem,
            "tls_server_name": tls_server_name, "bearer_token": bearer_token,
            "allow_token_without_tls": allow_token_without_tls, "metadata": _headers(metadata),
            "connect_timeout_ms": connect_timeout_ms,
            "first_byte_timeout_ms": first_byte_timeout_ms, "idle_timeout_ms": idle_timeout_ms,
            "total_timeout_ms": total_timeout_ms, "max_attempts": max_attempts,
            "initial_backoff_ms": initial_backoff_ms})))


@dataclasses.dataclass(frozen=True)
class Completion(_ToDict):
    """What ``Client.complete`` did: the answer, the request's record, the appended assistant
    segment, a prefix break (if the request reused less of the server's cache than expected) and
    the body that was sent."""

    response: Response
    record: RequestRecord
    assistant_segment_id: str
    prefix_break: Optional[PrefixBreak]
    # The body that was sent as its UTF-8 bytes held by the extension (``memoryview(raw_body)``);
    # ``body`` decodes it on first access (as Turn does).
    raw_body: Any = dataclasses.field(repr=False)

    @property
    def body(self) -> str:
        """The request body that was sent (JSON text)."""
        return _decoded_body(self)

    def to_dict(self) -> Dict[str, Any]:
        """The completion as plain JSON-compatible dicts and lists (``body`` as text)."""
        return _with_body(self)

    @staticmethod
    def _from(d: Dict[str, Any], body: Any) -> "Completion":
        pb = d["prefix_break"]
        return Completion(Response._from(d["response"]), RequestRecord._from(d["record"]),
                          d["assistant_segment_id"], PrefixBreak._from(pb) if pb is not None else None,
                          body)


class Client:
    """Builds a context's request with the backend's fields (``backend``: "vllm", "sglang",
    "openai", "zai"), predicts its cached tokens, sends it through ``transport``, appends the reply
    to the context and records it (``records()``). Thread-safe: distinct contexts may complete
    concurrently. ``tokenizer`` and ``chat_template`` are those of the server, for the
    prefix-cache predictions."""

    def __init__(self, transport: Transport, *, backend: str = "vllm", stream: bool = True,
                 max_output_tokens: int = 4096, thinking: Optional[bool] = None,
                 reasoning_effort: str = "", deployment_secret: str = "",
                 send_cache_salt: bool = True, tokenizer: str = "estimate",
                 chat_template: str = "glm5", block_tokens: int = 16, pool: str = "",
                 deadline_ms: int = 0) -> None:
        if not isinstance(transport, Transport):
            raise TypeError(f"Client needs a strata.Transport, not {type(transport).__name__}")
        self.transport = transport
        self._impl = _strata.Client.create(transport._impl, _transport_options({
            "backend": backend, "stream": stream, "max_output_tokens": max_output_tokens,
            "thinking": thinking, "reasoning_effort": reasoning_effort,
            "deployment_secret": deployment_secret, "send_cache_salt": send_cache_salt,
            "tokenizer": tokenizer, "chat_template": chat_template,
            "block_tokens": block_tokens, "pool": pool, "deadline_ms": deadline_ms}))

    def complete(self, context: Context, *, cancel: Optional[CancellationToken] = None,
                 headers: Headers = None, request_id: str = "",
                 append_reply: bool = True) -> Completion:
        """Builds (compacting when due), sends, appends the reply and records one request.
        On failure nothing is appended and the exception carries the failed request's
        ``record``; Ctrl-C or ``cancel.cancel()`` stops the request."""
        try:
            out = self._impl.complete(context._impl, cancel, _headers(headers), request_id,
                                      append_reply)
        except Error as e:
            record_json = getattr(e, "record_json", None)
            if record_json is not None:
                e.record = RequestRecord._from(json.loads(record_json))
            raise
        return Completion._from(json.loads(out[0]), out[1])

    def preview_request(self, context: Context, request_id: str = "") -> BuiltRequest:
        """The body ``complete`` would send now (same fields), without sending it or changing the
        context (``Context.preview()``)."""
        return BuiltRequest._from(
            json.loads(self._impl.preview_request(context._impl, request_id)))

    def cache_salt_for(self, context: Context) -> str:
        return str(self._impl.cache_salt_for(context._impl))

    def records(self) -> List[RequestRecord]:
        """Every request this client sent (failures included), oldest first."""
        return [RequestRecord._from(r) for r in json.loads(self._impl.records())]

    def prefix_breaks(self) -> List[PrefixBreak]:
        return [PrefixBreak._from(e) for e in json.loads(self._impl.events())]

    def __repr__(self) -> str:
        return f"strata.Client({self.transport!r})"

