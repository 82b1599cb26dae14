"""Messages between the actors of one agent (internal; may change freely)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from hayata_py._errors import ErrorInfo
from hayata_py._invocation.events import DownCause
from hayata_py.store._records import InvocationRecord


@dataclass(frozen=True)
class RunTask:
    """Agent -> edge: run the node function once for this task (one edge task).

    The edge records ``started`` before the function runs and
    ``completed``/``failed`` after it, then sends the agent :class:`Outcome`.
    ``checkpoint`` (a sequential step's, not yet saved by the agent) is
    committed with ``started``, in the same transaction."""

    execution_id: str
    task_id: str
    invocation_id: str
    node_id: str
    input: Any
    state: dict[str, Any]
    agent: Any
    stream: bool
    idempotency_key: str
    step: int = 0
    branch_index: int = 0
    item: int | None = None
    token: int = 0
    attempt: int = 1
    store_url: str = ""
    instance: str = ""
    agent_id: str = ""
    checkpoint: InvocationRecord | None = None
    history: tuple[str, ...] = ()
    """Error types of the attempts before this one (non-empty: a retry)."""
    retry: bool = False
    """This attempt follows the task's recorded failure (its failed row exists)."""
    retry_on: tuple[str, ...] = ()
    """Exception classes (``module:Class``) that make a failure retryable."""
    thread: str | None = None
    """The invocation's conversation thread (``ctx.thread``)."""
    function: str = ""
    """A compensation: the compensator to run instead of the node's function
    (one at a time, even on an edge that runs several tasks at once)."""


@dataclass(frozen=True)
class Outcome:
    """Edge -> agent: the recorded result of one task."""

    execution_id: str
    task_id: str
    node_id: str
    edge_id: str
    ok: bool
    result: Any = None
    error: ErrorInfo | None = None
    partials: int = 0
    item: int | None = None


@dataclass(frozen=True)
class RunTasks:
    """Agent -> edge: several :class:`RunTask` decided together, in order (a
    batching agent's; one message instead of one each)."""

    tasks: tuple[RunTask, ...]


@dataclass(frozen=True)
class Outcomes:
    """Edge -> agent: the :class:`Outcome` of tasks that ended together, in order."""

    outcomes: tuple[Outcome, ...]


@dataclass(frozen=True)
class BatchSubscriber:
    """A run's subscriber that takes its messages several at once: hayata's
    own CALLER receiver at ``address`` (:mod:`hayata_py._receiver`), which
    unpacks an :class:`EventBatch`. The agent sends each write's stored
    events (and the results behind them) for one such address in one message
    instead of one each; an actor named as subscriber gets each on its own."""

    address: Any


@dataclass(frozen=True)
class EventBatch:
    """Agent -> a :class:`BatchSubscriber`: :class:`~hayata_py.messages.AgentEvent`
    and :class:`~hayata_py.messages.AgentResult` messages, of one or several
    invocations, each invocation's in order."""

    messages: tuple[Any, ...]


@dataclass(frozen=True)
class Bundle:
    """Caller -> agent: the messages a caller's receiver had for one agent at
    once (:mod:`hayata_py._receiver`), in the order they were sent. The agent
    handles each as if it had come alone, from the same sender; one Thespian
    message carries them instead of one each (a caller with hundreds of
    threads asks together)."""

    messages: tuple[Any, ...]


@dataclass(frozen=True)
class Partial:
    """Edge -> agent: a streamed partial result (``index`` counts from 1 per edge task)."""

    execution_id: str
    node_id: str
    edge_id: str
    index: int
    result: dict[str, Any]
    item: int | None = None


@dataclass(frozen=True)
class EdgeRef:
    """An edge the agent may send tasks to, and how many it runs at once."""

    edge_id: str
    address: Any
    capacity: int = 1
    """Tasks the edge runs at once: ``edge_concurrency`` of an ``async def`` node, else 1."""


@dataclass(frozen=True)
class EdgeTable:
    """Node -> agent: the edges of this node the agent may use now (all of them;
    ``version`` grows with every change, since messages may arrive out of order)."""

    node_id: str
    version: int
    edges: tuple[EdgeRef, ...]
    wanted: int = 0
    """Edges the node keeps: those above and the ones still starting."""
    ensured: int = 0
    """``seq`` of the last :class:`EnsureEdges` the node handled before this table."""


class EdgeExit(enum.Enum):
    """Why an edge left its node's table."""

    DIED = "died"
    """Its process died on its own (os._exit, a signal, OOM): its task failed."""
    KILLED = "killed"
    """Its node killed it on request (a cancelled or timed-out task)."""
    RETIRED = "retired"
    """Its node stopped it, idle, on :class:`RetireEdge`: it ran no task."""


@dataclass(frozen=True)
class EdgeLost:
    """Node -> agent: edge ``edge_id`` is gone (every task it ran fails with
    ``node_failed`` if it died on its own)."""

    node_id: str
    edge_id: str
    exit: EdgeExit
    pid: int | None = None


class KillReason(enum.Enum):
    """Why the agent wants an edge killed (logged by the node)."""

    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"


@dataclass(frozen=True)
class KillEdge:
    """Agent -> node: the task on ``edge_id`` (an edge that runs one at a time) is
    over; kill the edge (the only way to stop arbitrary Python code) and start a
    replacement."""

    edge_id: str
    reason: KillReason = KillReason.CANCELLED


@dataclass(frozen=True)
class CancelRun:
    """Agent -> edge that runs several tasks at once: task ``task_id`` is over;
    cancel its coroutine and send nothing for it. The edge's other tasks go on;
    if the coroutine does not end within a grace period (it blocks the loop, or
    ignores the cancellation), the edge exits, which ends all of them as an
    edge's death does."""

    task_id: str
    reason: KillReason = KillReason.CANCELLED


@dataclass(frozen=True)
class RetireEdge:
    """Agent -> node: edge ``edge_id`` has been idle for ``edge_idle_timeout``;
    the agent sends it nothing more. Stop it and keep one edge fewer (never none)."""

    edge_id: str


@dataclass(frozen=True)
class UseAgent:
    """Node supervisor -> node: tell this agent about your edges (``EdgeTable``)."""

    address: Any


@dataclass(frozen=True)
class EnsureEdges:
    """Agent -> node: be able to run ``count`` tasks at once (a map step's window,
    or the tasks waiting in the agent's pool): keep at least ``ceil(count /
    capacity)`` edges. The node honours the largest count asked; only
    :class:`RetireEdge` makes it keep fewer."""

    count: int
    seq: int = 0
    """The pool's number for this ask (0: a map step's), echoed as ``EdgeTable.ensured``."""


@dataclass(frozen=True)
class EdgeInit:
    """Node -> edge: who you are (sent right after the edge is created)."""

    node_id: str
    edge_id: str
    function: str
    watcher: Any
    capacity: int = 1
    """Tasks at once (> 1: an ``async def`` node's tasks share the edge's event loop)."""


@dataclass(frozen=True)
class EdgeReady:
    """Edge -> node: initialised (the node publishes it to the agent only now)."""

    edge_id: str
    pid: int


@dataclass(frozen=True)
class WatchNodes:
    """Agent -> node supervisor (-> watcher): send me node addresses and exits."""

    subscriber: Any = None
    nodes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeTable:
    """Watcher -> agent: the nodes' current addresses."""

    nodes: dict[str, Any]
    waiting: dict[str, str] = field(default_factory=dict)
    """Nodes waiting for a system that satisfies their placement, with the reason."""
    supervisor_pid: int | None = None
    """The node supervisor's pid (the watcher's parent): the agent checks it when it
    is stopped, to tell a user's stop from a restart after its node supervisor died."""


@dataclass(frozen=True)
class NodeUp:
    node_id: str
    address: Any
    pid: int | None


@dataclass(frozen=True)
class NodeExited:
    """Watcher -> agent: a node exited (``cause`` decides; ``reason`` is for people)."""

    node_id: str
    pid: int | None
    cause: DownCause
    reason: str = ""


@dataclass(frozen=True)
class NodeEvent:
    """Node supervisor -> watcher: a node started or exited."""

    node_id: str
    up: bool
    address: Any
    pid: int | None
    cause: DownCause | None = None
    """Why it is down (None while up)."""
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
    """Ask a node for its own children (its edges)."""


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
    owner: tuple[int, float] | None = None
    """``(pid, start time)`` of the process the system ends with
    (``exit_with_owner``), or None."""


# -- map steps: the reducer ------------------------------------------------------------


@dataclass(frozen=True)
class StartReducer:
    """Agent -> node: start the reducer of map step ``execution_id`` (node -> reducer:
    the same, as its init). ``task_ids`` are the items' tasks in item order."""

    execution_id: str
    invocation_id: str
    node_id: str
    task_ids: tuple[str, ...]
    reduce: str | None
    agent: Any
    store_url: str = ""
    agent_id: str = ""
    opening: str = ""
    """Unique per opening of the map (a recovery opens it again): what a
    :class:`StopReducer` that overtook this message names."""


@dataclass(frozen=True)
class ReducerUp:
    """Reducer -> node: initialised (the node tells the agent only now)."""

    execution_id: str
    pid: int


@dataclass(frozen=True)
class ReducerReady:
    """Node -> agent: the reducer of ``execution_id`` runs at ``address`` (a
    replacement has a new one: items sent to the dead one are read from the store)."""

    execution_id: str
    address: Any


@dataclass(frozen=True)
class ReducerGone:
    """Node -> agent: the reducer of ``execution_id`` died ``deaths`` times; the node
    gave up replacing it."""

    execution_id: str
    deaths: int


@dataclass(frozen=True)
class StopReducer:
    """Agent -> node: map step ``execution_id`` is over; stop its reducer."""

    execution_id: str
    opening: str = ""


@dataclass(frozen=True)
class ItemResult:
    """Agent -> reducer: item ``item`` completed with ``result`` (recorded)."""

    execution_id: str
    item: int
    result: Any


@dataclass(frozen=True)
class ConsolidateItems:
    """Agent -> reducer: every item is done; answer :class:`ReducerAnswer` (``results``:
    all of them, without a store; else None and the reducer reads the gaps)."""

    execution_id: str
    results: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class ReducerAnswer:
    """Reducer -> agent: the consolidated result, or why there is none."""

    execution_id: str
    ok: bool
    result: Any = None
    error: ErrorInfo | None = None


@dataclass(frozen=True)
class ReducerDone:
    """Reducer -> node: answered; stop me (an exit after this is no crash)."""

    execution_id: str
