"""``SupervisedActor``: the base class of every actor a supervisor starts.

It turns Thespian's actor into an OTP-style child:

- **let it crash**: an exception from a handler never reaches Thespian (which
  would run the handler a second time and then answer ``PoisonMessage``).
  Instead the actor stops processing, tells its supervisor why, and the
  supervisor kills and (depending on the restart type) restarts it;
- **linked to its parent**: the kernel kills it when its parent process dies
  (``PR_SET_PDEATHSIG``), so no subtree outlives a killed supervisor;
- **placeable**: a child whose spec has ``requirements`` runs only in an actor
  system whose capabilities match them (possibly another system of the
  convention: a *remote* child). A remote child is linked to its supervisor
  by heartbeats instead: it answers the supervisor's pings, exits when told
  (a pid kill cannot reach it), and exits by itself when no ping has been
  answered for a while (its supervisor is gone, or its own loop is stuck:
  either way nobody could stop it otherwise);
- **hooks** named for when they run: :meth:`on_start` (with the spec's
  arguments, before any other message), :meth:`on_receive` (every other
  message), :meth:`on_stop` (when stopped on request).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from thespian.actors import Actor, ActorExitRequest, ThespianWatch

from supervisors import _log
from supervisors._os import die_with_parent, host_id
from supervisors._protocol import (
    GetPid,
    StopNormally,
    _ChildExiting,
    _ChildFailed,
    _Init,
    _KillSelf,
    _Ping,
    _Pong,
    _Shutdown,
    _Started,
    _StartFailed,
)
from supervisors._thespian.system_config import own_admin

KILLED_EXIT = 70
"""Exit status of a remote child that was told to die or lost its supervisor."""


def describe_exception(exc: BaseException) -> str:
    """The exit reason of a crash: exception type and message."""
    return f"{type(exc).__name__}: {exc}"


class SupervisedActor(Actor):  # type: ignore[misc]
    """Subclass this and implement the hooks; never override ``receiveMessage``.

    Attributes available in hooks: ``child_id`` (the spec id), ``supervisor``
    (the supervisor's address, or None for a top-level actor) and ``log``
    (a structlog logger bound with the child id and pid).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        die_with_parent()
        self.child_id: str | None = None
        self.supervisor: Any = None
        self._sa_supervised = False
        self._sa_started = False
        self._sa_failed = False
        self._sa_exiting = False
        self._sa_remote = False
        self._sa_last_ping = 0.0
        self._sa_orphan_after = 0.0
        self.log: Any = _log.get_logger(pid=os.getpid())

    @staticmethod
    def actorSystemCapabilityCheck(
        capabilities: Mapping[str, Any], requirements: Mapping[str, Any] | None
    ) -> bool:
        """Thespian's placement check: every requirement equals the capability.

        No requirements: any system (the local one first). Thespian calls this
        in each system of the convention to choose where the actor is created.
        """
        return all(capabilities.get(k) == v for k, v in (requirements or {}).items())

    # -- hooks ---------------------------------------------------------------

    def on_start(self, *args: Any, **kwargs: Any) -> None:
        """Called once, with the spec's start arguments, before any other message.
        Raising here fails the start: the supervisor reports the reason."""

    def on_receive(self, message: Any, sender: Any) -> None:
        """Called for every message that is not part of the supervision protocol.
        Raising here crashes the actor (it is *not* retried)."""

    def on_stop(self) -> None:
        """Called when the actor is stopped on request (by its supervisor,
        ``StopNormally`` or ``ActorExitRequest``); not after a crash or kill."""

    # -- control from inside --------------------------------------------------

    def stop_normally(self) -> None:
        """End this actor with a normal exit (a transient child is not restarted)."""
        if self._sa_supervised and self.supervisor is not None:
            self.send(self.supervisor, _ChildExiting(self.child_id or "", os.getpid()))
        else:
            self._sa_exit_now()

    def send_now(self, target: Any, message: Any, seconds: float) -> bool:
        """Send ``message`` to ``target`` and, from inside a handler, have it go out
        now: Thespian sends a target one message at a time, the next only once
        the target has acknowledged the one before, which only the actor's loop
        reads, after the handler. Here the ACKs are read in place (waiting up to
        ``seconds`` for them); what arrives meanwhile stays queued, in order.
        False if it was still unwritten after ``seconds`` (it goes later, in
        order), or if this cannot be done here (not the main thread, another
        transport, the ``push_transmits`` patch skipped): then it is only sent."""
        transport: Any = getattr(getattr(self, "_myRef", None), "transport", None)
        push = getattr(transport, "push_transmits", None)
        if push is None:
            self.send(target, message)
            return False
        transport.take_acks(target)
        self.send(target, message)
        return bool(push(target, seconds))

    def crash(self, reason: str) -> None:
        """End this actor with an abnormal exit and ``reason`` (as if a handler raised)."""
        self._sa_fail(reason)

    # -- Thespian entry point -------------------------------------------------

    watch_fds: tuple[int, ...] = ()
    """File descriptors Thespian watches besides the mailbox (``multiprocTCPBase``):
    when one is readable, :meth:`on_receive` gets a ``WatchMessage`` naming it."""

    def receiveMessage(self, message: Any, sender: Any) -> ThespianWatch | None:
        if not self._sa_link(message, sender):
            try:
                self._sa_dispatch(message, sender)
            except BaseException as exc:  # noqa: BLE001
                self._sa_fail(describe_exception(exc))
        # Thespian keeps watching only what the last handler returned.
        return ThespianWatch(list(self.watch_fds)) if self.watch_fds else None

    def _sa_link(self, message: Any, sender: Any) -> bool:
        """The remote link (heartbeat, kill, watchdog), handled whatever the
        actor's state; True if ``message`` was one of these."""
        if isinstance(message, _Ping):
            self._sa_last_ping = time.monotonic()
            self.send(sender, _Pong())
            return True
        if isinstance(message, _KillSelf):
            self.log.warning("killed_by_supervisor", remote=self._sa_remote)
            os._exit(KILLED_EXIT)
        return False

    def _sa_watchdog(self) -> None:
        """Thread of a remote child: exit once no ping was answered for
        ``_sa_orphan_after`` seconds. A thread, not a timer, so that it also
        fires when the actor's own loop is stuck in a handler."""
        while True:
            silent = time.monotonic() - self._sa_last_ping
            if silent > self._sa_orphan_after:
                self.log.error("supervisor_unreachable", silent_s=round(silent, 2))
                os._exit(KILLED_EXIT)
            time.sleep(self._sa_orphan_after / 4)

    def _sa_dispatch(self, message: Any, sender: Any) -> None:
        if isinstance(message, ActorExitRequest):
            self._sa_on_exit_request()
            return
        if self._sa_failed or self._sa_exiting:
            return
        if isinstance(message, _Init):
            self._sa_on_init(message, sender)
        elif isinstance(message, _Shutdown):
            self._sa_on_shutdown_request(sender)
        elif isinstance(message, StopNormally):
            self.stop_normally()
        elif isinstance(message, GetPid):
            self.send(sender, os.getpid())
        else:
            self.on_receive(message, sender)

    def _sa_on_init(self, init: _Init, sender: Any) -> None:
        self.child_id = init.child_id
        self._sa_supervised = init.supervised
        self.supervisor = sender if init.supervised else None
        self.log = self.log.bind(child_id=init.child_id, supervisor_id=init.supervisor_id)
        self._sa_remote = init.supervised and init.parent_pid > 0 and (
            init.host != host_id() or os.getppid() != init.parent_pid)
        if self._sa_remote and init.heartbeat > 0:
            # Generous: the supervisor may be busy for a while between pings.
            self._sa_orphan_after = 2 * init.heartbeat * init.heartbeat_misses + 2.0
        self._sa_begin(init, sender)

    def _sa_started_reply(self, init: _Init) -> _Started:
        """The answer to a successful start; a remote child's watchdog starts now
        (the supervisor pings only children that have started)."""
        if self._sa_orphan_after > 0:
            self._sa_last_ping = time.monotonic()
            threading.Thread(target=self._sa_watchdog, name="supervisors-watchdog",
                             daemon=True).start()
        return _Started(init.child_id, init.token, os.getpid(), self._sa_remote,
                        own_admin())

    def _sa_begin(self, init: _Init, sender: Any) -> None:
        """Run ``on_start`` and answer the supervisor (overridden by Supervisor,
        which answers only once its own children have started)."""
        try:
            self.on_start(*init.args, **init.kwargs)
        except BaseException as exc:  # noqa: BLE001
            self._sa_failed = True
            reason = describe_exception(exc)
            self.log.warning("start_failed", reason=reason)
            self.send(sender, _StartFailed(init.child_id, init.token, os.getpid(), reason,
                                           self._sa_remote))
            if not init.supervised:
                self._sa_exit_now()
            return
        self._sa_started = True
        self.send(sender, self._sa_started_reply(init))

    def _sa_on_shutdown_request(self, sender: Any) -> None:
        self._sa_exiting = True
        self._sa_run_on_stop()
        self._sa_exit_now()

    def _sa_on_exit_request(self) -> None:
        # Thespian exits the actor after this returns, whatever we do. Tell the
        # supervisor first that this is a requested (normal) exit.
        if self._sa_exiting or self._sa_failed:
            return
        self._sa_exiting = True
        self._sa_run_on_stop()
        if self._sa_supervised and self.supervisor is not None:
            self.send(self.supervisor, _ChildExiting(self.child_id or "", os.getpid()))

    def _sa_run_on_stop(self) -> None:
        if not self._sa_started:
            return
        try:
            self.on_stop()
        except BaseException as exc:  # noqa: BLE001
            self.log.warning("on_stop_failed", reason=describe_exception(exc))

    def _sa_fail(self, reason: str) -> None:
        if self._sa_failed:
            return
        self._sa_failed = True
        self.log.warning("actor_crashed", reason=reason)
        if self._sa_supervised and self.supervisor is not None:
            self.send(self.supervisor, _ChildFailed(self.child_id or "", os.getpid(), reason))
        else:
            self._sa_exit_now()

    def _sa_exit_now(self) -> None:
        self._sa_exiting = True
        self.send(self.myAddress, ActorExitRequest())
