"""What the agent's edge pool knows of each node and each of its edges: the
records :class:`~hayata_py._rules.edge_pool.EdgePool` keeps per node
(:class:`NodeEdges`: its address, edges, waiting tasks, how many edges it
should have, its pace) and per edge (:class:`EdgeSlots`: its slots and the
tasks in them), and how a node's pace (the moving average of the seconds one
of its tasks takes, which decides whether its map items go out as chains)
follows the tasks that end (:func:`note_pace`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from hayata_py._actor_messages import EdgeTable, RunTask

_PACE_WEIGHT = 0.3


@dataclass
class EdgeSlots:
    """One edge of a node, as the pool sees it: its slots and the tasks in them."""

    address: Any
    capacity: int
    running: dict[str, float] = field(default_factory=dict)
    """Task id -> when it was sent, in the order sent."""
    idle_since: float | None = None  # None while it runs a task
    last_done: float = 0.0  # when its last task's outcome came
    spent: float = 0.0  # seconds the tasks of its current chain took so far
    ended: int = 0  # tasks of its current chain that ended so far

    def free(self) -> int:
        return max(0, self.capacity - len(self.running))  # a chain fills more than one


@dataclass
class NodeEdges:
    """One node, as the pool sees it: its edges and the tasks waiting for them."""

    address: Any = None
    version: int = 0
    edges: dict[str, EdgeSlots] = field(default_factory=dict)
    """Edges the pool may send to: published, not retiring, in table order."""
    lost: dict[str, EdgeSlots] = field(default_factory=dict)
    """Edges a newer table no longer lists while they ran tasks: their
    :class:`~hayata_py._actor_messages.EdgeLost` (which fails those tasks)
    may still be on its way."""
    dropped: set[str] = field(default_factory=set)
    """Edges the pool has killed or retired: a table that still lists them (sent
    before the node acted) does not bring them back."""
    queue: OrderedDict[str, RunTask] = field(default_factory=OrderedDict)
    """Task id -> task, first in first out (an OrderedDict: taking the oldest is
    O(1); a dict's first key is found by skipping the slots of removed ones)."""
    target: int = 1
    """Edges the node keeps or is starting, as far as the pool knows."""
    asked: int = 0  # seq of the pool's last EnsureEdges to this node address
    pace: float | None = None
    """Moving average of the seconds one task of this node takes on its edge."""
    early: list[tuple[Any, EdgeTable]] = field(default_factory=list)
    """Tables from an address that is not (yet) the node's current one."""


def note_pace(node: NodeEdges, took: float, tasks: int) -> None:
    """``tasks`` tasks of ``node`` took ``took`` seconds each (a chain's Outcomes
    come together: its time is shared out among its items)."""
    if node.pace is None:
        node.pace = took
    else:
        node.pace = took + (node.pace - took) * (1 - _PACE_WEIGHT) ** tasks
