"""The agent's view of its nodes' edges: which edge runs which task.

Nodes publish their edges (:class:`EdgeTable`); the agent sends each task
straight to an edge of its node with a free slot (an edge runs ``capacity``
tasks at once: ``edge_concurrency`` of an ``async def`` node, else one) and
frees the slot when the task's :class:`Outcome` arrives. Tasks wait here per
node in one first-in first-out queue, across invocations.

Edges on demand: when a node's waiting tasks exceed its free slots (counting
the edges asked for and not yet published), the pool asks the node for more
(:class:`EnsureEdges`, up to ``node_concurrency`` edges), once per need. An
edge beyond a node's first that has been idle for ``edge_idle_timeout`` is
retired (:meth:`EdgePool.retire_due`, driven by the agent's timer through
:meth:`EdgePool.next_retire`): nothing is sent to it again and its node
stops it (:class:`RetireEdge`).

Cancelling a running task of a one-task edge asks its node to kill the edge
(never used again); on an edge that runs several tasks it asks the edge to
cancel that task's coroutine (:class:`CancelRun`), the others go on. An edge
that died ends every task it was running (:meth:`EdgePool.on_lost`).

No Thespian here: methods return the messages to send, as ``(address,
message)`` pairs. Time comes from ``clock`` (monotonic seconds), so tests
pass their own.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from hayata_py import _invocation as m
from hayata_py._actor_messages import (
    CancelRun,
    EdgeExit,
    EdgeLost,
    EdgeTable,
    EnsureEdges,
    KillEdge,
    KillReason,
    RetireEdge,
    RunTask,
)
from hayata_py._config import AgentSpec, default_node_concurrency
from hayata_py._errors import ErrorInfo
from hayata_py._rules.edge_slots import EdgeSlots, NodeEdges, note_pace

Sends = list[tuple[Any, Any]]
_EARLY_TABLES = 4
ITEMS_PER_EDGE = 8
"""Items of one map step an idle one-task edge may be sent at once (a chain:
it runs them one after another, each item's end recorded in the transaction
of the next one's start)."""
CHAIN_BELOW = 0.005
"""Seconds: a node's items are chained only while its tasks take less than
this each (a moving average, as the agent sees them), so a slow item never
holds back more than a few fast ones that another edge could have run."""


class EdgePool:
    """Edges per node, their tasks, and the tasks waiting for a slot."""

    def __init__(self, spec: AgentSpec | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = dict(spec.node_concurrency) if spec is not None else {}
        self.map_concurrency = spec.map_concurrency if spec is not None else 1
        self.capacities = dict(spec.edge_concurrency) if spec is not None else {}
        self.idle_timeout = spec.edge_idle_timeout if spec is not None else 60.0
        self.clock = clock
        self.nodes: dict[str, NodeEdges] = {}
        self.tasks: dict[str, tuple[str, RunTask]] = {}  # task id -> (edge id, task)
        self._seq = itertools.count(1)

    def forget_all(self) -> None:
        """Every node and edge is dead (their supervisor died): forget them all,
        so nothing is sent to them."""
        self.nodes.clear()
        self.tasks.clear()

    def _node(self, node_id: str) -> NodeEdges:
        return self.nodes.setdefault(node_id, NodeEdges())

    def address(self, node_id: str) -> Any:
        return self._node(node_id).address

    def capacity(self, node_id: str) -> int:
        """Tasks one edge of ``node_id`` runs at once."""
        return self.capacities.get(node_id, 1)

    def limit(self, node_id: str) -> int:
        """The most edges the pool asks ``node_id`` for."""
        return self.limits.get(node_id, default_node_concurrency())

    # -- what the nodes and the watcher say -------------------------------------------

    def node_up(self, node_id: str, address: Any) -> Sends:
        """``node_id`` runs at ``address`` (a restarted node has a new one)."""
        node = self._node(node_id)
        if node.address == address:
            return []
        self._forget_edges(node)
        node.address, node.version, node.target, node.asked = address, 0, 1, 0
        early, node.early = node.early, []
        sends: Sends = []
        for sender, table in early:
            sends += self.on_table(sender, table)
        return sends + self._grow(node_id, node)

    def node_down(self, node_id: str) -> None:
        node = self._node(node_id)
        self._forget_edges(node)
        node.address, node.version = None, 0

    def _forget_edges(self, node: NodeEdges) -> None:
        """The node is gone with its edges: their tasks are the machine's to end
        (``NodeDown``); nothing here reports them."""
        for edge in [*node.edges.values(), *node.lost.values()]:
            for task_id in edge.running:
                self.tasks.pop(task_id, None)
        node.edges, node.lost, node.dropped = {}, {}, set()

    def on_table(self, sender: Any, table: EdgeTable) -> Sends:
        node = self._node(table.node_id)
        if node.address is None or sender != node.address:
            node.early = [*node.early[-(_EARLY_TABLES - 1):], (sender, table)]
            return []
        if table.version <= node.version:
            return []  # an older table overtaken by a newer one
        node.version = table.version
        listed = {e.edge_id for e in table.edges}
        node.dropped &= listed  # one the table no longer lists is gone for good
        old, now = node.edges, self.clock()
        node.edges = {}
        for ref in table.edges:
            if ref.edge_id in node.dropped or ref.edge_id in node.lost:
                continue
            edge = old.pop(ref.edge_id, None) or EdgeSlots(ref.address, max(1, ref.capacity),
                                                           idle_since=now)
            node.edges[ref.edge_id] = edge
        for edge_id, edge in old.items():  # killed or dead: wait for its EdgeLost
            if edge.running:
                node.lost[edge_id] = edge
        wanted = table.wanted or len(table.edges)
        node.target = wanted if table.ensured >= node.asked else max(wanted, node.target)
        return self._flush(table.node_id, node)

    def on_lost(self, node_id: str, edge_id: str, exit: EdgeExit) -> list[RunTask]:
        """Edge ``edge_id`` is gone: every task it was running if it died on its own
        (each of them failed), else none (it was killed or retired)."""
        node = self._node(node_id)
        node.dropped.discard(edge_id)
        edge = node.edges.pop(edge_id, None) or node.lost.pop(edge_id, None)
        if edge is None:
            return []
        runs = [self.tasks.pop(t)[1] for t in edge.running if t in self.tasks]
        return runs if exit is EdgeExit.DIED else []

    # -- tasks -----------------------------------------------------------------------

    def dispatch(self, run: RunTask) -> Sends:
        """Send ``run`` to a free slot of its node, or queue it (first in, first out).
        A re-run of a task whose edge died (``attempt`` + 1) is dispatched the same way."""
        node = self._node(run.node_id)
        node.queue[run.task_id] = run
        return self._flush(run.node_id, node)

    def waiting(self, node_id: str, task_id: str) -> bool:
        """The task waits for a free slot of its node (not sent to an edge yet)."""
        return task_id in self._node(node_id).queue

    def done(self, task_id: str) -> Sends:
        """The task's edge reported its outcome: its slot is free again."""
        where = self.tasks.pop(task_id, None)
        if where is None:
            return []
        edge_id, run = where
        node = self._node(run.node_id)
        edge = node.edges.get(edge_id)
        if edge is not None and edge.capacity == 1 and task_id in edge.running:
            now = self.clock()  # the pace decides chains, which only one-task edges get
            sent = edge.running[task_id]
            edge.spent += now - max(sent, edge.last_done)
            edge.ended += 1
            edge.last_done = now
            if not any(at == sent and t != task_id for t, at in edge.running.items()):
                note_pace(node, edge.spent / edge.ended, edge.ended)
                edge.spent, edge.ended = 0.0, 0
        if edge is None:
            lost = node.lost.get(edge_id)
            if lost is not None:
                lost.running.pop(task_id, None)
                if not lost.running:
                    del node.lost[edge_id]
            return []
        self._release(edge, task_id)
        return self._flush(run.node_id, node)

    def cancel(self, node_id: str, task_id: str, reason: KillReason) -> Sends:
        """The task is over: drop it if it waits; else kill its edge (one task at
        a time) or have the edge cancel it (several at once: the others go on)."""
        node = self._node(node_id)
        if node.queue.pop(task_id, None) is not None:
            return []
        where = self.tasks.pop(task_id, None)
        if where is None:
            return []
        edge_id = where[0]
        edge = node.edges.get(edge_id)
        if edge is None:
            lost = node.lost.get(edge_id)
            if lost is not None:
                lost.running.pop(task_id, None)
            return []
        if edge.capacity > 1:
            self._release(edge, task_id)
            return [(edge.address, CancelRun(task_id, reason)), *self._flush(node_id, node)]
        del node.edges[edge_id]  # never used again; the node replaces it
        node.dropped.add(edge_id)
        sends: Sends = [] if node.address is None else [(node.address,
                                                         KillEdge(edge_id, reason))]
        return sends + self._flush(node_id, node)

    def _release(self, edge: EdgeSlots, task_id: str) -> None:
        edge.running.pop(task_id, None)
        if not edge.running:
            edge.idle_since = self.clock()

    def _flush(self, node_id: str, node: NodeEdges) -> Sends:
        """Send waiting tasks to free slots (the first edge in table order that has
        one: busy edges fill up, idle ones stay idle and retire), then ask for more
        edges if tasks still wait. Tasks go in the order they came, but for a map
        item whose step already runs ``map_concurrency`` items at once: it waits,
        and the tasks behind it do not. An idle one-task edge of a fast node that
        takes a map item takes a chain of them."""
        sends: Sends = []
        if node.queue:
            now = self.clock()
            full: set[str] = set()  # map steps that run map_concurrency items already
            for edge_id, edge in node.edges.items():
                while node.queue and edge.free() > 0:
                    task_id = self._next_task(node, full)
                    if task_id is None:
                        return sends + self._grow(node_id, node)
                    for run in self._with_chain(node, edge, node.queue.pop(task_id)):
                        edge.running[run.task_id] = now
                        edge.idle_since = None
                        self.tasks[run.task_id] = (edge_id, run)
                        sends.append((edge.address, run))
                if not node.queue:
                    break
        return sends + self._grow(node_id, node)

    def _next_task(self, node: NodeEdges, full: set[str]) -> str | None:
        """The first waiting task that may start now (``full``: steps found at
        their ``map_concurrency``, added to as they are found)."""
        for task_id, run in node.queue.items():
            if run.item is None:
                return task_id
            if run.execution_id in full:
                continue
            if self._map_slots(node, run.execution_id) < self.map_concurrency:
                return task_id
            full.add(run.execution_id)
        return None

    def _map_slots(self, node: NodeEdges, execution_id: str) -> int:
        """Items of map step ``execution_id`` running at once (a chain on a
        one-task edge counts once: its items run one at a time)."""
        slots = 0
        for edge in node.edges.values():
            for task_id in edge.running:
                run = self.tasks[task_id][1]
                if run.item is not None and run.execution_id == execution_id:
                    slots += 1
                    if edge.capacity == 1:
                        break
        return slots

    @staticmethod
    def _with_chain(node: NodeEdges, edge: EdgeSlots, first: RunTask) -> list[RunTask]:
        """``first`` and, if it starts a chain, the waiting items of its step that
        join it: ``first`` is a map item going to a one-task edge of a node whose
        tasks take less than ``CHAIN_BELOW`` each; up to ``ITEMS_PER_EDGE``."""
        if first.item is None or first.function or edge.capacity != 1 \
                or node.pace is None or node.pace >= CHAIN_BELOW:
            return [first]
        chain = [first]
        for run in node.queue.values():
            if len(chain) >= ITEMS_PER_EDGE:
                break
            if run.item is not None and not run.function \
                    and run.execution_id == first.execution_id:
                chain.append(run)
        for run in chain[1:]:
            del node.queue[run.task_id]
        return chain

    def _grow(self, node_id: str, node: NodeEdges) -> Sends:
        """Ask the node for the edges its waiting tasks need beyond its free slots
        (edges asked for and not yet published count as free), up to its limit."""
        if not node.queue or node.address is None:
            return []
        capacity = self.capacity(node_id)
        have = max(node.target, len(node.edges))
        free = sum(e.free() for e in node.edges.values()) \
            + (have - len(node.edges)) * capacity
        if len(node.queue) <= free or have >= self.limit(node_id):
            return []  # (checked first: the count below walks the queue)
        # A map step asks for its own edges (map_concurrency, OpenMap): its
        # items that wait never make the node grow beyond them.
        short = sum(1 for run in node.queue.values() if run.item is None) - free
        if short <= 0:
            return []
        want = min(self.limit(node_id), have + -(-short // capacity))
        if want <= have:
            return []
        node.target, node.asked = want, next(self._seq)
        return [(node.address, EnsureEdges(want * capacity, node.asked))]

    # -- idle edges ------------------------------------------------------------------

    def retire_due(self, now: float) -> Sends:
        """Retire every edge but its node's first (in table order, the one tasks go
        to first) that has been idle for ``edge_idle_timeout`` at ``now``
        (monotonic): nothing is sent to it again, and its node is told to stop
        it (:class:`RetireEdge`)."""
        sends: Sends = []
        for node in self.nodes.values():
            if node.address is None or node.queue or len(node.edges) <= 1:
                continue
            first = next(iter(node.edges))  # the one tasks go to first: kept
            due = sorted((e.idle_since, edge_id) for edge_id, e in node.edges.items()
                         if edge_id != first and e.idle_since is not None
                         and e.idle_since + self.idle_timeout <= now)
            for _, edge_id in due:
                del node.edges[edge_id]
                node.dropped.add(edge_id)
                node.target = max(1, node.target - 1)
                sends.append((node.address, RetireEdge(edge_id)))
        return sends

    def next_retire(self, now: float) -> float | None:
        """When (monotonic, ``now`` at the earliest) the next idle edge becomes due
        for retirement; None while no node has an idle edge beyond its first."""
        due: float | None = None
        for node in self.nodes.values():
            if node.address is None or len(node.edges) <= 1:
                continue
            for edge in list(node.edges.values())[1:]:  # never the first
                if edge.idle_since is not None:
                    at = edge.idle_since + self.idle_timeout
                    due = at if due is None else min(due, at)
        return None if due is None else max(due, now)


def chain_windows(spec: AgentSpec) -> dict[str, int]:
    """Map items out at once per node whose edges run one task at a time: enough
    for a chain on each of the step's ``map_concurrency`` edges
    (``Rules.map_window``)."""
    return {node: spec.map_concurrency * ITEMS_PER_EDGE for node in spec.nodes
            if spec.edge_concurrency.get(node, 1) == 1}


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
        agent_id=spec.id, checkpoint=checkpoint, history=cmd.history, retry=cmd.retry,
        retry_on=() if cmd.function or not policy else policy.retry_on,  # type: ignore[arg-type]
        thread=inv.thread, function=cmd.function or "")


def edge_died(lost: EdgeLost) -> ErrorInfo:
    """The failure of each task an edge was running when its process died."""
    return ErrorInfo("node_failed", f"edge process {lost.pid} of node {lost.node_id!r} "
                     "died while running the node function",
                     {"node_id": lost.node_id, "edge_id": lost.edge_id})
