"""``hayata serve``: LangGraph's Agent Server API for the graphs of a ``langgraph.json``."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from hayata_py._errors import ConfigError, HayataError
from hayata_py.cli._common import EXIT_FAILED, EXIT_USAGE, CliError

API_KEY_ENV = "HAYATA_API_KEY"
"""The environment variable of the API key (``hayata_py.serve.API_KEY_ENV``;
repeated so ``--help`` works without the serve extra)."""


@click.command("serve", short_help="Serve LangGraph graphs over LangGraph's server API.")
@click.option("--config", "config", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("langgraph.json"), show_default=True,
              help="The langgraph.json naming the graphs (\"graphs\": {\"name\": "
                   "\"./path.py:graph\"}), read unchanged.")
@click.option("--data-dir", "data_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Directory of the store and logs (default: hayata-data); "
                                 "one server per data dir.")
@click.option("--database-url", "database_url", default=None, metavar="URL",
              help="A SQLAlchemy URL of the store instead of the data dir's SQLite file "
                   "(e.g. postgresql+psycopg://host/db). Servers sharing one (each with its "
                   "own data dir) share threads and runs.")
@click.option("--lease-seconds", "lease_seconds", type=click.FloatRange(0.5, 3600),
              default=10.0, show_default=True,
              help="After this server stops renewing its lease (killed, cut off) for this "
                   "long, another server on the same store carries its running runs on.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help=f"Address to listen on. Any but loopback needs an API key in "
                   f"${API_KEY_ENV}.")
@click.option("--port", type=click.IntRange(0, 65535), default=2024, show_default=True)
@click.option("--keep-alive", "keep_alive", type=click.IntRange(1, 3600), default=6,
              show_default=True, metavar="SECONDS",
              help="How long an idle client connection stays open. Keep it longer than "
                   "the clients' pools keep one (httpx 5 s, node 4 s, aiohttp 15 s) and "
                   "shorter than a proxy's in front.")
@click.option("--cors-origin", "cors_origins", multiple=True, metavar="ORIGIN",
              help="An origin browsers may call from (repeatable; also "
                   "\"http\": {\"cors\": {\"allow_origins\": [...]}} in the config). "
                   "No CORS without one.")
def serve(config: Path, data_dir: Path | None, database_url: str | None,
          lease_seconds: float, host: str, port: int, keep_alive: int,
          cors_origins: tuple[str, ...]) -> None:
    """Serve the graphs of CONFIG (a langgraph.json) with LangGraph's Agent Server API,
    so langgraph-sdk, the JS SDK and agent-chat-ui talk to them; every run and stream
    event is recorded in the store, and a stream resumes from Last-Event-ID after a
    restart. Ctrl-C stops the server and its agent system; a kill -9 of the
    server ends its actor processes too, and a server started on the data dir
    of a dead one kills whatever it left first.

    With HAYATA_API_KEY set, every request but GET /ok must carry it in the
    x-api-key header (langgraph-sdk's api_key=); a --host other than loopback
    refuses to start without it.
    """
    try:
        from hayata_py.serve import serve as run_server
        from hayata_py.serve._security import api_key_from_env, check_exposure
    except ImportError as exc:
        raise CliError(f"`hayata serve` needs the serve extra ({exc.name} is missing): "
                       "pip install 'hayata_py[serve]'", EXIT_FAILED) from None
    api_key = api_key_from_env()
    try:
        check_exposure(host, api_key)
    except ConfigError as exc:
        raise CliError(f"--{exc.message}", EXIT_USAGE) from None
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    click.echo(f"hayata serve: {config} on http://{host}:{port}"
               f"{' (API key required)' if api_key else ''}", err=True)
    try:
        run_server(config, data_dir=data_dir or Path("hayata-data"), store_url=database_url,
                   host=host, port=port, api_key=api_key, cors_origins=cors_origins,
                   lease_seconds=lease_seconds, keep_alive=keep_alive)
    except HayataError as exc:
        if exc.code != "data_dir_in_use":
            raise
        raise CliError(str(exc), EXIT_FAILED) from None
