"""``hayata tasks|recover|resolve|abandon``: what the store says, and the ways out.

``tasks`` reads the durable store directly (the agent need not be started:
after a system restart it still shows earlier invocations). The other three
go through the agent, which owns the unfinished invocation it found at start.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from hayata_py._datadir import cli_hint
from hayata_py._errors import HayataError, RecoveryRejected
from hayata_py._present import dumps, task_rows
from hayata_py.cli._common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_UNCERTAIN,
    EXIT_USAGE,
    CliError,
    connect,
    data_dir_option,
    json_option,
    open_store_of,
    parse_json,
    running_record,
)
from hayata_py.cli.run import follow
from hayata_py.messages import CALLER
from hayata_py.store import InvocationRecord, TaskStore


def _invocation(store: TaskStore, agent_id: str, invocation_id: str | None) -> InvocationRecord:
    """The named invocation of the agent, else its unfinished one, else its latest."""
    if invocation_id is not None:
        record = store.get_invocation(invocation_id)
        if record is None or record.agent_id != agent_id:
            raise CliError(f"agent {agent_id!r} has no invocation {invocation_id!r} in the "
                           "store", EXIT_NOT_FOUND)
        return record
    record = store.unfinished_invocation(agent_id)
    if record is None:
        latest = store.list_invocations(agent_id, limit=1)
        if not latest:
            raise CliError(f"the store has no invocation of agent {agent_id!r}", EXIT_NOT_FOUND)
        record = latest[0]
    return record


@click.command("tasks", short_help="Show an invocation's durable tasks and their recovery class.")
@click.argument("agent_id", metavar="AGENT")
@click.option("--invocation", "invocation_id", metavar="ID",
              help="The invocation (default: the unfinished one, else the latest).")
@json_option
@data_dir_option
def tasks(agent_id: str, invocation_id: str | None, as_json: bool, data_dir: Path) -> None:
    """Show the tasks of an invocation of AGENT as the durable store records them.

    CLASS is what recovery would make of each: completed (its result is
    reused), not_started (it runs), uncertain (started, no result: recovery
    stops until you resolve it, abandon the invocation, or declare the node
    idempotent), rerun (uncertain, of one of the started agent's
    idempotent_nodes: recovery runs it again) or failed. Reads the store:
    AGENT need not be started (then no node counts as idempotent).
    """
    record = running_record(data_dir)
    idempotent = _idempotent_nodes(data_dir, agent_id)
    with open_store_of(record.store_url) as store:
        invocation = _invocation(store, agent_id, invocation_id)
        rows = task_rows(store, invocation, idempotent)
    active = invocation.active_execution
    if as_json:
        for row in rows:
            click.echo(dumps(row))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    doing = "" if active is None else (
        f"a map of {active.node_ids[0]!r} over {len(active.input)} items" if active.map
        else str(list(active.node_ids)))
    step = f"step {invocation.step}" + (f", executing {doing}"
                                        if active is not None and invocation.status == "running"
                                        else "")
    if invocation.failing is not None and invocation.status == "running":
        step += (f", failing with {invocation.failing.get('code')}: undoing its completed "
                 "tasks")
    click.echo(f"invocation {invocation.invocation_id} of {agent_id}: {invocation.status} "
               f"({step})")
    table = Table("TASK", "STEP", "NODE", "BRANCH", "STATUS", "ATTEMPT", "CLASS", "RESOLVED",
                  "CACHED", "UNDOES", box=None, pad_edge=False)
    for row in rows:
        table.add_row(*(Text(str(row[key])) for key in (
            "task_id", "step", "node_id", "branch", "status", "attempt", "classification")),
            Text("yes" if row["resolved"] else "-"), Text("yes" if row["cached"] else "-"),
            Text(row["compensates"] or "-"))
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = 1000  # never cut a task id that a script may copy
    console.print(table)


def _idempotent_nodes(data_dir: Path, agent_id: str) -> frozenset[str]:
    """The started agent's ``idempotent_nodes`` (none if it is not started)."""
    try:
        system, _record = connect(data_dir)
    except CliError:
        return frozenset()
    try:
        return frozenset(system.agent(agent_id).status_info().idempotent_nodes)
    except HayataError:
        return frozenset()  # not started: the store alone cannot say
    finally:
        system.shutdown()  # detaches


def _uncertain(exc: RecoveryRejected, agent_id: str, data_dir: Path, as_json: bool) -> int:
    details = exc.details
    inv = details.get("invocation_id", "INVOCATION")
    task_ids = list(details.get("task_ids", []))
    task = task_ids[0] if len(task_ids) == 1 else "TASK"
    hint = cli_hint(data_dir)
    if as_json:
        click.echo(dumps({"kind": "rejected", "code": exc.code, **details}))
    what = "compensation(s)" if details.get("compensations") else "task(s)"
    rerun = "" if details.get("compensations") else (
        f", or run it again by restarting the agent (`hayata agent stop {agent_id}`, "
        "`hayata agent start MODULE:ATTR`) with the node in idempotent_nodes")
    click.echo(f"Error: recovery refused [task_execution_uncertain]: {what} "
               f"{', '.join(task_ids)} of node(s) {', '.join(details.get('node_ids', []))} "
               f"started but recorded no result. Check the external system, then record what "
               f"happened with `hayata resolve {agent_id} {task} --result JSON{hint}`, give up "
               f"with `hayata abandon {agent_id} {inv}{hint}`{rerun}; then "
               f"`hayata recover {agent_id}{hint}`", err=True)
    return EXIT_UNCERTAIN


@click.command("recover", short_help="Continue an agent's unfinished invocation.")
@click.argument("agent_id", metavar="AGENT")
@click.option("--stream", is_flag=True, help="Print the invocation's events as they arrive.")
@json_option
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Give up waiting after this many seconds without a message "
                   "(the invocation keeps running). Default: wait.")
@click.option("--invocation", "invocation_id", metavar="ID", default=None,
              help="The unfinished invocation to recover (needed when there are several: "
                   "`hayata unfinished AGENT` lists them).")
@data_dir_option
def recover(agent_id: str, stream: bool, as_json: bool, timeout: float | None,
            invocation_id: str | None, data_dir: Path) -> None:
    """Continue an unfinished invocation of AGENT (the only one, or --invocation),
    then print its events (with --stream) and result.

    Completed tasks are reused, not-started ones run, uncertain ones of
    idempotent nodes run again. If a task is uncertain, nothing runs and the
    command exits with status 6 naming the tasks and what to do.
    """
    system, record = connect(data_dir)
    ref = system.agent(agent_id)
    try:
        invocation_id = ref.recover(invocation_id, subscriber=CALLER, stream=stream)
    except RecoveryRejected as exc:
        if exc.code == "task_execution_uncertain":
            sys.exit(_uncertain(exc, agent_id, data_dir, as_json))
        if exc.code == "nothing_to_recover":
            raise CliError(f"agent {agent_id!r} has nothing to recover (status "
                           f"{ref.status()}) [nothing_to_recover]", EXIT_FAILED) from None
        raise
    if not as_json:
        click.echo(f"recovering invocation {invocation_id}", err=True)
    sys.exit(follow(ref, invocation_id, as_json, timeout, data_dir, record))


@click.command("unfinished", short_help="List an agent's invocations that wait for recovery.")
@click.argument("agent_id", metavar="AGENT")
@json_option
@data_dir_option
def unfinished(agent_id: str, as_json: bool, data_dir: Path) -> None:
    """List AGENT's unfinished invocations, oldest first, with what `hayata recover`
    would do: recoverable, uncertain (its TASKS: resolve or abandon), paused
    (`hayata resume`), waiting_for_placement or busy."""
    system, _record = connect(data_dir)
    rows = system.agent(agent_id).unfinished()
    if as_json:
        for row in rows:
            click.echo(dumps({"invocation_id": row.invocation_id, "recovery": row.recovery,
                              "thread": row.thread, "step": row.step,
                              "task_ids": list(row.task_ids), "code": row.code}))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table("INVOCATION", "RECOVERY", "THREAD", "STEP", "TASKS", box=None,
                  pad_edge=False)
    for row in rows:
        table.add_row(Text(row.invocation_id), Text(row.recovery), Text(row.thread or "-"),
                      Text(str(row.step)), Text(" ".join(row.task_ids) or "-"))
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = 1000  # never cut an id a script may copy
    console.print(table)


@click.command("resolve", short_help="Record the result of an uncertain task.")
@click.argument("agent_id", metavar="AGENT")
@click.argument("task_id", metavar="TASK")
@click.option("--result", "result_json", required=True, metavar="JSON",
              help="The task's result as a JSON object (what the node would have returned).")
@data_dir_option
def resolve(agent_id: str, task_id: str, result_json: str, data_dir: Path) -> None:
    """Record RESULT for the uncertain TASK of AGENT's unfinished invocation: the
    outcome you established by checking the external system. `hayata recover`
    then reuses it instead of running the node."""
    value = parse_json(result_json, "--result")
    if not isinstance(value, dict):
        raise CliError(f"--result must be a JSON object (a node returns a dict), got "
                       f"{type(value).__name__}; e.g. --result '{{\"ok\": true}}'", EXIT_USAGE)
    system, _record = connect(data_dir)
    system.agent(agent_id).resolve_task(task_id, result=value)
    click.echo(f"resolved task {task_id}; continue with `hayata recover {agent_id}"
               f"{cli_hint(data_dir)}`")


@click.command("abandon", short_help="End an unfinished invocation as failed.")
@click.argument("agent_id", metavar="AGENT")
@click.argument("invocation_id", metavar="INVOCATION")
@data_dir_option
def abandon(agent_id: str, invocation_id: str, data_dir: Path) -> None:
    """End AGENT's unfinished INVOCATION as failed (error code `abandoned`) and
    free the agent for new runs. Nothing of it runs again."""
    system, _record = connect(data_dir)
    ref = system.agent(agent_id)
    ref.abandon(invocation_id)
    click.echo(f"abandoned invocation {invocation_id}; agent {agent_id} is {ref.status()}")
