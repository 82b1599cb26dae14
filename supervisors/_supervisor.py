"""The supervisor actor: a thin shell over the restart rules, like OTP's ``supervisor``.

``receiveMessage`` is the one dispatch. What a child said about its coming
exit (``_ChildFailed``, ``_ChildExiting``), heartbeats and parent requests
are taken at once; everything else is either what the running operation
waits for, or queued until it is done and then handled by :meth:`_handle`.
A child's exit is decided by :func:`supervisors._rules.child_exited` and the
decision carried out by :meth:`Supervisor._carry_out`.

No exit is lost: Thespian's own loss is patched in ``_thespian/child_exits.py``, and
after each exit (once Thespian is done with it) the supervisor also checks
every other local child's process (pid and start time) and treats one found
dead as exited.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from thespian.actors import ActorExitRequest, ChildActorExited, WakeupMessage

from supervisors import _rules
from supervisors._actor import describe_exception
from supervisors._children import (
    Child,
    ChildTable,
    Restarting,
    Running,
    Starting,
    Stopped,
    Stopping,
    Waiting,
)
from supervisors._errors import InvalidSpec
from supervisors._lifecycle import Op
from supervisors._messages import (
    ChildEvent,
    ChildEventKind,
    CountChildren,
    DeleteChild,
    ExitKind,
    Reply,
    RestartChild,
    ShutdownSupervisor,
    StartChild,
    TerminateChild,
    WhichChildren,
)
from supervisors._os import child_alive
from supervisors._protocol import (
    GetPid,
    StopNormally,
    _CheckChildren,
    _ChildExiting,
    _ChildFailed,
    _Init,
    _PlacementRetry,
    _Shutdown,
    _StartFailed,
    _StopTimeout,
    _TryAgain,
)
from supervisors._requests import ControlRequests
from supervisors._spec import (
    ChildSpec,
    Strategy,
    SupervisorFlags,
    validate_children,
)


def _is_placement_retry(message: Any) -> bool:
    return isinstance(message, WakeupMessage) and isinstance(message.payload, _PlacementRetry)


class Supervisor(ControlRequests):
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

    def on_message(self, message: Any, sender: Any) -> None:
        """Hook for messages that are not supervision requests (default: log and drop)."""
        self.log.warning("unexpected_message", message_type=type(message).__name__)

    # -- start ------------------------------------------------------------------

    def _sa_begin(self, init: _Init, sender: Any) -> None:
        try:
            flags, specs = self.init(*init.args, **init.kwargs)
            if not isinstance(flags, SupervisorFlags):
                raise InvalidSpec("flags", f"must be SupervisorFlags, got {flags!r}")
            table = ChildTable(validate_children(flags, specs),
                               dynamic=flags.strategy is Strategy.SIMPLE_ONE_FOR_ONE)
        except BaseException as exc:  # noqa: BLE001
            self._refuse_start(init, sender, describe_exception(exc))
            return
        self._setup(init.child_id, flags, table)
        self._restarts: _rules.Restarts = ()
        self._closing = False  # shutting down: requests refused, nothing restarted
        self._placement_armed = False
        self._check_pending = False
        self._run(self._op_start_all(init, sender))

    def _refuse_start(self, init: _Init, sender: Any, reason: str) -> None:
        self._sa_failed = True
        self.send(sender, _StartFailed(init.child_id, init.token, os.getpid(), reason,
                                       self._sa_remote))
        if not init.supervised:
            self._sa_exit_now()

    def _op_start_all(self, init: _Init, sender: Any) -> Op:
        started: list[Child] = []
        for child in self.children:
            error = yield from self._start_child(child)
            if error is not None:
                self.log.warning("start_failed", failed_child=child.spec.id, reason=error.reason)
                for done in reversed(started):
                    yield from self._stop_child(done)
                self._refuse_start(init, sender,
                                   f"child {child.spec.id!r} failed to start: {error.reason}")
                return
            started.append(child)
        self._sa_started = True
        self.send(sender, self._sa_started_reply(init))

    # -- the one dispatch ---------------------------------------------------------

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if self._sa_link(message, sender):
            return
        try:
            self._dispatch(message, sender)
        except BaseException as exc:  # noqa: BLE001
            self._sa_fail(describe_exception(exc))

    def _dispatch(self, message: Any, sender: Any) -> None:
        if isinstance(message, ActorExitRequest):
            self._sa_on_exit_request()
        elif isinstance(message, GetPid):
            self.send(sender, os.getpid())
        elif self.table is None:
            if isinstance(message, _Init) and not self._sa_failed:
                self._sa_on_init(message, sender)
            else:  # e.g. created by a name lookup that found nothing
                self.log.warning("supervisor_not_started", message_type=type(message).__name__)
        elif self._sa_failed or isinstance(message, _Init):
            return
        elif isinstance(message, _ChildFailed):
            self._on_child_failed(message, sender)
        elif isinstance(message, _ChildExiting):
            self._on_child_exiting(sender)
        elif isinstance(message, _Shutdown):
            self._sa_on_shutdown_request(sender)
        elif isinstance(message, StopNormally):
            if self._sa_supervised:
                self.stop_normally()  # the parent performs the (ordered) stop
            else:
                # Top level: stop the children right to left within their
                # shutdown times, as ShutdownSupervisor does (not Thespian's
                # recursive, unordered ActorExitRequest).
                self._abandon_request()
                self._run(self._op_shutdown(None))
        elif isinstance(message, _CheckChildren):
            self._check_pending = False
            for address in self._unreported_exits():
                self._route(ChildActorExited(address), self.myAddress)
        elif not self._heartbeat(message, sender):
            self._route(message, sender)

    def _route(self, message: Any, sender: Any) -> None:
        if isinstance(message, ChildActorExited):
            child = self.children.by_address(message.childAddress)
            if child is not None:
                child.note_exit()
            if not self._check_pending:
                # Even for an unknown address (a duplicate): Thespian reaps after each.
                self._check_pending = True
                self.send(self.myAddress, _CheckChildren())
        if self._op is not None and self._op.wait(message):
            self._last_sender = sender
            self._advance(message)
        elif isinstance(message, (WakeupMessage, _StopTimeout)) and not _is_placement_retry(
                message):
            pass  # a timer of an operation that already finished
        elif self._closing or self._sa_exiting:
            self._refuse(message, sender)  # nothing is restarted any more
        elif self._op is not None or self._queue:
            self._queue.append((message, sender))
        else:
            self._handle(message, sender)

    def _unreported_exits(self) -> list[Any]:
        """Local children whose process is gone although their exit has not
        arrived: their addresses (each noted as exited). Thespian may reap
        several dead children while reporting one."""
        found = []
        for child in self.children:
            state, proc = child.state, child.proc
            if (proc is not None and not proc.remote and isinstance(state, (Running, Stopping))
                    and not state.gone and not child_alive(proc.pid, proc.started)):
                self.log.warning("child_exit_unreported", supervisor_id=self.sup_id,
                                 child=child.spec.id, child_pid=proc.pid)
                child.note_exit()
                found.append(proc.address)
        return found

    def _handle(self, message: Any, sender: Any) -> None:
        if isinstance(message, ChildActorExited):
            child = self.children.by_address(message.childAddress)
            if child is not None and isinstance(child.state, Running):
                self._run(self._op_exited(child))
        elif isinstance(message, WhichChildren):
            self.send(sender, Reply(True, self.children.infos(), ref=message.ref))
        elif isinstance(message, CountChildren):
            self.send(sender, Reply(True, self.children.counts(), ref=message.ref))
        elif isinstance(message, StartChild):
            self._run(self._op_request(sender, message.ref, self._op_start_request(message)))
        elif isinstance(message, TerminateChild):
            self._run(self._op_request(sender, message.ref, self._op_terminate(message.id)))
        elif isinstance(message, RestartChild):
            self._run(self._op_request(sender, message.ref,
                                       self._op_restart_request(message.id)))
        elif isinstance(message, DeleteChild):
            self.send(sender, dataclasses.replace(self._delete(message.id), ref=message.ref))
        elif isinstance(message, ShutdownSupervisor):
            self._run(self._op_shutdown(sender, message.ref))
        elif isinstance(message, _TryAgain):
            child = self.children.by_id(message.child_id)
            if child is not None and isinstance(child.state, Restarting):
                self._run(self._op_try_again(child))
        elif _is_placement_retry(message):
            self._placement_armed = False
            self._run(self._op_retry_placement())
        else:
            self.on_message(message, sender)

    # -- what children say ----------------------------------------------------------

    def _on_child_failed(self, message: _ChildFailed, sender: Any) -> None:
        child = self.children.by_address(sender)
        if child is None:
            return
        if isinstance(child.state, Running):
            child.state = dataclasses.replace(child.state, cause=ExitKind.CRASHED,
                                              reason=message.reason)
        self._kill(child)

    def _on_child_exiting(self, sender: Any) -> None:
        child = self.children.by_address(sender)
        if child is not None and isinstance(child.state, Running):
            # Asked to stop normally: the supervisor performs the stop.
            child.state = dataclasses.replace(child.state, cause=ExitKind.NORMAL)
            self.send(child.address, _Shutdown())

    # -- exits and restarts (carrying out the rules) -----------------------------------

    def _op_exited(self, child: Child) -> Op:
        state, proc = child.state, child.proc
        assert isinstance(state, Running) and proc is not None
        normal = state.cause is ExitKind.NORMAL
        reason = "normal" if normal else (state.reason or "killed")
        self.log.info("child_exited", supervisor_id=self.sup_id, child=child.spec.id,
                      child_pid=proc.pid, reason=reason, normal=normal)
        child.state = Stopped()
        self._emit(ChildEvent(ChildEventKind.EXITED, child.spec.id, proc.address, proc.pid,
                              reason, normal, state.cause))
        decision, self._restarts = _rules.child_exited(
            self.flags, self.children.rows(), child.spec.id, normal, self._restarts,
            self.clock(), dynamic=self.children.dynamic)
        yield from self._carry_out(decision, reason)

    def _op_try_again(self, child: Child) -> Op:
        """A restart that failed, tried again: it counts again (OTP's
        ``try_again_restart``), so a child that can never start escalates."""
        decision, self._restarts = _rules.restart(
            self.flags, self.children.rows(), child.spec.id, self._restarts, self.clock())
        yield from self._carry_out(decision, "restart failed")

    def _carry_out(self, decision: _rules.Decision, reason: str) -> Op:
        if isinstance(decision, _rules.Escalate):
            yield from self._op_escalate(decision.child_id, reason)
        elif isinstance(decision, _rules.Terminated):
            child = self.children.by_id(decision.child_id)
            if child is not None:
                self.children.forget(child)
            if decision.shutdown:
                yield from self._op_auto_shutdown(decision.child_id)
        else:
            yield from self._op_restart_group(decision)

    def _op_restart_group(self, group: _rules.RestartGroup) -> Op:
        for child_id in group.stop:
            sibling = self.children.by_id(child_id)
            if sibling is not None:
                yield from self._stop_child(sibling)
        for child_id in group.drop:
            dropped = self.children.by_id(child_id)
            if dropped is not None:
                self.log.info("child_dropped", supervisor_id=self.sup_id, child=child_id,
                              reason="temporary bystander")
                self.children.remove(dropped)
        members = [c for c in map(self.children.by_id, group.start) if c is not None]
        for member in members:
            member.state = Restarting()
        for member in members:
            error = yield from self._start_child(member)
            member.restarts += 1
            if error is None:
                self.log.info("child_restarted", supervisor_id=self.sup_id,
                              child=member.spec.id, child_pid=member.proc and member.proc.pid,
                              restarts=member.restarts)
                continue
            if error.unplaced:
                self._wait_for_placement(member, error.reason)
            else:
                self._try_again(member, error.reason)
            return

    def _try_again(self, child: Child, reason: str) -> None:
        child.state = Restarting()
        self.log.warning("restart_failed", supervisor_id=self.sup_id, child=child.spec.id,
                         reason=reason)
        self.send(self.myAddress, _TryAgain(child.spec.id))

    def _wait_for_placement(self, child: Child, reason: str) -> None:
        """No live system can host the restarted child (its host died): retry
        later instead of burning the restart intensity on a missing host."""
        child.state = Waiting(reason)
        self.log.warning("waiting_for_placement", supervisor_id=self.sup_id,
                         child=child.spec.id, reason=reason)
        self._emit(ChildEvent(ChildEventKind.WAITING, child.spec.id, None, None,
                              f"waiting_for_placement: {reason}"))
        if not self._placement_armed:
            self._placement_armed = True
            delay = max(0.1, self.flags.heartbeat * self.flags.heartbeat_misses)
            self.wakeupAfter(timedelta(seconds=delay), _PlacementRetry())

    def _op_retry_placement(self) -> Op:
        """Start, in order, the children left unstarted by a waiting restart."""
        for child in self.children:
            if not isinstance(child.state, (Waiting, Restarting)):
                continue
            error = yield from self._start_child(child)
            if error is None:
                self.log.info("child_restarted", supervisor_id=self.sup_id,
                              child=child.spec.id, child_pid=child.proc and child.proc.pid,
                              restarts=child.restarts)
                continue
            if error.unplaced:
                self._wait_for_placement(child, error.reason)
            else:
                self._try_again(child, error.reason)
            return

    def _op_escalate(self, child_id: str, reason: str) -> Op:
        self.log.error("restart_intensity_exceeded", supervisor_id=self.sup_id,
                       child=child_id, reason=reason, intensity=self.flags.intensity,
                       period=self.flags.period)
        yield from self._op_stop_all()
        self._sa_fail("shutdown: reached_max_restart_intensity")

    def _op_auto_shutdown(self, child_id: str) -> Op:
        """Significant children exited: stop the rest and exit normally, so a
        transient or temporary supervisor is not restarted by its parent."""
        self.log.info("auto_shutdown", supervisor_id=self.sup_id, child=child_id,
                      auto_shutdown=self.flags.auto_shutdown.value)
        yield from self._op_stop_all()
        self.stop_normally()

    def _op_stop_all(self) -> Op:
        """Stop every child, right to left; refuse requests from now on."""
        self._closing = True
        for message, requester in self._queue:
            self._refuse(message, requester)
        self._queue.clear()
        abandoned = [c for c in self.children if isinstance(c.state, Starting)]
        for child in reversed(list(self.children)):
            yield from self._stop_child(child)
        if abandoned:
            # A start this shutdown abandoned: that child has not answered, so it
            # has nothing to stop cleanly, and it cannot take a _Shutdown while its
            # start runs (Thespian's exit would wait for it).
            self._kill_unknown_children()
            for child in abandoned:
                child.state = Stopped()

    # -- shutdown ---------------------------------------------------------------------

    def _sa_on_shutdown_request(self, sender: Any) -> None:
        # From our own supervisor: stop children in order, then exit (whatever
        # operation ran is abandoned: the whole subtree is going away).
        self._abandon_request()
        self._run(self._op_shutdown(None))

    def _op_shutdown(self, requester: Any, ref: int = 0) -> Op:
        """Stop the children right to left, answer ``requester`` (if any), exit."""
        yield from self._op_stop_all()
        self.log.info("supervisor_shutdown", supervisor_id=self.sup_id)
        if requester is not None:
            self.send(requester, Reply(True, None, ref=ref))
        self.send(self.myAddress, ActorExitRequest())
