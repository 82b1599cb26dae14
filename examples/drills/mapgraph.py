"""The map drill graph: one map step of ``item`` over the input's items, reduced.

``hayata agent start examples.drills.mapgraph:config`` starts agent ``mapdrill``
(``map_concurrency`` 2); ``examples.drills.mapgraph:idempotent_config`` the same
agent with ``item`` declared idempotent. Every item appends ``start <item>
<task_id> <pid>`` before its work and ``end <item> <task_id> <pid>`` after it to
the file named by the input's ``effects``; an item listed in ``gates`` (item
index -> file) waits until that file exists, which holds it in flight while
the drill kills the system.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import hayata_py as hy
from examples.drills.effects import append_effect


def _effect(ctx: hy.NodeContext, event: str) -> None:
    append_effect(ctx, event, ctx.item, ctx.task_id)


def item(ctx: hy.NodeContext) -> dict[str, Any]:
    """Run one item (``ctx.input`` is the item; ``ctx.item`` its index)."""
    _effect(ctx, "start")
    gate = ctx.input.get("gate")
    while gate and not Path(gate).exists():
        time.sleep(0.005)  # a long external call, until the drill opens the gate
    _effect(ctx, "end")
    return {"item": ctx.item, "square": ctx.item * ctx.item}


def total(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The reduce function: the sum of the squares, in item order."""
    return {"sum": sum(r["square"] for r in results), "items": [r["item"] for r in results]}


def policy(ctx: hy.PolicyContext) -> hy.Map | hy.Finish:
    """One map step over ``input["count"]`` items, then finish with the reduced state."""
    if ctx.step == 0:
        gates = ctx.input.get("gates", {})
        items = [{"effects": ctx.input["effects"], "gate": gates.get(str(i))}
                 for i in range(ctx.input["count"])]
        return hy.Map("item", items, reduce="examples.drills.mapgraph:total")
    return hy.Finish(ctx.last_result)


def config(idempotent: frozenset[str] = frozenset()) -> hy.AgentConfig:
    return hy.AgentConfig(id="mapdrill", nodes={"item": "examples.drills.mapgraph:item"},
                          decision_policy="examples.drills.mapgraph:policy",
                          execution_timeout=120.0, map_concurrency=2,
                          idempotent_nodes=idempotent)


def idempotent_config() -> hy.AgentConfig:
    return config(frozenset({"item"}))
