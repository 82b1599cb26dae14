"""LangGraph graphs run by hayata_py (``hylg.compile``) against LangGraph's own
runtime with ``SqliteSaver`` (``durability="sync"``), side by side in one run.

    python -m benchmarks.bench_langgraph_runner [--quick]

Rows: ``seq3`` (3 trivial sequential nodes) and ``fanout8`` (8 parallel + a
join) latency, a ReAct loop with a fake chat model (model, tool, model, tool,
model), a long one (20 tool calls with 1 KB messages: 41 supersteps, a
quarter of the samples), each a new thread per sample, the sides interleaved sample by sample
after discarded warm-ups; and C threads at once through a graph whose model
node is an ``async def`` waiting 200 ms (LangGraph: ``ainvoke`` with
``AsyncSqliteSaver``, ``asyncio.gather``; hayata: ``max_invocations=C``,
``edge_concurrency={"llm": C}``, C caller threads, or with ``--callers async``
``ainvoke`` on an ``AsyncAgentSystem`` with ``asyncio.gather``), wall time and the memory
(PSS) of all the processes of each side (hayata's system with ``gc_freeze``
unless ``BENCH_GC_FREEZE=0``), each side in a fresh process of
its own. The latency rows also give the CPU time of an invocation (all the
processes of each side). Results:
``benchmarks/results/langgraph_runner.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

import hayata_py as hy
from benchmarks import lg_graphs
from benchmarks._util import environment, fmt, ms, pss_mb, summary, write_json
from hayata_py import langgraph as hylg

GC_FREEZE = os.environ.get("BENCH_GC_FREEZE", "1") != "0"
"""The many-threads row's system freezes its caller's heap (``gc_freeze``),
as a process that starts its system once can; ``BENCH_GC_FREEZE=0``: not."""


def _config() -> dict[str, Any]:
    # the long ReAct loop runs 41 supersteps: past LangGraph's default limit of 25
    return {"configurable": {"thread_id": uuid.uuid4().hex}, "recursion_limit": 100}


def latency(name: str, builder: Any, input: Any, system: hy.AgentSystem, folder: Path,
            samples: int, warmup: int) -> dict[str, Any]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(folder / f"{name}.db", check_same_thread=False)
    reference = builder.compile(checkpointer=SqliteSaver(conn))
    app = hylg.compile(builder, system, id=f"bench-{name}")
    times: dict[str, list[float]] = {"hayata": [], "langgraph": []}
    caller_cpu: dict[str, float] = {"hayata": 0.0, "langgraph": 0.0}
    system_cpu = 0.0

    def hayata() -> None:
        app.invoke(input, _config())

    def langgraph() -> None:
        reference.invoke(input, _config(), durability="sync")

    for index in range(warmup + samples):
        if index == warmup:
            system_cpu = -_cpu_seconds(system.processes())
        order = [("hayata", hayata), ("langgraph", langgraph)]
        for side, call in order if index % 2 == 0 else reversed(order):
            start, cpu = time.perf_counter(), time.process_time()
            call()
            if index >= warmup:
                times[side].append(time.perf_counter() - start)
                caller_cpu[side] += time.process_time() - cpu
    system_cpu += _cpu_seconds(system.processes())
    system.stop_agent(f"bench-{name}")
    conn.close()
    ours, theirs = summary(ms(times["hayata"])), summary(ms(times["langgraph"]))
    # CPU per invocation: the caller's process while it ran the call (LangGraph
    # runs all in it), plus for hayata its system's processes over the samples
    # (they are nearly idle while the LangGraph side runs)
    ours_cpu = (caller_cpu["hayata"] + system_cpu) * 1000 / samples
    theirs_cpu = caller_cpu["langgraph"] * 1000 / samples
    return {"row": name, "hayata_ms": ours, "langgraph_ms": theirs,
            "ratio": ours["median"] / theirs["median"], "hayata_cpu_ms": ours_cpu,
            "langgraph_cpu_ms": theirs_cpu, "cpu_ratio": ours_cpu / theirs_cpu}


def _cpu_seconds(processes: list[Any]) -> float:
    """User + system CPU seconds of ``processes`` so far (those gone count 0)."""
    total = 0.0
    for proc in processes:
        try:
            cpu = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += cpu.user + cpu.system
    return total


def _tree_pss(pid: int) -> float:
    root = psutil.Process(pid)
    return pss_mb([root, *root.children(recursive=True)])


def _hayata_threads(count: int, system: hy.AgentSystem) -> tuple[float, float, list[Any]]:
    """``count`` caller threads, each ``invoke``."""
    app = hylg.compile(lg_graphs.llm, system, id="bench-llm", max_invocations=count,
                       edge_concurrency={"llm": count})
    app.invoke({"steps": []}, _config())
    peak = [0.0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            total = pss_mb(system.processes()) + _tree_pss(os.getpid())
            peak[0] = max(peak[0], total)
            stop.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=count) as pool:
        results = list(pool.map(lambda _: app.invoke({"steps": []}, _config()), range(count)))
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    assert all(r == {"steps": ["llm"]} for r in results)
    system.stop_agent("bench-llm")
    return wall, peak[0], results


async def _hayata_async(count: int, folder: Path) -> tuple[float, float, list[Any]]:
    """``ainvoke`` ``count`` times at once (``asyncio.gather``) on an
    ``AsyncAgentSystem``, as the LangGraph side does."""
    async with hy.AsyncAgentSystem(folder / "async-data", gc_freeze=GC_FREEZE) as system:
        app = await hylg.acompile(lg_graphs.llm, system, id="bench-llm",
                                  max_invocations=count, edge_concurrency={"llm": count})
        await app.ainvoke({"steps": []}, _config())
        peak = [0.0]
        done = asyncio.Event()

        def measure() -> float:
            return pss_mb(system.sync.processes()) + _tree_pss(os.getpid())

        async def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], await asyncio.to_thread(measure))
                await asyncio.sleep(0.5)

        sampler = asyncio.create_task(sample())
        start = time.perf_counter()
        results = await asyncio.gather(*(app.ainvoke({"steps": []}, _config())
                                         for _ in range(count)))
        wall = time.perf_counter() - start
        done.set()
        await sampler
        await system.stop_agent("bench-llm")
    return wall, peak[0], list(results)


def _langgraph_many(count: int, folder: Path) -> tuple[float, float]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def run() -> tuple[float, float]:
        async with AsyncSqliteSaver.from_conn_string(str(folder / "llm.db")) as saver:
            graph: Any = lg_graphs.llm.compile(checkpointer=saver)
            await graph.ainvoke({"steps": []}, _config(), durability="sync")
            peak = [0.0]
            done = asyncio.Event()

            async def sample() -> None:
                while not done.is_set():
                    peak[0] = max(peak[0], _tree_pss(os.getpid()))
                    await asyncio.sleep(0.5)

            sampler = asyncio.create_task(sample())
            start = time.perf_counter()
            await asyncio.gather(*(graph.ainvoke({"steps": []}, _config(), durability="sync")
                                   for _ in range(count)))
            wall = time.perf_counter() - start
            done.set()
            await sampler
            return wall, peak[0]

    return asyncio.run(run())


def _hayata_many(count: int, folder: Path, callers: str) -> tuple[float, float]:
    if callers == "async":
        wall, peak, results = asyncio.run(_hayata_async(count, folder))
    else:
        with hy.AgentSystem(folder / "threads-data", gc_freeze=GC_FREEZE) as system:
            wall, peak, results = _hayata_threads(count, system)
    assert all(r == {"steps": ["llm"]} for r in results)
    return wall, peak


def _one_side(side: str, count: int, folder: Path, callers: str) -> tuple[float, float]:
    """One side of the many-threads row in a process of its own (this module
    run with ``--many-side``), so neither side's PSS holds what the other side
    or the latency rows left in the caller's heap."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_langgraph_runner", "--many-side", side,
         "--threads", str(count), "--callers", callers, "--folder", str(folder)],
        check=True, capture_output=True, text=True, timeout=3600)
    wall, peak = json.loads(out.stdout.strip().splitlines()[-1])
    return float(wall), float(peak)


def many_threads(count: int, folder: Path, callers: str) -> dict[str, Any]:
    lg_wall, lg_pss = _one_side("langgraph", count, folder, callers)
    wall, peak = _one_side("hayata", count, folder, callers)
    return {"row": f"{count} threads, async 200 ms model node", "callers": callers,
            "hayata_s": wall,
            "langgraph_s": lg_wall, "ratio": wall / lg_wall, "hayata_pss_mb": peak,
            "langgraph_pss_mb": lg_pss, "memory_ratio": peak / lg_pss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few samples, 100 threads")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--callers", choices=("threads", "async"), default="threads",
                        help="the many-threads row's hayata callers: a thread each "
                        "calling invoke, or ainvoke on an AsyncAgentSystem")
    parser.add_argument("--many-side", choices=("langgraph", "hayata"),
                        help=argparse.SUPPRESS)  # one side of that row, in its own process
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.many_side:
        folder = Path(args.folder)
        count = args.threads
        result = (_langgraph_many(count, folder) if args.many_side == "langgraph"
                  else _hayata_many(count, folder, args.callers))
        print(json.dumps(result))
        return
    samples = args.samples or (10 if args.quick else 40)
    threads = args.threads or (100 if args.quick else 1000)
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with hy.AgentSystem(folder / "data") as system:
            for name, builder, input in (
                    ("seq3", lg_graphs.seq3, {"steps": []}),
                    ("fanout8", lg_graphs.fanout8, {"steps": []}),
                    ("react", lg_graphs.react, {"messages": [("user", "go")]}),
                    ("react_long", lg_graphs.react_long, {"messages": [("user", "go")]})):
                # the long loop (41 supersteps) is slow: fewer samples
                row = latency(name, builder, input, system, folder,
                              samples if name != "react_long" else max(3, samples // 4),
                              warmup=3 if name != "react_long" else 1)
                rows.append(row)
                print(f"{name:10} hayata {fmt(row['hayata_ms']['median'])} ms  langgraph "
                      f"{fmt(row['langgraph_ms']['median'])} ms  ratio {fmt(row['ratio'])}x; "
                      f"CPU {fmt(row['hayata_cpu_ms'])} vs {fmt(row['langgraph_cpu_ms'])} "
                      f"ms/invocation ({fmt(row['cpu_ratio'])}x)", flush=True)
            row = many_threads(threads, folder, args.callers)
            rows.append(row)
            print(f"{row['row']}: hayata {fmt(row['hayata_s'])} s  langgraph "
                  f"{fmt(row['langgraph_s'])} s  ratio {fmt(row['ratio'])}x; PSS "
                  f"{fmt(row['hayata_pss_mb'], 0)} vs {fmt(row['langgraph_pss_mb'], 0)} MB",
                  flush=True)
    path = write_json("langgraph_runner", {
        "environment": environment(), "load_before": load_before,
        "load_after": os.getloadavg(), "samples": samples, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
