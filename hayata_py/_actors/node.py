"""The node: owns the executions of one node id, its edges and its reducer.

The node never runs user code itself, so it stays responsive while edges
run. It keeps one idle edge ready (no process creation on a step's hot path)
and replaces an edge that was killed (cancelled, timed out) or died. Edges
and the reducer are its child processes: they die with it (PDEATHSIG), and
the edge watcher double-checks by pid.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from thespian.actors import ChildActorExited

from hayata_py import _telemetry as telemetry
from hayata_py._actors._protocol import (
    Cancel,
    Describe,
    Description,
    EdgeInit,
    EdgeReady,
    EdgeResult,
    EdgeStarted,
    EdgeStopped,
    Execute,
    Expect,
    Forget,
    Outcome,
    ReducerDone,
    RunEdge,
    UseWatcher,
)
from hayata_py._errors import ErrorInfo
from supervisors import GetPid, SupervisedActor, host_id, kill_child_process


@dataclass
class _Edge:
    edge_id: str
    address: Any
    pid: int | None = None
    running: Execute | None = None
    killed: bool = False


class NodeActor(SupervisedActor):
    """One node of an agent (child of the node supervisor)."""

    def on_start(self, node_id: str, function: str, watcher: Any, agent_id: str) -> None:
        self.node_id, self.function, self.watcher, self.agent_id = (
            node_id, function, watcher, agent_id)
        self.edges: list[_Edge] = []
        self.queue: list[Execute] = []
        self.spans: dict[str, telemetry.Span] = {}
        self._ids = itertools.count(1)
        self.reducer: Any = None
        self.reducer_pid: int | None = None
        self._new_reducer()
        self._new_edge()
        self.log = self.log.bind(agent_id=agent_id, node_id=node_id)

    # -- children ------------------------------------------------------------------

    def _new_edge(self) -> _Edge:
        from hayata_py._actors.edge import EdgeActor

        edge_id = f"{self.node_id}.edge-{next(self._ids)}"
        edge = _Edge(edge_id, self.createActor(EdgeActor))
        self.send(edge.address, EdgeInit(self.node_id, edge_id, self.function, self.watcher))
        self.edges.append(edge)
        return edge

    def _new_reducer(self) -> None:
        from hayata_py._actors.reducer import ReducerActor

        self.reducer = self.createActor(ReducerActor)
        self.reducer_pid = None
        self.send(self.reducer, GetPid())

    def _edge_at(self, address: Any) -> _Edge | None:
        return next((e for e in self.edges if e.address == address), None)

    def _kill(self, edge: _Edge) -> None:
        if not edge.killed:
            edge.killed = True
            kill_child_process(edge.pid)

    # -- messages ------------------------------------------------------------------

    def on_receive(self, message: Any, sender: Any) -> None:
        if isinstance(message, Execute):
            self.queue.append(message)
            self._serve()
        elif isinstance(message, ReducerDone):
            self._on_reducer_done(message)
        elif isinstance(message, Cancel):
            self._on_cancel(message.execution_id)
        elif isinstance(message, EdgeReady):
            edge = next((e for e in self.edges if e.edge_id == message.edge_id), None)
            if edge is not None:
                edge.pid = message.pid
                if edge.killed:  # cancelled before we knew its pid
                    kill_child_process(edge.pid)
        elif isinstance(message, int) and sender == self.reducer:
            self.reducer_pid = message
        elif isinstance(message, ChildActorExited):
            self._on_child_exited(message.childAddress)
        elif isinstance(message, UseWatcher):
            self.watcher = message.address
            for edge in self.edges:
                if edge.pid is not None and not edge.killed:
                    self.send(self.watcher, EdgeStarted(self.node_id, edge.edge_id, edge.pid,
                                                        host_id()))
        elif isinstance(message, Describe):
            self.send(sender, Description(self._describe()))

    def _serve(self) -> None:
        while self.queue:
            idle = next((e for e in self.edges if e.running is None and not e.killed), None)
            if idle is None:
                if any(e.running is not None and not e.killed for e in self.edges):
                    return  # its ReducerDone is on the way; reuse that edge
                idle = self._new_edge()
            execute = self.queue.pop(0)
            idle.running = execute
            self.spans[execute.execution_id] = telemetry.span_start(telemetry.NODE_EXECUTION, {
                "agent_id": self.agent_id, "node_id": self.node_id,
                "execution_id": execute.execution_id})
            self.send(self.reducer, Expect(execute.execution_id, self.node_id, (idle.edge_id,),
                                           execute.timeout, execute.agent, self.agent_id))
            self.send(idle.address, RunEdge(execute, idle.edge_id, self.reducer, direct=True))

    def _end_span(self, execution_id: str, status: str, error_class: str | None = None
                  ) -> None:
        span = self.spans.pop(execution_id, None)
        if span is None:
            return
        if error_class:
            telemetry.span_exception(span, error_class, status)
        else:
            telemetry.span_stop(span, status)

    def _on_reducer_done(self, done: ReducerDone) -> None:
        self._end_span(done.execution_id, done.status, done.error_class)
        for edge in self.edges:
            if edge.running is not None and edge.running.execution_id == done.execution_id:
                if edge.edge_id in done.pending:
                    self._kill(edge)  # timed out: the only way to stop it
                else:
                    edge.running = None
        self._serve()

    def _on_cancel(self, execution_id: str) -> None:
        self._end_span(execution_id, "cancelled")
        self.queue = [e for e in self.queue if e.execution_id != execution_id]
        for edge in self.edges:
            if edge.running is not None and edge.running.execution_id == execution_id:
                self._kill(edge)
        self.send(self.reducer, Forget(execution_id))

    def _on_child_exited(self, address: Any) -> None:
        if address == self.reducer:
            self._reducer_died()
            return
        edge = self._edge_at(address)
        if edge is None:
            return
        self.edges.remove(edge)
        if self.watcher is not None:
            self.send(self.watcher, EdgeStopped(self.node_id, edge.edge_id))
        if edge.running is not None and not edge.killed:
            # Died on its own (os._exit, signal, OOM): the task failed.
            execute = edge.running
            self.send(self.reducer, EdgeResult(
                execute.execution_id, self.node_id, edge.edge_id, False,
                error=ErrorInfo("node_failed", f"edge process {edge.pid} of node "
                                f"{self.node_id!r} died while running the node function",
                                {"node_id": self.node_id, "edge_id": edge.edge_id})))
        if not any(e.running is None and not e.killed for e in self.edges):
            self._new_edge()
        self._serve()

    def _reducer_died(self) -> None:
        self._new_reducer()
        for edge in self.edges:
            if edge.running is not None and not edge.killed:
                execute = edge.running
                self._end_span(execute.execution_id, "failed")
                self._kill(edge)
                self.send(execute.agent, Outcome(
                    execute.execution_id, self.node_id, False,
                    error=ErrorInfo("node_failed", "the node's reducer died",
                                    {"node_id": self.node_id})))

    def _describe(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = [
            {"role": "edge", "id": e.edge_id, "pid": e.pid, "restarts": 0,
             "status": "killed" if e.killed else ("busy" if e.running else "idle"),
             "children": []}
            for e in self.edges
        ]
        rows.append({"role": "reducer", "id": f"{self.node_id}.reducer",
                     "pid": self.reducer_pid, "restarts": 0, "status": "running",
                     "children": []})
        return rows

    # No on_stop: Thespian sends ActorExitRequest to the edges and the reducer
    # and waits for them. Killing them here instead trips a Thespian bug (its
    # error callbacks for unreachable children all name the last child, so it
    # waits forever for the others). A busy edge delays the stop until the
    # supervisor kills the node after its shutdown time; the edges die with it.
