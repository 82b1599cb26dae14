"""Nodes of the partials-as-made tests (module level: importable by the edges).

Each publishes partial ``{"i": i}`` for i = 1..``partials`` and, after each,
waits for the file ``seen-<i>`` in ``dir``, which the test creates only once it
has read that partial: so the node can go on only if each partial reached the
caller while the node was still running. A gate not opened within
``GATE_WAIT`` seconds ends the node with ``{"late": i}``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import hayata_py as hy

GATE_WAIT = 10.0


def _gate(spec: dict[str, Any], i: int) -> Path:
    return Path(spec["dir"]) / f"seen-{i}"


def _published(ctx: hy.NodeContext) -> Generator[float, None, dict[str, Any]]:
    """The gated node's work: publish partial i, then yield the seconds to pause
    for while gate i is shut (its caller pauses, blocking or awaiting); the
    node's result as the generator's return value."""
    spec = ctx.input
    assert ctx.streamer is not None
    for i in range(1, spec["partials"] + 1):
        ctx.streamer({"i": i})
        deadline = time.monotonic() + GATE_WAIT
        while not _gate(spec, i).exists():
            if time.monotonic() > deadline:
                return {"late": i}
            yield 0.005
    return {"gates": spec["partials"]}


def gated(ctx: hy.NodeContext) -> dict[str, Any]:
    steps = _published(ctx)
    while True:
        try:
            time.sleep(next(steps))
        except StopIteration as end:
            result: dict[str, Any] = end.value
            return result


async def agated(ctx: hy.NodeContext) -> dict[str, Any]:
    steps = _published(ctx)
    while True:
        try:
            await asyncio.sleep(next(steps))
        except StopIteration as end:
            result: dict[str, Any] = end.value
            return result


def burst(ctx: hy.NodeContext) -> dict[str, Any]:
    """Publishes ``partials`` partials back to back (the cost of pushing each)."""
    assert ctx.streamer is not None
    start = time.perf_counter()
    for i in range(ctx.input["partials"]):
        ctx.streamer({"i": i})
    return {"seconds": time.perf_counter() - start}


def once(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    """Policy: the node named by the input's ``node``, then finish with its result."""
    if ctx.step == 0:
        return hy.Next(ctx.input["node"], ctx.input)
    return hy.Finish(ctx.last_result)
