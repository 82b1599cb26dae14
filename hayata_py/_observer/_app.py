"""The observer's ASGI app (Starlette): the page, its event stream and its actions.

Routes: ``GET /`` the page (static, holds no data); ``GET /static/...`` its
script and style; ``GET /api/events`` the server-sent event stream of
:class:`~hayata_py._observer._hub.Hub` messages; ``GET /api/tasks`` an
invocation's durable tasks; ``POST /api/{kill,run,recover,resolve,abandon}``
the actions. Every ``/api`` request passes :func:`_security.check` first;
blocking calls into the actor system run on worker threads, never on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hayata_py._errors import ConfigError, HayataError
from hayata_py._observer import _security
from hayata_py._observer._actions import ActionError, Actions
from hayata_py._observer._hub import Hub
from hayata_py._present import dumps
from supervisors import SupervisorError

STATIC = "static"
NOT_FOUND_CODES = frozenset({"agent_not_found", "not_found", "invocation_not_found",
                             "task_not_found"})
PAGE_HEADERS = {
    # The token travels in the page's URL: never hand it on.
    "Referrer-Policy": "no-referrer",
    # Nothing but this server's own script; no framing (no clickjacked confirmations).
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}

Handler = Callable[[Request], Awaitable[Response]]


def _json(body: Any, status: int = 200) -> Response:
    return Response(dumps(body), status, media_type="application/json", headers=PAGE_HEADERS)


def _error(status: int, code: str, message: str, details: Any = None) -> Response:
    return _json({"error": {"code": code, "message": message, "details": details or {}}},
                 status)


def _field(body: dict[str, Any], name: str, kind: type, example: str) -> Any:
    value = body.get(name)
    if (isinstance(value, bool) and kind is int) or not isinstance(value, kind):
        raise ActionError(400, f"field {name!r} must be a {kind.__name__}, e.g. {example}; "
                          f"got {value!r}", code="invalid_field", field=name)
    return value


def create_app(actions: Actions, hub: Hub, token: str, hosts: frozenset[str] | None,
               ready: threading.Event) -> Starlette:
    """The app; ``ready`` is set once it serves (the hub is bound to its loop)."""

    def guarded(handler: Callable[[Request, dict[str, Any]], Awaitable[Response]]) -> Handler:
        async def endpoint(request: Request) -> Response:
            refusal = _security.check(request.method, request.headers,
                                      request.query_params.get("token"), token, hosts)
            if refusal is not None:
                return _error(refusal.status, refusal.code, refusal.message)
            body: dict[str, Any] = {}
            if request.method == "POST":
                try:
                    parsed: Any = json.loads(await request.body() or b"null")
                except ValueError as exc:
                    return _error(400, "invalid_json", f"the request is not valid JSON: {exc}")
                if not isinstance(parsed, dict):
                    return _error(400, "invalid_json", "the request must be a JSON object")
                body = parsed
            try:
                return await handler(request, body)
            except ActionError as exc:
                return _error(exc.status, exc.code, exc.message, exc.details)
            except HayataError as exc:
                status = 404 if exc.code in NOT_FOUND_CODES \
                    else 400 if isinstance(exc, ConfigError) else 409
                return _error(status, exc.code, exc.message, exc.details)
            except SupervisorError as exc:
                return _error(409, exc.code, str(exc))
        return endpoint

    def action(call: Callable[[dict[str, Any]], dict[str, Any]]) -> Handler:
        async def handler(_request: Request, body: dict[str, Any]) -> Response:
            return _json(await run_in_threadpool(call, body))
        return guarded(handler)

    async def events(request: Request, _body: dict[str, Any]) -> Response:
        async def stream() -> AsyncIterator[str]:
            async for message in hub.subscribe():
                yield f"data: {dumps(message)}\n\n"
        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={**PAGE_HEADERS, "X-Accel-Buffering": "no"})

    async def tasks(request: Request, _body: dict[str, Any]) -> Response:
        agent_id = request.query_params.get("agent", "")
        invocation_id = request.query_params.get("invocation", "")
        return _json(await run_in_threadpool(actions.tasks, agent_id, invocation_id))

    async def ping(_request: Request, _body: dict[str, Any]) -> Response:
        return _json({"ok": True})

    async def index(_request: Request) -> Response:
        return FileResponse(_static_path("index.html"), headers=PAGE_HEADERS)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        hub.bind(asyncio.get_running_loop())
        ready.set()
        try:
            yield
        finally:
            hub.close()

    return Starlette(routes=[
        Route("/", index),
        Mount("/static", StaticFiles(packages=[("hayata_py._observer", STATIC)])),
        Route("/api/ping", guarded(ping)),
        Route("/api/events", guarded(events)),
        Route("/api/tasks", guarded(tasks)),
        Route("/api/kill", action(lambda b: actions.kill(
            _field(b, "path", list, '["agent:hello", "nodes", "node:echo"]'),
            _field(b, "pid", int, "4242"))), methods=["POST"]),
        Route("/api/run", action(lambda b: actions.run(
            _field(b, "agent", str, '"hello"'), b.get("input"))), methods=["POST"]),
        Route("/api/recover", action(lambda b: actions.recover(
            _field(b, "agent", str, '"hello"'))), methods=["POST"]),
        Route("/api/resolve", action(lambda b: actions.resolve(
            _field(b, "agent", str, '"hello"'), _field(b, "task_id", str, '"task-..."'),
            b.get("result"))), methods=["POST"]),
        Route("/api/abandon", action(lambda b: actions.abandon(
            _field(b, "agent", str, '"hello"'), _field(b, "invocation_id", str, '"..."'))),
            methods=["POST"]),
    ], lifespan=lifespan)


def _static_path(name: str) -> str:
    from importlib.resources import files

    return str(files("hayata_py._observer").joinpath(STATIC, name))
