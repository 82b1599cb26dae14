"""The node: parent and supervisor of the edges of one node id, off the step path.

The node never runs user code and never sees a task. It starts its edges
(one when it starts; more on :class:`EnsureEdges`), publishes them to the
agent (:class:`EdgeTable`), kills one when the agent says its task is over
(:class:`KillEdge`: cancelled, timed out) and replaces any edge that died,
telling the agent (:class:`EdgeLost`) so that a task the edge ran fails.

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
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from thespian.actors import ActorExitRequest, ChildActorExited, WakeupMessage

from hayata_py._actors import procs
from hayata_py._actors._protocol import (
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
    StartReducer,
    StopReducer,
    UseAgent,
    UseWatcher,
)
from hayata_py._actors._wellformed import drop_malformed
from hayata_py._config import MAX_MAP_CONCURRENCY
from supervisors import SupervisedActor, host_id, kill_child_process

RECHECK_AFTER = timedelta(seconds=0.05)
REDUCER_DEATHS = 3
"""A map step's reducer that died this many times is not replaced again: the
node reports it (``ReducerGone``) and the machine fails the step."""
MAX_EDGES = MAX_MAP_CONCURRENCY
"""The most edges a node keeps (the largest ``map_concurrency``): an
``EnsureEdges`` asking for more (or for a count that is no int) is logged and
dropped, never a fork without end."""


@dataclass
class _Edge:
    edge_id: str
    address: Any
    pid: int | None = None
    created: float = 0.0
    killed: bool = False


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
    return procs.running((edge.pid, edge.created), child=True)


class NodeActor(SupervisedActor):
    """One node of an agent (child of the node supervisor)."""

    def on_start(self, node_id: str, function: str, watcher: Any, agent_id: str) -> None:
        self.node_id, self.function, self.watcher, self.agent_id = (
            node_id, function, watcher, agent_id)
        self.edges: list[_Edge] = []
        self.agent: Any = None
        self.wanted = 1
        self.version = 0
        self.recheck_armed = False
        self.reducer: _Reducer | None = None
        self.closed: str | None = None
        self._ids = itertools.count(1)
        self.log = self.log.bind(agent_id=agent_id, node_id=node_id)
        self._new_edge()

    # -- children ------------------------------------------------------------------

    def _new_edge(self) -> None:
        from hayata_py._actors.edge import EdgeActor

        edge_id = f"{self.node_id}.edge-{next(self._ids)}"
        gc.freeze()  # the child shares, rather than copies, what this process holds
        edge = _Edge(edge_id, self.createActor(EdgeActor))
        self.send(edge.address, EdgeInit(self.node_id, edge_id, self.function, self.watcher))
        self.edges.append(edge)

    def _top_up(self) -> None:
        while sum(1 for e in self.edges if not e.killed) < self.wanted:
            self._new_edge()

    def _publish(self) -> None:
        """Tell the agent every edge it may use (initialised, not killed)."""
        if self.agent is None:
            return
        self.version += 1
        self.send(self.agent, EdgeTable(self.node_id, self.version, tuple(
            EdgeRef(e.edge_id, e.address) for e in self.edges
            if e.pid is not None and not e.killed)))

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
            self.recheck_armed = False
            self._reap(None)
        elif isinstance(message, UseAgent):
            self.agent = message.address
            self._publish()
        elif isinstance(message, EnsureEdges):
            count = message.count
            if isinstance(count, bool) or not isinstance(count, int) \
                    or not 1 <= count <= MAX_EDGES:
                self.log.warning("bad_message", message="EnsureEdges", count=repr(count)[:80])
                return
            self.wanted = count
            self._top_up()
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

    # -- the reducer of a map step ---------------------------------------------------

    def _on_reducer(self, message: StartReducer | ReducerUp | ReducerDone | StopReducer
                    ) -> None:
        slot = self.reducer
        if isinstance(message, StartReducer):
            if slot is not None:
                self._stop_reducer(slot)
            if message.opening != self.closed:  # not stopped before it started
                self._new_reducer(message, 0)
            return
        if slot is None or slot.start.execution_id != message.execution_id:
            if isinstance(message, StopReducer):
                self.closed = message.opening  # overtook its StartReducer
            return
        if isinstance(message, ReducerUp):
            slot.pid = message.pid
            who = procs.identity(message.pid)
            slot.created = who[1] if who else -1.0
            self.send(slot.start.agent, ReducerReady(message.execution_id, slot.address))
        else:
            self._stop_reducer(slot)

    def _new_reducer(self, start: StartReducer, deaths: int) -> None:
        from hayata_py._actors.reducer import ReducerActor

        gc.freeze()
        self.reducer = _Reducer(start, self.createActor(ReducerActor), deaths)
        self.send(self.reducer.address, start)

    def _stop_reducer(self, slot: _Reducer) -> None:
        if not slot.done:
            slot.done = True
            self.send(slot.address, ActorExitRequest())

    def _reap_reducer(self, address: Any) -> None:
        """The reducer exited (or is found dead): replace it unless it was done."""
        slot = self.reducer
        if slot is None or (slot.address != address and _alive(slot)):
            return
        self.reducer = None
        if slot.done:
            return
        deaths = slot.deaths + 1
        self.log.warning("reducer_died", execution_id=slot.start.execution_id, pid=slot.pid,
                         deaths=deaths)
        if deaths >= REDUCER_DEATHS:
            self.send(slot.start.agent, ReducerGone(slot.start.execution_id, deaths))
        else:
            self._new_reducer(slot.start, deaths)

    def _on_ready(self, ready: EdgeReady) -> None:
        edge = next((e for e in self.edges if e.edge_id == ready.edge_id), None)
        if edge is None:
            return
        edge.pid = ready.pid
        who = procs.identity(ready.pid)
        edge.created = who[1] if who else -1.0  # -1: already gone, the next check reaps it
        if edge.killed:  # killed before we knew its pid
            kill_child_process(edge.pid)
            return
        self._publish()

    def _on_kill(self, kill: KillEdge) -> None:
        edge = next((e for e in self.edges if e.edge_id == kill.edge_id), None)
        if edge is None or edge.killed:
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
        if address is not None and not self.recheck_armed:
            self.recheck_armed = True
            self.wakeupAfter(RECHECK_AFTER)
        for edge in gone:
            self.edges.remove(edge)
            if self.watcher is not None:
                self.send(self.watcher, EdgeStopped(self.node_id, edge.edge_id))
            if self.agent is not None:
                self.send(self.agent, EdgeLost(
                    self.node_id, edge.edge_id,
                    EdgeExit.KILLED if edge.killed else EdgeExit.DIED, edge.pid))
        if gone:
            self._top_up()
            self._publish()

    def _describe(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = [
            {"role": "edge", "id": e.edge_id, "pid": e.pid, "restarts": 0,
             "status": "killed" if e.killed else "running", "children": []}
            for e in self.edges
        ]
        slot = self.reducer
        if slot is not None and slot.pid is not None:
            rows.append({"role": "reducer", "id": f"{self.node_id}.reducer", "pid": slot.pid,
                         "restarts": slot.deaths,
                         "status": "stopping" if slot.done else "running", "children": []})
        return rows

    # No on_stop: Thespian sends ActorExitRequest to the edges and waits for
    # them. Killing them here instead trips a Thespian bug (its error callbacks
    # for unreachable children all name the last child, so it waits forever
    # for the others). A busy edge delays the stop until the supervisor kills
    # the node after its shutdown time; the edges die with it.
