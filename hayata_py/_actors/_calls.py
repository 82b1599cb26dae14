"""Calling a node function on an edge: a plain function, or an ``async def`` one.

An ``async def`` node runs on the edge's own event loop (one per edge
process, kept between calls, so a client the node caches on the loop stays
usable). The call blocks the edge exactly like a plain function: the edge
runs one task at a time, ``ctx.streamer`` is called from the loop's thread,
and cancelling or timing out the task still kills the edge process.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

_runner: asyncio.Runner | None = None


def call_node(fn: Callable[..., Any], ctx: Any) -> Any:
    """``fn(ctx)``; a coroutine it returns is run to its end on the edge's loop."""
    result = fn(ctx)
    if inspect.isawaitable(result):
        return _loop_runner().run(_awaited(result))
    return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _loop_runner() -> asyncio.Runner:
    global _runner
    if _runner is None:
        _runner = asyncio.Runner()
    return _runner
