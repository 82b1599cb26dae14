"""Start a system that outlives the command.

The system is started by a forked *launcher* whose standard streams point at
``<data-dir>/system.out`` and which closes every other descriptor: Thespian's
admin (and every actor) is forked from it and inherits its descriptors, so a
system started from the command itself would hold the caller's terminal or
pipes open for its whole life (``hayata system start | cat`` would never end).
The launcher writes ``system.json`` and exits; the command waits for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from hayata_py import _datadir

OUTPUT_NAME = "system.out"
ERROR_NAME = "system.start-error"


def launch(data_dir: Path, admin_port: int | None, log_telemetry: bool,
           timeout: float = 60.0, **options: Any) -> str | None:
    """Start the system; None on success, else the one-line reason it failed.

    ``options``: further :class:`~hayata_py.AgentSystem` keyword arguments
    (``store_url``, ``name``, ``bind``, ``convention_leader``,
    ``capabilities``, ``liveness``), handed to the forked launcher as they are.
    """
    error_file = data_dir / ERROR_NAME
    error_file.unlink(missing_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the launcher never returns
        code = 1
        try:
            _detach(data_dir / OUTPUT_NAME)
            code = _start(data_dir, admin_port, log_telemetry, error_file, options)
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
            os.waitpid(pid, 0)
            return f"the system did not start within {timeout}s (see {data_dir / OUTPUT_NAME})"
        time.sleep(0.01)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    try:
        return error_file.read_text(encoding="utf-8").strip() or "unknown error"
    except OSError:
        return f"the launcher exited with status {status} (see {data_dir / OUTPUT_NAME})"


def _detach(output: Path) -> None:
    """Point stdin at /dev/null, stdout and stderr at ``output``; close the rest."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    for name in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []:
        if int(name) > 2:
            with contextlib.suppress(OSError):
                os.close(int(name))


def _start(data_dir: Path, admin_port: int | None, log_telemetry: bool,
           error_file: Path, options: dict[str, Any]) -> int:
    from hayata_py._api import AgentSystem

    try:
        system = AgentSystem(data_dir, admin_port=admin_port, log_telemetry=log_telemetry,
                             **options)
    except Exception as exc:  # noqa: BLE001 - reported to the command as one line
        error_file.write_text(f"{type(exc).__name__}: {exc}\n", encoding="utf-8")
        return 1
    try:
        admin_pid = system.admin_pid
        record = _datadir.SystemRecord(
            data_dir=str(data_dir), admin_port=system.admin_port, admin_pid=admin_pid,
            admin_started=psutil.Process(admin_pid).create_time(),
            session_id=system.session_id, store_url=system.store_url,
            log_file=str(data_dir / "hayata.log.jsonl"), output_file=str(data_dir / OUTPUT_NAME),
            cwd=os.getcwd(), started_at=time.time(), instance=system.instance,
            name=system.name, bind=options.get("bind", "127.0.0.1"),
            leader=_leader_text(options.get("convention_leader")),
            capabilities=dict(options.get("capabilities") or {}),
            liveness=dataclasses.asdict(system.liveness))
        _datadir.save(data_dir, record)
    except Exception as exc:  # noqa: BLE001
        system.kill()
        error_file.write_text(f"cannot record the system: {exc}\n", encoding="utf-8")
        return 1
    return 0


def _leader_text(leader: tuple[str, int] | None) -> str | None:
    return None if leader is None else f"{leader[0]}:{leader[1]}"

