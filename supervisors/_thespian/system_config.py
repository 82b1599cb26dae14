"""How ``supervisors`` configures a Thespian system: its base, its admin
port, its convention timings and its logging.

- **System base**: ``multiprocTCPBase`` (:data:`SYSTEM_BASE`), each actor an
  OS process.
- **Conventions** (several systems, possibly on several hosts): Thespian
  reads its convention timings once, at import, from environment variables;
  :func:`configure_convention` sets them (the module values and the
  environment) for the admins started afterwards. Not a patch: the values are
  Thespian's own settings.
- **Admin port**: :func:`free_port`, below the kernel's ephemeral range.
- **Logging**: :func:`log_defs`, Thespian's own log records as lines of the
  system's structlog log.
"""

from __future__ import annotations

import os
import random
import socket
from datetime import timedelta
from typing import Any

import thespian.system.admin.convention as _convention

from supervisors._thespian.bind_address import DEFAULT_BIND

__all__ = [
    "ADMIN_ENV",
    "CONVENTION_ADDRESS",
    "SYSTEM_BASE",
    "configure_convention",
    "free_port",
    "log_defs",
    "own_admin",
]

ADMIN_ENV = "SUPERVISORS_ADMIN"
"""``host:port`` of the admin of the system an actor process belongs to (set
before the admin is forked, so every actor of that system inherits it)."""
CONVENTION_ADDRESS = "Convention Address.IPv4"
SYSTEM_BASE = "multiprocTCPBase"


def configure_convention(period: float, misses: int) -> None:
    """Set Thespian's convention timings for the systems started from now on.

    A member re-registers with the leader every ``period`` seconds and is
    declared dead after ``misses`` missed registrations. Thespian's *restart*
    period is set to the same value: left at its default (3 min 22 s), a member
    that has not heard back from the leader sleeps that long before its next
    registration, and the leader drops it as dead although it is alive.

    Thespian reads these once, at import; each admin is forked from the
    process that starts it and so inherits the module values set here (and
    the environment, for processes that import Thespian afresh).
    """
    whole = max(1, round(period))
    text = f"{whole // 60}:{whole % 60:02d}"
    for name in ("CONVENTION_REREGISTRATION_PERIOD", "CONVENTION_RESTART_PERIOD"):
        os.environ[name] = text
        setattr(_convention, name, timedelta(seconds=period))
    os.environ["CONVENTION_REGISTRATION_MISS_MAX"] = str(misses)
    _convention.CONVENTION_REGISTRATION_MISS_MAX = misses


def own_admin() -> str:
    """``host:port`` of this actor process's admin ('' outside a supervised system)."""
    return os.environ.get(ADMIN_ENV, "")


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = DEFAULT_BIND) -> int:
    """A TCP port for an admin that was free a moment ago on ``host``.

    Chosen *below* the kernel's ephemeral range: every actor socket binds port
    0 and so draws from that range, and an admin port picked there could be
    taken by another system's actor between this check and the admin's bind
    (seen once in a full test run: the system failed to start).
    """
    low = max(1024, min(_ephemeral_low(), 65536) - 12000)
    high = max(low + 1, _ephemeral_low() - 1)
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def log_defs() -> dict[str, Any]:
    """Thespian's own logging: warnings and errors as ``thespian_log`` lines of
    the system's structlog log (``SUPERVISORS_LOG_FILE``; without one, stderr),
    never Thespian's raw text on the caller's terminal."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"main": {"class": "supervisors._log.ThespianHandler", "level": "WARNING"}},
        "root": {"handlers": ["main"], "level": "WARNING"},
    }
