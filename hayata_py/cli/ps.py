"""``hayata ps`` (the supervision tree with OS pids) and ``hayata kill`` (SIGKILL one actor)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import click

from hayata_py.cli._common import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    CliError,
    connect,
    data_dir_option,
    json_option,
)

Row = dict[str, Any]


def _label(row: Row) -> str:
    """One tree line; ``(remote)`` marks a child running on another system of the
    convention (its pid is a pid on that system's host)."""
    pid = row.get("pid") or "-"
    where = "  (remote)" if row.get("remote") else ""
    return (f"{row['role']} {row['id']}  pid {pid}  restarts {row.get('restarts', 0)}  "
            f"{row.get('status', '')}{where}")


@click.command("ps", short_help="Show the actor tree with OS pids.")
@json_option
@data_dir_option
def ps(as_json: bool, data_dir: Path) -> None:
    """Show the supervision tree: role, id, OS pid, restart count and status of
    every supervisor, agent, node, edge, reducer and watcher. "(remote)" marks
    an actor placed on another system of the convention: its pid is a pid on
    that system's host."""
    system, _record = connect(data_dir)
    tree = system.tree()
    if as_json:
        click.echo(json.dumps(tree))
        return
    from rich.console import Console
    from rich.text import Text
    from rich.tree import Tree

    def add(parent: Tree, rows: list[Row], remote: bool) -> None:
        for row in rows:
            # The edges and reducer of a remote node run on the node's system.
            row_remote = remote or bool(row.get("remote"))
            label = _label({**row, "remote": row_remote})
            add(parent.add(Text(label)), row.get("children", []), row_remote)

    root = Tree(Text(_label(tree)))
    add(root, tree.get("children", []), False)
    Console(highlight=False, soft_wrap=True).print(root)


def _child(rows: list[Row], child_id: str, what: str) -> Row:
    for row in rows:
        if row["id"] == child_id:
            return row
    raise CliError(f"no {what}; see `hayata ps`", EXIT_NOT_FOUND)


def find_targets(tree: Row, agent_id: str, node: str | None, agent: bool, edges: str | None,
                 reducer: str | None, supervisor: bool) -> tuple[str, list[Row]]:
    """The rows the ``kill`` options name, with a description for messages."""
    sup = _child(tree.get("children", []), f"agent:{agent_id}", f"agent {agent_id!r}")
    if supervisor:
        return f"supervisor of agent {agent_id}", [sup]
    if agent:
        return f"agent actor of {agent_id}", [_child(sup["children"], "agent", "agent actor")]
    nodes = _child(sup["children"], "nodes", "node supervisor")["children"]
    name = node or edges or reducer
    row = _child(nodes, f"node:{name}", f"node {name!r} in agent {agent_id!r}")
    if node:
        return f"node {node} of agent {agent_id}", [row]
    role = "edge" if edges else "reducer"
    found = [r for r in row.get("children", []) if r["role"] == role and r.get("pid")]
    if not found:
        raise CliError(f"node {name!r} has no running {role}; see `hayata ps`", EXIT_NOT_FOUND)
    return f"{role}s of node {name} of agent {agent_id}", found


@click.command("kill", short_help="SIGKILL one actor's process.")
@click.argument("agent_id", metavar="AGENT")
@click.option("--node", metavar="ID", help="Kill the node actor ID.")
@click.option("--agent", is_flag=True, help="Kill the agent actor.")
@click.option("--edges", metavar="NODE", help="Kill the edge processes of node NODE.")
@click.option("--reducer", metavar="NODE", help="Kill the reducer of node NODE.")
@click.option("--supervisor", is_flag=True, help="Kill the agent's supervisor.")
@data_dir_option
def kill(agent_id: str, node: str | None, agent: bool, edges: str | None, reducer: str | None,
         supervisor: bool, data_dir: Path) -> None:
    """SIGKILL one actor's process of AGENT (by the pid the system reports); print the pid."""
    chosen = [bool(node), agent, bool(edges), bool(reducer), supervisor]
    if sum(chosen) != 1:
        raise CliError("name exactly one of --node ID, --agent, --edges NODE, --reducer NODE, "
                       "--supervisor", EXIT_USAGE)
    system, record = connect(data_dir)
    what, rows = find_targets(system.tree(), agent_id, node, agent, edges, reducer, supervisor)
    for row in rows:
        pid = row.get("pid")
        if row.get("remote"):
            raise CliError(f"{what} runs on another system of the convention (pid {pid} "
                           "there); run `hayata system kill` on that host or kill the pid "
                           "there", EXIT_NOT_FOUND)
        if not pid:
            raise CliError(f"{what} has no running process ({row.get('status')}); "
                           "see `hayata ps`", EXIT_NOT_FOUND)
        try:
            same_system = os.getsid(pid) == record.session_id
        except ProcessLookupError:
            same_system = False
        if not same_system:
            raise CliError(f"pid {pid} ({what}) is not a process of this system; "
                           "see `hayata ps`", EXIT_NOT_FOUND)
        os.kill(pid, signal.SIGKILL)
        click.echo(f"killed pid {pid} ({what})")
