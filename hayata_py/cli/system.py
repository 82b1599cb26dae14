"""``hayata system start|status|stop|kill``."""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

import click

from hayata_py.cli import _launch, _state
from hayata_py.cli._common import (
    EXIT_FAILED,
    CliError,
    cli_hint,
    connect,
    data_dir_option,
    json_option,
    running_record,
)


@click.group("system")
def system_group() -> None:
    """Start, inspect, stop or crash the long-lived system of a data dir."""


def _import_path(cwd: str) -> None:
    """Let the system import agent modules from ``cwd`` (its processes are forked
    from this one and inherit ``sys.path``; exec'd helpers get ``PYTHONPATH``)."""
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if cwd not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([cwd, *paths])


def _clean_up_dead(data_dir: Path) -> str | None:
    """Refuse if the recorded system is alive; else kill its leftovers and drop the record."""
    record = _state.load(data_dir)
    if record is None:
        return None
    if _state.alive(record):
        raise CliError(f"a system is already running for data dir {data_dir} (admin port "
                       f"{record.admin_port}, pid {record.admin_pid}); stop it first with "
                       f"`hayata system stop{cli_hint(data_dir)}`")
    killed = _state.kill(record)
    _state.remove(data_dir)
    orphans = f"killed {len(killed)} orphan process(es) {sorted(killed)}" if killed \
        else "no process of it was left"
    return (f"cleaned up the dead system of session {record.session_id} "
            f"(admin pid {record.admin_pid}): {orphans}; removed the stale "
            f"{_state.RECORD_NAME}")


@system_group.command("start")
@data_dir_option
@click.option("--admin-port", type=click.IntRange(1, 65535), default=None,
              help="Thespian admin port (default: a free port).")
@click.option("--telemetry-log/--no-telemetry-log", default=True, show_default=True,
              help="Log every telemetry event to the system's log.")
def start(data_dir: Path, admin_port: int | None, telemetry_log: bool) -> None:
    """Start a system that keeps running after this command exits.

    Its processes live in an OS session of their own; its port, pids and
    session are recorded in DATA_DIR/system.json. Agent modules are imported
    from the current directory (put on the system's sys.path and PYTHONPATH):
    run `hayata agent start` from the same one.
    """
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / ".system.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cleaned = _clean_up_dead(data_dir)
        if cleaned:
            click.echo(cleaned)
        _import_path(os.getcwd())
        failure = _launch.launch(data_dir, admin_port, telemetry_log)
    if failure is not None:
        raise CliError(f"the system did not start: {failure}")
    record = running_record(data_dir)
    click.echo(f"hayata system started: admin port {record.admin_port}, admin pid "
               f"{record.admin_pid}, session {record.session_id}")
    click.echo(f"  data dir {data_dir} (record: {_state.record_path(data_dir)}, "
               f"log: {record.log_file})")
    click.echo(f"  agent modules are imported from {record.cwd}")
    click.echo(f"  reach it with `hayata ps --data-dir {data_dir}` or, from Python, "
               f"`hayata_py.AgentSystem.connect({record.admin_port})`")


@system_group.command("status")
@data_dir_option
@json_option
def status(data_dir: Path, as_json: bool) -> None:
    """Show whether the system runs, its port, pids and agents."""
    system, record = connect(data_dir)
    procs = _state.processes(record)
    agents = system.agents()
    if as_json:
        click.echo(json.dumps({**record.to_json(), "running": True, "agents": agents,
                               "pids": sorted(p.pid for p in procs)}))
        return
    uptime = time.time() - record.started_at
    click.echo(f"hayata system running (up {uptime:.0f}s)")
    rows = [("data dir", record.data_dir),
            ("admin", f"port {record.admin_port}, pid {record.admin_pid}"),
            ("session", f"{record.session_id} ({len(procs)} processes)"),
            ("store", record.store_url or "(none)"), ("log", record.log_file),
            ("agents", ", ".join(agents) or "(none)")]
    for name, value in rows:
        click.echo(f"  {name:<9}{value}")


@system_group.command("stop")
@data_dir_option
def stop(data_dir: Path) -> None:
    """Stop the system cleanly (agents first), then remove its record."""
    system, record = connect(data_dir)
    system.stop()
    left = _state.processes(record)
    if left:
        raise CliError(f"processes {sorted(p.pid for p in left)} are still running; "
                       f"use `hayata system kill{cli_hint(data_dir)}`", EXIT_FAILED)
    _state.remove(data_dir)
    click.echo(f"hayata system stopped (admin pid {record.admin_pid})")


@system_group.command("kill")
@data_dir_option
def kill(data_dir: Path) -> None:
    """SIGKILL every process of the system at once (a "VM crash").

    The record stays behind, as after a real crash; the next `hayata system
    start` cleans it up.
    """
    record = _state.load(data_dir)
    if record is None:
        raise CliError(f"no system is recorded for data dir {data_dir}; nothing to kill", 3)
    killed = _state.kill(record)
    left = _state.processes(record)
    if left:
        raise CliError(f"processes {sorted(p.pid for p in left)} survived SIGKILL")
    click.echo(f"killed {len(killed)} process(es) of session {record.session_id}: "
               f"{sorted(killed)}")
