"""Supervision costs: restart latency after SIGKILL, and memory per supervised child.

Run from the repository root::

    python -m benchmarks.bench_supervision            # 50 restart samples
    python -m benchmarks.bench_supervision --quick    # 15 restart samples

How restart latency is measured (nothing polls during the timed window):

- **supervised**: a ``one_for_one`` supervisor (a :class:`TimedSupervisor`,
  which only stamps each ``ChildActorExited``) runs one permanent
  :class:`AnnouncingWorker`. Each incarnation's ``on_start`` sends ``Hello``
  to a plain :class:`Listener` actor, which at once sends it ``Ping``. The
  sample is SIGKILL (``os.kill`` from this process) -> the new incarnation's
  ``Pong`` reaching the listener. The caller only asks the listener for the
  stamps once they exist, so its own ``ask`` round trips are not timed.
- **bare floor**: a plain Thespian :class:`BareParent` that, on
  ``ChildActorExited``, calls ``createActor`` and pings the new child at once:
  SIGKILL -> ``Pong`` at the parent. The supervised path has one hop more
  (Hello to the listener before the Ping) plus the start handshake
  (``_Init``/``_Started``) and the supervisor's bookkeeping.
- also: ``createActor`` -> answer of a throw-away bare actor, inside an actor.

Every stamp is ``time.monotonic()`` (system-wide ``CLOCK_MONOTONIC``) taken in
the process where the event happens. The samples are taken in rounds that
alternate supervised and bare blocks (ABBA order), so that a machine whose
load changes during the run biases neither side; every block runs in a fresh
:class:`supervisors.System`, which leaves no process behind.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import psutil

from benchmarks._util import environment, fmt, ms, summary, table, write_json
from benchmarks.actors import (
    AnnouncingWorker,
    Arm,
    AwaitReplacement,
    BareParent,
    GetExitStamps,
    IdleWorker,
    Listener,
    Replacement,
    SpawnMany,
    SpawnProbe,
    StartBare,
    TimedSupervisor,
)
from supervisors import (
    ChildInfo,
    ChildSpec,
    Start,
    Strategy,
    SupervisorFlags,
    SupervisorRef,
    System,
)

WARMUP = 2  # samples discarded at the start of each block (each fresh System)
PACE_S = 0.02  # quiet gap between two samples, so that one restart never overlaps the next
ANSWER_TIMEOUT_S = 10.0
MB = 1024 * 1024

Stamps = dict[str, list[float]]


def _wait_running(sup: SupervisorRef, child_id: str, pid: int, timeout: float = 10.0) -> ChildInfo:
    """Between samples (outside the timed window): wait until the supervisor itself
    lists ``child_id`` as running under ``pid``."""
    deadline = time.monotonic() + timeout
    while True:
        info = sup.child(child_id)
        if info.status == "running" and info.pid == pid:
            return info
        if time.monotonic() > deadline:
            raise RuntimeError(f"{child_id} not running as pid {pid} within {timeout}s: {info}")
        time.sleep(0.001)


def _ask(system: System, address: Any, message: Any, expect: type | tuple[type, ...]) -> Any:
    reply = system.ask(address, message, ANSWER_TIMEOUT_S)
    if not isinstance(reply, expect):
        raise RuntimeError(f"{type(message).__name__}: unexpected reply {reply!r}")
    return reply


def _kill_and_wait(system: System, observer: Any, pid: int) -> tuple[float, Replacement]:
    """SIGKILL ``pid`` and return (kill time, the replacement's stamps from ``observer``)."""
    _ask(system, observer, Arm(), bool)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    rep: Replacement = _ask(system, observer, AwaitReplacement(), Replacement)
    if rep.pid == pid:
        raise RuntimeError(f"the killed pid {pid} answered")
    return t0, rep


def _since(t0s: Sequence[float], stamps: Sequence[float]) -> list[float]:
    return [t - t0 for t0, t in zip(t0s, stamps, strict=True)]


def bench_supervised_restart(samples: int) -> Stamps:
    with System() as system:
        listener = system.thespian.createActor(Listener)
        sup = system.start_supervisor(
            "bench",
            SupervisorFlags(Strategy.ONE_FOR_ONE, intensity=1000, period=1.0),
            [ChildSpec("w", Start(AnnouncingWorker, (listener,)))],
            actor=TimedSupervisor,
        )
        pid = sup.child("w").pid
        assert pid is not None
        t0s: list[float] = []
        reps: list[Replacement] = []
        for _ in range(WARMUP + samples):
            _wait_running(sup, "w", pid)
            time.sleep(PACE_S)
            t0, rep = _kill_and_wait(system, listener, pid)
            t0s.append(t0)
            reps.append(rep)
            pid = rep.pid
        _wait_running(sup, "w", pid)
        exits = _ask(system, sup.address, GetExitStamps(), list)
        if len(exits) != len(t0s):
            raise RuntimeError(f"{len(exits)} ChildActorExited stamps for {len(t0s)} kills")
    t0s, reps, exits = t0s[WARMUP:], reps[WARMUP:], exits[WARMUP:]
    return {
        "kill_to_exit_notice": _since(t0s, exits),
        "kill_to_new_actor_init": _since(t0s, [r.t_init for r in reps]),
        "kill_to_on_start": _since(t0s, [r.t_start for r in reps]),
        "kill_to_ping_handled": _since(t0s, [r.t_handled for r in reps]),
        "kill_to_pong": _since(t0s, [r.t_pong for r in reps]),
    }


def bench_bare_restart(samples: int) -> Stamps:
    with System() as system:
        parent = system.thespian.createActor(BareParent)
        pid: int = _ask(system, parent, StartBare(), int)
        t0s: list[float] = []
        reps: list[Replacement] = []
        for _ in range(WARMUP + samples):
            time.sleep(PACE_S)
            t0, rep = _kill_and_wait(system, parent, pid)
            t0s.append(t0)
            reps.append(rep)
            pid = rep.pid
    t0s, reps = t0s[WARMUP:], reps[WARMUP:]
    return {
        "kill_to_exit_notice": _since(t0s, [r.t_exit for r in reps]),
        "kill_to_new_actor_init": _since(t0s, [r.t_init for r in reps]),
        "kill_to_ping_handled": _since(t0s, [r.t_handled for r in reps]),
        "kill_to_pong": _since(t0s, [r.t_pong for r in reps]),
    }


def bench_bare_create(samples: int) -> Stamps:
    with System() as system:
        parent = system.thespian.createActor(BareParent)
        pongs: list[float] = []
        handled: list[float] = []
        for i in range(WARMUP + samples):
            time.sleep(PACE_S)
            pong, ping_handled = _ask(system, parent, SpawnProbe(), tuple)
            if i >= WARMUP:
                pongs.append(pong)
                handled.append(ping_handled)
    return {"create_to_ping_handled": handled, "create_to_pong": pongs}


def _memory(pids: Sequence[int]) -> dict[str, Any]:
    rows = [psutil.Process(pid).memory_full_info() for pid in pids]

    def mean_mb(field: str) -> float:
        return float(sum(getattr(r, field) for r in rows)) / len(rows) / MB

    return {"n": len(rows), "pss_mb": mean_mb("pss"), "rss_mb": mean_mb("rss"),
            "uss_mb": mean_mb("uss")}


def _system_pss_mb(system: System) -> float:
    total = 0
    for proc in system.processes():
        try:
            total += proc.memory_full_info().pss
        except psutil.NoSuchProcess:
            continue
    return total / MB


def bench_supervised_memory(children: int) -> dict[str, Any]:
    with System() as system:
        sup = system.start_supervisor(
            "mem", SupervisorFlags(Strategy.ONE_FOR_ONE),
            [ChildSpec(f"idle-{i}", Start(IdleWorker)) for i in range(children)],
        )
        pids = [info.pid for info in sup.which_children() if info.pid is not None]
        if len(pids) != children:
            raise RuntimeError(f"{len(pids)} of {children} children running")
        return {"child": _memory(pids), "parent": _memory([sup.pid]),
                "system_pss_mb": _system_pss_mb(system),
                "system_processes": len(system.processes())}


def bench_bare_memory(children: int) -> dict[str, Any]:
    with System() as system:
        parent = system.thespian.createActor(BareParent)
        pids: list[int] = _ask(system, parent, SpawnMany(children), list)
        parent_pid = psutil.Process(pids[0]).ppid()
        return {"child": _memory(pids), "parent": _memory([parent_pid]),
                "system_pss_mb": _system_pss_mb(system),
                "system_processes": len(system.processes())}


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan


def _timed(label: str, fn: Callable[[], Any]) -> Any:
    start = time.monotonic()
    print(f"  {label} ...", end="", flush=True)
    result = fn()
    print(f" {time.monotonic() - start:.1f} s", flush=True)
    return result


def _extend(total: Stamps, block: Stamps) -> None:
    for key, values in block.items():
        total.setdefault(key, []).extend(values)


def _rounds(samples: int, rounds: int) -> tuple[Stamps, Stamps, Stamps]:
    """``samples`` of each latency, in ``rounds`` alternating blocks."""
    sup: Stamps = {}
    bare: Stamps = {}
    create: Stamps = {}
    per_round = [samples // rounds + (1 if r < samples % rounds else 0) for r in range(rounds)]
    for r, n in enumerate(per_round):
        steps: list[tuple[Stamps, Callable[[int], Stamps]]] = [
            (sup, bench_supervised_restart), (bare, bench_bare_restart),
            (create, bench_bare_create)]
        if r % 2:
            steps.reverse()
        for total, fn in steps:
            _extend(total, fn(n))
        print(f"  round {r + 1}/{rounds}: {n} samples of each", flush=True)
    return sup, bare, create


def _median_of_blocks(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over blocks of each figure (a child's memory depends on whether a
    full garbage collection has run in it yet, so one block can be an outlier)."""

    def med(*path: str) -> float:
        values = []
        for block in blocks:
            value: Any = block
            for key in path:
                value = value[key]
            values.append(float(value))
        return float(statistics.median(values))

    merged: dict[str, Any] = {
        part: {key: med(part, key) for key in ("pss_mb", "rss_mb", "uss_mb")}
        for part in ("child", "parent")
    }
    merged["child"]["n"] = blocks[0]["child"]["n"]
    merged["parent"]["n"] = 1
    merged["system_pss_mb"] = med("system_pss_mb")
    merged["system_processes"] = blocks[0]["system_processes"]
    per_block = [b["child"]["pss_mb"] for b in blocks]
    merged["child_pss_mb_min_max"] = [min(per_block), max(per_block)]
    merged["blocks"] = blocks
    return merged


def _memory_rounds(children: int, rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    sup: list[dict[str, Any]] = []
    bare: list[dict[str, Any]] = []
    for r in range(rounds):
        steps: list[tuple[list[dict[str, Any]], Callable[[int], dict[str, Any]]]] = [
            (sup, bench_supervised_memory), (bare, bench_bare_memory)]
        if r % 2:
            steps.reverse()
        for total, fn in steps:
            total.append(fn(children))
    print(f"  memory: {rounds} blocks of {children} idle children each", flush=True)
    return _median_of_blocks(sup), _median_of_blocks(bare)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="15 restart samples instead of 50")
    parser.add_argument("--samples", type=int, help="restart samples (overrides --quick)")
    parser.add_argument("--rounds", type=int, help="alternating blocks (default 5, quick 3)")
    parser.add_argument("--children", type=int, default=20, help="idle children for memory")
    args = parser.parse_args(argv)
    samples = args.samples or (15 if args.quick else 50)
    rounds = max(1, min(samples, args.rounds or (3 if args.quick else 5)))

    load_before = os.getloadavg()
    print(f"supervision benchmark: {samples} samples of each latency in {rounds} alternating "
          f"rounds (+{WARMUP} warm-up per block), {args.children} idle children; "
          f"load average {load_before[0]:.2f}")
    started = time.monotonic()
    sup_restart, bare_restart, bare_create = _rounds(samples, rounds)
    sup_mem, bare_mem = _memory_rounds(args.children, rounds)
    load_after = os.getloadavg()
    print(f"  done in {time.monotonic() - started:.1f} s; load average {load_after[0]:.2f}")

    latency_rows: list[tuple[str, str, list[float]]] = [
        ("supervised", "SIGKILL -> ChildActorExited at supervisor",
         sup_restart["kill_to_exit_notice"]),
        ("supervised", "SIGKILL -> new actor constructed", sup_restart["kill_to_new_actor_init"]),
        ("supervised", "SIGKILL -> new child's on_start", sup_restart["kill_to_on_start"]),
        ("supervised", "SIGKILL -> new child handled Ping", sup_restart["kill_to_ping_handled"]),
        ("supervised", "SIGKILL -> Pong at listener  [headline]", sup_restart["kill_to_pong"]),
        ("bare", "SIGKILL -> ChildActorExited at parent", bare_restart["kill_to_exit_notice"]),
        ("bare", "SIGKILL -> new actor constructed", bare_restart["kill_to_new_actor_init"]),
        ("bare", "SIGKILL -> new child handled Ping", bare_restart["kill_to_ping_handled"]),
        ("bare", "SIGKILL -> Pong at parent  [floor]", bare_restart["kill_to_pong"]),
        ("bare", "createActor -> child handled Ping", bare_create["create_to_ping_handled"]),
        ("bare", "createActor -> Pong at parent", bare_create["create_to_pong"]),
    ]
    summaries = {f"{kind}: {what}": summary(ms(values)) for kind, what, values in latency_rows}
    rows = [[name, str(s["n"]), fmt(s["median"]), fmt(s["p95"]), fmt(s["mean"]),
             fmt(s["min"]), fmt(s["max"])] for name, s in summaries.items()]
    print("\nRestart latency (ms)")
    print(table(["", "n", "median", "p95", "mean", "min", "max"], rows))

    def pair(key: str) -> tuple[dict[str, float], dict[str, float]]:
        return summary(ms(sup_restart[key])), summary(ms(bare_restart[key]))

    ratio_rows = []
    ratios: dict[str, dict[str, float]] = {}
    for label, key in [("SIGKILL -> exit notice", "kill_to_exit_notice"),
                       ("SIGKILL -> replacement handled Ping", "kill_to_ping_handled"),
                       ("SIGKILL -> Pong (end to end)", "kill_to_pong")]:
        s, b = pair(key)
        ratios[key] = {"median": _ratio(s["median"], b["median"]),
                       "p95": _ratio(s["p95"], b["p95"]),
                       "median_extra_ms": s["median"] - b["median"]}
        ratio_rows.append([label, fmt(ratios[key]["median"]), fmt(ratios[key]["p95"]),
                           fmt(ratios[key]["median_extra_ms"])])
    print("\nSupervised / bare")
    print(table(["", "median x", "p95 x", "median +ms"], ratio_rows))

    stage_defs = [
        ("SIGKILL -> exit notice", None, "kill_to_exit_notice"),
        ("exit notice -> new actor constructed", "kill_to_exit_notice",
         "kill_to_new_actor_init"),
        ("constructed -> on_start (supervised)", "kill_to_new_actor_init", "kill_to_on_start"),
        ("on_start -> handled Ping (supervised)", "kill_to_on_start", "kill_to_ping_handled"),
        ("constructed -> handled Ping", "kill_to_new_actor_init", "kill_to_ping_handled"),
        ("handled Ping -> Pong arrived", "kill_to_ping_handled", "kill_to_pong"),
    ]
    stages: dict[str, dict[str, float]] = {}
    stage_rows = []
    for label, start_key, end_key in stage_defs:
        medians = []
        for data in (sup_restart, bare_restart):
            if end_key not in data or (start_key is not None and start_key not in data):
                medians.append(math.nan)
                continue
            starts = data[start_key] if start_key else [0.0] * len(data[end_key])
            medians.append(summary(ms(_since(starts, data[end_key])))["median"])
        stages[label] = {"supervised": medians[0], "bare": medians[1]}
        stage_rows.append([label, fmt(medians[0]), fmt(medians[1])])
    print("\nWhere the time goes (median of per-sample stage durations, ms)")
    print(table(["", "supervised", "bare"], stage_rows))

    mem_rows = []
    for label, mem in [("supervised", sup_mem), ("bare", bare_mem)]:
        c, p = mem["child"], mem["parent"]
        mem_rows.append([label, str(c["n"]), fmt(c["pss_mb"]), fmt(c["rss_mb"]), fmt(c["uss_mb"]),
                         fmt(p["pss_mb"]), fmt(mem["system_pss_mb"], 1),
                         str(mem["system_processes"])])
    pss_ratio = _ratio(sup_mem["child"]["pss_mb"], bare_mem["child"]["pss_mb"])
    rss_ratio = _ratio(sup_mem["child"]["rss_mb"], bare_mem["child"]["rss_mb"])
    mem_rows.append(["supervised / bare", "", fmt(pss_ratio), fmt(rss_ratio),
                     fmt(_ratio(sup_mem["child"]["uss_mb"], bare_mem["child"]["uss_mb"])),
                     fmt(_ratio(sup_mem["parent"]["pss_mb"], bare_mem["parent"]["pss_mb"])),
                     fmt(_ratio(sup_mem["system_pss_mb"], bare_mem["system_pss_mb"])), ""])
    print(f"\nMemory of idle children (MB; mean per child in a block of {args.children}, "
          f"median over {rounds} blocks)")
    print(table(["", "n", "PSS/child", "RSS/child", "USS/child", "parent PSS",
                 "system PSS", "procs"], mem_rows))
    for label, mem in [("supervised", sup_mem), ("bare", bare_mem)]:
        lo, hi = mem["child_pss_mb_min_max"]
        print(f"  {label}: PSS/child ranged {lo:.2f}-{hi:.2f} MB over the blocks")

    path = write_json("supervision", {
        "benchmark": "supervision",
        "environment": environment(),
        "config": {"samples": samples, "rounds": rounds, "warmup_per_block": WARMUP,
                   "pace_s": PACE_S, "loadavg_1min_before": load_before[0],
                   "loadavg_1min_after": load_after[0],
                   "children": args.children, "quick": bool(args.quick),
                   "method": "replacement announces itself (on_start -> Hello to a listener "
                             "actor, which pings it); stamps are time.monotonic() taken in "
                             "the actor processes; no polling in the timed window"},
        "latency_ms": summaries,
        "ratios_supervised_over_bare": ratios,
        "stage_medians_ms": stages,
        "memory_mb": {"supervised": sup_mem, "bare": bare_mem,
                      "pss_ratio": pss_ratio, "rss_ratio": rss_ratio},
        "raw_ms": {
            "supervised": {k: ms(v) for k, v in sup_restart.items()},
            "bare_restart": {k: ms(v) for k, v in bare_restart.items()},
            "bare_create": {k: ms(v) for k, v in bare_create.items()},
        },
    })
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
