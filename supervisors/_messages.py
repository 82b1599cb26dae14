"""Messages of the supervision protocol (all picklable dataclasses).

Public: the control requests a program (or another actor) sends to a
supervisor, each answered with a :class:`Reply`, and what a supervisor
reports of its children. The messages a supervised actor itself understands
are in ``_protocol.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
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
