"""Store benchmark: cost of a durable task record against the SQLite floor.

Run: ``python -m benchmarks.bench_store [--rounds N] [--postgres URL]``.

A (store)  - one durable task record: ``mark_started`` (creating the row) +
             ``mark_completed`` with a small result; two fenced transactions.
B (floor)  - two bare ``sqlite3`` commits (INSERT, then UPDATE) of the same
             encoded bytes, on a file in the same directory with the same
             pragmas (WAL, synchronous=FULL): the cost of two durable commits.

Rounds interleave A and B (alternating which goes first) so drift in disk or
CPU load hits both alike. Also measured: loading an invocation with 100
completed tasks (``get_invocation`` + ``get_tasks``) and classifying it.
Figures are printed and written to ``benchmarks/results/store.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hayata_py._codec import encode
from hayata_py.store import (
    InvocationRecord,
    SqlTaskStore,
    TaskRecord,
    classify_execution,
    default_store_url,
    task_id_for,
)

RESULTS = Path(__file__).resolve().parent / "results" / "store.json"
RESULT = {"answer": "ok", "tokens": 12, "items": [1, 2, 3]}


def _summary(seconds: Sequence[float]) -> dict[str, float]:
    data = sorted(s * 1000.0 for s in seconds)
    p95 = data[min(len(data) - 1, math.ceil(0.95 * len(data)) - 1)]
    return {"n": len(data), "median_ms": statistics.median(data), "p95_ms": p95}


def _floor_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, input BLOB, result BLOB)")
    return conn


def _invocation(iid: str) -> InvocationRecord:
    return InvocationRecord(iid, f"agent-{iid}", "running", 0, {"k": 1}, None)


def bench_task_record(
    store: SqlTaskStore, floor: sqlite3.Connection | None, rounds: int, prefix: str = ""
) -> dict[str, Any]:
    """Interleaved A/B: store task record vs two bare sqlite3 commits (B skipped if no floor)."""
    iid = f"{prefix}bench"
    token = store.create_invocation(_invocation(iid), owner="bench")
    input_bytes, result_bytes = encode({"node": "n"}, key="input"), encode(RESULT, key="result")
    a_times: list[float] = []
    b_times: list[float] = []

    def run_a(i: int) -> None:
        task = TaskRecord(task_id_for(iid, i, "n"), iid, "ex", i, "n", input={"node": "n"})
        t0 = time.perf_counter()
        store.mark_started(task.task_id, token=token, system_instance="b", attempt=1, task=task)
        store.mark_completed(task.task_id, token=token, result=RESULT)
        a_times.append(time.perf_counter() - t0)

    def run_b(i: int) -> None:
        if floor is None:
            return
        t0 = time.perf_counter()
        floor.execute("BEGIN IMMEDIATE")
        floor.execute("INSERT INTO t (id, input) VALUES (?, ?)", (f"t{i}", input_bytes))
        floor.execute("COMMIT")
        floor.execute("BEGIN IMMEDIATE")
        floor.execute("UPDATE t SET result = ? WHERE id = ?", (result_bytes, f"t{i}"))
        floor.execute("COMMIT")
        b_times.append(time.perf_counter() - t0)

    for i in range(-10, rounds):  # 10 warm-up rounds, discarded
        order: list[Callable[[int], None]] = [run_a, run_b] if i % 2 else [run_b, run_a]
        for fn in order:
            fn(i + 10)
    a = _summary(a_times[10:])
    if floor is None:
        return {"store_task_record": a}
    b = _summary(b_times[10:])
    return {
        "store_task_record": a,
        "sqlite_two_commits_floor": b,
        "ratio_median": a["median_ms"] / b["median_ms"],
        "ratio_p95": a["p95_ms"] / b["p95_ms"],
    }


def bench_load_classify(
    store: SqlTaskStore, repeats: int, n_tasks: int = 100, prefix: str = ""
) -> dict[str, Any]:
    """Load an invocation with ``n_tasks`` completed tasks and classify it."""
    iid = f"{prefix}load"
    token = store.create_invocation(_invocation(iid), owner="bench")
    nodes = [f"node-{i}" for i in range(n_tasks)]
    tasks = [
        TaskRecord(task_id_for(iid, 1, n), iid, "ex-1", 1, n, i, input={"i": i})
        for i, n in enumerate(nodes)
    ]
    store.schedule_tasks(tasks, token=token)
    for t in tasks:
        store.mark_started(t.task_id, token=token, system_instance="b", attempt=1)
        store.mark_completed(t.task_id, token=token, result=RESULT)
    times: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        record = store.get_invocation(iid)
        out = classify_execution(nodes, store.get_tasks(iid, execution_id="ex-1"), ())
        times.append(time.perf_counter() - t0)
        assert record is not None and out.all_completed
    return {"tasks": n_tasks, **_summary(times)}


def _print_row(name: str, s: dict[str, float]) -> None:
    print(f"  {name:<34} median {s['median_ms']:8.3f} ms   p95 {s['p95_ms']:8.3f} ms")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--dir", help="directory for the SQLite files (default: a temp dir)")
    parser.add_argument("--postgres", help="also measure A and the load on this PostgreSQL URL")
    args = parser.parse_args(argv)
    data: dict[str, Any] = {
        "env": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "sqlite": sqlite3.sqlite_version,
        },
        "rounds": args.rounds,
    }
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        data["dir"] = args.dir or tempfile.gettempdir()
        store = SqlTaskStore(default_store_url(tmp))
        floor = _floor_db(Path(tmp) / "floor.db")
        try:
            data["sqlite"] = bench_task_record(store, floor, args.rounds)
            data["sqlite"]["load_classify"] = bench_load_classify(store, args.repeats)
        finally:
            floor.close()
            store.close()
    print(f"Durable task record (SQLite, {args.rounds} interleaved rounds, dir {data['dir']}):")
    s = data["sqlite"]
    _print_row("store: mark_started + mark_completed", s["store_task_record"])
    _print_row("floor: two bare sqlite3 commits", s["sqlite_two_commits_floor"])
    print(f"  ratio store/floor: median {s['ratio_median']:.2f}x, p95 {s['ratio_p95']:.2f}x")
    _print_row("load + classify 100 tasks", s["load_classify"])
    if args.postgres:
        pg = SqlTaskStore(args.postgres)
        prefix = f"b{time.time_ns()}-"
        try:
            data["postgres"] = bench_task_record(pg, None, args.rounds, prefix)
            data["postgres"]["load_classify"] = bench_load_classify(pg, args.repeats, prefix=prefix)
        finally:
            pg.close()
        print("PostgreSQL:")
        _print_row("store: mark_started + mark_completed", data["postgres"]["store_task_record"])
        _print_row("load + classify 100 tasks", data["postgres"]["load_classify"])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return data


if __name__ == "__main__":
    main()
