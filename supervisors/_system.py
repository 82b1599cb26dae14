"""A synchronous Python facade over a Thespian actor system and its supervisors.

:class:`System` starts (or attaches to) a ``multiprocTCPBase`` actor system
bound to loopback, starts top-level supervisors, and on :meth:`System.shutdown`
stops them in order and makes sure no process of the system is left.
:class:`SupervisorRef` (``_ref.py``) offers the control requests as blocking calls.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

import psutil
from thespian.actors import ActorSystem, InvalidActorAddress

from supervisors import _log
from supervisors._errors import StartFailed, SupervisorError
from supervisors._protocol import _Init, _Started, _StartFailed
from supervisors._ref import DEFAULT_TIMEOUT, SupervisorRef
from supervisors._sessions import (
    kill_all,
    listener_address,
    listener_pid,
    session_processes,
    wait_gone,
)
from supervisors._spec import ChildSpec, Start, SupervisorFlags, validate_children
from supervisors._thespian.bind_address import prepare_environment
from supervisors._thespian.child_exits import admin_starters
from supervisors._thespian.system_config import (
    ADMIN_ENV,
    CONVENTION_ADDRESS,
    SYSTEM_BASE,
    configure_convention,
    free_port,
    log_defs,
)

STARTED_SESSIONS: list[int] = []
"""Session ids of every system this process started (leak checks use it)."""


class System:
    """An actor system whose every process lives in one session.

    - ``admin_port``: the admin's TCP port (default: a free one). Always give
      each system its own port.
    - ``bind``: the address every socket binds to and advertises; loopback by
      default. Another address exposes pickled messages (code execution) to
      whoever can reach it: use it only inside a private network.
    - ``log_file``: JSON-lines log of every supervisor decision (all processes).
    - ``capabilities``: what this system offers to placement (``Start``
      requirements are matched against them), e.g. ``{"gpu": True}``.
    - ``convention_leader``: ``(host, admin_port)`` of another system to join as
      a member of its *convention*; children whose requirements only this
      system satisfies are then created here by supervisors of the leader.
      Every system of a convention must bind an address the others can reach.
    - ``convention_period`` / ``convention_misses``: a member re-registers with
      the leader every ``period`` seconds; after ``misses`` missed
      registrations the leader drops it. This is a slow backstop: supervisors
      notice a dead remote child by heartbeats (:class:`SupervisorFlags`).
    - ``gc_freeze``: True moves every object this process holds out of its
      garbage collector's reach (``gc.freeze()``) just before the actor
      processes are forked from it. Each full collection here would otherwise
      write into the header of every object, copying this process's share of
      the pages its actor processes share (tens of MB with a large framework
      loaded). The price: what is garbage at that moment, and any reference
      cycle among those objects that becomes garbage later, is never freed,
      with whatever it holds (a database connection, a socket). For a process
      that starts its system once, early; the default (False) leaves the
      collector alone.

    Use as a context manager; :meth:`shutdown` leaves no process behind.
    """

    def __init__(
        self,
        *,
        admin_port: int | None = None,
        bind: str = "127.0.0.1",
        log_file: str | os.PathLike[str] | None = None,
        capabilities: dict[str, Any] | None = None,
        convention_leader: tuple[str, int] | None = None,
        convention_period: float = 5.0,
        convention_misses: int = 3,
        gc_freeze: bool = False,
    ) -> None:
        _check_convention(convention_leader, convention_period, convention_misses)
        if not isinstance(gc_freeze, bool):
            raise SupervisorError(f"gc_freeze must be True or False, got {gc_freeze!r}",
                                  code="invalid_option", field="gc_freeze")
        prepare_environment(bind)
        configure_convention(convention_period, convention_misses)
        # The actor processes inherit the environment: set or clear the log file
        # so a system never writes into the log of an earlier one.
        if log_file is not None:
            os.environ[_log.LOG_FILE_ENV] = os.fspath(log_file)
        else:
            os.environ.pop(_log.LOG_FILE_ENV, None)
        _log.configure_from_env(force=True)
        if admin_port is not None and port_in_use(admin_port, bind):
            # Thespian would attach to whatever admin listens there: a failed start
            # would then stop a system that is not ours.
            raise SupervisorError(_port_taken(admin_port), code="invalid_option",
                                  field="admin_port")
        self.admin_port = admin_port or free_port(bind if bind != "0.0.0.0" else "127.0.0.1")
        caps = {"Admin Port": self.admin_port, **(capabilities or {})}
        if convention_leader is not None:
            caps[CONVENTION_ADDRESS] = (convention_leader[0], int(convention_leader[1]))
        self.convention_leader = convention_leader
        # Every actor of this system learns its admin's address by inheritance.
        # (Unknown for a wildcard bind: then a dead member is not deregistered early.)
        os.environ[ADMIN_ENV] = "" if bind in ("", "0.0.0.0") else f"{bind}:{self.admin_port}"
        begun = process_clock()
        if gc_freeze:
            gc.freeze()
        with admin_starters() as starters:
            try:
                self._asys = ActorSystem(
                    SYSTEM_BASE, caps, logDefs=log_defs(), transientUnique=True
                )
            except Exception:
                _kill_admins(starters)
                raise
        self._init_endpoints()
        self._owner = True
        self._top: list[SupervisorRef] = []
        self._tokens = 0
        pid = listener_pid(self.admin_port)
        if pid is None:
            with contextlib.suppress(Exception):
                self._asys.shutdown()
            raise SupervisorError(f"no admin listens on port {self.admin_port}",
                                  code="no_admin")
        if _started_before(pid, begun):
            # Another system took the port between the check and the start: this
            # handle attached to it. Leave it running (no shutdown).
            self._owner = False
            raise SupervisorError(_port_taken(self.admin_port), code="invalid_option",
                                  field="admin_port")
        self.admin_pid: int = pid
        self.session_id: int = os.getsid(pid)
        STARTED_SESSIONS.append(self.session_id)
        self.log = _log.get_logger(admin_port=self.admin_port, admin_pid=pid)
        self.log.info("system_started", session_id=self.session_id)

    # -- context manager -------------------------------------------------------

    def __enter__(self) -> System:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- messaging -------------------------------------------------------------

    def ask(self, address: Any, message: Any, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """Send ``message`` and wait for the answer (None on timeout)."""
        return self.endpoint().ask(address, message, timeout)

    def tell(self, address: Any, message: Any) -> None:
        self.endpoint().tell(address, message)

    def listen(self, timeout: float) -> Any:
        return self.endpoint().listen(timeout)

    # -- per-thread endpoints ------------------------------------------------------

    def _init_endpoints(self) -> None:
        self._owner_thread = threading.get_ident()
        self._local = threading.local()
        self._clones: dict[int, Any] = {}
        """The private endpoints of live threads, by their holder's id."""
        self._ended: list[Any] = []
        """Endpoints of threads that have ended, to close (on the next new one)."""
        self._clones_lock = threading.Lock()

    def endpoint(self) -> Any:
        """This thread's own Thespian endpoint.

        A Thespian handle shared by threads hands replies to the wrong thread,
        so the thread that created the system uses the main handle and every
        other thread gets a private one (created on first use)."""
        if threading.get_ident() == self._owner_thread:
            return self._asys
        held: _Held | None = getattr(self._local, "held", None)
        if held is None:
            held = _Held(self.new_endpoint())
            self._local.held = held
            # A thread's locals go when it ends: its endpoint then moves to
            # the ended ones (no scan of every thread per new one).
            # (by a weak reference: a thread that outlives this system must
            # not keep it alive)
            weakref.finalize(held, _thread_ended, weakref.ref(self), id(held)).atexit = False
            with self._clones_lock:
                self._clones[id(held)] = held.endpoint
                # Close the endpoints of threads that have ended (one socket each).
                dead, self._ended = self._ended, []
            for old in dead:
                with contextlib.suppress(Exception):
                    old.exit_clone()
        return held.endpoint

    def _thread_ended(self, key: int) -> None:
        with self._clones_lock:
            endpoint = self._clones.pop(key, None)
            if endpoint is not None:
                self._ended.append(endpoint)

    def drop_endpoint(self) -> None:
        """Close this thread's private endpoint (the owner thread's is kept); the
        thread's next call makes a new one. For a thread that stops listening
        while a reply may still come (a wait that timed out): an unread reply
        is never acknowledged, and Thespian holds an actor's unacknowledged
        message for minutes; an actor with 20 of them (its
        ``MAX_PENDING_TRANSMITS``) sends nothing else. To a closed endpoint
        the send fails at once."""
        if threading.get_ident() == self._owner_thread:
            return
        held: _Held | None = getattr(self._local, "held", None)
        if held is None:
            return
        self._local.held = None
        with self._clones_lock:
            self._clones.pop(id(held), None)
        with contextlib.suppress(Exception):
            held.endpoint.exit_clone()

    def new_endpoint(self) -> Any:
        """A private Thespian endpoint (``tell``/``ask``/``listen``): its replies
        never mix with another endpoint's. Close it with ``exit_clone()``."""
        from thespian.actors import ExternalContext

        return ExternalContext(self._asys._systemBase.external_clone())

    def _close_endpoints(self) -> None:
        with self._clones_lock:
            clones = [*self._clones.values(), *self._ended]
            self._clones, self._ended = {}, []
        for endpoint in clones:
            with contextlib.suppress(Exception):
                endpoint.exit_clone()

    @property
    def thespian(self) -> ActorSystem:
        """The underlying Thespian handle (for advanced use)."""
        return self._asys

    # -- supervisors -----------------------------------------------------------

    def start_supervisor(
        self,
        supervisor_id: str,
        flags: SupervisorFlags,
        children: Sequence[ChildSpec],
        *,
        actor: type | str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        global_name: str | None = None,
        extra_args: tuple[Any, ...] = (),
    ) -> SupervisorRef:
        """Start a top-level supervisor and its children (in order).

        Raises :class:`StartFailed` naming the child that could not start;
        children already started have then been stopped in reverse order.
        """
        from supervisors._supervisor import Supervisor

        validate_children(flags, children)
        start = Start(actor or Supervisor, (flags, list(children), *extra_args))
        address, pid = self.start_actor(supervisor_id, start, timeout=timeout,
                                        global_name=global_name)
        ref = SupervisorRef(self, address, supervisor_id, pid)
        self._top.append(ref)
        return ref

    def start_actor(
        self, actor_id: str, start: Start, *, timeout: float = DEFAULT_TIMEOUT,
        global_name: str | None = None,
    ) -> tuple[Any, int]:
        """Start an unsupervised top-level SupervisedActor; returns (address, pid).

        With ``global_name`` the actor can be found again by name from another
        process attached to the same system (:meth:`lookup`)."""
        with self._clones_lock:
            self._tokens += 1
            token = self._tokens
        endpoint = self.endpoint()
        address = endpoint.createActor(start.actor_path, globalName=global_name)
        init = _Init(actor_id, None, token, start.args, dict(start.kwargs), supervised=False)
        deadline = time.monotonic() + timeout
        reply = endpoint.ask(address, init, timeout)
        # Skip a late answer to an earlier call of this thread that timed out
        # (seen under load: an agent's ResultReply taken for the start's answer).
        while reply is not None and not (isinstance(reply, (_Started, _StartFailed))
                                         and reply.token == token):
            remaining = deadline - time.monotonic()
            reply = endpoint.listen(remaining) if remaining > 0 else None
        if isinstance(reply, _Started):
            return address, reply.pid
        reason = reply.reason if isinstance(reply, _StartFailed) else f"no answer ({reply!r})"
        raise StartFailed(f"{actor_id!r} failed to start: {reason}", child_id=actor_id,
                          reason=reason)

    def lookup(self, actor: type | str, global_name: str) -> Any:
        """The address of the actor registered under ``global_name``.

        Thespian creates the actor if no such name exists; it then receives no
        start arguments, so callers must check it answers as expected."""
        path = actor if isinstance(actor, str) else Start(actor).actor_path
        return self.endpoint().createActor(path, globalName=global_name)

    @classmethod
    def connect(cls, admin_port: int) -> System:
        """Attach to a running system (started by another process) on ``admin_port``.

        :meth:`shutdown` on an attached handle only detaches; it stops nothing."""
        pid = listener_pid(admin_port)
        if pid is None:
            raise SupervisorError(f"no actor system listens on port {admin_port}",
                                  code="no_admin", admin_port=admin_port)
        self = cls.__new__(cls)
        # Talk to the admin on the address it listens on: with any other address
        # Thespian would find no admin there and start a second one.
        prepare_environment(listener_address(admin_port)
                            or os.environ.get("SUPERVISORS_BIND", "127.0.0.1"))
        self.admin_port = admin_port
        try:
            self._asys = ActorSystem(SYSTEM_BASE, {"Admin Port": admin_port},
                                     logDefs=log_defs(), transientUnique=True)
        except InvalidActorAddress as exc:  # something else listens there
            raise SupervisorError(f"what listens on port {admin_port} is not an actor "
                                  "system admin", code="no_admin",
                                  admin_port=admin_port) from exc
        self._init_endpoints()
        self._owner = False
        self._top = []
        self._tokens = 0
        self.admin_pid = pid
        self.session_id = os.getsid(pid)
        self.log = _log.get_logger(admin_port=admin_port, admin_pid=pid)
        return self

    # -- processes -------------------------------------------------------------

    def processes(self) -> list[psutil.Process]:
        """Every live process of this system (admin, logger, actors)."""
        return session_processes(self.session_id)

    def shutdown(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Stop the supervisors (in reverse start order), the actor system, and
        then SIGKILL anything of the system still alive. Idempotent."""
        if not self._owner:
            return
        self._owner = False
        for ref in reversed(self._top):
            try:
                ref.shutdown(timeout=timeout)
            except SupervisorError as exc:
                self.log.warning("supervisor_shutdown_failed", supervisor_id=ref.id,
                                 reason=str(exc))
        self._close_endpoints()
        self._asys.shutdown()
        leftover = wait_gone(self.processes(), timeout=5.0)
        if leftover:
            self.log.warning("killing_leftover_processes", pids=[p.pid for p in leftover])
            kill_all(leftover)
            wait_gone(leftover, timeout=5.0)
        self.log.info("system_stopped")

    def stop(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Stop the whole system, even from a handle attached with :meth:`connect`."""
        self._owner = True
        self.shutdown(timeout)

    def adopt(self, ref: SupervisorRef) -> None:
        """Have :meth:`shutdown`/:meth:`stop` stop ``ref`` (e.g. found with :meth:`lookup`)."""
        if all(r.address != ref.address for r in self._top):
            self._top.append(ref)

    def kill(self) -> list[int]:
        """SIGKILL every process of the system at once (a "VM crash")."""
        procs = self.processes()
        self._owner = False
        kill_all(procs)
        wait_gone(procs, timeout=5.0)
        return [p.pid for p in procs]


def port_in_use(port: int, bind: str = "127.0.0.1") -> bool:
    """Whether something listens on ``port`` where an admin bound to ``bind``
    would listen (a port only in TIME_WAIT is free: ``SO_REUSEADDR``)."""
    host = "0.0.0.0" if bind in ("", "0.0.0.0") else bind
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def _port_taken(port: int) -> str:
    return (f"admin port {port} is in use (by a running actor system? attach to it "
            f"with connect({port})); choose another port, or omit it for a free one")


def process_clock() -> float:
    """Now, on the clock of ``psutil.Process.create_time()``.

    On Linux that clock is the boot time (``btime``, whole seconds) plus the
    start in clock ticks, so it can be up to a second or more off
    ``time.time()``, and compared with it a process started just now can look
    older than a moment taken before its start. Now on the same clock is the
    boot time plus the time since boot (``/proc/uptime``); elsewhere
    ``time.time()``."""
    try:
        with open("/proc/uptime", encoding="ascii") as uptime:
            return psutil.boot_time() + float(uptime.read().split()[0])
    except (OSError, ValueError, IndexError):
        return time.time()


def _kill_admins(starters: list[int]) -> None:
    """After a start that failed: kill each admin's starter (so it forks no
    admin now) and every process of the session it leads. Thespian gives a new
    admin a fixed time to say it is up; one that came up later would run on
    with nobody holding it."""
    for pid in starters:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        procs = session_processes(pid)
        kill_all(procs)
        wait_gone(procs, timeout=5.0)


def _started_before(pid: int, moment: float) -> bool:
    """The process ``pid`` was running before ``moment`` (a :func:`process_clock`)."""
    try:
        return psutil.Process(pid).create_time() < moment - 0.5
    except psutil.Error:
        return False


def _check_convention(leader: Any, period: Any, misses: Any) -> None:
    if leader is not None and not (
            isinstance(leader, tuple) and len(leader) == 2 and isinstance(leader[0], str)
            and isinstance(leader[1], int) and not isinstance(leader[1], bool)
            and 0 < leader[1] < 65536):
        raise SupervisorError(
            f"convention_leader must be (host, admin_port), e.g. ('10.0.0.1', 1900); "
            f"got {leader!r}", code="invalid_option", field="convention_leader")
    if isinstance(period, bool) or not isinstance(period, (int, float)) or not period >= 0.1:
        raise SupervisorError(f"convention_period must be seconds >= 0.1, got {period!r}",
                              code="invalid_option", field="convention_period")
    if isinstance(misses, bool) or not isinstance(misses, int) or misses < 1:
        raise SupervisorError(f"convention_misses must be an int >= 1, got {misses!r}",
                              code="invalid_option", field="convention_misses")


def _thread_ended(system: weakref.ref[System], key: int) -> None:
    """A thread holding an endpoint of ``system`` has ended (if it is still there)."""
    alive = system()
    if alive is not None:
        alive._thread_ended(key)


class _Held:
    """A thread's private endpoint, in the thread's locals: collected when the
    thread ends, which tells :class:`System` to close the endpoint."""

    __slots__ = ("__weakref__", "endpoint")

    def __init__(self, endpoint: Any) -> None:
        self.endpoint = endpoint


__all__ = ["DEFAULT_TIMEOUT", "STARTED_SESSIONS", "SupervisorRef", "System", "kill_all",
           "session_processes", "wait_gone"]
