"""strata: context management for LLM agents, from Python.

    import strata
    agent = strata.Agent.create({"identity": {"id": "agent-1"},
                                 "endpoint": {"base_url": "http://127.0.0.1:8000/v1"},
                                 "store_path": "agents.db"})
    agent.set_system_prompt("You are a coding agent.")

    @agent.tool                      # the schema from the type hints and the docstring
    def read_file(path: str) -> str:
        '''Reads a file.

        Args:
            path: the file's path.
        '''
        return open(path).read()

    result = agent.run("Fix the failing test.")
    print(result.answer)

Errors are strata.Error subclasses named after the status code (strata.InvalidArgument, ...).
"""

from ._errors import (Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, Error,
                      FailedPrecondition, Internal, InvalidArgument, NotFound, OutOfRange,
                      PermissionDenied, ResourceExhausted, Unauthenticated, Unavailable,
                      Unimplemented, Unknown)
from ._agent import (Agent, CancellationToken, TurnStream, async_workers, normalize_config,
                     resolve_budget, set_async_workers)
from ._programs import program_path
from ._records import (AgentConfig, BudgetConfig, BudgetLimit, CacheConfig, EndpointConfig,
                       HygieneConfig, IdentityConfig, PolicyConfig, RecallConfig, RenderConfig)
from ._trim import trim_messages
from ._client import (Budget, BuiltRequest, Client, Completion, Context, GrpcTransport,
                      HttpTransport, Transport)
from ._tools import function_schema
from ._lowlevel import ChatTemplate, Store, Tokenizer
from ._types import (CachePrediction, CompactionReport, Delta, DeltaKind, EventType, GrowthPoint,
                     JsonObject, LayerName, PrefixBreak, PrefixBreakKind, RecallPage,
                     RequestRecord, Response, RunResult, StatusCodeName, StoppedReason,
                     StoredEvent, Timings, ToolOutput, TrimResult, Turn, Usage)

__version__ = "0.1.0"

__all__ = [
    "AgentConfig", "BudgetConfig", "BudgetLimit", "CacheConfig", "EndpointConfig",
    "HygieneConfig", "IdentityConfig", "PolicyConfig", "RecallConfig", "RenderConfig",
    "Aborted", "AlreadyExists", "Cancelled", "DataLoss", "DeadlineExceeded", "Error",
    "FailedPrecondition", "Internal", "InvalidArgument", "NotFound", "OutOfRange",
    "PermissionDenied", "ResourceExhausted", "Unauthenticated", "Unavailable", "Unimplemented",
    "Unknown",
    "Agent", "CancellationToken", "TurnStream", "async_workers", "normalize_config",
    "resolve_budget", "set_async_workers", "trim_messages", "function_schema", "program_path",
    "Budget", "BuiltRequest", "Client", "Completion", "Context", "GrpcTransport", "HttpTransport",
    "Transport",
    "ChatTemplate", "Store", "Tokenizer",
    "CachePrediction", "CompactionReport", "Delta", "DeltaKind", "EventType", "GrowthPoint",
    "JsonObject", "LayerName", "PrefixBreak", "PrefixBreakKind", "StatusCodeName",
    "StoppedReason", "StoredEvent",
    "RecallPage", "RequestRecord", "Response", "RunResult", "Timings", "ToolOutput", "TrimResult",
    "Turn", "Usage",
]
