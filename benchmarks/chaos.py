"""The long chaos campaign (``make chaos``): faults of every kind on SQLite and
PostgreSQL, figures in ``benchmarks/results/chaos/``. The kinds and their
variants (among them the takeover by a second system, and SQLite's disk full
or read-only filesystem, a tmpfs the campaign mounts: run as root) are
``tests/chaos/plan.py``'s.

    python -m benchmarks.chaos [--faults-per-kind 100] [--seed 20261201] [--store sqlite]

Shares its library with the short CI campaign (``tests/chaos/``). Each store
runs in its own process (both at once); each writes ``<store>.json`` after
every fault (so an interrupted campaign keeps what it measured) and
``summary.md`` is rebuilt from the JSON files at the end.
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


def run_store(store: str, per_kind: int, seed: int) -> None:
    from tests.chaos.campaign import Figures
    from tests.chaos.plan import KINDS, run_campaign

    began = time.time()
    figures: list[Figures] = []

    def write(line: str) -> None:
        print(line, flush=True)
        if not figures:
            return
        table = figures[0].table()
        doc = {"store": store, "seed": seed, "faults_per_kind": per_kind, "kinds": list(KINDS),
               "started": began, "seconds": time.time() - began,
               "faults": sum(r["runs"] for r in table.values()),
               "violations": figures[0].violations(), "rows": table}
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"{store}.json").write_text(json.dumps(doc, indent=1, default=dict) + "\n")

    from tests.chaos import campaign as lib

    original = lib.Campaign.__init__

    def keep(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        figures.append(self.figures)

    lib.Campaign.__init__ = keep  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix=f"hayata-chaos-{store}-") as work:
        run_campaign(store, per_kind, seed, Path(work), progress=write)
    write("done")


def summary() -> str:
    lines = ["# Chaos campaign", "",
             "Faults injected at random moments of invocations (`make chaos`, "
             "`benchmarks/chaos.py`); invariants checked after every fault "
             "(`tests/chaos/invariants.py`).", "",
             "| kind | store | faults | outcomes | targets | violations | s/fault |",
             "|---|---|---|---|---|---|---|"]
    total = 0
    for store in STORES:
        path = OUT / f"{store}.json"
        if not path.exists():
            continue
        doc = json.loads(path.read_text())
        for row in doc["rows"].values():
            total += row["runs"]
            outcomes = ", ".join(f"{k} {v}" for k, v in sorted(row["outcomes"].items()))
            targets = ", ".join(f"{k} {v}" for k, v in sorted(row["targets"].items()))
            lines.append(f"| {row['kind']} | {row['store']} | {row['runs']} | {outcomes} | "
                         f"{targets} | {row['violations']} | {row['seconds'] / row['runs']:.2f} |")
        lines.append("")
        lines.append(f"{store}: seed {doc['seed']}, {doc['faults']} faults in "
                     f"{doc['seconds']:.0f} s; violations: {len(doc['violations'])}")
        for v in doc["violations"][:20]:
            lines.append(f"- {v}")
        lines.append("")
    lines.append(f"Total: {total} faults.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--faults-per-kind", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--store", choices=STORES)
    args = parser.parse_args(argv)
    if args.store:
        run_store(args.store, args.faults_per_kind, args.seed)
        return 0
    procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.chaos", "--store", store,
                               "--faults-per-kind", str(args.faults_per_kind),
                               "--seed", str(args.seed)]) for store in STORES]
    codes = [p.wait() for p in procs]
    (OUT / "summary.md").write_text(summary())
    print(summary())
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
