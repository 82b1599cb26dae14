"""What the observer page shows, computed from plain data (no server, no actors).

The actor tree is read generically from :meth:`AgentSystem.tree` rows: every
row gets the ``path`` of ids that names it, the agent it belongs to and the
shell command that does what the page's "kill" button does. Roles are not
hard-coded beyond the ``agent:`` and ``node:`` id prefixes the ``hayata kill``
command itself understands; any other row is killed by pid.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from hayata_py.store import InvocationRecord

Row = dict[str, Any]

AGENT_PREFIX = "agent:"
NODE_PREFIX = "node:"


def annotate(tree: Mapping[str, Any], hint: str) -> Row:
    """A copy of ``tree`` where each row also has ``path``, ``agent``, ``killable`` and
    ``cli`` (the command that kills it; ``hint`` is the ``--data-dir`` suffix)."""
    return _annotate(tree, [], None, False, None, hint)


def _annotate(row: Mapping[str, Any], path: list[str], agent: str | None, remote: bool,
              parent: Mapping[str, Any] | None, hint: str) -> Row:
    ident = str(row.get("id", ""))
    here = [*path, ident] if path or parent is not None else []
    if ident.startswith(AGENT_PREFIX) and agent is None:
        agent = ident[len(AGENT_PREFIX):]
    # Everything below a remote child runs on that child's system.
    remote = remote or bool(row.get("remote"))
    pid = row.get("pid")
    out: Row = {k: v for k, v in row.items() if k != "children"}
    out.update(path=here, agent=agent, remote=remote,
               killable=bool(pid) and not remote and parent is not None,
               cli=kill_command(row, parent, agent, hint) if pid else None)
    out["children"] = [_annotate(child, here, agent, remote, row, hint)
                       for child in row.get("children", [])]
    return out


def kill_command(row: Mapping[str, Any], parent: Mapping[str, Any] | None,
                 agent: str | None, hint: str) -> str:
    """The shell command that SIGKILLs the process of ``row``."""
    ident, role = str(row.get("id", "")), row.get("role")
    by_pid = f"kill -9 {row.get('pid')}"
    if agent is None:
        return by_pid
    parent_id = str((parent or {}).get("id", ""))
    node = parent_id[len(NODE_PREFIX):] if parent_id.startswith(NODE_PREFIX) else None
    if role == "supervisor" and ident == AGENT_PREFIX + agent:
        option = "--supervisor"
    elif role == "agent":
        option = "--agent"
    elif role == "node" and ident.startswith(NODE_PREFIX):
        option = f"--node {shlex.quote(ident[len(NODE_PREFIX):])}"
    elif role == "reducer" and node is not None:
        option = f"--reducer {shlex.quote(node)}"
    else:
        # One edge (``hayata kill --edges`` kills every edge of a node) or a
        # supervisor `hayata kill` has no option for: by pid.
        return by_pid
    return f"hayata kill {shlex.quote(agent)} {option}{hint}"


def walk(row: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every row of a tree, depth first."""
    yield row
    for child in row.get("children", []):
        yield from walk(child)


def find_path(tree: Mapping[str, Any], path: Sequence[str]) -> Mapping[str, Any] | None:
    """The row named by ``path`` (ids from below the root), or None."""
    row: Mapping[str, Any] | None = tree
    for ident in path:
        assert row is not None
        row = next((c for c in row.get("children", []) if c.get("id") == ident), None)
        if row is None:
            return None
    return row


def agent_commands(agent_id: str, invocation_id: str | None, hint: str) -> dict[str, str]:
    """The commands behind the page's per-agent buttons."""
    agent = shlex.quote(agent_id)
    commands = {"recover": f"hayata recover {agent} --stream{hint}",
                "run": f"hayata run {agent} --input JSON --stream{hint}",
                "tasks": f"hayata tasks {agent}{hint}"}
    if invocation_id is not None:
        commands["abandon"] = f"hayata abandon {agent} {shlex.quote(invocation_id)}{hint}"
    return commands


def resolve_command(agent_id: str, task_id: str, result_json: str, hint: str) -> str:
    return (f"hayata resolve {shlex.quote(agent_id)} {shlex.quote(task_id)} "
            f"--result {shlex.quote(result_json)}{hint}")


def run_command(agent_id: str, input_json: str, hint: str) -> str:
    return f"hayata run {shlex.quote(agent_id)} --input {shlex.quote(input_json)} --stream{hint}"


def invocation_row(record: InvocationRecord) -> Row:
    """An invocation as the page lists it."""
    active = record.active_execution
    error = record.error or {}
    return {"invocation_id": record.invocation_id, "status": record.status,
            "step": record.step, "created_at": record.created_at,
            "updated_at": record.updated_at, "error": error.get("code"),
            "executing": list(active.node_ids) if active is not None
            and record.status == "running" else []}
