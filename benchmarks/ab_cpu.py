"""CPU per invocation by process role, A/B over checkouts of this repository.

    python benchmarks/ab_cpu.py --checkouts OLD,NEW[,...] [--rounds 8]
        [--invocations 300] [--graph seq3] [--calls run_wait,invoke]

Each round runs every checkout once (in a fresh process whose imports come
from that checkout; the order reversed every other round): one agent of
``--graph``, 20 warm-up invocations, then ``--invocations`` run + wait,
with the CPU time (user + system, psutil) of every process of the system and
of the caller over them. ``--calls`` names, per checkout, how the caller runs
an invocation: ``run_wait`` (``wait(run(x))``, the default) or ``invoke``
(``invoke(x)``, one message; checkouts from 2026-12-04 on). Prints, per
checkout, the medians and the median of each round's ratio to the first
checkout (a paired ratio: this machine's load drifts between rounds more than
most changes move it). Checkouts are
directories, e.g. ``git worktree add /tmp/before <commit>``; run this file by
its path, so a checkout older than it works too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

WARM = 20
TIMEOUT = 60.0


def _cpu(proc: Any) -> float:
    import psutil

    try:
        times = proc.cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def child(graph: str, invocations: int, how: str = "run_wait") -> dict[str, Any]:
    """One measurement, with this process's imports from the current directory."""
    sys.path.insert(0, os.getcwd())
    import psutil

    import hayata_py as hy
    from benchmarks import graphs as G
    from benchmarks._util import roles as find_roles

    with tempfile.TemporaryDirectory(prefix="hy-ab-") as tmp, \
            hy.AgentSystem(Path(tmp) / "hy") as system:
        agent = system.start_agent(G.hy_config(graph))

        def call(value: str) -> Any:
            if how == "invoke":
                return agent.invoke(value, timeout=TIMEOUT)
            return agent.wait(agent.run(value), TIMEOUT)

        for _ in range(WARM):
            assert call("warm").ok
        roles = {pid: role for role, pids in find_roles(system.tree()).items() for pid in pids}
        roles[system.admin_pid] = "admin"
        procs = [psutil.Process(pid) for pid in roles]
        me = psutil.Process()
        before = {p.pid: _cpu(p) for p in procs}
        mine = _cpu(me)
        latencies = []
        for _ in range(invocations):
            t0 = time.perf_counter()
            assert call("x").ok
            latencies.append(time.perf_counter() - t0)
        per_role: dict[str, float] = {}
        for p in procs:
            role = roles[p.pid]
            spent = (_cpu(p) - before[p.pid]) * 1000 / invocations
            per_role[role] = per_role.get(role, 0.0) + spent
        per_role["caller"] = (_cpu(me) - mine) * 1000 / invocations
    return {"latency_ms": statistics.median(latencies) * 1000,
            "cpu_ms": sum(per_role.values()), "roles": per_role}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkouts", default="")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--invocations", type=int, default=300)
    parser.add_argument("--graph", default="seq3")
    parser.add_argument("--calls", default="", help="per checkout: run_wait or invoke")
    parser.add_argument("--call", default="run_wait", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.graph, args.invocations, args.call)))
        return
    trees = [str(Path(t).resolve()) for t in args.checkouts.split(",") if t]
    if len(trees) < 2:
        parser.error("--checkouts needs at least two directories")
    calls = args.calls.split(",") if args.calls else ["run_wait"] * len(trees)
    if len(calls) != len(trees) or not set(calls) <= {"run_wait", "invoke"}:
        parser.error("--calls needs run_wait or invoke for each checkout")
    # A side is a checkout and a call: one checkout may be measured with both.
    sides = list(zip(trees, calls, strict=True))
    runs: list[list[dict[str, Any]]] = [[] for _ in sides]
    order = list(range(len(sides)))
    for index in range(args.rounds):
        for side in order if index % 2 == 0 else order[::-1]:
            tree, how = sides[side]
            out = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--child", "--graph", args.graph,
                 "--invocations", str(args.invocations), "--call", how],
                cwd=tree, capture_output=True, text=True, timeout=900, check=True).stdout
            runs[side].append(json.loads(out.strip().splitlines()[-1]))
    base = runs[0]
    for (tree, how), rows in zip(sides, runs, strict=True):
        roles = sorted({r for row in rows for r in row["roles"]})
        by_role = {r: statistics.median(row["roles"].get(r, 0.0) for row in rows) for r in roles}
        pairs = list(zip(base, rows, strict=True))
        cpu_ratio = statistics.median(b["cpu_ms"] / a["cpu_ms"] for a, b in pairs)
        lat_ratio = statistics.median(b["latency_ms"] / a["latency_ms"] for a, b in pairs)
        latency = statistics.median(r["latency_ms"] for r in rows)
        cpu = statistics.median(r["cpu_ms"] for r in rows)
        print(f"{tree} ({how}): {args.graph} latency {latency:.2f} ms, CPU {cpu:.2f} ms ("
              + ", ".join(f"{r} {v:.2f}" for r, v in by_role.items() if v >= 0.01)
              + f"); paired ratio CPU {cpu_ratio:.3f}, latency {lat_ratio:.3f}")
        print("   CPU per round: " + " ".join(f"{r['cpu_ms']:.1f}" for r in rows))


if __name__ == "__main__":
    main()
