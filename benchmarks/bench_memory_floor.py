"""The floor: the memory of the cheapest actor process this runtime can fork.

    python -m benchmarks.bench_memory_floor [--leaves 8] [--messages 200]

An idle hayata_py agent is a tree of actor processes, so its memory has a
floor: the number of processes times what the cheapest of them costs. This
measures that cheapest process. A parent actor (in a ``supervisors.System``,
as hayata_py starts its supervisors) imports the runtime the way the
supervisors do before they fork (``preload_runtime``: hayata_py's actors,
SQLAlchemy, the task writer), calls ``gc.freeze()`` and creates ``--leaves``
:class:`Leaf` actors: Thespian actors whose only code answers a ping. After
each leaf answered ``--messages`` pings: its USS (the pages only it maps) and
PSS (its share of every page), psutil ``memory_full_info``. With a few
leaves their PSS is well above their USS (the inherited pages are shared by
few); with the hundreds of processes of 50 agents it tends to the USS, so the
floor per agent at scale is the leaf's USS times the agent's processes.

The same for a parent that imported nothing but Thespian (``plain``) shows how
much of the floor is the size of the inherited runtime. A leaf runs no
hayata_py code, opens no store, holds no state: every private page it has is
a page of its parent's memory it wrote to (reference counts of the objects
the Thespian loop touches, its bytecode as CPython 3.11 specialises it, its
transport) or a page it allocated. Any actor of the agent's tree costs at
least this, so an agent of ``n`` processes costs at least ``n`` times it.

Results: ``benchmarks/results/memory_floor.json``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
from thespian.actors import Actor, ActorExitRequest

from benchmarks._util import environment, fmt, write_json
from supervisors import System

MB = 1024 * 1024
TIMEOUT = 30.0
AGENT_PROCESSES = 10
"""Processes of an idle 3-node agent: its supervisor, the agent, the node
supervisor, the edge watcher, 3 nodes and their 3 spare edges."""
TREE_MINIMUM = 7
"""What issue 11 itself prescribes for a 3-node agent: the agent, a node per
node id (each its edges' parent and supervisor, restarted alone after a
SIGKILL) and an edge per node."""


class Leaf(Actor):  # type: ignore[misc]
    """Answers ``"pid"`` with its pid and anything else with ``"ok"``."""

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if message == "pid":
            self.send(sender, os.getpid())
        elif isinstance(message, str):
            self.send(sender, "ok")


class FloorParent(Actor):  # type: ignore[misc]
    """``("leaves", n, preload)``: import the runtime if ``preload``, freeze
    the heap, create ``n`` leaves, answer ``(own pid, [leaf addresses])``."""

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, tuple) and message[:1] == ("leaves",):
            _, count, preload = message
            if preload:
                from hayata_py._actors.supervision_tree import preload_runtime

                preload_runtime()
            gc.freeze()  # as supervisors do before every fork
            self.leaves = [self.createActor(Leaf) for _ in range(count)]
            self.send(sender, (os.getpid(), self.leaves))


def _mem(pid: int) -> dict[str, float]:
    info = psutil.Process(pid).memory_full_info()
    return {"uss_mb": info.uss / MB, "pss_mb": info.pss / MB, "rss_mb": info.rss / MB}


def measure(system: System, leaves: int, messages: int, preload: bool) -> dict[str, Any]:
    asys = system.thespian
    parent = asys.createActor(FloorParent)
    try:
        answer = asys.ask(parent, ("leaves", leaves, preload), TIMEOUT)
        if answer is None:
            raise RuntimeError("the parent actor did not answer")
        parent_pid, addresses = answer
        pids = [asys.ask(a, "pid", TIMEOUT) for a in addresses]
        if any(not isinstance(p, int) for p in pids):
            raise RuntimeError(f"a leaf did not answer: {pids}")
        fresh = [_mem(p) for p in pids]
        for _ in range(messages):
            for a in addresses:
                if asys.ask(a, "ping", TIMEOUT) != "ok":
                    raise RuntimeError("a leaf stopped answering")
        aged = [_mem(p) for p in pids]
        parent_mem = _mem(parent_pid)
    finally:
        asys.tell(parent, ActorExitRequest())

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    return {
        "preload_runtime": preload, "leaves": leaves, "messages_each": messages,
        "leaf_uss_mb_fresh": med(fresh, "uss_mb"), "leaf_pss_mb_fresh": med(fresh, "pss_mb"),
        "leaf_uss_mb": med(aged, "uss_mb"), "leaf_pss_mb": med(aged, "pss_mb"),
        "leaf_rss_mb": med(aged, "rss_mb"), "parent": parent_mem,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--leaves", type=int, default=8)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--out", default="memory_floor")
    args = parser.parse_args(argv)
    data: dict[str, Any] = {"environment": environment(), "loadavg": psutil.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="hy-floor-") as tmp, \
            System(log_file=Path(tmp) / "log.jsonl") as system:
        data["plain"] = measure(system, args.leaves, args.messages, preload=False)
        data["runtime"] = measure(system, args.leaves, args.messages, preload=True)
    # With hundreds of processes sharing the inherited pages, a process's PSS
    # tends to its USS: the floor at 50 agents is the USS of a leaf.
    floor = data["runtime"]["leaf_uss_mb"]
    data["pss_floor_mb_per_agent_at_scale"] = {
        "agent_now_10_processes": AGENT_PROCESSES * floor,
        "tree_minimum_7_processes": TREE_MINIMUM * floor,
        "tree_minimum_7_processes_plain_parent": TREE_MINIMUM * data["plain"]["leaf_uss_mb"]}
    for name in ("plain", "runtime"):
        row = data[name]
        print(f"{name:8} parent: leaf USS {fmt(row['leaf_uss_mb_fresh'])} MB fresh, "
              f"{fmt(row['leaf_uss_mb'])} MB after {row['messages_each']} messages; "
              f"PSS {fmt(row['leaf_pss_mb'])} MB (x{row['leaves']} leaves)")
    print(f"PSS floor of a 3-node agent at scale (PSS -> USS): {fmt(AGENT_PROCESSES * floor, 1)}"
          f" MB with {AGENT_PROCESSES} processes, {fmt(TREE_MINIMUM * floor, 1)} MB with the "
          f"{TREE_MINIMUM} the issue's tree needs (target: 25 MB)")
    write_json(args.out, data)
    return data


if __name__ == "__main__":
    main()
