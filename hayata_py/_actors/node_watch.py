"""What an agent hears of its nodes and edges coming and going: the node
table (where each node runs, which no system can run now), a node started or
restarted, an edge lost with the tasks it was running; a part of
:class:`~hayata_py._actors.agent.AgentActor`.

A lost edge's tasks fail (``node_failed``), unless the edge recorded a task's
end before it died (that record is its outcome) or the task's node is
idempotent (it runs again at once on another edge). A node's death itself
comes as ``NodeExited``, which the agent feeds to every running invocation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hayata_py import _actor_messages as p
from hayata_py import _invocation as m
from hayata_py._actors import process_identity
from hayata_py._actors.circuit_gate import CircuitGate
from hayata_py._actors.in_flight import AgentHost, InFlight
from hayata_py._actors.ledger import Ledger
from hayata_py._actors.spans import InvocationSpans
from hayata_py._config import AgentSpec
from hayata_py._rules.deadlines import invocation_of
from hayata_py._rules.edge_pool import EdgePool, edge_died
from hayata_py._rules.recovery import recorded_outcome


class NodeWatch:
    """The agent's nodes and edges: tables, restarts, losses; which nodes no
    system can run now (:attr:`unplaced`) and the node supervisor's process."""

    def __init__(self, host: AgentHost, running: dict[str, InFlight], spec: AgentSpec,
                 log: Any, ledger: Ledger, pool: EdgePool, gate: CircuitGate,
                 spans: InvocationSpans) -> None:
        self.host = host
        self.running = running
        self.spec = spec
        self.log = log
        self.ledger = ledger
        self.pool = pool
        self.gate = gate
        self.spans = spans
        self.unplaced: dict[str, str] = {}  # node id -> why no system can run it now
        self.nodes_sup: process_identity.Identity | None = None  # the node supervisor process

    def nodes_lost(self) -> bool:
        """The node supervisor died: its nodes and edges are gone."""
        return self.nodes_sup is not None and not process_identity.running(self.nodes_sup)

    def on_node_table(self, table: p.NodeTable) -> None:
        self.unplaced = dict(table.waiting)
        if table.supervisor_pid is not None:
            self.nodes_sup = process_identity.identity(table.supervisor_pid) or (
                table.supervisor_pid, -1.0)
        for node_id, address in table.nodes.items():
            self.node_up(node_id, address)

    def on_node_up(self, up: p.NodeUp) -> None:
        self.unplaced.pop(up.node_id, None)
        self.node_up(up.node_id, up.address)

    def node_up(self, node_id: str, address: Any) -> None:
        sends = self.pool.node_up(node_id, address)
        for run in self.running.values():
            if run.map is not None:
                sends += run.map.node_up(node_id, address)
        self.host.sends(sends)

    def on_node_down(self, down: p.NodeExited) -> None:
        """Every running invocation hears that the node is down."""
        self.pool.node_down(down.node_id)
        if down.cause is m.DownCause.WAITING_FOR_PLACEMENT:
            self.unplaced[down.node_id] = down.reason
        self.host.feed_all(m.NodeDown(down.node_id, down.cause, down.pid, down.reason))

    def on_edge_lost(self, lost: p.EdgeLost) -> None:
        """Every task the edge was running when it died fails (none if it was
        killed or retired), unless its end is recorded (a chain's items report
        together, at its end): then that record is its outcome. A task of an
        idempotent node runs again at once."""
        error = edge_died(lost)
        failed = []
        for task in self.pool.on_lost(lost.node_id, lost.edge_id, lost.exit):
            run = self.running.get(invocation_of(task.execution_id))
            if run is None:
                continue
            recorded = self._recorded_end(task, lost.edge_id)
            if recorded is not None:
                self.host.outcome(recorded)
                continue
            if task.node_id in self.spec.idempotent_nodes and not task.function:
                # The node may run again: the task runs at once on another edge, as
                # recovery would run it (attempt + 1, the same idempotency key).
                self.log.info("task_rerun", task_id=task.task_id, attempt=task.attempt + 1)
                self.host.sends(self.pool.dispatch(dataclasses.replace(
                    task, attempt=task.attempt + 1)))
                continue
            self.spans.task_ended(run.inv.id, task.task_id, error)
            failed.append((run, task))
        for run, task in failed:  # spans first: the first failure cancels its siblings
            if not task.function:  # a compensator's death does not count for the node
                for change in self.gate.outcome(task.node_id, task.task_id, False, error):
                    self.host.feed_all(change)
            self.host.feed(run, m.TaskOutcome(task.execution_id, m.TaskKey(task.node_id, task.item),
                                          False, error=error))

    def _recorded_end(self, task: p.RunTask, edge_id: str) -> p.Outcome | None:
        """The Outcome of ``task`` from its durable record, if its edge recorded
        its end before it died; None if not, or unreadable."""
        store = self.ledger.store
        if store is None or task.function:
            return None
        try:
            record = store.get_task(task.task_id)
        except Exception as exc:  # noqa: BLE001 - unreadable: the task fails as today
            self.log.warning("task_record_unreadable", task_id=task.task_id, error=str(exc))
            return None
        return recorded_outcome(task, record, edge_id)
