"""strata.trim_messages: a stateless trimmer for callers who keep their own OpenAI message list."""

from __future__ import annotations

import functools
import json
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Union

from . import _strata
from ._errors import ResourceExhausted
from ._lowlevel import Tokenizer
from ._types import CompactionReport, TrimResult

Message = Mapping[str, Any]
TokenCounter = Callable[[List[Message]], int]
Strategy = Literal["last", "first"]


@functools.lru_cache(maxsize=8)
def _tokenizer_for_spec(spec: str) -> Tokenizer:
    return Tokenizer.from_spec(spec)


def _tokenizer(tokenizer: Union[str, Tokenizer]) -> Tokenizer:
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    if isinstance(tokenizer, str):
        return _tokenizer_for_spec(tokenizer)
    raise TypeError("tokenizer must be a strata.Tokenizer or a tokenizer spec string, not "
                    f"{type(tokenizer).__name__}")


def _budget_doc(budget: Union[int, Mapping[str, Any]]) -> Mapping[str, Any]:
    if isinstance(budget, bool) or not isinstance(budget, (int, Mapping)):
        raise TypeError(f"budget must be an int or a dict, not {type(budget).__name__}")
    if isinstance(budget, int):
        return {"window": budget, "reserve_output": 0, "reserve_reasoning": 0,
                "reserve_headroom": 0, "trigger": {"fraction": 1.0}, "target": {"fraction": 1.0}}
    return budget


def _text(content: Any) -> str:
    """A content as the counter sees it: a content-part list's text parts joined, other parts as
    their JSON text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] if isinstance(p, dict) and p.get("type") == "text" and
                       isinstance(p.get("text"), str) else json.dumps(p) for p in content)
    return json.dumps(content)


def _for_template(message: Message) -> Dict[str, Any]:
    out = dict(message)
    out["content"] = _text(message.get("content"))
    return out


def trim_messages(messages: Union[Sequence[Message], str],
                  budget: Union[int, Mapping[str, Any]], *, policy: str = "strata",
                  strategy: Optional[Strategy] = None,
                  tokenizer: Union[str, Tokenizer] = "estimate",
                  token_counter: Optional[TokenCounter] = None, chat_template: str = "glm5",
                  hygiene: bool = False) -> TrimResult:
    """Trims an OpenAI messages list into a budget: system messages first, every tool result kept
    with its call. The messages kept come back exactly as given (the same dict objects, every
    key); one a compaction altered (a masked tool result, a dropped reasoning) is a copy with only
    that changed, and a summary is strata's own message.

    ``budget``: an int is the most input tokens the result may take; a dict is a budget
    configuration as in the agent's config (``{"window": 8192, "target": {"fraction": 0.6}}``).

    How: by default the compaction policy ``policy`` ("strata", "mask", ...) chooses what to
    mask, summarize or evict. ``strategy="last"`` keeps the newest messages that fit and
    ``strategy="first"`` the oldest, like LangChain's ``trim_messages``, never separating a tool
    result from its call.

    Counting: ``tokenizer`` is a ``strata.Tokenizer`` (loaded once by the caller) or a spec string
    (loaded on first use and kept for the next calls), and ``chat_template`` the template the
    server renders with (its per-message tokens counted). ``token_counter`` (a callable taking a
    list of messages, returning their tokens) replaces both; it needs a ``strategy`` (the policy
    counts in C++). Content-part lists (``[{"type": "text", "text": ...}]``) are accepted: their
    text parts are counted, and any other part as its JSON text.

    Warning: the default ``tokenizer="estimate"`` counts about 4 bytes per token. Against a
    budget that is a hard limit it can come out above the model's real count (a budget of 8000
    measured 8102 real tokens with GLM's tokenizer): pass the model's tokenizer
    (``strata.Tokenizer.from_spec("hf:tokenizer.json")``) or leave headroom.

    Raises InvalidArgument for malformed messages (naming the index), ResourceExhausted when what
    cannot be trimmed does not fit."""
    budget_doc = _budget_doc(budget)
    given: List[Message] = json.loads(messages) if isinstance(messages, str) else list(messages)
    if strategy is not None:
        if strategy not in ("last", "first"):
            raise ValueError(f'strategy must be "last", "first" or None, not {strategy!r}')
        return _trim_by_strategy(given, budget_doc, strategy, tokenizer, token_counter,
                                 chat_template)
    if token_counter is not None:
        raise ValueError('token_counter needs strategy="last" or "first": the compaction policy '
                         "counts with a strata.Tokenizer (pass tokenizer=)")
    out = json.loads(_strata.trim_messages(
        json.dumps(given), json.dumps(budget_doc), policy, _tokenizer(tokenizer)._impl,
        chat_template, hygiene))
    kept: List[Dict[str, Any]] = []
    for entry in out["kept"]:
        if "message" in entry:
            kept.append(entry["message"])
            continue
        original = given[entry["i"]]
        if "content" in entry or "drop" in entry:
            altered = dict(original)
            if "content" in entry:
                altered["content"] = entry["content"]
            for key in entry.get("drop", ()):
                altered.pop(key, None)
            kept.append(altered)
        else:
            kept.append(original)
    report = out["report"]
    return TrimResult(kept, out["input_tokens"],
                      CompactionReport._from(report) if report is not None else None)


def _counter(tokenizer: Union[str, Tokenizer], token_counter: Optional[TokenCounter],
             chat_template: str) -> TokenCounter:
    if token_counter is not None:
        if not callable(token_counter):
            raise TypeError("token_counter must be callable (a list of messages -> int)")
        return token_counter
    tok = _tokenizer(tokenizer)
    template = (_strata.ChatTemplate.from_name(chat_template) if chat_template
                else _strata.ChatTemplate.generic(4, 3))

    def count(msgs: List[Message]) -> int:
        body = json.dumps({"messages": [_for_template(m) for m in msgs]})
        return int(template.count_request_tokens(body, tok._impl)[0])

    return count


def _groups(rest: List[Message]) -> List[int]:
    """The indices where a message group starts: an assistant message and the tool results that
    follow it are one group, every other message its own."""
    starts = []
    for i, m in enumerate(rest):
        if m.get("role") != "tool" or i == 0:
            starts.append(i)
    return starts


def _trim_by_strategy(given: List[Message], budget_doc: Mapping[str, Any], strategy: Strategy,
                      tokenizer: Union[str, Tokenizer], token_counter: Optional[TokenCounter],
                      chat_template: str) -> TrimResult:
    for i, m in enumerate(given):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise ValueError(f'messages[{i}]: expected a dict with a "role" string')
    count = _counter(tokenizer, token_counter, chat_template)
    figures = json.loads(_strata.resolve_budget(json.dumps(budget_doc)))
    system = [m for m in given if m["role"] in ("system", "developer")]
    rest = [m for m in given if m["role"] not in ("system", "developer")]
    total = count(system + rest)
    if total <= figures["trigger_tokens"]:
        return TrimResult(list(system + rest), total, None)  # type: ignore[arg-type]
    limit = figures["target_tokens"]
    cuts = _groups(rest)
    # Candidate results, from the most kept to the least: each is monotone in its cut, so a
    # binary search finds the one that keeps the most within the limit.
    if strategy == "last":
        candidates = [rest[c:] for c in cuts] + [[]]
    else:
        candidates = [rest[:c] for c in reversed(cuts[1:] + [len(rest)])] + [[]]
    lo, hi = 0, len(candidates) - 1
    if count(system + candidates[hi]) > limit:
        raise ResourceExhausted(f"trim_messages: the system messages alone take "
                                f"{count(system)} tokens, over the limit of {limit}")
    while lo < hi:
        mid = (lo + hi) // 2
        if count(system + candidates[mid]) <= limit:
            hi = mid
        else:
            lo = mid + 1
    kept = system + candidates[lo]
    return TrimResult(list(kept), count(kept), None)  # type: ignore[arg-type]
