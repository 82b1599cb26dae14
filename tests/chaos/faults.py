"""The faults the campaign injects; each takes the campaign and the run it hits
and returns the name of what it hit (for the figures)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from tests.chaos.campaign import Campaign, Run, _alive, _kind, _walk, poll

Inject = Callable[[Campaign, Run], str]

# Every process kind of a running system, in the words of the figures.
ROLES = ("agent", "node", "edge", "edge_watcher", "node_supervisor", "agent_supervisor",
         "top_supervisor", "admin", "logger")


def role_pids(campaign: Campaign, run: Run) -> dict[str, list[int]]:
    """The pids of each role, for the agent ``run`` belongs to (node, edge: its nodes)."""
    system = campaign.sys
    out: dict[str, list[int]] = {role: [] for role in ROLES}
    out["admin"] = [system.admin_pid]
    out["logger"] = [p.pid for p in system.processes()
                     if p.ppid() == system.admin_pid and _kind(p) == "logger"]
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
        if not pids:
            return role
        pid = campaign.rng.choice(pids)
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)  # the fault's duration: the process stays frozen this long
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        return role

    return inject
