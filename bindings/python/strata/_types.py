"""The objects strata returns: records, reports, turns. Each has ``to_dict()``."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any, Dict, List, Literal, Optional, Sequence

from ._records import CompactionReport as CompactionReport
from ._records import EventType as EventType
from ._records import GrowthPoint as GrowthPoint
from ._records import LayerName as LayerName
from ._records import PrefixBreak as PrefixBreak
from ._records import PrefixBreakKind as PrefixBreakKind
from ._records import RequestRecord as RequestRecord
from ._records import StatusCodeName as StatusCodeName
from ._records import StoredEvent as StoredEvent
from ._records import Timings as Timings
from ._records import Usage as Usage
from ._records import _Record

DeltaKind = Literal["content", "reasoning", "tool_call_arguments"]
StoppedReason = Literal["answer", "max_turns"]


class JsonObject:
    """A JSON object produced by strata's C++ core (a request record, a compaction report, ...).

    Its keys are attributes (``record.input_tokens``); ``to_dict()`` returns a copy of the object,
    exactly the JSON the C++ API and the store write.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Dict[str, Any]) -> None:
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name: str) -> Any:
        if name == "_data":  # not yet set (an object under construction by copy or pickle)
            raise AttributeError(name)
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__} has no field {name!r} (fields: {', '.join(self._data)})"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __reduce__(self) -> Any:
        return (type(self), (self._data,))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._data == self._data  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({json.dumps(self._data)})"

    def keys(self) -> List[str]:
        return list(self._data)

    def to_dict(self) -> Dict[str, Any]:
        return copy.deepcopy(self._data)


def _plain(value: Any) -> Any:
    if isinstance(value, (JsonObject, _Record)):
        return value.to_dict()
    if isinstance(value, _ToDict):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class _ToDict:
    def to_dict(self) -> Dict[str, Any]:
        """The object as plain JSON-compatible dicts and lists."""
        return {f.name: _plain(getattr(self, f.name))
                for f in dataclasses.fields(self)}


@dataclasses.dataclass(frozen=True)
class Response(_ToDict):
    """The model's answer to one request."""

    id: str
    model: str
    content: str
    reasoning: str
    tool_calls: List[Dict[str, Any]]  # OpenAI shape: {"id", "type": "function", "function": {...}}
    finish_reason: str
    usage: Usage
    timings: Timings
    streamed: bool
    attempts: int
    http_status: int

    @property
    def message(self) -> Dict[str, Any]:
        """The answer as an OpenAI assistant message dict."""
        m: Dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning:
            m["reasoning_content"] = self.reasoning
        if self.tool_calls:
            m["tool_calls"] = copy.deepcopy(self.tool_calls)
        return m

    @staticmethod
    def _from(d: Dict[str, Any]) -> "Response":
        return Response(d["id"], d["model"], d["content"], d["reasoning"], d["tool_calls"],
                        d["finish_reason"], Usage._from(d["usage"]), Timings._from(d["timings"]), d["streamed"],
                        d["attempts"], d["http_status"])


def _decoded_body(obj: Any) -> str:
    """``obj.raw_body`` as text, decoded once (kept on the frozen object)."""
    cached = obj.__dict__.get("_body_text")
    if cached is None:
        raw = obj.raw_body
        cached = raw if isinstance(raw, str) else str(memoryview(raw), "utf-8")
        object.__setattr__(obj, "_body_text", cached)
    return str(cached)


def _with_body(obj: Any) -> Dict[str, Any]:
    out = {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)
           if f.name != "raw_body"}
    out["body"] = _decoded_body(obj)
    return out


@dataclasses.dataclass(frozen=True)
class Turn(_ToDict):
    """What one ``Agent.complete()`` did."""

    response: Response
    record: RequestRecord
    assistant_segment_id: str
    compactions: List[CompactionReport]
    prefix_break: Optional[PrefixBreak]
    break_causes: List[str]
    growth: GrowthPoint
    # The request body that was sent, as its UTF-8 bytes held by the extension (a read-only
    # buffer: ``memoryview(turn.raw_body)``), or a str. ``body`` decodes it on first access: a body
    # at 1M tokens is 4 MB, which a turn that does not look at it should not pay for.
    raw_body: Any = dataclasses.field(repr=False)

    @property
    def body(self) -> str:
        """The request body that was sent (JSON text)."""
        return _decoded_body(self)

    def to_dict(self) -> Dict[str, Any]:
        """The turn as plain JSON-compatible dicts and lists (``body`` as text)."""
        return _with_body(self)

    @staticmethod
    def _from(d: Dict[str, Any], body: Any) -> "Turn":
        pb = d["prefix_break"]
        return Turn(Response._from(d["response"]), RequestRecord._from(d["record"]),
                    d["assistant_segment_id"], [CompactionReport._from(c) for c in d["compactions"]],
                    PrefixBreak._from(pb) if pb is not None else None, d["break_causes"],
                    GrowthPoint._from(d["growth"]), body)


@dataclasses.dataclass(frozen=True)
class RunResult(_ToDict):
    """What ``Agent.run()`` did: the last answer, why it stopped ("answer" or "max_turns"), every
    turn, and how many tool calls it answered (and how many of those were errors)."""

    answer: str
    stopped: StoppedReason
    turns: List[Turn]
    tool_calls: int
    tool_errors: int

    @staticmethod
    def _from(d: Dict[str, Any], bodies: Sequence[Any] = ()) -> "RunResult":
        return RunResult(d["answer"], d["stopped"],
                         [Turn._from(t, b) for t, b in zip(d["turns"], bodies)],
                         d["tool_calls"], d["tool_errors"])


@dataclasses.dataclass(frozen=True)
class CachePrediction(_ToDict):
    """The request the next ``complete()`` would send, computed without changing anything."""

    input_tokens: int
    input_tokens_exact: bool
    predicted_cached_tokens: int
    compaction_due: bool
    compaction: Optional[CompactionReport]

    @staticmethod
    def _from(d: Dict[str, Any]) -> "CachePrediction":
        c = d["compaction"]
        return CachePrediction(d["input_tokens"], d["input_tokens_exact"],
                               d["predicted_cached_tokens"], d["compaction_due"],
                               CompactionReport._from(c) if c is not None else None)


@dataclasses.dataclass(frozen=True)
class RecallPage(_ToDict):
    """One page of an original that compaction or hygiene altered."""

    recall_id: str
    content: str
    offset: int
    total_bytes: int
    remaining_bytes: int
    tokens: int


@dataclasses.dataclass(frozen=True)
class TrimResult(_ToDict):
    """What ``trim_messages`` kept: the messages, their input tokens and, when something was
    trimmed, the report."""

    messages: List[Dict[str, Any]]
    input_tokens: int
    report: Optional[CompactionReport]


@dataclasses.dataclass(frozen=True)
class Delta(_ToDict):
    """One streamed fragment of an answer."""

    kind: DeltaKind
    text: str
    tool_call_index: int = 0
    tool_call_id: str = ""
    tool_name: str = ""


@dataclasses.dataclass(frozen=True)
class ToolOutput:
    """What a tool handler may return to mark its result as an error (a plain return value is a
    successful result; an exception is an error result naming the exception)."""

    content: str
    is_error: bool = False
