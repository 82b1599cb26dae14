"""What happens to an invocation: the events the agent actor feeds its machine.

Every event is plain data. The actor turns messages (an edge's outcome, a
node's death, a timer) and the results of carrying out commands (a policy
answer, a saved checkpoint, a refused write) into these.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hayata_py._errors import ErrorInfo
from hayata_py._invocation.retry import RetryPlan


class DownCause(enum.Enum):
    """Why a node stopped being available (typed: never parsed from text)."""

    CRASHED = "crashed"
    """Its process died on a live host (killed, crashed): its work failed."""
    UNREACHABLE = "unreachable"
    """Its host stopped answering: its work may still have happened there."""
    WAITING_FOR_PLACEMENT = "waiting_for_placement"
    """No live system can run it now (its host died and none other qualifies)."""
    STOPPED = "stopped"
    """Its supervisor stopped it on request (a clean shutdown)."""


class StopKind(enum.Enum):
    """Why the agent actor is being stopped while an invocation runs."""

    REQUESTED = "requested"
    """``stop_agent`` or a clean system stop: the invocation ends as ``agent_stopped``."""
    NODES_LOST = "nodes_lost"
    """The agent's node supervisor died and the agent is restarted with it: nothing
    failed for the user, the invocation is kept for ``recover()``."""


@dataclass(frozen=True)
class TaskKey:
    """One task of an execution: a node, and for a map step the item index.

    Attempts of a task (a re-run on recovery, later retries) share its key
    and its durable task id."""

    node_id: str
    item: int | None = None


@dataclass(frozen=True)
class Begin:
    """A run was accepted (its invocation record exists when the agent is durable)."""


@dataclass(frozen=True)
class Resume:
    """``recover()`` classified the interrupted step (``execution_id`` None: it was
    interrupted between steps). ``to_run`` maps each node to run to its attempt;
    ``reuse`` holds the recorded results of completed nodes; ``failed`` the
    recorded failure of a node, which ends the invocation; ``retry`` the nodes whose
    recorded failure is followed by a retry (their backoff's remaining part)."""

    execution_id: str | None = None
    nodes: tuple[str, ...] = ()
    input: Any = None
    parallel: bool = False
    to_run: Mapping[str, int] = field(default_factory=dict)
    reuse: Mapping[str, Any] = field(default_factory=dict)
    failed: ErrorInfo | None = None
    map: bool = False
    """A map step (``input`` its items): ``items_to_run`` maps each item index to
    run to its attempt, ``items_reused`` the completed items to their results."""
    reduce: str | None = None
    items_to_run: Mapping[int, int] = field(default_factory=dict)
    items_reused: Mapping[int, Any] = field(default_factory=dict)
    retry: Mapping[str, RetryPlan] = field(default_factory=dict)
    items_retry: Mapping[int, RetryPlan] = field(default_factory=dict)
    """A map step's items whose recorded failure is followed by a retry."""


@dataclass(frozen=True)
class PolicyAnswered:
    """The decision policy returned ``answer`` (not yet validated)."""

    answer: Any


@dataclass(frozen=True)
class PolicyRaised:
    """The decision policy raised ``type_name: message``."""

    type_name: str
    message: str


@dataclass(frozen=True)
class CheckpointSaved:
    """The checkpoint is committed. ``unplaced``: nodes that no system can run
    right now (node id -> why), as the agent knows at this moment."""

    unplaced: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WriteRefused:
    """A checkpoint or terminal write was refused. ``fenced``: another system owns
    the invocation now (its lease was taken over)."""

    error: ErrorInfo
    fenced: bool = False


@dataclass(frozen=True)
class ResultRecorded:
    """The terminal result is committed."""


@dataclass(frozen=True)
class TaskOutcome:
    """An edge's result for one task, recorded by the edge before it was sent.
    ``partials``: how many partial results the edge published before it.
    ``cached``: the result came from the node's cache (recorded by the agent;
    the node did not run); its ``node_completed`` says ``cached: True``."""

    execution_id: str
    key: TaskKey
    ok: bool
    result: Any = None
    error: ErrorInfo | None = None
    partials: int = 0
    cached: bool = False


@dataclass(frozen=True)
class PartialResult:
    """A streamed partial result of one task (``index`` counts from 1 per task run)."""

    execution_id: str
    key: TaskKey
    index: int
    edge_id: str
    result: dict[str, Any]


@dataclass(frozen=True)
class NodeDown:
    """A node process ended (``pid`` for the message); its tasks in flight are lost."""

    node_id: str
    cause: DownCause
    pid: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class DeadlinePassed:
    """The deadline armed for task ``key`` of ``execution_id`` has passed (``key``
    None: the execution's, every pending task)."""

    execution_id: str
    key: TaskKey | None = None


@dataclass(frozen=True)
class PauseRecorded:
    """The pause is committed."""


@dataclass(frozen=True)
class RetryDue:
    """The backoff scheduled for task ``key`` of ``execution_id`` is over."""

    execution_id: str
    key: TaskKey


@dataclass(frozen=True)
class CircuitChanged:
    """The agent's breaker of ``node_id`` opened (``failures`` recorded failures
    opened it; it stays open ``cool_down`` seconds) or closed (its probe
    succeeded). Fed to every running invocation: one with a task of the node
    pending is affected (it emits ``circuit_opened``/``circuit_closed``, and on
    a close sends at once the tasks that wait for the circuit)."""

    node_id: str
    opened: bool
    failures: int
    cool_down: float


@dataclass(frozen=True)
class LeaseLost:
    """Renewing the lease was refused: another system owns the invocation."""


@dataclass(frozen=True)
class Stop:
    """The agent actor is being stopped."""

    kind: StopKind


@dataclass(frozen=True)
class CancelRequested:
    """``cancel()`` asked to stop the invocation: a running step's tasks are
    stopped and recorded ``cancelled``, the invocation ends ``cancelled``; what
    completed stays completed (no compensation runs)."""


@dataclass(frozen=True)
class Reduced:
    """The map's reducer answered: ``result`` the consolidated result (the list of
    items' results without ``reduce``), or ``error`` (``reduce_failed``, ...)."""

    execution_id: str
    ok: bool
    result: Any = None
    error: ErrorInfo | None = None


@dataclass(frozen=True)
class ReducerLost:
    """The map's reducer died ``deaths`` times; its node gave up replacing it."""

    execution_id: str
    deaths: int


Event = (Begin | Resume | PolicyAnswered | PolicyRaised | CheckpointSaved | WriteRefused
         | ResultRecorded | TaskOutcome | PartialResult | NodeDown | DeadlinePassed | LeaseLost
         | Stop | CancelRequested | Reduced | ReducerLost | RetryDue | PauseRecorded
         | CircuitChanged)
