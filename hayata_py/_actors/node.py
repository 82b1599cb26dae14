"""The node: parent and supervisor of the edges of one node id, off the step path.

The node never runs user code and never sees a task. It starts its edges
(one when it starts; more on :class:`EnsureEdges`, honouring the largest
count asked), publishes them to the agent (:class:`EdgeTable`), kills one
when the agent says its task is over (:class:`KillEdge`: cancelled, timed
out), stops one the agent retires because it was idle (:class:`RetireEdge`:
it then keeps one edge fewer, never none) and replaces any edge that died,
telling the agent (:class:`EdgeLost`) so that the tasks the edge ran fail.
Each edge runs ``capacity`` tasks at once (``edge_concurrency``).

Thespian, after delivering one ``ChildActorExited``, silently reaps every
other child that is dead by then: their exits are never reported. So on
every exit the node re-checks all its edges by pid and process start time,
and once more shortly after (one pending timer), which catches an edge that
died while the first exit was being handled.

Edges are its child processes: they die with it (PDEATHSIG), and the edge
watcher double-checks by pid. Before creating an edge the node freezes its
heap (``gc.freeze``), so the fork shares the parent's pages instead of
copying each one the child's garbage collector touches.
"""

from __future__ import annotations

import gc
import itertools
import time
from collections import deque
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from thespian.actors import ActorExitRequest, ChildActorExited, WakeupMessage

from hayata_py._actor_messages import (
    Describe,
    Description,
    EdgeExit,
    EdgeInit,
    EdgeLost,
    EdgeReady,
    EdgeRef,
    EdgeStarted,
    EdgeStopped,
    EdgeTable,
    EnsureEdges,
    KillEdge,
    ReducerDone,
    ReducerGone,
    ReducerReady,
    ReducerUp,
    RetireEdge,
    StartReducer,
    StopReducer,
    UseAgent,
    UseWatcher,
)
from hayata_py._actors import process_identity
from hayata_py._actors._wellformed import drop_malformed
from hayata_py._config import MAX_MAP_CONCURRENCY
from supervisors import SupervisedActor, host_id, kill_child_process

RECHECK_AFTER = 0.05
RETIRE_GRACE = 2.0
"""Seconds a retired (idle) edge has to leave on ``ActorExitRequest`` before it is killed."""
REDUCER_DEATHS = 3
"""A map step's reducer that died this many times is not replaced again: the
node reports it (``ReducerGone``) and the machine fails the step."""
MAX_EDGES = MAX_MAP_CONCURRENCY
"""The most edges a node keeps (the largest ``map_concurrency``): an
``EnsureEdges`` asking for more (or for a count that is no int) is logged and
dropped, never a fork without end."""
CLOSED_KEPT = 64
"""Openings of map steps whose StopReducer overtook their StartReducer, kept."""


@dataclass
class _Edge:
    edge_id: str
    address: Any
    pid: int | None = None
    created: float = 0.0
    killed: bool = False
    retired: float = 0.0
    """Monotonic time it was retired (asked to exit), 0 while it is in use."""

    @property
    def live(self) -> bool:
        return not self.killed and not self.retired


@dataclass
class _Reducer:
    start: StartReducer
    address: Any
    deaths: int = 0
    pid: int | None = None
    created: float = 0.0
    done: bool = False
    """It answered, or the step is over: its exit is no crash."""


def _alive(edge: _Edge | _Reducer) -> bool:
    """True while the edge's own process (same pid *and* start time) runs."""
    if edge.pid is None:
        return True  # not ready yet: its exit, if any, is reported to us
    return process_identity.running((edge.pid, edge.created), child=True)


class NodeActor(SupervisedActor):
    """One node of an agent (child of the node supervisor)."""

    def on_start(self, node_id: str, function: str, watcher: Any, agent_id: str,
                 capacity: int = 1) -> None:
        self.node_id, self.function, self.watcher, self.agent_id = (
            node_id, function, watcher, agent_id)
        self.capacity = max(1, capacity)
        self.edges: list[_Edge] = []
        self.agent: Any = None
        self.wanted = 1
        self.ensured = 0
        self.version = 0
        self.timer_at: float | None = None  # when the pending wakeup fires
        self.reducers: dict[str, _Reducer] = {}  # execution id -> its map step's reducer
        self.closed: deque[str] = deque(maxlen=CLOSED_KEPT)
        self._ids = itertools.count(1)
        self.log = self.log.bind(agent_id=agent_id, node_id=node_id)
        self._new_edge()

    # -- children ------------------------------------------------------------------

    def _new_edge(self) -> None:
        from hayata_py._actors.edge import EdgeActor

        edge_id = f"{self.node_id}.edge-{next(self._ids)}"
        gc.freeze()  # the child shares, rather than copies, what this process holds
        edge = _Edge(edge_id, self.createActor(EdgeActor))
        self.send(edge.address, EdgeInit(self.node_id, edge_id, self.function, self.watcher,
                                         self.capacity))
        self.edges.append(edge)

    def _top_up(self) -> None:
        while sum(1 for e in self.edges if e.live) < self.wanted:
            self._new_edge()

    def _publish(self) -> None:
        """Tell the agent every edge it may use (initialised, not killed or retired)."""
        if self.agent is None:
            return
        self.version += 1
        self.send(self.agent, EdgeTable(self.node_id, self.version, tuple(
            EdgeRef(e.edge_id, e.address, self.capacity) for e in self.edges
            if e.pid is not None and e.live), self.wanted, self.ensured))

    def _arm(self, seconds: float) -> None:
        """One pending wakeup at a time, unless a sooner one is needed."""
        at = time.monotonic() + seconds
        if self.timer_at is None or at < self.timer_at:
            self.timer_at = at
            self.wakeupAfter(timedelta(seconds=seconds))

    # -- messages ------------------------------------------------------------------

    def on_receive(self, message: Any, sender: Any) -> None:
        if drop_malformed(self.log, message):
            return
        if isinstance(message, EdgeReady):
            self._on_ready(message)
        elif isinstance(message, KillEdge):
            self._on_kill(message)
        elif isinstance(message, ChildActorExited):
            self._reap(message.childAddress)
        elif isinstance(message, WakeupMessage):
            self._on_timer()
        elif isinstance(message, UseAgent):
            if message.address != self.agent:
                self._stop_reducers_of_others(message.address)
            self.agent = message.address
            self._publish()
        elif isinstance(message, EnsureEdges):
            self._on_ensure(message)
        elif isinstance(message, RetireEdge):
            self._on_retire(message)
        elif isinstance(message, UseWatcher):
            self.watcher = message.address
            for edge in self.edges:
                if edge.pid is not None and not edge.killed:
                    self.send(self.watcher, EdgeStarted(self.node_id, edge.edge_id, edge.pid,
                                                        host_id()))
        elif isinstance(message, Describe):
            self.send(sender, Description(self._describe()))
        elif isinstance(message, (StartReducer, ReducerUp, ReducerDone, StopReducer)):
            self._on_reducer(message)

    # -- how many edges ------------------------------------------------------------

    def _on_ensure(self, ensure: EnsureEdges) -> None:
        """Keep edges for ``count`` tasks at once (the largest count asked wins)."""
        count, seq = ensure.count, ensure.seq
        edges = -(-count // self.capacity) if isinstance(count, int) else 0
        if isinstance(count, bool) or not isinstance(count, int) \
                or not 1 <= edges <= MAX_EDGES or seq < 0:
            self.log.warning("bad_message", message="EnsureEdges", count=repr(count)[:80])
            return
        self.wanted = max(self.wanted, edges)
        self.ensured = max(self.ensured, seq)
        self._top_up()
        self._publish()  # says which ask it has handled (EdgeTable.ensured)

    def _on_retire(self, retire: RetireEdge) -> None:
        """The agent sends the idle edge nothing more: ask it to leave (killed if it
        does not within RETIRE_GRACE) and keep one edge fewer, never none."""
        edge = next((e for e in self.edges if e.edge_id == retire.edge_id), None)
        if edge is None or not edge.live:
            return
        edge.retired = time.monotonic()
        self.wanted = max(1, sum(1 for e in self.edges if e.live))
        self.log.info("edge_retired", edge_id=edge.edge_id, edge_pid=edge.pid)
        self.send(edge.address, ActorExitRequest())
        self._arm(RETIRE_GRACE)
        self._top_up()  # only if it was the last one
        self._publish()

    def _on_timer(self) -> None:
        self.timer_at = None
        self._reap(None)
        now = time.monotonic()
        waiting = [e for e in self.edges if e.retired and e.pid is not None]
        for edge in waiting:
            if now - edge.retired >= RETIRE_GRACE and edge.created > 0 and not edge.killed:
                edge.killed = True  # it would not leave: its exit is still "retired"
                self.log.warning("retired_edge_killed", edge_id=edge.edge_id, edge_pid=edge.pid)
                kill_child_process(edge.pid)
        if any(not e.killed for e in waiting):
            self._arm(RETIRE_GRACE)

    # -- the reducers of map steps (one per step, keyed by execution id) -------------

    def _on_reducer(self, message: StartReducer | ReducerUp | ReducerDone | StopReducer
                    ) -> None:
        if isinstance(message, StartReducer):
            old = self.reducers.pop(message.execution_id, None)
            if old is not None:  # the map is opened again (a recovery)
                self._stop_reducer(old)
            if message.opening and message.opening in self.closed:
                self.closed.remove(message.opening)  # stopped before it started
            else:
                self._new_reducer(message, 0)
            return
        slot = self.reducers.get(message.execution_id)
        if isinstance(message, StopReducer) and (slot is None or (
                message.opening and message.opening != slot.start.opening)):
            if message.opening:
                self.closed.append(message.opening)  # overtook its StartReducer
            return
        if slot is None:
            return
        if isinstance(message, ReducerUp):
            slot.pid = message.pid
            who = process_identity.identity(message.pid)
            slot.created = who[1] if who else -1.0
            self.send(slot.start.agent, ReducerReady(message.execution_id, slot.address))
        else:
            self._stop_reducer(slot)

    def _new_reducer(self, start: StartReducer, deaths: int) -> None:
        from hayata_py._actors.reducer import ReducerActor

        gc.freeze()
        slot = _Reducer(start, self.createActor(ReducerActor), deaths)
        self.reducers[start.execution_id] = slot
        self.send(slot.address, start)

    def _stop_reducer(self, slot: _Reducer) -> None:
        if not slot.done:
            slot.done = True
            self.send(slot.address, ActorExitRequest())

    def _stop_reducers_of_others(self, agent: Any) -> None:
        """A new agent (restarted) opens its own maps again: stop the old one's."""
        for slot in self.reducers.values():
            if slot.start.agent != agent:
                self._stop_reducer(slot)

    def _reap_reducer(self, address: Any) -> None:
        """A reducer exited (or is found dead): replace it unless it was done."""
        for execution_id, slot in list(self.reducers.items()):
            if slot.address != address and _alive(slot):
                continue
            del self.reducers[execution_id]
            if slot.done:
                continue
            deaths = slot.deaths + 1
            self.log.warning("reducer_died", execution_id=execution_id, pid=slot.pid,
                             deaths=deaths)
            if deaths >= REDUCER_DEATHS:
                self.send(slot.start.agent, ReducerGone(execution_id, deaths))
            else:
                self._new_reducer(slot.start, deaths)

    def _on_ready(self, ready: EdgeReady) -> None:
        edge = next((e for e in self.edges if e.edge_id == ready.edge_id), None)
        if edge is None:
            return
        edge.pid = ready.pid
        who = process_identity.identity(ready.pid)
        edge.created = who[1] if who else -1.0  # -1: already gone, the next check reaps it
        if edge.killed:  # killed before we knew its pid
            kill_child_process(edge.pid)
            return
        self._publish()

    def _on_kill(self, kill: KillEdge) -> None:
        edge = next((e for e in self.edges if e.edge_id == kill.edge_id), None)
        if edge is None or not edge.live:
            return
        edge.killed = True
        if edge.pid is not None and edge.created > 0:
            kill_child_process(edge.pid)
        self.log.info("edge_killed", edge_id=edge.edge_id, edge_pid=edge.pid,
                      reason=kill.reason.value)
        self._top_up()  # the replacement is published once it is ready
        self._publish()

    def _reap(self, address: Any) -> None:
        """An edge exited: drop it and every other edge that is no longer alive
        (Thespian reports only one of several exits), then replace them."""
        self._reap_reducer(address)
        gone = [e for e in self.edges if (address is not None and e.address == address)
                or not _alive(e)]
        if address is not None:
            self._arm(RECHECK_AFTER)
        for edge in gone:
            self.edges.remove(edge)
            if self.watcher is not None:
                self.send(self.watcher, EdgeStopped(self.node_id, edge.edge_id))
            if self.agent is not None:
                exit = EdgeExit.RETIRED if edge.retired else \
                    EdgeExit.KILLED if edge.killed else EdgeExit.DIED
                self.send(self.agent, EdgeLost(self.node_id, edge.edge_id, exit, edge.pid))
        if gone:
            self._top_up()
            self._publish()

    def _describe(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = [
            {"role": "edge", "id": e.edge_id, "pid": e.pid, "restarts": 0,
             "status": "retired" if e.retired else "killed" if e.killed else "running",
             "children": []}
            for e in self.edges
        ]
        one = len(self.reducers) == 1
        for execution_id, slot in self.reducers.items():
            if slot.pid is not None:
                rows.append({"role": "reducer", "id": f"{self.node_id}.reducer"
                             + ("" if one else f"@{execution_id}"), "pid": slot.pid,
                             "restarts": slot.deaths,
                             "status": "stopping" if slot.done else "running",
                             "children": []})
        return rows

    # No on_stop: Thespian sends ActorExitRequest to the edges and waits for
    # them. Killing them here instead trips a Thespian bug (its error callbacks
    # for unreachable children all name the last child, so it waits forever
    # for the others). A busy edge delays the stop until the supervisor kills
    # the node after its shutdown time; the edges die with it.
