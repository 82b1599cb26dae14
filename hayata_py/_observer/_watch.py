"""The watcher: polls the running system for the page while a page is open.

A snapshot is the actor tree (:meth:`AgentSystem.tree`), every agent's status
and its latest invocations from the store. It costs one ask per supervisor,
node and agent (about 25 ms per agent here), so it is taken every
:data:`FULL_PERIOD` seconds, and at once when the system's set of OS
processes changes: that set is cheap to read (about 1 ms) and checked every
:data:`CHECK_PERIOD` seconds, so an actor killed from a shell shows its new
pid a fraction of a second after its supervisor restarted it.

An actor that took an ask and died before it answered (or one that is
frozen) answers nothing: Thespian gives up on such an ask only at its
timeout. So a snapshot waits at most :data:`ASK_DEADLINE` seconds for a
node's edges or an agent's status (marked ``unreachable`` otherwise), and
does not ask a node whose process is gone at all (its supervisor's row
shows it): one actor that does not answer never holds the page back. A
snapshot starts at once when the set of processes changed, even while
earlier ones still run (at most :data:`POLLERS` at once); otherwise a
snapshot still running after :data:`STALL_AFTER` seconds does not hold the
next one back. A snapshot is published only if it started after the last
one published and differs from it. That the system is gone is published
from the watcher's own thread, whatever hangs in the others.
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil

from hayata_py._circuit import summary
from hayata_py._errors import HayataError
from hayata_py._observer import _model
from hayata_py._observer._hub import Hub, Message
from hayata_py._observer._system import ObservedSystem
from hayata_py._ref import AgentRef
from supervisors import SupervisorError

CHECK_PERIOD = 0.1
"""Seconds between two looks at the system's set of processes."""
FULL_PERIOD = 1.0
"""Seconds between two snapshots when no process came or went."""
STALL_AFTER = 1.0
"""A snapshot running this long no longer holds the next periodic one back."""
ASK_DEADLINE = 0.3
"""Seconds a snapshot waits for one actor's answer (a node naming its edges, an
agent's status): far below :data:`FULL_PERIOD`. A supervisor in the middle of
a restart answers once it is done, with the new pid: it is waited for."""
POLLERS = 3
"""Snapshots that may be in flight at once."""
INVOCATIONS_SHOWN = 10


class Source:
    """Reads of one system for the page (safe to call from several threads)."""

    def __init__(self, system: ObservedSystem, hint: str) -> None:
        self.system = system
        self.hint = hint
        self._refs: dict[str, AgentRef] = {}
        self._lock = threading.Lock()

    def ref(self, agent_id: str) -> AgentRef:
        """A cached handle on a started agent (its address lookups are kept)."""
        with self._lock:
            ref = self._refs.get(agent_id)
            if ref is None:
                ref = self._refs[agent_id] = AgentRef(self.system, agent_id)
            return ref

    def alive(self) -> bool:
        try:
            return bool(psutil.Process(self.system.admin_pid).status()
                        != psutil.STATUS_ZOMBIE)
        except psutil.Error:
            return False

    def info(self) -> dict[str, Any]:
        system = self.system
        return {"data_dir": str(system.data_dir), "name": system.name,
                "admin_port": system.admin_port, "admin_pid": system.admin_pid,
                "session_id": system.session_id, "hint": self.hint}

    def snapshot(self) -> Message:
        """The state message the page renders."""
        state: Message = {"kind": "state", "system": self.info(), "alive": False,
                          "error": None, "tree": None, "agents": []}
        if not self.alive():
            state["error"] = (f"the actor system (admin pid {self.system.admin_pid}) is not "
                              "running")
            return state
        try:
            tree = self.system.tree(describe_timeout=ASK_DEADLINE)
            agent_ids = self.system.agents()
        except (HayataError, SupervisorError) as exc:
            state["error"] = f"cannot read the actor tree: {exc}"
            return state
        state.update(alive=True, tree=_model.annotate(tree, self.hint),
                     agents=[self._agent(agent_id) for agent_id in agent_ids])
        return state

    def _agent(self, agent_id: str) -> dict[str, Any]:
        counts: dict[str, int] = {}
        circuits = "-"
        try:
            status = self.ref(agent_id).status_info(ASK_DEADLINE)
            state, current = status.status, status.invocation_id
            counts = {"running": status.running, "paused": status.paused,
                      "unfinished": status.unfinished,
                      "max_invocations": status.max_invocations}
            circuits = summary(status.circuits)
        except HayataError as exc:
            state, current = f"unreachable ({exc.code})", None
        records = self.system.store.list_invocations(agent_id, limit=INVOCATIONS_SHOWN)
        unfinished = next((r.invocation_id for r in records if r.status == "running"), None)
        return {"id": agent_id, "status": state, "invocation_id": current, "counts": counts,
                "circuits": circuits,
                "invocations": [_model.invocation_row(r) for r in records],
                "cli": _model.agent_commands(agent_id, current or unfinished, self.hint)}


class Watcher:
    """Publishes snapshots to ``hub`` while it has subscribers; :meth:`close` stops it."""

    def __init__(self, source: Source, hub: Hub) -> None:
        self._source = source
        self._hub = hub
        self._pool = ThreadPoolExecutor(POLLERS, thread_name_prefix="hayata-observe-poll")
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._running: dict[int, float] = {}
        """Snapshots in flight: number -> when it started."""
        self._published = 0
        self._last: Message | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hayata-observe-watch",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _loop(self) -> None:
        processes: frozenset[int] = frozenset()
        due = 0.0  # when the next snapshot is due whatever happens
        pending = changed = False
        while not self._stop.is_set():
            # Idle until a page is open (no cost to the system meanwhile).
            if not self._hub.wanted.wait(CHECK_PERIOD):
                due = 0.0
                continue
            now = time.monotonic()
            current = self._processes()
            changed = changed or current != processes  # since the last snapshot began
            pending = pending or now >= due or changed
            processes = current
            if pending and not self._source.alive():
                # Said at once, even while earlier polls hang on the dead actors.
                pending = False
                due = now + FULL_PERIOD
                self._poll(next(self._numbers))
            elif pending and self._may_start(now, changed):
                pending = changed = False
                due = now + FULL_PERIOD
                self._pool.submit(self._poll, next(self._numbers))
            self._stop.wait(CHECK_PERIOD)

    def _processes(self) -> frozenset[int]:
        try:
            return frozenset(p.pid for p in self._source.system.processes())
        except psutil.Error:
            return frozenset()

    def _may_start(self, now: float, changed: bool) -> bool:
        """A snapshot may start: fewer than POLLERS run, and the processes changed
        (those running began before) or every running one is stalled."""
        with self._lock:
            if len(self._running) >= POLLERS:
                return False
            return changed or all(now - began >= STALL_AFTER
                                  for began in self._running.values())

    def _poll(self, number: int) -> None:
        with self._lock:
            self._running[number] = time.monotonic()
        try:
            state = self._source.snapshot()
        except Exception as exc:  # noqa: BLE001 - shown on the page, polling goes on
            state = {"kind": "state", "system": self._source.info(), "alive": False,
                     "error": f"{type(exc).__name__}: {exc}", "tree": None, "agents": []}
        with self._lock:
            del self._running[number]
            if number <= self._published:
                return  # a later snapshot was published already
            self._published = number
            changed = state != self._last
            self._last = state
        if changed:
            self._hub.publish(state)
