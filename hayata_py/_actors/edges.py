"""The agent's view of its nodes' edges: which edge runs which task.

Nodes publish their edges (:class:`EdgeTable`); the agent sends each task
straight to an idle edge of its node and frees the edge when the edge's
:class:`Outcome` arrives. A task for a node without an idle edge (its node
is restarting, or replacing a killed edge) waits here until one is
published. Cancelling a running task asks its node to kill the edge; the
edge is never used again. No Thespian here: methods return the messages to
send, as ``(address, message)`` pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hayata_py import _invocation as m
from hayata_py._actors._protocol import (
    EdgeExit,
    EdgeLost,
    EdgeTable,
    KillEdge,
    KillReason,
    RunTask,
)
from hayata_py._config import AgentSpec
from hayata_py._errors import ErrorInfo

Sends = list[tuple[Any, Any]]
_EARLY_TABLES = 4


@dataclass
class _Node:
    address: Any = None
    version: int = 0
    edges: dict[str, Any] = field(default_factory=dict)  # edge id -> address
    busy: dict[str, str] = field(default_factory=dict)  # edge id -> task id
    queue: list[RunTask] = field(default_factory=list)
    early: list[tuple[Any, EdgeTable]] = field(default_factory=list)
    """Tables from an address that is not (yet) the node's current one."""


class EdgePool:
    """Edges per node, their tasks, and the tasks waiting for an edge."""

    def __init__(self) -> None:
        self.nodes: dict[str, _Node] = {}
        self.tasks: dict[str, tuple[str, RunTask]] = {}  # task id -> (edge id, task)

    def _node(self, node_id: str) -> _Node:
        return self.nodes.setdefault(node_id, _Node())

    def address(self, node_id: str) -> Any:
        return self._node(node_id).address

    # -- what the nodes and the watcher say -------------------------------------------

    def node_up(self, node_id: str, address: Any) -> Sends:
        """``node_id`` runs at ``address`` (a restarted node has a new one)."""
        node = self._node(node_id)
        if node.address == address:
            return []
        self._forget_edges(node_id, node)
        node.address, node.version = address, 0
        early, node.early = node.early, []
        sends: Sends = []
        for sender, table in early:
            sends += self.on_table(sender, table)
        return sends

    def node_down(self, node_id: str) -> None:
        node = self._node(node_id)
        self._forget_edges(node_id, node)
        node.address, node.version = None, 0

    def _forget_edges(self, node_id: str, node: _Node) -> None:
        for task_id in node.busy.values():
            self.tasks.pop(task_id, None)
        node.edges, node.busy = {}, {}

    def on_table(self, sender: Any, table: EdgeTable) -> Sends:
        node = self._node(table.node_id)
        if node.address is None or sender != node.address:
            node.early = [*node.early[-(_EARLY_TABLES - 1):], (sender, table)]
            return []
        if table.version <= node.version:
            return []  # an older table overtaken by a newer one
        node.version = table.version
        node.edges = {e.edge_id: e.address for e in table.edges}
        for edge_id in [e for e in node.busy if e not in node.edges]:
            self.tasks.pop(node.busy.pop(edge_id), None)
        return self._flush(table.node_id)

    def on_lost(self, node_id: str, edge_id: str, exit: EdgeExit) -> RunTask | None:
        """Edge ``edge_id`` is gone; the task it was running if it died on its own
        (that task failed), else None."""
        node = self._node(node_id)
        node.edges.pop(edge_id, None)
        task_id = node.busy.pop(edge_id, None)
        where = self.tasks.pop(task_id, None) if task_id is not None else None
        return where[1] if where is not None and exit is EdgeExit.DIED else None

    # -- tasks -----------------------------------------------------------------------

    def dispatch(self, run: RunTask) -> Sends:
        self._node(run.node_id).queue.append(run)
        return self._flush(run.node_id)

    def done(self, task_id: str) -> Sends:
        """The task's edge reported its outcome: the edge is free again."""
        where = self.tasks.pop(task_id, None)
        if where is None:
            return []
        edge_id, run = where
        self._node(run.node_id).busy.pop(edge_id, None)
        return self._flush(run.node_id)

    def cancel(self, node_id: str, task_id: str, reason: KillReason) -> Sends:
        """The task is over: drop it if it waits, else kill its edge."""
        node = self._node(node_id)
        node.queue = [r for r in node.queue if r.task_id != task_id]
        where = self.tasks.pop(task_id, None)
        if where is None:
            return []
        edge_id = where[0]
        node.busy.pop(edge_id, None)
        node.edges.pop(edge_id, None)  # never used again; the node replaces it
        return [(node.address, KillEdge(edge_id, reason))] if node.address is not None else []

    def _flush(self, node_id: str) -> Sends:
        node = self._node(node_id)
        sends: Sends = []
        while node.queue:
            idle = next((e for e in node.edges if e not in node.busy), None)
            if idle is None:
                break
            run = node.queue.pop(0)
            node.busy[idle] = run.task_id
            self.tasks[run.task_id] = (idle, run)
            sends.append((node.edges[idle], run))
        return sends


def run_task(spec: AgentSpec, inv: m.Invocation, cmd: m.Dispatch, agent: Any,
             token: int, checkpoint: Any = None) -> RunTask:
    """The edge's message for the machine's ``Dispatch`` (``agent``: where the
    outcome goes; ``token``: the invocation's lease token, fencing the edge's writes;
    ``checkpoint``: the step's, for the edge to commit with ``started``)."""
    policy = spec.retry.get(cmd.key.node_id)
    return RunTask(
        cmd.execution_id, cmd.task_id, inv.id, cmd.key.node_id, cmd.input, cmd.state,
        agent, inv.stream, idempotency_key=cmd.task_id, step=cmd.step,
        branch_index=cmd.branch_index, item=cmd.key.item, token=token,
        attempt=cmd.attempt, store_url=spec.store_url, instance=spec.instance,
        agent_id=spec.id, checkpoint=checkpoint, history=cmd.history,
        retry_on=policy.retry_on if policy else ())  # type: ignore[arg-type]


def edge_died(lost: EdgeLost) -> ErrorInfo:
    """The failure of the task an edge was running when its process died."""
    return ErrorInfo("node_failed", f"edge process {lost.pid} of node {lost.node_id!r} "
                     "died while running the node function",
                     {"node_id": lost.node_id, "edge_id": lost.edge_id})
