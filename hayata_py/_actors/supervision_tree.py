"""The supervisors of hayata_py: top, per-agent, and per-agent nodes.

::

    hayata (Supervisor, one_for_one)          one child per agent, added at start_agent
    └── agent:<id> (AgentSupervisor, rest_for_one)
        ├── nodes (NodeSupervisor, one_for_one)
        │   ├── edge_watcher (EdgeWatcher)
        │   └── node:<node_id> (NodeActor) ... -> its edges (its child processes)
        └── agent (AgentActor)                 gets the node supervisor's address

rest_for_one: if the node supervisor gives up, the agent restarts after it
(with the fresh address); if the agent crashes, the nodes keep running.

Placement: an agent's ``placement`` is the requirements of its
``agent:<id>`` child (the whole subtree runs where it is created), a node's
``node_placement`` those of its ``node:<id>`` child. Supervisors watch
children placed on other systems by heartbeats (``spec.liveness``).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from hayata_py._actor_messages import (
    GetSystemInfo,
    NodeEvent,
    SystemInfo,
    UseAgent,
    UseWatcher,
    WatchNodes,
)
from hayata_py._actors._wellformed import drop_malformed
from hayata_py._config import AgentSpec, Liveness
from hayata_py._invocation import DownCause
from supervisors import (
    ChildEvent,
    ChildEventKind,
    ChildSpec,
    ExitKind,
    Kind,
    Sibling,
    Start,
    Strategy,
    Supervisor,
    SupervisorFlags,
)

TOP_FLAGS = SupervisorFlags(Strategy.ONE_FOR_ONE, intensity=100, period=10.0)
AGENT_FLAGS = SupervisorFlags(Strategy.REST_FOR_ONE, intensity=10, period=10.0)
NODE_FLAGS = SupervisorFlags(Strategy.ONE_FOR_ONE, intensity=20, period=10.0)



RUNTIME_MODULES = (
    "hayata_py._actors.agent", "hayata_py._actors.node", "hayata_py._actors.edge",
    "hayata_py._actors.watcher", "hayata_py.store._sql.store", "hayata_py.store._fast.writer",
    "sqlite3", "psutil",
)


def preload_runtime() -> None:
    """Import what the agent, nodes and edges need, in a supervisor before it forks
    them: a module imported before the fork is shared by every child (and frozen
    out of their garbage collector's reach by ``gc.freeze``), one imported after
    it is a private copy in each process (SQLAlchemy alone is several MB)."""
    for name in RUNTIME_MODULES:
        importlib.import_module(name)


def with_liveness(flags: SupervisorFlags, liveness: Liveness) -> SupervisorFlags:
    """``flags`` with the heartbeat settings of ``liveness``."""
    return dataclasses.replace(flags, heartbeat=liveness.heartbeat,
                               heartbeat_misses=liveness.heartbeat_misses)


def down_cause(event: ChildEvent) -> DownCause:
    """Why a node is down, from its supervisor's typed event (never from its text)."""
    if event.kind is ChildEventKind.WAITING:
        return DownCause.WAITING_FOR_PLACEMENT
    if event.exit is ExitKind.UNREACHABLE:
        return DownCause.UNREACHABLE
    if event.exit in (ExitKind.NORMAL, ExitKind.SHUTDOWN):
        return DownCause.STOPPED
    return DownCause.CRASHED


NODE_PREFIX = "node:"
AGENT_PREFIX = "agent:"


class TopSupervisor(Supervisor):
    """The top supervisor; it also tells attached processes how to reach the
    store and which system instance owns it (``GetSystemInfo``)."""

    def init(self, *args: Any, **kwargs: Any) -> tuple[SupervisorFlags, list[ChildSpec]]:
        flags, children, info = args
        self.system_info: SystemInfo = info
        if info.owner is not None:
            from hayata_py._actors.owner_watch import watch_owner

            watch_owner(info.owner, self.log)
        preload_runtime()
        return flags, list(children)

    def on_message(self, message: Any, sender: Any) -> None:
        if isinstance(message, GetSystemInfo):
            self.send(sender, self.system_info)
            return
        super().on_message(message, sender)


class AgentSupervisor(Supervisor):
    """Supervises one agent: its node supervisor, then the agent actor."""

    def init(self, *args: Any, **kwargs: Any) -> tuple[SupervisorFlags, list[ChildSpec]]:
        from hayata_py._actors.agent import AgentActor

        (spec,) = args
        preload_runtime()  # also here: the agent may be placed on another system
        return with_liveness(AGENT_FLAGS, spec.liveness), [
            ChildSpec("nodes", Start(NodeSupervisor, (spec,)), kind=Kind.SUPERVISOR),
            ChildSpec("agent", Start(AgentActor, (spec, Sibling("nodes")))),
        ]


class NodeSupervisor(Supervisor):
    """Supervises the edge watcher and one node actor per node id; tells the
    watcher about every node start and exit."""

    def init(self, *args: Any, **kwargs: Any) -> tuple[SupervisorFlags, list[ChildSpec]]:
        from hayata_py._actors.node import NodeActor
        from hayata_py._actors.watcher import EdgeWatcher

        spec: AgentSpec = args[0]
        self.subscriber: Any = None
        children = [ChildSpec("edge_watcher", Start(EdgeWatcher, (spec.id,)))]
        for node_id, function in spec.nodes.items():
            children.append(ChildSpec(
                NODE_PREFIX + node_id,
                Start(NodeActor, (node_id, function, Sibling("edge_watcher"), spec.id,
                                  spec.edge_concurrency.get(node_id, 1)),
                      requirements=spec.node_placement.get(node_id, {})),
                shutdown=2.0))
        return with_liveness(NODE_FLAGS, spec.liveness), children

    def _nodes(self) -> dict[str, Any]:
        return {
            info.id[len(NODE_PREFIX):]: info.address
            for info in self.child_infos()
            if info.id.startswith(NODE_PREFIX) and info.address is not None
        }

    def on_child_event(self, event: ChildEvent) -> None:
        watcher = self.child_address("edge_watcher")
        started = event.kind is ChildEventKind.STARTED
        if event.child_id.startswith(NODE_PREFIX):
            if started and self.subscriber is not None:
                self.send(event.address, UseAgent(self.subscriber))
            if watcher is not None:
                self.send(watcher, NodeEvent(
                    event.child_id[len(NODE_PREFIX):], started, event.address, event.pid,
                    None if started else down_cause(event), event.reason))
        elif event.child_id == "edge_watcher" and started:
            # A restarted watcher has a new address: tell the nodes (they register
            # their edges with it again) and hand it the agent to notify.
            for address in self._nodes().values():
                self.send(address, UseWatcher(event.address))
            if self.subscriber is not None:
                self.send(event.address, WatchNodes(self.subscriber, self._nodes()))

    def on_message(self, message: Any, sender: Any) -> None:
        if isinstance(message, WatchNodes):
            if drop_malformed(self.log, message):
                # Kept, it would be handed to every node restarted later, which
                # would drop it too and never tell the agent of its edges: the
                # agent's tasks for that node would wait for ever (found by the
                # concurrent chaos campaign: garbage, then a node killed).
                return
            self.subscriber = message.subscriber or sender
            watcher = self.child_address("edge_watcher")
            if watcher is not None:
                self.send(watcher, WatchNodes(self.subscriber, self._nodes()))
            for address in self._nodes().values():
                self.send(address, UseAgent(self.subscriber))
            return
        super().on_message(message, sender)
