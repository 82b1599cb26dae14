"""``hayata serve``: LangGraph's Agent Server API over hayata_py, so the
clients LangGraph users already have (``langgraph-sdk``, the JS SDK,
agent-chat-ui) talk to graphs run durably by hayata.

```python
from hayata_py.serve import serve
serve("langgraph.json", data_dir="hayata-data", port=2024)
```

- :mod:`._graphs`: ``langgraph.json`` read unchanged; each graph an assistant.
- :mod:`._wire`: request bodies (validated, 422 naming the field) and answer shapes.
- :mod:`._db`: the API's threads, runs and run events in the store's database.
- :mod:`._runs`: the durable per-thread queue and the workers that carry runs
  out through :mod:`hayata_py.langgraph` and log every stream event.
- :mod:`._app`: the Starlette endpoints, a few lines each.
- :mod:`._security`: the API key rule and check, CORS.
- :mod:`._uncertain`: the ``/hayata/`` endpoints: resolve a task a crash left
  uncertain, or abandon the run waiting on it.
- :mod:`._message_parts`: the ``messages`` mode (the message so far) from logged chunks.
- :mod:`._claim`: one server per data dir; a killed server's leftovers reclaimed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from hayata_py._api import AgentSystem
from hayata_py._errors import ConfigError
from hayata_py.langgraph import HayataGraph, HayataStore, async_nodes
from hayata_py.langgraph import compile as compile_graph
from hayata_py.serve._app import Server, build_app
from hayata_py.serve._claim import claim, record_system, write_record
from hayata_py.serve._db import ServeDB
from hayata_py.serve._graphs import GraphSpec, assistant_id, read_config
from hayata_py.serve._items import Items, config_store_index
from hayata_py.serve._runs import LEASE_SECONDS, MAX_RUNNING, Runner
from hayata_py.serve._security import API_KEY_ENV, check_exposure, config_cors_origins

__all__ = ["API_KEY_ENV", "LEASE_SECONDS", "Served", "assistant_id", "open_server", "serve"]

log = logging.getLogger("hayata.serve")

EDGE_CONCURRENCY = 250
"""Tasks one edge of a served graph's ``async def`` node runs at once, unless
the config's ``"hayata"`` key sets that node's ``edge_concurrency``: the
``MAX_RUNNING`` runs of a graph waiting in one such node take a few processes."""


KEEP_ALIVE_SECONDS = 6
"""How long an idle client connection stays open by default (uvicorn's own
default is 5 s). Past the idle expiry of the SDKs' pools (httpx 5 s, node
4 s): the client drops an idle connection first, so a request it sends on
one is never cut by the server closing it at that moment. Not much longer:
idle connections a big client pool keeps reusing cost that client a scan
each per request (httpx), which the server's close spares it."""


def agent_options(spec: GraphSpec) -> dict[str, Any]:
    """The agent options ``spec``'s graph is served with: ``EDGE_CONCURRENCY``
    for each ``async def`` node, under what the config sets."""
    given = spec.options
    edges = {name: EDGE_CONCURRENCY for name in async_nodes(spec.path)}
    edges.update(given.get("edge_concurrency") or {})
    options = {**given, "edge_concurrency": edges} if edges else dict(given)
    return options


@dataclass
class Served:
    """A started server's parts: its app, its agent system and what it serves."""

    app: Starlette
    system: AgentSystem
    server: Server
    notes: list[str]
    closed: bool = False

    def close(self) -> None:
        """Stop the runner and the agent system (once; again does nothing)."""
        if self.closed:
            return
        self.closed = True
        self.server.runner.stop()
        self.server.db.close()
        self.system.shutdown()


def check_lease(lease_seconds: float) -> float:
    """``lease_seconds`` if it is seconds between 0.5 and 3600, else ConfigError."""
    if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)) \
            or not math.isfinite(lease_seconds) or not 0.5 <= lease_seconds <= 3600:
        raise ConfigError("lease_seconds", f"must be seconds between 0.5 and 3600, got "
                          f"{lease_seconds!r}")
    return float(lease_seconds)


def check_keep_alive(keep_alive: int) -> int:
    """``keep_alive`` if it is whole seconds between 1 and 3600, else ConfigError."""
    if isinstance(keep_alive, bool) or not isinstance(keep_alive, int) \
            or not 1 <= keep_alive <= 3600:
        raise ConfigError("keep_alive", f"must be whole seconds between 1 and 3600, got "
                          f"{keep_alive!r}")
    return keep_alive


def open_server(config: str | Path, *, data_dir: str | Path = "hayata-data",
                store_url: str | None = None, api_key: str | None = None,
                cors_origins: Sequence[str] = (), lease_seconds: float = LEASE_SECONDS,
                url: str = "", exit_with_owner: bool = False) -> Served:
    """Start the agent system, one agent per graph of ``config`` (a
    ``langgraph.json``), and build the app serving them. Runs left running by a
    stopped server are carried on once the app starts. The graphs' nodes get the
    store ``/store/items`` serves (``get_store()``), with the semantic-search
    index of the config's ``store.index`` if it names one. With ``api_key`` every
    request but ``GET /ok`` must carry it (``x-api-key``); CORS answers for
    ``cors_origins`` and the config's ``http.cors.allow_origins``, if any.

    Servers sharing one store (``store_url``) share their threads and runs:
    each is known by its system's name (one per host and data dir) and holds a
    lease of ``lease_seconds``; the running runs of one whose lease expired are
    carried on by another. ``exit_with_owner``: the actor processes end with
    this process, even after a kill -9 (what ``serve`` does)."""
    lease = check_lease(lease_seconds)
    specs, notes = read_config(config)
    origins = [*cors_origins, *config_cors_origins(config)]
    index = config_store_index(config)
    system = AgentSystem(data_dir, store_url=store_url, exit_with_owner=exit_with_owner)
    try:
        # every graph's nodes get the store /store/items serves (get_store())
        store = HayataStore(system, index=index)
        graphs: dict[str, HayataGraph] = {
            spec.graph_id: compile_graph(spec.path, system, id=f"serve.{spec.graph_id}",
                                         store=store, uncertain="interrupt",
                                         auto_recover=True, max_invocations=MAX_RUNNING,
                                         lease_seconds=lease, **agent_options(spec))
            for spec in specs}
        db = ServeDB(system.store_url)
    except BaseException:
        system.shutdown()
        raise
    runner = Runner(db, graphs, server_id=system.name, url=url, lease_seconds=lease,
                    max_running=MAX_RUNNING)
    server = Server(specs, graphs, db, runner, Items(HayataStore.over(db.holder, index=index)))

    served: Served | None = None

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        runner.start(asyncio.get_running_loop())
        try:
            yield
        finally:
            # here, not after uvicorn.run: uvicorn re-raises a SIGTERM it caught
            # once the app has shut down, which ends the process at once
            assert served is not None
            await asyncio.to_thread(served.close)

    served = Served(build_app(server, lifespan, api_key=api_key, cors_origins=origins),
                    system, server, notes)
    return served


def serve(config: str | Path, *, data_dir: str | Path = "hayata-data",
          store_url: str | None = None, host: str = "127.0.0.1", port: int = 2024,
          api_key: str | None = None, cors_origins: Sequence[str] = (),
          lease_seconds: float = LEASE_SECONDS,
          keep_alive: int = KEEP_ALIVE_SECONDS) -> None:
    """Serve ``config``'s graphs on ``host:port`` until interrupted. A host
    other than loopback needs ``api_key`` (``ConfigError`` before anything starts).
    ``keep_alive``: seconds an idle client connection stays open.

    The data dir is this server's alone (``HayataError(code="data_dir_in_use")``
    while another server runs on it); the actor processes a killed server left
    there are killed first, and this server's own end with it, even after a
    kill -9 of this process alone."""
    import uvicorn

    check_exposure(host, api_key)
    check_lease(lease_seconds)
    check_keep_alive(keep_alive)
    folder = Path(data_dir).resolve()
    held = claim(folder)
    if held.reclaimed:
        log.warning("hayata serve: killed %d process(es) a dead server left on %s: %s",
                    len(held.reclaimed), folder, sorted(held.reclaimed))
    try:
        url = f"http://{host}:{port}"
        served = open_server(config, data_dir=folder, store_url=store_url, api_key=api_key,
                             cors_origins=cors_origins, lease_seconds=lease_seconds, url=url,
                             exit_with_owner=True)
        # Who to kill for a whole-host drill or a clean-up: the server and its
        # actors' session; the next server on this data dir reclaims it too.
        write_record(folder, session_id=served.system.session_id, url=url)
        record_system(folder, served.system)
        for note in served.notes:
            log.warning("%s", note)
        try:
            uvicorn.run(served.app, host=host, port=port, log_level="warning",
                        timeout_graceful_shutdown=5, timeout_keep_alive=keep_alive)
        finally:
            served.close()
    finally:
        held.release()
