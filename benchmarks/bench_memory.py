"""Memory of idle agents: PSS and USS per process role, fresh and after many runs.

    python -m benchmarks.bench_memory [--agents 50] [--runs 100] [--growth-runs 100]
    python -m benchmarks.bench_memory --scale 500

Steady state (the default; ``make bench-memory``): start ``--agents`` 3-node
agents (``seq3``) in one system, let each run once (*fresh*), then
``--runs`` more times (*aged*), then ``--growth-runs`` more (*grown*). At
each point, for every process of the system: PSS and USS (psutil
``memory_full_info``), grouped by role (the process title Thespian sets:
``AgentActor``, ``EdgeActor``, ...). The PSS per agent is the system's total
minus the same total for the system with no agent, divided by the number of
agents. *Growth* is the USS each agent-owned process gained between *aged*
and *grown*: a process's private memory must not grow with the invocations it
ran.

Scale (``--scale N``; ``make bench-memory-500``): start ``N`` idle 3-node
agents one after the other (start time per agent), then let each run once,
all at once (every result must be ok), and report the total PSS. It starts
no more agents once the machine has less than ``--min-available-mb``
available (the machine is shared), and says so (``stopped_early``).

Results: ``benchmarks/results/memory.json`` (``memory_scale.json`` for
``--scale``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

import hayata_py as hy
from benchmarks import graphs as G
from benchmarks._util import environment, fmt, summary, write_json

TIMEOUT = 120.0
MB = 1024 * 1024
AGENT_ROLES = ("AgentSupervisor", "NodeSupervisor", "EdgeWatcher", "NodeActor", "EdgeActor",
               "AgentActor")
"""The processes an agent adds to a system (10 for a 3-node agent)."""


def _role(proc: psutil.Process) -> str:
    try:
        title = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "gone"
    first = title[0].split()[0] if title and title[0] else proc.name()
    return first


def sample(system: hy.AgentSystem) -> dict[int, dict[str, Any]]:
    """pid -> role, pss, uss (bytes) of every live process of the system."""
    out: dict[int, dict[str, Any]] = {}
    for proc in system.processes():
        try:
            mem = proc.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        out[proc.pid] = {"role": _role(proc), "pss": mem.pss, "uss": mem.uss, "rss": mem.rss}
    return out


def by_role(snap: dict[int, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per role: process count, median and max USS/PSS (MB), total PSS (MB)."""
    roles: dict[str, list[dict[str, Any]]] = {}
    for row in snap.values():
        roles.setdefault(row["role"], []).append(row)
    return {role: {
        "processes": len(rows),
        "uss_mb_median": statistics.median(r["uss"] for r in rows) / MB,
        "uss_mb_max": max(r["uss"] for r in rows) / MB,
        "pss_mb_median": statistics.median(r["pss"] for r in rows) / MB,
        "pss_mb_total": sum(r["pss"] for r in rows) / MB,
    } for role, rows in sorted(roles.items())}


def _total_pss(snap: dict[int, dict[str, Any]]) -> float:
    return sum(r["pss"] for r in snap.values()) / MB


def _run_all(refs: Sequence[hy.AgentRef], runs: int) -> float:
    """Every agent runs ``runs`` invocations (one at a time each, agents at once)."""
    t0 = time.perf_counter()
    for _ in range(runs):
        ids = [(ref, ref.run("x")) for ref in refs]
        for ref, invocation_id in ids:
            result = ref.wait(invocation_id, TIMEOUT)
            assert result.ok, result
    return time.perf_counter() - t0


def _point(system: hy.AgentSystem, base: float, agents: int, runs_each: int
           ) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    snap = sample(system)
    total = _total_pss(snap)
    return {"runs_each": runs_each, "processes": len(snap), "pss_mb_total": total,
            "pss_mb_per_agent": (total - base) / agents, "roles": by_role(snap)}, snap


def _growth(before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]]
            ) -> dict[str, Any]:
    """USS gained by each agent-owned process present at both points, by role (KB)."""
    roles: dict[str, list[float]] = {}
    for pid, row in after.items():
        if pid in before and row["role"] in AGENT_ROLES:
            roles.setdefault(row["role"], []).append((row["uss"] - before[pid]["uss"]) / 1024)
    return {role: {"processes": len(d), "uss_kb_median": statistics.median(d),
                   "uss_kb_max": max(d)} for role, d in sorted(roles.items())}


def steady(agents: int, runs: int, growth_runs: int, store_url: str | None = None
           ) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hy-mem-") as tmp, \
            hy.AgentSystem(Path(tmp) / "hy", store_url=store_url) as system:
        base_snap = sample(system)
        base = _total_pss(base_snap)
        refs = [system.start_agent(G.hy_config("seq3", f"seq3-{i}")) for i in range(agents)]
        _run_all(refs, 1)
        fresh, _ = _point(system, base, agents, 1)
        wall = _run_all(refs, runs)
        aged, aged_snap = _point(system, base, agents, 1 + runs)
        out: dict[str, Any] = {
            "agents": agents, "pss_mb_system_without_agents": base,
            "base_roles": by_role(base_snap), "fresh": fresh, "aged": aged,
            "invocations_per_s": agents * runs / wall}
        if growth_runs:
            _run_all(refs, growth_runs)
            grown, grown_snap = _point(system, base, agents, 1 + runs + growth_runs)
            out["grown"] = grown
            out["uss_growth_aged_to_grown"] = _growth(aged_snap, grown_snap)
        return out


def scale(agents: int, min_available_mb: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hy-mem-") as tmp, \
            hy.AgentSystem(Path(tmp) / "hy") as system:
        base = _total_pss(sample(system))
        starts: list[float] = []
        refs = []
        stopped_early = False
        t0 = time.perf_counter()
        for i in range(agents):
            if psutil.virtual_memory().available / MB < min_available_mb:
                stopped_early = True  # the machine is shared: never run it out of memory
                break
            t = time.perf_counter()
            refs.append(system.start_agent(G.hy_config("seq3", f"seq3-{i}")))
            starts.append(time.perf_counter() - t)
        started = time.perf_counter() - t0
        idle_snap = sample(system)
        t1 = time.perf_counter()
        ids = [(ref, ref.run("x")) for ref in refs]
        ok = sum(1 for ref, iid in ids if ref.wait(iid, TIMEOUT).ok)
        answered = time.perf_counter() - t1
        snap = sample(system)
        total = _total_pss(snap)
        return {
            "agents_asked": agents, "agents": len(refs), "stopped_early": stopped_early,
            "min_available_mb": min_available_mb, "results_ok": ok, "processes": len(snap),
            "start_s_total": started, "start_ms_per_agent": summary([s * 1000 for s in starts]),
            "one_run_each_s": answered, "pss_mb_system_without_agents": base,
            "pss_mb_total_idle": _total_pss(idle_snap), "pss_mb_total": total,
            "pss_mb_per_agent": (total - base) / max(1, len(refs)),
            "available_mb_after": psutil.virtual_memory().available / MB,
            "roles": by_role(snap)}


def _print_point(name: str, point: dict[str, Any]) -> None:
    print(f"{name} ({point['runs_each']} runs each): {point['processes']} processes, "
          f"PSS {fmt(point['pss_mb_total'], 1)} MB, {fmt(point['pss_mb_per_agent'], 1)} MB "
          "per agent")
    for role, r in point["roles"].items():
        print(f"  {role:16} x{r['processes']:<4} USS {fmt(r['uss_mb_median'])} "
              f"(max {fmt(r['uss_mb_max'])})  PSS {fmt(r['pss_mb_median'])}  "
              f"total PSS {fmt(r['pss_mb_total'], 1)}")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--growth-runs", type=int, default=100)
    parser.add_argument("--scale", type=int, default=0,
                        help="start this many idle agents, one run each (the 500-agent row)")
    parser.add_argument("--min-available-mb", type=float, default=4096,
                        help="--scale: start no more agents once the machine has less "
                             "memory available than this (reported as stopped_early)")
    parser.add_argument("--store-url", default=None,
                        help="steady state on this store (default: SQLite in a temp dir)")
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    data: dict[str, Any] = {"environment": environment(), "loadavg": psutil.getloadavg()}
    if args.scale:
        data["scale"] = s = scale(args.scale, args.min_available_mb)
        st = s["start_ms_per_agent"]
        if s["stopped_early"]:
            print(f"stopped at {s['agents']} of {s['agents_asked']} agents: less than "
                  f"{fmt(s['min_available_mb'], 0)} MB of memory left")
        print(f"{s['agents']} agents: {s['processes']} processes, results ok "
              f"{s['results_ok']}/{s['agents']}, start {fmt(st['median'], 1)} ms per agent "
              f"(p95 {fmt(st['p95'], 1)}; {fmt(s['start_s_total'], 1)} s in all), one run "
              f"each {fmt(s['one_run_each_s'], 1)} s, PSS {fmt(s['pss_mb_total'], 0)} MB "
              f"({fmt(s['pss_mb_per_agent'], 1)} MB per agent)")
        _print_point("after one run each", {"runs_each": 1, **s})
    else:
        data["steady"] = s = steady(args.agents, args.runs, args.growth_runs, args.store_url)
        print(f"system without agents: PSS {fmt(s['pss_mb_system_without_agents'], 1)} MB")
        for name in ("fresh", "aged", "grown"):
            if name in s:
                _print_point(name, s[name])
        for role, g in s.get("uss_growth_aged_to_grown", {}).items():
            print(f"  growth {role:16} USS median {fmt(g['uss_kb_median'], 0)} KB, "
                  f"max {fmt(g['uss_kb_max'], 0)} KB")
    data["loadavg_after"] = psutil.getloadavg()
    print(f"wrote {write_json(args.out or ('memory_scale' if args.scale else 'memory'), data)}")
    return data


if __name__ == "__main__":
    main()
