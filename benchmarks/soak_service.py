"""Soak of one service agent (``make soak``): 500 conversations, 100 of them in
flight at a time, for ``--minutes``.

    python -m benchmarks.soak_service [--minutes 10] [--conversations 500] [--in-flight 100]

One agent (``max_invocations`` = ``--in-flight``) runs a 3-step graph per
invocation: ``plan`` (sync), ``llm`` (``async def``, awaits ``--llm-ms``; 50
tasks per edge) and ``count`` (the thread's counter). ``--in-flight`` asyncio
workers each take the next conversation (a thread id, round robin over
``--conversations``), run an invocation on it, await its end, and go on: every
conversation gets one invocation after another, never two at once.

Every ``--sample`` s (10) it samples every process of the system: RSS, PSS,
open file descriptors, and the process count. Flat means: from the first
sample after warm-up (``--warmup`` s, default a tenth of the run, at least 30)
to the last, the total PSS, the total RSS and the total fds grew by less than
``--tolerance`` (5 %), no single process's PSS grew by more than
``--tolerance`` + 2 MB, and the process count stayed within the bound the
configuration sets (edges per node). At the end every conversation's thread
must count exactly the invocations that completed on it.

Writes ``benchmarks/results/soak_service.json``: the samples (per process and
totals), throughput, latency percentiles, failures (must be 0) and the
verdicts; the exit status is 1 if any verdict fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

import hayata_py as hy
from benchmarks._util import RESULTS_DIR

OUT = RESULTS_DIR / "soak_service.json"
PER_EDGE = 50
NODE_CONCURRENCY = 4


def config(in_flight: int) -> hy.AgentConfig:
    return hy.AgentConfig(
        id="soak", nodes={"plan": "tests.chaos.nodes:work", "llm": "tests.chaos.nodes:awork",
                          "count": "tests.chaos.nodes:count"},
        decision_policy="tests.chaos.nodes:policy", max_invocations=in_flight,
        edge_concurrency={"llm": PER_EDGE},
        node_concurrency={n: NODE_CONCURRENCY for n in ("plan", "llm", "count")},
        execution_timeout=60.0)


def sample(system: hy.AgentSystem) -> dict[str, Any]:
    """RSS/PSS (MB) and open fds of every process of the system."""
    procs = []
    for p in system.processes():
        try:
            mem = p.memory_full_info()
            procs.append({"pid": p.pid, "kind": " ".join(p.cmdline()).split(" ")[0],
                          "rss_mb": round(mem.rss / 2 ** 20, 2),
                          "pss_mb": round(mem.pss / 2 ** 20, 2), "fds": p.num_fds()})
        except (psutil.Error, IndexError):
            continue  # gone meanwhile (an idle edge retired)
    return {"processes": len(procs),
            "rss_mb": round(sum(p["rss_mb"] for p in procs), 1),
            "pss_mb": round(sum(p["pss_mb"] for p in procs), 1),
            "fds": sum(p["fds"] for p in procs), "per_process": procs}


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)


def growth(first: float, last: float) -> float:
    return (last - first) / first if first else 0.0


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="hayata-soak-service-"))
    latencies: list[tuple[float, float]] = []  # (started at, seconds)
    failures: list[str] = []
    samples: list[dict[str, Any]] = []
    completed: dict[str, int] = {}
    async with hy.AsyncAgentSystem(work / "data") as asys:
        await asys.start_agent(config(args.in_flight))
        agent = await asys.agent("soak")
        began = time.monotonic()
        until = began + args.minutes * 60
        turn = 0

        def next_thread() -> str:
            nonlocal turn
            turn += 1
            return f"c{turn % args.conversations}"

        busy: set[str] = set()

        async def worker() -> None:
            while time.monotonic() < until:
                thread = next_thread()
                while thread in busy:  # one invocation at a time per conversation
                    thread = next_thread()
                busy.add(thread)
                t0 = time.monotonic()
                try:
                    inv = await agent.run({"plan": ["plan", "llm", "count"],
                                           "wait": args.llm_ms / 1000}, thread=thread)
                    result = await agent.wait(inv, 120)
                    if result.ok:
                        completed[thread] = completed.get(thread, 0) + 1
                    else:
                        failures.append(f"{thread} {inv}: {result.error}")
                except hy.HayataError as exc:
                    failures.append(f"{thread}: {exc.code}: {exc}")
                finally:
                    busy.discard(thread)
                latencies.append((t0 - began, time.monotonic() - t0))

        async def sampler() -> None:
            loop = asyncio.get_running_loop()
            while time.monotonic() < until:
                row = await loop.run_in_executor(None, sample, asys.sync)
                row["t"] = round(time.monotonic() - began, 1)
                row["invocations"] = len(latencies)
                samples.append(row)
                print(f"t={row['t']}s invocations={row['invocations']} processes="
                      f"{row['processes']} pss={row['pss_mb']}MB rss={row['rss_mb']}MB "
                      f"fds={row['fds']} failures={len(failures)}", flush=True)
                await asyncio.sleep(args.sample)  # the sampling period

        await asyncio.gather(sampler(), *(worker() for _ in range(args.in_flight)))
        final = sample(asys.sync)
        final["t"] = round(time.monotonic() - began, 1)
        final["invocations"] = len(latencies)
        samples.append(final)
        wrong_threads = []
        for n in range(args.conversations):
            thread = f"c{n}"
            want = completed.get(thread, 0)
            if not want:
                continue
            info = await agent.thread(thread)
            if info.version != want or info.state.get("count") != want or info.queued:
                wrong_threads.append(f"{thread}: version {info.version}, count "
                                     f"{info.state.get('count')}, completed {want}")
    seconds = time.monotonic() - began
    return verdicts(args, samples, latencies, failures, wrong_threads, seconds)


def verdicts(args: argparse.Namespace, samples: list[dict[str, Any]],
             latencies: list[tuple[float, float]], failures: list[str],
             wrong_threads: list[str], seconds: float) -> dict[str, Any]:
    warmup = args.warmup if args.warmup is not None else max(30.0, args.minutes * 6)
    warm = [s for s in samples if s["t"] >= warmup] or samples[-1:]
    first, last = warm[0], warm[-1]
    tol = args.tolerance
    # Per process: the same pid in the first and the last warm sample.
    before = {p["pid"]: p for p in first["per_process"]}
    grown = [{"pid": p["pid"], "kind": p["kind"], "pss_mb": [before[p["pid"]]["pss_mb"],
                                                            p["pss_mb"]]}
             for p in last["per_process"] if p["pid"] in before
             and p["pss_mb"] > before[p["pid"]]["pss_mb"] * (1 + tol) + 2.0]
    bound = 12 + 3 * NODE_CONCURRENCY  # the agent's fixed processes and every node's edges
    checks = {
        "no_failures": not failures,
        "threads_consistent": not wrong_threads,
        "pss_flat": growth(first["pss_mb"], last["pss_mb"]) < tol,
        "rss_flat": growth(first["rss_mb"], last["rss_mb"]) < tol,
        "fds_flat": growth(first["fds"], last["fds"]) < tol,
        "no_process_grew": not grown,
        "processes_bounded": max(s["processes"] for s in samples) <= bound,
    }
    first_minute = [d for t, d in latencies if t < min(60, seconds / 4)]
    last_minute = [d for t, d in latencies if t >= seconds - min(60, seconds / 4)]
    return {
        "minutes": args.minutes, "conversations": args.conversations,
        "in_flight": args.in_flight, "llm_ms": args.llm_ms, "sample_s": args.sample,
        "warmup_s": warmup, "tolerance": tol, "seconds": round(seconds, 1),
        "invocations": len(latencies), "throughput_per_s": round(len(latencies) / seconds, 1),
        "failures": len(failures), "failure_examples": failures[:10],
        "wrong_threads": wrong_threads[:10],
        "p50_ms_start": pct(first_minute, 0.5), "p99_ms_start": pct(first_minute, 0.99),
        "p50_ms_end": pct(last_minute, 0.5), "p99_ms_end": pct(last_minute, 0.99),
        "median_ms": round(statistics.median(d for _, d in latencies) * 1000, 1)
        if latencies else None,
        "after_warmup": {key: [first[key], last[key], round(growth(first[key], last[key]), 4)]
                         for key in ("pss_mb", "rss_mb", "fds", "processes")},
        "processes_max": max(s["processes"] for s in samples), "processes_bound": bound,
        "processes_grown": grown, "checks": checks, "ok": all(checks.values()),
        "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--conversations", type=int, default=500)
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--llm-ms", type=float, default=50.0)
    parser.add_argument("--sample", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=None)
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    doc = asyncio.run(soak(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "samples"}, indent=1))
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
