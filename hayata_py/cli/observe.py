"""``hayata observe``: serve the live observer page of the running system."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import click

from hayata_py._errors import ConfigError
from hayata_py.cli._common import EXIT_FAILED, EXIT_USAGE, CliError, connect, data_dir_option

DEFAULT_PORT = 8765  # hayata_py._observer.DEFAULT_PORT (not imported: it needs the extra)


@click.command("observe", short_help="Serve a live page of the system (tree, agents, drills).")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="TCP port of the page (0: any free port).")
@click.option("--bind", "bind", metavar="IP", default="127.0.0.1", show_default=True,
              help="Address to serve on. Keep loopback unless others must reach the page: "
                   "whoever has the printed URL (with its token) can kill actors.")
@data_dir_option
def observe(port: int, bind: str, data_dir: Path) -> None:
    """Serve a page that shows the running system of DATA_DIR live, like Erlang's
    observer: the supervision tree with OS pids, restarts and status; agents, their
    invocations, events and durable tasks with their recovery class; and buttons to
    kill an actor, run, recover, resolve a task or abandon an invocation, each showing
    the `hayata` command that does the same.

    Prints the URL with a token made for this start: the page needs it to change
    anything. Ctrl-C stops the page (not the system).
    """
    try:
        address = ipaddress.ip_address(bind)
    except ValueError:
        raise CliError(f"--bind must be an IP address of this host, e.g. 127.0.0.1 (the "
                       f"default); got {bind!r}", EXIT_USAGE) from None
    try:
        from hayata_py._observer import observe as serve
    except ImportError as exc:
        raise CliError(f"`hayata observe` needs the observe extra ({exc.name} is missing): "
                       "pip install 'hayata_py[observe]'", EXIT_FAILED) from None
    system, _record = connect(data_dir)
    try:
        observer = serve(system, port=port, bind=str(address))
    except ConfigError as exc:
        option = f"--{exc.details.get('field', 'port')}"
        raise CliError(f"{option} {exc.message.split(': ', 1)[-1]}", EXIT_USAGE) from None
    if not address.is_loopback:
        click.echo(f"warning: serving on {address}, not loopback: anyone who reaches it "
                   "with the token below can kill this system's actors", err=True)
    click.echo(f"hayata observer for {system.data_dir} (admin port {system.admin_port}):")
    click.echo(f"  {observer.url}", nl=True)
    click.echo("Ctrl-C stops the page; the system keeps running.")
    try:
        while not observer.wait(1.0):
            pass
    except KeyboardInterrupt:
        click.echo("observer stopped", err=True)
    finally:
        observer.close()
        system.shutdown()
