"""hayata_py: an actor-model runtime for AI-agent graphs, on Thespian.

Start an :class:`AgentSystem`, start agents from :class:`AgentConfig`, run
invocations with :meth:`AgentRef.run`; from an event loop, the same with
:class:`AsyncAgentSystem`. See docs/guide/api.md (built by ``make docs``) for the whole API.
"""

from hayata_py._api import AgentSystem
from hayata_py._async import AsyncAgentRef, AsyncAgentSystem
from hayata_py._config import AgentConfig, Liveness
from hayata_py._errors import (
    AgentAlreadyStarted,
    AgentNotFound,
    ConfigError,
    CorruptRecord,
    EncodingError,
    ErrorInfo,
    HayataError,
    InvalidPartialResult,
    InvocationBusy,
    ReadOnlyStorage,
    RecoveryRejected,
    RunRejected,
    SchemaTooNew,
    StaleExecution,
    StaleWriter,
    StoreError,
)
from hayata_py._policy import Finish, Map, Next, NodeContext, Pause, PolicyContext, RetryPolicy
from hayata_py._ref import AgentRef
from hayata_py._threads import ThreadInfo
from hayata_py.messages import (
    CALLER,
    AgentEvent,
    AgentResult,
    AgentStatus,
    GetResult,
    GetStatus,
    ResultReply,
    Run,
    RunAccepted,
    Unfinished,
    WaitResult,
)

__all__ = [
    "CALLER",
    "AgentAlreadyStarted",
    "AgentConfig",
    "AgentEvent",
    "AgentNotFound",
    "AgentRef",
    "AgentResult",
    "AgentStatus",
    "AgentSystem",
    "AsyncAgentRef",
    "AsyncAgentSystem",
    "ConfigError",
    "CorruptRecord",
    "EncodingError",
    "ErrorInfo",
    "Finish",
    "GetResult",
    "GetStatus",
    "HayataError",
    "InvalidPartialResult",
    "InvocationBusy",
    "Liveness",
    "Map",
    "Next",
    "NodeContext",
    "Pause",
    "PolicyContext",
    "ReadOnlyStorage",
    "RecoveryRejected",
    "ResultReply",
    "RetryPolicy",
    "Run",
    "RunAccepted",
    "RunRejected",
    "SchemaTooNew",
    "StaleExecution",
    "StaleWriter",
    "StoreError",
    "ThreadInfo",
    "Unfinished",
    "WaitResult",
]
