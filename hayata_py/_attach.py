"""Attach to the system a data dir's ``system.json`` names (started by ``hayata
system start``): what the ``hayata`` commands and the observer's
``observe(data_dir)`` both do first.

Above :mod:`hayata_py._api` (it makes an ``AgentSystem``), below both front
ends: imported by :mod:`hayata_py.cli` and :mod:`hayata_py._observer`, it
imports neither.
"""

from __future__ import annotations

import os
from pathlib import Path

from hayata_py._api import AgentSystem
from hayata_py._datadir import SystemRecord, cli_hint, no_system, running_record
from hayata_py._errors import HayataError

LOG_FILE_ENV = "SUPERVISORS_LOG_FILE"
BIND_ENV = "SUPERVISORS_BIND"


def connect(data_dir: Path, *, with_store: bool = False) -> tuple[AgentSystem, SystemRecord]:
    """Attach to the live system under ``data_dir`` (its logs go to the system's log).

    ``with_store``: also open the system's durable store (for commands that read
    it, such as ``tasks``); the others skip its cost. Raises
    ``HayataError(code="no_system")`` (:func:`~hayata_py._datadir.no_system`) if
    no system runs there or it cannot be reached.
    """
    record = running_record(data_dir)
    os.environ.setdefault(LOG_FILE_ENV, record.log_file)
    # Reach the admin at the address it bound (--bind), not loopback.
    os.environ[BIND_ENV] = record.bind
    store_url = record.store_url if with_store else None
    try:
        system = AgentSystem.connect(record.admin_port, store_url=store_url)
    except HayataError as exc:
        raise no_system(f"cannot reach the system on admin port {record.admin_port}: "
                        f"{exc.message}; check `hayata system status{cli_hint(data_dir)}`",
                        data_dir) from exc
    if system.session_id != record.session_id:
        raise no_system(f"admin port {record.admin_port} is served by another system "
                        f"(session {system.session_id}, not {record.session_id})", data_dir)
    # Agents started through this handle run as the recorded system instance
    # (recorded with the tasks they run; the lease owner is the system's name).
    system.instance = record.instance or system.instance
    return system, record

