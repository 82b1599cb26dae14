"""Node functions, policies and reduce functions of the map-step tests (module
level: importable by the edges and reducers).

``map_policy`` answers ``hy.Map(input["node"] or "item", input["items"],
input.get("reduce"))`` at step 0 (``items`` "$unencodable" puts an object in
the list) and then finishes with what the policy saw. ``item`` is driven by
its item: a dict with ``log`` (append "start|end <item> <pid> <time>" lines),
``sleep``, ``raise``, ``value``, ``gate`` (wait until that file exists),
``fail_first`` (raise :class:`Transient` on attempts up to that number).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import hayata_py as hy


class Transient(Exception):
    """A failure worth a retry (the retry tests' ``retry_on``)."""


def map_policy(ctx: hy.PolicyContext) -> Any:
    spec = ctx.input
    if ctx.step == 0:
        items = spec["items"]
        if items == "$unencodable":
            items = [{"value": 0}, object()]
        return hy.Map(spec.get("node", "item"), items, spec.get("reduce"))
    return hy.Finish({"parallel_results": ctx.parallel_results,
                      "last_result": ctx.last_result, "state": dict(ctx.state)})


def item(ctx: hy.NodeContext) -> dict[str, Any]:
    spec = ctx.input if isinstance(ctx.input, dict) else {"value": ctx.input}
    log = spec.get("log")

    def note(event: str) -> None:
        if log:
            with open(log, "a") as f:
                f.write(f"{event} {ctx.item} {os.getpid()} {time.time():.6f}\n")
                f.flush()

    note("start")
    gate = spec.get("gate")
    if gate:
        deadline = time.monotonic() + 60
        while not Path(gate).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    if "sleep" in spec:
        time.sleep(spec["sleep"])
    if ctx.attempt <= spec.get("fail_first", 0):
        note("raise")
        raise Transient(f"attempt {ctx.attempt} of item {ctx.item} failed")
    if "raise" in spec:
        note("raise")
        raise RuntimeError(spec["raise"])
    note("end")
    return {"value": spec.get("value"), "item": ctx.item, "task_id": ctx.task_id}


def trivial(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"v": ctx.input}


def total(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"total": sum(r["value"] for r in results), "count": len(results)}


def raising(results: list[dict[str, Any]]) -> dict[str, Any]:
    raise ValueError("reduce says no")


def not_a_dict(results: list[dict[str, Any]]) -> Any:
    return [r["value"] for r in results]
