"""The ``hayata`` command line (also ``python -m hayata_py``).

Each command group lives in its own module and is registered on :data:`cli`
below; the recovery commands (``tasks``, ``recover``, ``resolve``,
``abandon``) live in :mod:`hayata_py.cli.recovery`. Every command finds the
system through ``<data-dir>/system.json`` (see :mod:`hayata_py._datadir`).
Runtime errors become one ``Error: ...`` line with the exit codes listed in
:mod:`hayata_py.cli._common`; no traceback for a user's mistake.
"""

from __future__ import annotations

from typing import Any

import click

from hayata_py._errors import HayataError
from hayata_py.cli import (
    agents,
    cache,
    events,
    logs,
    observe,
    pauses,
    ps,
    recovery,
    run,
    serve,
    system,
    threads,
)
from hayata_py.cli._common import EXIT_FAILED, CliError, from_hayata
from supervisors import SupervisorError


class _Group(click.Group):
    """A group that turns runtime errors into one-line CLI errors."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HayataError as exc:
            raise from_hayata(exc) from None
        except SupervisorError as exc:
            raise CliError(f"{exc} [{exc.code}]", EXIT_FAILED) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hayata_py")
def cli() -> None:
    """Run hayata_py agents, watch them, and drill crashes from a shell.

    Start a system with `hayata system start`, add agents with `hayata agent
    start MODULE:ATTR`, run them with `hayata run`, and see the actor tree with
    OS pids with `hayata ps`. After a crash, `hayata tasks AGENT` shows what
    the store recorded and `hayata recover AGENT` continues the invocation;
    `hayata resume AGENT INVOCATION --value JSON` continues a paused one.
    `hayata observe` serves all of this as a live page.
    """


cli.add_command(system.system_group)
cli.add_command(agents.agent_group)
cli.add_command(run.run)
cli.add_command(run.result)
cli.add_command(ps.ps)
cli.add_command(ps.kill)
cli.add_command(recovery.tasks)
cli.add_command(recovery.recover)
cli.add_command(recovery.unfinished)
cli.add_command(recovery.resolve)
cli.add_command(recovery.abandon)
cli.add_command(pauses.resume)
cli.add_command(threads.threads)
cli.add_command(threads.thread)
cli.add_command(cache.cache_group)
cli.add_command(events.events)
cli.add_command(events.prune)
cli.add_command(logs.logs)
cli.add_command(observe.observe)
cli.add_command(serve.serve)


def main() -> None:
    """Entry point of the ``hayata`` console script."""
    cli(prog_name="hayata")


__all__ = ["cli", "main"]
