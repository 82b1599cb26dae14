"""Nodes and a policy for the service-agent tests: many invocations, threads.

The graph runs the node ids listed in ``input["steps"]`` one after the other
and finishes with the state. Every node appends ``start``/``end`` lines (with
the invocation id) to the side-effect file ``input["effects"]`` when one is
given, so a test can tell what really ran. ``input["gate"]``: a file the
``gated`` node waits for (a long external call held open by the test).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import hayata_py as hy
from examples.drills.effects import append_effect


def _effect(ctx: hy.NodeContext, event: str) -> None:
    if isinstance(ctx.input, dict) and ctx.input.get("effects"):
        append_effect(ctx, event, ctx.node_id, ctx.invocation_id)


def echo(ctx: hy.NodeContext) -> dict[str, Any]:
    """Returns the invocation's tag."""
    _effect(ctx, "start")
    _effect(ctx, "end")
    return {"echo": ctx.input["tag"]}


def count(ctx: hy.NodeContext) -> dict[str, Any]:
    """Counts the invocations of the thread: its state carries ``count``."""
    _effect(ctx, "start")
    seen = list(ctx.state.get("seen", []))
    _effect(ctx, "end")
    return {"count": int(ctx.state.get("count", 0)) + 1, "thread": ctx.thread,
            "seen": [*seen, ctx.input.get("tag")]}


def gated(ctx: hy.NodeContext) -> dict[str, Any]:
    """Waits for the file ``input["gate"]`` (a long call the test holds open)."""
    _effect(ctx, "start")
    gate = Path(ctx.input["gate"])
    deadline = time.monotonic() + 60
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.005)  # the node's external call, until the test opens the gate
    _effect(ctx, "end")
    return {"gated": ctx.input.get("tag")}


async def llm(ctx: hy.NodeContext) -> dict[str, Any]:
    """An LLM-like call: waits ``input["delay"]`` seconds on the event loop."""
    await asyncio.sleep(float(ctx.input.get("delay", 0.0)))
    return {"llm": f"answer to {ctx.input.get('tag')}"}


async def agated(ctx: hy.NodeContext) -> dict[str, Any]:
    """An ``async def`` node that awaits the file ``input["gate"]`` (an LLM call
    the test holds open) on the edge's event loop; with ``input["rerun_passes"]``
    an attempt after the first does not wait."""
    _effect(ctx, "start")
    gate = Path(ctx.input["gate"])
    deadline = time.monotonic() + 60
    held = ctx.attempt == 1 or not ctx.input.get("rerun_passes")  # a re-run may pass
    while held and not gate.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)  # the call in flight, until the test opens the gate
    _effect(ctx, "end")
    return {"agated": ctx.input.get("tag"), "attempt": ctx.attempt}


def policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    steps = ctx.input["steps"]
    if ctx.step < len(steps):
        return hy.Next(steps[ctx.step], ctx.input)
    return hy.Finish(dict(ctx.state))


NODES = {"echo": echo, "count": count, "gated": gated, "slow": gated, "llm": llm,
         "agated": agated}
"""``slow`` is ``gated`` under another id (made idempotent where a test needs one
of each)."""


def config(agent_id: str = "svc", **overrides: Any) -> hy.AgentConfig:
    return hy.AgentConfig(id=agent_id, nodes=NODES, decision_policy=policy, **overrides)
