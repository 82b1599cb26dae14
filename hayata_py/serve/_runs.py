"""Runs: a durable queue per thread, carried out by the LangGraph runner.

A run is recorded ``pending`` before the response that accepts it (by the
endpoint, through :class:`~hayata_py.serve._db.ServeDB`). The scheduler starts
the oldest pending run of each thread that runs nothing; a worker thread
follows the runner's stream and appends each chunk to the run's event log
(``hayata_serve_run_events``) under the next sequence number, which is what
every SSE client reads, live or resuming from ``Last-Event-ID``.

Several servers may share one store. Each has a stable id (its agent
system's name) and a lease it renews every third of ``lease_seconds``; a
server claims a run when it starts it (``owner``, compare-and-set, so one
server wins) and records its events only while it still owns it (fenced). A
``running`` run whose server's lease expired (killed, cut off) is taken over
by any live server, as is one this server left running before a restart:
``invoke(None)`` recovers the thread's unfinished invocation, with nothing
completed run again, once the dead system's lease on that invocation has
expired too. Streams of runs another server carries out are woken by a
follower that polls the log of the runs being watched (one query a tick).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from langgraph.types import Command

from hayata_py._errors import HayataError, TimeoutError_
from hayata_py.langgraph import HayataGraph
from hayata_py.langgraph._app import invocation_of
from hayata_py.serve._db import RunLost, RunRow, ServeDB
from hayata_py.serve._tails import Row, Tails
from hayata_py.serve._wire import jsonable

__all__ = ["Runner", "run_config"]

log = logging.getLogger("hayata.serve")

TERMINAL = frozenset({"success", "error", "interrupted", "timeout"})
_RUNNER_MODES = ["values", "updates", "custom", "messages"]
CANCEL_WAIT = 10.0
"""Seconds a cancel waits for a running run's worker to start its invocation."""
_ON_REQUEST = ("debug", "tasks", "checkpoints", "events")
"""Modes the runner streams only for a run that asks for them."""
MAX_RUNNING = 1000
"""Runs of one graph a server carries out at once, by default (each on a
thread of its own; the graph's agent runs as many invocations at once)."""
LEASE_SECONDS = 10.0
"""A server's lease on its runs (and its graphs' invocations), by default."""
OWN_RESCAN = 30.0
"""Seconds between two looks for this server's own running runs that no worker
carries out (the first at start)."""
READY_BATCH = 500
"""Pending runs the scheduler reads at most per look (the oldest of each thread)."""
RESUME_ASKS = 8
"""Times a run starts its graph again when the agent did not answer before
anything ran (an agent busy taking many runs back, or starting many at once)."""
READY_SLACK = 8
"""Pending runs read beyond a graph's room (some may be claimed meanwhile by
another server, or be of a thread whose last run's worker is still ending)."""
SETTLE_READS = 3
"""Reads of a thread's state a run's end tries for its status before it gives up."""
FOLLOW_INTERVAL = 0.1
"""Seconds between two looks at the logs of watched runs another server carries out."""
OTHERS_INTERVAL = 1.0
"""Seconds between two looks at whether other servers share the store (while
none does, the follower reads nothing)."""


def run_config(run: RunRow) -> dict[str, Any]:
    """The LangGraph config a run's graph runs with; its ``run_id`` names the
    run's invocation (:func:`~hayata_py.langgraph._app.invocation_of`), so
    after a crash a server can tell whether the run began."""
    kwargs = run.kwargs
    base = dict(kwargs.get("config") or {})
    configurable = {k: v for k, v in (base.get("configurable") or {}).items()
                    if k not in ("thread_id", "checkpoint_id", "checkpoint_ns")}
    configurable["thread_id"] = run.thread_id
    if kwargs.get("checkpoint_id"):
        configurable["checkpoint_id"] = kwargs["checkpoint_id"]
    config: dict[str, Any] = {"configurable": configurable, "run_id": run.run_id,
                              "run_name": run.graph_id}
    if "recursion_limit" in base:
        config["recursion_limit"] = base["recursion_limit"]
    return config


class StreamEvents:
    """A run's stream chunks as the events its log records, and what they told
    of its end: the interrupts it stopped at and its last values."""

    def __init__(self) -> None:
        self.interrupts: list[Any] = []
        self.last_values: Any = None

    def event(self, namespace: tuple[str, ...], mode: str, chunk: Any) -> tuple[str, Any]:
        """The logged ``(event, data)`` of one chunk. A subgraph's is named as
        LangGraph's server names it, ``mode|node:task id|...`` (a level per
        subgraph), and tells nothing of the run's end."""
        if mode == "messages":
            message, meta = chunk
            data: Any = [jsonable(message), jsonable(meta)]
        else:
            data = jsonable(chunk)
        if namespace:
            return f"{mode}|{'|'.join(namespace)}", data
        if mode == "values":
            self.last_values = data
        elif mode == "updates" and isinstance(data, dict) and "__interrupt__" in data:
            found = [{**i, "response_schema": None} for i in data["__interrupt__"]]
            self.interrupts.extend(found)
            data = {"__interrupt__": found}
        return mode, data

    def closing(self) -> tuple[str, Any] | None:
        """The ``values`` event that ends a run stopped at an interrupt, when its
        last values did not carry the interrupts already (LangGraph's server
        puts them there, as ``__interrupt__``)."""
        last = self.last_values
        if not self.interrupts or (isinstance(last, dict) and "__interrupt__" in last):
            return None
        return "values", {**(last if isinstance(last, dict) else {}),
                          "__interrupt__": self.interrupts}


def _taken(exc: Exception) -> bool:
    """Whether ``exc`` refuses a run because its invocation was started (by an
    earlier Run whose answer did not come in time)."""
    return isinstance(exc, HayataError) and exc.code in ("invocation_exists", "thread_busy")


def _input(kwargs: Mapping[str, Any]) -> Any:
    command = kwargs.get("command")
    if command:
        return Command(resume=command.get("resume"), update=command.get("update"),
                       goto=command.get("goto") or ())
    return kwargs.get("input")


class _Wakers:
    """asyncio events, one per run, set from any thread when the run changes."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.events: dict[str, set[asyncio.Event]] = {}
        self.lock = threading.Lock()

    def watch(self, run_id: str) -> asyncio.Event:
        event = asyncio.Event()
        with self.lock:
            self.events.setdefault(run_id, set()).add(event)
        return event

    def unwatch(self, run_id: str, event: asyncio.Event) -> None:
        with self.lock:
            watchers = self.events.get(run_id)
            if watchers is not None:
                watchers.discard(event)
                if not watchers:
                    del self.events[run_id]

    def wake(self, run_id: str) -> None:
        loop = self.loop
        with self.lock:
            watchers = list(self.events.get(run_id, ()))
        if loop is None or not watchers:
            return
        for event in watchers:
            loop.call_soon_threadsafe(event.set)


class _EventWriter:
    """Appends the stream events of all the runs of a server, those queued at
    one time in one transaction (a thousand streams: a few transactions a
    tick, not one per event), in the order they were submitted. Each
    :meth:`submit` returns a future of the rows written (or the
    :class:`RunLost` they were refused with)."""

    def __init__(self, db: ServeDB) -> None:
        self.db = db
        self._queue: list[tuple[str, list[tuple[str, Any]], str,
                                concurrent.futures.Future[list[Row]]]] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, run_id: str, items: list[tuple[str, Any]], owner: str
               ) -> concurrent.futures.Future[list[Row]]:
        """Log ``items`` as ``run_id``'s next events, after everything submitted
        before; the future of the rows written."""
        future: concurrent.futures.Future[list[Row]] = concurrent.futures.Future()
        with self._cond:
            self._queue.append((run_id, items, owner, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._write, daemon=True,
                                                name="hayata-serve-events")
                self._thread.start()
            self._cond.notify()
        return future

    def _write(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                batch, self._queue = self._queue, []
            try:
                outcomes = self.db.append_batch(
                    [(run_id, items, owner) for run_id, items, owner, _ in batch])
            except BaseException as exc:  # noqa: BLE001 - each writer gets the error
                for *_, future in batch:
                    future.set_exception(exc)
                continue
            for (*_, future), outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, RunLost):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)


class Runner:
    """The scheduler and the workers of a server's runs.

    ``server_id``: this server's stable id among the servers of one store (a
    restarted server with the same id takes its runs back at once);
    ``lease_seconds``: how long the others wait, once it stops renewing its
    lease, before they take its running runs over; ``max_running``: runs of
    one graph started at once at most (its agent's ``max_invocations``): the
    others wait their turn, pending, in the durable queue."""

    def __init__(self, db: ServeDB, graphs: Mapping[str, HayataGraph], *,
                 server_id: str = "local", url: str = "",
                 lease_seconds: float = LEASE_SECONDS,
                 follow_interval: float = FOLLOW_INTERVAL,
                 max_running: int = MAX_RUNNING) -> None:
        self.db = db
        self.graphs = graphs
        self.max_running = max_running
        self._running: collections.Counter[str] = collections.Counter()
        """Graph -> runs of it this server's workers carry out now."""
        self.server_id = server_id
        self.url = url
        self.lease_seconds = lease_seconds
        self.follow_interval = follow_interval
        self.wakers = _Wakers()
        self.tails = Tails()
        self._events = _EventWriter(db)
        self._kick = threading.Event()
        self._stop = threading.Event()
        self._logging: dict[str, concurrent.futures.Future[list[Row]]] = {}
        """Run -> the last of its events submitted to the writer."""
        self._busy: set[str] = set()  # threads a worker of this process runs
        self._local: dict[str, RunRow] = {}  # runs a worker of this process carries out
        self._cancelled: set[str] = set()
        self._resume: set[str] = set()
        self._others = False
        """Whether another server held a live lease at the follower's last look."""
        self._lock = threading.Lock()
        self._renewed = 0.0
        self._next_takeover = 0.0
        self._next_own_scan = 0.0  # when to look for this server's left-over runs
        self._workers: list[threading.Thread] = []
        self._scheduler = threading.Thread(target=self._schedule, name="hayata-serve-runs",
                                           daemon=True)
        self._follower = threading.Thread(target=self._follow, name="hayata-serve-follow",
                                          daemon=True)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take the lease, then schedule: runs this server left running (and
        those of servers whose lease expired) are carried on."""
        self.wakers.loop = loop
        self.db.renew_server(self.server_id, self.url, self.lease_seconds, started=True)
        self._renewed = time.monotonic()
        self._scheduler.start()
        self._follower.start()

    def stop(self) -> None:
        """Stop scheduling and end the lease (other servers take over the runs
        left running)."""
        self._stop.set()
        self._kick.set()
        self._scheduler.join(timeout=5)
        self._follower.join(timeout=5)
        try:
            self.db.expire_server(self.server_id)
        except Exception:
            log.warning("hayata serve: could not end the lease of %s", self.server_id,
                        exc_info=True)

    def kick(self) -> None:
        self._kick.set()

    def cancel(self, run: RunRow, *, rollback: bool = False) -> None:
        """End ``run`` ``interrupted`` now (delete it, for a ``rollback``) and stop
        logging its stream; a pending run never starts. A running run's graph invocation is stopped
        (:meth:`HayataGraph.cancel`): the thread keeps the supersteps it
        completed or, with ``rollback``, goes back to where it was before the
        run. A run whose worker has not started its invocation yet is asked
        again until it has (at most ``CANCEL_WAIT`` s). A run another server
        carries out is stopped by that server, which sees it ended (or, for a
        rollback, deleted here: :meth:`_cancelled_elsewhere`). One a crash left
        unfinished is not stopped (it waits for a ``command``)."""
        with self._lock:
            self._cancelled.add(run.run_id)
        current = self.db.get_run(run.run_id)
        if current is not None and current.status == "running" \
                and current.owner not in (None, self.server_id):
            self._cancel_elsewhere(run, rollback=rollback)
        else:
            self._stop_invocation(run, rollback=rollback,
                                  still=lambda row: row is not None and row.status == "running")
            self._end_cancelled(run, rollback=rollback)
        self.kick()

    def _end_cancelled(self, run: RunRow, *, rollback: bool) -> None:
        """End a cancelled run: ``interrupted``, its thread too; for a rollback
        the run is deleted (as LangGraph's worker does) and its thread settles
        as its state says. For another server carrying the run out, that is
        what tells it to stop (:meth:`_cancelled_elsewhere`)."""
        if rollback:
            self.db.delete_run(run.run_id)
            self.settle(run.thread_id)
        elif self.db.set_run_status(run.run_id, "interrupted",
                                    only_from=["pending", "running"]):
            self.settle(run.thread_id, cancelled=True)
        self.wakers.wake(run.run_id)

    def _cancel_elsewhere(self, run: RunRow, *, rollback: bool) -> None:
        """Cancel ``run``, which another server carries out: its end
        (``interrupted``) or, for a rollback, its deletion tells that server to
        stop its invocation; this one waits for that and then, for a rollback,
        puts the thread back where it was before the run."""
        running = self._thread_invocation(run)
        self._end_cancelled(run, rollback=rollback)
        if running is not None and self._until_stopped(run, running) and rollback:
            try:
                self.graphs[run.graph_id].roll_back(
                    {"configurable": {"thread_id": run.thread_id}}, running)
            except HayataError as exc:
                log.warning("hayata serve: run %s: its thread was not rolled back: %s",
                            run.run_id, exc)
            self.settle(run.thread_id)

    def _stop_invocation(self, run: RunRow, *, rollback: bool,
                         still: Callable[[RunRow | None], bool]) -> None:
        """Stop the graph invocation of ``run`` in this server's system while
        ``still(the run's row)`` holds (asking again while its worker is
        starting it, for at most ``CANCEL_WAIT`` s)."""
        graph = self.graphs.get(run.graph_id)
        deadline = time.monotonic() + CANCEL_WAIT
        while graph is not None:
            if not still(self.db.get_run(run.run_id)):
                break  # pending: it never starts; or it has ended
            try:
                if graph.cancel({"configurable": {"thread_id": run.thread_id}},
                                rollback=rollback) is not None:
                    break
            except HayataError as exc:
                log.warning("hayata serve: run %s: its invocation was not stopped: %s",
                            run.run_id, exc)
                break
            if time.monotonic() > deadline:
                log.warning("hayata serve: run %s: no invocation of it to stop within %ss",
                            run.run_id, CANCEL_WAIT)
                break
            self._stop.wait(0.02)  # its worker is starting its invocation: ask again

    def _thread_invocation(self, run: RunRow) -> str | None:
        """The running invocation of ``run``'s thread, if any."""
        graph = self.graphs.get(run.graph_id)
        invocations = graph.threads.invocations(run.thread_id) if graph is not None else []
        return invocations[0][0] if invocations and invocations[0][1] == "running" else None

    def _until_stopped(self, run: RunRow, invocation: str) -> bool:
        """Wait (at most ``CANCEL_WAIT`` s) until the thread's ``invocation``,
        which another server's system runs, no longer runs; whether it stopped."""
        graph = self.graphs[run.graph_id]
        deadline = time.monotonic() + CANCEL_WAIT
        while dict(graph.threads.invocations(run.thread_id)).get(invocation) == "running":
            if time.monotonic() > deadline or self._stop.is_set():
                log.warning("hayata serve: run %s: its invocation did not stop where it "
                            "runs within %ss", run.run_id, CANCEL_WAIT)
                return False
            self._stop.wait(0.05)  # the server carrying it out looks once a second
        return True

    def _cancelled_elsewhere(self) -> None:
        """Stop the invocations of this server's runs that another server
        cancelled (it ended the run ``interrupted``, or deleted it; the other
        server rolls the thread back for a rollback once it has stopped);
        each in a thread of its own (a stop may wait for its invocation to
        start)."""
        with self._lock:
            local = {r: run for r, run in self._local.items() if r not in self._cancelled}
        if not local:
            return
        marks = self.db.run_marks(list(local))
        for run_id, run in local.items():
            status = marks[run_id][1] if run_id in marks else None
            if status not in (None, "interrupted"):
                continue
            with self._lock:
                self._cancelled.add(run_id)
            log.info("hayata serve: run %s was cancelled by another server; stopping its "
                     "invocation", run_id)
            self.wakers.wake(run_id)
            threading.Thread(target=self._stop_invocation, args=(run,), kwargs={
                "rollback": False,
                "still": lambda current, deleted=status is None: deleted or (
                    current is not None and current.status == "interrupted")},
                name=f"hayata-serve-stop-{run_id}", daemon=True).start()

    # -- scheduling ----------------------------------------------------------------

    def _schedule(self) -> None:
        while not self._stop.is_set():
            self._kick.wait(timeout=0.2)
            self._kick.clear()
            try:
                self._renew()
                self._start_ready()
            except Exception:
                log.exception("hayata serve: scheduling runs failed; trying again")

    def _renew(self) -> None:
        if time.monotonic() - self._renewed >= self.lease_seconds / 3:
            self.db.renew_server(self.server_id, self.url, self.lease_seconds)
            self._renewed = time.monotonic()

    def _orphaned(self, run: RunRow, leases: dict[str, float]) -> bool:
        """Whether nobody carries the running ``run`` out: this server's before
        a restart, one of a server whose lease expired, or one without owner."""
        if run.run_id in self._local:
            return False
        if run.owner is None or run.owner == self.server_id:
            return True
        return leases.get(run.owner, 0.0) < time.time()

    def _start_ready(self) -> None:
        """Start the pending runs that may start, as many as the graphs have
        room for (a graph at ``max_running`` reads none: the queue's length
        does not make a look dearer)."""
        self._take_over()
        with self._lock:
            room = {g: self.max_running - self._running[g] for g in self.graphs}
        ready: list[RunRow] = []
        for graph_id, free in sorted(room.items()):
            if free > 0:  # per graph: one's backlog does not crowd another out
                ready += self.db.ready_runs(min(READY_BATCH, free + READY_SLACK),
                                            now=time.time(), graphs=[graph_id])
        for run in ready:
            with self._lock:
                if run.thread_id in self._busy \
                        or self._running[run.graph_id] >= self.max_running:
                    continue
                if not self.db.claim_run(run.run_id, self.server_id, status="pending",
                                         previous=run.owner):
                    continue
                self._launch(run)

    def _take_over(self) -> None:
        """Carry on the running runs nobody carries out (this server's before a
        restart, those of servers whose lease expired): looked for at start and
        then every tenth of ``lease_seconds``, at most every second)."""
        if time.monotonic() < self._next_takeover:
            return
        self._next_takeover = time.monotonic() + min(self.lease_seconds / 10, 1.0)
        leases: dict[str, float] | None = None
        # this server's own running runs are left over from before it started,
        # or by a worker that could not record its run's end (the store was
        # down): looked for at start and every OWN_RESCAN s; in between only
        # other servers' (none, alone on the store)
        mine_too = time.monotonic() >= self._next_own_scan
        running = self.db.runs_with_status(
            ["running"], not_owned_by=None if mine_too else self.server_id)
        if mine_too:  # read: the next look at this server's own in OWN_RESCAN s
            self._next_own_scan = time.monotonic() + OWN_RESCAN
        for run in running:
            if run.run_id in self._local:
                continue
            if leases is None and run.owner not in (None, self.server_id):
                leases = self.db.server_leases()
            with self._lock:
                if not self._orphaned(run, leases or {}) or run.thread_id in self._busy \
                        or not self.db.claim_run(run.run_id, self.server_id,
                                                 status="running", previous=run.owner):
                    continue
                if run.owner not in (None, self.server_id):
                    log.warning("hayata serve: taking over run %s of server %s (its "
                                "lease expired)", run.run_id, run.owner)
                self._resume.add(run.run_id)
                self._launch(run)

    def _launch(self, run: RunRow) -> None:
        """A worker for ``run``, claimed by this server (under ``_lock``)."""
        self._busy.add(run.thread_id)
        self._local[run.run_id] = run
        self._running[run.graph_id] += 1
        self.tails.open(run.run_id)
        worker = threading.Thread(target=self._work, args=(run,),
                                  name=f"hayata-serve-run-{run.run_id}", daemon=True)
        worker.start()

    def _follow(self) -> None:
        """Wake the streams of watched runs that another server carries out
        when their log or status changes (this server's own wake at once)."""
        seen: dict[str, tuple[int, str]] = {}
        others_checked, others = 0.0, False
        while not self._stop.wait(self.follow_interval):
            if time.monotonic() - others_checked >= OTHERS_INTERVAL:
                others_checked = time.monotonic()
                try:
                    self._others = others = self._others_alive()
                    if others:
                        self._cancelled_elsewhere()
                except Exception:
                    log.warning("hayata serve: reading the servers' leases or this "
                                "server's runs failed", exc_info=True)
                    self._others = others = True
            seen = self._follow_once(seen, others)

    def _follow_once(self, seen: dict[str, tuple[int, str]], others: bool
                     ) -> dict[str, tuple[int, str]]:
        """One look of the follower: with ``others`` (another server alive),
        read the marks of the watched runs not carried out here and wake those
        that changed since ``seen``; the marks seen now."""
        with self.wakers.lock:
            watched = [r for r in self.wakers.events if r not in self._local] \
                if others else []
        if not watched:
            return {}
        try:
            marks = self.db.run_marks(watched)
        except Exception:
            log.warning("hayata serve: reading watched runs failed", exc_info=True)
            return seen
        for run_id, mark in marks.items():
            if seen.get(run_id) != mark:
                self.wakers.wake(run_id)
        return marks

    def _others_alive(self) -> bool:
        """Whether another server holds a live lease on this store (only then
        can a run this server watches be carried out elsewhere: alone, its
        own workers wake every stream they write to)."""
        now = time.time()
        return any(server != self.server_id and expires > now
                   for server, expires in self.db.server_leases().items())

    # -- one run -------------------------------------------------------------------

    def _append(self, run: RunRow, items: list[tuple[str, Any]]) -> None:
        """Log ``items`` as the run's next events without waiting for the write
        (the run's end waits for all of them: :meth:`_logged`); once written,
        its streams are woken. :class:`RunLost` if an earlier write of the run
        was refused (it is no longer this server's to log)."""
        if run.run_id in self._cancelled:
            return
        previous = self._logging.get(run.run_id)
        refused = previous.exception() if previous is not None and previous.done() else None
        if refused is not None:
            raise refused
        future = self._events.submit(run.run_id, items, self.server_id)
        self._logging[run.run_id] = future
        future.add_done_callback(lambda done: self._written(run.run_id, done))

    def _written(self, run_id: str, done: concurrent.futures.Future[list[Row]]) -> None:
        """A write of the run's events came back (in the writer's thread, in the
        order they were submitted)."""
        if done.exception() is None:
            self.tails.logged(run_id, done.result())
        self.wakers.wake(run_id)

    def _logged(self, run: RunRow) -> None:
        """Wait until every event of the run submitted so far is in the store;
        :class:`RunLost` if one was refused (unless the run is being cancelled:
        its events stop at the cancel)."""
        last = self._logging.get(run.run_id)
        if last is None:
            return
        try:
            last.result()
        except RunLost:
            if not self.is_cancelled(run.run_id):
                raise

    def _work(self, run: RunRow) -> None:
        try:
            self._carry_out(run)
        except RunLost as lost:
            log.warning("hayata serve: run %s stopped here: %s", run.run_id, lost)
        except Exception:
            log.exception("hayata serve: run %s failed outside its graph", run.run_id)
            self._finish(run, "error", {"error": "ServerError",
                                        "message": "the server failed carrying out the run"})
        finally:
            with self._lock:
                self._busy.discard(run.thread_id)
                self._local.pop(run.run_id, None)
                self._cancelled.discard(run.run_id)
                self._running[run.graph_id] -= 1
            self._logging.pop(run.run_id, None)
            self.tails.close(run.run_id)
            self.kick()

    def _carry_out(self, run: RunRow) -> None:
        if self.is_cancelled(run.run_id):
            # cancelled while this server took it up (the cancel saw it
            # pending): its invocation never starts
            self._finish(run, "interrupted", None)
            return
        graph = self.graphs[run.graph_id]
        resuming = run.run_id in self._resume
        self._resume.discard(run.run_id)
        if resuming or self._others:
            # with other servers, a thread's last run may have been cancelled
            # here while its invocation still stops where it ran
            self._until_claimable(run)
        if not resuming or self.db.last_seq(run.run_id) == 0:
            self._append(run, [("metadata", {"run_id": run.run_id, "attempt": 1})])
        if resuming and not self._began(graph, run):
            resuming = False  # a crash came before its invocation: start it now
        kwargs = run.kwargs
        config = run_config(run)
        if resuming:
            del config["run_id"]  # it goes on in (or after) the invocation that id names
        wanted = config["configurable"].get("checkpoint_id")
        if wanted and not resuming:
            head = graph.get_state({"configurable": {"thread_id": run.thread_id}}).config
            if (head.get("configurable") or {}).get("checkpoint_id") == wanted:
                del config["configurable"]["checkpoint_id"]  # the head: a continuation
        told = StreamEvents()
        error: dict[str, Any] | None = None
        asked = 0
        subgraphs = bool(kwargs.get("subgraphs"))
        while True:
            produced = False
            try:
                for item in graph.stream(
                        None if resuming else _input(kwargs), config,
                        stream_mode=_RUNNER_MODES + [
                            m for m in _ON_REQUEST if m in (kwargs.get("stream_mode") or ())],
                        interrupt_before=kwargs.get("interrupt_before"),
                        interrupt_after=kwargs.get("interrupt_after"), subgraphs=subgraphs):
                    produced = True
                    namespace, mode, chunk = item if subgraphs else ((), *item)
                    self._append(run, [told.event(namespace, mode, chunk)])
            except RunLost:
                raise
            except Exception as exc:  # noqa: BLE001 - the graph's error is the run's result
                if not produced and asked < RESUME_ASKS and (
                        isinstance(exc, TimeoutError_) or (asked and _taken(exc))):
                    # a busy agent (taking many runs back, or starting many)
                    # did not answer before the run went on: ask again, going
                    # on with the run's invocation if its Run was taken after
                    # all (a Run sent again with the same invocation id is
                    # refused, never run twice)
                    asked += 1
                    log.warning("hayata serve: run %s: its agent did not answer (%s); "
                                "asking again", run.run_id, exc)
                    self._still_mine(run)
                    self._stop.wait(min(0.5 * 2 ** asked, 10.0) * random.uniform(0.5, 1.0))
                    if not resuming and self._began(graph, run):
                        resuming = True
                        del config["run_id"]
                    continue
                error = {"error": type(exc).__name__, "message": str(exc)}
                self._append(run, [("error", error)])
            break
        closing = told.closing() if error is None else None
        if closing is not None:
            self._append(run, [closing])
        # Whether the graph stopped before a node, from its stream when it
        # tells: an interrupt did; with no static interrupt point, a graph that
        # ended without one ran to its end (only else is its state read).
        static = any((kwargs.get("interrupt_before"), kwargs.get("interrupt_after"),
                      graph.interrupt_before, graph.interrupt_after))
        stopped = True if told.interrupts else (None if static else False)
        self._logged(run)
        self._finish(run, "error" if error else "success", error, stopped=stopped)

    @staticmethod
    def _began(graph: HayataGraph, run: RunRow) -> bool:
        """Whether ``run``'s invocation was started before a crash: one of its
        thread's invocations is the run's (named by its ``run_id``), or the
        thread's newest still runs (a run whose invocation another id names)."""
        invocations = graph.threads.invocations(run.thread_id)
        mine = invocation_of({"run_id": run.run_id})
        return any(invocation == mine for invocation, _status in invocations) or bool(
            invocations and invocations[0][1] == "running")

    def _until_claimable(self, run: RunRow) -> None:
        """Wait while another system's lease still holds the thread's unfinished
        invocation (a server just taken over: its system's lease on the
        invocation expires about when the server's did); :class:`RunLost` if
        the run stops being this server's meanwhile."""
        graph = self.graphs[run.graph_id]
        pause = min(0.2, self.lease_seconds / 10)
        while not self._stop.is_set():
            running = next((i for i, status in graph.threads.invocations(run.thread_id)
                            if status == "running"), None)
            if running is None:
                return
            try:
                # the one invocation only: a thousand runs taken over at once
                # must not each have the agent describe all of them
                if not any(u.recovery == "busy" for u in graph.agent.unfinished(running)):
                    return
            except TimeoutError:
                log.warning("hayata serve: run %s: its agent is slow to say whether the "
                            "thread is free; asking again", run.run_id)
            self._still_mine(run)
            # backing off to half a lease, with jitter: a thousand runs taken
            # over at once must not ask their agent thousands of times a second
            self._stop.wait(pause * random.uniform(0.5, 1.0))
            pause = min(2 * pause, self.lease_seconds / 2)
        raise RunLost(f"server {self.server_id} stopped")

    def _still_mine(self, run: RunRow) -> None:
        """:class:`RunLost` unless ``run`` is still this server's to carry out."""
        current = self.db.get_run(run.run_id)
        if current is None or current.owner != self.server_id:
            raise RunLost(f"run {run.run_id} is no longer {self.server_id}'s")

    def _finish(self, run: RunRow, status: str, error: dict[str, Any] | None, *,
                stopped: bool | None = None) -> None:
        """End ``run`` ``status``; ``stopped``: whether its graph stopped before a
        node, if its stream told (else the thread's state is read)."""
        cancelled = run.run_id in self._cancelled
        if not cancelled:
            if error is not None:
                thread_status = "error"
            else:
                if stopped is None:
                    stopped = self._stopped(run.graph_id, run.thread_id)
                thread_status = "interrupted" if stopped else "idle"
            if self.db.end_run(run.run_id, status, owner=self.server_id,
                               thread_id=run.thread_id, thread_status=thread_status,
                               error=error):
                # a run whose thread stopped may be carried on (carry_on) or
                # given an error (end_abandoned) later: its log is not final
                self.tails.ended(run.run_id, status,
                                 final=thread_status != "interrupted")
        elif self.db.set_run_status(run.run_id, "interrupted", only_from=["running"]):
            self.settle(run.thread_id, cancelled=True)
        self.wakers.wake(run.run_id)
        if run.kwargs.get("temporary") and not cancelled:
            self.db.delete_thread(run.thread_id, keep_runs=True)

    def settle(self, thread_id: str, *, error: dict[str, Any] | None = None,
               cancelled: bool = False, stopped: bool | None = None) -> None:
        """The thread's status after a run: busy while another run waits,
        ``error`` after a failed run, ``interrupted`` when its graph stopped
        before a node (or the run was cancelled), else ``idle``. ``stopped``:
        whether the graph stopped before a node, when the run's stream told;
        None: its state says (read again while the read fails, a busy agent)."""
        thread = self.db.get_thread(thread_id)
        if thread is None:
            return
        if cancelled:
            status = "interrupted"
        elif error is not None:
            status = "error"
        else:
            if stopped is None:
                stopped = self._stopped(thread.graph_id, thread_id)
            status = "interrupted" if stopped else "idle"
        if any(r.status == "pending" for r in self.db.active_runs(thread_id)):
            status = "busy"
        self.db.update_thread(thread_id, status=status, error=error)

    def _stopped(self, graph_id: str | None, thread_id: str) -> bool:
        """Whether the thread's graph stopped before a node (its state's
        ``next``). A read that fails (its agent too busy to answer in time) is
        tried again, up to ``SETTLE_READS`` times; then the thread counts as
        at its end: the run's status follows its graph, never this read."""
        for attempt in range(1, SETTLE_READS + 1):
            try:
                return bool(self.next_nodes(graph_id, thread_id))
            except (HayataError, TimeoutError) as exc:
                log.warning("hayata serve: reading thread %s's state failed (%d of %d): %s",
                            thread_id, attempt, SETTLE_READS, exc)
                if attempt < SETTLE_READS and self._stop.wait(0.1 * attempt):
                    break
        return False

    def next_nodes(self, graph_id: str | None, thread_id: str) -> list[str]:
        graph = self.graphs.get(graph_id or "")
        if graph is None:
            return []
        state = graph.get_state({"configurable": {"thread_id": thread_id}})
        return list(state.next)

    def is_cancelled(self, run_id: str) -> bool:
        return run_id in self._cancelled

    def tail(self, run_id: str, seq: int) -> tuple[str, list[Row]] | None:
        """The run's status and its log's rows after ``seq`` when this server
        carries the run out and has them at hand (:class:`Tails`); None: read
        the store (also while the run is being cancelled)."""
        if run_id in self._cancelled:
            return None
        return self.tails.after(run_id, seq)

    def kept_status(self, run_id: str) -> str | None:
        """The run's status when this server carries it out or it ended here
        (:class:`Tails`); None: read the store (also while it is being
        cancelled)."""
        if run_id in self._cancelled:
            return None
        return self.tails.status(run_id)


    # -- a run that waited on a task a crash left uncertain ------------------------

    def carry_on(self, run: RunRow) -> bool:
        """Carry ``run`` on where it stopped: it ended asking about tasks a crash
        left uncertain, and they are answered. Its row goes back to ``pending``
        and the runner goes on with the thread's unfinished invocation
        (``invoke(None)``), appending to the same event log, so a client
        joining its stream from ``Last-Event-ID`` gets the rest and the end.
        False (nothing changed) when the run is not ``success``."""
        self.tails.forget(run.run_id)
        with self._lock:
            self._resume.add(run.run_id)
        if not self.db.set_run_status(run.run_id, "pending", only_from=["success"]):
            with self._lock:
                self._resume.discard(run.run_id)
            return False
        self.db.update_thread(run.thread_id, status="busy")
        self.wakers.wake(run.run_id)
        self.kick()
        return True

    def end_abandoned(self, run: RunRow, error: dict[str, Any]) -> bool:
        """End ``run``, which waited on tasks a crash left uncertain and whose
        invocation was abandoned, ``error``: ``error`` is appended to its event
        log and the thread turns ``error``. False (nothing changed) when the run
        is not ``success``."""
        self.tails.forget(run.run_id)
        current = self.db.get_run(run.run_id)
        if current is None or current.status != "success":
            return False
        self.db.append_events(run.run_id, [("error", error)])
        self.db.set_run_status(run.run_id, "error", only_from=["success"])
        self.settle(run.thread_id, error=error)
        self.wakers.wake(run.run_id)
        return True
