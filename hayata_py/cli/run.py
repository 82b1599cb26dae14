"""``hayata run`` and ``hayata result``: start an invocation, watch it, fetch its result."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from hayata_py import _datadir
from hayata_py._datadir import cli_hint
from hayata_py._errors import ErrorInfo, HayataError
from hayata_py._present import dumps, event_json, result_json
from hayata_py._ref import AgentRef
from hayata_py.cli._common import (
    EXIT_DETACHED,
    EXIT_FAILED,
    EXIT_NO_SYSTEM,
    EXIT_NOT_FOUND,
    EXIT_RUNNING,
    CliError,
    connect,
    data_dir_option,
    json_option,
    open_store_of,
    parse_json,
)
from hayata_py.messages import CALLER, AgentEvent, AgentResult

FOREVER = 7 * 24 * 3600.0  # select() refuses timeouts beyond ~24 days
POLL = 1.0  # while waiting for messages, check this often that the system is alive


def print_event(event: AgentEvent, as_json: bool) -> None:
    if as_json:
        click.echo(dumps(event_json(event)))
    else:
        click.echo(f"{event.sequence:>4}  {event.type:<22} {dumps(event.data)}")


def exit_status(result: AgentResult) -> int:
    """0 completed; 5 paused or interrupted (the invocation is kept: resume or
    recover it); 1 failed. The same with or without ``--json``."""
    if result.ok:
        return 0
    kept = result.status == "paused" or (
        result.error is not None and bool(result.error.details.get("recoverable")))
    return EXIT_RUNNING if kept else EXIT_FAILED


def print_result(result: AgentResult, as_json: bool, way_on: str = "") -> int:
    """Print the result (failures to stderr in text mode); return the exit status.
    ``way_on``: the command that continues an interrupted invocation."""
    if as_json:
        click.echo(dumps(result_json(result)))
    elif result.ok:
        click.echo(f"completed {result.invocation_id}: {dumps(result.result)}")
    else:
        assert result.error is not None
        if result.status == "paused":
            click.echo(f"paused {result.invocation_id}: "
                       f"{dumps(result.error.details.get('payload'))}", err=True)
        elif result.error.details.get("recoverable"):
            # Not failed: the invocation is kept, unfinished, for `hayata recover`.
            then = f"; continue it with `{way_on}`" if way_on else ""
            click.echo(f"interrupted {result.invocation_id}: {result.error.code}: "
                       f"{result.error.message}{then}", err=True)
        else:
            click.echo(f"failed {result.invocation_id}: {result.error.code}: "
                       f"{result.error.message}", err=True)
    return exit_status(result)


def stored_result(store_url: str | None, agent_id: str, invocation_id: str
                  ) -> AgentResult | None:
    """An invocation's result as the store has it (None while it is unfinished)."""
    with open_store_of(store_url) as store:
        record = store.get_invocation(invocation_id)
    if record is None or record.agent_id != agent_id:
        raise CliError(f"agent {agent_id!r} has no invocation {invocation_id!r} in the store "
                       f"(see `hayata tasks {agent_id}`)", EXIT_NOT_FOUND)
    if record.status == "running":
        return None
    error = ErrorInfo.from_dict(record.error) if record.error else None
    return AgentResult(invocation_id, record.status == "completed", record.result, error)


def _paused(store_url: str | None, invocation_id: str) -> bool:
    """The stored invocation waits for ``resume()`` (not for ``recover()``)."""
    from hayata_py._rules.pauses import is_paused

    with open_store_of(store_url) as store:
        return is_paused(store.get_invocation(invocation_id))


def _detached(agent_id: str, invocation_id: str, data_dir: Path) -> int:
    click.echo(f"detached; invocation {invocation_id} keeps running. Fetch its result with: "
               f"hayata result {agent_id} {invocation_id}{cli_hint(data_dir)}", err=True)
    return EXIT_DETACHED


@click.command("run", short_help="Run an agent and print its events and result.")
@click.argument("agent_id", metavar="AGENT")
@click.option("--input", "input_json", default="null", show_default=True,
              help="The invocation's input, as JSON.")
@click.option("--stream", is_flag=True, help="Print the invocation's events as they arrive.")
@json_option
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Give up waiting after this many seconds without a message "
                   "(the invocation keeps running). Default: wait.")
@click.option("--thread", "thread", metavar="ID", default=None,
              help="Run on this conversation thread: start from its state, leave the "
                   "final state to it.")
@click.option("--multitask", type=click.Choice(["reject", "enqueue"]), default="reject",
              show_default=True, help="A run on a busy thread: refuse it, or queue it "
                                      "behind the running one.")
@click.option("--detach", is_flag=True,
              help="Print the invocation id once the agent accepted it and exit 0; the "
                   "invocation runs on (`hayata result AGENT ID --wait`).")
@data_dir_option
def run(agent_id: str, input_json: str, stream: bool, as_json: bool, timeout: float | None,
        thread: str | None, multitask: str, detach: bool, data_dir: Path) -> None:
    """Run AGENT with --input, print its events (with --stream) and then its result.

    Exit status 0 on success, 1 on failure (the error code is printed), 5 if
    the run was interrupted (its agent's process died, say) or refused with
    recovery_required (the invocation is kept: `hayata recover`), 3 if the
    system died. Ctrl-C (130) detaches without stopping the invocation and
    prints how to fetch its result.
    """
    value = parse_json(input_json, "--input")
    system, record = connect(data_dir)
    ref: AgentRef = system.agent(agent_id)
    if detach:
        click.echo(ref.run(value, thread=thread, multitask=multitask))
        return
    invocation_id = ref.run(value, subscriber=CALLER, stream=stream, thread=thread,
                            multitask=multitask)
    sys.exit(follow(ref, invocation_id, as_json, timeout, data_dir, record))


def system_died(ref: AgentRef, invocation_id: str, data_dir: Path,
                record: _datadir.SystemRecord) -> CliError:
    """The one error (exit 3) for the system dying while a command follows an
    invocation, however the command noticed it (no message came and the admin
    is gone, or the API's wait found it gone: ``no_system``)."""
    hint = cli_hint(data_dir)
    return CliError(
        f"the system died during invocation {invocation_id} (admin pid {record.admin_pid} is "
        f"gone); start it again (`hayata system start{hint}`), start the agent and run "
        f"`hayata recover {ref.id}{hint}`", EXIT_NO_SYSTEM)


def follow(ref: AgentRef, invocation_id: str, as_json: bool, timeout: float | None,
           data_dir: Path, record: _datadir.SystemRecord) -> int:
    """Print the events then the result of an invocation run with ``hy.CALLER``;
    return the exit status. Ctrl-C or ``timeout`` seconds without a message
    detach (the invocation keeps running); the system dying ends the wait
    (:func:`system_died`), and so does the agent dying (its successor reports
    ``recovery_required``: exit 5), or the invocation ending without this
    subscriber (recovered elsewhere)."""
    try:
        return _follow(ref, invocation_id, as_json, timeout, data_dir, record)
    except HayataError as exc:
        if exc.code != "no_system":
            raise
        raise system_died(ref, invocation_id, data_dir, record) from None


def _recover_command(ref: AgentRef, data_dir: Path) -> str:
    return f"hayata recover {ref.id}{cli_hint(data_dir)}"


def _follow(ref: AgentRef, invocation_id: str, as_json: bool, timeout: float | None,
            data_dir: Path, record: _datadir.SystemRecord) -> int:
    last = time.monotonic()
    waited: AgentResult | None = None
    while True:
        try:
            for message in ref.messages(invocation_id, POLL):
                last = time.monotonic()
                if isinstance(message, AgentEvent):
                    print_event(message, as_json)
                elif message.status == "interrupted" and not _datadir.alive(record):
                    # its end filed from the store's log: the whole system is gone
                    raise system_died(ref, invocation_id, data_dir, record)
                else:
                    return print_result(message, as_json, _recover_command(ref, data_dir))
        except KeyboardInterrupt:
            return _detached(ref.id, invocation_id, data_dir)
        except TimeoutError:
            if not _datadir.alive(record):
                raise system_died(ref, invocation_id, data_dir, record) from None
            if waited is not None:  # ended, and no message came for this subscriber
                return print_result(waited, as_json, _recover_command(ref, data_dir))
            waited = _ended(ref, invocation_id, data_dir)
            if timeout is not None and time.monotonic() - last >= timeout:
                click.echo(f"no message for {timeout}s", err=True)
                return _detached(ref.id, invocation_id, data_dir)


def _ended(ref: AgentRef, invocation_id: str, data_dir: Path) -> AgentResult | None:
    """The invocation's result if it has ended (None while it runs); exit 5 with
    the way on if nothing runs it any more (its agent died mid-run)."""
    try:
        return ref.wait(invocation_id, POLL)
    except TimeoutError:
        return None
    except HayataError as exc:
        if exc.code != "recovery_required":
            raise
        hint = cli_hint(data_dir)
        raise CliError(f"interrupted {invocation_id}: the agent stopped running it (its "
                       f"process died); continue it with `hayata recover {ref.id}{hint}`",
                       EXIT_RUNNING) from None


@click.command("result", short_help="Print an invocation's result.")
@click.argument("agent_id", metavar="AGENT")
@click.argument("invocation_id", metavar="INVOCATION")
@click.option("--wait", is_flag=True, help="Wait for the invocation to end.")
@json_option
@data_dir_option
def result(agent_id: str, invocation_id: str, wait: bool, as_json: bool,
           data_dir: Path) -> None:
    """Print the result of INVOCATION of AGENT (exit 5 while it still runs).

    When AGENT is not started (after a system restart, say), the result is
    read from the durable store.
    """
    system, record = connect(data_dir)
    if agent_id not in system.agents():
        outcome = stored_result(record.store_url, agent_id, invocation_id)
        if outcome is None:
            hint = cli_hint(data_dir)
            then = (f"`hayata resume {agent_id} {invocation_id} --value JSON{hint}` (it is "
                    "paused)" if _paused(record.store_url, invocation_id)
                    else f"`hayata recover {agent_id}{hint}`")
            click.echo(f"invocation {invocation_id} is unfinished and agent {agent_id} is not "
                       f"started; start it with `hayata agent start MODULE:ATTR{hint}`, then "
                       f"{then}", err=True)
            sys.exit(EXIT_RUNNING)
    else:
        ref = system.agent(agent_id)
        outcome = ref.wait(invocation_id, FOREVER) if wait else ref.get_result(invocation_id)
    if outcome is None:
        click.echo(f"invocation {invocation_id} is still running; try again, or add --wait",
                   err=True)
        sys.exit(EXIT_RUNNING)
    sys.exit(print_result(outcome, as_json))
