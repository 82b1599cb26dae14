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

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hayata_py as hy
from examples.drills.effects import append_effect

Step = str | list[str] | dict[str, Any]
GATE_S = 300.0  # the longest a node waits for a drill's gate


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
    "map": Graph("map", ("split", "item", "join"), ("split", {"map": "item", "items": 6}, "join")),
}


def _effect(ctx: hy.NodeContext, event: str) -> None:
    if ctx.input.get("effects"):  # the soak runs without a side-effect file
        append_effect(ctx, event, ctx.task_id, ctx.node_id)


def work(ctx: hy.NodeContext) -> dict[str, Any]:
    """The node function of every campaign node."""
    _effect(ctx, "start")
    delay = float(ctx.input.get("delay", 0.0))
    if delay:
        time.sleep(delay)  # the node's work (a user's external call)
    _effect(ctx, "end")
    return {ctx.node_id: f"{ctx.node_id}-done"}


async def awork(ctx: hy.NodeContext) -> dict[str, Any]:
    """An ``async def`` campaign node (an LLM-like call): waits ``input["wait"]``
    seconds on its edge's event loop, which runs several such tasks at once, then
    (a drill's held call) until the file ``input["gate"]`` exists."""
    _effect(ctx, "start")
    wait = float(ctx.input.get("wait", 0.0))
    if wait:
        await asyncio.sleep(wait)  # the call in flight
    gate = ctx.input.get("gate")
    deadline = time.monotonic() + GATE_S
    while gate and not Path(gate).exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)  # the call in flight, until the drill opens the gate
    _effect(ctx, "end")
    return {ctx.node_id: f"{ctx.node_id}-done"}


def count(ctx: hy.NodeContext) -> dict[str, Any]:
    """Counts the invocations of the thread: ``count`` and ``seen`` (the
    invocation ids, in order) in the state the thread carries; run again (an
    idempotent re-run, a recovery) it reads the same state, so writes the same."""
    _effect(ctx, "start")
    seen = list(ctx.state.get("seen", []))
    _effect(ctx, "end")
    return {"count": int(ctx.state.get("count", 0)) + 1, "seen": [*seen, ctx.invocation_id]}


@dataclass(frozen=True)
class ServiceGraph:
    """The concurrent campaign's one agent: a service (``max_invocations``) whose
    invocations each run a plan of their own (in the input) over these nodes:
    ``a``, ``b`` (sync; ``b`` idempotent), ``llm`` (``async def``, several tasks
    per edge) and ``count`` (the thread's counter, every plan's last step)."""

    name: str = "service"
    nodes: tuple[str, ...] = ("a", "b", "llm", "count")
    max_invocations: int = 40
    edge_concurrency: int = 8
    idempotent: frozenset[str] = frozenset({"b"})
    plans: tuple[tuple[Step, ...], ...] = (
        ("a", "llm", "count"),
        ("a", ["llm", "b"], "count"),
        ("llm", {"map": "b", "items": 2}, "count"),
        ("b", "a", "count"),
    )

    def config(self, agent_id: str, *, execution_timeout: float = 30.0,
               lease_seconds: float = 10.0, auto_recover: bool = False) -> hy.AgentConfig:
        nodes = {n: "tests.chaos.nodes:work" for n in self.nodes}
        nodes.update(llm="tests.chaos.nodes:awork", count="tests.chaos.nodes:count")
        return hy.AgentConfig(
            id=agent_id, nodes=nodes, decision_policy="tests.chaos.nodes:policy",
            execution_timeout=execution_timeout, lease_seconds=lease_seconds,
            max_invocations=self.max_invocations, auto_recover=auto_recover,
            edge_concurrency={"llm": self.edge_concurrency},
            node_concurrency={n: 2 for n in self.nodes}, idempotent_nodes=self.idempotent)

    @staticmethod
    def input(effects: str, plan: tuple[Step, ...], delay: float = 0.0,
              wait: float = 0.0) -> dict[str, Any]:
        return {"effects": effects, "plan": list(plan), "delay": delay, "wait": wait}

    @staticmethod
    def tasks(plan: tuple[Step, ...]) -> int:
        """How many tasks ``plan`` runs."""
        return sum(1 if isinstance(s, str) else len(s) if isinstance(s, list)
                   else int(s["items"]) for s in plan)


SERVICE = ServiceGraph()


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
