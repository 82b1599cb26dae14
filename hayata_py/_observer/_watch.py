"""The watcher: polls the running system for the page while a page is open.

A snapshot is the actor tree (:meth:`AgentSystem.tree`), every agent's status
and its latest invocations from the store. Polls start every
:data:`PERIOD` seconds on a few worker threads: an ask to an actor that has
just died can take long to fail (Thespian answers it only at the timeout), so
one stalled poll must not hold the page back. A snapshot is published only if
it started after the last one published and differs from it.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import psutil

from hayata_py import AgentRef, HayataError
from hayata_py._observer import _model
from hayata_py._observer._hub import Hub, Message
from supervisors import SupervisorError

if TYPE_CHECKING:
    from hayata_py import AgentSystem

PERIOD = 0.2
"""Seconds between two polls (a restarted actor's pid shows within about this)."""
POLLERS = 3
"""Polls that may be in flight at once."""
INVOCATIONS_SHOWN = 10


class Source:
    """Reads of one system for the page (safe to call from several threads)."""

    def __init__(self, system: AgentSystem, hint: str) -> None:
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
            tree = self.system.tree()
            agent_ids = self.system.agents()
        except (HayataError, SupervisorError) as exc:
            state["error"] = f"cannot read the actor tree: {exc}"
            return state
        state.update(alive=True, tree=_model.annotate(tree, self.hint),
                     agents=[self._agent(agent_id) for agent_id in agent_ids])
        return state

    def _agent(self, agent_id: str) -> dict[str, Any]:
        try:
            status = self.ref(agent_id).status_info()
            state, current = status.status, status.invocation_id
        except HayataError as exc:
            state, current = f"unreachable ({exc.code})", None
        records = self.system.store.list_invocations(agent_id, limit=INVOCATIONS_SHOWN)
        unfinished = next((r.invocation_id for r in records if r.status == "running"), None)
        return {"id": agent_id, "status": state, "invocation_id": current,
                "invocations": [_model.invocation_row(r) for r in records],
                "cli": _model.agent_commands(agent_id, current or unfinished, self.hint)}


class Watcher:
    """Publishes snapshots to ``hub`` while it has subscribers; :meth:`close` stops it."""

    def __init__(self, source: Source, hub: Hub, period: float = PERIOD) -> None:
        self._source = source
        self._hub = hub
        self._period = period
        self._pool = ThreadPoolExecutor(POLLERS, thread_name_prefix="hayata-observe-poll")
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._in_flight = 0
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
        while not self._stop.is_set():
            # Idle until a page is open (no cost to the system meanwhile).
            if not self._hub.wanted.wait(self._period):
                continue
            with self._lock:
                start = self._in_flight < POLLERS
                if start:
                    self._in_flight += 1
            if start:
                self._pool.submit(self._poll, next(self._numbers))
            self._stop.wait(self._period)

    def _poll(self, number: int) -> None:
        try:
            state = self._source.snapshot()
        except Exception as exc:  # noqa: BLE001 - shown on the page, polling goes on
            state = {"kind": "state", "system": self._source.info(), "alive": False,
                     "error": f"{type(exc).__name__}: {exc}", "tree": None, "agents": []}
        with self._lock:
            self._in_flight -= 1
            if number <= self._published:
                return  # a later poll was published already
            self._published = number
            changed = state != self._last
            self._last = state
        if changed:
            self._hub.publish(state)
