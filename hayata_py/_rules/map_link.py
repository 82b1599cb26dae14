"""The agent's side of a map step's reducer: where it runs and what it still needs.

Only a step with ``reduce`` has a reducer; opening one without asks the node
for the step's edges and nothing more (the machine ends that step itself).
The machine opens a map (:class:`~hayata_py._invocation.OpenMap`), forwards
each item's result (``Collect``), asks for consolidation (``Consolidate``)
and closes the map (``CloseMap``). This link turns those into messages to
the node and the reducer: items completed before the reducer is ready wait
here, and a consolidation asked of a reducer that died is asked again of its
replacement (which reads the items it was not sent from the store). Like
:mod:`~hayata_py._rules.edge_pool`, it returns the messages to send as
``(address, message)`` pairs; no Thespian here.
"""

from __future__ import annotations

import uuid
from typing import Any

from hayata_py import _actor_messages as p
from hayata_py import _invocation as m
from hayata_py._config import AgentSpec
from hayata_py._rules.edge_pool import EdgePool

Sends = list[tuple[Any, Any]]
COMMANDS = (m.OpenMap, m.Collect, m.Consolidate, m.CloseMap)
MESSAGES = (p.ReducerReady, p.ReducerGone, p.ReducerAnswer)


class MapLink:
    """The reducer of the agent's current map step (at most one: one step at a time)."""

    def __init__(self, agent: Any, spec: AgentSpec) -> None:
        self.agent, self.spec = agent, spec
        self._reset()

    def _reset(self) -> None:
        self.node_id: str | None = None
        self.start: p.StartReducer | None = None
        self.edges = 1
        self.sent_to: Any = None  # the node the start went to
        self.address: Any = None  # the reducer, once ready
        self.waiting: list[p.ItemResult] = []
        self.consolidate: p.ConsolidateItems | None = None

    def on_command(self, cmd: Any, pool: EdgePool, invocation_id: str) -> Sends:
        if isinstance(cmd, m.OpenMap):
            self._reset()
            self.node_id, self.edges = cmd.node_id, cmd.edges
            if cmd.reduce is not None:  # without one the machine ends the step itself
                self.start = p.StartReducer(cmd.execution_id, invocation_id, cmd.node_id,
                                            cmd.task_ids, cmd.reduce, self.agent,
                                            self.spec.store_url, self.spec.id,
                                            uuid.uuid4().hex)
            return self.node_up(cmd.node_id, pool.address(cmd.node_id))
        start = self.start
        if start is None or cmd.execution_id != start.execution_id:
            return []
        if isinstance(cmd, m.Collect):
            item = p.ItemResult(cmd.execution_id, cmd.item, cmd.result)
            if self.address is None:
                self.waiting.append(item)
                return []
            return [(self.address, item)]
        if isinstance(cmd, m.Consolidate):
            self.consolidate = p.ConsolidateItems(cmd.execution_id, cmd.results)
            return [] if self.address is None else [(self.address, self.consolidate)]
        node = pool.address(start.node_id)
        self._reset()
        return [] if node is None else [(node, p.StopReducer(cmd.execution_id, start.opening))]

    def node_up(self, node_id: str, address: Any) -> Sends:
        """Ask ``node_id`` for the step's edges, and start the reducer on it if the
        step has one, once its address is known."""
        if self.node_id != node_id or address is None or self.sent_to is not None:
            return []
        self.sent_to = address
        ensure = (address, p.EnsureEdges(self.edges))
        return [ensure] if self.start is None else [ensure, (address, self.start)]

    def on_message(self, message: Any) -> tuple[Sends, m.Event | None]:
        start = self.start
        if start is None or message.execution_id != start.execution_id:
            return [], None
        if isinstance(message, p.ReducerReady):
            # A replacement has a new address: what the dead one was sent is read
            # from the items' records; a pending consolidation is asked again.
            self.address = message.address
            sends: Sends = [(message.address, item) for item in self.waiting]
            self.waiting = []
            if self.consolidate is not None:
                sends.append((message.address, self.consolidate))
            return sends, None
        if isinstance(message, p.ReducerGone):
            return [], m.ReducerLost(message.execution_id, message.deaths)
        return [], m.Reduced(message.execution_id, message.ok, message.result, message.error)
