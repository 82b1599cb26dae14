"""``hayata threads AGENT`` and ``hayata thread AGENT ID``: conversation threads,
read from the store (the agent need not be started)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from hayata_py._present import dumps
from hayata_py._threads import ThreadInfo, thread_info, thread_page
from hayata_py.cli._common import (
    data_dir_option,
    json_option,
    open_store_of,
    running_record,
)


def _json(info: ThreadInfo) -> str:
    row = dataclasses.asdict(info)
    row["queued"] = list(info.queued)
    row["invocations"] = [{"invocation_id": i, "status": s} for i, s in info.invocations]
    return dumps(row)


@click.command("threads", short_help="List an agent's conversation threads.")
@click.argument("agent_id", metavar="AGENT")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True,
              help="Threads to show.")
@click.option("--after", metavar="THREAD", default=None,
              help="Start after this thread id (the last one of the previous page).")
@json_option
@data_dir_option
def threads(agent_id: str, limit: int, after: str | None, as_json: bool,
            data_dir: Path) -> None:
    """List AGENT's threads in id order: status, completed invocations (VERSION),
    the invocation running on it and how many runs wait behind it."""
    record = running_record(data_dir)
    with open_store_of(record.store_url) as store:
        rows = thread_page(store, agent_id, limit, after)
    if as_json:
        for info in rows:
            click.echo(_json(info))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table("THREAD", "STATUS", "VERSION", "RUNNING", "QUEUED", box=None, pad_edge=False)
    for info in rows:
        table.add_row(Text(info.thread_id), Text(info.status), Text(str(info.version)),
                      Text(info.running_invocation_id or "-"), Text(str(len(info.queued))))
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = 1000  # never cut an id a script may copy
    console.print(table)


@click.command("thread", short_help="Show one conversation thread.")
@click.argument("agent_id", metavar="AGENT")
@click.argument("thread_id", metavar="ID")
@json_option
@data_dir_option
def thread(agent_id: str, thread_id: str, as_json: bool, data_dir: Path) -> None:
    """Show thread ID of AGENT: its state, status, queued runs and its
    invocations, newest first. Exit 4 if the thread has no invocation."""
    record = running_record(data_dir)
    with open_store_of(record.store_url) as store:
        info = thread_info(store, agent_id, thread_id)
    if as_json:
        click.echo(_json(info))
        return
    click.echo(f"thread {info.thread_id} of {agent_id}: {info.status}, version {info.version}"
               + (f", running {info.running_invocation_id}"
                  if info.running_invocation_id else ""))
    click.echo(f"state: {dumps(info.state)}")
    for place, queued in enumerate(info.queued, 1):
        click.echo(f"queued {place}: {queued}")
    for invocation_id, status in info.invocations:
        click.echo(f"{invocation_id}  {status}")
