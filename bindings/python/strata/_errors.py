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


def from_status(code: int, message: str) -> Error:
    """The exception of a strata Status (used by the extension)."""
    cls = _BY_VALUE.get(code)
    if cls is None:
        err = Unknown(message)
        err.code, err.code_value = f"UNKNOWN_CODE_{code}", code
        return err
    return cls(message)
