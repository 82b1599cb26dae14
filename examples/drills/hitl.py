"""Drill agents for a pause that survives a crash (drill 8) and a crash during
a retry's backoff (drill 9) in VM_RECOVERY_TESTS.md.

``fetch`` -> ``charge`` -> ``report``. Every node appends
``<start|end> <node> <attempt> <pid>`` to the input's ``effects`` file;
``charge`` raises ``Declined`` on its first attempt when the input has
``"flaky": true``.
"""

from __future__ import annotations

from typing import Any

import hayata_py as hy
from examples.drills.effects import append_effect

NODES = ("fetch", "charge", "report")


class Declined(Exception):
    """A transient refusal by the payment service."""


def _effect(ctx: hy.NodeContext, event: str) -> None:
    append_effect(ctx, event, ctx.node_id, ctx.attempt)


def step(ctx: hy.NodeContext) -> dict[str, Any]:
    _effect(ctx, "start")
    if ctx.node_id == "charge" and ctx.input.get("flaky") and ctx.attempt == 1:
        raise Declined("card declined, try again later")
    _effect(ctx, "end")
    return {ctx.node_id: f"{ctx.node_id}-done", f"{ctx.node_id}_attempt": ctx.attempt}


def policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    if ctx.step < len(NODES):
        return hy.Next(NODES[ctx.step], ctx.input)
    return hy.Finish({"state": dict(ctx.state)})


def _config(**extra: Any) -> hy.AgentConfig:
    return hy.AgentConfig(id="hitl-drill", nodes={n: "examples.drills.hitl:step" for n in NODES},
                          decision_policy="examples.drills.hitl:policy", **extra)


def pause_config() -> hy.AgentConfig:
    """Drill 8: pause before ``charge`` (a side effect a person approves)."""
    return _config(pause_before=frozenset({"charge"}))


def retry_config() -> hy.AgentConfig:
    """Drill 9: ``charge`` retried after a 20 s backoff (long enough to crash in)."""
    return _config(retry={"charge": hy.RetryPolicy(max_attempts=3, initial_interval=20.0,
                                                   jitter=False,
                                                   retry_on=("examples.drills.hitl:Declined",))})
