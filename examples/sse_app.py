"""A Starlette app that starts an agent run per request and streams its events
to the client as server-sent events, with the asyncio API.

Run it with ``python examples/sse_app.py`` (needs ``pip install
'hayata_py[web]'``), then::

    curl -N 'http://127.0.0.1:8000/ask?q=what+is+an+actor'

Each response is an ``text/event-stream``: first an ``event: run`` naming the
invocation and the URL of its events, then one SSE event per ``AgentEvent``
(``event:`` its type, ``id:`` its sequence, ``data:`` its data as JSON), then
an ``event: result``. An agent runs one invocation at a time, so the app
keeps a small pool of agents; a client that goes away detaches from its run,
which finishes anyway, and its agent goes back to the pool after that.

A client that lost its connection (a page reload, a network change) reads on
at ``/runs/<invocation_id>/events``: a browser's ``EventSource`` sends the
last ``id:`` it saw as the ``Last-Event-ID`` header when it reconnects (or
pass ``?after=N``), and gets the events after it from the agent's durable
event log, then the live ones as they are logged, then the result: nothing
missed, nothing twice, from any process of the app::

    const source = new EventSource(`/runs/${invocationId}/events`);
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make "examples.sse_app" importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import hayata_py as hy

AGENTS = int(os.environ.get("HAYATA_SSE_AGENTS", "2"))
TOKEN_DELAY = float(os.environ.get("HAYATA_SSE_TOKEN_DELAY", "0"))
"""Seconds between two tokens of the stand-in LLM (0: as fast as it can)."""


def answer(ctx: hy.NodeContext) -> dict[str, Any]:
    """A stand-in for an LLM call: streams its answer word by word as partials."""
    words = f"an answer to {ctx.input!r}".split()
    assert ctx.streamer is not None
    for word in words:
        ctx.streamer({"token": word})
        time.sleep(TOKEN_DELAY)  # a real model's time per token
    return {"answer": " ".join(words)}


def policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    if ctx.step == 0:
        return hy.Next("answer", ctx.input)
    return hy.Finish(ctx.last_result)


def config(agent_id: str) -> hy.AgentConfig:
    return hy.AgentConfig(agent_id, {"answer": "examples.sse_app:answer"},
                          "examples.sse_app:policy")


def sse(event: str, data: Any, ident: int | None = None) -> str:
    head = f"id: {ident}\n" if ident is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, default=str)}\n\n"


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    data_dir = os.environ.get("HAYATA_DATA") or tempfile.mkdtemp(prefix="hayata-sse-")
    async with hy.AsyncAgentSystem(data_dir) as system:
        app.state.system = system
        free: asyncio.Queue[hy.AsyncAgentRef] = asyncio.Queue()
        for agent in await asyncio.gather(*(system.start_agent(config(f"sse-{i}"))
                                            for i in range(AGENTS))):
            free.put_nowait(agent)
        app.state.free = free
        yield


async def ask(request: Request) -> Response:
    question = request.query_params.get("q", "")
    if not question:
        return JSONResponse({"error": "missing query parameter q"}, status_code=400)
    free: asyncio.Queue[hy.AsyncAgentRef] = request.app.state.free
    agent = await free.get()
    try:
        invocation = await agent.run(question, subscriber=hy.CALLER, stream=True)
    except BaseException:
        free.put_nowait(agent)
        raise

    async def events() -> AsyncIterator[str]:
        done = False
        try:
            yield sse("run", {"invocation_id": invocation,
                              "events": f"/runs/{invocation}/events"})
            async for message in agent.messages(invocation, timeout=60):
                if isinstance(message, hy.AgentEvent):
                    yield sse(message.type, message.data, message.sequence)
                else:
                    done = True
                    error = message.error.to_dict() if message.error else None
                    yield sse("result", {"invocation_id": invocation, "ok": message.ok,
                                         "result": message.result, "error": error})
        finally:
            if done:
                free.put_nowait(agent)
            else:  # the client left: the run goes on; the agent is free once it ends
                asyncio.get_running_loop().create_task(release(agent, invocation, free))

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


async def run_events(request: Request) -> Response:
    """The events of a run after ``Last-Event-ID`` (or ``?after=``), from the
    durable log, followed to the run's end, then its result."""
    invocation = request.path_params["invocation_id"]
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    if not raw.isdigit():
        return JSONResponse({"error": f"Last-Event-ID (or after) must be the sequence of an "
                             f"event (an integer >= 0), got {raw!r}"}, status_code=400)
    system: hy.AsyncAgentSystem = request.app.state.system
    store = system.sync.store
    record = None if store is None else await asyncio.to_thread(store.get_invocation,
                                                                invocation)
    if record is None:
        return JSONResponse({"error": f"no invocation {invocation!r}"}, status_code=404)
    agent = await system.agent(record.agent_id)

    async def events() -> AsyncIterator[str]:
        async for event in agent.events(invocation, after=int(raw), follow=True, timeout=60):
            yield sse(event.type, event.data, event.sequence)
        result = await agent.get_result(invocation)
        if result is not None:
            error = result.error.to_dict() if result.error else None
            yield sse("result", {"invocation_id": invocation, "ok": result.ok,
                                 "result": result.result, "error": error})

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


async def release(agent: hy.AsyncAgentRef, invocation: str,
                  free: asyncio.Queue[hy.AsyncAgentRef]) -> None:
    try:
        await agent.wait(invocation, timeout=300)
    finally:
        free.put_nowait(agent)


app = Starlette(routes=[Route("/ask", ask), Route("/runs/{invocation_id}/events", run_events)],
                lifespan=lifespan)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
