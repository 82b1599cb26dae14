"""The public message protocol of an agent (picklable dataclasses).

A program drives an agent through :class:`hayata_py.AgentRef`; another actor
can drive it with plain ``send``: :class:`Run` is answered with
:class:`RunAccepted` or a :class:`~hayata_py.RunRejected` (an exception that
is also a message); the subscriber then receives :class:`AgentEvent` (only
with ``stream=True``) and exactly one :class:`AgentResult`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hayata_py._circuit import CircuitStatus
from hayata_py._errors import ErrorInfo


@dataclass(frozen=True)
class Caller:
    """Subscriber meaning "the process that sent the Run" (see ``hy.CALLER``)."""


CALLER = Caller()


@dataclass(frozen=True)
class Run:
    """Start an invocation with ``input``.

    ``subscriber``: an actor address, :data:`CALLER` (the sender), or None (no
    notifications; fetch the result with :class:`GetResult`). ``stream``:
    send :class:`AgentEvent` messages too (needs a subscriber).

    ``thread``: a conversation thread id (a non-empty string of at most 256
    characters): the invocation starts from the state the thread's last
    completed invocation ended with, and its final state becomes the thread's.
    One invocation at a time per thread; ``multitask`` says what a run on a
    busy thread does: ``"reject"`` (``RunRejected("thread_busy")``) or
    ``"enqueue"`` (kept durably and started when the running one ends).
    """

    input: Any = None
    subscriber: Any = None
    stream: bool = False
    thread: str | None = None
    multitask: str = "reject"
    ref: int = 0
    """Echoed in the answer, so a late answer to a call that timed out is never
    taken for the next call's."""
    wait: bool = False
    """Answer with the :class:`ResultReply` once the invocation has ended (as a
    :class:`WaitResult` would), not with :class:`RunAccepted` now: a run and
    its wait in one message (``AgentRef.invoke``). Needs ``invocation_id``."""
    invocation_id: str | None = None
    """The new invocation's id, chosen by the sender (32 lowercase hex digits,
    e.g. ``uuid.uuid4().hex``; refused with ``invocation_exists`` if taken);
    None: the agent chooses it. A sender that chose it can wait for it after
    an agent restart without having heard from the agent."""


MULTITASK = ("reject", "enqueue")
"""What a run on a busy thread may do (``Run.multitask``)."""
MAX_THREAD_ID = 256
"""The longest thread id accepted (characters)."""


@dataclass(frozen=True)
class RunAccepted:
    """The agent accepted a :class:`Run`; the invocation runs asynchronously.

    ``queued``: 0 when it started; else its place (1: next) in its thread's
    queue (``multitask="enqueue"`` on a busy thread): it starts when the
    invocations before it have ended."""

    invocation_id: str
    queued: int = 0
    ref: int = 0
    """The ``ref`` of the request this answers."""
    run: int = 0
    """This run's identity (a new one for every run, recovery and resume of the
    invocation): its events and result carry it, so a stream started afresh
    never takes late messages of an earlier run of the same invocation."""
    first: int = 1
    """The sequence of this run's first event: 1 for a new invocation; a recovered
    or resumed run numbers on from the events its invocation already logged."""


@dataclass(frozen=True)
class AgentResult:
    """The end of an invocation: exactly one per accepted invocation.

    ``ok`` with ``result``, or not ``ok`` with ``error`` (stable ``error.code``:
    ``node_failed``, ``invalid_node_result``, ``execution_timeout``,
    ``node_crashed``, ``policy_failed``, ``invalid_policy_result``,
    ``unknown_node``, ``duplicate_node``, ``max_steps_exceeded``, ...).

    ``status``: ``"completed"`` (``ok``), ``"failed"``, ``"paused"`` (the
    invocation waits for ``resume()``; ``error.code`` is ``invocation_paused``,
    ``error.details["payload"]`` the pause's payload), ``"interrupted"`` (the
    run stopped, the invocation is kept for ``recover()``) or ``"cancelled"``
    (``cancel()`` stopped it: ``error.code`` is ``cancelled``; it is stored
    ``failed``, its completed tasks kept).
    """

    invocation_id: str
    ok: bool
    result: Any = None
    error: ErrorInfo | None = None
    status: str = ""
    run: int = field(default=0, compare=False)
    """The run it ends (``RunAccepted.run``); 0 from the store. Not compared: two
    results of an invocation are equal whichever run or source delivered them."""
    last_event: int | None = field(default=None, compare=False)
    """Set when the run's later events were never stored, so never sent (another
    owner took the invocation over, or the agent stopped while the store was
    away): the sequence of the last event its subscriber got (0: none); the
    result follows that one instead of a terminal event. None: the run's
    terminal event comes before the result, as always."""

    def __post_init__(self) -> None:
        if not self.status:
            object.__setattr__(self, "status", "completed" if self.ok else "cancelled"
                               if self.error is not None and self.error.code == "cancelled"
                               else "failed")


@dataclass(frozen=True)
class AgentEvent:
    """A streamed event; ``sequence`` starts at 1 per invocation and increases by 1,
    across its runs (a recovered run numbers on from the last logged event).

    Types and ``data`` keys: ``invocation_started`` (input), ``node_started``
    (node_id, execution_id), ``node_partial_result`` (node_id, execution_id,
    edge_id, result), ``node_completed`` (node_id, execution_id),
    ``node_retrying`` (node_id, execution_id, attempt, delay, error),
    ``compensation_started`` (node_id, task_id, compensation_id),
    ``compensation_completed`` (node_id, task_id), ``compensation_failed``
    (node_id, task_id, reason, message),
    ``invocation_completed`` (result), ``invocation_failed`` (reason, message,
    details), ``invocation_interrupted`` (the same keys; the invocation is
    kept for ``recover()``) and ``invocation_paused`` (payload, kind, nodes;
    it waits for ``resume()``).
    """

    invocation_id: str
    type: str
    sequence: int
    data: dict[str, Any]
    run: int = field(default=0, compare=False)
    """The run it belongs to (``RunAccepted.run``); not compared."""


@dataclass(frozen=True)
class GetResult:
    """Ask for an invocation's result: answered with :class:`ResultReply`."""

    invocation_id: str
    ref: int = 0


@dataclass(frozen=True)
class WaitResult:
    """Like :class:`GetResult`, but answered only once the invocation has ended."""

    invocation_id: str
    ref: int = 0


@dataclass(frozen=True)
class ResultReply:
    """``result`` is None while the invocation runs (or if it is unknown: ``known`` False)."""

    invocation_id: str
    result: AgentResult | None
    known: bool = True
    ref: int = 0
    """The ``ref`` of the request this answers."""
    recovery_required: bool = False
    """To a ``WaitResult``: the invocation is unfinished and nothing runs it (the
    agent that ran it died or was interrupted): it ends only after ``recover()``."""


@dataclass(frozen=True)
class GetStatus:
    """Ask for the agent's status: answered with :class:`AgentStatus`."""

    ref: int = 0


@dataclass(frozen=True)
class AgentStatus:
    """``status``: ``idle``, ``running``, ``paused`` (``invocation_id`` waits for
    ``resume()``) or ``recovery_required``; ``idempotent_nodes``: the agent's
    (sorted), whose uncertain tasks recovery re-runs.

    Counts: ``running`` invocations in flight, ``paused`` ones waiting for
    ``resume()``, ``unfinished`` ones waiting for recovery (paused ones
    included), of at most ``max_invocations`` at once. With
    ``max_invocations=1`` ``status`` and ``invocation_id`` are as they always
    were; with more, ``status`` is ``running`` or ``idle`` (unfinished
    invocations do not block new runs) and ``invocation_id`` the oldest
    running one. ``circuits``: each circuit breaker's state (node id order)."""

    agent_id: str
    status: str
    invocation_id: str | None
    ref: int = 0
    idempotent_nodes: tuple[str, ...] = ()
    running: int = 0
    paused: int = 0
    unfinished: int = 0
    max_invocations: int = 1
    circuits: tuple[CircuitStatus, ...] = ()


@dataclass(frozen=True)
class Recover:
    """Continue the agent's unfinished invocation (status ``recovery_required``).

    Answered with :class:`RunAccepted` (the invocation id) or a
    :class:`~hayata_py.RecoveryRejected` (``nothing_to_recover``,
    ``task_execution_uncertain`` naming the task and node ids,
    ``invocation_busy``, ``invocation_required`` when several are unfinished
    and ``invocation_id`` is None). ``subscriber``/``stream`` as for :class:`Run`.
    """

    subscriber: Any = None
    stream: bool = False
    invocation_id: str | None = None
    ref: int = 0


@dataclass(frozen=True)
class ResumePaused:
    """Continue the paused invocation ``invocation_id``; its next decision sees
    ``value`` as ``ctx.resume_value``. Answered with :class:`RunAccepted` or a
    :class:`~hayata_py.RecoveryRejected` (``not_paused``, ``invocation_busy``)."""

    invocation_id: str
    value: Any = None
    subscriber: Any = None
    stream: bool = False
    ref: int = 0


@dataclass(frozen=True)
class ResolveTask:
    """Record ``result`` for an uncertain task of the unfinished invocation (a
    result the user established by checking the external system)."""

    task_id: str
    result: dict[str, Any]
    ref: int = 0


@dataclass(frozen=True)
class Abandon:
    """End the unfinished invocation as failed (``abandoned``) and free the agent."""

    invocation_id: str
    ref: int = 0


@dataclass(frozen=True)
class Cancel:
    """Stop the running invocation: answered ``Ack(True)`` once its machine has
    stopped it (its end, ``cancelled``, is then recorded), ``Ack(False)`` if it
    had already ended or is ending on its own, or a ``HayataError``
    (``not_found``, ``not_running``)."""

    invocation_id: str
    ref: int = 0


@dataclass(frozen=True)
class GetUnfinished:
    """Ask for the agent's unfinished invocations: answered with :class:`UnfinishedList`.
    ``invocation_id``: only that one (an empty list if it is not unfinished)."""

    ref: int = 0
    invocation_id: str | None = None


@dataclass(frozen=True)
class Unfinished:
    """An invocation that waits for recovery, and what ``recover()`` would do.

    ``recovery``: ``recoverable`` (every interrupted task is completed, not
    started, due a retry or idempotent: ``recover()`` goes on, as
    ``auto_recover`` does), ``uncertain`` (a task started and recorded no
    result: ``resolve_task``/``abandon``; ``task_ids`` names them),
    ``paused`` (waits for ``resume()``), ``waiting_for_placement`` or
    ``busy`` (another system holds its lease); ``code``/``message`` the
    refusal ``recover()`` would raise, if any."""

    invocation_id: str
    recovery: str
    thread: str | None = None
    step: int = 0
    task_ids: tuple[str, ...] = ()
    code: str = ""
    message: str = ""


@dataclass(frozen=True)
class UnfinishedList:
    invocations: tuple[Unfinished, ...]
    ref: int = 0


@dataclass(frozen=True)
class Ack:
    """Positive answer to :class:`ResolveTask`, :class:`Abandon` and :class:`Cancel`."""

    value: Any = None
    ref: int = 0
