# ruff: noqa: E501
"""Shared set-up for the convention prototypes.

Import this module *before* anything that imports Thespian: Thespian reads
``CONVENTION_REREGISTRATION_PERIOD`` (``"M:S"``), ``CONVENTION_REGISTRATION_MISS_MAX``
and ``CONVENTION_RESTART_PERIOD`` (``"M:S"``) from the environment once, when
``thespian.system.admin.convention`` is first imported, and the admin
processes are *forked* from this process, so they keep this process's values.

Set ``CONVENTION_RESTART_PERIOD`` as low as the re-registration period: a
member's admin loop sleeps for the *restart* period (default 3 min 22 s)
when it enters its loop before the leader's answer arrived, and so never
re-registers in time; the leader then drops a healthy member after
``MISS_MAX x REREGISTRATION_PERIOD`` (see docs/scale-out-research.md).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

T = TypeVar("T")


def configure(rereg: str = "0:01", miss_max: int = 3, restart: str | None = None) -> str:
    """Set the convention knobs and a private thespian log; return the log path.

    ``restart`` (CONVENTION_RESTART_PERIOD) defaults to ``rereg``."""
    if "thespian.system.admin.convention" in sys.modules:
        raise RuntimeError("configure() must run before Thespian's convention module is imported")
    os.environ["CONVENTION_REREGISTRATION_PERIOD"] = rereg
    os.environ["CONVENTION_REGISTRATION_MISS_MAX"] = str(miss_max)
    os.environ["CONVENTION_RESTART_PERIOD"] = restart or rereg
    log = os.path.join(tempfile.mkdtemp(prefix="conv-"), "thespian.log")
    os.environ["THESPLOG_FILE"] = log
    os.environ.setdefault("THESPLOG_THRESHOLD", "INFO")
    return log


def start_leader(**caps: Any) -> Any:
    from supervisors import System

    return System(capabilities=caps)


def start_member(leader_port: int, **caps: Any) -> Any:
    from supervisors import System

    return System(capabilities={"Convention Address.IPv4": ("127.0.0.1", leader_port), **caps})


def wait_for(probe: Callable[[], T | None], timeout: float, step: float = 0.005) -> T | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(step)
    return None


def events(system: Any, probe: Any) -> list[tuple[float, str, Any]]:
    from examples.convention._actors import Events

    reply = system.ask(probe, "events", 5.0)
    return reply.items if isinstance(reply, Events) else []


def first(evts: list[tuple[float, str, Any]], name: str, after: float = 0.0) -> tuple[float, Any] | None:
    for t, n, v in evts:
        if n == name and t >= after:
            return t, v
    return None


def cleanup(*systems: Any) -> None:
    """Shut the systems down in the order given (leader first, so supervisors
    stop their remote children), kill what is left, and check no process is left."""
    import psutil

    from supervisors._system import kill_all, session_processes

    sessions = [s.session_id for s in systems if s is not None]
    for s in [s for s in systems if s is not None]:
        try:
            s.shutdown(timeout=5.0)
        except Exception as exc:  # noqa: BLE001
            print(f"shutdown failed ({exc!r}); killing", file=sys.stderr)
            s.kill()
    left = [p for sid in sessions for p in session_processes(sid)]
    if left:
        kill_all(left)
        psutil.wait_procs(left, timeout=3)
    left = [p.pid for sid in sessions for p in session_processes(sid)]
    print(f"cleanup: sessions {sessions}, processes left: {left}")
