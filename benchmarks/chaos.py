"""The long chaos campaign (``make chaos``): faults of every kind on SQLite and
PostgreSQL, figures in ``benchmarks/results/chaos/``. The kinds and their
variants (among them the takeover by a second system, and SQLite's disk full
or read-only filesystem, a tmpfs the campaign mounts: run as root) are
``tests/chaos/plan.py``'s.

    python -m benchmarks.chaos [--faults-per-kind 100] [--seed 20261201] [--store sqlite]
    python -m benchmarks.chaos --concurrent [--faults-per-kind 30]   # 8-32 in flight per fault
    python -m benchmarks.chaos --drill 1000                          # a whole-system kill

Shares its library with the short CI campaign (``tests/chaos/``). Each store
runs in its own process (both at once); each writes ``<store>.json`` after
every fault (so an interrupted campaign keeps what it measured) and
``summary.md`` is rebuilt from the JSON files at the end.

``--concurrent``: the concurrent mode (``tests/chaos/concurrent.py``): every
fault hits 8-32 invocations of one service agent, on threads and enqueued;
figures in ``concurrent-<store>.json`` (``rows[*].invocations``: how the
invocations ended). ``--drill N``: the whole-system kill with N invocations in
flight, restarted with ``auto_recover`` (``tests/chaos/drills.py``), on both
stores; ``drill-<store>.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._util import RESULTS_DIR

OUT = RESULTS_DIR / "chaos"
STORES = ("sqlite", "postgres")


def run_store(store: str, per_kind: int, seed: int, concurrent: bool = False) -> None:
    from tests.chaos.campaign import Figures
    from tests.chaos.plan import KINDS, run_campaign, run_concurrent_campaign

    name = f"concurrent-{store}" if concurrent else store

    began = time.time()
    figures: list[Figures] = []

    def write(line: str) -> None:
        print(line, flush=True)
        if not figures:
            return
        table = figures[0].table()
        doc = {"store": store, "mode": "concurrent" if concurrent else "single", "seed": seed,
               "faults_per_kind": per_kind, "kinds": list(KINDS),
               "started": began, "seconds": time.time() - began,
               "faults": sum(r["runs"] for r in table.values()),
               "violations": figures[0].violations(), "rows": table}
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"{name}.json").write_text(json.dumps(doc, indent=1, default=dict) + "\n")

    from tests.chaos import campaign as lib

    original = lib.Campaign.__init__

    def keep(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        figures.append(self.figures)

    lib.Campaign.__init__ = keep  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix=f"hayata-chaos-{store}-") as work:
        if concurrent:
            run_concurrent_campaign(store, per_kind, seed, Path(work), progress=write)
        else:
            run_campaign(store, per_kind, seed, Path(work), progress=write)
    write("done")


def run_drill(store: str, n: int) -> int:
    """The whole-system kill drill with ``n`` in flight on ``store``."""
    import dataclasses

    from tests.chaos.drills import whole_system_kill

    with tempfile.TemporaryDirectory(prefix=f"hayata-drill-{store}-") as work:
        url = None
        server = None
        if store == "postgres":
            from tests.pg import ThrowawayServer

            server = ThrowawayServer()
            url = server.server.url("postgres")
        try:
            began = time.time()
            report = whole_system_kill(Path(work), n, max(1, n // 4), store_url=url)
        finally:
            if server is not None:
                server.stop()
    doc = {"store": store, "started": began, **dataclasses.asdict(report)}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"drill-{store}.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))
    return len(report.problems)


def summary() -> str:
    lines = ["# Chaos campaign", "",
             "Faults injected at random moments of invocations (`make chaos`, "
             "`benchmarks/chaos.py`); invariants checked after every fault "
             "(`tests/chaos/invariants.py`).", "",
             "| kind | store | faults | outcomes | targets | violations | s/fault |",
             "|---|---|---|---|---|---|---|"]
    total = 0
    for name in (*STORES, *(f"concurrent-{s}" for s in STORES)):
        path = OUT / f"{name}.json"
        if not path.exists():
            continue
        doc = json.loads(path.read_text())
        store = f"{doc['store']} ({doc.get('mode', 'single')})"
        for row in doc["rows"].values():
            total += row["runs"]
            outcomes = ", ".join(f"{k} {v}" for k, v in sorted(row["outcomes"].items()))
            targets = ", ".join(f"{k} {v}" for k, v in sorted(row["targets"].items()))
            if row.get("invocations"):
                outcomes += "; invocations: " + ", ".join(
                    f"{k} {v}" for k, v in sorted(row["invocations"].items()))
            lines.append(f"| {row['kind']} | {store} | {row['runs']} | {outcomes} | "
                         f"{targets} | {row['violations']} | {row['seconds'] / row['runs']:.2f} |")
        lines.append("")
        lines.append(f"{store}: seed {doc['seed']}, {doc['faults']} faults in "
                     f"{doc['seconds']:.0f} s; violations: {len(doc['violations'])}")
        for v in doc["violations"][:20]:
            lines.append(f"- {v}")
        lines.append("")
    lines.append(f"Total: {total} faults.")
    for store in STORES:
        path = OUT / f"drill-{store}.json"
        if path.exists():
            doc = json.loads(path.read_text())
            lines += ["", f"Whole-system kill drill ({store}): {doc['invocations']} in flight "
                      f"(+{doc['enqueued']} enqueued), {doc['started_at_kill']} calls started at "
                      f"the kill, {doc['uncertain']} uncertain (listed), "
                      f"{doc['auto_completed']} completed by auto_recover; seconds "
                      f"{ {k: round(v, 1) for k, v in doc['seconds'].items()} }; problems: "
                      f"{len(doc['problems'])}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--faults-per-kind", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--store", choices=STORES)
    parser.add_argument("--concurrent", action="store_true",
                        help="8-32 invocations of one service agent in flight per fault")
    parser.add_argument("--drill", type=int, metavar="N",
                        help="the whole-system kill drill with N invocations in flight")
    args = parser.parse_args(argv)
    if args.drill:
        problems = sum(run_drill(store, args.drill)
                       for store in ([args.store] if args.store else STORES))
        (OUT / "summary.md").write_text(summary())
        return 1 if problems else 0
    if args.store:
        run_store(args.store, args.faults_per_kind, args.seed, args.concurrent)
        return 0
    mode = ["--concurrent"] if args.concurrent else []
    procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.chaos", "--store", store,
                               "--faults-per-kind", str(args.faults_per_kind),
                               "--seed", str(args.seed), *mode]) for store in STORES]
    codes = [p.wait() for p in procs]
    (OUT / "summary.md").write_text(summary())
    print(summary())
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
