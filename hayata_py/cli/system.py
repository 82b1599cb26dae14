"""``hayata system start|status|stop|kill``."""

from __future__ import annotations

import fcntl
import ipaddress
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from hayata_py import _datadir
from hayata_py._config import Liveness
from hayata_py._datadir import cli_hint
from hayata_py._errors import ConfigError
from hayata_py.cli import _launch
from hayata_py.cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
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
    record = _datadir.load(data_dir)
    if record is None:
        return None
    if _datadir.alive(record):
        _refuse_served(record, data_dir)
        raise CliError(f"a system is already running for data dir {data_dir} (admin port "
                       f"{record.admin_port}, pid {record.admin_pid}); stop it first with "
                       f"`hayata system stop{cli_hint(data_dir)}`")
    killed = _datadir.kill(record)
    _datadir.remove(data_dir)
    orphans = f"killed {len(killed)} orphan process(es) {sorted(killed)}" if killed \
        else "no process of it was left"
    return (f"cleaned up the dead system of session {record.session_id} "
            f"(admin pid {record.admin_pid}): {orphans}; removed the stale "
            f"{_datadir.RECORD_NAME}")


def _refuse_served(record: _datadir.SystemRecord, data_dir: Path) -> None:
    """CliError when the live system under ``data_dir`` is a ``hayata serve``'s:
    the server starts and stops it."""
    if record.server_pid is not None and _datadir.alive(record):
        raise CliError(f"the system under {data_dir} belongs to `hayata serve` (pid "
                       f"{record.server_pid}); stop the server instead (Ctrl-C or "
                       f"`kill {record.server_pid}`), which stops its system")


def _parse_leader(text: str | None) -> tuple[str, int] | None:
    if text is None:
        return None
    host, sep, port = text.strip().rpartition(":")
    if not (sep and host and port.isascii() and port.isdigit() and 0 < int(port) < 65536) \
            or " " in host:
        raise CliError(f"--leader must be HOST:PORT, e.g. 10.0.0.1:1900 (the leader's "
                       f"--admin-port); got {text!r}", EXIT_USAGE)
    return host, int(port)


def _parse_bind(text: str) -> str:
    try:
        address = ipaddress.IPv4Address(text.strip())
    except ValueError:
        raise CliError(f"--bind must be an IPv4 address of this host, e.g. 10.0.0.2 (default "
                       f"127.0.0.1); got {text!r}", EXIT_USAGE) from None
    if address.is_unspecified:
        raise CliError("--bind must be the one address the other systems reach this host at, "
                       "e.g. 10.0.0.2, not 0.0.0.0 (it is also the address advertised)",
                       EXIT_USAGE)
    return str(address)


def _parse_capabilities(items: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; a VALUE that parses as JSON (true, 3, 1.5, "x") is that value."""
    capabilities: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not (sep and key):
            raise CliError(f"--capability must be KEY=VALUE, e.g. --capability gpu=true or "
                           f"--capability region=eu; got {item!r}", EXIT_USAGE)
        try:
            value: Any = json.loads(text)
        except (ValueError, RecursionError):
            value = text
        if value is None or not isinstance(value, (str, int, float, bool)) \
                or (isinstance(value, float) and not math.isfinite(value)):
            raise CliError(f"--capability {key}: VALUE must be a string, a finite number, true "
                           f"or false (what placement compares), got {text[:80]!r}", EXIT_USAGE)
        if key in capabilities:
            raise CliError(f"--capability {key} is given twice; give each KEY once",
                           EXIT_USAGE)
        capabilities[key] = value
    return capabilities


_LIVENESS_OPTIONS = {"heartbeat": "--heartbeat", "heartbeat_misses": "--heartbeat-misses",
                     "convention_period": "--convention-period",
                     "convention_misses": "--convention-misses"}


def _parse_liveness(texts: dict[str, str | None]) -> Liveness:
    """``hy.Liveness`` from the options given (the others keep their defaults)."""
    values: dict[str, Any] = {}
    for field_name, text in texts.items():
        if text is None:
            continue
        option = _LIVENESS_OPTIONS[field_name]
        number: float | int
        try:
            number = int(text) if field_name.endswith("_misses") else float(text)
        except ValueError:
            kind = "a whole number, e.g. 3" if field_name.endswith("_misses") \
                else "a number of seconds, e.g. 0.5"
            raise CliError(f"{option} must be {kind}; got {text!r}", EXIT_USAGE) from None
        values[field_name] = number
    try:
        return Liveness(**values)
    except ConfigError as exc:
        field_name = str(exc.details.get("field", "")).removeprefix("liveness.")
        option = _LIVENESS_OPTIONS.get(field_name, "liveness")
        reason = exc.message.split(": ", 1)[-1]
        default = getattr(Liveness(), field_name, None)
        hint = f"; e.g. {option} {default:g}" if default is not None else ""
        raise CliError(f"{option} {reason}{hint}", EXIT_USAGE) from None


def _parse_store(url: str | None) -> str | None:
    if url is None:
        return None
    from hayata_py._api_checks import check_store_url

    try:
        return check_store_url(url)
    except ConfigError as exc:
        raise CliError(f"--store {exc.message.split(': ', 1)[1]}", EXIT_USAGE) from None


def _hide_password(url: str | None) -> str:
    """``url`` with its password (if any) shown as ``***``."""
    if not url:
        return url or ""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


@system_group.command("start")
@data_dir_option
@click.option("--admin-port", type=click.IntRange(1, 65535), default=None,
              help="Thespian admin port (default: a free port). Give the convention leader "
                   "a fixed one: members join it by HOST:PORT.")
@click.option("--telemetry-log/--no-telemetry-log", default=True, show_default=True,
              help="Log telemetry events to the system's log (per-task ones at debug level).")
@click.option("--store", "store_url", metavar="URL", default=None,
              help="The task store, e.g. postgresql+psycopg://hayata@10.0.0.1/hayata (one "
                   "PostgreSQL database shared by every system of a cluster). Default: "
                   "DATA_DIR/hayata.db (SQLite).")
@click.option("--name", metavar="NAME", default=None,
              help="The system's stable name, owner of its invocations' leases (default: "
                   "HOSTNAME:DATA_DIR). Give every system of a cluster its own.")
@click.option("--bind", "bind_text", metavar="IP", default="127.0.0.1", show_default=True,
              help="Address every actor binds to and advertises. Not loopback only inside "
                   "a private network: Thespian messages are pickles.")
@click.option("--leader", "leader_text", metavar="HOST:PORT", default=None,
              help="Join the convention led by the system on HOST with admin port PORT.")
@click.option("--capability", "capability_items", metavar="KEY=VALUE", multiple=True,
              help="What this system offers to placement (repeatable), e.g. gpu=true or "
                   "region=eu. VALUE is JSON if it parses (true, 2, 1.5), else a string.")
@click.option("--heartbeat", metavar="SECONDS", default=None,
              help="Ping children placed on other systems every SECONDS (default 0.5).")
@click.option("--heartbeat-misses", metavar="N", default=None,
              help="Take such a child for dead after N silent heartbeats (default 3).")
@click.option("--convention-period", metavar="SECONDS", default=None,
              help="Members re-register with the leader every SECONDS (default 5).")
@click.option("--convention-misses", metavar="N", default=None,
              help="The leader drops a member after N missed registrations (default 3).")
def start(data_dir: Path, admin_port: int | None, telemetry_log: bool, store_url: str | None,
          name: str | None, bind_text: str, leader_text: str | None,
          capability_items: tuple[str, ...], heartbeat: str | None,
          heartbeat_misses: str | None, convention_period: str | None,
          convention_misses: str | None) -> None:
    """Start a system that keeps running after this command exits.

    Its processes live in an OS session of their own; its port, pids and
    session are recorded in DATA_DIR/system.json. Agent modules are imported
    from the current directory (put on the system's sys.path and PYTHONPATH):
    run `hayata agent start` from the same one.

    To run on several hosts (docs/deployment.md): start the leader with a
    fixed --admin-port, --bind its private address and --store a shared
    PostgreSQL URL; start each member with --leader LEADER:PORT, its own
    --bind and --name, the same --store and its --capability list.
    """
    if name is not None and not name.strip():
        raise CliError("--name must not be empty, e.g. --name gpu-1", EXIT_USAGE)
    options: dict[str, Any] = {
        "store_url": _parse_store(store_url), "name": name, "bind": _parse_bind(bind_text),
        "convention_leader": _parse_leader(leader_text),
        "capabilities": _parse_capabilities(capability_items),
        "liveness": _parse_liveness({
            "heartbeat": heartbeat, "heartbeat_misses": heartbeat_misses,
            "convention_period": convention_period, "convention_misses": convention_misses}),
    }
    if not ipaddress.IPv4Address(options["bind"]).is_loopback:
        click.echo(f"Warning: --bind {options['bind']} is not a loopback address. Thespian "
                   "messages are pickles: whoever reaches the admin port or any actor port "
                   "can run code as this user, so keep these ports reachable only inside a "
                   "private network (docs/deployment.md).", err=True)
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / ".system.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cleaned = _clean_up_dead(data_dir)
        if cleaned:
            click.echo(cleaned)
        _import_path(os.getcwd())
        failure = _launch.launch(data_dir, admin_port, telemetry_log, **options)
    if failure is not None:
        raise CliError(f"the system did not start: {failure}")
    record = running_record(data_dir)
    click.echo(f"hayata system started: admin port {record.admin_port}, admin pid "
               f"{record.admin_pid}, session {record.session_id}")
    click.echo(f"  data dir {data_dir} (record: {_datadir.record_path(data_dir)}, "
               f"log: {record.log_file})")
    role = f"member of the convention led by {record.leader}" if record.leader \
        else f"leads its convention (members join with --leader {record.bind}:" \
             f"{record.admin_port})"
    click.echo(f"  name {record.name}, bound to {record.bind}, {role}")
    if record.capabilities:
        click.echo(f"  capabilities {_capabilities_text(record.capabilities)}")
    click.echo(f"  agent modules are imported from {record.cwd}")
    click.echo(f"  reach it with `hayata ps --data-dir {data_dir}` or, from Python, "
               f"`hayata_py.AgentSystem.connect({record.admin_port})`")


def _liveness_text(liveness: dict[str, Any]) -> str:
    if not liveness:
        return "(not recorded)"
    return (f"heartbeat {liveness['heartbeat']:g}s x {liveness['heartbeat_misses']}, "
            f"convention {liveness['convention_period']:g}s x "
            f"{liveness['convention_misses']}")


def _capabilities_text(capabilities: dict[str, Any]) -> str:
    return " ".join(f"{k}={json.dumps(v)}" for k, v in capabilities.items())


@system_group.command("status")
@data_dir_option
@json_option
def status(data_dir: Path, as_json: bool) -> None:
    """Show whether the system runs, its port, pids and agents."""
    system, record = connect(data_dir)
    procs = _datadir.processes(record)
    agents = system.agents()
    if as_json:
        click.echo(json.dumps({**record.to_json(), "store_url": _hide_password(record.store_url),
                               "running": True, "agents": agents,
                               "pids": sorted(p.pid for p in procs)}))
        return
    uptime = time.time() - record.started_at
    click.echo(f"hayata system running (up {uptime:.0f}s)")
    rows = [("data dir", record.data_dir),
            ("admin", f"port {record.admin_port}, pid {record.admin_pid}"),
            ("session", f"{record.session_id} ({len(procs)} processes)"),
            ("store", _hide_password(record.store_url) or "(none)"), ("log", record.log_file),
            ("name", record.name or "(not recorded)"), ("bind", record.bind),
            ("leader", record.leader or "(none: this system leads its convention)"),
            ("capabilities", _capabilities_text(record.capabilities) or "(none)"),
            ("liveness", _liveness_text(record.liveness)),
            ("agents", ", ".join(agents) or "(none)")]
    if record.server_pid is not None:
        rows.insert(1, ("served by", f"hayata serve, pid {record.server_pid}"))
    for name, value in rows:
        click.echo(f"  {name:<13}{value}")


@system_group.command("stop")
@data_dir_option
def stop(data_dir: Path) -> None:
    """Stop the system cleanly (agents first), then remove its record."""
    _refuse_served(running_record(data_dir), data_dir)
    system, record = connect(data_dir)
    system.stop()
    left = _datadir.processes(record)
    if left:
        raise CliError(f"processes {sorted(p.pid for p in left)} are still running; "
                       f"use `hayata system kill{cli_hint(data_dir)}`", EXIT_FAILED)
    _datadir.remove(data_dir)
    click.echo(f"hayata system stopped (admin pid {record.admin_pid})")


@system_group.command("kill")
@data_dir_option
def kill(data_dir: Path) -> None:
    """SIGKILL every process of the system at once (a "VM crash").

    The record stays behind, as after a real crash; the next `hayata system
    start` cleans it up.
    """
    record = _datadir.load(data_dir)
    if record is None:
        raise CliError(f"no system is recorded for data dir {data_dir}; nothing to kill", 3)
    _refuse_served(record, data_dir)
    killed = _datadir.kill(record)
    left = _datadir.processes(record)
    if left:
        raise CliError(f"processes {sorted(p.pid for p in left)} survived SIGKILL")
    click.echo(f"killed {len(killed)} process(es) of session {record.session_id}: "
               f"{sorted(killed)}")
