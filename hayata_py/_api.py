""":class:`AgentSystem`, the blocking handle on a running hayata_py system.

Calls are blocking. It and :class:`~hayata_py._ref.AgentRef` are safe to use
from several threads: each thread asks the actors through its own Thespian
endpoint (a shared one hands replies to the wrong thread), and ``hy.CALLER``
runs of every thread stream to the system's one receiver
(:mod:`hayata_py._receiver`), which takes their messages off the wire as
they come, so none waits in an agent process that may die.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thespian.actors import ActorAddress

from hayata_py import _telemetry as telemetry
from hayata_py._actor_messages import Describe, Description, GetSystemInfo, SystemInfo
from hayata_py._actors.owner_watch import owner_identity
from hayata_py._actors.supervision_tree import (
    AGENT_PREFIX,
    NODE_PREFIX,
    TOP_FLAGS,
    AgentSupervisor,
    TopSupervisor,
    with_liveness,
)
from hayata_py._api_checks import check_options
from hayata_py._config import AgentConfig, Liveness, validate_config
from hayata_py._errors import AgentAlreadyStarted, AgentNotFound, ConfigError, HayataError
from hayata_py._inbox import Inbox
from hayata_py._receiver import Receiver
from hayata_py._ref import ASK_TIMEOUT, AgentRef
from hayata_py._ref_checks import alive
from hayata_py._ref_wait import REMOTE_ASK_TIMEOUT
from hayata_py._retention import parse_age
from hayata_py._storage import refuse_read_only
from hayata_py.messages import CALLER
from hayata_py.store import PruneReport, TaskStore
from supervisors import ChildSpec, Kind, Start, SupervisorError, SupervisorRef, System

if TYPE_CHECKING:
    from hayata_py._observer._server import Observer

TOP_NAME = "hayata"


class AgentSystem:
    """A running hayata_py system: a Thespian actor system and its top supervisor.

    ``data_dir`` holds the logs (and the default store). ``admin_port``:
    the Thespian admin port (default: a free one). ``base`` must be
    ``"multiprocTCPBase"``, the only Thespian base whose parents hear of
    killed children. Use as a context manager; :meth:`shutdown` leaves no
    process behind.

    Several systems (usually one per host) form a Thespian *convention* with
    one shared store (PostgreSQL) to run agents and nodes where the
    capabilities they need are (see ``docs/deployment.md``):

    - ``name``: the system's stable name, owner of its invocations' leases
      (default ``"<hostname>:<data_dir>"``). A system restarted with the same
      name recovers its invocations at once; another system must wait until
      their leases expire. Give every system of a cluster its own name.
    - ``capabilities``: what this system offers to placement, e.g.
      ``{"gpu": True}`` (see ``AgentConfig.placement`` / ``node_placement``).
    - ``convention_leader``: ``(host, admin_port)`` of the leader to join.
      The leader is a system started with a fixed ``admin_port``.
    - ``bind``: the address every actor socket binds to and advertises;
      loopback by default. Thespian messages are pickles: whoever can reach
      these ports can run code here, so bind only inside a private network.
    - ``liveness``: heartbeat and convention timings (:class:`Liveness`).
    - ``exit_with_owner``: the actor processes end (SIGKILL, within a fraction
      of a second) once the process that created this system exits, even by
      kill -9; by default they run on until :meth:`shutdown` or :meth:`kill`.
    - ``gc_freeze``: True moves this process's objects out of its garbage
      collector's reach (``gc.freeze()``) just before the actor processes are
      forked from it, so its full collections do not copy the pages they share
      (about 30 MB with LangGraph loaded and 1,000 runs in flight). What is
      garbage at that moment, and any cycle among those objects that becomes
      garbage later, is then never freed, with whatever it holds: for a
      process that starts its system once, early. Default False.

    A ``data_dir`` or SQLite store that cannot be written (a read-only
    filesystem) is refused at once with :class:`ReadOnlyStorage`
    (``read_only_storage``, naming the path), before the store is opened or any
    process starts; once writable again, a new system recovers the runs.
    """

    _closed: bool
    _inbox: Inbox
    _receiver: Receiver | None

    def __init__(
        self,
        data_dir: str | os.PathLike[str] = "hayata-data",
        *,
        store_url: str | None = None,
        base: str = "multiprocTCPBase",
        admin_port: int | None = None,
        telemetry_handlers: Mapping[str, tuple[str, Iterable[tuple[str, ...]]]] | None = None,
        log_telemetry: bool = True,
        name: str | None = None,
        capabilities: Mapping[str, Any] | None = None,
        convention_leader: tuple[str, int] | None = None,
        bind: str = "127.0.0.1",
        liveness: Liveness | None = None,
        exit_with_owner: bool = False,
        gc_freeze: bool = False,
    ) -> None:
        for field, flag in (("exit_with_owner", exit_with_owner), ("gc_freeze", gc_freeze)):
            if not isinstance(flag, bool):
                raise ConfigError(field, f"must be True or False, got {flag!r}")
        liveness = check_options(base=base, admin_port=admin_port, name=name,
                                 capabilities=capabilities, bind=bind, liveness=liveness,
                                 data_dir=data_dir, store_url=store_url)
        handlers = dict(telemetry_handlers or {})
        if log_telemetry:
            handlers.setdefault("hayata.log", (
                "hayata_py._telemetry:log_event", sorted(telemetry.EVENTS)))
        # Handlers run in the actor processes: they travel by environment,
        # inherited by every process the admin forks.
        os.environ[telemetry.ENV_VAR] = telemetry.env_value(handlers)
        from hayata_py.store import default_store_url, open_store

        self.data_dir = Path(data_dir).resolve()
        # Nothing could be recorded on a read-only disk: refused before any process.
        refuse_read_only(self.data_dir, store_url or f"sqlite:///{self.data_dir / 'hayata.db'}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.store_url = store_url or default_store_url(self.data_dir)
        # Opening applies migrations and refuses a newer schema, before any actor starts.
        self.store: TaskStore = open_store(self.store_url)
        self.instance = uuid.uuid4().hex
        self.name = name or f"{socket.gethostname()}:{self.data_dir}"
        self.liveness = liveness
        try:
            self._system = System(admin_port=admin_port,
                                  log_file=self.data_dir / "hayata.log.jsonl",
                                  bind=bind, capabilities=dict(capabilities or {}),
                                  convention_leader=convention_leader,
                                  convention_period=liveness.convention_period,
                                  convention_misses=liveness.convention_misses,
                                  gc_freeze=gc_freeze)
        except SupervisorError as exc:
            self.store.close()
            if exc.code == "invalid_option":
                raise ConfigError(str(exc.details.get("field", "option")), str(exc)) from exc
            raise
        except BaseException:
            self.store.close()
            raise
        try:
            info = SystemInfo(self.store_url, self.instance, str(self.data_dir), self.name,
                              liveness, owner_identity() if exit_with_owner else None)
            self._top = self._system.start_supervisor(
                TOP_NAME, with_liveness(TOP_FLAGS, liveness), [], actor=TopSupervisor,
                global_name=TOP_NAME, extra_args=(info,))
        except BaseException:
            self._system.shutdown()
            self.store.close()
            raise
        self._init_inbox()

    @classmethod
    def connect(cls, admin_port: int, *, store_url: str | None = None) -> AgentSystem:
        """Attach to a system started by another process; :meth:`shutdown` only detaches."""
        self = cls.__new__(cls)
        try:
            self._system = System.connect(admin_port)
        except SupervisorError as exc:
            raise HayataError(str(exc), code="no_system", admin_port=admin_port) from exc
        address = self._system.lookup(TopSupervisor, TOP_NAME)
        self._top = SupervisorRef(self._system, address, TOP_NAME, 0)
        self._system.adopt(self._top)
        info = self._system.ask(address, GetSystemInfo(), 10.0)
        if not isinstance(info, SystemInfo):
            self._system._close_endpoints()
            raise HayataError(f"the system on port {admin_port} is not a hayata_py system "
                              f"(no answer to GetSystemInfo)", code="no_system",
                              admin_port=admin_port)
        self.data_dir = Path(info.data_dir)
        self.instance = info.instance
        self.name = info.name or f"{socket.gethostname()}:{self.data_dir}"
        self.liveness = info.liveness if isinstance(info.liveness, Liveness) else Liveness()
        self.store_url = store_url or info.store_url
        from hayata_py.store import open_store

        self.store = open_store(self.store_url)
        self._init_inbox()
        return self

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> AgentSystem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def prune(self, older_than: float | str, *, agent_id: str | None = None) -> PruneReport:
        """Delete the finished (completed or failed) invocations last updated more
        than ``older_than`` ago (seconds, or ``"7d"``, ``"12h"``, ``"30m"``,
        ``"90s"``, ``"2w"``) with their task records and events (of ``agent_id``
        only, if given); never a running or paused one. Returns what was deleted
        (``ConfigError("older_than")`` for an age it cannot read: nothing deleted)."""
        seconds = parse_age(older_than, "older_than")
        if agent_id is not None and (not isinstance(agent_id, str) or not agent_id):
            raise ConfigError("agent_id", f"must be an agent id (a non-empty str), got "
                              f"{agent_id!r}")
        return self.store.prune(seconds, agent_id=agent_id)

    def shutdown(self) -> None:
        """Stop every agent and process this system started (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._close_receiver()
        self._system.shutdown()
        if self.store is not None:
            self.store.close()

    def stop(self) -> None:
        """Stop the whole system, also from a handle attached with :meth:`connect`."""
        self._closed = True
        self._close_receiver()
        self._system.stop()

    def kill(self) -> list[int]:
        """SIGKILL every process of the system at once (the drills' "VM crash");
        returns the pids killed."""
        self._closed = True
        self._close_receiver()
        return self._system.kill()

    @property
    def admin_port(self) -> int:
        return self._system.admin_port

    @property
    def admin_pid(self) -> int:
        return self._system.admin_pid

    @property
    def session_id(self) -> int:
        """The OS session of every process of the system (``os.killpg``-able group)."""
        return self._system.session_id

    def processes(self) -> list[Any]:
        """Every live OS process of the system (psutil.Process objects)."""
        return self._system.processes()

    # -- agents --------------------------------------------------------------------

    def start_agent(self, config: AgentConfig) -> AgentRef:
        """Validate ``config`` and start the agent with its nodes.

        Raises :class:`ConfigError` naming the bad field, or
        :class:`AgentAlreadyStarted`.
        """
        spec = dataclasses.replace(validate_config(config), store_url=self.store_url,
                                   instance=self.instance, owner=self.name,
                                   liveness=self.liveness)
        child = ChildSpec(AGENT_PREFIX + spec.id,
                          Start(AgentSupervisor, (spec,), requirements=spec.placement),
                          kind=Kind.SUPERVISOR)
        try:
            self._top.start_child(child)
        except SupervisorError as exc:
            if exc.code in ("running", "already_present"):
                raise AgentAlreadyStarted(f"agent {spec.id!r} is already started",
                                          agent_id=spec.id) from exc
            raise HayataError(f"agent {spec.id!r} failed to start: {exc}",
                              code="agent_start_failed", agent_id=spec.id) from exc
        return AgentRef(self, spec.id)

    def stop_agent(self, agent_id: str) -> None:
        """Stop the agent (running edges are killed) and forget it."""
        child_id = AGENT_PREFIX + agent_id
        try:
            self._top.terminate_child(child_id)
            self._top.delete_child(child_id)
        except SupervisorError as exc:
            if exc.code == "not_found":
                raise AgentNotFound(f"no agent {agent_id!r}", agent_id=agent_id) from exc
            raise

    def agents(self) -> list[str]:
        """Ids of the started agents, in start order."""
        return [c.id[len(AGENT_PREFIX):] for c in self._top.which_children()
                if c.id.startswith(AGENT_PREFIX)]

    def agent(self, agent_id: str) -> AgentRef:
        if agent_id not in self.agents():
            raise AgentNotFound(f"no agent {agent_id!r} (started: {self.agents()})",
                                agent_id=agent_id)
        return AgentRef(self, agent_id)

    def observe(self, *, port: int = 8765, bind: str = "127.0.0.1") -> Observer:
        """Serve the live observer page of this system (what ``hayata observe``
        serves) from a thread; the returned ``Observer`` has the ``url`` with
        its per-start token, and ``close()``. Raises ``ConfigError`` naming
        ``port`` (invalid or in use) or ``bind``. ``port=0`` picks a free port."""
        from hayata_py._observer._server import serve

        return serve(self, port=port, bind=bind)

    def tree(self, *, describe_timeout: float = ASK_TIMEOUT) -> dict[str, Any]:
        """The live actor tree: role, id, pid, restarts, status, remote (runs on another
        system of the convention), children (nested dicts). A subtree on another
        system that does not answer within 2 s is marked ``unreachable``.

        ``describe_timeout``: the longest a node is waited for to name its edges;
        one that does not answer in time is marked ``unreachable``. A node whose
        process is gone is not asked: its row is its supervisor's."""
        return {"role": "supervisor", "id": TOP_NAME, "pid": self._top.pid or None,
                "restarts": 0, "status": "running",
                "children": self._subtree(self._top.address, describe=describe_timeout)}

    def _subtree(self, address: Any, timeout: float = ASK_TIMEOUT,
                 describe: float = ASK_TIMEOUT) -> list[dict[str, Any]]:
        ref = SupervisorRef(self._system, address, "", 0)
        rows = []
        for info in ref.which_children(timeout):
            role = _role(info.id, info.kind.value)
            row: dict[str, Any] = {
                "role": role, "id": info.id, "pid": info.pid, "restarts": info.restarts,
                "status": info.status, "remote": info.remote, "children": []}
            # A child on another system may have died with its host before its
            # supervisor noticed: ask it briefly and mark it instead of hanging.
            # (Everything below a remote child is on that system too.)
            elsewhere = info.remote or timeout < ASK_TIMEOUT
            wait = REMOTE_ASK_TIMEOUT if elsewhere else ASK_TIMEOUT
            try:
                if info.address is not None and role == "supervisor":
                    row["children"] = self._subtree(info.address, wait, describe)
                elif info.address is not None and role == "node" and (
                        info.remote or info.pid is None or alive(info.pid)):
                    # (An ask to a process that died after it took the ask is
                    # answered only at its timeout: hence ``describe``.)
                    reply = self._system.ask(info.address, Describe(), min(wait, describe))
                    if isinstance(reply, Description):
                        row["children"] = reply.children
                    elif elsewhere or describe < wait:
                        row["unreachable"] = True
            except SupervisorError as exc:
                if not (elsewhere or describe < wait) or exc.code != "timeout":
                    raise
                row["unreachable"] = True
            rows.append(row)
        return rows

    # -- internals -------------------------------------------------------------------

    def _init_inbox(self) -> None:
        self._inbox = Inbox()
        self._receiver = None
        self._receiver_lock = threading.Lock()
        self._closed = False

    def _caller_inbox(self) -> tuple[Inbox, Receiver]:
        """The inbox of ``hy.CALLER`` runs and the receiver that feeds it
        (started on first use: one thread and one endpoint per system)."""
        with self._receiver_lock:
            if self._closed:
                raise HayataError("this AgentSystem is shut down", code="no_system")
            if self._receiver is None or not self._receiver.alive:
                self._receiver = Receiver(self._system, self._inbox.deliver)
            return self._inbox, self._receiver

    def _close_receiver(self) -> None:
        with self._receiver_lock:
            receiver, self._receiver = self._receiver, None
        self._inbox.close()
        if receiver is not None:
            receiver.close()

    def _agent_address(self, agent_id: str, via: Any = None,
                       timeout: float = ASK_TIMEOUT) -> tuple[Any, int | None]:
        """The agent actor's address and pid (None if it runs on another system: a
        pid there means nothing here); ``via``: the endpoint to ask through
        (default this thread's)."""
        endpoint = via if via is not None else self._system
        top = SupervisorRef(endpoint, self._top.address, TOP_NAME, 0)
        try:
            sup = top.child(AGENT_PREFIX + agent_id, timeout)
        except SupervisorError as exc:
            if exc.code != "not_found":
                raise HayataError(f"agent {agent_id!r} could not be looked up: {exc}",
                                  code=exc.code, agent_id=agent_id) from exc
            raise AgentNotFound(f"no agent {agent_id!r}", agent_id=agent_id) from exc
        if sup.address is None:
            raise AgentNotFound(f"agent {agent_id!r} is not running", agent_id=agent_id)
        try:
            agent = SupervisorRef(endpoint, sup.address, sup.id, sup.pid or 0).child(
                "agent", REMOTE_ASK_TIMEOUT if sup.remote else timeout)
        except SupervisorError as exc:
            raise HayataError(f"agent {agent_id!r} could not be looked up: {exc}",
                              code=exc.code, agent_id=agent_id) from exc
        if agent.address is None:
            raise AgentNotFound(f"agent {agent_id!r} is restarting", agent_id=agent_id)
        return agent.address, None if sup.remote else agent.pid


def _role(child_id: str, kind: str) -> str:
    if child_id.startswith(NODE_PREFIX):
        return "node"
    if child_id in ("agent", "edge_watcher"):
        return child_id
    return "supervisor" if kind == "supervisor" else "worker"


__all__ = ["CALLER", "ActorAddress", "AgentRef", "AgentSystem"]
