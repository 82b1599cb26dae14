"""A map step over N trivial items, side by side with LangGraph ``Send`` of N.

    python -m benchmarks.bench_map [--items 100,1000,10000] [--samples 3]

hayata_py: one agent, ``hy.Map("item", range(N))`` (default
``map_concurrency``), run + wait; LangGraph: one compiled graph whose start
sends N ``Send("item", ...)``, ``SqliteSaver`` on a file, ``durability="sync"``.
Samples of the two alternate; medians and the ratio per N, and the time per
item (hayata_py should stay linear in N). Writes ``benchmarks/results/map.json``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hayata_py as hy
from benchmarks import graphs as G
from benchmarks._util import environment, fmt, write_json
from benchmarks.bench_langgraph import LG, _load

TIMEOUT = 1800.0


def one_size(tmp: str, items: int, samples: int) -> dict[str, Any]:
    lg = LG(tmp, f"map-{items}")
    hy_ms: list[float] = []
    lg_ms: list[float] = []
    with hy.AgentSystem(Path(tmp) / f"hy-map-{items}") as system:
        agent = system.start_agent(G.hy_config("map_n", f"map-{items}"))
        assert agent.wait(agent.run(min(items, 10)), TIMEOUT).ok  # warm: edges started
        lg.invoke("map_n", {"input": min(items, 10)})
        for _ in range(samples):
            t0 = time.perf_counter()
            result = agent.wait(agent.run(items), TIMEOUT)
            hy_ms.append((time.perf_counter() - t0) * 1000)
            if not result.ok or result.result != items:
                raise RuntimeError(f"hayata map of {items} failed: {result}")
            t0 = time.perf_counter()
            lg.invoke("map_n", {"input": items})
            lg_ms.append((time.perf_counter() - t0) * 1000)
    lg.close()
    h, g = statistics.median(hy_ms), statistics.median(lg_ms)
    return {"items": items, "samples": samples, "hayata_ms_median": h,
            "langgraph_ms_median": g, "ratio_median": h / g,
            "hayata_ms_per_item": h / items, "langgraph_ms_per_item": g / items,
            "raw_ms": {"hayata": hy_ms, "langgraph": lg_ms}}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="100,1000,10000")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--out", default="map")
    args = parser.parse_args(argv)
    data: dict[str, Any] = {"benchmark": "map", "environment": environment(),
                            "loadavg_before": _load(), "sizes": []}
    with tempfile.TemporaryDirectory(prefix="hy-map-") as tmp:
        for items in (int(x) for x in args.items.split(",")):
            row = one_size(tmp, items, args.samples)
            data["sizes"].append(row)
            print(f"map of {items}: hayata {fmt(row['hayata_ms_median'])} ms "
                  f"({fmt(row['hayata_ms_per_item'])} ms/item), LangGraph "
                  f"{fmt(row['langgraph_ms_median'])} ms ({fmt(row['langgraph_ms_per_item'])} "
                  f"ms/item), ratio {fmt(row['ratio_median'])}", flush=True)
    data["loadavg_after"] = _load()
    print(f"wrote {write_json(args.out, data)}")
    return data


if __name__ == "__main__":
    main()
