"""The supervisor actor: starts, watches and restarts children like OTP.

Everything that takes time (starting a child, stopping one within its
shutdown time) is written as a generator *operation* that yields a predicate
and is resumed with the first message matching it. One operation runs at a
time; messages it does not wait for (another child's exit, a control
request) are queued and handled, in order, once it is done. This keeps the
actor responsive to the events it needs without blocking Thespian's loop.

Children placed in another actor system of the convention (``remote``) are
handled without pids, which mean nothing across hosts: they are killed by a
``_KillSelf`` message, and watched by heartbeats, because Thespian never tells
a parent that a remote child died with its host.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psutil
from thespian.actors import ActorExitRequest, ChildActorExited, WakeupMessage

from supervisors._actor import SupervisedActor, describe_exception
from supervisors._errors import InvalidSpec, StartFailed, SupervisorError
from supervisors._intensity import add_restart
from supervisors._messages import (
    ChildCounts,
    ChildEvent,
    ChildEventKind,
    ChildInfo,
    CountChildren,
    DeleteChild,
    ExitKind,
    Reply,
    RestartChild,
    ShutdownSupervisor,
    StartChild,
    TerminateChild,
    WhichChildren,
    _ChildExiting,
    _ChildFailed,
    _HeartbeatTick,
    _Init,
    _KillSelf,
    _Ping,
    _Pong,
    _Shutdown,
    _Started,
    _StartFailed,
    _StopTimeout,
)
from supervisors._os import (
    admin_reachable,
    child_alive,
    host_id,
    kill_child_process,
    wait_child_exit,
)
from supervisors._spec import (
    ChildSpec,
    Kind,
    Restart,
    Shutdown,
    Sibling,
    Strategy,
    SupervisorFlags,
    validate_children,
)

Predicate = Callable[[Any], bool]
Op = Generator[Predicate, Any, Any]


@dataclass
class _Child:
    spec: ChildSpec
    extra_args: tuple[Any, ...] = ()
    address: Any = None
    pid: int | None = None
    restarts: int = 0
    status: str = "terminated"
    reason: str | None = None  # crash reason reported by the child before it dies
    cause: ExitKind = ExitKind.KILLED  # why its coming exit happens (if not normal)
    normal_exit: bool = False  # the coming exit was requested (normal)
    exited: bool = False  # its ChildActorExited arrived while an operation ran
    remote: bool = False  # placed in another actor system: no pids, heartbeats
    admin: str = ""  # host:port of a remote child's admin
    last_seen: float = 0.0  # when a remote child last answered (monotonic)
    unanswered: int = 0  # pings sent to a remote child since its last answer
    unplaced: bool = False  # its last start failed: no live system satisfies its placement

    def info(self) -> ChildInfo:
        return ChildInfo(
            self.spec.id, self.address, self.pid, self.spec.kind, self.restarts, self.status,
            self.remote,
        )


@dataclass
class _Running:
    op: Op
    wait: Predicate
    deferred: list[tuple[Any, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class _PlacementRetry:
    """Timer payload: try again to start children waiting for a host."""


def _is_retry(message: Any) -> bool:
    return isinstance(message, WakeupMessage) and isinstance(message.payload, _PlacementRetry)


PLACED_START_TIMEOUT_MIN = 2.0
"""A child with requirements must answer its start within ten heartbeat
windows (``10 * heartbeat * heartbeat_misses``, 15 s by default), and at least
this many seconds."""


def _should_restart(restart: Restart, normal: bool) -> bool:
    if restart is Restart.PERMANENT:
        return True
    if restart is Restart.TRANSIENT:
        return not normal
    return False


class Supervisor(SupervisedActor):
    """A supervisor actor. Start it with ``(flags, children)`` as start arguments,
    or subclass it and override :meth:`init` to build them.

    ``clock`` is the time source of the restart-intensity check; tests
    override it in a subclass to control time.
    """

    clock: Callable[[], float] = staticmethod(time.monotonic)

    def init(self, *args: Any, **kwargs: Any) -> tuple[SupervisorFlags, list[ChildSpec]]:
        """Return the flags and child specs. Default: ``init(flags, children)``."""
        flags, children = args
        return flags, list(children)

    # -- start ----------------------------------------------------------------

    def _sa_begin(self, init: _Init, sender: Any) -> None:
        self.sup_id = init.child_id
        self._tokens = itertools.count(1)
        self._children: list[_Child] = []
        self._restart_times: tuple[float, ...] = ()
        self._dynamic = itertools.count(1)
        self._op: _Running | None = None
        self._queue: list[tuple[Any, Any]] = []
        self._heartbeat_armed = False
        self._retry_armed = False
        self._host = host_id()
        try:
            flags, specs = self.init(*init.args, **init.kwargs)
            if not isinstance(flags, SupervisorFlags):
                raise InvalidSpec("flags", f"must be SupervisorFlags, got {flags!r}")
            self.flags = flags
            self.template: ChildSpec | None = None
            specs_t = validate_children(flags, specs)
        except BaseException as exc:  # noqa: BLE001
            self._sa_failed = True
            self.send(sender, _StartFailed(init.child_id, init.token, os.getpid(),
                                           describe_exception(exc), self._sa_remote))
            if not init.supervised:
                self._sa_exit_now()
            return
        if flags.strategy is Strategy.SIMPLE_ONE_FOR_ONE:
            self.template = specs_t[0]
        else:
            self._children = [_Child(spec) for spec in specs_t]
        self._run(self._op_start_all(init, sender))

    def _op_start_all(self, init: _Init, sender: Any) -> Op:
        started: list[_Child] = []
        for child in list(self._children):
            error = yield from self._start_child(child)
            if error is not None:
                self.log.warning("start_failed", failed_child=child.spec.id, reason=error)
                for done in reversed(started):
                    yield from self._stop_child(done)
                self._sa_failed = True
                reason = f"child {child.spec.id!r} failed to start: {error}"
                self.send(sender, _StartFailed(init.child_id, init.token, os.getpid(), reason,
                                               self._sa_remote))
                if not init.supervised:
                    self._sa_exit_now()
                return
            started.append(child)
        self._sa_started = True
        self.send(sender, self._sa_started_reply(init))

    # -- operation machinery ----------------------------------------------------

    def _run(self, op: Op) -> None:
        self._op = _Running(op, lambda _m: False)
        self._advance(None)

    def _advance(self, value: Any) -> None:
        assert self._op is not None
        try:
            self._op.wait = self._op.op.send(value)
        except StopIteration:
            self._op = None
            self._drain()

    def _drain(self) -> None:
        while self._op is None and self._queue and not (self._sa_exiting or self._sa_failed):
            message, sender = self._queue.pop(0)
            self._handle(message, sender)

    def on_receive(self, message: Any, sender: Any) -> None:
        if not hasattr(self, "_op"):
            # Never started (e.g. created by a name lookup that found nothing).
            self.log.warning("supervisor_not_started", message_type=type(message).__name__)
            return
        if isinstance(message, _ChildFailed):
            self._on_child_failed(message, sender)
        elif isinstance(message, _ChildExiting):
            self._on_child_exiting(message, sender)
        elif self._op is not None and self._op.wait(message):
            self._last_sender = sender
            self._advance(message)
        elif isinstance(message, (WakeupMessage, _StopTimeout)) and not _is_retry(message):
            return  # a timer of an operation that already finished
        elif self._op is not None or self._queue:
            self._note_exit(message)
            self._queue.append((message, sender))
        else:
            self._handle(message, sender)

    def _note_exit(self, message: Any) -> None:
        """Remember that a child died even if no operation is waiting for it, so a
        later stop of that child does not wait for an exit that already happened."""
        if isinstance(message, ChildActorExited):
            child = self._find(message.childAddress)
            if child is not None:
                child.exited = True

    def _find(self, address: Any) -> _Child | None:
        for child in self._children:
            if child.address is not None and child.address == address:
                return child
        return None

    def _on_child_failed(self, message: _ChildFailed, sender: Any) -> None:
        child = self._find(sender)
        if child is None:
            return
        child.reason, child.cause = message.reason, ExitKind.CRASHED
        self._kill(child)

    def _kill(self, child: _Child) -> None:
        """SIGKILL a local child; tell a remote one to exit (its pid is not ours)."""
        if child.remote:
            if child.address is not None:
                self.send(child.address, _KillSelf())
        else:
            kill_child_process(child.pid)

    # -- remote children: heartbeats ----------------------------------------------

    def _heartbeat(self, message: Any, sender: Any) -> bool:
        """Pongs and heartbeat ticks, handled in any state; True if it was one."""
        if isinstance(message, _Pong):
            child = self._find(sender)
            if child is not None:
                child.last_seen, child.unanswered = time.monotonic(), 0
            return True
        if not (isinstance(message, WakeupMessage) and isinstance(message.payload,
                                                                   _HeartbeatTick)):
            return False
        self._heartbeat_armed = False
        now = time.monotonic()
        silent = []
        for child in self._children:
            if child.remote and child.address is not None:
                # Counted in pings, not in wall time: a supervisor whose own loop
                # was busy for a while sent no pings meanwhile and blames nobody.
                if child.unanswered >= self.flags.heartbeat_misses:
                    silent.append(child)
                else:
                    self.send(child.address, _Ping())
                    child.unanswered += 1
        for child in silent:
            self._unreachable(child, now - child.last_seen)
        self._arm_heartbeat()
        return True

    def _arm_heartbeat(self) -> None:
        if not self._heartbeat_armed and any(
                c.remote and c.address is not None for c in self._children):
            self._heartbeat_armed = True
            self.wakeupAfter(timedelta(seconds=self.flags.heartbeat), _HeartbeatTick())

    def _unreachable(self, child: _Child, silent: float) -> None:
        """A remote child stopped answering: its host (or the child) is gone.

        Thespian will never report it, so the supervisor acts as if its
        ``ChildActorExited`` had arrived. The member is also dropped from the
        convention at once if its admin does not accept a connection either (it
        re-registers by itself if it is alive after all), so that the restart
        is not placed on a dead host."""
        reason = (f"unreachable: no answer to {child.unanswered} heartbeats "
                  f"({silent:.1f} s)")
        self.log.error("child_unreachable", supervisor_id=self.sup_id, child=child.spec.id,
                       child_pid=child.pid, admin=child.admin, silent_s=round(silent, 2))
        if child.address is not None:
            # If it is alive after all (a partition, a frozen host), it exits when
            # this arrives; otherwise its watchdog ends it.
            self.send(child.address, _KillSelf())
        if not child.normal_exit:
            child.reason, child.cause = reason, ExitKind.UNREACHABLE
        if child.admin and not admin_reachable(child.admin):
            self.log.error("member_unreachable", supervisor_id=self.sup_id, admin=child.admin)
            try:
                self.deRegisterRemoteSystem(child.admin)
            except Exception as exc:  # noqa: BLE001 - best effort
                self.log.warning("deregister_failed", admin=child.admin,
                                 reason=describe_exception(exc))
        self.receiveMessage(ChildActorExited(child.address), self.myAddress)

    def _on_child_exiting(self, message: _ChildExiting, sender: Any) -> None:
        child = self._find(sender)
        if child is None:
            return
        child.normal_exit = True
        if child.status == "running":
            # Asked to stop normally: the supervisor performs the stop.
            self.send(child.address, _Shutdown())

    # -- requests and exits when idle -------------------------------------------

    def _handle(self, message: Any, sender: Any) -> None:
        if isinstance(message, ChildActorExited):
            child = self._find(message.childAddress)
            if child is not None:
                self._run(self._op_child_exited(child))
        elif isinstance(message, WhichChildren):
            self.send(sender, Reply(True, [c.info() for c in self._children], ref=message.ref))
        elif isinstance(message, CountChildren):
            self.send(sender, Reply(True, self._counts(), ref=message.ref))
        elif isinstance(message, StartChild):
            self._run(self._op_request(sender, message.ref, self._op_start_request(message)))
        elif isinstance(message, TerminateChild):
            self._run(self._op_request(sender, message.ref, self._op_terminate(message.id)))
        elif isinstance(message, RestartChild):
            self._run(self._op_request(sender, message.ref,
                                       self._op_restart_request(message.id)))
        elif isinstance(message, DeleteChild):
            reply = self._delete(message.id)
            self.send(sender, Reply(reply.ok, reply.value, reply.error, ref=message.ref))
        elif isinstance(message, ShutdownSupervisor):
            self._run(self._op_shutdown(sender, message.ref))
        elif _is_retry(message):
            self._retry_armed = False
            self._run(self._op_retry_placement())
        else:
            self.on_message(message, sender)

    def on_message(self, message: Any, sender: Any) -> None:
        """Hook for messages that are not supervision requests (default: log and drop)."""
        self.log.warning("unexpected_message", message_type=type(message).__name__)

    def on_child_event(self, event: ChildEvent) -> None:
        """Hook called when a child has started or exited (for any reason).

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
        return [child.info() for child in self._children]

    def child_address(self, child_id: str) -> Any:
        """The current address of child ``child_id`` (None if it is not running)."""
        for child in self._children:
            if child.spec.id == child_id:
                return child.address
        return None

    def _resolve(self, value: Any) -> Any:
        if isinstance(value, Sibling):
            address = self.child_address(value.id)
            if address is None:
                raise SupervisorError(f"sibling {value.id!r} is not running", code="not_found",
                                      child_id=value.id)
            return address
        return value

    def _sa_on_shutdown_request(self, sender: Any) -> None:
        # From our own supervisor: stop children in order, then exit.
        self._sa_exiting = True
        for message, requester in self._queue:
            self._note_exit(message)
            self._refuse(message, requester)
        self._queue.clear()
        self._run(self._op_shutdown(None))

    def _op_shutdown(self, requester: Any, ref: int = 0) -> Op:
        """Stop the children right to left, answer ``requester`` (if any), exit."""
        self._sa_exiting = True
        for child in reversed(list(self._children)):
            yield from self._stop_child(child)
        self.log.info("supervisor_shutdown", supervisor_id=self.sup_id)
        if requester is not None:
            self.send(requester, Reply(True, None, ref=ref))
        self.send(self.myAddress, ActorExitRequest())

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if self._sa_link(message, sender):
            return
        try:
            if hasattr(self, "flags") and self._heartbeat(message, sender):
                return
        except BaseException as exc:  # noqa: BLE001
            self._sa_fail(describe_exception(exc))
            return
        # A supervisor's operations must keep seeing messages while it stops
        # its children, so only ActorExitRequest short-circuits.
        if (
            self._sa_exiting
            and not isinstance(message, ActorExitRequest)
            and getattr(self, "_op", None) is not None
        ):
            try:
                if self._op is not None and self._op.wait(message):
                    self._last_sender = sender
                    self._advance(message)
                elif isinstance(message, _ChildFailed):
                    self._on_child_failed(message, sender)
                else:
                    self._note_exit(message)
                    self._refuse(message, sender)
            except BaseException as exc:  # noqa: BLE001
                self._sa_fail(describe_exception(exc))
            return
        super().receiveMessage(message, sender)

    _REQUESTS = (WhichChildren, CountChildren, StartChild, TerminateChild, RestartChild,
                 DeleteChild, ShutdownSupervisor)

    def _refuse(self, message: Any, sender: Any) -> None:
        """Answer a control request that arrives while the supervisor shuts down."""
        if isinstance(message, self._REQUESTS):
            self.send(sender, Reply(False, error=SupervisorError(
                f"supervisor {self.sup_id!r} is shutting down", code="shutting_down"),
                ref=getattr(message, "ref", 0)))

    # -- child lifecycle (operations) ----------------------------------------------

    def _start_child(self, child: _Child) -> Generator[Predicate, Any, str | None]:
        """Start one child and wait for its answer; return None or the failure reason."""
        spec = child.spec
        start = spec.start.with_extra_args(child.extra_args)
        token = next(self._tokens)
        child.reason, child.normal_exit, child.exited = None, False, False
        child.cause = ExitKind.KILLED
        try:
            args = tuple(self._resolve(a) for a in start.args)
            kwargs = {k: self._resolve(v) for k, v in start.kwargs.items()}
            address = self.createActor(start.actor_path,
                                       targetActorRequirements=start.requirements or None)
        except Exception as exc:  # noqa: BLE001
            child.status = "terminated"
            return describe_exception(exc)
        child.status = "starting"
        child.remote, child.admin, child.unplaced = False, "", False
        self.send(address, _Init(spec.id, self.sup_id, token, args, kwargs,
                                 parent_pid=os.getpid(), host=self._host,
                                 heartbeat=self.flags.heartbeat,
                                 heartbeat_misses=self.flags.heartbeat_misses))
        placed_timeout = None
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
        if isinstance(reply, WakeupMessage):
            child.status = "terminated"
            if self._kill_unknown_children():
                # It was placed here, and is merely stuck in its start.
                return f"no answer to its start within {placed_timeout:.0f} s (killed)"
            self.send(address, _KillSelf())  # if it is alive after all, it exits
            child.unplaced = True
            return (f"no answer within {placed_timeout:.0f} s from the actor placed for "
                    f"requirements {start.requirements!r} (its system may have died)")
        if isinstance(reply, _Started):
            child.address, child.pid, child.status = self._last_sender, reply.pid, "running"
            child.remote, child.admin = reply.remote, reply.admin
            child.last_seen, child.unanswered = time.monotonic(), 0
            self._arm_heartbeat()
            self.log.info("child_started", supervisor_id=self.sup_id, child=spec.id,
                          child_pid=reply.pid, remote=reply.remote, admin=reply.admin)
            self._emit(ChildEvent(ChildEventKind.STARTED, spec.id, child.address, reply.pid))
            return None
        if isinstance(reply, _StartFailed):
            child.pid = reply.pid
            child.address = self._last_sender
            child.remote = reply.remote
            yield from self._stop_child(child, kill=True)
            child.status = "terminated"
            return reply.reason
        child.status = "terminated"
        if start.requirements:
            # Thespian answers an unsatisfiable placement this way (after ~10 ms).
            child.unplaced = True
            return (f"exited during start: no live actor system satisfies requirements "
                    f"{start.requirements!r} (or the actor died while starting)")
        return "exited during start"

    def _kill_unknown_children(self) -> list[int]:
        """SIGKILL this process's child processes that are no known child: the
        one being started (operations run one at a time). Returns their pids."""
        known = {c.pid for c in self._children if c.pid is not None}
        try:
            procs = psutil.Process().children()
        except psutil.Error:
            return []
        return [p.pid for p in procs if p.pid not in known and kill_child_process(p.pid)]

    def _stop_child(self, child: _Child, *, kill: bool = False) -> Op:
        """Stop a running child: ``_Shutdown``, then SIGKILL after its shutdown time."""
        if child.address is None:
            child.status = "terminated"
            return
        address, pid, remote = child.address, child.pid, child.remote
        if child.exited or (not remote and not child_alive(pid)):
            # Already dead (its exit may have been queued or dropped meanwhile).
            self.log.info("child_stopped", supervisor_id=self.sup_id, child=child.spec.id,
                          child_pid=pid, already_exited=True)
            child.address, child.pid, child.status = None, None, "terminated"
            self._emit(ChildEvent(ChildEventKind.EXITED, child.spec.id, address, pid,
                                  "shutdown", True, ExitKind.SHUTDOWN))
            return
        child.status, child.normal_exit = "stopping", True
        shutdown = child.spec.shutdown
        token = next(self._tokens)
        if kill or shutdown is Shutdown.BRUTAL_KILL:
            self._kill(child)
        else:
            self.send(address, _Shutdown())
            if isinstance(shutdown, float):
                self.wakeupAfter(timedelta(seconds=shutdown), _StopTimeout(token))
        while True:
            message = yield lambda m: (
                isinstance(m, ChildActorExited) and m.childAddress == address
            ) or (isinstance(m, WakeupMessage) and m.payload == _StopTimeout(token))
            if isinstance(message, ChildActorExited):
                if not remote:
                    wait_child_exit(pid, timeout=2.0)
                break
            self.log.warning("child_shutdown_timeout", supervisor_id=self.sup_id,
                             child=child.spec.id, child_pid=pid)
            self._kill(child)
            if remote:
                continue  # its admin reports the exit, or the heartbeat gives up on it
            if wait_child_exit(pid, timeout=2.0) or not child_alive(pid):
                break  # gone; its ChildActorExited, if it comes, finds no child
        self.log.info("child_stopped", supervisor_id=self.sup_id, child=child.spec.id,
                      child_pid=pid)
        child.address, child.pid, child.status = None, None, "terminated"
        self._emit(ChildEvent(ChildEventKind.EXITED, child.spec.id, address, pid,
                                  "shutdown", True, ExitKind.SHUTDOWN))

    def _op_child_exited(self, child: _Child) -> Op:
        normal = child.normal_exit
        reason = "normal" if normal else (child.reason or "killed")
        self.log.info("child_exited", supervisor_id=self.sup_id, child=child.spec.id,
                      child_pid=child.pid, reason=reason, normal=normal)
        event = ChildEvent(ChildEventKind.EXITED, child.spec.id, child.address, child.pid,
                           reason, normal, ExitKind.NORMAL if normal else child.cause)
        child.address, child.pid, child.status = None, None, "terminated"
        self._emit(event)
        if not _should_restart(child.spec.restart, normal):
            if child.spec.restart is Restart.TEMPORARY or self.template is not None:
                self._children.remove(child)
            return
        yield from self._restart_after_failure(child, reason)

    def _restart_after_failure(self, child: _Child, reason: str) -> Op:
        while True:
            self._restart_times, exceeded = add_restart(
                self._restart_times, self.clock(), self.flags.intensity, self.flags.period
            )
            if exceeded:
                yield from self._escalate(child, reason)
                return
            group = self._restart_group(child)
            for other in reversed(group):
                if other is not child and other.address is not None:
                    yield from self._stop_child(other)
            failed = None
            for member in group:
                member.status = "restarting"
            for member in group:
                error = yield from self._start_child(member)
                member.restarts += 1
                if error is not None and member.unplaced:
                    self._wait_for_placement(member, error)
                    return
                if error is not None:
                    failed, reason = member, error
                    break
                self.log.info("child_restarted", supervisor_id=self.sup_id,
                              child=member.spec.id, child_pid=member.pid,
                              restarts=member.restarts)
            if failed is None:
                return
            child = failed

    def _wait_for_placement(self, child: _Child, reason: str) -> None:
        """No live system can host the restarted child (its host died): retry
        later instead of burning the restart intensity on a missing host. The
        child (and the rest of its restart group) waits with status
        ``waiting_for_placement``."""
        child.status = "waiting_for_placement"
        self.log.warning("waiting_for_placement", supervisor_id=self.sup_id,
                         child=child.spec.id, reason=reason)
        self._emit(ChildEvent(ChildEventKind.WAITING, child.spec.id, None, None,
                              f"waiting_for_placement: {reason}"))
        if not self._retry_armed:
            self._retry_armed = True
            delay = max(0.1, self.flags.heartbeat * self.flags.heartbeat_misses)
            self.wakeupAfter(timedelta(seconds=delay), _PlacementRetry())

    def _op_retry_placement(self) -> Op:
        """Start, in order, the children left unstarted by a waiting restart."""
        waiting = [c for c in self._children if c.address is None
                   and c.status in ("waiting_for_placement", "restarting")]
        for child in waiting:
            error = yield from self._start_child(child)
            if error is not None and child.unplaced:
                self._wait_for_placement(child, error)
                return
            if error is not None:
                yield from self._restart_after_failure(child, error)
                return
            self.log.info("child_restarted", supervisor_id=self.sup_id, child=child.spec.id,
                          child_pid=child.pid, restarts=child.restarts)

    def _restart_group(self, child: _Child) -> list[_Child]:
        strategy = self.flags.strategy
        if strategy is Strategy.ONE_FOR_ALL:
            return list(self._children)
        if strategy is Strategy.REST_FOR_ONE:
            return self._children[self._children.index(child):]
        return [child]

    def _escalate(self, child: _Child, reason: str) -> Op:
        self.log.error("restart_intensity_exceeded", supervisor_id=self.sup_id,
                       child=child.spec.id, reason=reason, intensity=self.flags.intensity,
                       period=self.flags.period)
        self._sa_exiting = True
        for other in reversed(list(self._children)):
            yield from self._stop_child(other)
        self._sa_exiting = False
        self._sa_fail("shutdown: reached_max_restart_intensity")

    # -- control requests ---------------------------------------------------------

    def _op_request(self, sender: Any, ref: int, op: Op) -> Op:
        try:
            value = yield from op
        except SupervisorError as exc:
            self.send(sender, Reply(False, error=exc, ref=ref))
            return
        self.send(sender, Reply(True, value, ref=ref))

    def _by_id(self, child_id: str) -> _Child:
        for child in self._children:
            if child.spec.id == child_id:
                return child
        raise SupervisorError(f"no child with id {child_id!r}", code="not_found",
                              child_id=child_id)

    def _op_start_request(self, request: StartChild) -> Generator[Predicate, Any, ChildInfo]:
        if self.template is not None:
            spec = ChildSpec(f"{self.template.id}-{next(self._dynamic)}", self.template.start,
                             self.template.restart, self.template.shutdown, self.template.kind)
            child = _Child(spec, tuple(request.args))
        else:
            if request.spec is None:
                raise SupervisorError("start_child needs a ChildSpec", code="invalid_spec")
            for existing in self._children:
                if existing.spec.id == request.spec.id:
                    code = "running" if existing.address is not None else "already_present"
                    raise SupervisorError(f"child {request.spec.id!r} is {code}", code=code,
                                          child_id=request.spec.id)
            child = _Child(request.spec)
        self._children.append(child)
        error = yield from self._start_child(child)
        if error is not None:
            self._children.remove(child)
            raise StartFailed(f"child {child.spec.id!r} failed to start: {error}",
                              child_id=child.spec.id, reason=error)
        return child.info()

    def _op_terminate(self, child_id: str) -> Op:
        child = self._by_id(child_id)
        yield from self._stop_child(child)
        if child.spec.restart is Restart.TEMPORARY or self.template is not None:
            self._children.remove(child)

    def _op_restart_request(self, child_id: str) -> Generator[Predicate, Any, ChildInfo]:
        child = self._by_id(child_id)
        if self.template is not None:
            raise SupervisorError("simple_one_for_one children cannot be restarted by id",
                                  code="not_supported")
        if child.address is not None:
            raise SupervisorError(f"child {child_id!r} is running", code="running",
                                  child_id=child_id)
        error = yield from self._start_child(child)
        if error is not None:
            raise StartFailed(f"child {child_id!r} failed to start: {error}",
                              child_id=child_id, reason=error)
        return child.info()

    def _delete(self, child_id: str) -> Reply:
        try:
            child = self._by_id(child_id)
        except SupervisorError as exc:
            return Reply(False, error=exc)
        if self.template is not None:
            return Reply(False, error=SupervisorError(
                "simple_one_for_one children cannot be deleted", code="not_supported"))
        if child.address is not None:
            return Reply(False, error=SupervisorError(
                f"child {child_id!r} is running", code="running", child_id=child_id))
        self._children.remove(child)
        return Reply(True, None)

    def _counts(self) -> ChildCounts:
        active = [c for c in self._children if c.address is not None]
        sups = sum(1 for c in self._children if c.spec.kind is Kind.SUPERVISOR)
        return ChildCounts(len(self._children), len(active), sups, len(self._children) - sups)
