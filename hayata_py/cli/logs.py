"""``hayata logs``: the system's JSON-lines log, rendered for people.

Every process of a system writes JSON lines to ``<data-dir>/hayata.log.jsonl``
(supervisor decisions, agent and node events, telemetry). This command renders
them with structlog's console renderer, filtered by agent and level, and can
follow the file as it grows. It needs no running system.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import click
import structlog

from hayata_py.cli._common import EXIT_NOT_FOUND, CliError, data_dir_option

LOG_NAME = "hayata.log.jsonl"
LEVELS = ("debug", "info", "warning", "error", "critical")


def _matches(row: dict[str, Any], agent: str | None, level: str) -> bool:
    if agent is not None and row.get("agent_id") != agent:
        return False
    row_level = str(row.get("level", "info")).lower()
    return LEVELS.index(row_level) >= LEVELS.index(level) if row_level in LEVELS else True


def _rows(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line being written right now
        if isinstance(row, dict):
            yield row


def _render(row: dict[str, Any], renderer: Any) -> str:
    event = dict(row)
    text: str = renderer(None, event.get("level", "info"), event)
    return text


def _follow(handle: TextIO) -> Iterator[str]:
    while True:
        line = handle.readline()
        if line.endswith("\n"):
            yield line
        elif not line:
            time.sleep(0.2)  # polling a file someone else appends to


@click.command("logs", short_help="Show the system's log, readable.")
@click.option("--agent", metavar="ID", help="Only lines about agent ID.")
@click.option("--level", type=click.Choice(LEVELS), default="info", show_default=True,
              help="Lowest level shown.")
@click.option("-n", "--lines", "count", type=click.IntRange(min=0), default=50,
              show_default=True, help="How many of the last matching lines to show.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines (Ctrl-C stops).")
@click.option("--json", "as_json", is_flag=True, help="Print the raw JSON lines.")
@data_dir_option
def logs(agent: str | None, level: str, count: int, follow: bool, as_json: bool,
         data_dir: Path) -> None:
    """Show the last lines of the system log under --data-dir, rendered for people."""
    path = data_dir / LOG_NAME
    if not path.exists():
        raise CliError(f"no log at {path}: start a system with `hayata system start` first",
                       EXIT_NOT_FOUND)
    renderer = structlog.dev.ConsoleRenderer(colors=False)

    def emit(row: dict[str, Any]) -> None:
        click.echo(json.dumps(row) if as_json else _render(row, renderer))

    with path.open(encoding="utf-8") as handle:
        last = deque((r for r in _rows(iter(handle)) if _matches(r, agent, level)),
                     maxlen=count)
        for row in last:
            emit(row)
        if not follow:
            return
        try:
            for row in _rows(_follow(handle)):
                if _matches(row, agent, level):
                    emit(row)
        except KeyboardInterrupt:
            return
