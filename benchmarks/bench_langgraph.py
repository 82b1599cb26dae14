"""hayata_py against LangGraph, side by side (workloads 1-5 and 8 of issue 6).

Run from the repository root (needs the ``bench`` extra)::

    python -m benchmarks.bench_langgraph [--quick] [--only 1,3]

LangGraph: one compiled ``StateGraph`` per workload, ``SqliteSaver`` on a
file (``check_same_thread=False``), ``invoke(..., durability="sync")``, a new
``thread_id`` per invocation. hayata_py: one :class:`hy.AgentSystem` per
workload (start-up excluded), agents built from :mod:`benchmarks.graphs`.

Every workload interleaves the sides sample by sample (A B, then B A, ...),
after warm-up samples that are discarded, and reports medians, p95 and
hayata_py / LangGraph ratios. Results: ``benchmarks/results/langgraph.json``.

1. ``seq3`` latency: hayata ``run`` + ``wait`` (two asks), and
   ``run(subscriber=hy.CALLER)`` + ``messages()``; LangGraph ``invoke``.
   Also, on the hayata side, a policy that finishes at once (fixed cost of an
   invocation; by ``run`` + ``wait`` and by ``invoke``) and bare Thespian
   floors: an echo ask, and a ring of 14 transmissions (the critical path of
   a 3-step invocation: caller -> agent, 4 hops per step agent -> node ->
   edge -> reducer -> agent, agent -> caller).
2. ``fanout8`` latency (8 trivial branches then a join).
3. ``sleep8`` wall time (8 branches sleeping 50 ms; floor 50 ms). LangGraph is
   run with its default thread pool (``max_concurrency`` unset) and with
   ``max_concurrency=8``.
4. ``cpu2`` wall time (2 CPU-bound branches of ~0.3 s), and the speedup over
   running the two calls one after the other in the caller.
5. Throughput of ``seq3``: hayata N agents in one system; each round issues
   ``run`` to all N agents, then ``wait``s for all N (the API is single-
   threaded per AgentSystem, the agents run concurrently); LangGraph N
   threads invoking one compiled graph sharing one saver. Timed blocks of
   fixed length alternate between the sides.
9. ``map100`` latency: a map step of 100 trivial items (``hy.Map``, default
   ``map_concurrency``, and 8) vs a LangGraph ``Send`` fan-out of 100.
8. Memory (PSS, psutil ``memory_full_info``): the sum over
   ``system.processes()`` with 0, 1, 10 (and 50, full run) idle ``seq3``
   agents (each run once); LangGraph: PSS of a fresh process holding the
   same number of compiled graphs (each run once) and its saver.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil

import hayata_py as hy
from benchmarks import graphs as G
from benchmarks._util import environment, fmt, ms, pss_mb, summary, write_json
from benchmarks._util import roles as find_roles

MB = 1024 * 1024
TIMEOUT = 120.0


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _lg_env() -> dict[str, Any]:
    from importlib import metadata

    out = environment()
    for name in ("langgraph", "langgraph-checkpoint-sqlite"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["sqlite"] = sqlite3.sqlite_version
    return out


class LG:
    """LangGraph with a SqliteSaver on a file."""

    def __init__(self, directory: str, name: str) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.conn = sqlite3.connect(Path(directory) / f"lg-{name}.db", check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.graphs: dict[str, Any] = {}

    def graph(self, name: str) -> Any:
        if name not in self.graphs:
            self.graphs[name] = G.lg_graph(name, self.saver)
        return self.graphs[name]

    def invoke(self, name: str, state: dict[str, Any], **config: Any) -> Any:
        cfg = {"configurable": {"thread_id": uuid.uuid4().hex}, **config}
        return self.graph(name).invoke(state, cfg, durability="sync")

    def close(self) -> None:
        self.conn.close()


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _interleave(sides: dict[str, Callable[[], Any]], samples: int, warmup: int
                ) -> dict[str, list[float]]:
    """Run each side once per round, in an order shuffled every round; seconds.

    A call can leave work behind it (ACKs, a thread pool winding down) that
    slows the call after it: with a fixed or reversed order, a side that
    always follows the same neighbour paid that neighbour's tail (a hayata_py
    call right after a LangGraph one: +1.5 ms on fanout8). Shuffled (seeded),
    every side follows every other about equally often."""
    out: dict[str, list[float]] = {k: [] for k in sides}
    names = list(sides)
    shuffle = random.Random(20261204).shuffle
    for r in range(warmup + samples):
        order = list(names)
        shuffle(order)
        for name in order:
            t = _timed(sides[name])
            if r >= warmup:
                out[name].append(t)
    return out


def _hy_wait(agent: hy.AgentRef, value: Any = "x") -> Callable[[], Any]:
    def call() -> Any:
        result = agent.wait(agent.run(value), TIMEOUT)
        if not result.ok:
            raise RuntimeError(f"hayata invocation failed: {result.error}")
        return result
    return call


HAS_INVOKE = hasattr(hy.AgentRef, "invoke")
"""``AgentRef.invoke`` exists (this file also measures older checkouts)."""


def _hy_invoke(agent: hy.AgentRef, value: Any = "x") -> Callable[[], Any]:
    def call() -> Any:
        result = agent.invoke(value, timeout=TIMEOUT)
        if not result.ok:
            raise RuntimeError(f"hayata invocation failed: {result.error}")
        return result
    return call


def _hy_caller(agent: hy.AgentRef, value: Any = "x") -> Callable[[], Any]:
    def call() -> Any:
        inv = agent.run(value, subscriber=hy.CALLER)
        for message in agent.messages(inv, TIMEOUT):
            if isinstance(message, hy.AgentResult):
                if not message.ok:
                    raise RuntimeError(f"hayata invocation failed: {message.error}")
                return message
        raise RuntimeError("no result")
    return call


def _lg_call(lg: LG, graph: str, state: dict[str, Any], **config: Any) -> Callable[[], Any]:
    return lambda: lg.invoke(graph, state, **config)


def _stats(raw: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {k: summary(ms(v)) for k, v in raw.items()}


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


# -- workloads -------------------------------------------------------------------------


def w1_sequential(tmp: str, samples: int, warmup: int) -> dict[str, Any]:
    load = _load()
    lg = LG(tmp, "w1")
    with hy.AgentSystem(Path(tmp) / "hy-w1") as system:
        seq = system.start_agent(G.hy_config("seq3"))
        fin = system.start_agent(G.hy_config("finish"))
        thespian = system._system.thespian  # bare floors on the same admin
        relays = [thespian.createActor(G.Relay) for _ in range(13)]
        ring = G.Ring(tuple(relays[1:]), None, "x")
        sides = {
            "hayata_run_wait": _hy_wait(seq),
            **({"hayata_invoke": _hy_invoke(seq)} if HAS_INVOKE else {}),
            "hayata_caller_messages": _hy_caller(seq),
            "langgraph_invoke": _lg_call(lg, "seq3", {"input": "x"}),
            "hayata_finish_only": _hy_wait(fin),
            **({"hayata_finish_only_invoke": _hy_invoke(fin)} if HAS_INVOKE else {}),
            "thespian_echo_ask": lambda: thespian.ask(relays[0], G.Ring((), None, "x"), 10),
            "thespian_ring_14_hops": lambda: thespian.ask(relays[0], ring, 10),
        }
        raw = _interleave(sides, samples, warmup)
    lg.close()
    stats = _stats(raw)
    hy_med = stats["hayata_run_wait"]["median"]
    lg_med = stats["langgraph_invoke"]["median"]
    per_step = {
        "hayata_run_wait": hy_med / 3,
        "hayata_caller_messages": stats["hayata_caller_messages"]["median"] / 3,
        "langgraph_invoke": lg_med / 3,
        "hayata_marginal_step": (hy_med - stats["hayata_finish_only"]["median"]) / 3,
    }
    return {"latency_ms": stats, "per_step_ms_median": per_step,
            "ratio_median": _ratio(hy_med, lg_med),
            "ratio_p95": _ratio(stats["hayata_run_wait"]["p95"],
                                stats["langgraph_invoke"]["p95"]),
            "ratio_caller_median": _ratio(stats["hayata_caller_messages"]["median"], lg_med),
            **({"ratio_invoke_median": _ratio(stats["hayata_invoke"]["median"], lg_med)}
               if HAS_INVOKE else {}),
            "loadavg": [load, _load()], "raw_ms": {k: ms(v) for k, v in raw.items()}}


def w2_fanout(tmp: str, samples: int, warmup: int) -> dict[str, Any]:
    load = _load()
    lg = LG(tmp, "w2")
    with hy.AgentSystem(Path(tmp) / "hy-w2") as system:
        agent = system.start_agent(G.hy_config("fanout8"))
        raw = _interleave({"hayata_run_wait": _hy_wait(agent),
                           **({"hayata_invoke": _hy_invoke(agent)} if HAS_INVOKE else {}),
                           "langgraph_invoke": _lg_call(lg, "fanout8", {"input": "x"})},
                          samples, warmup)
    lg.close()
    stats = _stats(raw)
    return {"latency_ms": stats,
            "ratio_median": _ratio(stats["hayata_run_wait"]["median"],
                                   stats["langgraph_invoke"]["median"]),
            **({"ratio_invoke_median": _ratio(stats["hayata_invoke"]["median"],
                                              stats["langgraph_invoke"]["median"])}
               if HAS_INVOKE else {}),
            "ratio_p95": _ratio(stats["hayata_run_wait"]["p95"],
                                stats["langgraph_invoke"]["p95"]),
            "loadavg": [load, _load()], "raw_ms": {k: ms(v) for k, v in raw.items()}}


def w3_sleep(tmp: str, samples: int, warmup: int) -> dict[str, Any]:
    load = _load()
    lg = LG(tmp, "w3")
    with hy.AgentSystem(Path(tmp) / "hy-w3") as system:
        agent = system.start_agent(G.hy_config("sleep8"))
        raw = _interleave({
            "hayata_run_wait": _hy_wait(agent),
            "langgraph_invoke": _lg_call(lg, "sleep8", {"input": "x"}),
            "langgraph_invoke_max_concurrency_8": _lg_call(lg, "sleep8", {"input": "x"},
                                                           max_concurrency=8),
        }, samples, warmup)
    lg.close()
    stats = _stats(raw)
    return {"wall_ms": stats, "floor_ms": G.SLEEP_S * 1000,
            "ratio_median": _ratio(stats["hayata_run_wait"]["median"],
                                   stats["langgraph_invoke"]["median"]),
            "ratio_median_vs_max_concurrency_8": _ratio(
                stats["hayata_run_wait"]["median"],
                stats["langgraph_invoke_max_concurrency_8"]["median"]),
            "loadavg": [load, _load()], "raw_ms": {k: ms(v) for k, v in raw.items()}}


def w4_cpu(tmp: str, samples: int, warmup: int) -> dict[str, Any]:
    load = _load()
    iterations = G.calibrate_cpu(0.3)
    lg = LG(tmp, "w4")
    with hy.AgentSystem(Path(tmp) / "hy-w4") as system:
        agent = system.start_agent(G.hy_config("cpu2"))
        raw = _interleave({
            "sequential_in_caller": lambda: (G.cpu_work(iterations), G.cpu_work(iterations)),
            "hayata_run_wait": _hy_wait(agent, {"iterations": iterations}),
            "langgraph_invoke": _lg_call(lg, "cpu2", {"input": "x", "iterations": iterations}),
        }, samples, warmup)
    lg.close()
    stats = _stats(raw)
    seq = stats["sequential_in_caller"]["median"]
    return {"wall_ms": stats, "iterations": iterations,
            "speedup_hayata": _ratio(seq, stats["hayata_run_wait"]["median"]),
            "speedup_langgraph": _ratio(seq, stats["langgraph_invoke"]["median"]),
            "ratio_median": _ratio(stats["hayata_run_wait"]["median"],
                                   stats["langgraph_invoke"]["median"]),
            "loadavg": [load, _load()], "raw_ms": {k: ms(v) for k, v in raw.items()}}


def w9_map(tmp: str, samples: int, warmup: int) -> dict[str, Any]:
    load = _load()
    lg = LG(tmp, "w9")
    with hy.AgentSystem(Path(tmp) / "hy-w9") as system:
        default = system.start_agent(G.hy_config("map100"))
        wide = system.start_agent(dataclasses.replace(G.hy_config("map100", "map100-8"),
                                                      map_concurrency=8))
        raw = _interleave({"hayata_run_wait": _hy_wait(default),
                           "hayata_run_wait_concurrency_8": _hy_wait(wide),
                           "langgraph_invoke": _lg_call(lg, "map100", {"input": "x"})},
                          samples, warmup)
    lg.close()
    stats = _stats(raw)
    lg_med = stats["langgraph_invoke"]["median"]
    return {"latency_ms": stats, "items": G.MAP_ITEMS,
            "map_concurrency_default": os.cpu_count(),
            "ratio_median": _ratio(stats["hayata_run_wait"]["median"], lg_med),
            "ratio_median_concurrency_8": _ratio(
                stats["hayata_run_wait_concurrency_8"]["median"], lg_med),
            "ratio_p95": _ratio(stats["hayata_run_wait"]["p95"],
                                stats["langgraph_invoke"]["p95"]),
            "loadavg": [load, _load()], "raw_ms": {k: ms(v) for k, v in raw.items()}}


def _hy_block(agents: Sequence[hy.AgentRef], seconds: float) -> int:
    """Rounds of run-all-then-wait-all until ``seconds`` elapsed; invocations done."""
    done = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        invs = [a.run("x") for a in agents]
        for a, inv in zip(agents, invs, strict=True):
            if not a.wait(inv, TIMEOUT).ok:
                raise RuntimeError("hayata invocation failed")
        done += len(agents)
    return done


def _lg_block(lg: LG, threads: int, seconds: float) -> int:
    graph = lg.graph("seq3")
    counts = [0] * threads
    deadline = time.perf_counter() + seconds

    def worker(i: int) -> None:
        while time.perf_counter() < deadline:
            graph.invoke({"input": "x"}, {"configurable": {"thread_id": uuid.uuid4().hex}},
                         durability="sync")
            counts[i] += 1

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return sum(counts)


def _lg_memory(graphs: int) -> dict[str, Any]:
    """PSS of a fresh process holding ``graphs`` compiled seq3 graphs, each run once."""
    code = ("import sys, json, psutil; from benchmarks.bench_langgraph import _lg_memory_child;"
            f"print(json.dumps(_lg_memory_child({graphs})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parent.parent, timeout=300)
    data: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return data


def _lg_memory_child(graphs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        lg = LG(tmp, "mem")
        compiled = [G.lg_graph("seq3", lg.saver) for _ in range(graphs)]
        for g in compiled:
            g.invoke({"input": "x"}, {"configurable": {"thread_id": uuid.uuid4().hex}},
                     durability="sync")
        pss = psutil.Process().memory_full_info().pss / MB
        lg.close()
    return {"graphs": graphs, "pss_mb": pss, "processes": 1}


def w5_w8_throughput_memory(tmp: str, agent_counts: Sequence[int], block_s: float,
                            blocks: int, memory_counts: Sequence[int]) -> dict[str, Any]:
    """Throughput (workload 5) and memory (workload 8) share one system: agents are
    added as the counts grow."""
    load = _load()
    lg = LG(tmp, "w5")
    tput: dict[str, Any] = {}
    memory: dict[str, Any] = {"hayata": {}, "langgraph": {}}
    with hy.AgentSystem(Path(tmp) / "hy-w5") as system:
        memory["hayata"]["0"] = {"pss_mb": pss_mb(system.processes()),
                                 "processes": len(system.processes())}
        agents: list[hy.AgentRef] = []
        start_times: list[float] = []
        targets = sorted(set(agent_counts) | set(memory_counts))
        for count in targets:
            while len(agents) < count:
                t0 = time.perf_counter()
                agent = system.start_agent(G.hy_config("seq3", f"seq3-{len(agents)}"))
                start_times.append(time.perf_counter() - t0)
                agent.wait(agent.run("warm"), TIMEOUT)
                agents.append(agent)
            if count in memory_counts:
                procs = system.processes()
                memory["hayata"][str(count)] = {"pss_mb": pss_mb(procs),
                                                "processes": len(procs)}
            if count in agent_counts:
                hy_rates: list[float] = []
                lg_rates: list[float] = []
                _hy_block(agents[:count], 0.2)  # warm-up
                _lg_block(lg, count, 0.2)
                for b in range(blocks):
                    steps: list[tuple[list[float], Callable[[], int]]] = [
                        (hy_rates, lambda c=count: _hy_block(agents[:c], block_s)),
                        (lg_rates, lambda c=count: _lg_block(lg, c, block_s))]
                    if b % 2:
                        steps.reverse()
                    for rates, fn in steps:
                        t0 = time.perf_counter()
                        n = fn()
                        rates.append(n / (time.perf_counter() - t0))
                hy_s, lg_s = summary(hy_rates), summary(lg_rates)
                tput[str(count)] = {"hayata_ips": hy_s, "langgraph_ips": lg_s,
                                    "ratio_median": _ratio(hy_s["median"], lg_s["median"]),
                                    "loadavg": _load()}
    lg.close()
    for count in memory_counts:
        memory["langgraph"][str(count)] = _lg_memory(count)
    base = memory["hayata"]["0"]["pss_mb"]
    for count in memory_counts:
        h = memory["hayata"][str(count)]
        h["per_agent_mb"] = (h["pss_mb"] - base) / count
        memory["langgraph"][str(count)]["ratio_pss"] = _ratio(
            h["pss_mb"], memory["langgraph"][str(count)]["pss_mb"])
    return {"throughput": tput, "memory_mb": memory, "block_s": block_s, "blocks": blocks,
            "start_agent_s": summary(start_times), "loadavg": [load, _load()],
            "method": "hayata: one AgentSystem, N seq3 agents; each round run() on all N "
                      "then wait() on all N from the one caller thread; LangGraph: N threads, "
                      "one compiled graph, one SqliteSaver (check_same_thread=False)"}


# -- main ------------------------------------------------------------------------------


def _row(label: str, h: dict[str, float], lg: dict[str, float] | None) -> str:
    left = f"{fmt(h['median'])} (p95 {fmt(h['p95'])})"
    if lg is None:
        return f"  {label:<42} hayata {left}"
    return (f"  {label:<42} hayata {left}  LangGraph {fmt(lg['median'])} "
            f"(p95 {fmt(lg['p95'])})  ratio {fmt(_ratio(h['median'], lg['median']))}")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="1,2,3,4,5,8,9", help="workloads, e.g. 1,3")
    args = parser.parse_args(argv)
    only = {w.strip() for w in args.only.split(",")}
    q = args.quick
    data: dict[str, Any] = {"benchmark": "langgraph", "environment": _lg_env(), "quick": q,
                            "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                            "loadavg_before": list(os.getloadavg())}
    with tempfile.TemporaryDirectory(prefix="hy-bench-") as tmp:
        steps: list[tuple[str, str, Callable[[], dict[str, Any]]]] = [
            ("1", "w1_sequential", lambda: w1_sequential(tmp, 15 if q else 100, 2)),
            ("2", "w2_fanout", lambda: w2_fanout(tmp, 6 if q else 50, 1)),
            ("3", "w3_sleep", lambda: w3_sleep(tmp, 6 if q else 30, 1)),
            ("4", "w4_cpu", lambda: w4_cpu(tmp, 3 if q else 9, 1)),
            ("5", "w5_w8", lambda: w5_w8_throughput_memory(
                tmp, (1, 4, 16), 1.0 if q else 3.0, 2 if q else 4,
                (1, 10) if q else (1, 10, 50))),
            ("9", "w9_map", lambda: w9_map(tmp, 6 if q else 30, 1)),
        ]
        for key, name, fn in steps:
            if key not in only and not (key == "5" and "8" in only):
                continue
            t0 = time.perf_counter()
            print(f"{name} ...", flush=True)
            data[name] = fn()
            data[name]["elapsed_s"] = time.perf_counter() - t0
            print(f"  {time.perf_counter() - t0:.1f} s, loadavg {_load()}", flush=True)
    data["loadavg_after"] = list(os.getloadavg())
    _print(data)
    path = write_json("langgraph", data)
    print(f"wrote {path}")
    return data


def _print(data: dict[str, Any]) -> None:
    if "w1_sequential" in data:
        s = data["w1_sequential"]["latency_ms"]
        print("W1 seq3 latency (ms)")
        print(_row("run+wait", s["hayata_run_wait"], s["langgraph_invoke"]))
        if "hayata_invoke" in s:
            print(_row("invoke", s["hayata_invoke"], s["langgraph_invoke"]))
        print(_row("CALLER+messages", s["hayata_caller_messages"], s["langgraph_invoke"]))
        for k in ("hayata_finish_only", "hayata_finish_only_invoke", "thespian_echo_ask",
                  "thespian_ring_14_hops"):
            if k in s:
                print(_row(k, s[k], None))
    if "w2_fanout" in data:
        s = data["w2_fanout"]["latency_ms"]
        print("W2 fanout8+join latency (ms)")
        print(_row("run+wait", s["hayata_run_wait"], s["langgraph_invoke"]))
        if "hayata_invoke" in s:
            print(_row("invoke", s["hayata_invoke"], s["langgraph_invoke"]))
    if "w3_sleep" in data:
        s = data["w3_sleep"]["wall_ms"]
        print("W3 sleep8 wall (ms)")
        print(_row("run+wait vs default", s["hayata_run_wait"], s["langgraph_invoke"]))
        print(_row("run+wait vs max_concurrency=8", s["hayata_run_wait"],
                   s["langgraph_invoke_max_concurrency_8"]))
    if "w4_cpu" in data:
        w = data["w4_cpu"]
        print("W4 cpu2 wall (ms)")
        print(_row("run+wait", w["wall_ms"]["hayata_run_wait"], w["wall_ms"]["langgraph_invoke"]))
        print(f"  speedup hayata {fmt(w['speedup_hayata'])}x  "
              f"LangGraph {fmt(w['speedup_langgraph'])}x")
    if "w9_map" in data:
        s = data["w9_map"]["latency_ms"]
        print(f"W9 map of {data['w9_map']['items']} trivial items (ms)")
        print(_row("run+wait, map_concurrency default", s["hayata_run_wait"],
                   s["langgraph_invoke"]))
        print(_row("run+wait, map_concurrency 8", s["hayata_run_wait_concurrency_8"],
                   s["langgraph_invoke"]))
    if "w5_w8" in data:
        w = data["w5_w8"]
        for n, t in w["throughput"].items():
            print(_row(f"W5 throughput inv/s, N={n}", t["hayata_ips"], t["langgraph_ips"]))
        for n, m in w["memory_mb"]["hayata"].items():
            lgm = w["memory_mb"]["langgraph"].get(n)
            print(f"  W8 PSS {n} agents: hayata {fmt(m['pss_mb'], 1)} MB "
                  f"({m['processes']} procs)"
                  + (f", LangGraph {fmt(lgm['pss_mb'], 1)} MB" if lgm else ""))




# -- profile (workload 1, hayata side) ------------------------------------------------------

PROFILE_CATEGORIES = {
    # inclusive: a sample counts for every category one of its frames matches
    "structlog (logging)": ("structlog",),
    "pickle / unpickle": ("pickle", "dumps (", "loads ("),
    "socket send/recv": ("send (", "recv (", "sendall", "recv_into", "_socket"),
    "thespian transport (all)": ("thespian/system/transport",),
    "thespian actor manager (all)": ("thespian/system/actorManager",
                                     "thespian/system/systemCommon"),
    "hayata_py runtime code": ("hayata_py/",),
    "supervisors library code": ("supervisors/",),
    "user policy / node functions": ("benchmarks/graphs",),
    "msgpack check_encodable": ("_codec",),
}


def profile(duration: float, rate: int) -> dict[str, Any]:
    """py-spy on every process of a seq3 agent while the caller runs invocations
    (run + wait) for ``duration`` s; CPU ms per invocation by process role and
    by category. The caller is profiled with pyinstrument."""
    import shutil

    from pyinstrument import Profiler

    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    out: dict[str, Any] = {"duration_s": duration, "rate_hz": rate, "loadavg": [_load()]}
    with tempfile.TemporaryDirectory(prefix="hy-prof-") as tmp, \
            hy.AgentSystem(Path(tmp) / "hy") as system:
        agent = system.start_agent(G.hy_config("seq3"))
        for _ in range(5):
            _hy_wait(agent)()
        roles = find_roles(system.tree())
        roles["admin"] = [system.admin_pid]
        spies = []
        for role, pids in roles.items():
            for pid in pids:
                path = Path(tmp) / f"{role}-{pid}.txt"
                spies.append((role, pid, path, subprocess.Popen(
                    [spy, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
                     "--nonblocking", "--duration", str(int(duration) + 1), "-o", str(path)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        time.sleep(1.0)  # let py-spy attach
        call = _hy_wait(agent)
        latencies: list[float] = []
        profiler = Profiler(interval=0.0005)
        profiler.start()
        t_end = time.perf_counter() + duration - 0.5
        while time.perf_counter() < t_end:
            latencies.append(_timed(call))
        profiler.stop()
        for *_, proc in spies:
            proc.wait(timeout=60)
        n = len(latencies)
        out["invocations"] = n
        out["latency_ms"] = summary(ms(latencies))
        per_role: dict[str, dict[str, Any]] = {}
        for role, _pid, path, _ in spies:
            row = per_role.setdefault(role, {"processes": 0, "samples": 0,
                                             "categories": dict.fromkeys(PROFILE_CATEGORIES, 0),
                                             "top_leaves": {}})
            row["processes"] += 1
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                stack, _, count_s = line.rpartition(" ")
                if not count_s.isdigit():
                    continue
                count = int(count_s)
                row["samples"] += count
                for cat, needles in PROFILE_CATEGORIES.items():
                    if any(nd in stack for nd in needles):
                        row["categories"][cat] += count
                leaf = stack.split(";")[-1]
                row["top_leaves"][leaf] = row["top_leaves"].get(leaf, 0) + count
        total_cpu_ms = 0.0
        for row in per_role.values():
            cpu_ms = row["samples"] / rate * 1000 / max(n, 1)
            total_cpu_ms += cpu_ms
            row["cpu_ms_per_invocation"] = cpu_ms
            row["category_ms_per_invocation"] = {
                k: v / rate * 1000 / max(n, 1) for k, v in row["categories"].items()}
            row["top_leaves"] = dict(sorted(row["top_leaves"].items(),
                                            key=lambda kv: -kv[1])[:8])
        out["per_role"] = per_role
        out["cpu_ms_per_invocation_all_actor_processes"] = total_cpu_ms
        session = profiler.last_session
        caller_cpu = session.cpu_time if session else float("nan")
        out["caller_cpu_ms_per_invocation"] = caller_cpu * 1000 / max(n, 1)
        out["caller_profile_text"] = profiler.output_text(unicode=False, color=False,
                                                          show_all=False)
    out["loadavg"].append(_load())
    return out


def profile_main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="py-spy profile of hayata_py workload 1")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=200)
    args = parser.parse_args(argv)
    data = profile(args.duration, args.rate)
    print(f"{data['invocations']} invocations, latency median "
          f"{fmt(data['latency_ms']['median'])} ms, loadavg {data['loadavg']}")
    print(f"caller CPU {fmt(data['caller_cpu_ms_per_invocation'])} ms/inv; actor processes "
          f"CPU {fmt(data['cpu_ms_per_invocation_all_actor_processes'])} ms/inv")
    for role, row in data["per_role"].items():
        cats = ", ".join(f"{k} {fmt(v)}" for k, v in row["category_ms_per_invocation"].items()
                         if v > 0)
        print(f"  {role:<12} x{row['processes']}: {fmt(row['cpu_ms_per_invocation'])} "
              f"ms/inv  [{cats}]")
    path = write_json("profile_w1", data)
    print(f"wrote {path}")
    return data


if __name__ == "__main__":
    if sys.argv[1:2] == ["profile"]:
        profile_main(sys.argv[2:])
    else:
        main()
