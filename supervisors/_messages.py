"""Messages of the supervision protocol (all picklable dataclasses).

Public: the control requests a program (or another actor) sends to a
supervisor, each answered with a :class:`Reply`, and :class:`StopNormally`,
which a supervised actor may be sent to end it normally. The underscored
messages are the start/stop/crash handshake between a supervisor and its
children; user code never sends them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from supervisors._spec import ChildSpec, Kind


@dataclass(frozen=True)
class ChildInfo:
    """One row of ``which_children``: ``status`` is ``running``, ``starting``,
    ``stopping``, ``restarting``, ``waiting_for_placement`` (its host died and
    no live system satisfies its requirements yet: retried every
    ``heartbeat * heartbeat_misses`` seconds) or ``terminated``; ``address`` and ``pid`` are
    None unless the child runs. A restarted child has a new address and pid.
    ``remote``: the child runs in another actor system of the convention (its
    ``pid`` is then a pid on that system's host)."""

    id: str
    address: Any
    pid: int | None
    kind: Kind
    restarts: int
    status: str
    remote: bool = False


@dataclass(frozen=True)
class ChildCounts:
    """``count_children``: specs, running, supervisors and workers (OTP's fields)."""

    specs: int
    active: int
    supervisors: int
    workers: int


class ChildEventKind(StrEnum):
    """What happened to a child (:attr:`ChildEvent.kind`)."""

    STARTED = "started"
    EXITED = "exited"
    WAITING = "waiting"
    """Its restart waits for a live system that satisfies its placement."""


class ExitKind(StrEnum):
    """Why a child exited (:attr:`ChildEvent.exit`): decide on this, never on
    the text of :attr:`ChildEvent.reason`, which is for people."""

    NORMAL = "normal"
    """It stopped by itself, normally (``StopNormally`` or a clean exit)."""
    SHUTDOWN = "shutdown"
    """Its supervisor stopped it (terminate, a sibling's restart, shutdown)."""
    CRASHED = "crashed"
    """It reported a failure (an exception in a handler) and was killed."""
    KILLED = "killed"
    """Its process died without a word (SIGKILL, OOM, a failed start)."""
    UNREACHABLE = "unreachable"
    """A remote child whose pings went unanswered (its host is gone)."""


@dataclass(frozen=True)
class ChildEvent:
    """What :meth:`Supervisor.on_child_event` sees: ``kind`` is ``started``,
    ``exited`` or ``waiting`` (its restart waits for a system that satisfies its
    placement); for exits, ``exit`` says why (typed), ``reason`` describes it
    for people, and ``normal`` whether the exit was normal."""

    kind: ChildEventKind
    child_id: str
    address: Any
    pid: int | None
    reason: str | None = None
    normal: bool = False
    exit: ExitKind | None = None


@dataclass(frozen=True)
class Reply:
    """Answer to a control request: ``ok`` with ``value``, or ``error`` (a SupervisorError)."""

    ok: bool
    value: Any = None
    error: Exception | None = None
    ref: int = 0
    """The ``ref`` of the request this answers (callers match on it)."""


@dataclass(frozen=True)
class WhichChildren:
    """Request: list the children as :class:`ChildInfo`, in start order."""

    ref: int = 0


@dataclass(frozen=True)
class CountChildren:
    """Request: :class:`ChildCounts`."""

    ref: int = 0


@dataclass(frozen=True)
class StartChild:
    """Request: add and start ``spec`` (a ChildSpec), or for a simple_one_for_one
    supervisor start a child of the template with ``args`` appended."""

    spec: ChildSpec | None = None
    args: tuple[Any, ...] = ()
    ref: int = 0


@dataclass(frozen=True)
class TerminateChild:
    """Request: stop child ``id`` (its spec is kept unless it is temporary)."""

    id: str
    ref: int = 0


@dataclass(frozen=True)
class RestartChild:
    """Request: start the terminated child ``id`` again."""

    id: str
    ref: int = 0


@dataclass(frozen=True)
class DeleteChild:
    """Request: remove the spec of the terminated child ``id``."""

    id: str
    ref: int = 0


@dataclass(frozen=True)
class ShutdownSupervisor:
    """Request: stop all children (right to left, each within its shutdown
    time) and then the supervisor itself; answered before it exits."""

    ref: int = 0


@dataclass(frozen=True)
class StopNormally:
    """Sent to a supervised actor: it ends with a *normal* exit (a transient
    child is then not restarted)."""


@dataclass(frozen=True)
class GetPid:
    """Sent to a supervised actor: it answers with its OS pid (an int)."""


# -- internal handshake ---------------------------------------------------


@dataclass(frozen=True)
class _Init:
    child_id: str
    supervisor_id: str | None
    token: int
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    supervised: bool = True
    parent_pid: int = 0
    """The supervisor's pid and host: a child whose OS parent is not that process
    was placed in another actor system (remote)."""
    host: str = ""
    heartbeat: float = 0.0
    """For a remote child: the supervisor pings it every ``heartbeat`` seconds."""
    heartbeat_misses: int = 0


@dataclass(frozen=True)
class _Started:
    child_id: str
    token: int
    pid: int
    remote: bool = False
    admin: str = ""
    """``host:port`` of the child's admin (used to drop a dead member)."""


@dataclass(frozen=True)
class _StartFailed:
    child_id: str
    token: int
    pid: int
    reason: str
    remote: bool = False


@dataclass(frozen=True)
class _ChildFailed:
    """The child's handler raised: it will not process anything more; kill it."""

    child_id: str
    pid: int
    reason: str


@dataclass(frozen=True)
class _ChildExiting:
    """The child is about to exit normally (it was asked to stop)."""

    child_id: str
    pid: int


@dataclass(frozen=True)
class _Shutdown:
    """From the supervisor: stop (run ``on_stop``, stop own children, exit)."""


@dataclass(frozen=True)
class _StopTimeout:
    token: int


@dataclass(frozen=True)
class _Ping:
    """Supervisor → remote child heartbeat; answered with :class:`_Pong`."""


@dataclass(frozen=True)
class _Pong:
    pass


@dataclass(frozen=True)
class _KillSelf:
    """Supervisor → remote child: exit at once (a pid kill cannot reach it)."""


@dataclass(frozen=True)
class _HeartbeatTick:
    """The supervisor's heartbeat timer payload."""
