"""The messages a supervised actor understands (all picklable dataclasses).

Public: :class:`StopNormally` and :class:`GetPid`, which anyone may send to a
supervised actor. The underscored messages are the start/stop/crash
handshake between a supervisor and its children; user code never sends them.
This module imports nothing of the package, so the actor base class and the
specs can both use it without an import circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


@dataclass(frozen=True)
class _TryAgain:
    """Supervisor to itself: try again the restart of ``child_id`` that failed
    (OTP's ``try_again_restart``; queued, so requests and exits waiting in
    between are handled first)."""

    child_id: str


@dataclass(frozen=True)
class _PlacementRetry:
    """Timer payload: try again to start children waiting for a host."""


@dataclass(frozen=True)
class _CheckChildren:
    """Supervisor to itself, after a child's exit: look for children whose
    process is gone although no exit arrived (handled after Thespian's own
    bookkeeping of that exit, which may reap other dead children)."""
