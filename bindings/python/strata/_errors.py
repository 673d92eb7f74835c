"""strata's Status codes as Python exceptions.

Every failing strata call raises a subclass of :class:`Error` named after its canonical code
(the set gRPC and absl use), carrying ``code`` (the canonical name, e.g. ``"INVALID_ARGUMENT"``),
``code_value`` (its number) and ``message`` (the C++ message, unchanged).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class Error(Exception):
    """Base of every strata error."""

    code: str = "UNKNOWN"
    code_value: int = 2
    # Client.complete: the RequestRecord of the failed request (None elsewhere).
    record: Optional[Any] = None
    record_json: Optional[str] = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class Cancelled(Error):
    code, code_value = "CANCELLED", 1


class Unknown(Error):
    code, code_value = "UNKNOWN", 2


class InvalidArgument(Error, ValueError):
    code, code_value = "INVALID_ARGUMENT", 3


class DeadlineExceeded(Error, TimeoutError):
    code, code_value = "DEADLINE_EXCEEDED", 4


class NotFound(Error, LookupError):
    code, code_value = "NOT_FOUND", 5


class AlreadyExists(Error):
    code, code_value = "ALREADY_EXISTS", 6


class PermissionDenied(Error):
    code, code_value = "PERMISSION_DENIED", 7


class ResourceExhausted(Error):
    code, code_value = "RESOURCE_EXHAUSTED", 8


class FailedPrecondition(Error):
    code, code_value = "FAILED_PRECONDITION", 9


class Aborted(Error):
    code, code_value = "ABORTED", 10


class OutOfRange(Error, IndexError):
    code, code_value = "OUT_OF_RANGE", 11


class Unimplemented(Error, NotImplementedError):
    code, code_value = "UNIMPLEMENTED", 12


class Internal(Error):
    code, code_value = "INTERNAL", 13


class Unavailable(Error, ConnectionError):
    code, code_value = "UNAVAILABLE", 14


class DataLoss(Error):
    code, code_value = "DATA_LOSS", 15


class Unauthenticated(Error):
    code, code_value = "UNAUTHENTICATED", 16


_BY_VALUE: Dict[int, Type[Error]] = {
    cls.code_value: cls
    for cls in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
                PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange,
                Unimplemented, Internal, Unavailable, DataLoss, Unauthenticated)
}


# The C++ API names that strata's messages mention, as a Python program spells them (longest
# first where one contains another). A message naming a C++ option tells a Python user to change
# something they cannot find otherwise.
_PYTHON_NAMES = (
    ("set OpenOptions::retokenize to recount", "pass retokenize=True to Agent.open to recount"),
    ("OpenOptions::retokenize", "Agent.open(retokenize=True)"),
    ("inject AgentServices::transport", "pass endpoint= to Agent.open"),
    (" (checked against AgentServices::tokenizer)", ""),
    ("AgentConfig::tokenizer", "the configuration's \"tokenizer\""),
    ("Timeouts::first_byte or prefill_per_100k_tokens",
     "endpoint.first_byte_timeout_ms (HttpTransport(first_byte_timeout_ms=...))"),
    ("Timeouts::first_byte", "endpoint.first_byte_timeout_ms"),
    ("ForkOptions::max_id_length", "the longest fork id"),
    ("ForkOptions::id", "fork(task, id=...)"),
    ("RunOptions::max_turns", "max_turns"),
    ("Context::SetVolatile", "set_volatile"),
    ("with AppendToolResult", "with append_tool_result (or dispatch_tool_calls)"),
    ("AppendToolResult", "append_tool_result"),
    ("AppendUser", "append_user"),
    ("use UpdateDocument or PutDocument", "use put_document"),
    ("use AddDocument or PutDocument", "use put_document"),
    ("PutDocument", "put_document"),
    ("RegisterTool", "register_tool"),
    ("DispatchToolCalls", "dispatch_tool_calls"),
    ("SetSystemPrompt", "set_system_prompt"),
    ("Agent::Create", "strata.Agent.create"),
    ("Agent::Open", "strata.Agent.open"),
    ("made with CreateContext, not strata.Agent.create); reopen it with OpenContext",
     "made by the C++ CreateContext, not strata.Agent.create); reopen it from C++ with "
     "OpenContext"),
)


def python_message(message: str) -> str:
    """``message`` with the C++ API names it mentions replaced by their Python spelling."""
    for cpp, py in _PYTHON_NAMES:
        if cpp in message:
            message = message.replace(cpp, py)
    return message


def from_status(code: int, message: str) -> Error:
    """The exception of a strata Status (used by the extension), its message in Python names."""
    message = python_message(message)
    cls = _BY_VALUE.get(code)
    if cls is None:
        err = Unknown(message)
        err.code, err.code_value = f"UNKNOWN_CODE_{code}", code
        return err
    return cls(message)
