"""Tokenizers and chat templates: exact token counts as the server will count them."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Sequence, Union

from . import _strata
from ._types import GrowthPoint, RequestRecord, StoredEvent

Request = Union[Mapping[str, Any], Sequence[Mapping[str, Any]], str]


def _request_json(request: Request) -> str:
    """A Chat Completions body: a dict, a JSON string, or a bare messages list."""
    if isinstance(request, str):
        return request
    if isinstance(request, Mapping):
        return json.dumps(request)
    return json.dumps({"messages": list(request)})


class Tokenizer:
    """A tokenizer from a spec: "hf:PATH/tokenizer.json", "spm:PATH.model", "estimate",
    "estimate:3.5", ... Thread-safe; encode and count release the GIL."""

    def __init__(self, impl: Any) -> None:
        if not isinstance(impl, _strata.Tokenizer):
            raise TypeError("use Tokenizer.from_spec(spec)")
        self._impl = impl

    @classmethod
    def from_spec(cls, spec: str) -> "Tokenizer":
        """Raises InvalidArgument for an unknown spec, NotFound/Unavailable for a missing file."""
        return cls(_strata.Tokenizer.from_spec(spec))

    @property
    def name(self) -> str:
        return str(self._impl.name)

    @property
    def is_estimate(self) -> bool:
        return bool(self._impl.is_estimate)

    def encode(self, text: str) -> List[int]:
        """Token ids (an estimator returns [])."""
        return list(self._impl.encode(text))

    def count(self, text: str) -> int:
        return int(self._impl.count(text))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._impl.decode(list(ids)))

    def __repr__(self) -> str:
        return f"strata.Tokenizer({self.name!r})"


class ChatTemplate:
    """The server's chat template: ``ChatTemplate.glm5()`` or ``ChatTemplate.generic()``."""

    def __init__(self, impl: Any) -> None:
        if not isinstance(impl, _strata.ChatTemplate):
            raise TypeError("use ChatTemplate.glm5(), glm47(), generic() or from_name()")
        self._impl = impl

    @classmethod
    def glm5(cls, *, add_generation_prompt: bool = True) -> "ChatTemplate":
        """GLM-5.3-Flash's template (name "glm-5.3", alias "glm5")."""
        return cls(_strata.ChatTemplate.glm5(add_generation_prompt))

    @classmethod
    def glm47(cls, *, add_generation_prompt: bool = True) -> "ChatTemplate":
        """GLM-4.7's template (name "glm-4.7")."""
        return cls(_strata.ChatTemplate.glm47(add_generation_prompt))

    @classmethod
    def generic(cls, *, per_message_tokens: int = 4, per_request_tokens: int = 3) -> "ChatTemplate":
        return cls(_strata.ChatTemplate.generic(per_message_tokens, per_request_tokens))

    @classmethod
    def from_name(cls, name: str) -> "ChatTemplate":
        """A template by the name an agent configuration uses: one of ``ChatTemplate.names()``
        ("glm-5.3", "glm-4.7", "generic") or the alias "glm5". Unknown names raise
        ``strata.InvalidArgument`` listing the known ones."""
        return cls(_strata.ChatTemplate.from_name(name))

    @staticmethod
    def names() -> List[str]:
        return list(_strata.ChatTemplate.names())

    @property
    def name(self) -> str:
        return str(self._impl.name)

    def render(self, request: Request) -> str:
        """The prompt text the server renders for ``request`` (generation prompt included).
        Raises InvalidArgument for a body without messages, an unknown role, ..."""
        return str(self._impl.render(_request_json(request)))

    def overhead_tokens(self, request: Request) -> int:
        return int(self._impl.overhead_tokens(_request_json(request)))

    def count_tokens(self, request: Request, tokenizer: Tokenizer) -> int:
        """Input tokens of the whole request as the server counts them."""
        tokens, _estimated = self._impl.count_request_tokens(_request_json(request),
                                                             tokenizer._impl)
        return int(tokens)

    def __repr__(self) -> str:
        return f"strata.ChatTemplate({self.name!r})"


class Store:
    """strata's SQLite store, for reading what agents recorded: agents, request records, events
    (compactions, prefix breaks), growth curves. Thread-safe; every call releases the GIL.

    ``Store.open(path)`` opens read-only (an inspection cannot change the file); pass
    ``read_only=False`` to write (``backup`` works either way)."""

    def __init__(self, impl: Any) -> None:
        if not isinstance(impl, _strata.Store):
            raise TypeError("use Store.open(path)")
        self._impl = impl

    @classmethod
    def open(cls, path: str, *, read_only: bool = True,
             create_if_missing: bool = False) -> "Store":
        """NotFound for a missing file (unless create_if_missing), DataLoss for a file that is not
        a strata store, FailedPrecondition for a newer schema."""
        return cls(_strata.Store.open(path, read_only, create_if_missing))

    @property
    def path(self) -> str:
        return str(self._impl.path)

    def agents(self) -> List[Dict[str, Any]]:
        """Every agent: id, tokenizer_name, turn, segments, tokens, requests, compactions, ..."""
        return list(json.loads(self._impl.agents()))

    def requests(self, agent_id: str, limit: int = 100) -> List[RequestRecord]:
        """The agent's newest ``limit`` request records, newest first."""
        return [RequestRecord._from(r) for r in json.loads(self._impl.requests(agent_id, limit))]

    def events(self, agent_id: str, type: str = "") -> List[StoredEvent]:
        """The agent's events in order ("compaction", "prefix_break", ...), payloads parsed
        (a compaction's payload is ``CompactionReport``'s JSON, a prefix break's
        ``PrefixBreak``'s)."""
        return [StoredEvent._from(e) for e in json.loads(self._impl.events(agent_id, type))]

    def growth(self, agent_id: str) -> List[GrowthPoint]:
        """The agent's growth curve: one point per turn, tokens per layer."""
        return [GrowthPoint._from(g) for g in json.loads(self._impl.growth(agent_id))]

    def stats(self) -> Dict[str, int]:
        return dict(json.loads(self._impl.stats()))

    def backup(self, destination: str) -> None:
        """A consistent copy of the whole database at ``destination`` (a new file)."""
        self._impl.backup(destination)

    def __repr__(self) -> str:
        return f"strata.Store({self.path!r})"
