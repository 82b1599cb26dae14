"""Records the task store reads and writes: frozen, plain-valued dataclasses.

Values typed ``Any`` must be encodable by :mod:`hayata_py._codec` (None,
bool, int, float, str, bytes, lists/tuples, dicts with str keys). Tuples
come back from the store as lists.

Timestamps are floats, unix seconds, taken from the store's clock; the
``created_at``/``updated_at``/``started_at``/``finished_at`` values passed in
with a write are ignored (the store stamps them).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final, Literal

from hayata_py._codec import FORMAT_VERSION

__all__ = [
    "FINISHED_TASK_STATUSES",
    "INVOCATION_STATUSES",
    "TASK_STATUSES",
    "TERMINAL_INVOCATION_STATUSES",
    "ActiveExecution",
    "CachedResult",
    "InvocationRecord",
    "InvocationStatus",
    "PruneReport",
    "QueuedRun",
    "StoredEvent",
    "TaskRecord",
    "TaskStatus",
    "ThreadRecord",
    "task_id_for",
]

InvocationStatus = Literal["running", "completed", "failed"]
TaskStatus = Literal["scheduled", "started", "completed", "failed"]

INVOCATION_STATUSES: Final = frozenset({"running", "completed", "failed"})
TERMINAL_INVOCATION_STATUSES: Final = frozenset({"completed", "failed"})
TASK_STATUSES: Final = frozenset({"scheduled", "started", "completed", "failed"})
FINISHED_TASK_STATUSES: Final = frozenset({"completed", "failed"})


@dataclass(frozen=True)
class ActiveExecution:
    """The step an invocation was executing when its checkpoint was written.

    ``node_ids`` are the nodes of that step in their requested order;
    ``parallel`` says whether they run as parallel branches (``branch_index``
    of each task is its position in ``node_ids``).
    """

    execution_id: str
    step: int
    node_ids: tuple[str, ...]
    input: Any = None
    parallel: bool = False
    map: bool = False
    """A map step: ``node_ids`` is its one node, ``input`` its list of items (the
    task of item ``i`` has ``branch_index`` ``i`` and id ``task_id_for(..., item=i)``)."""
    reduce: str | None = None
    """A map step's reduce function (import path), or None."""


@dataclass(frozen=True)
class InvocationRecord:
    """The checkpoint of one invocation of an agent's graph.

    ``status`` is ``running`` until :meth:`TaskStore.finish_invocation` makes
    it ``completed`` or ``failed`` (terminal, never changed again). ``error``
    is an ``ErrorInfo.to_dict()`` for failed invocations.
    ``format_version`` is the value format the record was written with.
    """

    invocation_id: str
    agent_id: str
    status: InvocationStatus
    step: int
    state: dict[str, Any]
    input: Any
    active_execution: ActiveExecution | None = None
    parallel_results: list[Any] | None = None
    last_result: Any = None
    result: Any = None
    error: dict[str, Any] | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    format_version: int = FORMAT_VERSION
    paused: dict[str, Any] | None = None
    """Set while a running invocation waits for ``resume()`` (a human-in-the-loop
    pause): ``{"kind", "payload", "nodes"}``. Written with the checkpoint."""
    thread_id: str | None = None
    """The conversation thread the invocation runs on (``None``: no thread).
    Written once, at creation."""
    failing: dict[str, Any] | None = None
    """Set while a running invocation runs its compensations before it ends
    failed (``AgentConfig.compensate``): the error it ends with. Written with
    the checkpoint."""


@dataclass(frozen=True)
class TaskRecord:
    """One node run within one step of an invocation.

    Status moves ``scheduled`` -> ``started`` -> ``completed`` | ``failed``.
    A ``started`` task whose outcome was never recorded may or may not have
    had its effects ("uncertain"). ``resolved`` is true when the result was
    established by the user via :meth:`TaskStore.resolve_task` rather than by
    running the node. ``attempt`` counts runs, starting at 1 when started
    (0 while only scheduled). ``cached`` is true when it completed from the
    node's result cache (``AgentConfig.cache``): the node did not run.
    """

    task_id: str
    invocation_id: str
    execution_id: str
    step: int
    node_id: str
    branch_index: int = 0
    status: TaskStatus = "scheduled"
    input: Any = None
    result: Any = None
    error: dict[str, Any] | None = None
    attempt: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    system_instance: str | None = None
    resolved: bool = False
    cached: bool = False


@dataclass(frozen=True)
class ThreadRecord:
    """A conversation thread of an agent.

    ``state`` is the final state of the thread's last completed invocation (or
    the state its first invocation was created with); ``version`` counts its
    completed invocations. ``running_invocation_id`` is the invocation running
    on it, if any (at most one at a time); ``queued`` the ids of the runs
    waiting for it (:meth:`TaskStore.enqueue_run`), first to start first.
    """

    agent_id: str
    thread_id: str
    state: dict[str, Any]
    version: int
    running_invocation_id: str | None
    queued: tuple[str, ...]
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class CachedResult:
    """A node result kept in the cache (``AgentConfig.cache``): usable until
    ``expires_at`` (unix seconds, the store's clock)."""

    agent_id: str
    node_id: str
    key: str
    result: Any
    created_at: float
    expires_at: float


@dataclass(frozen=True)
class QueuedRun:
    """A run waiting for its thread (:meth:`TaskStore.enqueue_run`).

    ``position`` is 1 for the run that starts next.
    """

    agent_id: str
    thread_id: str
    invocation_id: str
    input: Any
    stream: bool
    position: int


@dataclass(frozen=True)
class StoredEvent:
    """One event of an invocation's log: ``sequence`` 1, 2, ... without gaps;
    ``type`` and ``data`` as the agent streamed them; ``created_at`` unix seconds."""

    invocation_id: str
    sequence: int
    type: str
    data: dict[str, Any]
    created_at: float = 0.0


@dataclass(frozen=True)
class PruneReport:
    """What :meth:`TaskStore.prune` deleted: finished invocations, with their
    task records and events."""

    invocations: int
    tasks: int
    events: int


def task_id_for(invocation_id: str, step: int, node_id: str, item: int | None = None) -> str:
    """Return the task id of ``node_id`` at ``step`` of an invocation (``item``: the
    item index of a map step's task; None for every other task).

    Deterministic (same inputs, same id, in any process, across restarts) and
    collision-free in practice (128 bits of SHA-256 over an unambiguous
    encoding), so a replayed step finds the tasks its first run recorded. The
    ids of tasks without an item are those of earlier versions.
    """
    parts = [str(len(invocation_id)), invocation_id, str(int(step)), node_id]
    if item is not None:
        parts += ["item", str(int(item))]
    raw = "\x1f".join(parts)
    return "task-" + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]
