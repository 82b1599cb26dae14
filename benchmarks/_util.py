"""Small helpers shared by benchmarks: summaries, tables, environment, JSON."""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation; nan if empty."""
    data = sorted(v for v in values if not math.isnan(v))
    if not data:
        return math.nan
    pos = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summary(values: Sequence[float]) -> dict[str, float]:
    """n, median, p95, mean, min and max of ``values`` (nan ignored)."""
    data = [v for v in values if not math.isnan(v)]
    if not data:
        return {"n": 0, "median": math.nan, "p95": math.nan, "mean": math.nan,
                "min": math.nan, "max": math.nan}
    return {
        "n": len(data),
        "median": statistics.median(data),
        "p95": percentile(data, 95),
        "mean": statistics.fmean(data),
        "min": min(data),
        "max": max(data),
    }


def ms(seconds: Sequence[float]) -> list[float]:
    return [s * 1000.0 for s in seconds]


def fmt(value: float, digits: int = 2) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        out = [str(cells[0]).ljust(widths[0])]
        out += [str(c).rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(out)

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def environment() -> dict[str, Any]:
    """What the figures were measured on."""

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "thespian": version("thespian"),
        "psutil": version("psutil"),
    }


def _clean(value: Any) -> Any:
    """JSON has no NaN: write it as null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_json(name: str, data: dict[str, Any]) -> Path:
    """Write ``data`` to ``benchmarks/results/<name>.json``; return the path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(_clean(data), indent=2, sort_keys=False) + "\n")
    return path


def pss_mb(processes: Sequence[Any]) -> float:
    """PSS (psutil ``memory_full_info().pss``) summed over ``processes``, in MB."""
    import psutil

    total = 0
    for proc in processes:
        try:
            total += proc.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total / (1024 * 1024)


def roles(tree: dict[str, Any]) -> dict[str, list[int]]:
    """Role -> pids of an ``AgentSystem.tree()``."""
    found: dict[str, list[int]] = {}

    def walk(row: dict[str, Any]) -> None:
        if row.get("pid"):
            found.setdefault(row["role"], []).append(int(row["pid"]))
        for child in row.get("children", []):
            walk(child)

    walk(tree)
    return found
