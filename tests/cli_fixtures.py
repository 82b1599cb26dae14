"""Agent configs for the CLI tests (``hayata agent start tests.cli_fixtures:...``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import hayata_py as hy


def echo_node(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"answer": f"echo:{ctx.input}"}


def slow_node(ctx: hy.NodeContext) -> dict[str, Any]:
    """Run until the file named by the input exists (at most 30 s): a test opens the gate."""
    gate = Path(ctx.input)
    deadline = time.monotonic() + 30.0
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"gate": gate.exists()}


def failing_node(ctx: hy.NodeContext) -> dict[str, Any]:
    raise ValueError("boom")


def echo_policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    return hy.Next("echo", ctx.input) if ctx.step == 0 else hy.Finish(ctx.last_result)


def slow_policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    return hy.Next("slow", ctx.input) if ctx.step == 0 else hy.Finish(ctx.last_result)


def failing_policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    return hy.Next("fail", ctx.input) if ctx.step == 0 else hy.Finish(ctx.last_result)


config = hy.AgentConfig(id="hello", nodes={"echo": echo_node}, decision_policy=echo_policy)


def slow() -> hy.AgentConfig:
    """A factory (zero-argument function) returning a config."""
    return hy.AgentConfig(id="slow", nodes={"slow": slow_node}, decision_policy=slow_policy)


failing = hy.AgentConfig(id="failing", nodes={"fail": failing_node},
                         decision_policy=failing_policy)
not_a_config = 42


def placed() -> hy.AgentConfig:
    """An agent whose node ``echo`` runs only on a system declaring ``gpu=true``."""
    return hy.AgentConfig(id="placed", nodes={"echo": echo_node}, decision_policy=echo_policy,
                          node_placement={"echo": {"gpu": True}}, lease_seconds=3.0)
