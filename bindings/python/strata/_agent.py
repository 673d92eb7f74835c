"""strata.Agent: an agent's context, configuration, endpoint, store and tools, from Python."""

from __future__ import annotations

import asyncio
import codecs
import concurrent.futures
import dataclasses
import enum
import functools
import inspect
import json
import os
import queue
import threading
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple,
                    TypeVar, Union, cast, overload)

from . import _strata
from ._records import AgentConfig
from ._tools import argument_converter, function_schema
from ._types import (CachePrediction, CompactionReport, Delta, DeltaKind, RecallPage, RunResult, ToolOutput,
                     TrimResult, Turn)

CancellationToken = _strata.CancellationToken

# A configuration: the AgentConfig TypedDict (what a type checker checks key by key), any other
# mapping of the same JSON shape, or its JSON text.
Config = Union[AgentConfig, Mapping[str, Any], str]
DeltaHandler = Callable[[Delta], None]
Headers = Optional[Union[Mapping[str, str], Sequence[Tuple[str, str]]]]
F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def _json_arg(value: Union[Mapping[str, Any], str], what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return json.dumps(value)
    raise TypeError(f"{what} must be a dict or a JSON string, not {type(value).__name__}")


def _headers(headers: Headers) -> List[Tuple[str, str]]:
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        return [(str(k), str(v)) for k, v in headers.items()]
    return [(str(k), str(v)) for k, v in headers]


def _delta_callback(on_delta: Optional[DeltaHandler]) -> Optional[Callable[..., None]]:
    """Adapts a Delta handler to the extension's callback, which passes raw bytes: a fragment may
    end inside a UTF-8 character, so each stream (content, reasoning, each tool call's arguments)
    is decoded incrementally."""
    if on_delta is None:
        return None
    handler: DeltaHandler = on_delta
    decoders: Dict[Tuple[str, int], Any] = {}

    def callback(kind: str, data: bytes, index: int, call_id: str, name: str) -> None:
        key = (kind, index)
        decoder = decoders.get(key)
        if decoder is None:
            decoder = decoders[key] = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(data)
        if text:
            handler(Delta(cast(DeltaKind, kind), text, index, call_id, name))

    return callback


class _AsyncCall(threading.local):
    """Per thread: the event loop of the ``*_async`` call running on it (its tool coroutines run
    there) and the futures of the tool coroutines in flight (cancelled with the call)."""

    loop: Optional[asyncio.AbstractEventLoop] = None
    pending: Optional[Set["concurrent.futures.Future[Any]"]] = None


_async_call = _AsyncCall()


def _await_tool(name: str, awaitable: Any) -> Any:
    """The result of an ``async def`` tool handler: awaited on the event loop of the ``*_async``
    call that runs it, else (a blocking ``run()``) on a new event loop of this thread."""
    loop = _async_call.loop
    if loop is not None and loop.is_running():
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), loop)
        pending = _async_call.pending
        if pending is not None:
            pending.add(future)
        try:
            return future.result()
        finally:
            if pending is not None:
                pending.discard(future)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_as_coroutine(awaitable))
    if inspect.iscoroutine(awaitable):
        awaitable.close()  # never awaited: no "was never awaited" warning on top of the error
    raise RuntimeError(f"tool {name} is async and the blocking run()/complete() was called on a "
                       "thread running an event loop: use await agent.run_async() instead")


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable


def _tool_handler(name: str, handler: Callable[..., Any]) -> Callable[[str], Tuple[str, bool]]:
    """Adapts a Python tool to the extension: the model's arguments (a JSON object) become keyword
    arguments, converted to the handler's annotated types (Enum, dataclass, tuple, set); an
    awaitable result is awaited; a str result is sent as is, any other value as JSON, a
    ToolOutput as given."""
    convert = argument_converter(handler)

    def call(arguments_json: str) -> Tuple[str, bool]:
        try:
            arguments = json.loads(arguments_json) if arguments_json.strip() else {}
        except ValueError as e:
            return (f"tool {name}: arguments are not valid JSON ({e}): {arguments_json[:200]}", True)
        if not isinstance(arguments, dict):
            return (f"tool {name}: arguments must be a JSON object, got {arguments_json[:200]}", True)
        result = handler(**convert(arguments))
        if inspect.isawaitable(result):
            result = _await_tool(name, result)
        if isinstance(result, ToolOutput):
            return (result.content, bool(result.is_error))
        if isinstance(result, str):
            return (result, False)
        return (json.dumps(result, default=_json_default), False)

    return call


def _json_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"a tool result of type {type(value).__name__} is not JSON serializable: "
                    "return a str, a JSON-compatible value or a strata.ToolOutput")


# ---- The executor of the *_async calls ----------------------------------------------------------

_DEFAULT_ASYNC_WORKERS = 64
_executor_lock = threading.Lock()
_executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
_executor_workers = 0


def set_async_workers(workers: int) -> None:
    """Sizes the thread pool strata runs ``run_async``/``complete_async``/``create_async``/
    ``open_async`` on (default 64, or $STRATA_ASYNC_WORKERS): at most that many such calls are in
    flight at once, across all agents. Each call waits on the network with the GIL released, so
    the pool is sized for calls in flight, not for CPUs (asyncio's default executor has
    min(32, CPUs + 4) workers: 6 on 2 CPUs). Calls already running finish on the old pool."""
    global _executor, _executor_workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"set_async_workers: workers must be an int >= 1, got {workers!r}")
    with _executor_lock:
        old, _executor, _executor_workers = _executor, None, workers
    if old is not None:
        old.shutdown(wait=False)


def async_workers() -> int:
    """The size of the thread pool of the ``*_async`` calls (see set_async_workers)."""
    with _executor_lock:
        return _executor_workers or _env_workers()


def _env_workers() -> int:
    text = os.environ.get("STRATA_ASYNC_WORKERS", "")
    if not text:
        return _DEFAULT_ASYNC_WORKERS
    try:
        workers = int(text)
    except ValueError:
        workers = 0
    if workers < 1:
        raise ValueError(f"STRATA_ASYNC_WORKERS must be an int >= 1, got {text!r}")
    return workers


def _async_executor() -> concurrent.futures.ThreadPoolExecutor:
    global _executor, _executor_workers
    with _executor_lock:
        if _executor is None:
            _executor_workers = _executor_workers or _env_workers()
            _executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=_executor_workers, thread_name_prefix="strata-async")
        return _executor


class Agent:
    """An agent: its context, configuration, endpoint, store, tools and loop.

    Thread safety: an Agent serializes its calls (one at a time); distinct agents run in parallel,
    and every call that renders, tokenizes, touches the store or the network releases the GIL.
    Tool handlers and delta callbacks run on the calling thread with the GIL held.
    """

    def __init__(self, impl: Any) -> None:
        if not isinstance(impl, _strata.Agent):
            raise TypeError("use Agent.create(config) or Agent.open(store_path, id)")
        self._impl = impl

    # ---- Construction -------------------------------------------------------------------------

    @classmethod
    def create(cls, config: Config) -> "Agent":
        """A new agent from a configuration dict or the JSON document of the C++ AgentConfig
        (``{"identity": {"id": ...}, "endpoint": {"base_url": ...}, "store_path": ...}``).
        Raises InvalidArgument naming the key path of a bad field, AlreadyExists when the store
        already holds the id (use ``open``)."""
        return cls(_strata.Agent.create(_json_arg(config, "config")))

    @classmethod
    def open(cls, store_path: str, id: str, *, tokenizer: str = "", chat_template: str = "",
             retokenize: bool = False,
             endpoint: Optional[Mapping[str, Any]] = None) -> "Agent":
        """Reopens a stored agent with its configuration, context and prefix-cache state.
        ``endpoint`` replaces the stored endpoint (e.g. a new base_url after a restart). Raises
        NotFound for an unknown id."""
        endpoint_json = None if endpoint is None else _json_arg(endpoint, "endpoint")
        return cls(_strata.Agent.open(store_path, id, tokenizer, chat_template, retokenize,
                                      endpoint_json))

    @classmethod
    async def create_async(cls, config: Config) -> "Agent":
        """``create()`` on strata's executor (loading a tokenizer file takes a while), off the
        event loop."""
        return await _run_in_executor(functools.partial(cls.create, config))

    @classmethod
    async def open_async(cls, store_path: str, id: str, *, tokenizer: str = "",
                         chat_template: str = "", retokenize: bool = False,
                         endpoint: Optional[Mapping[str, Any]] = None) -> "Agent":
        """``open()`` on strata's executor, off the event loop."""
        return await _run_in_executor(functools.partial(
            cls.open, store_path, id, tokenizer=tokenizer, chat_template=chat_template,
            retokenize=retokenize, endpoint=endpoint))

    @property
    def id(self) -> str:
        return str(self._impl.id)

    @property
    def config(self) -> AgentConfig:
        """The whole configuration, defaults filled in (the C++ AgentConfig JSON)."""
        return cast(AgentConfig, json.loads(self._impl.config_json()))

    def config_json(self) -> str:
        return str(self._impl.config_json())

    # ---- Content ------------------------------------------------------------------------------

    def set_system_prompt(self, prompt: Union[str, Sequence[str]]) -> None:
        if isinstance(prompt, str):
            self._impl.set_system_prompt(prompt)
        else:
            self._impl.set_system_prompts(list(prompt))

    def put_document(self, name: str, content: str, *, layer: str = "docs", version: str = "",
                     order: int = 0) -> str:
        """Adds or replaces a document of the "index" or "docs" layer; returns its segment id."""
        return str(self._impl.put_document(layer, name, content, version, order))

    def remove_document(self, name: str, *, layer: str = "docs") -> None:
        self._impl.remove_document(layer, name)

    def append_user(self, content: str) -> str:
        return str(self._impl.append_user(content))

    def append_tool_result(self, tool_call_id: str, content: str, *, is_error: bool = False) -> str:
        return str(self._impl.append_tool_result(tool_call_id, content, is_error))

    def set_volatile(self, key: str, value: str) -> None:
        self._impl.set_volatile(key, value)

    # ---- Tools --------------------------------------------------------------------------------

    def register_tool(self, name: str, schema: Union[Mapping[str, Any], str],
                      handler: Callable[..., Any]) -> None:
        """Registers ``handler`` as the tool ``name``. ``schema`` is the function object without
        its name (``{"description": ..., "parameters": {...}}``) or a whole OpenAI tool object.
        The handler is called with the model's arguments as keyword arguments."""
        if not callable(handler):
            raise TypeError(f"handler of tool {name!r} must be callable")
        self._impl.register_tool(name, _json_arg(schema, "schema"), _tool_handler(name, handler))

    @overload
    def tool(self, name: F) -> F: ...

    @overload
    def tool(self, name: Optional[str] = None,
             schema: Optional[Union[Mapping[str, Any], str]] = None, *,
             description: Optional[str] = None) -> Callable[[F], F]: ...

    def tool(self, name: Any = None, schema: Optional[Union[Mapping[str, Any], str]] = None, *,
             description: Optional[str] = None) -> Any:
        """Decorator form of register_tool: ``@agent.tool``, ``@agent.tool("name")`` or
        ``@agent.tool("read_file", {...})``. The name defaults to the function's; without a
        schema, it is built from the function's type hints and docstring like the Agents SDK's
        ``function_tool`` (``strata.function_schema``): parameters without a default are
        required, descriptions come from the docstring's summary and its Args section
        (``description=`` replaces the summary). The model's arguments are converted to the
        annotated types (Enum members, dataclass instances) before the call; an ``async def``
        handler is awaited. Raises TypeError naming the parameter whose type has no JSON Schema
        form."""
        if callable(name) and schema is None and description is None:
            return self.tool()(name)  # bare @agent.tool
        if name is not None and not isinstance(name, str):
            raise TypeError(f"tool(): name must be a str, not {type(name).__name__}")

        def register(fn: F) -> F:
            tool_name = name or fn.__name__
            tool_schema: Union[Mapping[str, Any], str]
            if schema is not None:
                tool_schema = schema
            else:
                tool_schema = function_schema(fn, tool_name)
                if description is not None:
                    tool_schema["description"] = description
            self.register_tool(tool_name, tool_schema, fn)
            return fn

        return register

    # ---- The loop -----------------------------------------------------------------------------

    def complete(self, *, on_delta: Optional[DeltaHandler] = None,
                 cancel: Optional[CancellationToken] = None, headers: Headers = None) -> Turn:
        """Builds (compacting first when due), sends, appends the reply and records one request.
        ``on_delta`` receives each streamed fragment; ``cancel.cancel()`` from another thread (or
        Ctrl-C while fragments arrive) stops the request with Cancelled. A call that raises
        changes nothing (a compaction it applied is undone too)."""
        out, bodies = self._impl.complete(_delta_callback(on_delta), cancel, _headers(headers))
        return Turn._from(json.loads(out), bodies[0])

    def stream(self, *, cancel: Optional[CancellationToken] = None,
               headers: Headers = None) -> "TurnStream":
        """``complete()`` as an iterator of Delta; the Turn is ``.turn`` once it is exhausted."""
        return TurnStream(self, cancel, headers)

    def run(self, user_message: str = "", *, max_turns: int = 16,
            on_delta: Optional[DeltaHandler] = None, cancel: Optional[CancellationToken] = None,
            headers: Headers = None) -> RunResult:
        """Appends ``user_message`` ("" appends nothing) and loops: complete(), answer each tool
        call with its handler, until the model answers without tool calls or ``max_turns``.
        A run that raises changes nothing: the user message, the replies and the tool results it
        appended are undone (in the store too), so retrying the same text leaves one message."""
        out, bodies = self._impl.run(user_message, max_turns, _delta_callback(on_delta), cancel,
                                     _headers(headers))
        return RunResult._from(json.loads(out), bodies)

    def dispatch_tool_calls(self) -> RunResult:
        """Answers every open tool call of the last reply (for callers running their own loop)."""
        return RunResult._from(json.loads(self._impl.dispatch_tool_calls()))

    async def complete_async(self, *, on_delta: Optional[DeltaHandler] = None,
                             headers: Headers = None) -> Turn:
        """``complete()`` on strata's executor (``set_async_workers``), off the event loop;
        cancelling the task cancels the request."""
        token = CancellationToken()
        return await _run_cancellable(
            functools.partial(self.complete, on_delta=on_delta, cancel=token, headers=headers),
            token)

    async def run_async(self, user_message: str = "", *, max_turns: int = 16,
                        on_delta: Optional[DeltaHandler] = None,
                        headers: Headers = None) -> RunResult:
        """``run()`` on strata's executor (``set_async_workers``), off the event loop; ``async
        def`` tool handlers run on this event loop. Cancelling the task cancels the request in
        flight."""
        token = CancellationToken()
        return await _run_cancellable(
            functools.partial(self.run, user_message, max_turns=max_turns, on_delta=on_delta,
                              cancel=token, headers=headers), token)

    # ---- Predictions and counts ---------------------------------------------------------------

    def predict(self) -> CachePrediction:
        """Input tokens and predicted cached tokens of the next request, changing nothing
        (all zero for an agent with no messages yet)."""
        if not self._impl.has_messages():
            return CachePrediction(0, False, 0, False, None)
        return CachePrediction._from(json.loads(self._impl.predict()))

    def input_tokens(self) -> int:
        """Input tokens of the next request (0 for an agent with no messages yet)."""
        if not self._impl.has_messages():
            return 0
        return int(self._impl.input_tokens())

    def request(self) -> Dict[str, Any]:
        """The Chat Completions body the next request would carry (before any compaction)."""
        return dict(json.loads(self._impl.request()))

    def messages(self) -> List[Dict[str, Any]]:
        """The context as OpenAI message dicts (system first; [] for a new agent)."""
        if not self._impl.has_messages():
            return []
        return list(self.request()["messages"])

    # ---- Recall and task splitting ------------------------------------------------------------

    def recall(self, recall_id: str, offset: int = 0, max_tokens: int = 0) -> RecallPage:
        """A page of the original kept under ``recall_id``. NotFound for an unknown id,
        OutOfRange for an offset past its end."""
        return RecallPage(**json.loads(self._impl.recall(recall_id, offset, max_tokens)))

    def fork(self, task: str, *, id: str = "",
             budget: Optional[Mapping[str, Any]] = None) -> "Agent":
        """A child agent sharing this one's stable layers (a cache hit on its prefix), with
        ``task`` as its first user message."""
        budget_json = None if budget is None else _json_arg(budget, "budget")
        return Agent(self._impl.fork(task, id, budget_json))

    def join(self, child: "Agent", *, max_tokens: int = 2048) -> str:
        """Folds the child's answer (or a summary) into this agent as one user message."""
        if not isinstance(child, Agent):
            raise TypeError(f"join() takes an Agent, not {type(child).__name__}")
        return str(self._impl.join(child._impl, max_tokens))

    def __repr__(self) -> str:
        return f"strata.Agent(id={self.id!r})"


class TurnStream:
    """Iterates the deltas of one ``complete()`` running on a worker thread. Leaving the loop
    early cancels the request."""

    _DONE = object()

    def __init__(self, agent: Agent, cancel: Optional[CancellationToken], headers: Headers):
        self._agent = agent
        self._token = cancel if cancel is not None else CancellationToken()
        self._headers = headers
        self.turn: Optional[Turn] = None

    def __iter__(self) -> Iterator[Delta]:
        q: "queue.Queue[Any]" = queue.Queue()
        outcome: Dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["turn"] = self._agent.complete(on_delta=q.put, cancel=self._token,
                                                       headers=self._headers)
            except BaseException as e:  # re-raised on the iterating thread
                outcome["error"] = e
            finally:
                q.put(TurnStream._DONE)

        thread = threading.Thread(target=work, name="strata-stream", daemon=True)
        thread.start()
        try:
            while True:
                item = q.get()
                if item is TurnStream._DONE:
                    break
                yield item
        finally:
            if thread.is_alive():
                self._token.cancel()
            thread.join()
        if "error" in outcome:
            raise outcome["error"]
        self.turn = outcome["turn"]


async def _run_in_executor(call: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(_async_executor(), call)


async def _run_cancellable(call: Callable[[], T], token: CancellationToken) -> T:
    """Runs ``call`` on strata's executor; its async tool handlers run on this event loop.
    Cancelling the awaiting task cancels the request (and the tool coroutines in flight) and
    waits for the call to return."""
    loop = asyncio.get_running_loop()
    pending: Set["concurrent.futures.Future[Any]"] = set()

    def in_context() -> T:
        _async_call.loop, _async_call.pending = loop, pending
        try:
            return call()
        finally:
            _async_call.loop, _async_call.pending = None, None

    future = loop.run_in_executor(_async_executor(), in_context)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        token.cancel()
        for tool_future in list(pending):
            tool_future.cancel()
        try:
            await future  # the C++ call returns promptly once cancelled; the agent is idle after
        except BaseException:
            pass
        raise


def resolve_budget(budget: Mapping[str, Any]) -> Dict[str, int]:
    """The token figures of a budget configuration: reserves (unset ones scaled to the window),
    usable_input_tokens, trigger_tokens, target_tokens."""
    return dict(json.loads(_strata.resolve_budget(_json_arg(budget, "budget"))))


def normalize_config(config: Config) -> AgentConfig:
    """A configuration with every default filled in, validated like ``Agent.create`` does."""
    return cast(AgentConfig, json.loads(_strata.normalize_config(_json_arg(config, "config"))))
