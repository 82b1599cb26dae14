"""``hayata events AGENT INVOCATION`` (an invocation's event log) and
``hayata prune --older-than AGE`` (delete finished invocations): both read or
write the store only, so the system need not run."""

from __future__ import annotations

from pathlib import Path

import click

from hayata_py import _datadir
from hayata_py._errors import ConfigError, HayataError
from hayata_py._eventlog_read import LogReader, read_events
from hayata_py._present import dumps
from hayata_py._retention import parse_age
from hayata_py.cli._common import (
    EXIT_DETACHED,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    CliError,
    data_dir_option,
    from_hayata,
    json_option,
    open_store_of,
)
from hayata_py.cli.run import print_event
from hayata_py.store import TaskStore


def _store(data_dir: Path) -> TaskStore:
    """The store of the system recorded under ``data_dir`` (running or not), else
    the data dir's SQLite file."""
    record = _datadir.load(data_dir)
    if record is not None:
        return open_store_of(record.store_url)
    if not (data_dir / "hayata.db").exists():
        raise CliError(f"no system has run in {data_dir} (no system.json, no hayata.db); "
                       "name it with --data-dir", EXIT_NOT_FOUND)
    return open_store_of(f"sqlite:///{(data_dir / 'hayata.db').resolve()}")


@click.command("events", short_help="Show an invocation's events from the store's log.")
@click.argument("agent_id", metavar="AGENT")
@click.argument("invocation_id", metavar="INVOCATION")
@click.option("--after", type=click.IntRange(min=0), default=0, show_default=True,
              help="Only the events after this sequence number (the last one you have).")
@click.option("--follow", is_flag=True,
              help="Then wait for new events until the invocation's latest run ends.")
@json_option
@data_dir_option
def events(agent_id: str, invocation_id: str, after: int, follow: bool, as_json: bool,
           data_dir: Path) -> None:
    """Print INVOCATION's events, as the store's event log keeps them: every event
    of the invocation with its sequence number, stored before any subscriber saw
    it. Another process, or a caller that crashed, reads on from --after with no
    gap and nothing twice. Exit 4 if AGENT has no such invocation in the store;
    Ctrl-C stops following (130)."""
    store = _store(data_dir)
    try:
        reader = LogReader(store, agent_id, invocation_id, after=after, follow=follow)
        for event in read_events(reader):
            print_event(event, as_json)
    except HayataError as exc:
        raise from_hayata(exc) from exc
    except KeyboardInterrupt:
        raise SystemExit(EXIT_DETACHED) from None
    finally:
        store.close()


@click.command("prune", short_help="Delete finished invocations older than an age.")
@click.option("--older-than", "older_than", required=True, metavar="AGE",
              help="e.g. 7d, 12h, 30m, 90s, 2w: finished (completed or failed) invocations "
                   "last updated longer ago than this are deleted.")
@click.option("--agent", "agent_id", metavar="AGENT", default=None,
              help="Only this agent's invocations (default: every agent's).")
@json_option
@data_dir_option
def prune(older_than: str, agent_id: str | None, as_json: bool, data_dir: Path) -> None:
    """Delete finished invocations older than AGE with their task records and
    events, in one transaction; never a running or paused one. Prints how many
    of each were deleted."""
    try:
        seconds = parse_age(older_than, "older_than")
    except ConfigError as exc:
        raise CliError(f"--older-than {exc.message}", EXIT_USAGE) from exc
    store = _store(data_dir)
    try:
        report = store.prune(seconds, agent_id=agent_id)
    finally:
        store.close()
    counts = {"invocations": report.invocations, "tasks": report.tasks,
              "events": report.events}
    if as_json:
        click.echo(dumps({"agent_id": agent_id, "older_than": seconds, **counts}))
        return
    click.echo(f"pruned {report.invocations} finished invocation(s) older than {older_than}"
               f"{'' if agent_id is None else f' of agent {agent_id}'}: {report.tasks} task "
               f"record(s), {report.events} event(s)")
