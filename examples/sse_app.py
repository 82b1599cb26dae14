"""A Starlette app that starts an agent run per request and streams its events
to the client as server-sent events, with the asyncio API.

Run it with ``python examples/sse_app.py`` (needs ``pip install
'hayata_py[web]'``), then::

    curl -N 'http://127.0.0.1:8000/ask?q=what+is+an+actor'

Each response is an ``text/event-stream``: one SSE event per ``AgentEvent``
(``event:`` its type, ``id:`` its sequence, ``data:`` its data as JSON), then
an ``event: result``. An agent runs one invocation at a time, so the app
keeps a small pool of agents; a client that goes away detaches from its run,
which finishes anyway, and its agent goes back to the pool after that.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
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


def answer(ctx: hy.NodeContext) -> dict[str, Any]:
    """A stand-in for an LLM call: streams its answer word by word as partials."""
    words = f"an answer to {ctx.input!r}".split()
    assert ctx.streamer is not None
    for word in words:
        ctx.streamer({"token": word})
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


async def release(agent: hy.AsyncAgentRef, invocation: str,
                  free: asyncio.Queue[hy.AsyncAgentRef]) -> None:
    try:
        await agent.wait(invocation, timeout=300)
    finally:
        free.put_nowait(agent)


app = Starlette(routes=[Route("/ask", ask)], lifespan=lifespan)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
