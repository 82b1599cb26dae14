"""Store benchmark: cost of a durable task record against the SQLite floor.

Run: ``python -m benchmarks.bench_store [--rounds N] [--postgres URL]``.

A (store)  - one durable task record: ``mark_started`` (creating the row) +
             ``mark_completed`` with a small result; two fenced transactions.
B (floor)  - two bare ``sqlite3`` commits (INSERT, then UPDATE) of the same
             encoded bytes, on a file in the same directory with the same
             pragmas (WAL, synchronous=FULL): the cost of two durable commits.

Rounds interleave A and B (alternating which goes first) so drift in disk or
CPU load hits both alike. The other hot writes are measured the same way
against their own floors: ``save_checkpoint`` (one fenced update) vs one bare
commit of the same checkpoint bytes, and ``create_invocation`` +
``finish_invocation`` vs two bare commits (INSERT, UPDATE) of the same bytes.
With ``--postgres`` the same workloads run there, against bare psycopg
commits on a table in the same database. Also measured: loading an
invocation with 100 completed tasks (``get_invocation`` + ``get_tasks``) and
classifying it. Figures (and the machine's load average) are printed and
written to ``benchmarks/results/store.json``.
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
    ActiveExecution,
    InvocationRecord,
    SqlTaskStore,
    TaskRecord,
    classify_execution,
    default_store_url,
    task_id_for,
)
from hayata_py.store._rows import invocation_values

RESULTS = Path(__file__).resolve().parent / "results" / "store.json"
RESULT = {"answer": "ok", "tokens": 12, "items": [1, 2, 3]}


def _summary(seconds: Sequence[float]) -> dict[str, float]:
    data = sorted(s * 1000.0 for s in seconds)
    p95 = data[min(len(data) - 1, math.ceil(0.95 * len(data)) - 1)]
    return {"n": len(data), "median_ms": statistics.median(data), "p95_ms": p95}


class Floor:
    """Bare durable commits of given bytes: sqlite3 (same pragmas) or psycopg."""

    def __init__(self, conn: Any, *, sqlite: bool, prefix: str = "") -> None:
        self.conn = conn
        self.sqlite = sqlite
        self.prefix = prefix  # table name prefix
        self.mark = "?" if sqlite else "%s"

    def commit(self, sql: str, params: Sequence[Any]) -> None:
        """Run ``sql`` in its own durable transaction."""
        sql = sql.replace("?", self.mark)
        if self.sqlite:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute(sql, params)
            self.conn.execute("COMMIT")
        else:
            self.conn.execute(sql, params)
            self.conn.commit()

    def close(self) -> None:
        self.conn.close()


_FLOOR_TABLES = (
    "CREATE TABLE IF NOT EXISTS {p}t (id TEXT PRIMARY KEY, input BYTEA, result BYTEA)",
    "CREATE TABLE IF NOT EXISTS {p}inv (id TEXT PRIMARY KEY, state BYTEA, input BYTEA,"
    " active BYTEA, parallel BYTEA, last BYTEA, result BYTEA, error BYTEA)",
)


def _floor_db(path: Path) -> Floor:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA busy_timeout = 30000")
    for ddl in _FLOOR_TABLES:
        conn.execute(ddl.format(p="").replace("BYTEA", "BLOB"))
    return Floor(conn, sqlite=True)


def _floor_pg(url: str, prefix: str) -> Floor:
    import psycopg

    conn = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
    for ddl in _FLOOR_TABLES:
        conn.execute(ddl.format(p=prefix.replace("-", "_")))
    conn.commit()
    return Floor(conn, sqlite=False, prefix=prefix.replace("-", "_"))


def _drop_pg_floor(floor: Floor) -> None:
    p = floor.prefix
    floor.conn.execute(f"DROP TABLE IF EXISTS {p}t, {p}inv")
    floor.conn.commit()


def _invocation(iid: str) -> InvocationRecord:
    return InvocationRecord(iid, f"agent-{iid}", "running", 0, {"k": 1}, None)


def _interleave(
    run_a: Callable[[int], float], run_b: Callable[[int], float] | None, rounds: int
) -> dict[str, Any]:
    """A/B rounds (alternating which goes first), 10 warm-up rounds discarded."""
    a_times: list[float] = []
    b_times: list[float] = []
    for i in range(-10, rounds):
        pairs: list[tuple[Callable[[int], float] | None, list[float]]] = [
            (run_a, a_times),
            (run_b, b_times),
        ]
        for fn, out in pairs if i % 2 else pairs[::-1]:
            if fn is not None:
                out.append(fn(i + 10))
    a = _summary(a_times[10:])
    if run_b is None:
        return {"store": a}
    b = _summary(b_times[10:])
    return {
        "store": a,
        "floor": b,
        "ratio_median": a["median_ms"] / b["median_ms"],
        "ratio_p95": a["p95_ms"] / b["p95_ms"],
    }


def bench_task_record(
    store: SqlTaskStore, floor: Floor | None, rounds: int, prefix: str = ""
) -> dict[str, Any]:
    """Interleaved A/B: store task record vs two bare commits (B skipped if no floor)."""
    iid = f"{prefix}bench"
    token = store.create_invocation(_invocation(iid), owner="bench")
    input_bytes, result_bytes = encode({"node": "n"}, key="input"), encode(RESULT, key="result")
    t = "" if floor is None else floor.prefix

    def run_a(i: int) -> float:
        task = TaskRecord(task_id_for(iid, i, "n"), iid, "ex", i, "n", input={"node": "n"})
        t0 = time.perf_counter()
        store.mark_started(task.task_id, token=token, system_instance="b", attempt=1, task=task)
        store.mark_completed(task.task_id, token=token, result=RESULT)
        return time.perf_counter() - t0

    def run_b(i: int) -> float:
        assert floor is not None
        t0 = time.perf_counter()
        floor.commit(f"INSERT INTO {t}t (id, input) VALUES (?, ?)", (f"t{i}", input_bytes))
        floor.commit(f"UPDATE {t}t SET result = ? WHERE id = ?", (result_bytes, f"t{i}"))
        return time.perf_counter() - t0

    out = _interleave(run_a, None if floor is None else run_b, rounds)
    res: dict[str, Any] = {"store_task_record": out["store"]}
    if floor is not None:
        res["sqlite_two_commits_floor" if floor.sqlite else "two_commits_floor"] = out["floor"]
        res["ratio_median"] = out["ratio_median"]
        res["ratio_p95"] = out["ratio_p95"]
    return res


def _checkpoint(iid: str, step: int) -> InvocationRecord:
    return InvocationRecord(
        iid,
        f"agent-{iid}",
        "running",
        step,
        {"k": step, "messages": ["hello", "world"]},
        {"q": "x"},
        ActiveExecution(f"ex-{step}", step, ("n",)),
        last_result=RESULT,
    )


def bench_checkpoint(
    store: SqlTaskStore, floor: Floor | None, rounds: int, prefix: str = ""
) -> dict[str, Any]:
    """``save_checkpoint`` vs one bare commit (UPDATE) of the same encoded columns."""
    iid = f"{prefix}ckpt"
    token = store.create_invocation(_invocation(iid), owner="bench")
    t = "" if floor is None else floor.prefix
    if floor is not None:
        floor.commit(f"INSERT INTO {t}inv (id) VALUES (?)", (iid,))

    def run_a(i: int) -> float:
        record = _checkpoint(iid, i)
        t0 = time.perf_counter()
        store.save_checkpoint(record, token=token)
        return time.perf_counter() - t0

    def run_b(i: int) -> float:
        assert floor is not None
        v = invocation_values(_checkpoint(iid, i))
        t0 = time.perf_counter()
        floor.commit(
            f"UPDATE {t}inv SET state = ?, input = ?, active = ?, parallel = ?, last = ?"
            " WHERE id = ?",
            (
                v["state"],
                v["input"],
                v["active_execution"],
                v["parallel_results"],
                v["last_result"],
                iid,
            ),
        )
        return time.perf_counter() - t0

    return _interleave(run_a, None if floor is None else run_b, rounds)


def bench_create_finish(
    store: SqlTaskStore, floor: Floor | None, rounds: int, prefix: str = ""
) -> dict[str, Any]:
    """``create_invocation`` + ``finish_invocation`` vs two bare commits of the same bytes."""
    t = "" if floor is None else floor.prefix

    def run_a(i: int) -> float:
        iid = f"{prefix}cf-{i}"
        record = _invocation(iid)
        t0 = time.perf_counter()
        token = store.create_invocation(record, owner="bench")
        store.finish_invocation(iid, token=token, status="completed", result=RESULT)
        return time.perf_counter() - t0

    def run_b(i: int) -> float:
        assert floor is not None
        iid = f"{prefix}cf-{i}"
        v = invocation_values(_invocation(iid))
        result = encode(RESULT, key="result")
        t0 = time.perf_counter()
        floor.commit(
            f"INSERT INTO {t}inv (id, state, input, active, parallel, last, result, error)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                iid,
                v["state"],
                v["input"],
                v["active_execution"],
                v["parallel_results"],
                v["last_result"],
                v["result"],
                v["error"],
            ),
        )
        floor.commit(
            f"UPDATE {t}inv SET result = ?, error = ? WHERE id = ?", (result, v["error"], iid)
        )
        return time.perf_counter() - t0

    return _interleave(run_a, None if floor is None else run_b, rounds)


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
    print(f"  {name:<38} median {s['median_ms']:8.3f} ms   p95 {s['p95_ms']:8.3f} ms")


def _print_ab(name: str, r: dict[str, Any]) -> None:
    _print_row(f"store: {name}", r["store"] if "store" in r else r["store_task_record"])
    floor = r.get("floor") or r.get("sqlite_two_commits_floor") or r.get("two_commits_floor")
    if floor:
        _print_row("  floor", floor)
        print(
            f"  {'  ratio store/floor':<38} median {r['ratio_median']:8.2f} x    "
            f"p95 {r['ratio_p95']:8.2f} x"
        )


def _run_all(store: SqlTaskStore, floor: Floor | None, args: Any, prefix: str) -> dict[str, Any]:
    out = bench_task_record(store, floor, args.rounds, prefix)
    out["save_checkpoint"] = bench_checkpoint(store, floor, args.rounds, prefix)
    out["create_finish"] = bench_create_finish(store, floor, args.rounds, prefix)
    out["load_classify"] = bench_load_classify(store, args.repeats, prefix=prefix)
    return out


def _report(title: str, s: dict[str, Any]) -> None:
    print(title)
    _print_ab("mark_started + mark_completed", s)
    _print_ab("save_checkpoint", s["save_checkpoint"])
    _print_ab("create + finish_invocation", s["create_finish"])
    _print_row("load + classify 100 tasks", s["load_classify"])


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--dir", help="directory for the SQLite files (default: a temp dir)")
    parser.add_argument("--postgres", help="also measure the workloads on this PostgreSQL URL")
    args = parser.parse_args(argv)
    data: dict[str, Any] = {
        "env": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "sqlite": sqlite3.sqlite_version,
            "loadavg_before": list(os.getloadavg()),
        },
        "rounds": args.rounds,
    }
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        data["dir"] = args.dir or tempfile.gettempdir()
        store = SqlTaskStore(default_store_url(tmp))
        floor = _floor_db(Path(tmp) / "floor.db")
        try:
            data["sqlite"] = _run_all(store, floor, args, "")
        finally:
            floor.close()
            store.close()
    _report(f"SQLite ({args.rounds} interleaved rounds, dir {data['dir']}):", data["sqlite"])
    if args.postgres:
        prefix = f"b{time.time_ns()}-"
        pg = SqlTaskStore(args.postgres)
        pg_floor = _floor_pg(args.postgres, prefix)
        try:
            data["postgres"] = _run_all(pg, pg_floor, args, prefix)
        finally:
            _drop_pg_floor(pg_floor)
            pg_floor.close()
            pg.close()
        _report("PostgreSQL (floor: bare psycopg commits in the same database):", data["postgres"])
    data["env"]["loadavg_after"] = list(os.getloadavg())
    print(f"loadavg before {data['env']['loadavg_before']}, after {data['env']['loadavg_after']}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return data


if __name__ == "__main__":
    main()
