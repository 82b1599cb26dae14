"""Run every benchmark and collect one markdown table.

    python -m benchmarks [--quick] [--skip-existing]

Runs, each in its own process: the LangGraph comparison (workloads 1-5, 8;
:mod:`benchmarks.bench_langgraph`), the supervision benchmark (workload 6,
node restart; :mod:`benchmarks.bench_supervision`), the store benchmark
(workload 7, durable record vs bare SQLite commits; :mod:`benchmarks.bench_store`)
and the whole-system crash recovery (workload 6; :mod:`benchmarks.bench_recovery`).
Writes ``benchmarks/results/summary.md`` from their JSON files.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._util import RESULTS_DIR, fmt

ROOT = Path(__file__).resolve().parent.parent


def _run(module: str, args: Sequence[str]) -> float:
    t0 = time.perf_counter()
    print(f"== python -m {module} {' '.join(args)}", flush=True)
    subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, check=True)
    return time.perf_counter() - t0


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS_DIR / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _n(value: Any) -> float:
    return math.nan if value is None else float(value)


def _cell(s: dict[str, Any] | None, digits: int = 1) -> str:
    if not s:
        return "-"
    return f"{fmt(_n(s.get('median')), digits)} (p95 {fmt(_n(s.get('p95')), digits)})"


def _met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def summary_markdown(lg: dict[str, Any] | None, sup: dict[str, Any] | None,
                     store: dict[str, Any] | None, recovery: dict[str, Any] | None = None
                     ) -> str:
    rows: list[list[str]] = []
    targets: list[str] = []
    if lg:
        w1 = lg.get("w1_sequential")
        if w1:
            s = w1["latency_ms"]
            r = _n(w1["ratio_median"])
            rows.append(["1 seq3 latency / invocation (ms), run+wait", _cell(s["hayata_run_wait"]),
                         _cell(s["langgraph_invoke"]), fmt(r)])
            if "hayata_invoke" in s:
                rows.append(["1 seq3 latency / invocation (ms), invoke (one message)",
                             _cell(s["hayata_invoke"]), _cell(s["langgraph_invoke"]),
                             fmt(_n(w1["ratio_invoke_median"]))])
            rows.append(["1 seq3 latency / invocation (ms), CALLER+messages",
                         _cell(s["hayata_caller_messages"]), _cell(s["langgraph_invoke"]),
                         fmt(_n(w1["ratio_caller_median"]))])
            ps = w1["per_step_ms_median"]
            rows.append(["1 seq3 per step (ms, median/3; hayata marginal step "
                         f"{fmt(_n(ps['hayata_marginal_step']))})",
                         fmt(_n(ps["hayata_run_wait"])), fmt(_n(ps["langgraph_invoke"])),
                         fmt(r)])
            rows.append(["1 floor: hayata 0-step invocation / bare echo ask / "
                         "bare 14-hop ring (ms)",
                         f"{fmt(_n(s['hayata_finish_only']['median']))} / "
                         f"{fmt(_n(s['thespian_echo_ask']['median']))} / "
                         f"{fmt(_n(s['thespian_ring_14_hops']['median']))}", "", ""])
            targets.append(f"- Workload 1 latency <= 1.5x LangGraph: {fmt(r)}x -> "
                           f"{_met(r <= 1.5)}")
        w2 = lg.get("w2_fanout")
        if w2:
            s = w2["latency_ms"]
            rows.append(["2 fanout8+join latency (ms)", _cell(s["hayata_run_wait"]),
                         _cell(s["langgraph_invoke"]), fmt(_n(w2["ratio_median"]))])
            if "hayata_invoke" in s:
                rows.append(["2 fanout8+join latency (ms), invoke", _cell(s["hayata_invoke"]),
                             _cell(s["langgraph_invoke"]),
                             fmt(_n(w2["ratio_invoke_median"]))])
        w3 = lg.get("w3_sleep")
        if w3:
            s = w3["wall_ms"]
            rows.append(["3 sleep8 (50 ms) wall (ms); LangGraph default pool",
                         _cell(s["hayata_run_wait"]), _cell(s["langgraph_invoke"]),
                         fmt(_n(w3["ratio_median"]))])
            rows.append(["3 sleep8 wall (ms); LangGraph max_concurrency=8",
                         _cell(s["hayata_run_wait"]),
                         _cell(s["langgraph_invoke_max_concurrency_8"]),
                         fmt(_n(w3["ratio_median_vs_max_concurrency_8"]))])
            m = _n(s["hayata_run_wait"]["median"])
            targets.append(f"- Workload 3 wall <= 65 ms: {fmt(m, 1)} ms -> {_met(m <= 65)}")
        w4 = lg.get("w4_cpu")
        if w4:
            s = w4["wall_ms"]
            rows.append(["4 cpu2 (2 x ~0.3 s) wall (ms)", _cell(s["hayata_run_wait"]),
                         _cell(s["langgraph_invoke"]), fmt(_n(w4["ratio_median"]))])
            seq_ms = fmt(_n(s["sequential_in_caller"]["median"]), 0)
            rows.append([f"4 speedup vs sequential ({seq_ms} ms)",
                         f"{fmt(_n(w4['speedup_hayata']))}x",
                         f"{fmt(_n(w4['speedup_langgraph']))}x", ""])
            sp = _n(w4["speedup_hayata"])
            targets.append(f"- Workload 4 speedup >= 1.7x: {fmt(sp)}x -> {_met(sp >= 1.7)}")
        w5 = lg.get("w5_w8")
        if w5:
            for n, t in w5["throughput"].items():
                rows.append([f"5 throughput seq3 (inv/s), N={n}", _cell(t["hayata_ips"]),
                             _cell(t["langgraph_ips"]), fmt(_n(t["ratio_median"]))])
            mem = w5["memory_mb"]
            rows.append(["8 PSS, system with 0 agents (MB)",
                         fmt(_n(mem["hayata"]["0"]["pss_mb"]), 1), "", ""])
            for n, m in mem["hayata"].items():
                if n == "0":
                    continue
                lgm = mem["langgraph"].get(n, {})
                rows.append([f"8 PSS, {n} idle seq3 agent(s) (MB; {m['processes']} processes; "
                             f"{fmt(_n(m['per_agent_mb']), 1)} MB/agent)",
                             fmt(_n(m["pss_mb"]), 1), fmt(_n(lgm.get("pss_mb")), 1),
                             fmt(_n(lgm.get("ratio_pss")))])
    if sup:
        s = sup["latency_ms"]
        sup_s = next((v for k, v in s.items() if "[headline]" in k), None)
        bare = next((v for k, v in s.items() if "[floor]" in k), None)
        rows.append(["6 node restart: SIGKILL -> replacement answers (ms); vs bare Thespian",
                     _cell(sup_s), _cell(bare), ""])
        if sup_s:
            m = _n(sup_s["median"])
            targets.append(f"- Workload 6 restart median <= 20 ms: {fmt(m)} ms -> {_met(m <= 20)}")
    if store:
        s = store["sqlite"]
        rows.append(["7 durable task record vs two bare SQLite commits (ms)",
                     f"{fmt(s['store_task_record']['median_ms'], 2)} "
                     f"(p95 {fmt(s['store_task_record']['p95_ms'], 2)})",
                     f"{fmt(s['sqlite_two_commits_floor']['median_ms'], 2)} "
                     f"(p95 {fmt(s['sqlite_two_commits_floor']['p95_ms'], 2)})",
                     fmt(s["ratio_median"])])
        lc = s.get("load_classify")
        if lc:
            rows.append(["6 (part) load + classify an invocation of 100 tasks (ms)",
                         fmt(lc["median_ms"], 2), "", ""])
        r = _n(s["ratio_median"])
        if recovery:
            rl = recovery["latency_ms"]
            rows.append([f"6 whole-system SIGKILL -> restart -> recovered result, "
                         f"{recovery['tasks']} completed tasks (ms; restart system / start "
                         f"agent / recover+finish {fmt(_n(rl['restart_system']['median']), 0)}"
                         f" / {fmt(_n(rl['start_agent']['median']), 0)} / "
                         f"{fmt(_n(rl['recover_and_finish']['median']), 0)})",
                         _cell(rl["kill_to_result"]), "", ""])
        targets.append(f"- Workload 7 record <= 1.5x bare commits: {fmt(r)}x -> {_met(r <= 1.5)}")
    lines = ["# Benchmarks: hayata_py vs LangGraph (SqliteSaver, durability=\"sync\")", ""]
    if lg:
        env = lg["environment"]
        lines += [f"Date {lg['date']}; {env['platform']}; {env['cpus']} CPUs; Python "
                  f"{env['python']}; langgraph {env.get('langgraph')}, "
                  f"langgraph-checkpoint-sqlite {env.get('langgraph-checkpoint-sqlite')}; "
                  f"SQLite {env.get('sqlite')}; quick={lg['quick']}.",
                  f"Load average (1 min) before/after: {fmt(lg['loadavg_before'][0])} / "
                  f"{fmt(lg['loadavg_after'][0])} (other sessions share the 2 cores: "
                  "absolute times drift, read the ratios).", ""]
    lines += ["| workload / metric | hayata_py median (p95) | LangGraph / floor median (p95) "
              "| hayata / other |", "|---|---|---|---|"]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    lines += ["", "## Targets", "", *targets, "",
              "Method: sides interleaved sample by sample (A B, B A, ...), warm-up discarded; "
              "hayata: one AgentSystem per workload, start excluded, `agent.run()` + "
              "`agent.wait()`; throughput: N agents, run() on all then wait() on all, from "
              "one caller thread; LangGraph: N threads sharing one compiled graph and one "
              "SqliteSaver on a file. Memory: PSS (psutil memory_full_info) summed over "
              "`system.processes()`; LangGraph: PSS of one fresh process holding N compiled "
              "graphs. Reproduce: `make bench` or `python -m benchmarks [--quick]`.", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="under 2 minutes")
    parser.add_argument("--summary-only", action="store_true",
                        help="rebuild summary.md from the JSON files")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    if not args.summary_only:
        q = ["--quick"] if args.quick else []
        _run("benchmarks.bench_langgraph", q)
        sup_quick = ["--quick", "--rounds", "1", "--children", "5"]
        _run("benchmarks.bench_supervision", sup_quick if args.quick else [])
        _run("benchmarks.bench_store", ["--rounds", "60", "--repeats", "10"] if args.quick
             else [])
        _run("benchmarks.bench_recovery", ["--samples", "3" if args.quick else "10"])
    text = summary_markdown(_load("langgraph"), _load("supervision"), _load("store"),
                            _load("recovery"))
    path = RESULTS_DIR / "summary.md"
    path.write_text(text)
    print(text)
    print(f"wrote {path} in {time.perf_counter() - t0:.0f} s (loadavg {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
