"""Workload 6, second half: SIGKILL of the whole system -> restart -> recovery.

    python -m benchmarks.bench_recovery [--samples N]

Each sample: start an :class:`hy.AgentSystem` on a fresh data dir, run the
``steps100`` agent (100 sequential trivial steps, each a completed durable
task, then an idempotent ``gate`` node that blocks on a file) until the gate's
task is ``started``; then SIGKILL every process of the system at once
(``AgentSystem.kill()``, a machine crash), remove the gate file and time,
from the kill:

- ``restart_system``: a new ``AgentSystem`` on the same data dir answering;
- ``start_agent``: the agent started again (it finds the unfinished
  invocation and reports ``recovery_required``);
- ``recover_and_finish``: ``recover()`` (claim, load the checkpoint and the
  step's task records, classify: the gate is uncertain but idempotent, so it
  runs again) until ``wait()`` returns the completed result;
- ``kill_to_result``: the whole path, end to end.

Writes ``benchmarks/results/recovery.json``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hayata_py as hy
from benchmarks import graphs as G
from benchmarks._util import summary, write_json

TIMEOUT = 60.0


def _wait_gate_started(system: hy.AgentSystem, inv: str) -> int:
    """Poll the store until the gate task is started; return the completed task count."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        tasks = system.store.get_tasks(inv)
        gate = [t for t in tasks if t.node_id == "gate"]
        if gate and gate[0].status == "started":
            return sum(1 for t in tasks if t.status == "completed")
        time.sleep(0.01)
    raise TimeoutError(f"the gate of {inv} never started")


def one_sample(tmp: Path, index: int) -> dict[str, float]:
    data = tmp / f"data-{index}"
    gate = tmp / f"gate-{index}"
    gate.touch()
    config = G.hy_config("steps100")
    system = hy.AgentSystem(data)
    try:
        inv = system.start_agent(config).run({"gate": str(gate)})
        completed = _wait_gate_started(system, inv)
        if completed != G.RECOVERY_TASKS:
            raise RuntimeError(f"{completed} completed tasks, expected {G.RECOVERY_TASKS}")
        t_kill = time.perf_counter()
        system.kill()
        t_killed = time.perf_counter()
    finally:
        system.shutdown()  # only closes this launcher's handle: not part of the crash
    gate.unlink()
    t0 = t_kill + (time.perf_counter() - t_killed)  # the kill, without that cleanup
    system2 = hy.AgentSystem(data)
    try:
        t1 = time.perf_counter()
        agent = system2.start_agent(config)
        if agent.status() != "recovery_required":
            raise RuntimeError(f"status {agent.status()!r} after the crash")
        t2 = time.perf_counter()
        result = agent.wait(agent.recover(), TIMEOUT)
        t3 = time.perf_counter()
        if not result.ok or result.result != {"steps": G.RECOVERY_TASKS + 1}:
            raise RuntimeError(f"recovery ended with {result}")
    finally:
        system2.shutdown()
    return {"restart_system": (t1 - t0) * 1000, "start_agent": (t2 - t1) * 1000,
            "recover_and_finish": (t3 - t2) * 1000, "kill_to_result": (t3 - t0) * 1000}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=10)
    args = parser.parse_args(argv)
    raw: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="hy-recovery-") as tmp:
        for i in range(args.samples):
            for key, value in one_sample(Path(tmp), i).items():
                raw.setdefault(key, []).append(value)
    data = {"benchmark": "recovery", "tasks": G.RECOVERY_TASKS, "samples": args.samples,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "loadavg": list(os.getloadavg()),
            "latency_ms": {k: summary(v) for k, v in raw.items()}, "raw_ms": raw}
    for key, s in data["latency_ms"].items():
        print(f"  {key:<20} median {s['median']:.1f} ms (p95 {s['p95']:.1f})")
    print(f"wrote {write_json('recovery', data)}")
    return data


if __name__ == "__main__":
    main()
