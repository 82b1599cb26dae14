"""``hayata cache clear AGENT [--node N]``: delete an agent's cached node results
(``AgentConfig.cache``), in the store (the agent need not be started)."""

from __future__ import annotations

from pathlib import Path

import click

from hayata_py._present import dumps
from hayata_py.cli._common import data_dir_option, json_option, open_store_of, running_record


@click.group("cache", short_help="Manage agents' cached node results.")
def cache_group() -> None:
    """Cached node results (AgentConfig.cache), kept in the store and shared by
    all of an agent's invocations and threads."""


@cache_group.command("clear", short_help="Delete an agent's cached node results.")
@click.argument("agent_id", metavar="AGENT")
@click.option("--node", "node_id", metavar="NODE", default=None,
              help="Only this node's entries (default: every node of AGENT).")
@json_option
@data_dir_option
def clear(agent_id: str, node_id: str | None, as_json: bool, data_dir: Path) -> None:
    """Delete AGENT's cached results (of NODE only, with --node), live or
    expired: the next task of a cached node runs its node again. Prints how
    many entries were deleted."""
    record = running_record(data_dir)
    with open_store_of(record.store_url) as store:
        count = store.clear_cache(agent_id, node_id=node_id)
    if as_json:
        click.echo(dumps({"agent_id": agent_id, "node_id": node_id, "cleared": count}))
        return
    where = f"node {node_id!r} of " if node_id else ""
    click.echo(f"cleared {count} cache entr{'y' if count == 1 else 'ies'} of {where}"
               f"agent {agent_id}")
