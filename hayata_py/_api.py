"""The Python API: :class:`AgentSystem` and :class:`AgentRef`.

Calls are blocking. Both classes are safe to use from several threads: each
thread talks to the actors through its own Thespian endpoint (a shared one
hands replies to the wrong thread), and ``hy.CALLER`` messages go to the
inbox of the thread that started the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil
from thespian.actors import ActorAddress, PoisonMessage

from hayata_py import _telemetry as telemetry
from hayata_py._actors._protocol import Describe, Description, GetSystemInfo, SystemInfo
from hayata_py._actors.agent import validate_run
from hayata_py._actors.tree import (
    AGENT_PREFIX,
    NODE_PREFIX,
    TOP_FLAGS,
    AgentSupervisor,
    TopSupervisor,
    with_liveness,
)
from hayata_py._config import AgentConfig, Liveness, valid_capabilities, validate_config
from hayata_py._errors import (
    AgentAlreadyStarted,
    AgentNotFound,
    ConfigError,
    HayataError,
    RunRejected,
    TimeoutError_,
)
from hayata_py.messages import (
    CALLER,
    Abandon,
    Ack,
    AgentEvent,
    AgentResult,
    AgentStatus,
    Caller,
    GetResult,
    GetStatus,
    Recover,
    ResolveTask,
    ResultReply,
    Run,
    RunAccepted,
    WaitResult,
)
from hayata_py.store import TaskClass, TaskRecord, TaskStore, classify_task
from supervisors import ChildSpec, Kind, Start, SupervisorError, SupervisorRef, System

TOP_NAME = "hayata"
_REFS = itertools.count(random.randrange(1, 2**31))
TERMINAL_EVENTS = ("invocation_completed", "invocation_failed", "invocation_interrupted")
ASK_TIMEOUT = 30.0
WAIT_CHECK_PERIOD = 0.5
"""How often a waiting :meth:`AgentRef.wait` checks that the agent still runs."""
REMOTE_ASK_TIMEOUT = 2.0
"""How long :meth:`AgentSystem.tree` waits for an actor on another system."""


class _Inbox:
    """The calling process's own endpoint for ``subscriber=hy.CALLER``.

    One Thespian external context whose messages are sorted by invocation:
    events are released in sequence order and the result after the terminal
    event, whatever order the network delivered them in.
    """

    def __init__(self, system: System) -> None:
        self._ctx = system.new_endpoint()
        self._events: dict[str, dict[int, AgentEvent]] = {}
        self._results: dict[str, AgentResult] = {}
        self._next: dict[str, int] = {}
        self.streamed: dict[str, bool] = {}
        self._terminal: set[str] = set()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ctx.exit_clone()

    def run(self, address: Any, run: Run | Recover, timeout: float) -> Any:
        self._ctx.tell(address, run)
        deadline = time.monotonic() + timeout
        while True:
            message = self._ctx.listen(max(0.0, deadline - time.monotonic()))
            if message is None:
                raise TimeoutError_(f"no answer to Run within {timeout}s")
            if isinstance(message, (RunAccepted, HayataError, PoisonMessage)):
                return message
            self._file(message)

    def _file(self, message: Any) -> None:
        if isinstance(message, AgentEvent):
            self._events.setdefault(message.invocation_id, {})[message.sequence] = message
        elif isinstance(message, AgentResult):
            self._results[message.invocation_id] = message

    def messages(self, invocation_id: str, timeout: float) -> Iterator[AgentEvent | AgentResult]:
        self._next.setdefault(invocation_id, 1)
        while True:
            pending = self._events.get(invocation_id, {})
            expected = self._next[invocation_id]
            if expected in pending:
                event = pending.pop(expected)
                self._next[invocation_id] = expected + 1
                if event.type in TERMINAL_EVENTS:
                    self._terminal.add(invocation_id)
                yield event
                continue
            result = self._results.get(invocation_id)
            ready = not self.streamed.get(invocation_id, False) or invocation_id in self._terminal
            if result is not None and ready:
                del self._results[invocation_id]
                self._events.pop(invocation_id, None)
                self._next.pop(invocation_id, None)
                self.streamed.pop(invocation_id, None)
                self._terminal.discard(invocation_id)
                yield result
                return
            message = self._ctx.listen(timeout)
            if message is None:
                raise TimeoutError_(f"no message for invocation {invocation_id} within "
                                    f"{timeout}s", invocation_id=invocation_id)
            self._file(message)



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
    """

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
    ) -> None:
        if base != "multiprocTCPBase":
            raise ConfigError("base", f"{base!r} is not supported; use 'multiprocTCPBase' "
                                      "(other bases cannot detect killed actors)")
        if admin_port is not None and (isinstance(admin_port, bool)
                                       or not isinstance(admin_port, int)
                                       or not 0 < admin_port < 65536):
            raise ConfigError("admin_port", f"must be a TCP port number, got {admin_port!r}")
        liveness = liveness if liveness is not None else Liveness()
        if not isinstance(liveness, Liveness):
            raise ConfigError("liveness", f"must be hy.Liveness, got {type(liveness).__name__}")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ConfigError("name", f"must be a non-empty string, got {name!r}")
        capabilities = capabilities if capabilities is None else valid_capabilities(capabilities)
        if not isinstance(bind, str) or not bind:
            raise ConfigError("bind", f"must be an IP address string, got {bind!r}")
        handlers = dict(telemetry_handlers or {})
        if log_telemetry:
            handlers.setdefault("hayata.log", (
                "hayata_py._telemetry:log_event", sorted(telemetry.EVENTS)))
        # Handlers run in the actor processes: they travel by environment,
        # inherited by every process the admin forks.
        os.environ[telemetry.ENV_VAR] = telemetry.env_value(handlers)
        from hayata_py.store import default_store_url, open_store

        self.data_dir = Path(data_dir).resolve()
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
                                  convention_misses=liveness.convention_misses)
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
                              liveness)
            self._top = self._system.start_supervisor(
                TOP_NAME, with_liveness(TOP_FLAGS, liveness), [], actor=TopSupervisor,
                global_name=TOP_NAME, extra_args=(info,))
        except BaseException:
            self._system.shutdown()
            self.store.close()
            raise
        self._inboxes: dict[threading.Thread, _Inbox] = {}
        self._closed = False

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
        self._inboxes = {}
        self._closed = False
        return self

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> AgentSystem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Stop every agent and process this system started (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._close_inboxes()
        self._system.shutdown()
        if self.store is not None:
            self.store.close()

    def stop(self) -> None:
        """Stop the whole system, also from a handle attached with :meth:`connect`."""
        self._close_inboxes()
        self._closed = True
        self._system.stop()

    def kill(self) -> list[int]:
        """SIGKILL every process of the system at once (the drills' "VM crash");
        returns the pids killed."""
        self._closed = True
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

    def tree(self) -> dict[str, Any]:
        """The live actor tree: role, id, pid, restarts, status, remote (runs on another
        system of the convention), children (nested dicts). A subtree on another
        system that does not answer within 2 s is marked ``unreachable``."""
        return {"role": "supervisor", "id": TOP_NAME, "pid": self._top.pid or None,
                "restarts": 0, "status": "running",
                "children": self._subtree(self._top.address)}

    def _subtree(self, address: Any, timeout: float = ASK_TIMEOUT) -> list[dict[str, Any]]:
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
                    row["children"] = self._subtree(info.address, wait)
                elif info.address is not None and role == "node":
                    reply = self._system.ask(info.address, Describe(), wait)
                    if isinstance(reply, Description):
                        row["children"] = reply.children
                    elif elsewhere:
                        row["unreachable"] = True
            except SupervisorError as exc:
                if not elsewhere or exc.code != "timeout":
                    raise
                row["unreachable"] = True
            rows.append(row)
        return rows

    # -- internals -------------------------------------------------------------------

    def _inbox_for_caller(self) -> _Inbox:
        """This thread's inbox for ``hy.CALLER`` (each thread has its own endpoint);
        inboxes of threads that have ended are closed when a new one is made."""
        thread = threading.current_thread()
        inbox = self._inboxes.get(thread)
        if inbox is None:
            for ended in [t for t in self._inboxes if not t.is_alive()]:
                self._inboxes.pop(ended).close()
            inbox = self._inboxes[thread] = _Inbox(self._system)
        return inbox

    def _close_inboxes(self) -> None:
        inboxes, self._inboxes = list(self._inboxes.values()), {}
        for inbox in inboxes:
            inbox.close()

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


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _is(*types: type) -> Callable[[Any], bool]:
    return lambda reply: isinstance(reply, types)


def _result_for(invocation_id: str) -> Callable[[Any], bool]:
    return lambda reply: isinstance(reply, ResultReply) and reply.invocation_id == invocation_id


def _role(child_id: str, kind: str) -> str:
    if child_id.startswith(NODE_PREFIX):
        return "node"
    if child_id in ("agent", "edge_watcher"):
        return child_id
    return "supervisor" if kind == "supervisor" else "worker"


class AgentRef:
    """A handle on one agent: run it, read its results and status.

    The agent's address is looked up through its supervisor (it changes when
    the agent restarts) and cached until a call finds it stale.
    """

    def __init__(self, system: AgentSystem, agent_id: str) -> None:
        self.system = system
        self.id = agent_id
        self._address: Any = None
        self._pid: int | None = None

    def _current_address(self) -> Any:
        """The agent's address, looked up again if the cached process is gone
        (an ask to a dead actor can take the whole timeout to fail)."""
        if self._address is None or self._pid is None or not _alive(self._pid):
            self._address, self._pid = self.system._agent_address(self.id)
        return self._address

    def _ask(self, message: Any, timeout: float = ASK_TIMEOUT,
             accept: Callable[[Any], bool] = lambda _reply: True) -> Any:
        """Send ``message`` and return the first reply ``accept`` takes.

        Replies that do not match (a late answer to an earlier call that timed
        out) are dropped, so they can never be mistaken for this call's answer.
        """
        deadline = time.monotonic() + timeout
        ref = 0
        if hasattr(message, "ref"):
            ref = next(_REFS)
            message = dataclasses.replace(message, ref=ref)

        def mine(reply: Any) -> bool:
            return accept(reply) and getattr(reply, "ref", ref) == ref

        reply = self.system._system.ask(self._current_address(), message, timeout)
        while reply is not None and not isinstance(reply, PoisonMessage) and not mine(reply):
            remaining = deadline - time.monotonic()
            reply = self.system._system.listen(remaining) if remaining > 0 else None
        if reply is None or isinstance(reply, PoisonMessage):
            self._address = None
            raise TimeoutError_(f"agent {self.id!r} did not answer "
                                f"{type(message).__name__} within {timeout}s")
        return reply

    def run(self, input: Any = None, *, subscriber: Any = None, stream: bool = False) -> str:
        """Start an invocation; return its id once the agent accepted it.

        ``subscriber``: an actor address, ``hy.CALLER`` (read with
        :meth:`messages`), or None. ``stream=True`` sends events too (needs a
        subscriber). Raises :class:`RunRejected` (``agent_busy``,
        ``recovery_required``, ``invalid_option``, ``invalid_input``).
        """
        run = Run(input, subscriber, stream)
        rejected = validate_run(run)
        if rejected is not None:
            raise rejected
        if isinstance(subscriber, Caller):
            inbox = self.system._inbox_for_caller()
            reply = inbox.run(self._current_address(), run, ASK_TIMEOUT)
        else:
            reply = self._ask(run, accept=_is(RunAccepted, HayataError))
        if isinstance(reply, RunRejected):
            raise reply
        if not isinstance(reply, RunAccepted):
            raise HayataError(f"unexpected answer to Run: {reply!r}", code="protocol_error")
        if isinstance(subscriber, Caller):
            inbox.streamed[reply.invocation_id] = stream
        return reply.invocation_id

    def messages(self, invocation_id: str, timeout: float = ASK_TIMEOUT
                 ) -> Iterator[AgentEvent | AgentResult]:
        """The events (in sequence order) then the result of an invocation run with
        ``subscriber=hy.CALLER``. Raises TimeoutError if nothing arrives in ``timeout`` s."""
        yield from self.system._inbox_for_caller().messages(invocation_id, timeout)

    def get_result(self, invocation_id: str) -> AgentResult | None:
        """The result, or None while the invocation runs."""
        reply = self._ask(GetResult(invocation_id), accept=_result_for(invocation_id))
        assert isinstance(reply, ResultReply)
        if not reply.known:
            raise HayataError(f"unknown invocation {invocation_id!r}", code="not_found",
                              invocation_id=invocation_id)
        return reply.result

    def wait(self, invocation_id: str, timeout: float = ASK_TIMEOUT) -> AgentResult:
        """Block until the invocation ends (raises TimeoutError after ``timeout`` s).

        A wait in progress when the run is interrupted returns that run's result
        (``invocation_interrupted``/``ownership_lost``, ``details["recoverable"]``).
        Raises ``HayataError(code="recovery_required")`` if nothing runs it any
        more: the agent process died (its restarted successor found it
        unfinished) or its run was interrupted earlier; :meth:`recover`
        continues it.
        ``HayataError(code="no_system")`` if the whole actor system died.
        """
        deadline = time.monotonic() + timeout
        ref = next(_REFS)
        asked = self._current_address()
        self.system._system.tell(asked, WaitResult(invocation_id, ref=ref))
        probe: Any = None
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError_(f"agent {self.id!r} did not answer WaitResult within "
                                        f"{timeout}s", invocation_id=invocation_id)
                reply = self.system._system.listen(min(remaining, WAIT_CHECK_PERIOD))
                if isinstance(reply, ResultReply) and reply.ref == ref \
                        and reply.invocation_id == invocation_id:
                    break
                if reply is None and not _alive(self.system._system.admin_pid):
                    raise HayataError(
                        f"the actor system (admin pid {self.system._system.admin_pid}) "
                        f"died while waiting for invocation {invocation_id}; restart it "
                        "and recover()", code="no_system", invocation_id=invocation_id)
                if reply is None:
                    # Is the agent we asked still there? Asked through a private
                    # endpoint: on this one the checks would take (and drop) the
                    # reply we wait for if it arrived meanwhile.
                    probe = probe or self.system._system.new_endpoint()
                    if self._restarted_since(asked, probe):
                        # Its successor answers (at once if the invocation now
                        # needs recover()).
                        asked = self._address
                        self.system._system.tell(asked, WaitResult(invocation_id, ref=ref))
        finally:
            if probe is not None:
                with contextlib.suppress(Exception):
                    probe.exit_clone()
        if not reply.known:
            raise HayataError(f"unknown invocation {invocation_id!r}", code="not_found",
                              invocation_id=invocation_id)
        if reply.recovery_required:
            raise HayataError(f"invocation {invocation_id} is unfinished and nothing runs it; "
                              f"call recover() (or resolve_task()/abandon())",
                              code="recovery_required", invocation_id=invocation_id)
        assert reply.result is not None
        return reply.result

    def _restarted_since(self, address: Any, probe: Any) -> bool:
        """True if the agent now runs as another process than ``address``."""
        try:
            current, pid = self.system._agent_address(self.id, via=probe,
                                                      timeout=REMOTE_ASK_TIMEOUT)
        except HayataError:
            return False  # between two processes, or no answer now: look again later
        if current != address:
            self._address, self._pid = current, pid
            return True
        return False

    def status(self) -> str:
        """``idle``, ``running`` or ``recovery_required``."""
        return self.status_info().status

    def status_info(self) -> AgentStatus:
        """Status with the current (or unfinished) invocation id."""
        reply = self._ask(GetStatus(), accept=_is(AgentStatus))
        assert isinstance(reply, AgentStatus)
        return reply

    def recover(self, *, subscriber: Any = None, stream: bool = False) -> str:
        """Continue the unfinished invocation found at start; return its id.

        Completed tasks of the interrupted step are reused, not-started ones
        run, idempotent uncertain ones re-run. Raises :class:`RecoveryRejected`:
        ``nothing_to_recover``, ``task_execution_uncertain`` (``details`` name
        ``task_ids`` and ``node_ids``; nothing was run), ``invocation_busy``.
        """
        message = Recover(subscriber, stream)
        rejected = validate_run(Run(None, subscriber, stream))
        if rejected is not None:
            raise rejected
        if isinstance(subscriber, Caller):
            inbox = self.system._inbox_for_caller()
            reply = inbox.run(self._current_address(), message, ASK_TIMEOUT)
        else:
            reply = self._ask(message, accept=_is(RunAccepted, HayataError))
        if isinstance(reply, HayataError):
            raise reply
        if not isinstance(reply, RunAccepted):
            raise HayataError(f"unexpected answer to Recover: {reply!r}", code="protocol_error")
        if isinstance(subscriber, Caller):
            inbox.streamed[reply.invocation_id] = stream
        return reply.invocation_id

    def resolve_task(self, task_id: str, *, result: dict[str, Any]) -> None:
        """Record ``result`` for an uncertain task (established by checking the
        external system); a later :meth:`recover` reuses it."""
        self._expect_ack(self._ask(ResolveTask(task_id, result), accept=_is(Ack, HayataError)))

    def abandon(self, invocation_id: str) -> None:
        """End the unfinished invocation as failed (``abandoned``) and free the agent."""
        self._expect_ack(self._ask(Abandon(invocation_id), accept=_is(Ack, HayataError)))

    @staticmethod
    def _expect_ack(reply: Any) -> None:
        if isinstance(reply, HayataError):
            raise reply
        if not isinstance(reply, Ack):
            raise HayataError(f"unexpected answer: {reply!r}", code="protocol_error")

    def tasks(self, invocation_id: str | None = None) -> list[tuple[TaskRecord, TaskClass]]:
        """The durable task records of an invocation (default: the current or
        unfinished one) with their recovery classification."""
        store = self.system.store
        if store is None:
            raise HayataError("no store is known to this handle", code="no_store")
        if invocation_id is None:
            invocation_id = self.status_info().invocation_id
            if invocation_id is None:
                records = store.list_invocations(self.id, limit=1)
                if not records:
                    return []
                invocation_id = records[0].invocation_id
        return [(t, classify_task(t, idempotent=False)) for t in store.get_tasks(invocation_id)]


__all__ = ["CALLER", "ActorAddress", "AgentRef", "AgentSystem"]
