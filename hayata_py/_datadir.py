"""``<data-dir>/system.json``: how to reach a system started by ``hayata system start``
(or by ``hayata serve``, which names itself in ``server_pid``).

The record outlives the system on purpose: after a crash (``hayata system
kill``) it is what the next ``system start`` uses to find and clean up what the
dead system left. A system is *alive* when its admin process (same pid, same
start time, same session) still runs.

Both front ends find a system this way (the ``hayata`` commands and the
observer's ``observe(data_dir)``); it sits below both and imports neither.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import psutil

from hayata_py._errors import HayataError

RECORD_NAME = "system.json"
RECORD_VERSION = 1
DEFAULT_DATA_DIR = "hayata-data"
DATA_DIR_ENV = "HAYATA_DATA_DIR"


@dataclass(frozen=True)
class SystemRecord:
    """What ``system start`` recorded about the system it started."""

    data_dir: str
    admin_port: int
    admin_pid: int
    admin_started: float
    session_id: int
    store_url: str | None
    log_file: str
    output_file: str
    cwd: str
    started_at: float
    version: int = RECORD_VERSION
    instance: str = ""
    """The system instance id (recorded with each task it ran; the lease owner is
    ``name``)."""
    name: str = ""
    """The system's stable name: the owner of its invocations' leases."""
    bind: str = "127.0.0.1"
    """The address its actors bind to and advertise (attached commands use it too)."""
    leader: str | None = None
    """``host:port`` of the convention leader it joined; None for a leader or a lone system."""
    capabilities: dict[str, Any] = field(default_factory=dict)
    """What it offers to placement (``--capability``)."""
    liveness: dict[str, Any] = field(default_factory=dict)
    """Heartbeat and convention timings (the fields of ``hy.Liveness``)."""
    server_pid: int | None = None
    """The ``hayata serve`` process whose system this is (it started it and
    stops it); None for a system ``hayata system start`` started."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def record_path(data_dir: Path) -> Path:
    return data_dir / RECORD_NAME


def cli_hint(data_dir: Path) -> str:
    """``--data-dir X`` for hints, empty for the default or ``$HAYATA_DATA_DIR``."""
    implied = (DEFAULT_DATA_DIR, os.environ.get(DATA_DIR_ENV))
    return "" if str(data_dir) in implied else f" --data-dir {data_dir}"


def no_system(message: str, data_dir: Path) -> HayataError:
    """``HayataError(code="no_system")``: no live system for ``data_dir`` (the CLI
    prints ``message`` as its one-line error, exit 3)."""
    return HayataError(" ".join(message.split()), code="no_system", data_dir=str(data_dir))


def running_record(data_dir: Path) -> SystemRecord:
    """The record of the live system under ``data_dir``; :func:`no_system` otherwise."""
    record = load(data_dir)
    start = f"start one with `hayata system start{cli_hint(data_dir)}`"
    if record is None:
        raise no_system(f"no hayata system is running for data dir {data_dir} "
                        f"(no {RECORD_NAME}); {start}", data_dir)
    if not alive(record):
        if record.server_pid is not None:
            start = "start the server again (`hayata serve`) on this data dir"
        raise no_system(f"the system recorded in {record_path(data_dir)} is not running "
                        f"(admin pid {record.admin_pid} is gone); {start}", data_dir)
    return record


def load(data_dir: Path) -> SystemRecord | None:
    """The record under ``data_dir``, or None. An unreadable record counts as none.

    Fields added since a record was written take their defaults (a record of
    an older version loads); fields this version does not know are ignored.
    """
    try:
        data = json.loads(record_path(data_dir).read_text(encoding="utf-8"))
        known = {f.name for f in fields(SystemRecord)}
        record = SystemRecord(**{k: v for k, v in data.items() if k in known})
    except (OSError, ValueError, TypeError, AttributeError, RecursionError):
        return None
    return record if _plausible(record) else None


def _plausible(record: SystemRecord) -> bool:
    """The fields have the types ``save`` writes, and the session is not this
    process's own (a system runs in a session of its own): a hand-edited or
    garbage record is no record, so no command signals processes it names."""
    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    ints = (record.admin_port, record.admin_pid, record.session_id, record.version)
    texts = (record.data_dir, record.log_file, record.output_file, record.cwd,
             record.instance, record.name, record.bind)
    return (all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in ints)
            and 0 < record.admin_port < 65536 and record.session_id > 1
            and record.session_id != os.getsid(0)
            and number(record.admin_started) and number(record.started_at)
            and all(isinstance(v, str) for v in texts)
            and isinstance(record.store_url, (str, type(None)))
            and isinstance(record.leader, (str, type(None)))
            and isinstance(record.capabilities, dict) and isinstance(record.liveness, dict)
            and (record.server_pid is None or (isinstance(record.server_pid, int)
                                               and not isinstance(record.server_pid, bool)
                                               and record.server_pid > 1)))


def save(data_dir: Path, record: SystemRecord) -> None:
    """Write the record atomically (a reader never sees half of it)."""
    tmp = record_path(data_dir).with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record.to_json(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, record_path(data_dir))


def remove(data_dir: Path) -> bool:
    try:
        record_path(data_dir).unlink()
        return True
    except FileNotFoundError:
        return False


def session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def alive(record: SystemRecord) -> bool:
    """True while the recorded admin process runs (not a reused pid)."""
    try:
        proc = psutil.Process(record.admin_pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        same = abs(proc.create_time() - record.admin_started) < 0.5
    except psutil.Error:
        return False
    return same and session_of(record.admin_pid) == record.session_id


def processes(record: SystemRecord) -> list[psutil.Process]:
    """Live processes of the recorded system: its session, created since its admin."""
    found = []
    for proc in psutil.process_iter():
        if session_of(proc.pid) != record.session_id:
            continue
        try:
            if proc.status() != psutil.STATUS_ZOMBIE \
                    and proc.create_time() >= record.admin_started - 0.5:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def kill(record: SystemRecord, timeout: float = 10.0) -> list[int]:
    """SIGKILL every process of the recorded system until none remains; the pids killed.

    Scans again after each round: a supervisor may fork a replacement child
    between two signals. Callers check :func:`processes` for survivors.
    """
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs = processes(record)
        if not procs:
            return killed
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
                killed.append(proc.pid)
        _wait_gone(procs, min(deadline, time.monotonic() + 2.0))
    return killed


def _wait_gone(procs: list[psutil.Process], deadline: float) -> None:
    """Wait until every process exited or is a zombie (``psutil.wait_procs`` would
    wait out its timeout on zombies nobody reaps, e.g. under a container's PID 1)."""
    while time.monotonic() < deadline:
        if not any(_running(p) for p in procs):
            return
        time.sleep(0.005)


def _running(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
