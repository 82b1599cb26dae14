"""The campaign's graphs: data (a plan of steps) run by one policy and one node function.

Every node appends ``start <task_id> <node_id> <pid>`` before its work and
``end <task_id> <node_id> <pid>`` after it to the side-effect file named in
the input (fsynced), so the campaign can compare what really ran with what
the store says. ``delay`` (seconds, per node) is the node's work.

A graph is a plan: a list of steps, each a node id (sequential) or a list of
node ids (parallel), or ``{"map": node, "items": n}`` (a map step, which
:func:`policy` turns into ``hy.Map``). Retries and pauses would be one step
kind each, the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import hayata_py as hy
from examples.drills.effects import append_effect

Step = str | list[str] | dict[str, Any]


@dataclass(frozen=True)
class Graph:
    """A campaign graph: its nodes and its plan."""

    name: str
    nodes: tuple[str, ...]
    plan: tuple[Step, ...]

    def config(self, agent_id: str, *, execution_timeout: float = 30.0,
               lease_seconds: float = 10.0) -> hy.AgentConfig:
        return hy.AgentConfig(
            id=agent_id, nodes={n: "tests.chaos.nodes:work" for n in self.nodes},
            decision_policy="tests.chaos.nodes:policy",
            execution_timeout=execution_timeout, lease_seconds=lease_seconds)

    def input(self, effects: str, delay: float = 0.0) -> dict[str, Any]:
        return {"effects": effects, "plan": list(self.plan), "delay": delay}


GRAPHS: dict[str, Graph] = {
    "sequential": Graph("sequential", ("a", "b", "c"), ("a", "b", "c")),
    "parallel": Graph("parallel", ("fan", "x", "y", "join"), ("fan", ["x", "y"], "join")),
    "map": Graph("map", ("split", "item", "join"), ("split", {"map": "item", "items": 3}, "join")),
}


def _effect(ctx: hy.NodeContext, event: str) -> None:
    append_effect(ctx, event, ctx.task_id, ctx.node_id)


def work(ctx: hy.NodeContext) -> dict[str, Any]:
    """The node function of every campaign node."""
    _effect(ctx, "start")
    delay = float(ctx.input.get("delay", 0.0))
    if delay:
        time.sleep(delay)  # the node's work (a user's external call)
    _effect(ctx, "end")
    return {ctx.node_id: f"{ctx.node_id}-done"}


def policy(ctx: hy.PolicyContext) -> Any:
    """Run the plan in ``ctx.input``, one step per decision, then finish."""
    plan: list[Step] = ctx.input["plan"]
    if ctx.step >= len(plan):
        return hy.Finish({"steps": ctx.step})
    step = plan[ctx.step]
    if isinstance(step, dict):
        mapper = getattr(hy, "Map")  # noqa: B009 - exists once map steps land
        return mapper(step["map"], [ctx.input] * int(step["items"]))
    return hy.Next(step, ctx.input)
