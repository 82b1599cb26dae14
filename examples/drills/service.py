"""``examples/service.py``'s agent with a drill's hooks (VM_RECOVERY_TESTS.md, drill 10).

The same graph, policy and settings (``plan`` -> ``async def llm`` ->
``answer``, ``max_invocations``, ``edge_concurrency``, ``llm`` idempotent,
``auto_recover``), with what a crash drill needs to see and hold what runs:

- ``input["effects"]``: a file; every node appends ``run <node> <invocation> <pid>``
  to it (:mod:`examples.drills.effects`), so a drill counts what really ran;
- ``input["gate"]``: a file; ``llm`` holds its call open until it exists;
- ``input["delay"]``: the model call's seconds (default that of ``examples/service.py``).

    hayata agent start examples.drills.service:config
    hayata run service --thread user-1 --detach \\
        --input '{"question": "q1", "gate": "/tmp/gate", "effects": "/tmp/effects.log"}'
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import hayata_py as hy
from examples import service
from examples.drills.effects import append_effect


def _effect(ctx: hy.NodeContext) -> None:
    if ctx.input.get("effects"):
        append_effect(ctx, "run", ctx.node_id, ctx.invocation_id)


def plan(ctx: hy.NodeContext) -> dict[str, Any]:
    _effect(ctx)
    return service.plan(ctx)


async def llm(ctx: hy.NodeContext) -> dict[str, Any]:
    _effect(ctx)
    await asyncio.sleep(float(ctx.input.get("delay", service.LLM_SECONDS)))  # the model call
    gate = ctx.input.get("gate")
    while gate and not os.path.exists(gate):
        await asyncio.sleep(0.05)
    return {"draft": f"draft for {ctx.input.get('question')!r}"}


def answer(ctx: hy.NodeContext) -> dict[str, Any]:
    _effect(ctx)
    return service.answer(ctx)


def config(max_invocations: int = 1000) -> hy.AgentConfig:
    return hy.AgentConfig(
        id="service",
        nodes={"plan": plan, "llm": llm, "answer": answer},
        decision_policy=service.policy,
        max_invocations=max_invocations,
        edge_concurrency={"llm": 200},
        node_concurrency={"llm": 8, "plan": 2, "answer": 2},
        idempotent_nodes=frozenset({"llm"}),
        auto_recover=True,
    )
