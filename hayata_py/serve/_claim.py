"""One ``hayata serve`` per data dir, and nothing left of a killed one.

``<data-dir>/serve.json`` names the server (pid and start time) and its
actors' OS session; ``<data-dir>/serve.lock`` is held (``flock``) by the
server, and by its actor processes, which inherit it. A server starting on a
data dir takes the lock first: while the recorded server runs it refuses to
start (naming its pid); when that server is dead, whatever is left of its
actor session (a kill -9 of the server alone, before its actors noticed) is
killed, and the lock taken once they are gone. So two actor systems never run
on one data dir.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import psutil

from hayata_py import _datadir
from hayata_py._api import AgentSystem
from hayata_py._errors import HayataError

__all__ = ["RECORD", "DataDirClaim", "claim", "record_system", "write_record"]

RECORD = "serve.json"
LOCK = "serve.lock"
RECLAIM_SECONDS = 30.0
"""How long a start waits for a dead server's leftovers to be gone."""


class DataDirClaim:
    """The held lock of a data dir (released when the server's processes end)."""

    def __init__(self, fd: int, reclaimed: list[int]) -> None:
        self.fd = fd
        self.reclaimed = reclaimed
        """Pids of a dead server's actor processes killed to take the data dir."""

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _record(data_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((data_dir / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _running(pid: Any, started: Any) -> bool:
    """Whether server ``pid`` (started at ``started``, if known) still runs."""
    if not isinstance(pid, int) or pid <= 1:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return not isinstance(started, (int, float)) or abs(proc.create_time() - started) < 0.5
    except psutil.Error:
        return False


def _leftovers(record: dict[str, Any]) -> list[psutil.Process]:
    """Live processes of the recorded actor session, started since its server
    (none for a record without the server's start time: a session id alone
    may name someone else's session by now)."""
    session, started = record.get("session_id"), record.get("started")
    if not isinstance(session, int) or session <= 1 or session == os.getsid(0) \
            or not isinstance(started, (int, float)):
        return []
    since = started - 0.5
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(proc.pid) == session and proc.create_time() >= since \
                    and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def claim(data_dir: Path, timeout: float = RECLAIM_SECONDS) -> DataDirClaim:
    """Take ``data_dir`` for a new server (see the module's doc);
    ``HayataError(code="data_dir_in_use")`` while another server runs there."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while True:
            record = _record(data_dir)
            if _running(record.get("pid"), record.get("started")) \
                    and record.get("pid") != os.getpid():
                raise HayataError(
                    f"data dir {data_dir} is served by another hayata serve (pid "
                    f"{record['pid']}, {record.get('url', '?')}); stop it first, or give this "
                    "server its own --data-dir", code="data_dir_in_use",
                    data_dir=str(data_dir), pid=record["pid"])
            left = _leftovers(record)
            for proc in left:
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(signal.SIGKILL)
                    killed.add(proc.pid)
            locked = _try_lock(fd)
            if locked and not left:
                return DataDirClaim(fd, sorted(killed))
            if locked:
                fcntl.flock(fd, fcntl.LOCK_UN)  # again once the killed ones are gone
            if time.monotonic() > deadline:
                raise HayataError(
                    f"data dir {data_dir} is still locked ({data_dir / LOCK}) "
                    f"{timeout:g} s after its server (pid {record.get('pid', '?')}) died: a "
                    "process outside its actor session holds it; stop that process",
                    code="data_dir_in_use", data_dir=str(data_dir))
            if left:
                psutil.wait_procs(left, timeout=0.1)
            else:
                time.sleep(0.05)
    except BaseException:
        os.close(fd)
        raise


def write_record(data_dir: Path, *, session_id: int, url: str) -> None:
    """Write ``serve.json`` (atomically) naming this server and its actors' session."""
    me = psutil.Process()
    tmp = data_dir / (RECORD + ".tmp")
    tmp.write_text(json.dumps({"pid": me.pid, "started": me.create_time(),
                               "session_id": session_id, "url": url}), encoding="utf-8")
    os.replace(tmp, data_dir / RECORD)


def record_system(data_dir: Path, system: AgentSystem) -> None:
    """Write the data dir's ``system.json`` for the server's system, so the
    ``hayata`` commands (``ps``, ``tasks``, ``events``, ``kill``, ``observe``,
    ...) attach to it as to one ``hayata system start`` started; it names this
    server, which ``hayata system stop``/``kill`` then refuse to stop under it."""
    admin = psutil.Process(system.admin_pid)
    _datadir.save(data_dir, _datadir.SystemRecord(
        data_dir=str(data_dir), admin_port=system.admin_port, admin_pid=system.admin_pid,
        admin_started=admin.create_time(), session_id=system.session_id,
        store_url=system.store_url, log_file=str(data_dir / "hayata.log.jsonl"),
        output_file=str(data_dir / "hayata.log.jsonl"), cwd=os.getcwd(),
        started_at=time.time(), instance=system.instance, name=system.name,
        liveness=dataclasses.asdict(system.liveness), server_pid=os.getpid()))
