"""Many blocking callers at once: C threads each calling ``agent.invoke``,
beside C ``invoke`` calls of the asyncio API through ``asyncio.gather``.

    python -m benchmarks.bench_callers [--callers 1000,3000] [--delay 0.2] [--runs 3]

The graph is ``service3`` (:mod:`benchmarks.graphs`): ``plan`` -> ``llm``
(``async def``, waits ``delay`` s) -> ``answer``; one agent with
``max_invocations=C`` and ``edge_concurrency={"llm": C}``. Each burst runs
in a fresh process of its own (one ``AgentSystem`` in a temp dir, one
warm-up invocation), the two kinds of callers alternating, ``--runs``
times each. Rows: wall time from the first call to the last result, and
the peak PSS of the system's processes and the caller's. Results:
``benchmarks/results/callers.json``.

A blocking ``invoke`` waits on the calling thread's own endpoint while
fewer than 16 other waits of the process do (``OWN_ENDPOINT_WAITS``), and
through the system's receiver beyond that, as the asyncio API always does;
these two rows show what a thread per caller costs beside an event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

from benchmarks._util import environment, fmt, pss_mb, summary, table, write_json

KINDS = ("threads", "asyncio")


def _input(i: int, delay: float) -> dict[str, Any]:
    return {"i": i, "delay": delay}


class _Peak:
    """The peak PSS of ``processes()``, sampled every 0.25 s on a thread."""

    def __init__(self, processes: Any) -> None:
        self.processes, self.mb = processes, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.mb = max(self.mb, pss_mb(self.processes()))
            self._stop.wait(0.25)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.mb


def _threads(callers: int, delay: float, folder: Path) -> dict[str, Any]:
    import hayata_py as hy
    from benchmarks import graphs as G

    with hy.AgentSystem(folder / "data") as system:
        agent = system.start_agent(G.hy_service_config(
            max_invocations=callers, edge_concurrency={"llm": callers}))
        agent.invoke(_input(-1, delay), timeout=60)
        me = psutil.Process()
        peak = _Peak(lambda: [*system.processes(), me])
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=callers) as pool:
            results = list(pool.map(
                lambda i: agent.invoke(_input(i, delay), timeout=600), range(callers)))
        wall = time.perf_counter() - start
        return {"wall_s": wall, "peak_pss_mb": peak.stop(),
                "ok": sum(1 for r in results if r.ok)}


def _asyncio(callers: int, delay: float, folder: Path) -> dict[str, Any]:
    import hayata_py as hy
    from benchmarks import graphs as G

    async def main() -> dict[str, Any]:
        async with hy.AsyncAgentSystem(folder / "data") as system:
            agent = await system.start_agent(G.hy_service_config(
                max_invocations=callers, edge_concurrency={"llm": callers}))
            await agent.invoke(_input(-1, delay), timeout=60)
            me = psutil.Process()
            peak = _Peak(lambda: [*system.sync.processes(), me])
            start = time.perf_counter()
            results = await asyncio.gather(*(agent.invoke(_input(i, delay), timeout=600)
                                             for i in range(callers)))
            wall = time.perf_counter() - start
            return {"wall_s": wall, "peak_pss_mb": peak.stop(),
                    "ok": sum(1 for r in results if r.ok)}

    return asyncio.run(main())


def _burst(kind: str, callers: int, delay: float) -> dict[str, Any]:
    """One burst in a fresh process (this module with ``--one``)."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_callers", "--one", kind,
         "--callers", str(callers), "--delay", str(delay)],
        check=True, capture_output=True, text=True, timeout=3600)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--callers", default="1000,3000", help="comma-separated C")
    parser.add_argument("--delay", type=float, default=0.2, help="the llm node's wait, s")
    parser.add_argument("--runs", type=int, default=3, help="bursts of each kind per C")
    parser.add_argument("--one", choices=KINDS, help=argparse.SUPPRESS)  # one burst, here
    args = parser.parse_args()
    counts = [int(c) for c in args.callers.split(",") if c]
    if args.one:
        with tempfile.TemporaryDirectory(prefix="hy-callers-") as tmp:
            run = _threads if args.one == "threads" else _asyncio
            print(json.dumps(run(counts[0], args.delay, Path(tmp))))
        return
    rows: list[dict[str, Any]] = []
    for callers in counts:
        raw: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
        for n in range(args.runs):
            for kind in (KINDS if n % 2 == 0 else KINDS[::-1]):
                raw[kind].append(_burst(kind, callers, args.delay))
                print(f"C={callers} {kind}: {raw[kind][-1]}", flush=True)
        for kind in KINDS:
            bursts = raw[kind]
            rows.append({"callers": callers, "kind": kind,
                         "wall_s": summary([b["wall_s"] for b in bursts]),
                         "peak_pss_mb": summary([b["peak_pss_mb"] for b in bursts]),
                         "all_ok": all(b["ok"] == callers for b in bursts), "bursts": bursts})
    print(table(["callers", "kind", "wall s (min-max)", "peak PSS MB (min-max)", "all ok"],
                [[str(r["callers"]), r["kind"],
                  f"{fmt(r['wall_s']['min'])}-{fmt(r['wall_s']['max'])}",
                  f"{fmt(r['peak_pss_mb']['min'], 0)}-{fmt(r['peak_pss_mb']['max'], 0)}",
                  str(r["all_ok"])] for r in rows]))
    path = write_json("callers", {"environment": environment(), "delay_s": args.delay,
                                  "loadavg": os.getloadavg()[0], "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
