"""The ceiling ``bench_serve`` reports: what a machine's cores can carry of its load."""

from __future__ import annotations

import math
from typing import Any

from benchmarks.bench_serve import ceiling, report, targets


def _row(phase: str, metric: str, langgraph: float, hayata: float) -> dict[str, Any]:
    def spread(v: float) -> dict[str, float]:
        return {"median": v, "min": v, "max": v}
    return {"phase": phase, "metric": metric, "langgraph": spread(langgraph),
            "hayata": spread(hayata), "ratio": spread(hayata / langgraph)}


SUMMARY = [_row("stream", "runs_per_s", 40.0, 30.0),
           _row("stream", "cpu_ms_per_run", 10.0, 30.0),
           _row("stream", "client_cpu_ms_per_run", 40.0, 40.0)]


def test_the_load_alone_bounds_any_server() -> None:
    c = ceiling(SUMMARY, "stream", 2.0)
    assert math.isclose(c["any_server_runs_per_s"], 50.0)  # 2 cores / 40 ms
    assert math.isclose(c["any_server_ratio"], 1.25)
    assert math.isclose(c["as_cheap_runs_per_s"], 40.0)  # 2 cores / (40 + 10) ms
    assert math.isclose(c["as_cheap_ratio"], 1.0)


def test_more_cores_raise_the_ceiling_in_proportion() -> None:
    assert math.isclose(ceiling(SUMMARY, "stream", 8.0)["any_server_ratio"], 5.0)


def test_no_ceiling_without_the_load_s_cpu() -> None:
    assert ceiling(SUMMARY[:2], "stream", 2.0) == {}
    assert ceiling(SUMMARY, "background", 2.0) == {}


def test_the_report_names_the_ceiling_under_the_throughput_target() -> None:
    goals = targets(SUMMARY, {}, cores=2.0)
    throughput = next(g for g in goals if "throughput" in g["target"])
    assert throughput["met"] is False
    text = report(SUMMARY, {}, goals)
    assert "ceiling on 2 cores" in text
    assert "any server 50.0 runs/s (1.25x langgraph dev)" in text
