"""The drill graph: fetch -> [left, right] in parallel -> report.

Every node appends ``start <task_id> <node> <pid>`` before its work and
``end <task_id> <node> <pid>`` after it to the side-effect file named in the
input (:mod:`examples.drills.effects`), so
a drill can compare what really ran with what the store says. A node can be
told to wait for a *gate* file (``{"gates": {"right": "/path"}}``): it blocks
until the file exists, which is how a drill holds a task "in flight" while
it kills things.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path
from typing import Any

import hayata_py as hy
from examples.drills.effects import append_effect

NODES = ("fetch", "left", "right", "report")


def _effect(ctx: hy.NodeContext, event: str) -> None:
    append_effect(ctx, event, ctx.task_id, ctx.node_id)


def work(ctx: hy.NodeContext) -> dict[str, Any]:
    """The node function of every drill node."""
    spec: dict[str, Any] = ctx.input
    if ctx.node_id in spec.get("escape", ()):
        _escape()  # before its start is noted: a drill that saw the note kills at once
    _effect(ctx, "start")
    gate = spec.get("gates", {}).get(ctx.node_id)
    while gate and not Path(gate).exists():
        time.sleep(0.005)  # a user's long-running external call, until the drill opens the gate
    delay = spec.get("delays", {}).get(ctx.node_id, 0.0)
    if delay:
        time.sleep(delay)
    _effect(ctx, "end")
    return {ctx.node_id: f"{ctx.node_id}-done", f"{ctx.node_id}_key": ctx.idempotency_key}


def _escape() -> None:
    """Make this edge process outlive its system, like an orphan Thespian leaves
    behind when an admin dies: drop the parent-death signal, leave the session."""
    libc = ctypes.CDLL(None)
    libc.prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG = 0
    os.setsid()


def policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    """fetch, then left and right in parallel, then report, then finish."""
    if ctx.step == 0:
        return hy.Next("fetch", ctx.input)
    if ctx.step == 1:
        return hy.Next(["left", "right"], ctx.input)
    if ctx.step == 2:
        return hy.Next("report", {**ctx.input, "branches": ctx.parallel_results})
    return hy.Finish({"state": dict(ctx.state), "steps": ctx.step})


def config(agent_id: str = "drill", idempotent: frozenset[str] = frozenset()) -> hy.AgentConfig:
    return hy.AgentConfig(
        id=agent_id,
        nodes={name: "examples.drills.graph:work" for name in NODES},
        decision_policy="examples.drills.graph:policy",
        execution_timeout=120.0,
        idempotent_nodes=idempotent,
    )


def placed_config() -> hy.AgentConfig:
    """The drill graph with ``right`` placed on a system that declares ``gpu=true``
    (drill 6: a member host dies)."""
    import dataclasses

    return dataclasses.replace(config(), node_placement={"right": {"gpu": True}})
