"""Messages between the actors of one agent (internal; may change freely)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hayata_py._errors import ErrorInfo


@dataclass(frozen=True)
class Execute:
    """Agent -> node: run the node function once for this task."""

    execution_id: str
    task_id: str
    invocation_id: str
    node_id: str
    input: Any
    state: dict[str, Any]
    agent: Any
    stream: bool
    timeout: float
    idempotency_key: str
    step: int = 0
    branch_index: int = 0
    token: int = 0
    attempt: int = 1
    store_url: str = ""
    instance: str = ""
    agent_id: str = ""


@dataclass(frozen=True)
class Cancel:
    """Agent -> node: the execution is over; kill its edges if still running."""

    execution_id: str


@dataclass(frozen=True)
class EdgeInit:
    node_id: str
    edge_id: str
    function: str
    watcher: Any


@dataclass(frozen=True)
class EdgeReady:
    edge_id: str
    pid: int


@dataclass(frozen=True)
class RunEdge:
    """Node -> edge: run the node function (one edge task)."""

    execute: Execute
    edge_id: str
    reducer: Any
    direct: bool = False
    """The execution has this one edge: the edge sends the agent its
    :class:`Outcome` itself (one hop less on every step) and the reducer only
    keeps the books (deadline, :class:`ReducerDone`, telemetry)."""


@dataclass(frozen=True)
class EdgeResult:
    """Edge -> reducer: terminal result of one edge task."""

    execution_id: str
    node_id: str
    edge_id: str
    ok: bool
    result: Any = None
    error: ErrorInfo | None = None
    partials: int = 0
    delivered: bool = False
    """The edge already sent this result to the agent as the node's :class:`Outcome`."""


@dataclass(frozen=True)
class Expect:
    """Node -> reducer: collect these edges of an execution, within ``timeout``."""

    execution_id: str
    node_id: str
    edge_ids: tuple[str, ...]
    timeout: float
    agent: Any
    agent_id: str = ""


@dataclass(frozen=True)
class Forget:
    """Node -> reducer: an execution was cancelled; drop what is collected."""

    execution_id: str


@dataclass(frozen=True)
class ReducerDone:
    """Reducer -> node: the execution is consolidated; ``pending`` edges timed out.

    ``status`` is the telemetry status (completed, failed, timed_out) and
    ``error_class`` the exception class name when the node function raised."""

    execution_id: str
    pending: tuple[str, ...] = ()
    status: str = "completed"
    error_class: str | None = None


@dataclass(frozen=True)
class Outcome:
    """Edge (single-edge execution), reducer or node -> agent: one node's
    consolidated result for an execution."""

    execution_id: str
    node_id: str
    ok: bool
    result: Any = None
    error: ErrorInfo | None = None
    partials: int = 0


@dataclass(frozen=True)
class Partial:
    """Edge -> agent: a streamed partial result (``index`` counts from 1 per edge task)."""

    execution_id: str
    node_id: str
    edge_id: str
    index: int
    result: dict[str, Any]


@dataclass(frozen=True)
class WatchNodes:
    """Agent -> node supervisor (-> watcher): send me node addresses and exits."""

    subscriber: Any = None
    nodes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeTable:
    nodes: dict[str, Any]
    waiting: dict[str, str] = field(default_factory=dict)
    """Nodes waiting for a system that satisfies their placement, with the reason."""


@dataclass(frozen=True)
class NodeUp:
    node_id: str
    address: Any
    pid: int | None


@dataclass(frozen=True)
class NodeDown:
    node_id: str
    pid: int | None
    reason: str


@dataclass(frozen=True)
class NodeEvent:
    """Node supervisor -> watcher: a node started or exited."""

    node_id: str
    up: bool
    address: Any
    pid: int | None
    reason: str | None = None


@dataclass(frozen=True)
class EdgeStarted:
    node_id: str
    edge_id: str
    pid: int
    host: str = ""
    """The edge's host (boot id): a pid is only meaningful there."""


@dataclass(frozen=True)
class EdgeStopped:
    node_id: str
    edge_id: str


@dataclass(frozen=True)
class Describe:
    """Ask a node for its own children (edges, reducer)."""


@dataclass(frozen=True)
class Description:
    children: list[dict[str, Any]]


@dataclass(frozen=True)
class UseWatcher:
    """Node supervisor -> node: the edge watcher restarted at ``address``."""

    address: Any


@dataclass(frozen=True)
class GetSystemInfo:
    """Ask the top supervisor for :class:`SystemInfo`."""


@dataclass(frozen=True)
class SystemInfo:
    """What a process attaching to a running system needs to know."""

    store_url: str
    instance: str
    data_dir: str
    name: str = ""
    """The system's stable name: the owner of its invocations' leases."""
    liveness: Any = None
