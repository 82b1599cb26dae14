"""Agents as services (issue 21, section 5): C conversations arriving at once.

Run from the repository root (needs the ``bench`` extra; ``make bench-service``)::

    python -m benchmarks.bench_service                      # the full rows
    python -m benchmarks.bench_service --quick              # C = 20, 100; 0 ms at 100
    python -m benchmarks.bench_service --conversations 100,1000 --delay 0.2 \\
        [--cpu-conversations 1000] [--sides hayata,langgraph] \\
        [--edge-concurrency 500] [--node-concurrency plan=2,llm=2,answer=2] \\
        [--client-threads 4] [--lease-seconds S] [--timeout S] [--out service]

The graph (``service3`` in :mod:`benchmarks.graphs`, the same on both sides):
``plan`` (sync, trivial) -> ``llm`` (``async def``, awaits
``asyncio.sleep(delay)``: an LLM call's wait) -> ``answer`` (sync, trivial).
Rows: C = 100, 1,000 and 10,000 with a 200 ms ``llm`` (``--conversations``,
``--delay``), and C = 1,000 with a 0 ms ``llm`` (CPU-bound:
``--cpu-conversations``; 0 leaves it out).

- hayata_py: one :class:`hy.AgentSystem` in a temp dir (SQLite store), one
  agent with ``max_invocations=C``, ``edge_concurrency={"llm": k}`` (default
  ``min(C, 500)``) and ``node_concurrency`` (default: the core count for
  every node: with k = 500, 2 llm edges run 1,000 calls at once, and more
  edges of the trivial sync nodes than cores only add writers contending
  for the SQLite lock; ``runtime`` keeps the runtime's default, at least 4).
  After a few warm-up runs,
  ``--client-threads`` threads (one AgentRef, which is thread-safe) each
  submit their share of the C runs at once, ``agent.run(input,
  thread=f"c{i}", subscriber=None)`` (without ``thread=`` on a runtime that
  does not take it), and hand each accepted run to a waiting thread of their
  own, which ``wait()``s for the runs in the order they were accepted.
  Latency: submit -> ``wait()`` returned (a run that ends before the one
  waited for ahead of it counts from when that one returned); the JSON also
  has submit -> the invocation's terminal record in the store (its
  ``updated_at``), exact, submit -> its record created, and how long the
  ``run()`` calls took.
- LangGraph: one compiled ``StateGraph``, ``AsyncSqliteSaver`` on a temp
  file, C ``ainvoke(..., durability="sync")`` with distinct ``thread_id`` at
  once through ``asyncio.gather``, after the same warm-up. Latency: the call
  of ``ainvoke`` -> its return.

Wall time: first submit -> last result; conversations/s = ok results / wall.
Memory: a thread samples PSS (psutil ``memory_full_info().pss``) every
``--sample-period`` s during the run and keeps the peak of the total: for
hayata every process of the system (``system.processes()``) plus the
caller's, for LangGraph its one process; the process count is the peak too.
Each side of each row runs in a fresh subprocess of its own, so memory
figures never mix, and sides alternate which goes first row by row. A side
that fails (an exception, its results not ok, or no end within
``--timeout``) is reported in its row; the run goes on.

Results: ``benchmarks/results/service.json`` (``service_quick.json`` for
``--quick``) and a markdown table with the hayata/LangGraph ratios and the
issue's targets. The machine is shared: the load average
(``os.getloadavg()``) before and after each side is in the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import math
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil

from benchmarks._util import environment, fmt, percentile, write_json

MB = 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent
FULL_CONVERSATIONS = (100, 1000, 10000)
QUICK_CONVERSATIONS = (20, 100)
DELAY_S = 0.2
WARMUP = 5
"""Conversations each side runs (one at a time) before the timed burst."""
GRACE_S = 120.0
"""How much longer than ``--timeout`` the parent waits for a side's process."""
PSS_LIMIT_MB = 2048.0
"""Target: C = 10,000 completes with at most this total PSS (hayata)."""


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _input(i: int, delay: float) -> dict[str, Any]:
    return {"i": i, "delay": delay}


def _expected(i: int) -> str:
    return f"answer {i}"


def _lat_summary(seconds: Sequence[float]) -> dict[str, Any]:
    data = [s * 1000.0 for s in seconds if not math.isnan(s)]
    if not data:
        return {"n": 0, "p50": math.nan, "p99": math.nan, "mean": math.nan, "max": math.nan}
    return {"n": len(data), "p50": percentile(data, 50), "p99": percentile(data, 99),
            "mean": sum(data) / len(data), "max": max(data)}


# -- memory sampling ---------------------------------------------------------------------


def _role(proc: psutil.Process) -> str:
    """The process title Thespian sets (``AgentActor``, ``EdgeActor``, ...)."""
    try:
        title = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "gone"
    return title[0].split()[0] if title and title[0] else proc.name()


class Sampler(threading.Thread):
    """Every ``period`` s: total PSS and count of ``processes()``; keeps the peaks.

    ``caller``: a process whose PSS is also kept apart (it is in the total if
    ``processes()`` returns it).
    """

    def __init__(self, processes: Callable[[], list[psutil.Process]], period: float,
                 caller: psutil.Process | None = None, roles: bool = False) -> None:
        super().__init__(name="pss-sampler", daemon=True)
        self.processes = processes
        self.period = period
        self.caller = caller
        self.stopped = threading.Event()
        self.peak_pss_mb = 0.0
        self.peak_processes = 0
        self.peak_caller_mb = 0.0
        self.series: list[tuple[float, float, int]] = []
        self.t0 = time.perf_counter()
        self.errors = 0
        self.roles = roles
        self.peak_roles: dict[str, int] = {}

    def sample(self) -> tuple[float, int]:
        total = 0
        count = 0
        caller_pid = self.caller.pid if self.caller else None
        live: list[psutil.Process] = []
        for proc in self.processes():
            try:
                pss = proc.memory_full_info().pss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            total += pss
            count += 1
            live.append(proc)
            if proc.pid == caller_pid:
                self.peak_caller_mb = max(self.peak_caller_mb, pss / MB)
        if self.roles and count > self.peak_processes:
            self.peak_roles = dict(sorted(Counter(
                "caller" if p.pid == caller_pid else _role(p) for p in live).items()))
        mb = total / MB
        self.peak_pss_mb = max(self.peak_pss_mb, mb)
        self.peak_processes = max(self.peak_processes, count)
        self.series.append((round(time.perf_counter() - self.t0, 2), round(mb, 1), count))
        return mb, count

    def run(self) -> None:
        while not self.stopped.wait(self.period):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a failed sample must not end the run
                self.errors += 1

    def stop(self) -> dict[str, Any]:
        self.stopped.set()
        self.join(timeout=30)
        with contextlib.suppress(Exception):
            self.sample()  # the end of the run counts too
        return {"peak_pss_mb": self.peak_pss_mb, "peak_processes": self.peak_processes,
                "peak_roles": self.peak_roles, "samples": len(self.series),
                "sample_errors": self.errors, "series": self.series}


def _cpu(processes: Sequence[psutil.Process], caller: psutil.Process
         ) -> dict[int, tuple[str, float]]:
    """pid -> (role, user + system CPU seconds so far)."""
    out: dict[int, tuple[str, float]] = {}
    for proc in processes:
        try:
            t = proc.cpu_times()
            out[proc.pid] = ("caller" if proc.pid == caller.pid else _role(proc),
                             t.user + t.system)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def _cpu_used(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
              conversations: int, wall: float) -> dict[str, Any]:
    """CPU seconds each role used between two :func:`_cpu` snapshots (a process
    started in between counts from 0), in all, per conversation and in cores."""
    roles: dict[str, float] = {}
    for pid, (role, t) in after.items():
        roles[role] = roles.get(role, 0.0) + t - before.get(pid, (role, 0.0))[1]
    total = sum(roles.values())
    return {"cpu_s": total, "cpu_ms_per_conversation": total * 1000 / max(1, conversations),
            "cores_used": total / wall if wall > 0 else math.nan,
            "cpu_s_by_role": dict(sorted(roles.items(), key=lambda kv: -kv[1]))}


# -- the LangGraph side --------------------------------------------------------------------


async def _lg_burst(conversations: int, delay: float, tmp: str, timeout: float,
                    period: float) -> dict[str, Any]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from benchmarks import graphs as G

    def cfg(thread: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread}}

    async with AsyncSqliteSaver.from_conn_string(str(Path(tmp) / "lg.db")) as saver:
        graph = G.lg_service_graph(saver)
        for w in range(WARMUP):
            await graph.ainvoke({"input": _input(-1 - w, delay)}, cfg(f"warm{w}"),
                                durability="sync")
        me = psutil.Process()
        sampler = Sampler(lambda: [me], period, caller=me)
        idle_mb, _ = sampler.sample()
        latency = [math.nan] * conversations
        errors: Counter[str] = Counter()

        async def one(i: int) -> None:
            t = time.perf_counter()
            try:
                out = await graph.ainvoke({"input": _input(i, delay)}, cfg(f"c{i}"),
                                          durability="sync")
            except Exception as exc:  # noqa: BLE001 - counted in the row
                errors[f"exception:{type(exc).__name__}"] += 1
                return
            if out.get("results", {}).get("answer") == _expected(i):
                latency[i] = time.perf_counter() - t
            else:
                errors["wrong_result"] += 1

        load_before = _load()
        cpu_before = _cpu([me], me)
        sampler.start()
        t0 = time.perf_counter()
        timed_out = False
        tasks = [asyncio.ensure_future(one(i)) for i in range(conversations)]
        try:
            await asyncio.wait_for(asyncio.gather(*tasks), timeout)
        except TimeoutError:
            timed_out = True
        wall = time.perf_counter() - t0
        cpu = _cpu_used(cpu_before, _cpu([me], me), conversations, wall)
        memory = sampler.stop()
        # the durable checkpoint is there: the last conversation's final state
        state = await graph.aget_state(cfg(f"c{conversations - 1}"))
        persisted = state.values.get("results", {}).get("answer") == _expected(
            conversations - 1)
    ok = sum(1 for x in latency if not math.isnan(x))
    if timed_out:
        errors["timeout"] += conversations - ok - sum(errors.values())
    return {"ok": ok, "errors": dict(errors), "timed_out": timed_out, "wall_s": wall,
            "conversations_per_s": ok / wall if wall > 0 else math.nan,
            "latency_ms": _lat_summary(latency), "idle_pss_mb": idle_mb,
            "idle_processes": 1, **memory, **cpu, "checkpoint_persisted": persisted,
            "loadavg_before": load_before, "loadavg_after": _load()}


def lg_side(conversations: int, delay: float, timeout: float, period: float
            ) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lg-svc-") as tmp:
        return asyncio.run(_lg_burst(conversations, delay, tmp, timeout, period))


# -- the hayata_py side ----------------------------------------------------------------------


def hy_side(conversations: int, delay: float, timeout: float, period: float, *,
            client_threads: int, edge_concurrency: int,
            node_concurrency: dict[str, int], lease_seconds: float | None = None
            ) -> dict[str, Any]:
    import hayata_py as hy
    from benchmarks import graphs as G

    deadline = math.inf  # set when the burst starts: the timeout is the burst's
    out: dict[str, Any] = {"edge_concurrency": {"llm": edge_concurrency},
                           "node_concurrency": node_concurrency,
                           "client_threads": client_threads, "lease_seconds": lease_seconds}
    with tempfile.TemporaryDirectory(prefix="hy-svc-") as tmp:
        t = time.perf_counter()
        with hy.AgentSystem(Path(tmp) / "hy") as system:
            out["system_start_s"] = time.perf_counter() - t
            t = time.perf_counter()
            agent = system.start_agent(G.hy_service_config(
                max_invocations=conversations, node_concurrency=node_concurrency,
                edge_concurrency={"llm": edge_concurrency}, lease_seconds=lease_seconds))
            out["agent_start_s"] = time.perf_counter() - t
            threaded = "thread" in inspect.signature(agent.run).parameters
            out["run_takes_thread"] = threaded

            def submit(i: int, thread: str) -> str:
                if threaded:
                    run: Any = agent.run
                    return str(run(_input(i, delay), thread=thread, subscriber=None))
                return agent.run(_input(i, delay), subscriber=None)

            for w in range(WARMUP):
                result = agent.wait(submit(-1 - w, f"warm{w}"), 60)
                if not result.ok:
                    raise RuntimeError(f"warm-up run failed: {result.error}")
            me = psutil.Process()
            sampler = Sampler(lambda: [*system.processes(), me], period, caller=me,
                              roles=True)
            idle_mb, idle_procs = sampler.sample()
            out["idle_pss_mb"], out["idle_processes"] = idle_mb, idle_procs
            out["idle_processes_of_system"] = len(system.processes())

            n = conversations
            submitted = [math.nan] * n
            submitted_wall = [math.nan] * n
            accepted = [math.nan] * n
            finished = [math.nan] * n
            ids: list[str | None] = [None] * n
            errors: Counter[str] = Counter()
            lock = threading.Lock()
            barrier = threading.Barrier(client_threads + 1)

            def error(key: str) -> None:
                with lock:
                    errors[key] += 1

            def submitter(w: int, handed: queue.SimpleQueue[int | None]) -> None:
                barrier.wait()
                for i in range(w, n, client_threads):
                    submitted[i] = time.perf_counter()
                    submitted_wall[i] = time.time()
                    try:
                        ids[i] = submit(i, f"c{i}")
                        accepted[i] = time.perf_counter()
                        handed.put(i)
                    except hy.HayataError as exc:
                        error(f"run:{exc.code}")
                    except Exception as exc:  # noqa: BLE001 - counted in the row
                        error(f"run:{type(exc).__name__}")
                handed.put(None)

            def waiter(handed: queue.SimpleQueue[int | None]) -> None:
                """Waits for its submitter's runs in the order they were accepted,
                each as soon as it is (not once all are submitted)."""
                while (i := handed.get()) is not None:
                    iid = ids[i]
                    assert iid is not None
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        error("timeout")
                        continue
                    try:
                        result = agent.wait(iid, remaining)
                    except TimeoutError:
                        error("timeout")
                        continue
                    except hy.HayataError as exc:
                        error(f"wait:{exc.code}")
                        continue
                    if not result.ok:
                        error(f"result:{result.error.code if result.error else result.status}")
                    elif (result.result or {}).get("answer") != _expected(i):
                        error("wrong_result")
                    else:
                        finished[i] = time.perf_counter()

            pool: list[threading.Thread] = []
            for w in range(client_threads):
                handed: queue.SimpleQueue[int | None] = queue.SimpleQueue()
                pool.append(threading.Thread(target=submitter, args=(w, handed),
                                             name=f"submit-{w}"))
                pool.append(threading.Thread(target=waiter, args=(handed,), name=f"wait-{w}"))
            for th in pool:
                th.start()
            out["loadavg_before"] = _load()
            cpu_before = _cpu([*system.processes(), me], me)
            sampler.start()
            deadline = time.monotonic() + timeout
            t0 = time.perf_counter()
            barrier.wait()
            for th in pool:
                th.join()
            out.update(_cpu_used(cpu_before, _cpu([*system.processes(), me], me), n,
                                 time.perf_counter() - t0))
            memory = sampler.stop()
            out.update(memory)
            out["peak_caller_pss_mb"] = sampler.peak_caller_mb
            out["loadavg_after"] = _load()
            ok = [i for i in range(n) if not math.isnan(finished[i])]
            sent = [s for s in submitted if not math.isnan(s)]
            first = min(sent) if sent else math.nan
            last = max((finished[i] for i in ok), default=math.nan)
            wall = last - first if ok else math.nan
            out.update({
                "ok": len(ok), "errors": dict(errors),
                "timed_out": errors.get("timeout", 0) > 0, "wall_s": wall,
                "conversations_per_s": len(ok) / wall if ok and wall > 0 else math.nan,
                "submit_span_s": (max(sent) - first) if sent else math.nan,
                "latency_ms": _lat_summary([finished[i] - submitted[i] for i in ok]),
                "run_call_ms": _lat_summary([a - b for a, b in zip(accepted, submitted,
                                                                   strict=True)])})
            out["processes_after"] = len(system.processes())
            with contextlib.suppress(Exception):
                info = agent.status_info()
                out["status_after"] = {k: v for k, v in vars(info).items()
                                       if isinstance(v, (str, int, float, type(None)))}
            # exact latency: submit -> the terminal record in the store
            store_lat: list[float] = []
            accept_lat: list[float] = []
            for i in ok:
                iid = ids[i]
                record = system.store.get_invocation(iid) if iid else None
                if record is not None:
                    store_lat.append(record.updated_at - submitted_wall[i])
                    accept_lat.append(record.created_at - submitted_wall[i])
            out["latency_ms_store_finished"] = _lat_summary(store_lat)
            out["latency_ms_store_created"] = _lat_summary(accept_lat)
            t = time.perf_counter()
        out["shutdown_s"] = time.perf_counter() - t
    return out


# -- the parent: one subprocess per side and row ----------------------------------------------


def _default_timeout(conversations: int) -> float:
    return 120.0 + 0.15 * conversations


def _kill_left_in(directory: Path) -> list[int]:
    """SIGKILL every live process whose working directory is ``directory``: what a
    killed side left behind (a side runs in a fresh directory of its own, which
    the processes it starts, the hayata system's too, inherit; their
    environment cannot mark them: setproctitle overwrites it)."""
    killed: list[int] = []
    target = str(directory.resolve())
    for proc in psutil.process_iter():
        try:
            if proc.cwd() == target:
                proc.kill()
                killed.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return killed


def run_side(side: str, conversations: int, delay: float, args: argparse.Namespace
             ) -> dict[str, Any]:
    timeout = args.timeout or _default_timeout(conversations)
    with tempfile.TemporaryDirectory(prefix="svc-side-") as tmp:
        stderr_path = Path(tmp) / "stderr"
        cmd = [sys.executable, "-m", "benchmarks.bench_service", "--child", side,
               "--conversations", str(conversations), "--delay", str(delay),
               "--timeout", str(timeout), "--sample-period", str(args.sample_period),
               "--client-threads", str(args.client_threads),
               "--lease-seconds", str(args.lease_seconds),
               "--edge-concurrency", str(_edge_k(args, conversations)),
               "--node-concurrency", _node_arg(args)]
        cwd = Path(tmp) / "side"
        cwd.mkdir()
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path}
        stdout_path = Path(tmp) / "stdout"
        t0 = time.perf_counter()
        # Files, not pipes: the system's actor processes inherit them, and a pipe
        # would stay open (no EOF) while one of them lives.
        with stdout_path.open("w") as out, stderr_path.open("w") as err:
            proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, text=True,
                                    env=env, start_new_session=True)
            try:
                proc.wait(timeout=timeout + GRACE_S)
                failure = None
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                failure = f"no end within {timeout + GRACE_S:.0f} s: killed"
            except BaseException:  # interrupted: take the side down with this run
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                _kill_left_in(cwd)
                raise
            # a killed (or crashed) side leaves its hayata system behind
            left = _kill_left_in(cwd)
        elapsed = time.perf_counter() - t0
        stdout = stdout_path.read_text(errors="replace")
        tail = stderr_path.read_text(errors="replace")[-3000:]
    data: dict[str, Any] | None = None
    for line in reversed(stdout.strip().splitlines()):
        with contextlib.suppress(ValueError):
            data = json.loads(line)
            break
    if data is None:
        data = {"error": failure or f"exit status {proc.returncode}, no JSON",
                "stderr_tail": tail}
    elif failure:
        data["error"] = failure
    if left:
        data["killed_leftover_processes"] = len(left)
    if "error" in data and "stderr_tail" not in data:
        data["stderr_tail"] = tail
    data["process_s"] = elapsed
    data["timeout_s"] = timeout
    return data


def _edge_k(args: argparse.Namespace, conversations: int) -> int:
    return int(args.edge_concurrency) if args.edge_concurrency else min(conversations, 500)


def _node_arg(args: argparse.Namespace) -> str:
    text = str(args.node_concurrency or "")
    return "" if text == "runtime" else text


def _parse_nodes(text: str) -> dict[str, int]:
    """``4`` (every node) or ``plan=2,llm=4,answer=2``; empty: the runtime's default."""
    from benchmarks.graphs import SERVICE_NODES

    text = text.strip()
    if not text:
        return {}
    if "=" not in text:
        return dict.fromkeys(SERVICE_NODES, int(text))
    out: dict[str, int] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        out[name.strip()] = int(value)
    return out


def _ratio(a: Any, b: Any) -> float:
    if a is None or b is None:
        return math.nan
    a, b = float(a), float(b)
    return a / b if b and not (math.isnan(a) or math.isnan(b)) else math.nan


def _complete(side: dict[str, Any] | None, conversations: int) -> bool:
    return side is not None and "error" not in side and side.get("ok") == conversations


def ratios(hy: dict[str, Any], lg: dict[str, Any]) -> dict[str, float]:
    """hayata / LangGraph for each figure of a row."""
    return {
        "wall": _ratio(hy.get("wall_s"), lg.get("wall_s")),
        "conversations_per_s": _ratio(hy.get("conversations_per_s"),
                                      lg.get("conversations_per_s")),
        "p50": _ratio(hy.get("latency_ms", {}).get("p50"), lg.get("latency_ms", {}).get("p50")),
        "p99": _ratio(hy.get("latency_ms", {}).get("p99"), lg.get("latency_ms", {}).get("p99")),
        "peak_pss": _ratio(hy.get("peak_pss_mb"), lg.get("peak_pss_mb")),
        "cpu": _ratio(hy.get("cpu_ms_per_conversation"), lg.get("cpu_ms_per_conversation")),
    }


def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    return fmt(float(value), digits)


def _side_cells(side: dict[str, Any] | None, conversations: int) -> list[str]:
    if not side:
        return ["not run"] + [""] * 7
    if "error" in side and "wall_s" not in side:
        return [f"**failed**: {side['error']}"] + [""] * 7
    lat = side.get("latency_ms", {})
    ok = f"{side.get('ok', 0)}/{conversations}"
    errs = side.get("errors") or {}
    if errs:
        ok += " (" + ", ".join(f"{k} {v}" for k, v in sorted(errs.items())) + ")"
    if "error" in side:
        ok += f"; {side['error']}"
    return [ok, _f(side.get("wall_s"), 2), _f(side.get("conversations_per_s"), 0),
            _f(lat.get("p50"), 0), _f(lat.get("p99"), 0), _f(side.get("peak_pss_mb"), 0),
            str(side.get("peak_processes", "-")), _f(side.get("cpu_ms_per_conversation"), 1)]


def _x(ratio: float) -> str:
    return "-" if math.isnan(ratio) else f"{ratio:.2f}x"


def markdown(data: dict[str, Any]) -> str:
    lines = [f"# Agents as services: {data['date']}", "",
             f"{data['environment']['platform']}; {data['environment']['cpus']} CPUs; Python "
             f"{data['environment']['python']}; langgraph "
             f"{data['environment'].get('langgraph')}, langgraph-checkpoint-sqlite "
             f"{data['environment'].get('langgraph-checkpoint-sqlite')}; hayata_py at "
             f"{data['commit']}. Load average (1/5/15 min) before "
             f"{data['loadavg_before']}, after {data['loadavg_after']}.", "",
             "| C | llm | side | ok | wall s | conv/s | p50 ms | p99 ms | peak PSS MB "
             "| peak processes | CPU ms/conv |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in data["rows"]:
        c, d = row["conversations"], row["delay_s"]
        for side in ("hayata", "langgraph"):
            if side not in data["sides"]:
                continue
            cells = _side_cells(row.get(side), c)
            lines.append(f"| {c:,} | {d * 1000:.0f} ms | {side} | " + " | ".join(cells) + " |")
        r = row.get("ratios")
        if r:
            cells = [_x(r.get(k, math.nan)) for k in ("wall", "conversations_per_s", "p50",
                                                      "p99", "peak_pss")]
            lines.append(f"| {c:,} | {d * 1000:.0f} ms | **hayata / LangGraph** | | "
                         + " | ".join(cells) + f" | | {_x(r.get('cpu', math.nan))} |")
    hy_cfg = next((r["hayata"] for r in data["rows"] if r.get("hayata", {}).get(
        "node_concurrency_effective")), None)
    if hy_cfg:
        a = data["args"]
        lines += ["", f"hayata: one agent, max_invocations=C, edge_concurrency llm="
                  f"{a['edge_concurrency'] or 'min(C, 500)'}, node_concurrency "
                  f"{hy_cfg['node_concurrency_effective']}, {a['client_threads']} submitting "
                  "+ as many waiting client threads, runs on thread=f'c{i}'. LangGraph: one "
                  "compiled graph, AsyncSqliteSaver, durability='sync', asyncio.gather of C "
                  "ainvoke."]
    lines += ["", "## Targets (issue 21)", ""]
    lines += [f"- {t['target']}: {t['measured']} -> **{t['verdict']}**" for t in data["targets"]]
    lines += ["", "wall: first submit -> last result; conv/s: ok results / wall; p50/p99: "
              "submit -> result in the caller; PSS and processes: peaks of the total over "
              "every process of the side (hayata: the system's and the caller), sampled "
              f"every {data['args']['sample_period']} s; CPU: all processes of the side "
              "during the burst, ms per conversation."]
    return "\n".join(lines)


def targets(data: dict[str, Any]) -> list[dict[str, str]]:
    rows = {(r["conversations"], r["delay_s"]): r for r in data["rows"]}
    out: list[dict[str, str]] = []

    def verdict(ok: bool | None) -> str:
        return "not measured" if ok is None else ("met" if ok else "not met")

    r = rows.get((1000, DELAY_S))
    if r:
        ratio = r.get("ratios", {}).get("wall", math.nan)
        done = _complete(r.get("hayata"), 1000) and _complete(r.get("langgraph"), 1000)
        out.append({"target": "C = 1,000, 200 ms: wall <= 1.0x LangGraph's",
                    "measured": _x(ratio), "verdict": verdict(
                        None if math.isnan(ratio) else done and ratio <= 1.0)})
    r = rows.get((10000, DELAY_S))
    if r:
        h = r.get("hayata") or {}
        done = _complete(h, 10000)
        pss = h.get("peak_pss_mb")
        out.append({"target": f"C = 10,000 completes with <= {PSS_LIMIT_MB:.0f} MB total PSS",
                    "measured": f"{h.get('ok', 0)}/10000 ok, peak PSS {_f(pss, 0)} MB",
                    "verdict": verdict(done and pss is not None and pss <= PSS_LIMIT_MB)})
    r = rows.get((1000, 0.0))
    if r:
        ratio = r.get("ratios", {}).get("conversations_per_s", math.nan)
        done = _complete(r.get("hayata"), 1000) and _complete(r.get("langgraph"), 1000)
        out.append({"target": "C = 1,000, 0 ms: throughput >= 0.8x LangGraph's",
                    "measured": _x(ratio), "verdict": verdict(
                        None if math.isnan(ratio) else done and ratio >= 0.8)})
    peaks = [(r["conversations"], r["hayata"]) for r in data["rows"]
             if r.get("hayata") and r["hayata"].get("peak_processes")]
    if peaks:
        bounds = []
        met = True
        for c, h in peaks:
            nodes = h.get("node_concurrency_effective") or {}
            bound = h.get("idle_processes", 0) + sum(max(0, n - 1) for n in nodes.values())
            bounds.append(f"C={c:,}: {h['peak_processes']} (idle {h.get('idle_processes')}, "
                          f"bound {bound})")
            met = met and bool(nodes) and h["peak_processes"] <= bound
        out.append({"target": "processes bounded by node/edge concurrency, never by C "
                              "(bound: idle processes + sum of node_concurrency - 1 per node)",
                    "measured": "; ".join(bounds), "verdict": verdict(met)})
    return out


def _commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "hayata_py",
                                "supervisors"], cwd=ROOT, text=True, capture_output=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (hayata_py modified)" if dirty else "")


def _env() -> dict[str, Any]:
    import sqlite3
    from importlib import metadata

    out = environment()
    for name in ("langgraph", "langgraph-checkpoint-sqlite", "aiosqlite"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["sqlite"] = sqlite3.sqlite_version
    out["memory_total_mb"] = psutil.virtual_memory().total / MB
    return out


def parent(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.graphs import SERVICE_NODES
    from hayata_py._config import default_node_concurrency

    convs = ([int(c) for c in args.conversations.split(",") if c.strip()]
             if args.conversations else
             list(QUICK_CONVERSATIONS if args.quick else FULL_CONVERSATIONS))
    cpu = args.cpu_conversations
    if cpu is None:
        cpu = 100 if args.quick else 1000
    plan = [(c, args.delay) for c in convs] + ([(cpu, 0.0)] if cpu else [])
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    nodes = _parse_nodes(_node_arg(args))
    effective = {n: nodes.get(n, default_node_concurrency()) for n in SERVICE_NODES}
    data: dict[str, Any] = {
        "benchmark": "service", "issue": 21, "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "commit": _commit(), "environment": _env(), "quick": args.quick, "sides": sides,
        "args": {k: v for k, v in vars(args).items() if k != "child"},
        "loadavg_before": _load(), "rows": []}
    for index, (c, delay) in enumerate(plan):
        row: dict[str, Any] = {"conversations": c, "delay_s": delay}
        order = sides if index % 2 == 0 else sides[::-1]
        for side in order:
            print(f"C={c} delay={delay}s {side} ... (loadavg {_load()[0]})", flush=True)
            result = run_side(side, c, delay, args)
            if side == "hayata":
                result["node_concurrency_effective"] = effective
            row[side] = result
            err = f" ERROR {result['error']}" if "error" in result else ""
            print(f"  ok {result.get('ok', 0)}/{c}, wall {_f(result.get('wall_s'), 2)} s, "
                  f"p50 {_f(result.get('latency_ms', {}).get('p50'), 0)} ms, peak PSS "
                  f"{_f(result.get('peak_pss_mb'), 0)} MB, {result.get('peak_processes')} "
                  f"processes{err}", flush=True)
            time.sleep(2.0)  # let the side's processes go
        if "hayata" in row and "langgraph" in row:
            row["ratios"] = ratios(row["hayata"], row["langgraph"])
        data["rows"].append(row)
    data["loadavg_after"] = _load()
    data["targets"] = targets(data)
    data["markdown"] = markdown(data)
    print()
    print(data["markdown"])
    name = args.out or ("service_quick" if args.quick else "service")
    print(f"\nwrote {write_json(name, data)}")
    return data


def child(args: argparse.Namespace) -> int:
    """One side of one row; prints its figures as the last line of JSON."""
    c = int(args.conversations)
    args.timeout = args.timeout or _default_timeout(c)
    try:
        if args.child == "langgraph":
            data = lg_side(c, args.delay, args.timeout, args.sample_period)
        elif args.child == "hayata":
            data = hy_side(c, args.delay, args.timeout, args.sample_period,
                           client_threads=args.client_threads,
                           edge_concurrency=_edge_k(args, c),
                           lease_seconds=args.lease_seconds or None,
                           node_concurrency=_parse_nodes(_node_arg(args)))
        else:
            raise ValueError(f"unknown side {args.child!r}")
    except Exception as exc:  # noqa: BLE001 - the parent reports it in the row
        data = {"error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-3000:]}
    from benchmarks._util import _clean

    print(json.dumps(_clean(data)), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--conversations", default="",
                        help="comma-separated C values for the --delay rows "
                             "(default 100,1000,10000; --quick 20,100)")
    parser.add_argument("--delay", type=float, default=DELAY_S,
                        help="seconds the llm node waits in those rows (default 0.2)")
    parser.add_argument("--cpu-conversations", type=int, default=None,
                        help="C of the 0 ms (CPU-bound) row; 0 leaves it out "
                             "(default 1000; --quick 100)")
    parser.add_argument("--quick", action="store_true", help="small rows, for development")
    parser.add_argument("--sides", default="hayata,langgraph")
    parser.add_argument("--edge-concurrency", type=int, default=0,
                        help="hayata: tasks one llm edge runs at once (default min(C, 500))")
    parser.add_argument("--node-concurrency", default=str(os.cpu_count() or 1),
                        help="hayata: most edges per node, '4' or 'plan=2,llm=4,answer=2', "
                             "'runtime' for the runtime's default (the core count, at least "
                             "4); default: the core count for every node")
    parser.add_argument("--client-threads", type=int, default=4,
                        help="hayata: threads that submit (then wait for) the runs")
    parser.add_argument("--lease-seconds", type=float, default=0.0,
                        help="hayata: the agent's lease_seconds (default: the runtime's; a "
                             "diagnostic: every running invocation's lease is renewed every "
                             "third of it)")
    parser.add_argument("--timeout", type=float, default=0.0,
                        help="seconds a side may take per row (default 120 + 0.15 * C)")
    parser.add_argument("--sample-period", type=float, default=0.5,
                        help="seconds between PSS samples")
    parser.add_argument("--out", default="", help="results file name (without .json)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # unwinds run_side, which stops its side

    signal.signal(signal.SIGTERM, stop)
    parent(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
