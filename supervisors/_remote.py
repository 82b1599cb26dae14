"""Heartbeats: how a supervisor watches children placed in another actor system.

Thespian never tells a parent that a remote child died with its host, so the
supervisor pings its remote children every ``heartbeat`` seconds (one timer
per supervisor) and takes a child that left ``heartbeat_misses`` pings in a
row unanswered for dead: it then acts as if its ``ChildActorExited`` had
arrived, with the exit kind ``unreachable``.
"""

from __future__ import annotations

import dataclasses
import time
from datetime import timedelta
from typing import Any

from thespian.actors import ChildActorExited, WakeupMessage

from supervisors._actor import describe_exception
from supervisors._children import Child, Running
from supervisors._lifecycle import ChildOps
from supervisors._messages import ExitKind
from supervisors._os import admin_reachable
from supervisors._protocol import _HeartbeatTick, _KillSelf, _Ping, _Pong


class RemoteWatch(ChildOps):
    """The heartbeat part of the supervisor actor."""

    def _heartbeat(self, message: Any, sender: Any) -> bool:
        """Pongs and heartbeat ticks, handled in any state; True if it was one."""
        if isinstance(message, _Pong):
            child = self.children.by_address(sender)
            if child is not None:
                child.last_seen, child.unanswered = time.monotonic(), 0
            return True
        if not (isinstance(message, WakeupMessage)
                and isinstance(message.payload, _HeartbeatTick)):
            return False
        self._heartbeat_armed = False
        now = time.monotonic()
        silent = []
        for child in self.children:
            proc = child.proc
            if proc is None or not proc.remote:
                continue
            # Counted in pings, not in wall time: a supervisor whose own loop was
            # busy for a while sent no pings meanwhile and blames nobody.
            if child.unanswered >= self.flags.heartbeat_misses:
                silent.append(child)
            else:
                self.send(proc.address, _Ping())
                child.unanswered += 1
        for child in silent:
            self._unreachable(child, now - child.last_seen)
        self._arm_heartbeat()
        return True

    def _arm_heartbeat(self) -> None:
        if not self._heartbeat_armed and any(
                c.proc is not None and c.proc.remote for c in self.children):
            self._heartbeat_armed = True
            self.wakeupAfter(timedelta(seconds=self.flags.heartbeat), _HeartbeatTick())

    def _unreachable(self, child: Child, silent: float) -> None:
        """A remote child stopped answering: its host (or the child) is gone.

        The member is also dropped from the convention at once if its admin
        does not accept a connection either (it re-registers by itself if it
        is alive after all), so that the restart is not placed on a dead host."""
        proc = child.proc
        assert proc is not None
        reason = (f"unreachable: no answer to {child.unanswered} heartbeats "
                  f"({silent:.1f} s)")
        self.log.error("child_unreachable", supervisor_id=self.sup_id, child=child.spec.id,
                       child_pid=proc.pid, admin=proc.admin, silent_s=round(silent, 2))
        # If it is alive after all (a partition, a frozen host), it exits when
        # this arrives; otherwise its watchdog ends it.
        self.send(proc.address, _KillSelf())
        state = child.state
        if isinstance(state, Running) and state.cause is not ExitKind.NORMAL:
            child.state = dataclasses.replace(state, cause=ExitKind.UNREACHABLE, reason=reason)
        if proc.admin and not admin_reachable(proc.admin):
            self.log.error("member_unreachable", supervisor_id=self.sup_id, admin=proc.admin)
            try:
                self.deRegisterRemoteSystem(proc.admin)
            except Exception as exc:  # noqa: BLE001 - best effort
                self.log.warning("deregister_failed", admin=proc.admin,
                                 reason=describe_exception(exc))
        self._dispatch(ChildActorExited(proc.address), self.myAddress)

    def _dispatch(self, message: Any, sender: Any) -> None:
        raise NotImplementedError
