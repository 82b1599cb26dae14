"""``hayata agent start|stop|list``."""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from hayata_py import _circuit
from hayata_py._config import AgentConfig
from hayata_py._errors import ConfigError, HayataError
from hayata_py._present import dumps
from hayata_py.cli._common import (
    EXIT_USAGE,
    CliError,
    connect,
    data_dir_option,
    json_option,
    open_store_of,
)


@click.group("agent")
def agent_group() -> None:
    """Start, stop and list agents of the running system."""


def load_config(target: str) -> AgentConfig:
    """Import ``MODULE:ATTR`` (from the current directory too) and return its AgentConfig.

    ``ATTR`` is an :class:`AgentConfig` or a function of no arguments returning one.
    """
    module_name, sep, attr = target.partition(":")
    if not (module_name and sep and attr):
        raise CliError(f"{target!r} is not MODULE:ATTR (e.g. examples.hello:config)", EXIT_USAGE)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(f"cannot import module {module_name!r} ({exc}); run from the "
                       "directory that contains it, as `hayata system start` was", EXIT_USAGE
                       ) from exc
    except Exception as exc:
        raise CliError(f"importing {module_name!r} raised {type(exc).__name__}: {exc}",
                       EXIT_USAGE) from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise CliError(f"{module_name!r} has no attribute {attr!r}", EXIT_USAGE)
        obj = getattr(obj, part)
    if not isinstance(obj, AgentConfig) and callable(obj):
        try:
            obj = obj()
        except Exception as exc:
            raise CliError(f"{target}() raised {type(exc).__name__}: {exc}", EXIT_USAGE
                           ) from exc
    if not isinstance(obj, AgentConfig):
        raise CliError(f"{target} is a {type(obj).__name__}, not a hayata_py.AgentConfig or a "
                       "function returning one", EXIT_USAGE)
    return obj


@agent_group.command("start")
@click.argument("target", metavar="MODULE:ATTR")
@data_dir_option
def start(target: str, data_dir: Path) -> None:
    """Start the agent configured by MODULE:ATTR (an AgentConfig or a function
    returning one). The module must be importable from the directory the
    system was started in."""
    config = load_config(target)
    # The agent records its invocations in the system's store: the handle that
    # starts it must know the store's URL.
    system, _record = connect(data_dir, with_store=True)
    try:
        ref = system.start_agent(config)
    except ConfigError as exc:
        raise CliError(f"invalid agent config in {target}: {exc.message}", EXIT_USAGE) from exc
    click.echo(f"started agent {ref.id}")


@agent_group.command("stop")
@click.argument("agent_id", metavar="ID")
@data_dir_option
def stop(agent_id: str, data_dir: Path) -> None:
    """Stop the agent ID (running edges are killed) and forget it."""
    system, _record = connect(data_dir)
    system.stop_agent(agent_id)
    click.echo(f"stopped agent {agent_id}")


@agent_group.command("list")
@data_dir_option
@json_option
def list_agents(data_dir: Path, as_json: bool) -> None:
    """List agents: id, status, current invocation, a paused invocation's payload,
    and the counts of invocations running, paused and unfinished (of at most
    MAX running at once), and each circuit breaker's state."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    system, record = connect(data_dir)
    rows: list[tuple[str, str, str | None, Any, dict[str, int], Any]] = []
    for agent_id in system.agents():
        try:
            status = system.agent(agent_id).status_info()
            counts = {"running": status.running, "paused": status.paused,
                      "unfinished": status.unfinished,
                      "max_invocations": status.max_invocations}
            rows.append((agent_id, status.status, status.invocation_id,
                         _payload(record.store_url, status.invocation_id)
                         if status.status == "paused" else None, counts, status.circuits))
        except HayataError as exc:
            rows.append((agent_id, f"unreachable ({exc.code})", None, None, {}, ()))
    if as_json:
        for agent_id, state, invocation, paused, counts, circuits in rows:
            click.echo(json.dumps({"id": agent_id, "status": state, "invocation": invocation,
                                   "invocations": counts}
                                  | ({"paused": paused} if paused is not None else {})
                                  | _circuit.as_json(circuits)))
        return
    table = Table("AGENT", "STATUS", "INVOCATION", "RUNNING", "PAUSED", "UNFINISHED",
                  "PAUSE", "CIRCUITS", box=None, pad_edge=False)
    for agent_id, state, invocation, paused, counts, circuits in rows:
        table.add_row(Text(agent_id), Text(state), Text(invocation or "-"),
                      Text(f"{counts['running']}/{counts['max_invocations']}"
                           if counts else "-"),
                      Text(str(counts.get("paused", "-"))),
                      Text(str(counts.get("unfinished", "-"))),
                      Text(dumps(paused) if paused is not None else "-"),
                      Text(_circuit.summary(circuits)))
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = 1000  # never cut an invocation id a script may copy
    console.print(table)


def _payload(store_url: str | None, invocation_id: str | None) -> Any:
    """A paused invocation's pause (kind, payload, nodes) as the store has it."""
    if invocation_id is None:
        return None
    with open_store_of(store_url) as store:
        found = store.get_invocation(invocation_id)
    from hayata_py._rules.pauses import is_paused

    return found.paused if found is not None and is_paused(found) else None
