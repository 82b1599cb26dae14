"""The cost of the runtime core: processes and memory of idle agents, CPU per invocation.

    python -m benchmarks.bench_core [--agents 10] [--runs 100] [--cpu-invocations 200]

1. Idle 3-node agents (``seq3``): start ``--agents`` agents in one system,
   let each run ``--runs`` invocations (steady state, not fresh processes),
   then report the process count and the PSS (psutil
   ``memory_full_info().pss``) summed over the system's processes, minus the
   same sum for the system with no agent, per agent.
2. CPU per seq3 invocation: CPU time (user + system, psutil) of every
   process of the system over ``--cpu-invocations`` run + wait invocations
   on one agent, split by role (agent, node, edge, reducer, ...) from
   ``tree()``, plus the caller.

Results: ``benchmarks/results/core.json``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

import hayata_py as hy
from benchmarks import graphs as G
from benchmarks._util import environment, fmt, pss_mb, write_json
from benchmarks._util import roles as find_roles

TIMEOUT = 60.0


def _cpu(proc: psutil.Process) -> float:
    try:
        times = proc.cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0.0
    return float(times.user + times.system)


def idle_agents(agents: int, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hy-core-") as tmp, \
            hy.AgentSystem(Path(tmp) / "hy") as system:
        base_procs = system.processes()
        base = pss_mb(base_procs)
        refs = [system.start_agent(G.hy_config("seq3", f"seq3-{i}")) for i in range(agents)]
        for _ in range(runs):
            ids = [(ref, ref.run("x")) for ref in refs]
            for ref, invocation_id in ids:
                assert ref.wait(invocation_id, TIMEOUT).ok
        procs = system.processes()
        total = pss_mb(procs)
        return {"agents": agents, "runs_each": runs, "processes": len(procs),
                "processes_per_agent": (len(procs) - len(base_procs)) / agents,
                "pss_mb_total": total, "pss_mb_system_without_agents": base,
                "pss_mb_per_agent": (total - base) / agents}


def cpu_per_invocation(invocations: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hy-core-") as tmp, \
            hy.AgentSystem(Path(tmp) / "hy") as system:
        agent = system.start_agent(G.hy_config("seq3"))
        for _ in range(20):
            assert agent.wait(agent.run("warm"), TIMEOUT).ok
        procs = system.processes()
        roles = {pid: role for role, pids in find_roles(system.tree()).items()
                 for pid in pids}
        roles[system.admin_pid] = "admin"
        me = psutil.Process()
        before = {p.pid: _cpu(p) for p in procs}
        caller0 = _cpu(me)
        latencies = []
        t0 = time.perf_counter()
        for _ in range(invocations):
            t = time.perf_counter()
            assert agent.wait(agent.run("x"), TIMEOUT).ok
            latencies.append(time.perf_counter() - t)
        wall = time.perf_counter() - t0
        per_role: dict[str, float] = {}
        for p in procs:
            role = roles.get(p.pid, "other")
            spent = _cpu(p) - before[p.pid]
            per_role[role] = per_role.get(role, 0.0) + spent * 1000 / invocations
        per_role["caller"] = (_cpu(me) - caller0) * 1000 / invocations
        latencies.sort()
        return {"invocations": invocations, "wall_ms_per_invocation": wall * 1000 / invocations,
                "latency_ms_median": latencies[len(latencies) // 2] * 1000,
                "cpu_ms_per_invocation": dict(sorted(per_role.items())),
                "cpu_ms_per_invocation_total": sum(per_role.values()),
                "loadavg": psutil.getloadavg()[0]}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--cpu-invocations", type=int, default=200)
    parser.add_argument("--out", default="core")
    args = parser.parse_args(argv)
    data = {"environment": environment(), "idle": idle_agents(args.agents, args.runs),
            "cpu": cpu_per_invocation(args.cpu_invocations)}
    idle, cpu = data["idle"], data["cpu"]
    print(f"{idle['agents']} idle seq3 agents after {idle['runs_each']} runs each: "
          f"{idle['processes']} processes ({fmt(idle['processes_per_agent'])} per agent), "
          f"PSS {fmt(idle['pss_mb_per_agent'])} MB per agent")
    print(f"seq3: latency median {fmt(cpu['latency_ms_median'])} ms, CPU "
          f"{fmt(cpu['cpu_ms_per_invocation_total'])} ms per invocation: "
          + ", ".join(f"{k} {fmt(v)}" for k, v in cpu["cpu_ms_per_invocation"].items()))
    print(f"wrote {write_json(args.out, data)}")
    return data


if __name__ == "__main__":
    main()
