"""The HTTP face: each endpoint parses its request (:mod:`._wire`), calls the
runner or the serve tables, and shapes the answer. No runtime logic here."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import importlib.metadata
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from hayata_py.langgraph import HayataGraph
from hayata_py.serve._db import ACTIVE, RunRow, ServeDB, ThreadRow
from hayata_py.serve._graphs import GraphSpec, schemas
from hayata_py.serve._items import Items
from hayata_py.serve._message_parts import MessageParts
from hayata_py.serve._runs import TERMINAL, Runner
from hayata_py.serve._security import ApiKeyCheck, cors_middleware
from hayata_py.serve._uncertain import abandon, parse_abandon, parse_answer, resolve, ways_out
from hayata_py.serve._wire import (
    AssistantSearch,
    BadRequest,
    HistoryRequest,
    RunCreate,
    StateUpdate,
    StoreKey,
    StoreNamespaces,
    StorePut,
    StoreSearch,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
    check_uuid,
    empty_state,
    iso,
    jsonable,
    parse,
    run_json,
    state_json,
    thread_json,
)

__all__ = ["Server", "build_app"]

T = TypeVar("T")
HEARTBEAT = 5.0
"""Seconds of silence on a stream before a ``: heartbeat`` comment; also how
long a stream or a join waits for a wake (this server's runner wakes them for
its own runs, its follower for another server's) before it reads the store anyway."""
TAIL_BATCH = 500
"""Events a stream reads from a run's log at most at once."""


OFF_THREADS = 40
"""Threads for blocking calls off the event loop (as many as anyio lends
Starlette by default)."""

_off_pool = concurrent.futures.ThreadPoolExecutor(OFF_THREADS,
                                                  thread_name_prefix="hayata-serve-off")


async def off(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """A blocking call (the store, the runner) off the event loop, in the
    caller's context, on threads of its own rather than Starlette's
    ``run_in_threadpool``: anyio's cancel scopes and capacity limiter around
    each call cost more than the store reads they wrap. Cancelling the
    caller does not stop a call that has begun: it finishes in its thread."""
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_off_pool, call)


def _subset(want: Mapping[str, Any] | None, have: Mapping[str, Any] | None) -> bool:
    return all((have or {}).get(k) == v for k, v in (want or {}).items())


class Server:
    """What the endpoints share: the graphs, the serve tables, the runner."""

    def __init__(self, specs: list[GraphSpec], graphs: Mapping[str, HayataGraph],
                 db: ServeDB, runner: Runner, items: Items) -> None:
        self.specs = specs
        self.graphs = graphs
        self.db = db
        self.runner = runner
        self.items = items
        self.started = time.time()

    # -- lookups -------------------------------------------------------------------

    def assistant(self, assistant_id: str) -> GraphSpec:
        """The graph of a path's assistant id (a UUID only, as LangGraph's)."""
        check_uuid(assistant_id, "assistant")
        for spec in self.specs:
            if spec.assistant_id == assistant_id:
                return spec
        raise BadRequest(404, "Not Found")

    def run_assistant(self, assistant_id: str) -> GraphSpec:
        """The graph of a run body's ``assistant_id``: a UUID or a graph id."""
        for spec in self.specs:
            if assistant_id in (spec.assistant_id, spec.graph_id):
                return spec
        try:
            uuid.UUID(assistant_id)
        except ValueError:
            names = ", ".join(s.graph_id for s in self.specs)
            raise BadRequest(422, f"Invalid assistant: '{assistant_id}'. Must be either:\n"
                             f"- A valid assistant UUID, or\n- One of the registered "
                             f"graphs: {names}") from None
        raise BadRequest(404, "Thread or assistant not found.")

    def thread(self, thread_id: str) -> ThreadRow:
        check_uuid(thread_id, "thread")
        row = self.db.get_thread(thread_id)
        if row is None:
            raise BadRequest(404, f"Thread with ID {thread_id} not found")
        return row

    def run(self, thread_id: str | None, run_id: str) -> RunRow:
        row = self.db.get_run(run_id)
        if row is None or (thread_id is not None and row.thread_id != thread_id):
            raise BadRequest(404, "Not Found")
        return row

    def assistant_json(self, spec: GraphSpec) -> dict[str, Any]:
        return {"assistant_id": spec.assistant_id, "graph_id": spec.graph_id, "config": {},
                "context": {}, "metadata": {"created_by": "system"}, "name": spec.graph_id,
                "created_at": iso(self.started), "updated_at": iso(self.started),
                "version": 1, "description": None}

    def state(self, thread: ThreadRow, checkpoint_id: str | None = None) -> dict[str, Any]:
        graph = self.graphs.get(thread.graph_id or "")
        if graph is None:
            return empty_state()
        configurable = {"thread_id": thread.thread_id}
        if checkpoint_id:
            configurable["checkpoint_id"] = checkpoint_id
        snapshot = graph.get_state({"configurable": configurable})
        if checkpoint_id and snapshot.config.get("configurable", {}).get(
                "checkpoint_id") != checkpoint_id:
            return empty_state()
        return state_json(snapshot)

    def thread_out(self, row: ThreadRow) -> dict[str, Any]:
        if row.graph_id is None:
            return thread_json(row)
        state = self.state(row)
        interrupts = {t["id"]: t["interrupts"] for t in state["tasks"] if t["interrupts"]}
        return thread_json(row, state["values"], interrupts, ran=True)

    # -- runs ----------------------------------------------------------------------

    def run_out(self, row: RunRow) -> dict[str, Any]:
        """``GET .../runs/{r}``: the run, and for the thread's last run, ended
        waiting on tasks a crash left uncertain, a ``hayata`` field naming them
        (node, task id, the ``resume`` answers that go on) and the ``/hayata/``
        endpoints that resolve each or abandon the run (:mod:`._uncertain`)."""
        out = run_json(row)
        if row.status != "success":
            return out
        thread = self.db.get_thread(row.thread_id)
        if thread is None or thread.status != "interrupted":
            return out
        latest = self.db.list_runs(row.thread_id)
        if not latest or latest[0].run_id != row.run_id:
            return out
        waits = self.uncertain(thread)
        if waits:
            out["hayata"] = ways_out(row.thread_id, waits)
        return out

    def uncertain(self, thread: ThreadRow) -> list[dict[str, Any]]:
        """The tasks a crash left uncertain that the thread's unfinished
        invocation waits on, as the runner records them: node, task id and the
        ``command: {"resume": ...}`` answers that go on; empty if nothing waits."""
        graph = self.graphs.get(thread.graph_id or "")
        return [] if graph is None else graph.uncertain_tasks(thread.thread_id)

    def create_run(self, body: RunCreate, thread_id: str | None) -> RunRow:
        """Record a run (before the response that accepts it) and wake the runner."""
        spec = self.run_assistant(body.assistant_id)
        temporary = False
        if thread_id is None:
            thread_id = str(uuid.uuid4())
            self.db.create_thread(thread_id, {})
            temporary = body.on_completion != "keep"
        else:
            check_uuid(thread_id, "thread")
            if self.db.get_thread(thread_id) is None:
                if body.if_not_exists != "create":
                    raise BadRequest(404, "Thread or assistant not found.")
                self.db.create_thread(thread_id, {})
        strategy = body.multitask_strategy or "enqueue"
        if strategy in ("interrupt", "rollback"):
            for active in self.db.active_runs(thread_id):
                self.runner.cancel(active, rollback=strategy == "rollback")
                if strategy == "rollback":
                    self.db.delete_run(active.run_id)
        now = time.time()
        run_id = str(uuid.uuid4())
        configurable = {**((body.config or {}).get("configurable") or {}),
                        "run_id": run_id, "thread_id": thread_id, "graph_id": spec.graph_id,
                        "assistant_id": spec.assistant_id}
        metadata = {"created_by": "system", "graph_id": spec.graph_id,
                    "assistant_id": spec.assistant_id, **(body.metadata or {})}
        kwargs = {
            "input": body.input,
            "command": body.command.model_dump() if body.command else None,
            "config": {**(body.config or {}), "configurable": configurable,
                       "metadata": metadata},
            "context": body.context or {}, "stream_mode": body.modes,
            "interrupt_before": body.interrupt_before, "interrupt_after": body.interrupt_after,
            "checkpoint_id": body.start_checkpoint, "webhook": body.webhook,
            "feedback_keys": None, "temporary": temporary, "subgraphs": body.stream_subgraphs,
            "resumable": body.stream_resumable, "on_disconnect": body.on_disconnect
            or "continue", "durability": body.durability or "async"}
        row = RunRow(run_id, thread_id, spec.assistant_id, spec.graph_id, "pending", strategy,
                     kwargs, metadata, now + (body.after_seconds or 0.0), now, now)
        if self.db.add_run(row, reject_if_busy=strategy == "reject") == "busy":
            raise BadRequest(409, "Thread is already running a task. Wait for it to finish "
                             "or choose a different multitask strategy.")
        self.runner.kick()
        return row

    async def until_done(self, run_id: str) -> RunRow | None:
        """Wait (without polling the clock) for ``run_id`` to end; its row."""
        waker = self.runner.wakers.watch(run_id)
        try:
            while True:
                waker.clear()
                kept = self.runner.kept_status(run_id)
                status = kept if kept is not None else await off(self.db.run_status, run_id)
                if status is None or status in TERMINAL:
                    return await off(self.db.get_run, run_id)
                # woken by this server's runner, or by its follower when another
                # server carries the run; on a timeout the store is read anyway
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waker.wait(), timeout=HEARTBEAT)
        finally:
            self.runner.wakers.unwatch(run_id, waker)

    def outcome(self, run: RunRow | None, thread_id: str) -> Any:
        """What ``wait``/``join`` answer: the last values (with ``__interrupt__``),
        or ``{"__error__": ...}`` for a failed run."""
        if run is None:
            return {}
        last: Any = None
        after = 0
        while batch := self.db.events_after(run.run_id, after):
            for seq, event, data in batch:
                after = seq
                if event == "error":
                    return {"__error__": json.loads(data)}
                if event == "values":
                    last = data
        if last is not None:
            return json.loads(last)
        thread = self.db.get_thread(thread_id)
        return self.state(thread)["values"] if thread is not None else {}

    def sse(self, run: RunRow, after: int, modes: list[str] | None,
            on_drop: Callable[[], Awaitable[None]] | None = None) -> AsyncIterator[bytes]:
        """The run's events after sequence ``after``, then the new ones until the
        run ends; ``id:`` is each event's sequence in the run's durable log."""
        wanted = set(modes if modes is not None else run.kwargs.get("stream_mode")
                     or ["values"])
        # "messages" alone: the messages so far (messages/partial); with
        # "messages-tuple": each chunk as it was logged
        parts = MessageParts() if "messages" in wanted and "messages-tuple" not in wanted \
            else None
        if "messages-tuple" in wanted:
            wanted.add("messages")
        wanted |= {"metadata", "error"} if modes is None else {"error"}
        runner, db = self.runner, self.db

        async def events() -> AsyncIterator[bytes]:
            waker = runner.wakers.watch(run.run_id)
            last, quiet_since, finished = after, time.monotonic(), False
            if parts is not None and after > 0:
                parts.prime(await off(_logged_messages, db, run.run_id, after))
            try:
                while True:
                    waker.clear()
                    kept = runner.tail(run.run_id, last)
                    status, rows = kept if kept is not None else \
                        await off(db.run_tail, run.run_id, last, TAIL_BATCH)
                    for seq, event, data in rows:
                        last = seq
                        mode = event.partition("|")[0]  # "mode|namespace": a subgraph's
                        if mode == "messages" and parts is not None:
                            quiet_since = time.monotonic()
                            for part, part_data in parts.events(data):
                                yield (f"event: {part}\r\ndata: {part_data}\r\nid: {seq}"
                                       "\r\n\r\n").encode()
                        elif mode in wanted:
                            quiet_since = time.monotonic()
                            yield (f"event: {event}\r\ndata: {data}\r\nid: {seq}\r\n\r\n"
                                   ).encode()
                    if len(rows) == TAIL_BATCH:
                        continue
                    if status is None or status in TERMINAL:
                        finished = True  # read before its events: they were all there
                        return
                    try:
                        await asyncio.wait_for(waker.wait(), timeout=HEARTBEAT)
                    except TimeoutError:
                        if time.monotonic() - quiet_since >= HEARTBEAT:
                            quiet_since = time.monotonic()
                            yield b": heartbeat\r\n\r\n"
            finally:
                runner.wakers.unwatch(run.run_id, waker)
                if not finished and on_drop is not None:
                    with anyio.CancelScope(shield=True):
                        await on_drop()

        return events()


def _logged_messages(db: ServeDB, run_id: str, upto: int) -> list[str]:
    """The data of the run's logged ``messages`` events up to sequence ``upto``."""
    found: list[str] = []
    after = 0
    while batch := db.events_after(run_id, after):
        for seq, event, data in batch:
            if seq > upto:
                return found
            after = seq
            if event.partition("|")[0] == "messages":
                found.append(data)
    return found


def _version() -> str:
    try:
        return importlib.metadata.version("hayata_py")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _json(data: Any, status: int = 200, headers: Mapping[str, str] | None = None
          ) -> JSONResponse:
    return JSONResponse(jsonable(data), status_code=status, headers=dict(headers or {}))


def _paged(items: list[Any], offset: int, limit: int) -> JSONResponse:
    page = items[offset:offset + limit]
    headers = {"x-pagination-total": str(len(items))}
    if offset + limit < len(items):
        headers["x-pagination-next"] = str(offset + limit)
    return _json(page, headers=headers)


async def _when_done(server: Server, run: RunRow, headers: Mapping[str, str], *,
                     wait: bool = False) -> Response:
    """What ``wait`` (``wait=True``) and ``join`` answer once ``run`` has ended (its
    values, or its error). While it runs, a ``\\n`` every ``HEARTBEAT`` s keeps
    the request alive, as LangGraph's server does (JSON ignores leading
    whitespace); a run that has ended is answered at once."""
    if run.status in TERMINAL:
        return _json(await off(server.outcome, run, run.thread_id), headers=headers)

    async def body() -> AsyncIterator[bytes]:
        done = asyncio.ensure_future(server.until_done(run.run_id))
        try:
            while not (await asyncio.wait({done}, timeout=HEARTBEAT))[0]:
                yield b"\n"
            ended = await off(server.outcome, done.result() or (run if wait else None),
                              run.thread_id)
            yield bytes(_json(ended).body)
        finally:
            done.cancel()
    return StreamingResponse(body(), media_type="application/json", headers=dict(headers))


def _sse_response(stream: AsyncIterator[bytes], content_location: str, location: str
                  ) -> StreamingResponse:
    return StreamingResponse(stream, media_type="text/event-stream; charset=utf-8",
                             headers={"Content-Location": content_location,
                                      "Location": location, "Cache-Control": "no-store"})


def build_app(server: Server,
              lifespan: Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]],
              *, api_key: str | None = None, cors_origins: Sequence[str] = ()) -> Starlette:
    """The Starlette app of ``server``: every request but ``GET /ok`` carrying
    ``api_key`` if given, CORS for ``cors_origins`` if any (:mod:`._security`)."""
    db, runner = server.db, server.runner

    async def ok(request: Request) -> Response:
        return _json({"ok": True, "services": {}})

    async def info(request: Request) -> Response:
        return _json({"version": _version(), "hayata": True,
                      "flags": {"assistants": True, "crons": False, "langsmith": False},
                      "host": {"kind": "self-hosted"}})

    # -- assistants ----------------------------------------------------------------

    async def assistants_search(request: Request) -> Response:
        body = parse(AssistantSearch, await request.body())
        found = [server.assistant_json(s) for s in reversed(server.specs)
                 if (body.graph_id is None or s.graph_id == body.graph_id)
                 and (body.name is None or s.graph_id == body.name)
                 and _subset(body.metadata, {"created_by": "system"})]
        return _paged(found, body.offset, body.limit)

    async def assistant_get(request: Request) -> Response:
        return _json(server.assistant_json(server.assistant(request.path_params["a"])))

    async def assistant_graph(request: Request) -> Response:
        spec = server.assistant(request.path_params["a"])
        drawn = await off(lambda: server.graphs[spec.graph_id].get_graph().to_json())
        return _json(drawn)

    async def assistant_schemas(request: Request) -> Response:
        spec = server.assistant(request.path_params["a"])

        return _json(await off(schemas, spec))

    # -- threads -------------------------------------------------------------------

    async def threads_create(request: Request) -> Response:
        body = parse(ThreadCreate, await request.body())
        thread_id = body.thread_id or str(uuid.uuid4())
        check_uuid(thread_id, "thread")
        row = await off(db.create_thread, thread_id, body.metadata or {})
        if row is None:
            if body.if_exists == "do_nothing":
                existing = await off(server.thread, thread_id)
                return _json(await off(server.thread_out, existing))
            raise BadRequest(409, f"Thread with ID {thread_id} already exists")
        return _json(thread_json(row))

    async def thread_get(request: Request) -> Response:
        row = await off(server.thread, request.path_params["t"])
        return _json(await off(server.thread_out, row))

    async def thread_patch(request: Request) -> Response:
        body = parse(ThreadPatch, await request.body())
        thread_id = request.path_params["t"]
        check_uuid(thread_id, "thread")
        row = await off(db.update_thread, thread_id, metadata=body.metadata or {})
        if row is None:
            raise BadRequest(404, "Not Found")
        return _json(await off(server.thread_out, row))

    async def thread_delete(request: Request) -> Response:
        row = await off(server.thread, request.path_params["t"])
        for active in await off(db.active_runs, row.thread_id):
            await off(runner.cancel, active)
        await off(db.delete_thread, row.thread_id)
        return Response(status_code=204)

    async def threads_search(request: Request) -> Response:
        body = parse(ThreadSearch, await request.body())

        def search() -> list[dict[str, Any]]:
            rows = db.search_threads(status=body.status, limit=body.limit,
                                     offset=body.offset)
            found = []
            for row in rows:
                if not _subset(body.metadata, row.metadata):
                    continue
                out = server.thread_out(row) if body.values or row.graph_id else \
                    thread_json(row)
                if body.values and not _subset(body.values, out.get("values") or {}):
                    continue
                found.append(out)
            return found
        return _paged(await off(search), body.offset, body.limit)

    # -- state ---------------------------------------------------------------------

    async def state_get(request: Request) -> Response:
        row = await off(server.thread, request.path_params["t"])
        return _json(await off(server.state, row, request.path_params.get("c")))

    async def state_update(request: Request) -> Response:
        body = parse(StateUpdate, await request.body())
        row = await off(server.thread, request.path_params["t"])
        graph = server.graphs.get(row.graph_id or "")
        if graph is None:
            raise BadRequest(400, f"Thread '{row.thread_id}' has no assigned graph ID. "
                             "Run a graph on it first.")
        configurable = {"thread_id": row.thread_id}
        checkpoint_id = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
        if checkpoint_id:
            configurable["checkpoint_id"] = checkpoint_id
        new = await off(graph.update_state, {"configurable": configurable}, body.values,
                        body.as_node)
        await off(runner.settle, row.thread_id)
        cfg = dict(new.get("configurable") or {})
        checkpoint = {"thread_id": row.thread_id, "checkpoint_ns": cfg.get("checkpoint_ns", ""),
                      "checkpoint_id": cfg.get("checkpoint_id")}
        return _json({"checkpoint": checkpoint, "configurable": checkpoint,
                      "checkpoint_id": checkpoint["checkpoint_id"]})

    async def history(request: Request) -> Response:
        body = parse(HistoryRequest, await request.body())
        row = await off(server.thread, request.path_params["t"])
        graph = server.graphs.get(row.graph_id or "")
        if graph is None:
            return _json([])

        def read() -> list[dict[str, Any]]:
            configurable = {"thread_id": row.thread_id}
            checkpoint_id = (body.checkpoint or {}).get("checkpoint_id")
            if checkpoint_id:
                configurable["checkpoint_id"] = checkpoint_id
            before = body.before
            if before is not None and "configurable" not in before:
                before = {"configurable": {**before, "thread_id": row.thread_id}}
            return [state_json(s) for s in graph.get_state_history(
                {"configurable": configurable}, filter=body.metadata, before=before,
                limit=body.limit)]
        return _json(await off(read))

    # -- runs ----------------------------------------------------------------------

    def _locations(run: RunRow, threadless: bool, tail: str) -> tuple[str, str]:
        base = f"/runs/{run.run_id}" if threadless else \
            f"/threads/{run.thread_id}/runs/{run.run_id}"
        return base, f"{base}/{tail}"

    async def runs_create(request: Request) -> Response:
        body = parse(RunCreate, await request.body())
        thread_id = request.path_params.get("t")
        run = await off(server.create_run, body, thread_id)
        where, _ = _locations(run, thread_id is None, "")
        return _json(run_json(run), headers={"Content-Location": where})

    async def runs_stream(request: Request) -> Response:
        body = parse(RunCreate, await request.body())
        thread_id = request.path_params.get("t")
        run = await off(server.create_run, body, thread_id)

        async def dropped() -> None:
            if run.kwargs.get("on_disconnect") == "cancel":
                current = await off(db.get_run, run.run_id)
                if current is not None and current.status not in TERMINAL:
                    await off(runner.cancel, current)
        where, again = _locations(run, thread_id is None, "stream")
        return _sse_response(server.sse(run, 0, None, dropped), where, again)

    async def runs_wait(request: Request) -> Response:
        body = parse(RunCreate, await request.body())
        run = await off(server.create_run, body, request.path_params.get("t"))
        base = f"/threads/{run.thread_id}/runs/{run.run_id}"
        return await _when_done(server, run, {"Content-Location": base,
                                              "Location": f"{base}/join"}, wait=True)

    async def runs_list(request: Request) -> Response:
        thread = await off(server.thread, request.path_params["t"])
        limit = int(request.query_params.get("limit", "10"))
        offset = int(request.query_params.get("offset", "0"))
        status = request.query_params.get("status")
        rows = await off(db.list_runs, thread.thread_id, status=status)
        return _json([run_json(r) for r in rows[offset:offset + limit]])

    async def run_get(request: Request) -> Response:
        run = await off(server.run, request.path_params.get("t"), request.path_params["r"])
        return _json(await off(server.run_out, run))

    async def run_delete(request: Request) -> Response:
        run = await off(server.run, request.path_params.get("t"), request.path_params["r"])
        if run.status in ACTIVE:
            raise BadRequest(409, "Cannot delete a run that is pending or running: cancel it")
        await off(db.delete_run, run.run_id)
        return Response(status_code=204)

    async def run_join(request: Request) -> Response:
        run = await off(server.run, request.path_params.get("t"), request.path_params["r"])
        return await _when_done(
            server, run, {"Location": f"/threads/{run.thread_id}/runs/{run.run_id}/join"})

    async def run_join_stream(request: Request) -> Response:
        thread_id = request.path_params.get("t")
        run = await off(server.run, thread_id, request.path_params["r"])
        header = request.headers.get("last-event-id")
        if header is None:
            after = await off(db.last_seq, run.run_id)
        else:
            try:
                after = max(int(header), 0)
            except ValueError:
                raise BadRequest(422, "Last-Event-ID must be an event id (an integer) "
                                 "or -1") from None
        modes = [m for m in request.query_params.getlist("stream_mode") if m] or None
        cancel = request.query_params.get("cancel_on_disconnect", "").lower() in ("1", "true")

        async def dropped() -> None:
            current = await off(db.get_run, run.run_id)
            if cancel and current is not None and current.status not in TERMINAL:
                await off(runner.cancel, current)
        where, again = _locations(run, thread_id is None, "stream")
        return _sse_response(server.sse(run, after, modes, dropped), where, again)

    async def run_cancel(request: Request) -> Response:
        thread_id = request.path_params["t"]
        run_id = request.path_params["r"]
        run = await off(db.get_run, run_id)
        if run is None or run.thread_id != thread_id:
            raise BadRequest(404, "No runs found to cancel.")
        action = request.query_params.get("action", "interrupt")
        wait = request.query_params.get("wait", "false").lower() in ("1", "true")
        if run.status not in TERMINAL:
            await off(runner.cancel, run, rollback=action == "rollback")
        if not wait:
            return Response(status_code=202)
        done = await server.until_done(run_id)
        if action == "rollback":
            await off(db.delete_run, run_id)
            await off(runner.settle, thread_id)
            return _json({})
        return _json(await off(server.outcome, done, thread_id),
                     headers={"Location": f"/threads/{thread_id}/runs/{run_id}/join"})

    # -- store ---------------------------------------------------------------------

    async def store_put(request: Request) -> Response:
        body = parse(StorePut, await request.body())
        await off(server.items.put, body.namespace, body.key, body.value, body.index)
        return Response(status_code=204)

    async def store_get(request: Request) -> Response:
        raw = request.query_params.get("namespace", "")
        key = request.query_params.get("key")
        if not key:
            raise BadRequest(422, "key: a query parameter 'key' is required")
        return _json(await off(server.items.get, [n for n in raw.split(".") if n], key))

    async def store_delete(request: Request) -> Response:
        body = parse(StoreKey, await request.body())
        await off(server.items.delete, body.namespace, body.key)
        return Response(status_code=204)

    async def store_search(request: Request) -> Response:
        body = parse(StoreSearch, await request.body())
        found = await off(server.items.search, body.namespace_prefix, body.filter, body.limit,
                          body.offset, body.query)
        return _json({"items": found})

    async def store_namespaces(request: Request) -> Response:
        body = parse(StoreNamespaces, await request.body())
        return _json({"namespaces": await off(server.items.namespaces, body.prefix,
                                              body.suffix, body.max_depth, body.limit,
                                              body.offset)})

    # -- hayata: the ways out of a run waiting on an uncertain task ----------------

    async def task_resolve(request: Request) -> Response:
        thread_id = request.path_params["t"]
        answer = parse_answer(await request.body(), thread_id)
        row = await off(server.thread, thread_id)
        done = await off(resolve, db, runner, server.graphs, row, request.path_params["k"],
                         answer)
        run = done["run"]
        headers = {"Content-Location": f"/threads/{thread_id}/runs/{run['run_id']}"} \
            if run else None
        return _json(done, headers=headers)

    async def thread_abandon(request: Request) -> Response:
        parse_abandon(await request.body())
        row = await off(server.thread, request.path_params["t"])
        return _json(await off(abandon, db, runner, server.graphs, row))

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, BadRequest)
        return _json({"detail": exc.detail}, status=exc.status)

    routes = [
        Route("/ok", ok, methods=["GET"]),
        Route("/info", info, methods=["GET"]),
        Route("/assistants/search", assistants_search, methods=["POST"]),
        Route("/assistants/{a}", assistant_get, methods=["GET"]),
        Route("/assistants/{a}/graph", assistant_graph, methods=["GET"]),
        Route("/assistants/{a}/schemas", assistant_schemas, methods=["GET"]),
        Route("/threads", threads_create, methods=["POST"]),
        Route("/threads/search", threads_search, methods=["POST"]),
        Route("/threads/{t}", thread_get, methods=["GET"]),
        Route("/threads/{t}", thread_patch, methods=["PATCH"]),
        Route("/threads/{t}", thread_delete, methods=["DELETE"]),
        Route("/threads/{t}/state", state_get, methods=["GET"]),
        Route("/threads/{t}/state", state_update, methods=["POST"]),
        Route("/threads/{t}/state/{c}", state_get, methods=["GET"]),
        Route("/threads/{t}/history", history, methods=["POST"]),
        Route("/threads/{t}/runs", runs_create, methods=["POST"]),
        Route("/threads/{t}/runs", runs_list, methods=["GET"]),
        Route("/threads/{t}/runs/stream", runs_stream, methods=["POST"]),
        Route("/threads/{t}/runs/wait", runs_wait, methods=["POST"]),
        Route("/threads/{t}/runs/{r}", run_get, methods=["GET"]),
        Route("/threads/{t}/runs/{r}", run_delete, methods=["DELETE"]),
        Route("/threads/{t}/runs/{r}/join", run_join, methods=["GET"]),
        Route("/threads/{t}/runs/{r}/stream", run_join_stream, methods=["GET"]),
        Route("/threads/{t}/runs/{r}/cancel", run_cancel, methods=["POST"]),
        Route("/runs", runs_create, methods=["POST"]),
        Route("/runs/stream", runs_stream, methods=["POST"]),
        Route("/runs/wait", runs_wait, methods=["POST"]),
        Route("/runs/{r}", run_get, methods=["GET"]),
        Route("/runs/{r}/stream", run_join_stream, methods=["GET"]),
        Route("/store/items", store_put, methods=["PUT"]),
        Route("/store/items", store_get, methods=["GET"]),
        Route("/store/items", store_delete, methods=["DELETE"]),
        Route("/store/items/search", store_search, methods=["POST"]),
        Route("/store/namespaces", store_namespaces, methods=["POST"]),
        Route("/hayata/threads/{t}/tasks/{k}/resolve", task_resolve, methods=["POST"]),
        Route("/hayata/threads/{t}/abandon", thread_abandon, methods=["POST"]),
    ]
    middleware = cors_middleware(cors_origins)
    if api_key:
        middleware.append(Middleware(ApiKeyCheck, key=api_key))
    return Starlette(routes=routes, exception_handlers={BadRequest: refused},
                     middleware=middleware, lifespan=lifespan)
