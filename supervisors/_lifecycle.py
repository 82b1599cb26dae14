"""Starting and stopping one child, as operations of the supervisor actor.

Everything that takes time (starting a child, stopping one within its
shutdown time) is a generator *operation* that yields a predicate and is
resumed with the first message matching it. One operation runs at a time;
the messages it does not wait for are queued by the supervisor and handled,
in order, once it is done. The actor never blocks Thespian's loop.

Children placed in another actor system of the convention (``remote``) are
handled without pids, which mean nothing across hosts: they are killed by a
``_KillSelf`` message, and watched by heartbeats (``_remote.py``), because
Thespian never tells a parent that a remote child died with its host.
"""

from __future__ import annotations

import gc
import itertools
import os
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psutil
from thespian.actors import ChildActorExited, WakeupMessage

from supervisors._actor import SupervisedActor, describe_exception
from supervisors._children import (
    Child,
    ChildTable,
    Proc,
    Running,
    Starting,
    Stopped,
    Stopping,
)
from supervisors._errors import SupervisorError
from supervisors._messages import ChildEvent, ChildEventKind, ChildInfo, ExitKind
from supervisors._os import (
    child_alive,
    host_id,
    kill_child_process,
    started_at,
    wait_child_exit,
)
from supervisors._protocol import _Init, _KillSelf, _Shutdown, _Started, _StartFailed, _StopTimeout
from supervisors._spec import Shutdown, Sibling, SupervisorFlags

Predicate = Callable[[Any], bool]
Op = Generator[Predicate, Any, Any]

PLACED_START_TIMEOUT_MIN = 2.0
"""A child with requirements must answer its start within ten heartbeat
windows (``10 * heartbeat * heartbeat_misses``, 15 s by default), and at least
this many seconds."""


@dataclass(frozen=True)
class StartError:
    """Why a start failed; ``unplaced``: no live system satisfies its placement
    (its restart then waits for one instead of counting as a failure)."""

    reason: str
    unplaced: bool = False


@dataclass
class _Running:
    op: Op
    wait: Predicate = field(default=lambda _m: False)


class ChildOps(SupervisedActor):
    """The supervisor's state and the operations on one child; the decisions
    are taken in :class:`supervisors.Supervisor`."""

    sup_id: str
    flags: SupervisorFlags
    table: ChildTable | None = None
    """None until the supervisor began (its ``_Init`` arrived)."""

    def _setup(self, sup_id: str, flags: SupervisorFlags, table: ChildTable) -> None:
        self.sup_id, self.flags, self.table = sup_id, flags, table
        self._tokens = itertools.count(1)
        self._op: _Running | None = None
        self._queue: list[tuple[Any, Any]] = []
        self._last_sender: Any = None
        self._heartbeat_armed = False
        self._host = host_id()

    @property
    def children(self) -> ChildTable:
        assert self.table is not None
        return self.table

    # -- operation machinery ---------------------------------------------------

    def _run(self, op: Op) -> None:
        self._op = _Running(op)
        self._advance(None)

    def _advance(self, value: Any) -> None:
        assert self._op is not None
        try:
            self._op.wait = self._op.op.send(value)
        except StopIteration:
            self._op = None
            self._drain()

    def _drain(self) -> None:
        while self._op is None and self._queue and not self._sa_failed:
            message, sender = self._queue.pop(0)
            self._handle(message, sender)

    def _handle(self, message: Any, sender: Any) -> None:
        raise NotImplementedError

    # -- hooks and helpers for subclasses -----------------------------------------

    def on_child_event(self, event: ChildEvent) -> None:
        """Hook called when a child has started or exited (for any reason), or
        its restart waits for a host (``kind`` ``waiting``).

        Thespian tells only the parent that a child died; override this to
        tell whoever else must know (a watcher, a registry)."""

    def _emit(self, event: ChildEvent) -> None:
        try:
            self.on_child_event(event)
        except Exception as exc:  # noqa: BLE001 - a hook must not break supervision
            self.log.error("child_event_hook_failed", reason=describe_exception(exc))

    def child_infos(self) -> list[ChildInfo]:
        """This supervisor's children as :class:`ChildInfo` rows, in start order
        (what ``which_children`` answers, for code running in the actor)."""
        return self.children.infos() if self.table is not None else []

    def child_address(self, child_id: str) -> Any:
        """The current address of child ``child_id`` (None if it is not running)."""
        child = self.table.by_id(child_id) if self.table is not None else None
        return None if child is None else child.address

    def _resolve(self, value: Any) -> Any:
        if isinstance(value, Sibling):
            address = self.child_address(value.id)
            if address is None:
                raise SupervisorError(f"sibling {value.id!r} is not running", code="not_found",
                                      child_id=value.id)
            return address
        return value

    def _kill(self, child: Child) -> None:
        """SIGKILL a local child; tell a remote one to exit (its pid is not ours)."""
        proc = child.proc
        if proc is None:
            return
        if proc.remote:
            self.send(proc.address, _KillSelf())
        else:
            kill_child_process(proc.pid)

    def _kill_unknown_children(self) -> list[int]:
        """SIGKILL this process's child processes that are no known child: the
        one being started (operations run one at a time), and wait until they
        are gone (a failed start leaves no process behind). Returns their pids."""
        known = {c.proc.pid for c in self.children if c.proc is not None}
        try:
            procs = psutil.Process().children()
        except psutil.Error:
            return []
        killed = [p.pid for p in procs if p.pid not in known and kill_child_process(p.pid)]
        for pid in killed:
            wait_child_exit(pid, timeout=2.0)
        return killed

    def _arm_heartbeat(self) -> None:
        raise NotImplementedError

    # -- start --------------------------------------------------------------------

    def _start_child(self, child: Child) -> Generator[Predicate, Any, StartError | None]:
        """Start one child and wait for its answer; None or why it failed."""
        spec = child.spec
        start = spec.start.with_extra_args(child.extra_args)
        token = next(self._tokens)
        try:
            args = tuple(self._resolve(a) for a in start.args)
            kwargs = {k: self._resolve(v) for k, v in start.kwargs.items()}
            # Thespian forks the child from this process. CPython's cyclic GC
            # writes into every object it scans, so a child that collects
            # copies every page it shares with us; objects frozen here are
            # never scanned again, in either process (18 MB -> 1 MB of USS a
            # child, docs/design.md). No gc.collect(): it costs milliseconds
            # on the restart path.
            gc.freeze()
            address = self.createActor(start.actor_path,
                                       targetActorRequirements=start.requirements or None)
        except Exception as exc:  # noqa: BLE001
            child.state = Stopped()
            return StartError(describe_exception(exc))
        child.state = Starting(token)
        self.send(address, _Init(spec.id, self.sup_id, token, args, kwargs,
                                 parent_pid=os.getpid(), host=self._host,
                                 heartbeat=self.flags.heartbeat,
                                 heartbeat_misses=self.flags.heartbeat_misses))
        placed_timeout = 0.0
        if start.requirements:
            # It may be created on another system, which may die before the child
            # answers; Thespian would never say so, and heartbeats start only
            # once it has answered.
            placed_timeout = max(PLACED_START_TIMEOUT_MIN,
                                 10 * self.flags.heartbeat * self.flags.heartbeat_misses)
            self.wakeupAfter(timedelta(seconds=placed_timeout), _StopTimeout(token))
        reply = yield lambda m: (
            isinstance(m, (_Started, _StartFailed)) and m.token == token
        ) or (isinstance(m, ChildActorExited) and m.childAddress == address) or (
            isinstance(m, WakeupMessage) and m.payload == _StopTimeout(token))
        if isinstance(reply, _Started):
            started = 0 if reply.remote else started_at(reply.pid)
            child.state = Running(Proc(self._last_sender, reply.pid, reply.remote, reply.admin,
                                       started))
            child.last_seen, child.unanswered = time.monotonic(), 0
            self._arm_heartbeat()
            self.log.info("child_started", supervisor_id=self.sup_id, child=spec.id,
                          child_pid=reply.pid, remote=reply.remote, admin=reply.admin)
            self._emit(ChildEvent(ChildEventKind.STARTED, spec.id, child.address, reply.pid))
            return None
        if isinstance(reply, _StartFailed):
            child.state = Running(Proc(self._last_sender, reply.pid, reply.remote))
            yield from self._stop_child(child, kill=True)
            return StartError(reply.reason)
        child.state = Stopped()
        if isinstance(reply, WakeupMessage):
            if self._kill_unknown_children():
                # It was placed here, and is merely stuck in its start.
                return StartError(f"no answer to its start within {placed_timeout:.0f} s "
                                  "(killed)")
            self.send(address, _KillSelf())  # if it is alive after all, it exits
            return StartError(f"no answer within {placed_timeout:.0f} s from the actor placed "
                              f"for requirements {start.requirements!r} (its system may have "
                              "died)", unplaced=True)
        if start.requirements:
            # Thespian answers an unsatisfiable placement this way (after ~10 ms).
            return StartError(f"exited during start: no live actor system satisfies "
                              f"requirements {start.requirements!r} (or the actor died while "
                              "starting)", unplaced=True)
        return StartError("exited during start")

    # -- stop ---------------------------------------------------------------------

    def _stop_child(self, child: Child, *, kill: bool = False) -> Op:
        """Stop a started child: ``_Shutdown``, then SIGKILL after its shutdown
        time (at once with ``kill`` or ``BRUTAL_KILL``)."""
        proc = child.proc
        if proc is None:
            if not isinstance(child.state, Starting):
                child.state = Stopped()
            return
        state = child.state
        gone = isinstance(state, (Running, Stopping)) and state.gone
        if gone or (not proc.remote and not child_alive(proc.pid, proc.started)):
            # Already dead (its exit may be queued, or was reported meanwhile).
            self._stopped(child, proc, already_exited=True)
            return
        child.state = Stopping(proc)
        shutdown = child.spec.shutdown
        token = next(self._tokens)
        if kill or shutdown is Shutdown.BRUTAL_KILL:
            self._kill(child)
        else:
            self.send(proc.address, _Shutdown())
            if isinstance(shutdown, float):
                self.wakeupAfter(timedelta(seconds=shutdown), _StopTimeout(token))
        while True:
            message = yield lambda m: (
                isinstance(m, ChildActorExited) and m.childAddress == proc.address
            ) or (isinstance(m, WakeupMessage) and m.payload == _StopTimeout(token))
            if isinstance(message, ChildActorExited):
                if not proc.remote:
                    wait_child_exit(proc.pid, timeout=2.0)
                break
            self.log.warning("child_shutdown_timeout", supervisor_id=self.sup_id,
                             child=child.spec.id, child_pid=proc.pid)
            self._kill(child)
            if proc.remote:
                continue  # its admin reports the exit, or the heartbeat gives up on it
            if wait_child_exit(proc.pid, timeout=2.0) or not child_alive(proc.pid):
                break  # gone; its ChildActorExited, if it comes, finds no child
        self._stopped(child, proc)

    def _stopped(self, child: Child, proc: Proc, *, already_exited: bool = False) -> None:
        child.state = Stopped()
        self.log.info("child_stopped", supervisor_id=self.sup_id, child=child.spec.id,
                      child_pid=proc.pid, already_exited=already_exited)
        self._emit(ChildEvent(ChildEventKind.EXITED, child.spec.id, proc.address, proc.pid,
                              "shutdown", True, ExitKind.SHUTDOWN))
