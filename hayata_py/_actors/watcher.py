"""The edge watcher: no edge outlives a dead node, and the agent hears of it.

Thespian tells only a node's parent (the node supervisor) that the node
died. The node supervisor forwards every node start and exit here. On an
exit the watcher kills whatever edge process of that node is still alive
(they normally die with the node through PDEATHSIG; the watcher checks by
pid and start time, so a reused pid is never hit), then tells the agent
(``NodeExited``), which fails the running execution with ``node_crashed`` at
once instead of waiting for its timeout. Node restarts are announced as
``NodeUp`` with the new address.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import psutil

from hayata_py._actor_messages import (
    EdgeStarted,
    EdgeStopped,
    NodeEvent,
    NodeExited,
    NodeTable,
    NodeUp,
    WatchNodes,
)
from hayata_py._actors._wellformed import drop_malformed
from hayata_py._invocation import DownCause
from supervisors import SupervisedActor, host_id, wait_gone


class EdgeWatcher(SupervisedActor):
    """One per agent, child of the node supervisor."""

    def on_start(self, agent_id: str) -> None:
        self.host = host_id()
        self.agent_id = agent_id
        self.subscriber: Any = None
        self.nodes: dict[str, Any] = {}
        self.waiting: dict[str, str] = {}  # node id -> why it waits for a host
        self.edges: dict[str, dict[str, tuple[int, float]]] = {}
        self.log = self.log.bind(agent_id=agent_id)

    def on_receive(self, message: Any, sender: Any) -> None:
        if drop_malformed(self.log, message):
            return
        if isinstance(message, NodeEvent):
            self._on_node_event(message)
        elif isinstance(message, EdgeStarted):
            if message.host and message.host != self.host:
                # A node placed on another host: its pid means nothing here (it
                # could name an unrelated local process). Its edges die with it
                # there (PDEATHSIG).
                return
            try:
                created = psutil.Process(message.pid).create_time()
            except psutil.NoSuchProcess:
                return
            self.edges.setdefault(message.node_id, {})[message.edge_id] = (message.pid, created)
        elif isinstance(message, EdgeStopped):
            self.edges.get(message.node_id, {}).pop(message.edge_id, None)
        elif isinstance(message, WatchNodes):
            self.subscriber = message.subscriber
            self.nodes.update(message.nodes)
            self.send(self.subscriber, NodeTable(dict(self.nodes), dict(self.waiting),
                                                 os.getppid()))

    def _on_node_event(self, event: NodeEvent) -> None:
        if event.up:
            self.waiting.pop(event.node_id, None)
            self.nodes[event.node_id] = event.address
            if self.subscriber is not None:
                self.send(self.subscriber, NodeUp(event.node_id, event.address, event.pid))
            return
        self.nodes.pop(event.node_id, None)
        cause = event.cause or DownCause.CRASHED
        if cause is DownCause.WAITING_FOR_PLACEMENT:
            self.waiting[event.node_id] = event.reason or ""
        killed = self._kill_edges(event.node_id)
        self.log.info("node_down", node_id=event.node_id, node_pid=event.pid,
                      cause=cause.value, reason=event.reason, edges_killed=killed)
        if self.subscriber is not None:
            self.send(self.subscriber, NodeExited(event.node_id, event.pid, cause,
                                                event.reason or ""))

    def _kill_edges(self, node_id: str) -> list[int]:
        killed = []
        procs = []
        for pid, created in self.edges.pop(node_id, {}).values():
            try:
                proc = psutil.Process(pid)
                if proc.create_time() != created or proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                proc.send_signal(signal.SIGKILL)
                procs.append(proc)
                killed.append(pid)
            except psutil.NoSuchProcess:
                continue
        wait_gone(procs, timeout=2.0)
        return killed
