"""``hayata resume``: continue a paused invocation (a human-in-the-loop pause)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from hayata_py.cli._common import connect, data_dir_option, json_option, parse_json
from hayata_py.cli.run import follow
from hayata_py.messages import CALLER


@click.command("resume", short_help="Continue a paused invocation with a value.")
@click.argument("agent_id", metavar="AGENT")
@click.argument("invocation_id", metavar="INVOCATION")
@click.option("--value", "value_json", default="null", metavar="JSON",
              help="What the next decision sees as ctx.resume_value (JSON; default null).")
@click.option("--stream", is_flag=True, help="Print the invocation's events as they arrive.")
@json_option
@data_dir_option
def resume(agent_id: str, invocation_id: str, value_json: str, stream: bool, as_json: bool,
           data_dir: Path) -> None:
    """Continue AGENT's paused INVOCATION (status paused; `hayata agent list` shows
    its payload), then print its events (with --stream) and result.

    A pause_before breakpoint runs its held step; otherwise the next decision
    runs, seeing VALUE as ctx.resume_value. Refused with not_paused (exit 1)
    if the invocation is not paused (or another resume won); exit 4 if AGENT
    has no such invocation.
    """
    value = parse_json(value_json, "--value")
    system, record = connect(data_dir)
    ref = system.agent(agent_id)
    resumed = ref.resume(invocation_id, value, subscriber=CALLER, stream=stream)
    if not as_json:
        click.echo(f"resuming invocation {resumed}", err=True)
    sys.exit(follow(ref, resumed, as_json, None, data_dir, record))
