"""Load and soak: many agents run invocations at once for minutes, from several
threads and from the asyncio API, while the CLI drives the same system.

    python -m benchmarks.soak [--agents 200] [--minutes 10] [--threads 4]

Reports (``benchmarks/results/chaos/soak.json``): invocations, failures (must
be 0), throughput, p50/p99 latency in the first and the last minute, and the
system's total PSS and open file descriptors sampled every ``--sample`` s
(flat after warm-up means no leak).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

import hayata_py as hy
from benchmarks._util import RESULTS_DIR
from hayata_py import _datadir

OUT = RESULTS_DIR / "chaos" / "soak.json"


def config(agent_id: str) -> hy.AgentConfig:
    return hy.AgentConfig(id=agent_id, nodes={"a": "tests.chaos.soak_nodes:echo"},
                          decision_policy="tests.chaos.soak_nodes:policy")


def sample(system: hy.AgentSystem) -> tuple[float, int, int]:
    pss = fds = 0
    procs = system.processes()
    for p in procs:
        try:
            pss += p.memory_full_info().pss
            fds += p.num_fds()
        except psutil.Error:
            continue
    return pss / 2 ** 20, fds, len(procs)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def record_for_cli(system: hy.AgentSystem, data: Path) -> None:
    """Write the record ``hayata system start`` writes, so the CLI attaches."""
    admin = psutil.Process(system.admin_pid)
    now = time.time()
    _datadir.save(data, _datadir.SystemRecord(
        str(data), system.admin_port, system.admin_pid, admin.create_time(),
        system.session_id, system.store_url, str(data / "hayata.log.jsonl"),
        str(data / "out.log"), os.getcwd(), now, instance=system.instance, name=system.name))


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="hayata-soak-")) / "data"
    latencies: list[tuple[float, float]] = []  # (start, seconds)
    failures: list[str] = []
    lock = threading.Lock()
    samples: list[dict[str, float]] = []
    async with hy.AsyncAgentSystem(data) as asys:
        system = asys.sync
        ids = [f"soak-{i}" for i in range(args.agents)]
        for agent_id in ids:
            await asys.start_agent(config(agent_id))
        record_for_cli(system, data)
        began = time.monotonic()
        until = began + args.minutes * 60
        stop = threading.Event()

        def note(t0: float, ok: bool, what: str) -> None:
            with lock:
                latencies.append((t0 - began, time.monotonic() - t0))
                if not ok:
                    failures.append(what)

        def thread_worker(mine: list[str]) -> None:
            refs = [system.agent(a) for a in mine]
            while not stop.is_set() and time.monotonic() < until:
                for ref in refs:
                    t0 = time.monotonic()
                    try:
                        result = ref.wait(ref.run({"n": 1}), 60)
                        note(t0, result.ok, f"{ref.id}: {result.error}")
                    except hy.HayataError as exc:
                        note(t0, False, f"{ref.id}: {exc.code}: {exc}")

        async def async_worker(agent_id: str) -> None:
            ref = await asys.agent(agent_id)
            while time.monotonic() < until:
                t0 = time.monotonic()
                try:
                    result = await ref.wait(await ref.run({"n": 1}), 60)
                    note(t0, result.ok, f"{agent_id}: {result.error}")
                except hy.HayataError as exc:
                    note(t0, False, f"{agent_id}: {exc.code}: {exc}")

        def cli_worker(agent_id: str) -> None:
            env = {**os.environ, "HAYATA_DATA_DIR": str(data)}
            while not stop.is_set() and time.monotonic() < until:
                t0 = time.monotonic()
                run = subprocess.run([sys.executable, "-m", "hayata_py", "run", agent_id,
                                      "--input", '{"n": 1}'], env=env, capture_output=True,
                                     text=True, timeout=120, check=False)
                note(t0, run.returncode == 0, f"cli {agent_id}: {run.stdout} {run.stderr}")
                subprocess.run([sys.executable, "-m", "hayata_py", "ps"], env=env,
                               capture_output=True, timeout=120, check=False)

        half = args.agents // 2
        by_thread = [ids[1:half][i::args.threads] for i in range(args.threads)]
        threads = [threading.Thread(target=thread_worker, args=(m,)) for m in by_thread if m]
        threads.append(threading.Thread(target=cli_worker, args=(ids[0],)))
        for t in threads:
            t.start()

        async def sampler() -> None:
            while time.monotonic() < until:
                pss, fds, procs = await asyncio.get_running_loop().run_in_executor(
                    None, sample, system)
                samples.append({"t": time.monotonic() - began, "pss_mb": pss, "fds": fds,
                                "processes": procs})
                await asyncio.sleep(args.sample)  # the sampling period

        await asyncio.gather(sampler(), *(async_worker(a) for a in ids[half:]))
        stop.set()
        for t in threads:
            t.join(180)
    seconds = args.minutes * 60
    first = [d for s, d in latencies if s < min(60, seconds / 4)]
    last = [d for s, d in latencies if s >= seconds - min(60, seconds / 4)]
    warm = [s for s in samples if s["t"] >= min(60, seconds / 4)]
    doc = {"agents": args.agents, "minutes": args.minutes, "threads": args.threads,
           "invocations": len(latencies), "failures": len(failures),
           "failure_examples": failures[:10],
           "throughput_per_s": len(latencies) / seconds,
           "p50_ms_start": pct(first, 0.5), "p99_ms_start": pct(first, 0.99),
           "p50_ms_end": pct(last, 0.5), "p99_ms_end": pct(last, 0.99),
           "pss_mb_after_warmup": [round(s["pss_mb"]) for s in warm[:: max(1, len(warm) // 10)]],
           "fds_after_warmup": [s["fds"] for s in warm[:: max(1, len(warm) // 10)]],
           "pss_mb_first_last": [round(warm[0]["pss_mb"]), round(warm[-1]["pss_mb"])]
           if warm else [], "fds_first_last": [warm[0]["fds"], warm[-1]["fds"]] if warm else [],
           "median_all_ms": statistics.median(d for _, d in latencies) * 1000
           if latencies else None}
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--sample", type=float, default=5.0)
    args = parser.parse_args(argv)
    doc = asyncio.run(main_async(args))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))
    return 1 if doc["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
