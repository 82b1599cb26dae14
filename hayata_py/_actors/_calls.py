"""Calling a node function on an edge: a plain function, or an ``async def`` one.

On an edge that runs one task at a time (``edge_concurrency`` 1, every plain
function), an ``async def`` node runs on the edge's own event loop (one per
edge process, kept between calls, so a client the node caches on the loop
stays usable). The call blocks the edge exactly like a plain function,
``ctx.streamer`` is called from the loop's thread, and cancelling or timing
out the task still kills the edge process. With ``edge_concurrency`` > 1 the
edge runs its tasks on a loop thread instead (``edge_loop.py``).

What a call ended with is read the same on either path: a returned dict that
can be stored is its result (:func:`checked`); anything raised is
``node_failed`` (:func:`failure`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from hayata_py._actor_messages import RunTask
from hayata_py._callables import resolve_callable
from hayata_py._codec import check_encodable
from hayata_py._errors import EncodingError, ErrorInfo

_runner: asyncio.Runner | None = None


def matches(exc: BaseException, retry_on: tuple[str, ...]) -> bool:
    """``exc`` is an instance of one of the ``module:Class`` paths (a retry policy's
    ``retry_on``); a path that no longer imports matches nothing."""
    for path in retry_on:
        try:
            cls = resolve_callable(path)
        except Exception:  # noqa: BLE001 - checked at start_agent; never fail the task here
            continue
        if isinstance(cls, type) and isinstance(exc, cls):
            return True
    return False


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


def failure(exc: BaseException, execute: RunTask) -> ErrorInfo:
    """A node function that raised: ``node_failed``, retryable if its policy says so."""
    name = type(exc).__name__
    return ErrorInfo("node_failed", f"{name}: {exc}", {
        "node_id": execute.node_id, "type": name, "attempt": execute.attempt,
        "attempts": [*execute.history, name], "retryable": matches(exc, execute.retry_on)})


def checked(node_id: str, result: Any) -> tuple[Any, ErrorInfo | None]:
    """A node's return value, or why it is no result (not a dict, not storable)."""
    if not isinstance(result, dict):
        return None, ErrorInfo(
            "invalid_node_result",
            f"node {node_id!r} returned {type(result).__name__}; a node must return a dict",
            {"node_id": node_id, "returned": type(result).__name__})
    try:
        check_encodable(result, "result")
    except EncodingError as exc:
        return None, ErrorInfo("invalid_node_result",
                               f"node {node_id!r} returned a value that cannot be "
                               f"stored: {exc}", {"node_id": node_id, **exc.details})
    return result, None
