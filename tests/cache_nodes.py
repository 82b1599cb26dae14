"""Nodes, policies and key functions for the node result caching tests.

``embed`` appends one line to the file named by ``input["log"]`` each time it
runs (its side effect, counted by the tests) and returns a result derived
from ``input["text"]``.
"""

from __future__ import annotations

import os
from typing import Any

import hayata_py as hy


def embed(ctx: hy.NodeContext) -> dict[str, Any]:
    with open(ctx.input["log"], "a") as f:
        f.write(f"{ctx.node_id} {ctx.input['text']} {os.getpid()}\n")
    if ctx.input.get("fail"):
        raise ValueError("embedding service down")
    return {"vector": [len(ctx.input["text"]), 1.5], "text": ctx.input["text"]}


def embed_then_finish(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    return hy.Next("embed", ctx.input) if ctx.step == 0 else hy.Finish(ctx.last_result)


def text_key(ctx: hy.CacheKeyContext) -> str:
    """The key function of the tests: only the text counts (not the log path)."""
    return f"{ctx.node_id}:{ctx.input['text']}"


def ran(log: str) -> list[str]:
    """The lines ``embed`` wrote: one per run."""
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return f.read().splitlines()


def cached_agent(ttl: float = 3600.0, **changes: Any) -> hy.AgentConfig:
    return hy.AgentConfig("cached", {"embed": embed}, embed_then_finish,
                          cache={"embed": hy.CachePolicy(ttl=ttl)}, **changes)


config = cached_agent()
"""For ``hayata agent start tests.cache_nodes:config``."""


def echo(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"echo": ctx.input["text"]}


def parallel_then_finish(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    """Step 0: embed and echo in parallel; then finish with both results."""
    return hy.Next(["embed", "echo"], ctx.input) if ctx.step == 0 \
        else hy.Finish(ctx.parallel_results)


def map_then_finish(ctx: hy.PolicyContext) -> hy.Map | hy.Finish:
    """Step 0: embed each of ``input["texts"]`` (a map step); then finish with the results."""
    if ctx.step == 0:
        return hy.Map("embed", [{"text": t, "log": ctx.input["log"]}
                                for t in ctx.input["texts"]])
    return hy.Finish(ctx.parallel_results)


def gated(ctx: hy.NodeContext) -> dict[str, Any]:
    """Touch ``input["started"]``, then run until ``input["gate"]`` exists (at most 30 s)."""
    import time
    from pathlib import Path

    Path(ctx.input["started"]).touch()
    gate, deadline = Path(ctx.input["gate"]), time.monotonic() + 30.0
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"gated": gate.exists()}


def embed_beside_gated(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    """Step 0: embed and gated in parallel; then finish with both results."""
    return hy.Next(["embed", "gated"], ctx.input) if ctx.step == 0 \
        else hy.Finish(ctx.parallel_results)
