"""The faults the campaign injects; each takes the campaign and the run it hits
and returns the name of what it hit (for the figures). The takeover by a
second system is in ``takeover.py``, the disk-full and read-only faults in
``disk.py``."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from tests import helpers
from tests.chaos.campaign import WAIT_S, Campaign, Run, _alive, _kind, _procs, _walk, poll

Inject = Callable[[Campaign, Run], str]

# Every process kind of a running system, in the words of the figures.
ROLES = ("agent", "node", "edge", "edge_watcher", "node_supervisor", "agent_supervisor",
         "top_supervisor", "admin", "logger")


def role_pids(campaign: Campaign, run: Run) -> dict[str, list[int]]:
    """The pids of each role, for the agent ``run`` belongs to (node, edge: its nodes)."""
    system = campaign.sys
    out: dict[str, list[int]] = {role: [] for role in ROLES}
    out["admin"] = [system.admin_pid]
    out["logger"] = [pid for pid, (ppid, kind) in _table(system).items()
                     if ppid == system.admin_pid and kind == "logger"]
    tree = system.tree()
    out["top_supervisor"] = [tree["pid"]]
    for sup in tree["children"]:
        if sup["id"] != f"agent:{run.graph}":
            continue
        out["agent_supervisor"] = [sup["pid"]]
        for row in _walk(sup):
            pid = row.get("pid")
            if not pid or row is sup:
                continue
            if row["role"] == "supervisor" and row["id"] == "nodes":
                out["node_supervisor"].append(pid)
            elif row["role"] in out:
                out[row["role"]].append(pid)
    return out


def _table(system: Any) -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, kind) of the system's live processes (one may die meanwhile)."""
    import psutil

    out = {}
    for proc in _procs(system):
        with contextlib.suppress(psutil.Error):
            out[proc.pid] = (proc.ppid(), _kind(proc))
    return out


def kill_one(role: str | None = None) -> Inject:
    """SIGKILL one process: of ``role``, or of a random role."""

    def inject(campaign: Campaign, run: Run) -> str:
        chosen = role or campaign.rng.choice(ROLES)
        pids = role_pids(campaign, run)[chosen]
        if pids:
            pid = campaign.rng.choice(pids)
            os.kill(pid, signal.SIGKILL)
            poll(lambda: not _alive(pid), 10.0, f"pid {pid} gone")
        return chosen

    return inject


def kill_system(campaign: Campaign, run: Run) -> str:
    """SIGKILL every process of the system at once (a VM crash), then start it again."""
    campaign.restart()
    return "system"


def freeze(role: str, seconds: float) -> Inject:
    """SIGSTOP one process of ``role`` for ``seconds`` (past the lease or the
    deadline), then SIGCONT; what it does when it wakes must change nothing
    it no longer owns (fencing)."""

    def inject(campaign: Campaign, run: Run) -> str:
        pids = role_pids(campaign, run)[role]
        running = running_edge_pid(run) if role == "edge" else None
        if running is not None and running in pids:
            pids = [running]  # the edge in the middle of a task: past its deadline
        if not pids:
            return role
        pid = campaign.rng.choice(pids)
        helpers.freeze(pid, WAIT_S)  # returns once it has stopped, not at kill()
        try:
            time.sleep(seconds)  # the fault's duration: the process stays frozen this long
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        return role

    return inject


# -- garbage on the wire ---------------------------------------------------------------

_PORT = re.compile(r"ActorAddr-\(T\|:(\d+)\)")


def actor_ports(campaign: Campaign) -> dict[int, int]:
    """pid -> listening port of every process of the system (from its title)."""
    out = {}
    for proc in _procs(campaign.sys):
        with contextlib.suppress(Exception):
            found = _PORT.search(" ".join(proc.cmdline()))
            if found:
                out[proc.pid] = int(found.group(1))
    return out


def address(port: int) -> Any:
    from thespian.actors import ActorAddress
    from thespian.system.transport.IPBase import TCPv4ActorAddress

    return ActorAddress(TCPv4ActorAddress("127.0.0.1", port, external=True))


class Unknown:
    """A message type no actor knows."""

    def __init__(self, payload: Any) -> None:
        self.payload = payload


def _stale(rng: random.Random) -> Any:
    """A value of the wrong type or a stale id, for any field."""
    return rng.choice((f"stale-{rng.getrandbits(48):x}", -rng.getrandbits(16), None,
                       [rng.random()], {"x": 1}, 10 ** 30, b"\xff\x00"))


def wrong_fields(cls: type, rng: random.Random) -> Any:
    """An instance of dataclass ``cls`` with every field garbage (no validation runs)."""
    obj = object.__new__(cls)
    for f in dataclasses.fields(cls):
        object.__setattr__(obj, f.name, _stale(rng))
    return obj


def protocol_types() -> list[type]:
    """The runtime's message dataclasses (everything an actor of hayata_py reads)."""
    from hayata_py import _actor_messages as _protocol
    from hayata_py import messages

    return [obj for module in (_protocol, messages) for obj in vars(module).values()
            if isinstance(obj, type) and dataclasses.is_dataclass(obj)
            and obj.__module__ == module.__name__]


def raw_bytes(port: int, rng: random.Random) -> None:
    """Bytes that are no Thespian frame (or a frame of no pickle) to ``port``."""
    junk = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 512)))
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 2) as s:
        s.sendall(rng.choice((junk, b"X" * 64 + junk, b"\x80\x04" + junk)))


def garbage(campaign: Campaign, run: Run) -> str:
    """Garbage to every actor's address: raw bytes, an unknown type, every protocol
    type with wrong fields and stale ids. Each actor must log it and keep working."""
    rng = campaign.rng
    ports = actor_ports(campaign)
    types = protocol_types()
    endpoint = campaign.sys._system
    for port in ports.values():
        raw_bytes(port, rng)
        target = address(port)
        with contextlib.suppress(Exception):
            endpoint.tell(target, Unknown(rng.random()))
        for cls in rng.sample(types, k=min(6, len(types))):
            with contextlib.suppress(Exception):
                endpoint.tell(target, wrong_fields(cls, rng))
    return "every actor"


# -- the store -------------------------------------------------------------------------

LOCK_S = 0.8  # how long the database stays locked: longer than the campaign's busy timeout

_LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))  # hold the lock this long (the fault)
conn.execute("ROLLBACK")
"""


def sqlite_locked(campaign: Campaign, run: Run) -> str:
    """Another process holds SQLite's database file locked past the busy timeout."""
    path = campaign.store_url.removeprefix("sqlite:///")
    with subprocess.Popen([sys.executable, "-c", _LOCKER, path, str(LOCK_S)],
                          stdout=subprocess.PIPE, text=True) as locker:
        assert locker.stdout is not None
        locker.stdout.readline()  # "locked": the lock is held from here
        locker.wait(LOCK_S + 30)
    return "sqlite lock"


def pg_restarted(server: Any) -> Inject:
    """The PostgreSQL server restarted (fast shutdown, then start) mid-invocation."""

    def inject(campaign: Campaign, run: Run) -> str:
        server.restart()
        return "postgres restart"

    return inject


def running_edge_pid(run: Run) -> int | None:
    """The pid of an edge that has started a task of ``run`` and not ended it."""
    open_: dict[str, int] = {}
    if run.effects.exists():
        for line in run.effects.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[0] == "start":
                open_[parts[1]] = int(parts[3])
            elif len(parts) == 4 and parts[0] == "end":
                open_.pop(parts[1], None)
    return next(iter(open_.values()), None)
