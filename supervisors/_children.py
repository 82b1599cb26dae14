"""The child table: one record per child, whose state is one small sum type.

A child is, at any moment, in exactly one of six states:

- :class:`Stopped`: no process and none due (``terminated``);
- :class:`Restarting`: no process; a restart is due (the last attempt failed
  and is tried again, like OTP's ``{restarting, Pid}``);
- :class:`Waiting`: no process; its restart waits for a live system that
  satisfies its placement (``waiting_for_placement``);
- :class:`Starting`: created, its answer to the start not yet in;
- :class:`Running`: started; it may have said why its coming exit happens;
- :class:`Stopping`: being stopped by its supervisor.

No Thespian, no processes: :mod:`supervisors._supervisor` changes the states,
:mod:`supervisors._rules` decides from them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from supervisors._messages import ChildCounts, ChildInfo, ExitKind
from supervisors._rules import Row
from supervisors._spec import ChildSpec, Kind, Restart


@dataclass(frozen=True)
class Proc:
    """A started child's process."""

    address: Any
    pid: int
    remote: bool = False
    """Placed in another actor system: no pid kills, watched by heartbeats."""
    admin: str = ""
    """``host:port`` of a remote child's admin."""
    started: int = 0
    """Its process's start time (local children): a pid alone may be reused."""


@dataclass(frozen=True)
class Stopped:
    status = "terminated"


@dataclass(frozen=True)
class Restarting:
    status = "restarting"


@dataclass(frozen=True)
class Waiting:
    reason: str
    status = "waiting_for_placement"


@dataclass(frozen=True)
class Starting:
    token: int
    status = "starting"


@dataclass(frozen=True)
class Running:
    proc: Proc
    cause: ExitKind = ExitKind.KILLED
    """Why its coming exit happens, as far as it said: ``CRASHED`` after
    ``_ChildFailed``, ``NORMAL`` after ``_ChildExiting``, ``UNREACHABLE`` when
    its pings went unanswered, ``KILLED`` when it said nothing."""
    reason: str | None = None
    gone: bool = False
    """Its exit arrived while an operation ran; it is handled once that ends."""
    status = "running"


@dataclass(frozen=True)
class Stopping:
    proc: Proc
    gone: bool = False
    status = "stopping"


State = Stopped | Restarting | Waiting | Starting | Running | Stopping


@dataclass
class Child:
    """One child: its spec, its state, and what its restarts and pings left."""

    spec: ChildSpec
    extra_args: tuple[Any, ...] = ()
    state: State = Stopped()
    restarts: int = 0
    last_seen: float = 0.0
    """When a remote child last answered a ping (monotonic)."""
    unanswered: int = 0
    """Pings sent to a remote child since its last answer."""

    @property
    def proc(self) -> Proc | None:
        return self.state.proc if isinstance(self.state, (Running, Stopping)) else None

    @property
    def address(self) -> Any:
        proc = self.proc
        return None if proc is None else proc.address

    @property
    def alive(self) -> bool:
        """Has a process, or one is due (OTP: its pid is not ``undefined``)."""
        return not isinstance(self.state, Stopped)

    def note_exit(self) -> None:
        """Its ``ChildActorExited`` arrived (handled later if an operation runs)."""
        if isinstance(self.state, (Running, Stopping)):
            self.state = dataclasses.replace(self.state, gone=True)

    def info(self) -> ChildInfo:
        proc = self.proc
        return ChildInfo(self.spec.id, None if proc is None else proc.address,
                         None if proc is None else proc.pid, self.spec.kind, self.restarts,
                         self.state.status, proc is not None and proc.remote)


class ChildTable:
    """The children in start order; a ``simple_one_for_one`` supervisor's also
    holds the template its dynamic children are made from."""

    def __init__(self, specs: tuple[ChildSpec, ...], *, dynamic: bool) -> None:
        self.template: ChildSpec | None = specs[0] if dynamic else None
        self.children: list[Child] = [] if dynamic else [Child(spec) for spec in specs]
        self._serial = 0

    def __iter__(self) -> Iterator[Child]:
        return iter(list(self.children))

    @property
    def dynamic(self) -> bool:
        return self.template is not None

    def by_id(self, child_id: str) -> Child | None:
        return next((c for c in self.children if c.spec.id == child_id), None)

    def by_address(self, address: Any) -> Child | None:
        """The started child at ``address`` (ActorAddress is not hashable)."""
        if address is None:
            return None
        return next((c for c in self.children if c.address is not None
                     and c.address == address), None)

    def add(self, child: Child) -> None:
        self.children.append(child)

    def remove(self, child: Child) -> None:
        if child in self.children:
            self.children.remove(child)

    def new_dynamic(self, args: tuple[Any, ...]) -> Child:
        """A child of the template, ``<id>-<n>``, with ``args`` appended."""
        assert self.template is not None
        self._serial += 1
        spec = dataclasses.replace(self.template, id=f"{self.template.id}-{self._serial}")
        return Child(spec, tuple(args))

    def rows(self) -> tuple[Row, ...]:
        """What the restart rules need to know of each child."""
        return tuple(Row(c.spec.id, c.spec.restart, c.spec.significant, c.alive)
                     for c in self.children)

    def infos(self) -> list[ChildInfo]:
        return [c.info() for c in self.children]

    def counts(self) -> ChildCounts:
        """OTP's ``count_children``: a ``simple_one_for_one`` supervisor has one
        spec (its template) however many children it runs."""
        active = sum(1 for c in self.children if c.proc is not None)
        sups = sum(1 for c in self.children if c.spec.kind is Kind.SUPERVISOR)
        specs = 1 if self.dynamic else len(self.children)
        return ChildCounts(specs, active, sups, len(self.children) - sups)

    def forget(self, child: Child) -> None:
        """A child that exited and is not restarted: a temporary or dynamic
        child leaves the table, any other keeps its spec, terminated."""
        child.state = Stopped()
        if child.spec.restart is Restart.TEMPORARY or self.dynamic:
            self.remove(child)
