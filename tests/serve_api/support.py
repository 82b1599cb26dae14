"""Helpers of the serve_api conformance suite: names of the graphs, waiting, async calls.

Nothing here knows which server it talks to: every call goes through the real
``langgraph-sdk`` client.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import StreamPart

T = TypeVar("T")

#: The graphs ``langgraph.json`` beside this file serves (see graphs.py).
STEPS, ASK, CHAT, NESTED, RECALL = "steps", "ask", "chat", "nested", "recall"

#: LangGraph's namespace for the assistant made from each graph: its id is
#: ``uuid5(NAMESPACE_GRAPH, graph_id)`` (langgraph-api's ``graph.py``).
NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")

#: What the ``chat`` graph's fake model answers (graphs.CHAT_REPLY; not
#: imported, so the suite needs neither langgraph nor langchain_core).
CHAT_REPLY = "hello from the fake model"

#: Seconds one SDK call may take before it fails the test.
HTTP_TIMEOUT = 30.0

#: Seconds a test waits for a run or a thread to reach a state.
SETTLE = 20.0

#: Run statuses after which nothing more happens to the run.
TERMINAL = frozenset({"success", "error", "interrupted", "timeout"})


def assistant_id_of(graph_id: str) -> str:
    """The assistant id LangGraph's server gives the assistant of ``graph_id``."""
    return str(uuid.uuid5(NAMESPACE_GRAPH, graph_id))


def wait_until(probe: Callable[[], T | None], message: str, timeout: float = SETTLE) -> T:
    """Call ``probe`` until it returns something truthy and return that; fail
    with ``message`` and the last value after ``timeout`` seconds. Polls every
    20 ms: the pace of the questions, not a guess at how long things take."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{message}: not reached within {timeout}s (last: {last!r})")
        time.sleep(0.02)


async def await_until(probe: Callable[[], Awaitable[bool]], message: str,
                      timeout: float = SETTLE) -> None:
    """``wait_until`` for the async client: await ``probe`` every 20 ms until it
    answers true; fail with ``message`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"{message}: not reached within {timeout}s")
        await asyncio.sleep(0.02)


def run_async(server_url: str, body: Callable[[LangGraphClient], Awaitable[T]]) -> T:
    """Run ``body`` with a fresh async client of ``server_url`` in its own event
    loop, bounded by twice the HTTP timeout, and close the client after."""

    async def main() -> T:
        client = get_client(url=server_url, timeout=HTTP_TIMEOUT)
        try:
            return await asyncio.wait_for(body(client), 2 * HTTP_TIMEOUT)
        finally:
            await client.aclose()

    return asyncio.run(main())


def body(parts: list[StreamPart]) -> list[StreamPart]:
    """A stream without its closing ``end`` event, if it has one.

    LangGraph's server sends none (the SDK then asks the run's status); the
    SDKs also read an ``end`` event, so a server may close with one."""
    return parts[:-1] if parts and parts[-1].event == "end" else parts


def names(parts: list[StreamPart]) -> list[str]:
    """The event names of a stream, in order (a closing ``end`` left out)."""
    return [part.event for part in body(parts)]


def of(parts: list[StreamPart], event: str) -> list[object]:
    """The payloads of the events named ``event``, in order."""
    return [part.data for part in parts if part.event == event]
