"""Node functions and policies of the retry, pause, timeout and async-node tests.

Every node appends one line to the side-effect file named in its input
(``{"effects": path}``): ``<node> <attempt> <pid>``, so a test counts what
really ran. ``{"fail": {"node": n}}`` makes a node raise on its first ``n``
attempts; ``{"gates": {"node": path}}`` makes it wait for a file;
``{"sleep": {"node": s}}`` sleep; ``{"gate_from": n}`` gates only attempts >= n.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import hayata_py as hy
from examples.drills.effects import append_effect


class Transient(Exception):
    """A failure worth a retry (rate limit, timeout of an upstream call)."""


class Permanent(Exception):
    """A failure no retry fixes."""


def _effect(ctx: hy.NodeContext, attempt: int) -> None:
    append_effect(ctx, ctx.node_id, attempt)


def flaky(ctx: hy.NodeContext) -> dict[str, Any]:
    spec: dict[str, Any] = ctx.input
    attempt = ctx.attempt
    _effect(ctx, attempt)
    gate = spec.get("gates", {}).get(ctx.node_id)
    while gate and attempt >= spec.get("gate_from", 1) and not Path(gate).exists():
        time.sleep(0.005)  # held in flight until the test opens the gate
    time.sleep(spec.get("sleep", {}).get(ctx.node_id, 0.0))
    failures = spec.get("fail", {}).get(ctx.node_id, 0)
    if attempt <= failures:
        kind = Permanent if spec.get("permanent") else Transient
        raise kind(f"attempt {attempt} of {ctx.node_id} failed")
    return {ctx.node_id: f"done-{attempt}", f"{ctx.node_id}_key": ctx.idempotency_key,
            f"{ctx.node_id}_attempt": attempt}


async def streaming(ctx: hy.NodeContext) -> dict[str, Any]:
    """An ``async def`` node that streams partials between awaits."""
    spec: dict[str, Any] = ctx.input
    _effect(ctx, ctx.attempt)
    for i in range(spec.get("partials", 3)):
        await asyncio.sleep(0.01)
        if ctx.streamer is not None:
            ctx.streamer({"token": i})
    await asyncio.sleep(spec.get("sleep", {}).get(ctx.node_id, 0.0))
    return {ctx.node_id: "streamed", "loop": type(asyncio.get_running_loop()).__name__}


def sequence(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    """Run the nodes listed in ``input["plan"]`` one step each (a list: in parallel)."""
    plan = ctx.input["plan"]
    if ctx.step < len(plan):
        step = plan[ctx.step]
        return hy.Next(step if isinstance(step, str) else list(step), ctx.input)
    return hy.Finish({"state": dict(ctx.state), "parallel": ctx.parallel_results})


def effects(path: Path) -> list[tuple[str, int]]:
    """The (node, attempt) lines of the side-effect file, in order."""
    if not path.exists():
        return []
    return [(line.split()[0], int(line.split()[1]))
            for line in path.read_text().splitlines()]


def approve(ctx: hy.PolicyContext) -> hy.Next | hy.Finish | hy.Pause:
    """draft, then pause for a person's approval, then send (or stop)."""
    if ctx.step == 0:
        return hy.Next("draft", ctx.input)
    if ctx.step == 1:
        if ctx.resume_value is None:
            return hy.Pause({"draft": ctx.state["draft"], "why": "approve sending"})
        if not ctx.resume_value.get("approve"):
            return hy.Finish({"rejected": ctx.resume_value})
        return hy.Next("send", {**ctx.input, "note": ctx.resume_value})
    return hy.Finish({"state": dict(ctx.state), "resume_value": ctx.resume_value})


def unstorable_pause(ctx: hy.PolicyContext) -> hy.Pause:
    return hy.Pause({"bad": {1, 2}})


def approve_after_thinking(ctx: hy.PolicyContext) -> hy.Next | hy.Finish | hy.Pause:
    """Pause for approval; once resumed, think before acting on the answer (touch
    ``input["thinking"]``, then wait for the file ``input["think_gate"]``: a slow
    model call), so a test can kill the system between resume() and the decision."""
    if ctx.step == 0:
        if ctx.resume_value is None:
            return hy.Pause({"why": "approve sending"})
        Path(ctx.input["thinking"]).touch()
        while not Path(ctx.input["think_gate"]).exists():
            time.sleep(0.005)  # the test kills the system meanwhile
        if not ctx.resume_value.get("approve"):
            return hy.Finish({"rejected": ctx.resume_value})
        return hy.Next("send", ctx.input)
    return hy.Finish({"state": dict(ctx.state)})


def sequence_noting(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    """:func:`sequence`, finishing with the ``resume_value`` its last decision saw."""
    decision = sequence(ctx)
    if isinstance(decision, hy.Finish):
        return hy.Finish({"state": dict(ctx.state), "resume_value": ctx.resume_value})
    return decision
