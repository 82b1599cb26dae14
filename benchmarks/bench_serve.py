"""The same LangGraph graph served by LangGraph's ``langgraph dev`` and by
``hayata serve``, driven by the same ``langgraph-sdk`` async load.

    python -m benchmarks.bench_serve [--quick] [--rounds R] [--streams N] [--runs M]

Each server runs on its own free loopback port from a fresh folder (a copy of
``benchmarks/serve_graph.py`` and a ``langgraph.json``; hayata's data dir in
it), the graph ``bench``: three nodes, the middle an ``async def`` waiting
200 ms. Per round, both servers (the order alternating round by round), each
freshly started:

- ``stream``: N threads (default 1,000), each streaming one run at once
  (``runs.stream``, ``stream_mode="values"``): runs/s over the whole batch,
  p50/p99 time to the first event and to the end of each stream;
- ``background``: M runs (default 10,000), each on its own thread,
  ``runs.create`` (at most ``--concurrency`` requests in flight), then each
  joined (``runs.join``): runs/s from the first create to the last join,
  p50/p99 of the create's answer and of create-sent to join-returned;
- the server's PSS (summed over its process tree; hayata's actor session
  too) and process count, peaks sampled every second;
- CPU per run of the server's processes, and of the load itself (this
  process, its sampling left out): on a small machine the load's share
  bounds what any server can reach. The report says that bound per phase
  (:func:`ceiling`): the runs/s the machine's cores carry of the load alone
  against ``langgraph dev``, and of the load plus a server as cheap as it.

Then, per server, a kill: K streams (``stream_resumable=True``) and B
background runs; once every one is accepted and a share of them has ended,
``kill -9`` of the server's whole process tree (hayata: the server and its
actor session, named in ``<data-dir>/serve.json``), a restart on the same
folder, every cut stream joined again (``join_stream`` with ``Last-Event-ID``:
the last id it got), every accepted run followed to its end. Counted: runs
lost (accepted, then never finished or not found), runs ended waiting on an
uncertain node (hayata asks the client), nodes started / ended more than once
(each node logs its start and end to a file), streams resumed.

``langgraph dev`` runs from its own venv (``LGDEV_VENV``, made by
``tests/serve_api/reference.py`` if missing) with ``--n-jobs-per-worker``
``--lg-jobs`` (default: as many as ``hayata serve`` carries out at once).
Results: ``benchmarks/results/serve/bench_serve[-quick].json``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psutil
from langgraph_sdk.client import LangGraphClient

from benchmarks._util import RESULTS_DIR, environment, fmt, percentile, pss_mb, table
from tests.serve.launch import serve_command, serve_env
from tests.serve_api.reference import QUIET_ENV, answers, ensure_venv, free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GRAPH = "bench"
SIDES = ("langgraph", "hayata")
START_TIMEOUT = 180.0
T = TypeVar("T")


# -- servers -------------------------------------------------------------------------


@dataclass
class Server:
    """One running server of one side, in ``workdir``."""

    side: str
    workdir: Path
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def sessions(self) -> set[int]:
        """OS sessions of the server's processes: its own (``start_new_session``)
        and, for hayata, its actors' (``serve.json``)."""
        found = {self.process.pid}
        if self.side == "hayata":
            with contextlib.suppress(OSError, ValueError, KeyError):
                found.add(int(json.loads((self.data_dir / "serve.json").read_text())
                              ["session_id"]))
        return found

    def processes(self) -> list[psutil.Process]:
        sessions = self.sessions()
        out = []
        for proc in psutil.process_iter():
            with contextlib.suppress(ProcessLookupError, PermissionError, psutil.Error):
                # a killed actor's zombie (reparented to an init that does not
                # reap) is no process of the server any more
                if os.getsid(proc.pid) in sessions and proc.status() != psutil.STATUS_ZOMBIE:
                    out.append(proc)
        return out

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """``sig`` to every process of every session of the server; waits until
        none is left (30 s at most)."""
        deadline = time.monotonic() + 30
        while True:
            for session in self.sessions():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(session, sig)
            if not self.processes() or time.monotonic() > deadline:
                return
            time.sleep(0.05)

    def stop(self) -> None:
        """TERM (the server stops its actors), then KILL whatever is left."""
        sessions = self.sessions()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=20)
        for session in sessions:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(session, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)


def new_workdir(side: str) -> Path:
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-serve-{side}-"))
    shutil.copy(HERE / "serve_graph.py", workdir / "serve_graph.py")
    (workdir / "langgraph.json").write_text(json.dumps(
        {"dependencies": ["."], "graphs": {GRAPH: "./serve_graph.py:bench"}}))
    return workdir


def start_server(side: str, workdir: Path, port: int, lgdev: Path, jobs: int) -> Server:
    """Start ``side`` serving ``workdir``'s graph on ``port``; wait for ``/ok``."""
    log = workdir / f"{side}.log"
    if side == "langgraph":
        args = [str(lgdev), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
                "--port", str(port), "--n-jobs-per-worker", str(jobs),
                "--allow-blocking", "--config", "langgraph.json"]
        env = {**os.environ, **QUIET_ENV}
    else:
        (workdir / "data").mkdir(exist_ok=True)
        (workdir / "data" / "serve.json").unlink(missing_ok=True)
        args = serve_command(workdir, workdir / "data", port)
        env = serve_env()
    with log.open("ab") as out:
        process = subprocess.Popen(args, cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
                                   env=env, start_new_session=True)
    server = Server(side, workdir, port, process, log)
    deadline = time.monotonic() + START_TIMEOUT
    while not answers(server.url):
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"{side} server not answering {server.url}/ok "
                               f"(exit {process.returncode}); log:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    return server


def _cpu(procs: Iterable[psutil.Process]) -> dict[int, float]:
    out = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            out[proc.pid] = times.user + times.system
    return out


class Sampler:
    """Peak PSS (MB) and process count of a server, sampled every ``period`` s,
    the CPU seconds its processes used meanwhile (those still there at the
    end), and the CPU seconds this process (the load) used meanwhile, the
    sampling left out."""

    def __init__(self, server: Server, period: float = 1.0) -> None:
        self.server, self.period = server, period
        self.peak_pss, self.peak_procs = 0.0, 0
        self.cpu_s = 0.0
        self.client_cpu_s = 0.0
        self._cpu_before: dict[int, float] = {}
        self._client_before = 0.0
        self._own_cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        began = time.thread_time()
        try:
            while True:
                self.sample()
                if self._stop.wait(self.period):
                    return
        finally:
            self._own_cpu_s = time.thread_time() - began

    def sample(self) -> None:
        procs = self.server.processes()
        self.peak_procs = max(self.peak_procs, len(procs))
        self.peak_pss = max(self.peak_pss, pss_mb(procs))

    def __enter__(self) -> Sampler:
        self._cpu_before = _cpu(self.server.processes())
        self._client_before = time.process_time()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.client_cpu_s = time.process_time() - self._client_before - self._own_cpu_s
        after = _cpu(self.server.processes())
        self.cpu_s = sum(v - self._cpu_before.get(pid, 0.0) for pid, v in after.items())


# -- the load ------------------------------------------------------------------------


def client(url: str, connections: int) -> LangGraphClient:
    """langgraph-sdk's async client (as ``get_client`` makes it) with a pool of
    ``connections``: the default 100 would queue most of the streams."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return LangGraphClient(httpx.AsyncClient(
        base_url=url, transport=httpx.AsyncHTTPTransport(retries=5, limits=limits),
        timeout=httpx.Timeout(connect=60, read=900, write=60, pool=900),
        headers={"User-Agent": "bench-serve"}))


async def limited(calls: Iterable[Callable[[], Awaitable[T]]], limit: int,
                  deadline: float | None = None) -> list[T | BaseException]:
    """Await ``calls`` with at most ``limit`` at once; results (or errors) in
    order. A call still unfinished at ``deadline`` (``time.monotonic()``) is
    cancelled: its result is a ``TimeoutError``."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[T]]) -> T | BaseException:
        async with gate:
            try:
                if deadline is None:
                    return await call()
                return await asyncio.wait_for(call(), max(deadline - time.monotonic(), 0.01))
            except Exception as exc:  # noqa: BLE001 - counted as a failed request
                return exc

    return await asyncio.gather(*(one(c) for c in calls))


async def new_threads(sdk: LangGraphClient, count: int, limit: int) -> list[str]:
    """``count`` new threads: the phases' setup, not measured. A create the
    server dropped (a connection closed under load: seen with ``langgraph dev``
    at 10,000) is made again, at most twice more."""
    ids: list[str] = []
    errors: list[BaseException] = []
    for _attempt in range(3):
        made = await limited([sdk.threads.create for _ in range(count - len(ids))], limit)
        ids += [str(m["thread_id"]) for m in made if not isinstance(m, BaseException)]
        errors = [m for m in made if isinstance(m, BaseException)]
        if not errors:
            return ids
        print(f"    {len(errors)} threads.create failed ({errors[0]!r}): made again",
              flush=True)
    raise RuntimeError(f"{len(errors)} of {count} threads.create failed: {errors[0]!r}")


DONE_STEPS = ["first", "middle", "last"]


async def stream_phase(url: str, count: int, delay: float, limit: int, timeout: float
                       ) -> dict[str, Any]:
    """``count`` threads each streaming one run, all at once (each cut after
    ``timeout`` s from the phase's start: a ``TimeoutError``)."""
    sdk = client(url, count + limit)
    errors: collections.Counter[str] = collections.Counter()
    try:
        thread_ids = await new_threads(sdk, count, limit)
        start = time.perf_counter()

        async def one(index: int, thread_id: str) -> tuple[float, float, bool]:
            sent = time.perf_counter()
            first: float | None = None
            values: Any = None
            async for part in sdk.runs.stream(thread_id, GRAPH, input={
                    "label": f"s{index}", "delay": delay}, stream_mode="values"):
                if first is None:
                    first = time.perf_counter() - sent
                if part.event == "values":
                    values = part.data
                elif part.event == "error":
                    errors[_error_text(part.data)] += 1
            done = isinstance(values, dict) and values.get("steps") == DONE_STEPS
            return first if first is not None else float("nan"), \
                time.perf_counter() - sent, done

        deadline = time.monotonic() + timeout
        results = await limited([functools.partial(one, i, t)
                                 for i, t in enumerate(thread_ids)], count, deadline)
        wall = time.perf_counter() - start
    finally:
        await sdk.http.client.aclose()
    good = [r for r in results if not isinstance(r, BaseException) and r[2]]
    for r in results:
        if isinstance(r, BaseException):
            errors[_error_text(r)] += 1
    return {"runs": count, "completed": len(good), "failed": count - len(good),
            "timed_out": sum(1 for r in results if isinstance(r, TimeoutError)),
            "errors": _top(errors), "wall_s": wall,
            "runs_per_s": len(good) / wall,
            "first_event_ms": _p(r[0] for r in good), "end_ms": _p(r[1] for r in good)}


def _error_text(error: Any) -> str:
    """A failure, short, without the ids that make every one different."""
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {error}"
    elif isinstance(error, dict):
        text = f"{error.get('error')}: {error.get('message')}"
    else:
        text = str(error)
    return re.sub(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}|"
                  r"[0-9a-f]{32}", "<id>", text)[:200]


def _top(errors: collections.Counter[str]) -> dict[str, int]:
    return dict(errors.most_common(5))


def _p(values: Iterable[float]) -> dict[str, float]:
    data = [v * 1000 for v in values]
    return {"p50": percentile(data, 50), "p99": percentile(data, 99)}


async def background_phase(url: str, count: int, delay: float, limit: int, timeout: float
                           ) -> dict[str, Any]:
    """``count`` runs created (``limit`` requests at once), then joined; a run
    not joined ``timeout`` s after the phase's start counts as failed."""
    sdk = client(url, limit + 10)
    errors: collections.Counter[str] = collections.Counter()
    try:
        thread_ids = await new_threads(sdk, count, limit)
        sent: list[float] = [0.0] * count
        accepted: list[float] = [0.0] * count
        start = time.perf_counter()
        deadline = time.monotonic() + timeout

        def create(index: int) -> Callable[[], Awaitable[Any]]:
            async def call() -> Any:
                sent[index] = time.perf_counter()
                run = await sdk.runs.create(thread_ids[index], GRAPH, input={
                    "label": f"b{index}", "delay": delay})
                accepted[index] = time.perf_counter() - sent[index]
                return run
            return call

        runs = await limited([create(i) for i in range(count)], limit, deadline)
        created = time.perf_counter() - start

        def join(index: int) -> Callable[[], Awaitable[tuple[float, bool]]]:
            async def call() -> tuple[float, bool]:
                run = runs[index]
                assert not isinstance(run, BaseException)
                values = await sdk.runs.join(thread_ids[index], run["run_id"])
                if isinstance(values, dict) and "__error__" in values:
                    errors[_error_text(values["__error__"])] += 1
                return time.perf_counter() - sent[index], \
                    isinstance(values, dict) and values.get("steps") == DONE_STEPS
            return call

        ok = [i for i, r in enumerate(runs) if not isinstance(r, BaseException)]
        joined = await limited([join(i) for i in ok], limit, deadline)
        wall = time.perf_counter() - start
    finally:
        await sdk.http.client.aclose()
    good = [j for j in joined if not isinstance(j, BaseException) and j[1]]
    for r in [*runs, *joined]:
        if isinstance(r, BaseException):
            errors[_error_text(r)] += 1
    return {"runs": count, "completed": len(good), "failed": count - len(good),
            "timed_out": sum(1 for r in [*runs, *joined] if isinstance(r, TimeoutError)),
            "errors": _top(errors), "create_s": created,
            "wall_s": wall, "runs_per_s": len(good) / wall,
            "accept_ms": _p(accepted[i] for i in ok), "end_ms": _p(j[0] for j in good)}


# -- the kill ------------------------------------------------------------------------


@dataclass
class Cut:
    """What the client knows of one run of the kill drill."""

    label: str
    thread_id: str
    run_id: str | None = None
    last_id: str | None = None
    finished: bool = False  # its stream ended with the whole graph's values
    stream: bool = False
    events_after: int = 0
    resumed: bool = False
    outcome: str = "lost"


def executions(log: Path) -> collections.Counter[tuple[str, str, str]]:
    """``(label, node, start|end)`` -> how many times the graph's nodes logged it."""
    counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
    if log.exists():
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:
                counts[(parts[0], parts[1], parts[2])] += 1
    return counts


async def kill_drill(side: str, lgdev: Path, jobs: int, streams: int, runs: int,
                     delay: float, share: float, min_s: float, limit: int,
                     deadline_s: float, keep: bool = False) -> dict[str, Any]:
    workdir = new_workdir(side)
    port = free_port()
    log = workdir / "executions.log"
    server = start_server(side, workdir, port, lgdev, jobs)
    try:
        sdk = client(server.url, streams + limit + 10)
        thread_ids = await new_threads(sdk, streams + runs, limit)
        cuts = [Cut(f"k{i}" if i < streams else f"b{i}", t, stream=i < streams)
                for i, t in enumerate(thread_ids)]
        started = time.perf_counter()

        async def stream(cut: Cut) -> None:
            async for part in sdk.runs.stream(cut.thread_id, GRAPH, input={
                    "label": cut.label, "delay": delay}, stream_mode="values",
                    stream_resumable=True):
                if part.event == "metadata":
                    cut.run_id = part.data["run_id"]
                if part.id:
                    cut.last_id = part.id
                if part.event == "values" and part.data.get("steps") == DONE_STEPS:
                    cut.finished = True

        def create(cut: Cut) -> Callable[[], Awaitable[None]]:
            async def call() -> None:
                run = await sdk.runs.create(cut.thread_id, GRAPH, input={
                    "label": cut.label, "delay": delay})
                cut.run_id = run["run_id"]
            return call

        stream_tasks = [asyncio.create_task(stream(c)) for c in cuts if c.stream]
        creating = asyncio.create_task(limited([create(c) for c in cuts if not c.stream],
                                               limit))
        want = share * len(cuts)
        while True:
            await asyncio.sleep(0.05)
            ended = sum(1 for k in executions(log) if k[1] == "last" and k[2] == "end")
            all_in = creating.done() and all(c.run_id for c in cuts if c.stream)
            elapsed = time.perf_counter() - started
            if all_in and ((ended >= want and elapsed >= min_s) or ended >= 0.9 * len(cuts)):
                break
            if elapsed > deadline_s:
                break
        kill_at = time.perf_counter() - started
        server.kill()
        server.process.wait(timeout=30)
        at_kill = executions(log)
        ended_before = sum(1 for k in at_kill if k[1] == "last" and k[2] == "end")
        # nodes the kill caught between their start and end lines
        caught = sum(1 for (lab, node, ph), n in at_kill.items()
                     if ph == "start" and n > at_kill.get((lab, node, "end"), 0))
        for task in stream_tasks:
            task.cancel()
        await asyncio.gather(*stream_tasks, return_exceptions=True)
        if not creating.done():
            creating.cancel()
        await asyncio.gather(creating, return_exceptions=True)
        await sdk.http.client.aclose()
        accepted = [c for c in cuts if c.run_id]
        with contextlib.suppress(psutil.Error):
            left = len(server.processes())
        restart = time.perf_counter()
        server = start_server(side, workdir, port, lgdev, jobs)
        restart_s = time.perf_counter() - restart
        sdk = client(server.url, streams + limit + 10)

        async def rejoin(cut: Cut) -> None:
            async for part in sdk.runs.join_stream(cut.thread_id, cut.run_id or "",
                                                   last_event_id=cut.last_id or "-1"):
                cut.events_after += 1
                if part.event == "values" and part.data.get("steps") == DONE_STEPS:
                    cut.resumed = True

        cut_streams = [c for c in accepted if c.stream and not c.finished]
        rejoined = await limited([functools.partial(rejoin, c) for c in cut_streams],
                                 len(cut_streams) + 1, time.monotonic() + deadline_s)
        rejoin_errors = [r for r in rejoined if isinstance(r, BaseException)]

        async def follow(cut: Cut) -> None:
            end = time.monotonic() + deadline_s
            while time.monotonic() < end:
                try:
                    run = await sdk.runs.get(cut.thread_id, cut.run_id or "")
                except httpx.HTTPStatusError as exc:
                    if exc.response.status_code == 404:  # the server has no such run
                        cut.outcome = "lost"
                        return
                    await asyncio.sleep(0.5)  # the client's or the server's hiccup
                    continue
                except httpx.TransportError:
                    await asyncio.sleep(0.5)
                    continue
                if run["status"] in ("pending", "running"):
                    await asyncio.sleep(0.5)
                    continue
                state: Any = await sdk.threads.get_state(cut.thread_id)
                values = state.get("values")
                steps = values.get("steps") if isinstance(values, dict) else None
                if run["status"] == "success" and steps == DONE_STEPS:
                    cut.outcome = "completed"
                elif run["status"] == "success" and state.get("next"):
                    cut.outcome = "waiting_uncertain"
                else:
                    cut.outcome = f"{run['status']}:{steps}"
                return
            cut.outcome = "lost"  # never finished

        settle = time.perf_counter()
        await limited([functools.partial(follow, c) for c in accepted], limit)
        settle_s = time.perf_counter() - settle
        await sdk.http.client.aclose()
    finally:
        server.stop()
    counts = executions(log)
    labels = {c.label for c in accepted}
    twice = {phase: sum(1 for (lab, _n, ph), n in counts.items()
                        if lab in labels and ph == phase and n > 1)
             for phase in ("start", "end")}
    outcomes = collections.Counter(c.outcome for c in accepted)
    if keep:
        print(f"  kept {workdir}", flush=True)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"side": side, "streams": streams, "background": runs,
            "accepted": len(accepted), "kill_at_s": kill_at,
            "ended_before_kill": ended_before,
            "in_flight_at_kill": len(accepted) - ended_before,
            "nodes_caught_mid_run": caught, "processes_left_after_kill": left,
            "restart_s": restart_s, "settle_s": settle_s,
            "runs_lost": outcomes.get("lost", 0), "outcomes": dict(outcomes),
            "nodes_started_twice": twice["start"], "nodes_ended_twice": twice["end"],
            "streams_cut": len(cut_streams),
            "streams_resumed": sum(1 for c in cut_streams if c.resumed),
            "streams_rejoined_with_events": sum(1 for c in cut_streams if c.events_after),
            "rejoin_errors": len(rejoin_errors),
            "first_rejoin_error": repr(rejoin_errors[0]) if rejoin_errors else None}


# -- rounds --------------------------------------------------------------------------


@dataclass
class Args:
    rounds: int
    streams: int
    runs: int
    delay: float
    concurrency: int
    kill_streams: int
    kill_runs: int
    kill_share: float
    lg_jobs: int
    lgdev: Path
    phase_timeout: float
    phases: list[str] = field(default_factory=list)


def one_side(side: str, args: Args) -> dict[str, Any]:
    """Each phase on a freshly started server of ``side`` (a fresh folder)."""
    out: dict[str, Any] = {"side": side}
    for phase in args.phases:
        workdir = new_workdir(side)
        server = start_server(side, workdir, free_port(), args.lgdev, args.lg_jobs)
        try:
            idle = Sampler(server)
            idle.sample()
            load = os.getloadavg()[0]
            with Sampler(server) as sampler:
                if phase == "stream":
                    row = asyncio.run(stream_phase(server.url, args.streams, args.delay,
                                                   args.concurrency, args.phase_timeout))
                else:
                    row = asyncio.run(background_phase(server.url, args.runs, args.delay,
                                                       args.concurrency, args.phase_timeout))
        finally:
            server.stop()
            shutil.rmtree(workdir, ignore_errors=True)
        row.update(idle_pss_mb=idle.peak_pss, idle_processes=idle.peak_procs,
                   peak_pss_mb=sampler.peak_pss, peak_processes=sampler.peak_procs,
                   server_cpu_s=sampler.cpu_s,
                   cpu_ms_per_run=sampler.cpu_s * 1000 / max(row["runs"], 1),
                   client_cpu_s=sampler.client_cpu_s,
                   client_cpu_ms_per_run=sampler.client_cpu_s * 1000 / max(row["runs"], 1),
                   load_1m=load)
        out[phase] = row
        print(f"  {side:9} {phase:10} {fmt(row['runs_per_s'], 1)} runs/s "
              f"({row['completed']}/{row['runs']} ok, {fmt(row['wall_s'], 1)} s), end p50 "
              f"{fmt(row['end_ms']['p50'], 0)} p99 {fmt(row['end_ms']['p99'], 0)} ms, "
              f"PSS {fmt(sampler.peak_pss, 0)} MB, {sampler.peak_procs} procs, "
              f"CPU {fmt(row['cpu_ms_per_run'], 1)} ms/run (the load's "
              f"{fmt(row['client_cpu_ms_per_run'], 1)}), load {load:.1f}", flush=True)
        for message, count in row["errors"].items():
            print(f"    {count} x {message}", flush=True)
    return out


def _spread(values: list[float]) -> dict[str, float]:
    data = sorted(values)
    return {"median": percentile(data, 50), "min": data[0], "max": data[-1]} if data else {}


def summarize(rounds: list[dict[str, dict[str, Any]]], phases: list[str]) -> list[dict[str, Any]]:
    """Per phase and metric: each side's median and range over rounds, and the
    ratio hayata / langgraph per round (median and range)."""
    metrics: list[tuple[str, Callable[[dict[str, Any]], float]]] = [
               ("runs_per_s", lambda r: r["runs_per_s"]),
               ("first_ms_p50", lambda r: (r.get("first_event_ms") or r["accept_ms"])["p50"]),
               ("first_ms_p99", lambda r: (r.get("first_event_ms") or r["accept_ms"])["p99"]),
               ("end_ms_p50", lambda r: r["end_ms"]["p50"]),
               ("end_ms_p99", lambda r: r["end_ms"]["p99"]),
               ("peak_pss_mb", lambda r: r["peak_pss_mb"]),
               ("cpu_ms_per_run", lambda r: r["cpu_ms_per_run"]),
               ("client_cpu_ms_per_run", lambda r: r.get("client_cpu_ms_per_run", 0.0)),
               ("peak_processes", lambda r: float(r["peak_processes"]))]
    rows = []
    for phase in phases:
        for name, get in metrics:
            per = {s: [get(r[s][phase]) for r in rounds] for s in SIDES}
            ratios = [h / lg for h, lg in zip(per["hayata"], per["langgraph"], strict=True)
                      if lg]
            rows.append({"phase": phase, "metric": name,
                         **{s: _spread(per[s]) for s in SIDES}, "ratio": _spread(ratios),
                         "per_round": per})
    return rows


def ceiling(summary: list[dict[str, Any]], phase: str, cores: float) -> dict[str, float]:
    """What ``cores`` can carry of ``phase``'s load, from ``langgraph dev``'s
    medians: the load alone costs ``client_cpu_ms_per_run`` of CPU per run, so
    no server on this machine passes ``cores / client`` runs/s (``any_server``),
    and one that costs as little CPU per run as ``langgraph dev`` passes no
    more than ``cores / (client + server)`` (``as_cheap``); each also as a
    ratio to ``langgraph dev``'s runs/s. Empty without those rows."""
    medians = {row["metric"]: row["langgraph"].get("median") for row in summary
               if row["phase"] == phase}
    client, server, rate = (medians.get(k) for k in (
        "client_cpu_ms_per_run", "cpu_ms_per_run", "runs_per_s"))
    if not client or not server or not rate:
        return {}
    any_server = cores * 1000.0 / client
    as_cheap = cores * 1000.0 / (client + server)
    return {"cores": cores, "any_server_runs_per_s": any_server,
            "any_server_ratio": any_server / rate,
            "as_cheap_runs_per_s": as_cheap, "as_cheap_ratio": as_cheap / rate}


def targets(summary: list[dict[str, Any]], kills: dict[str, dict[str, Any]],
            cores: float | None = None) -> list[dict[str, Any]]:
    def ratio(phase: str, metric: str) -> dict[str, float]:
        for row in summary:
            if row["phase"] == phase and row["metric"] == metric:
                return dict(row["ratio"])
        return {}

    cores = cores or float(len(os.sched_getaffinity(0)))
    out = []
    for phase in ("stream", "background"):
        thr, p99 = ratio(phase, "runs_per_s"), ratio(phase, "end_ms_p99")
        if thr:
            out.append({"target": f"{phase}: throughput >= 1.5x langgraph dev",
                        "ratio": thr, "met": thr["median"] >= 1.5,
                        "met_every_round": thr["min"] >= 1.5,
                        "ceiling": ceiling(summary, phase, cores)})
        if p99:
            out.append({"target": f"{phase}: p99 end-to-end <= 0.7x langgraph dev",
                        "ratio": p99, "met": p99["median"] <= 0.7,
                        "met_every_round": p99["max"] <= 0.7})
    if "hayata" in kills:
        k = kills["hayata"]
        out.append({"target": "after kill -9: 0 runs lost, 0 nodes run twice",
                    "hayata": {"runs_lost": k["runs_lost"],
                               "nodes_started_twice": k["nodes_started_twice"],
                               "nodes_ended_twice": k["nodes_ended_twice"]},
                    "langgraph": {key: kills.get("langgraph", {}).get(key) for key in (
                        "runs_lost", "nodes_started_twice", "nodes_ended_twice")},
                    "met": k["runs_lost"] == 0 and k["nodes_started_twice"] == 0
                    and k["nodes_ended_twice"] == 0})
    return out


def report(summary: list[dict[str, Any]], kills: dict[str, dict[str, Any]],
           goals: list[dict[str, Any]]) -> str:
    rows = []
    for row in summary:
        digits = 1 if row["metric"] in ("runs_per_s", "peak_pss_mb", "cpu_ms_per_run",
                                        "client_cpu_ms_per_run") else 0

        def cell(s: dict[str, float], d: int = digits) -> str:
            return f"{fmt(s['median'], d)} [{fmt(s['min'], d)}-{fmt(s['max'], d)}]" \
                if s else "-"
        rows.append([f"{row['phase']} {row['metric']}", cell(row["langgraph"]),
                     cell(row["hayata"]), cell(row["ratio"], 2)])
    text = table(["row", "langgraph dev", "hayata serve", "hayata/langgraph"], rows)
    if kills:
        keys = ["accepted", "kill_at_s", "ended_before_kill", "in_flight_at_kill",
                "nodes_caught_mid_run", "runs_lost",
                "nodes_started_twice", "nodes_ended_twice", "streams_cut", "streams_resumed",
                "restart_s", "settle_s", "outcomes"]
        krows = [[k, *(str(round(v, 1) if isinstance(v := kills.get(s, {}).get(k), float)
                           else v) for s in SIDES)] for k in keys]
        text += "\n\nkill -9 mid-load, restart on the same data\n" + table(
            ["", "langgraph dev", "hayata serve"], krows)
    for goal in goals:
        text += f"\n{goal['target']}: {'MET' if goal['met'] else 'NOT MET'}"
        if "ratio" in goal:
            r = goal["ratio"]
            text += f" (ratio median {fmt(r['median'])}, range {fmt(r['min'])}-{fmt(r['max'])})"
        if c := goal.get("ceiling"):
            text += (f"\n  ceiling on {fmt(c['cores'], 0)} cores, from the load's own CPU per "
                     f"run: any server {fmt(c['any_server_runs_per_s'], 1)} runs/s "
                     f"({fmt(c['any_server_ratio'])}x langgraph dev), a server as cheap as "
                     f"langgraph dev {fmt(c['as_cheap_runs_per_s'], 1)} runs/s "
                     f"({fmt(c['as_cheap_ratio'])}x)")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 50 streams, 100 runs, 2 rounds, a kill of 10 + 100")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--streams", type=int, default=None, help="default 1,000")
    parser.add_argument("--runs", type=int, default=None, help="default 10,000")
    parser.add_argument("--delay", type=float, default=0.2,
                        help="seconds the middle node waits")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="requests in flight for creates and joins (default 1,000)")
    parser.add_argument("--kill-streams", type=int, default=None, help="default 200")
    parser.add_argument("--kill-runs", type=int, default=None, help="default 2,000")
    parser.add_argument("--kill-share", type=float, default=0.3,
                        help="kill once this share of the drill's runs has ended")
    parser.add_argument("--kill-min-s", type=float, default=12.0,
                        help="kill no sooner than this many seconds into the load (langgraph "
                        "dev saves its state every 10 s; before its first save it loses "
                        "everything), unless 90%% of the runs have ended")
    parser.add_argument("--kill-deadline", type=float, default=300.0,
                        help="seconds: kill anyway after, and how long runs may take after")
    parser.add_argument("--phase-timeout", type=float, default=900.0,
                        help="seconds a stream or background phase may take: runs not "
                        "done by then count as failed (timed_out)")
    parser.add_argument("--phases", default="stream,background,kill")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--lg-jobs", type=int, default=None,
                        help="langgraph dev's --n-jobs-per-worker (default: hayata "
                        "serve's runs at once, hayata_py.serve._runs.MAX_RUNNING)")
    parser.add_argument("--venv", type=Path, default=Path(
        os.environ.get("LGDEV_VENV", ROOT / ".venv-langgraph-dev")))
    parser.add_argument("--out", default=None, help="results file name (no .json)")
    parser.add_argument("--keep-workdir", action="store_true",
                        help="keep the kill drill's folder (server logs, data) to read")
    raw = parser.parse_args()
    from hayata_py.serve._runs import MAX_RUNNING

    # a TERM (e.g. `timeout`) unwinds through the finally blocks that stop the servers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    quick = raw.quick
    args = Args(
        rounds=raw.rounds or (2 if quick else 3),
        streams=raw.streams or (50 if quick else 1000),
        runs=raw.runs or (100 if quick else 10000),
        delay=raw.delay,
        concurrency=raw.concurrency or (200 if quick else 1000),
        kill_streams=raw.kill_streams or (10 if quick else 200),
        kill_runs=raw.kill_runs or (100 if quick else 2000),
        kill_share=raw.kill_share,
        lg_jobs=raw.lg_jobs or MAX_RUNNING,
        lgdev=ensure_venv(raw.venv.resolve()),
        phase_timeout=raw.phase_timeout,
        phases=[p for p in raw.phases.split(",") if p in ("stream", "background")])
    sides = [s for s in SIDES if s in raw.sides.split(",")]
    load_before = os.getloadavg()
    started = time.time()
    print(f"bench_serve: {args.rounds} rounds, {args.streams} streams, {args.runs} runs, "
          f"langgraph dev --n-jobs-per-worker {args.lg_jobs}, load {load_before[0]:.1f}",
          flush=True)
    rounds: list[dict[str, dict[str, Any]]] = []
    if args.phases:
        for index in range(args.rounds):
            order = sides if index % 2 == 0 else list(reversed(sides))
            print(f"round {index + 1}: {' then '.join(order)}", flush=True)
            rounds.append({side: one_side(side, args) for side in order})
    kills: dict[str, dict[str, Any]] = {}
    if "kill" in raw.phases.split(","):
        for side in sides:
            print(f"kill drill: {side}", flush=True)
            kills[side] = asyncio.run(kill_drill(
                side, args.lgdev, args.lg_jobs, args.kill_streams, args.kill_runs,
                args.delay, args.kill_share, raw.kill_min_s, args.concurrency,
                raw.kill_deadline, raw.keep_workdir))
            print(f"  {json.dumps(kills[side], default=str)}", flush=True)
    summary = summarize(rounds, args.phases) if len(sides) == 2 and rounds else []
    goals = targets(summary, kills) if len(sides) == 2 else []
    text = report(summary, kills, goals)
    print(text, flush=True)
    name = raw.out or ("bench_serve-quick" if quick else "bench_serve")
    folder = RESULTS_DIR / "serve"
    folder.mkdir(parents=True, exist_ok=True)
    data = {"environment": environment(), "argv": sys.argv[1:], "started_utc": time.strftime(
        "%Y-%m-%d %H:%M:%S", time.gmtime(started)), "wall_s": time.time() - started,
        "load_before": load_before, "load_after": os.getloadavg(),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "summary": summary, "targets": goals, "kills": kills, "rounds": rounds}
    from benchmarks._util import _clean

    (folder / f"{name}.json").write_text(json.dumps(_clean(data), indent=2) + "\n")
    (folder / f"{name}.txt").write_text(text + "\n")
    print(f"wrote {folder / name}.json and .txt")


if __name__ == "__main__":
    main()
