"""What the agent actor must do for an invocation: the commands its machine returns.

The actor carries them out in order. Three of them are questions the machine
waits on: :class:`CallPolicy` is answered with ``PolicyAnswered`` or
``PolicyRaised``, :class:`SaveCheckpoint` with ``CheckpointSaved`` or
``WriteRefused``, :class:`RecordResult` with ``ResultRecorded`` or
``WriteRefused``. Nothing after such a command is returned until it is
answered, so a durable write always precedes what depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hayata_py._errors import ErrorInfo
from hayata_py._invocation.events import TaskKey
from hayata_py._invocation.pause import Hold
from hayata_py._policy import PolicyContext


@dataclass(frozen=True)
class CallPolicy:
    """Call the decision policy with ``context`` and report its answer."""

    context: PolicyContext


@dataclass(frozen=True)
class Checkpoint:
    """An invocation at a step boundary: what a recovery starts from."""

    step: int
    state: dict[str, Any]
    last_result: Any
    parallel_results: list[Any] | None
    execution_id: str | None = None
    nodes: tuple[str, ...] = ()
    input: Any = None
    parallel: bool = False
    map: bool = False
    """The step is a map: ``nodes`` is its one node, ``input`` its items."""
    reduce: str | None = None
    failing: dict[str, Any] | None = None
    """The invocation is failing with this error (``ErrorInfo.to_dict()``) and
    runs its compensations: a recovery goes on with them."""


@dataclass(frozen=True)
class SaveCheckpoint:
    """Commit ``checkpoint`` (naming the step's work before any of it starts)."""

    checkpoint: Checkpoint


@dataclass(frozen=True)
class RecordPause:
    """Commit ``checkpoint`` with the pause ``hold`` in it (answered with
    ``PauseRecorded`` or ``WriteRefused``)."""

    checkpoint: Checkpoint
    hold: Hold


@dataclass(frozen=True)
class Dispatch:
    """Run one task on an edge of ``key.node_id``."""

    execution_id: str
    key: TaskKey
    task_id: str
    step: int
    branch_index: int
    input: Any
    state: dict[str, Any]
    attempt: int = 1
    history: tuple[str, ...] = ()
    """Error types of the attempts before this one (non-empty: a retry)."""
    retry: bool = False
    """This attempt follows the task's recorded failure (a retry, also of a task
    that an open circuit refused before it ever ran: ``history`` empty)."""
    function: str | None = None
    """A compensation: run this compensator (import path) instead of the node's
    function; no cache, no circuit, no retry."""


@dataclass(frozen=True)
class ScheduleRetry:
    """Report ``RetryDue(execution_id, key)`` after ``seconds`` (a retry's backoff;
    its due time is durable: the recorded failure time plus the policy's delay)."""

    execution_id: str
    key: TaskKey
    seconds: float
    attempt: int = 2
    """The attempt that runs then."""
    error: ErrorInfo | None = None
    """The failure it follows (None: found by ``recover()``)."""


@dataclass(frozen=True)
class CancelTask:
    """The task's execution is over: if it still runs, kill its edge."""

    execution_id: str
    key: TaskKey
    task_id: str
    timed_out: bool = False
    """It is cancelled because its execution's deadline passed."""


@dataclass(frozen=True)
class StoppedTask:
    """A task a cancel stopped, with what its durable record needs if it has none
    yet (its ``RunTask`` was still on its way to an edge)."""

    execution_id: str
    key: TaskKey
    task_id: str
    step: int
    branch_index: int
    input: Any


@dataclass(frozen=True)
class RecordCancelled:
    """Record each of ``tasks`` failed with ``error`` (``cancelled``) before the
    invocation's end, creating the record of one not started yet, so none is
    left ``started`` (uncertain) and none starts later. A task that ended
    meanwhile keeps its own end. Not answered: a refused write shows in the
    terminal write that follows."""

    tasks: tuple[StoppedTask, ...]
    error: ErrorInfo


@dataclass(frozen=True)
class ArmDeadline:
    """Report ``DeadlinePassed(execution_id, key)`` after ``seconds`` (the task's
    run time limit; arming the same task again replaces its deadline)."""

    execution_id: str
    seconds: float
    key: TaskKey | None = None


@dataclass(frozen=True)
class Emit:
    """Send the subscriber ``AgentEvent(sequence, type, data)`` (only for streaming runs)."""

    sequence: int
    type: str
    data: dict[str, Any]


@dataclass(frozen=True)
class RecordResult:
    """Commit the terminal result (``error`` None: completed) with the final state."""

    ok: bool
    result: Any
    error: ErrorInfo | None
    state: dict[str, Any]
    event: Emit | None = None
    """The terminal event the machine emits once the result is recorded (None: it
    emits none): the agent logs it in the same commit as the result."""


@dataclass(frozen=True)
class End:
    """The invocation's run is over: tell the subscriber and the waiters.

    ``kept``: nothing durable was written; the invocation stays running in the
    store for ``recover()`` (interrupted, ownership lost)."""

    ok: bool
    result: Any = None
    error: ErrorInfo | None = None
    kept: bool = False
    paused: bool = False
    """The invocation waits for ``resume()`` (durably paused; ``kept`` too)."""


@dataclass(frozen=True)
class OpenMap:
    """A map step starts: have ``node_id`` keep ``edges`` edges and start the
    step's reducer (it answers ``ReducerReady``), for ``task_ids`` (item order)."""

    execution_id: str
    node_id: str
    task_ids: tuple[str, ...]
    edges: int
    reduce: str | None


@dataclass(frozen=True)
class Collect:
    """Forward item ``item``'s recorded result to the map's reducer."""

    execution_id: str
    item: int
    result: Any


@dataclass(frozen=True)
class Consolidate:
    """Every item is done: have the reducer consolidate (answered with ``Reduced``).

    ``results`` (item order) only without a store; with one, the reducer takes
    what it was not sent from the items' durable records."""

    execution_id: str
    results: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class CloseMap:
    """The map step is over: stop its reducer."""

    execution_id: str
    node_id: str


Command = (CallPolicy | SaveCheckpoint | Dispatch | CancelTask | ArmDeadline | Emit
           | RecordResult | End | OpenMap | Collect | Consolidate | CloseMap
           | ScheduleRetry | RecordPause | RecordCancelled)
