"""The agent actor: a shell around a table of invocation machines (``hayata_py._invocation``).

It turns messages into the machines' events and carries out their commands:
calling the decision policy, durable writes (the
:class:`~hayata_py._actors.ledger.Ledger`), sending tasks straight to edges
(the :class:`~hayata_py._actors.edges.EdgePool`), cancelling them, arming
each task's deadline and retry backoff, and sending results. Each machine
alone decides when its steps and its invocation are over.

An agent runs up to ``max_invocations`` invocations at once. Every message
about a running one names it (a task's execution id is
``<invocation>:<step>``), so it reaches its machine in O(1); deadlines of all
of them share one heap (``timers.py``); tasks of all of them wait for edges in
one first-in first-out queue per node (``edges.py``).

Ownership: each invocation is held under a lease owned by the system's name;
one timer renews them all every third of ``spec.lease_seconds``; a refused
renewal stops that run (``ownership_lost``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

from thespian.actors import WakeupMessage

from hayata_py import _invocation as m
from hayata_py import _telemetry as telemetry
from hayata_py._actors import _protocol as p
from hayata_py._actors import pauses, procs, recoveries
from hayata_py._actors._wellformed import drop_malformed
from hayata_py._actors.boundary import validate_run as validate_run
from hayata_py._actors.edges import EdgePool, edge_died, run_task
from hayata_py._actors.ledger import Ledger
from hayata_py._actors.maps import COMMANDS, MESSAGES, MapLink
from hayata_py._actors.spans import InvocationSpans
from hayata_py._actors.timers import Deadlines, Due, invocation_of
from hayata_py._callables import import_problem, resolve_callable
from hayata_py._config import AgentSpec
from hayata_py._errors import HayataError, RecoveryRejected, RunRejected, StoreError
from hayata_py.messages import (
    Abandon,
    AgentEvent,
    AgentResult,
    Caller,
    GetResult,
    GetStatus,
    GetUnfinished,
    Recover,
    ResolveTask,
    ResumePaused,
    Run,
    RunAccepted,
    UnfinishedList,
    WaitResult,
)
from hayata_py.store import InvocationRecord
from supervisors import SupervisedActor

ELSEWHERE_CHECK = 1.0
"""Seconds between two looks at the store for waited-for invocations that this
agent does not run (queued ones, ones another system took over)."""


@dataclass
class Running:
    """One invocation in flight: its machine and what the agent keeps for it."""

    inv: m.Invocation
    token: int
    subscriber: Any
    folded: m.Checkpoint | None = None
    """The current step's checkpoint, not written here: it rides on every RunTask
    of the step and each edge commits it with its ``started``, in the same
    transaction (docs/design.md, "Fewer commits per step")."""
    map: MapLink | None = None
    """The reducer link of its map step, while one runs."""
    run_id: int = 0
    """This run's identity: its events and result carry it (``RunAccepted.run``)."""
    next_started: InvocationRecord | None = None
    """The run the store started with this one's end (its thread's next queued
    run), begun once this one has ended."""


@dataclass(frozen=True)
class Creating:
    """A run waiting for its invocation record (group commit)."""

    invocation_id: str
    run: Run
    sender: Any
    state: dict[str, Any]
    thread_version: int | None


@dataclass(frozen=True)
class Commit:
    """The agent to itself: carry out the creates and finishes gathered so far."""


@dataclass(frozen=True)
class _Queued:
    """Who hears of an enqueued run once it starts (kept in memory only: after a
    restart an enqueued run starts without a subscriber; ``wait()`` finds it)."""

    subscriber: Any
    stream: bool


class AgentActor(SupervisedActor):
    """Coordinates the invocations of one agent (child of its agent supervisor)."""

    def on_start(self, spec: AgentSpec, nodes_supervisor: Any) -> None:
        self.spec = spec
        self.log = self.log.bind(agent_id=spec.id)
        self.pool = EdgePool(spec)
        self.ledger = Ledger(spec, self.log, self.send)
        self.rules = m.Rules(frozenset(spec.nodes), spec.max_steps, spec.execution_timeout,
                             durable=self.ledger.store is not None, owner=self.ledger.owner,
                             map_concurrency=spec.map_concurrency, reduce_check=import_problem,
                             node_timeouts=spec.node_timeouts, retry=spec.retry,
                             pause_before=spec.pause_before, pause_after=spec.pause_after)
        self.running: dict[str, Running] = {}
        # Run identities: unique across this agent's restarts too (a random start).
        self.run_ids = itertools.count(random.randrange(1, 2**62))
        self.queued: dict[str, _Queued] = {}
        self.spans = InvocationSpans(spec.id)
        self.unplaced: dict[str, str] = {}  # node id -> why no system can run it now
        self.nodes_sup: procs.Identity | None = None  # the node supervisor process
        self.deadlines = Deadlines(self.wakeupAfter)
        self.auto_pending = spec.auto_recover and bool(self.ledger.unfinished)
        # Group commit, for an agent serving many invocations: creates and finishes
        # that arrive together share one transaction (one fsync). One invocation
        # at a time keeps its single writes: nothing to share, no extra hop.
        self.batching = not self.ledger.single and self.ledger.store is not None
        self.creating: list[Creating] = []
        self.finishing: list[tuple[Running, m.RecordResult]] = []
        self.commit_pending = False
        self.send(nodes_supervisor, p.WatchNodes(self.myAddress))

    def on_stop(self) -> None:
        """Running invocations end as ``agent_stopped``, unless the node supervisor
        died (the agent restarts with it, nothing failed): then they are kept."""
        self._commit()  # the creates and finishes already under way first
        if not self.running:
            return
        lost = self.nodes_sup is not None and not procs.running(self.nodes_sup)
        if lost:
            self.pool = EdgePool(self.spec)  # its nodes and edges are dead: send them nothing
        stop = m.Stop(m.StopKind.NODES_LOST if lost else m.StopKind.REQUESTED)
        for run in list(self.running.values()):
            self._feed(run, stop)

    # -- messages -> events ----------------------------------------------------------

    def on_receive(self, message: Any, sender: Any) -> None:
        if drop_malformed(self.log, message):
            return
        if isinstance(message, Commit):
            self._commit()
        elif isinstance(message, p.Outcome):
            self._sends(self.pool.done(message.task_id))
            run = self._running(message.execution_id)
            if run is not None:
                self.spans.task_ended(run.inv.id, message.task_id, message.error)
                self._feed(run, m.TaskOutcome(
                    message.execution_id, m.TaskKey(message.node_id, message.item),
                    message.ok, message.result, message.error, message.partials))
            self._arm_retire()
        elif isinstance(message, p.Partial):
            run = self._running(message.execution_id)
            if run is not None:
                self._feed(run, m.PartialResult(
                    message.execution_id, m.TaskKey(message.node_id, message.item),
                    message.index, message.edge_id, message.result))
        elif isinstance(message, MESSAGES):
            run = self._running(message.execution_id)
            if run is not None and run.map is not None:
                sends, event = run.map.on_message(message)
                self._sends(sends)
                if event is not None:
                    self._feed(run, event)
        elif isinstance(message, p.EdgeTable):
            self._sends(self.pool.on_table(sender, message))
            self._arm_retire()
        elif isinstance(message, p.EdgeLost):
            self._on_edge_lost(message)
        elif isinstance(message, Run):
            self._on_run(message, sender)
        elif isinstance(message, WakeupMessage):
            self._on_timer(message.payload)
        elif isinstance(message, p.NodeTable):
            self._on_node_table(message)
        elif isinstance(message, p.NodeUp):
            self.unplaced.pop(message.node_id, None)
            self._node_up(message.node_id, message.address)
        elif isinstance(message, p.NodeDown):
            self.pool.node_down(message.node_id)
            if message.cause is m.DownCause.WAITING_FOR_PLACEMENT:
                self.unplaced[message.node_id] = message.reason
            down = m.NodeDown(message.node_id, message.cause, message.pid, message.reason)
            for run in list(self.running.values()):
                self._feed(run, down)
        elif isinstance(message, GetStatus):
            status = self.ledger.status(list(self.running))
            self.send(sender, dataclasses.replace(status, ref=message.ref))
        elif isinstance(message, GetUnfinished):
            self.send(sender, UnfinishedList(
                tuple(recoveries.describe(self.ledger, self.unplaced)), ref=message.ref))
        elif isinstance(message, (Recover, ResumePaused)):
            self._on_recover(message, sender)
        elif isinstance(message, ResolveTask):
            self._reply(sender, message, recoveries.resolve(self.ledger, message))
        elif isinstance(message, Abandon):
            answer, started = recoveries.abandon(self.ledger, message)
            self._reply(sender, message, answer)
            if started is not None:
                self._start_queued(started)
        elif isinstance(message, (GetResult, WaitResult)):
            self.ledger.answer(message, sender, message.invocation_id in self.running,
                               self.auto_pending)
            if self.ledger.elsewhere:
                self._arm_elsewhere()

    def _running(self, execution_id: str) -> Running | None:
        return self.running.get(invocation_of(execution_id))

    def _on_node_table(self, table: p.NodeTable) -> None:
        self.unplaced = dict(table.waiting)
        if table.supervisor_pid is not None:
            self.nodes_sup = procs.identity(table.supervisor_pid) or (
                table.supervisor_pid, -1.0)
        for node_id, address in table.nodes.items():
            self._node_up(node_id, address)
        if self.auto_pending:  # the nodes (and which cannot be placed) are known now
            self.auto_pending = False
            self._auto_recover()

    def _node_up(self, node_id: str, address: Any) -> None:
        sends = self.pool.node_up(node_id, address)
        for run in self.running.values():
            if run.map is not None:
                sends += run.map.node_up(node_id, address)
        self._sends(sends)

    def _on_edge_lost(self, lost: p.EdgeLost) -> None:
        """Every task the edge was running when it died fails (none if it was
        killed or retired); a task of an idempotent node runs again at once."""
        error = edge_died(lost)
        failed = []
        for task in self.pool.on_lost(lost.node_id, lost.edge_id, lost.exit):
            run = self._running(task.execution_id)
            if run is None:
                continue
            if task.node_id in self.spec.idempotent_nodes:
                # The node may run again: the task runs at once on another edge, as
                # recovery would run it (attempt + 1, the same idempotency key).
                self.log.info("task_rerun", task_id=task.task_id, attempt=task.attempt + 1)
                self._sends(self.pool.dispatch(dataclasses.replace(
                    task, attempt=task.attempt + 1)))
                continue
            self.spans.task_ended(run.inv.id, task.task_id, error)
            failed.append((run, task))
        for run, task in failed:  # spans first: the first failure cancels its siblings
            self._feed(run, m.TaskOutcome(task.execution_id, m.TaskKey(task.node_id, task.item),
                                          False, error=error))

    # -- starting a run ---------------------------------------------------------------

    def _on_run(self, run: Run, sender: Any) -> None:
        rejected = self.ledger.refuse(run, [*self.running, *(c.invocation_id
                                                             for c in self.creating)])
        if rejected is not None:
            self._reply(sender, run, rejected)
            return
        invocation_id = uuid.uuid4().hex
        try:
            state, version = (dict(self.spec.state), None) if run.thread is None else \
                self.ledger.thread_start(run.thread)
        except StoreError as exc:
            self._created(Creating(invocation_id, run, sender, {}, None), exc)
            return
        creating = Creating(invocation_id, run, sender, state, version)
        if not self.batching:
            try:
                token = self.ledger.create(invocation_id, run.input, state, run.thread,
                                           version)
            except StoreError as exc:
                self._created(creating, exc)
                return
            self._created(creating, token)
            return
        self.creating.append(creating)  # created with the others that came meanwhile
        self._commit_soon()

    def _commit_soon(self) -> None:
        """Group commit: a message to itself, handled after those already waiting,
        carries out every create and finish gathered by then in one transaction."""
        if not self.commit_pending:
            self.commit_pending = True
            self.send(self.myAddress, Commit())

    def _commit(self) -> None:
        self.commit_pending = False
        creating, self.creating = self.creating, []
        if creating:
            made = self.ledger.create_many(creating)
            for pending, token in zip(creating, made, strict=True):
                self._created(pending, token)
        finishing, self.finishing = self.finishing, []
        finishing = [(run, cmd) for run, cmd in finishing if run.inv.id in self.running]
        if finishing:
            ends = self.ledger.finish_many([(run.inv.id, run.token, cmd)
                                            for run, cmd in finishing])
            for (run, _cmd), (refused, started) in zip(finishing, ends, strict=True):
                run.next_started = started
                self._feed(run, refused or m.ResultRecorded())

    def _created(self, pending: Creating, token: int | StoreError) -> None:
        """A create came back: begin the invocation, or answer why not."""
        run, sender, invocation_id = pending.run, pending.sender, pending.invocation_id
        if isinstance(token, int):
            seed = m.Seed(invocation_id, run.input, pending.state, run.stream,
                          thread=run.thread)
            self._begin(seed, token, run.subscriber, sender, m.Begin(), request=run)
            return
        exc = token
        if exc.code == "thread_busy" and run.multitask == "enqueue":
            self._enqueue(invocation_id, run, sender)
            return
        if exc.code in ("thread_busy", "thread_changed"):
            self._reply(sender, run, RunRejected(
                f"thread {run.thread!r} of agent {self.spec.id!r} is running invocation "
                f"{exc.details.get('invocation_id')}; wait for it, or run with "
                "multitask='enqueue'", code="thread_busy", thread=run.thread,
                invocation_id=exc.details.get("invocation_id")))
            return
        self._reply(sender, run, RunRejected(f"could not record the invocation: {exc}",
                                             code=exc.code))

    def _enqueue(self, invocation_id: str, run: Run, sender: Any) -> None:
        assert run.thread is not None
        try:
            place = self.ledger.enqueue(invocation_id, run.thread, run.input, run.stream)
        except StoreError as exc:
            if exc.code == "thread_free":  # it ended meanwhile (another system): start it
                self._on_run(dataclasses.replace(run, multitask="reject"), sender)
                return
            self._reply(sender, run, RunRejected(f"could not enqueue the run: {exc}",
                                                 code=exc.code))
            return
        subscriber = sender if isinstance(run.subscriber, Caller) else run.subscriber
        self.queued[invocation_id] = _Queued(subscriber, run.stream)
        self.log.info("invocation_enqueued", invocation_id=invocation_id, thread=run.thread,
                      place=place)
        self._reply(sender, run, RunAccepted(invocation_id, queued=place))

    def _start_queued(self, record: InvocationRecord) -> None:
        """The store started the next queued run of a thread (with the end of the
        one before it): run it."""
        who = self.queued.pop(record.invocation_id, _Queued(None, False))
        seed = m.Seed(record.invocation_id, record.input, dict(record.state),
                      who.stream and who.subscriber is not None, thread=record.thread_id)
        self._begin(seed, 1, who.subscriber, None, m.Begin())

    def _on_recover(self, message: Recover | ResumePaused, sender: Any) -> None:
        """``recover()`` an interrupted invocation, or ``resume()`` a paused one."""
        rejected = validate_run(Run(None, message.subscriber, message.stream))
        busy = self._busy()
        answer: Any
        if rejected is not None:
            answer = rejected
        elif busy is not None:
            answer = busy if self.ledger.unfinished or isinstance(message, ResumePaused) \
                else recoveries.nothing(self.ledger)
        elif isinstance(message, Recover):
            answer = recoveries.recover(self.ledger, message.invocation_id, self.unplaced)
        else:
            answer = recoveries.resume(self.ledger, message)
        if not isinstance(answer, tuple):
            self._reply(sender, message, answer)
            return
        value = message.value if isinstance(message, ResumePaused) else None
        self._resume(answer, message.subscriber, message.stream, sender,
                     isinstance(message, Recover), value, request=message)

    def _busy(self) -> RunRejected | None:
        running = list(self.running)
        if len(running) < self.spec.max_invocations:
            return None
        if self.ledger.single:
            return RunRejected(f"agent {self.spec.id!r} is running invocation {running[0]}",
                               code="agent_busy", invocation_id=running[0])
        return RunRejected(f"agent {self.spec.id!r} runs {len(running)} invocations, its "
                           "max_invocations", code="agent_busy", running=len(running),
                           max_invocations=self.spec.max_invocations)

    def _resume(self, recovered: recoveries.Recovered, subscriber: Any, stream: bool,
                sender: Any, recover: bool, value: Any = None, automatic: bool = False,
                request: Any = None) -> None:
        record, token, resume = recovered
        seed = m.Seed(record.invocation_id, record.input, dict(record.state), stream,
                      record.step, record.last_result, record.parallel_results,
                      resume_value=pauses.resumed_value(record) if recover else value,
                      thread=record.thread_id)
        self.log.info("invocation_recovered" if recover else "invocation_resumed",
                      invocation_id=seed.invocation_id, step=seed.step, automatic=automatic)
        self._begin(seed, token, subscriber, sender, resume, automatic, request)

    def _auto_recover(self) -> None:
        """``auto_recover``: go on with every unfinished invocation that recovery can
        carry on alone; the others (uncertain, paused, busy) wait, listed."""
        recovered, left = [], []
        for invocation_id in list(self.ledger.unfinished):
            if len(self.running) >= self.spec.max_invocations:
                left.append(invocation_id)
                continue
            answer = recoveries.recover(self.ledger, invocation_id, self.unplaced)
            if isinstance(answer, RecoveryRejected):
                left.append(invocation_id)
                continue
            recovered.append(invocation_id)
            self._resume(answer, None, False, None, True, automatic=True)
        self.ledger.release(left)
        self.log.info("auto_recovered", recovered=recovered, waiting=left)
        telemetry.execute(telemetry.AUTO_RECOVERY, {"recovered": len(recovered),
                                                   "waiting": len(left)},
                          {"agent_id": self.spec.id, "recovered": recovered, "waiting": left})

    def _begin(self, seed: m.Seed, token: int, subscriber: Any, sender: Any,
               first: m.Begin | m.Resume, automatic: bool = False, request: Any = None
               ) -> None:
        run = Running(m.Invocation(seed, self.rules), token,
                      sender if isinstance(subscriber, Caller) else subscriber,
                      run_id=next(self.run_ids))
        if self.ledger.store is not None and len(self.running) == 0:
            self.deadlines.renew_in(self.spec.lease_seconds / 3)
        self.running[seed.invocation_id] = run
        self.spans.start(seed.invocation_id, isinstance(first, m.Resume), automatic)
        if sender is not None:
            self._reply(sender, request, RunAccepted(seed.invocation_id, run=run.run_id))
        self.log.info("invocation_started", invocation_id=seed.invocation_id)
        self._feed(run, first)

    # -- commands ---------------------------------------------------------------------

    def _feed(self, run: Running, event: m.Event) -> None:
        """Step ``run``'s machine with ``event`` and carry out its commands; answers
        to commands (policy, writes) are fed back in order."""
        queue = [event]
        inv = run.inv
        while queue and inv.id in self.running:
            for command in inv.step(queue.pop(0)):
                answer = self._do(run, command)
                if answer is not None:
                    queue.append(answer)

    def _do(self, run: Running, cmd: Any) -> m.Event | None:
        inv = run.inv
        if isinstance(cmd, m.Emit):
            if run.subscriber is not None:
                self.send(run.subscriber, AgentEvent(inv.id, cmd.type, cmd.sequence, cmd.data,
                                                     run.run_id))
        elif isinstance(cmd, m.Dispatch):
            self.spans.task_started(inv.id, cmd.task_id, cmd.key.node_id, cmd.execution_id,
                                    cmd.key.item)
            folded = self.ledger.folded_record(inv.id, run.folded, cmd)
            self._sends(self.pool.dispatch(run_task(self.spec, inv, cmd, self.myAddress,
                                                    run.token, folded)))
        elif isinstance(cmd, m.CallPolicy):
            try:
                return m.PolicyAnswered(resolve_callable(self.spec.policy)(cmd.context))
            except BaseException as exc:  # noqa: BLE001 - user code must never reach Thespian
                return m.PolicyRaised(type(exc).__name__, str(exc))
        elif isinstance(cmd, m.SaveCheckpoint):
            run.folded, saved = self.ledger.save_step(inv.id, run.token, inv.input,
                                                      cmd.checkpoint, self.unplaced)
            return saved
        elif isinstance(cmd, m.RecordResult):
            if self.batching:  # recorded with the others that end meanwhile
                self.finishing.append((run, cmd))
                self._commit_soon()
                return None
            refused, run.next_started = self.ledger.finish(inv.id, run.token, cmd)
            return refused or m.ResultRecorded()
        elif isinstance(cmd, m.ArmDeadline):
            self.deadlines.arm_execution(cmd.execution_id, cmd.seconds, cmd.key)
        elif isinstance(cmd, m.CancelTask):
            self.spans.task_ended(inv.id, cmd.task_id, None, "timed_out" if cmd.timed_out
                                  else "cancelled")
            reason = p.KillReason.TIMED_OUT if cmd.timed_out else p.KillReason.CANCELLED
            self._sends(self.pool.cancel(cmd.key.node_id, cmd.task_id, reason))
        elif isinstance(cmd, COMMANDS):
            if isinstance(cmd, m.OpenMap):
                run.map = MapLink(self.myAddress, self.spec)
            if run.map is not None:
                self._sends(run.map.on_command(cmd, self.pool, inv.id))
        elif isinstance(cmd, m.End):
            self._end(run, cmd)
        elif isinstance(cmd, m.RecordPause):
            return self.ledger.checkpoint(inv.id, run.token, inv.input, cmd.checkpoint,
                                          cmd.hold.to_dict()) or m.PauseRecorded()
        elif isinstance(cmd, m.ScheduleRetry):
            self.deadlines.arm_retry(cmd.execution_id, cmd.key, cmd.seconds)
            self.spans.retrying(cmd)
        return None

    def _reply(self, to: Any, request: Any, answer: Any) -> None:
        """Send ``answer`` to ``to``, carrying the ``ref`` of the ``request`` it
        answers (a caller drops an answer with another ref: a late one)."""
        ref = getattr(request, "ref", 0)
        if ref and isinstance(answer, HayataError):
            answer.ref = ref
        elif ref and hasattr(answer, "ref") and dataclasses.is_dataclass(answer):
            answer = dataclasses.replace(answer, ref=ref)  # type: ignore[type-var]
        self.send(to, answer)

    def _sends(self, sends: list[tuple[Any, Any]]) -> None:
        for address, message in sends:
            self.send(address, message)

    def _end(self, run: Running, end: m.End) -> None:
        inv = run.inv
        del self.running[inv.id]
        self.deadlines.forget(inv.id)
        self.spans.ended(inv.id, end.ok, end.error, end.paused)
        self.log.info("invocation_ended", invocation_id=inv.id, ok=end.ok,
                      code=end.error.code if end.error else None, kept=end.kept)
        result = AgentResult(inv.id, end.ok, end.result, end.error, status="paused"
                             if end.paused else "interrupted" if end.kept else "",
                             run=run.run_id)
        if run.subscriber is not None:
            self.send(run.subscriber, result)
        self.ledger.publish(result)
        if end.kept:
            self.ledger.keep(inv.id, self.ledger.record_of(inv.id, inv.input, inv.checkpoint()))
        if run.next_started is not None:
            self._start_queued(run.next_started)

    elsewhere_at = math.inf
    """When the waits on invocations run elsewhere are checked next (monotonic)."""

    # -- timers: deadlines, retries, lease renewal ----------------------------------------

    def _on_timer(self, at: Any) -> None:
        self.deadlines.fired(at)
        if self.deadlines.renewal_due() and self.running:
            self._renew()
        for kind, (execution_id, key) in self.deadlines.pop_due():
            run = self._running(execution_id)
            if run is not None:
                self._feed(run, m.DeadlinePassed(execution_id, key) if kind is Due.DEADLINE
                           else m.RetryDue(execution_id, key))
        self._sends(self.pool.retire_due(time.monotonic()))
        if time.monotonic() >= self.elsewhere_at:
            self.elsewhere_at = math.inf
            self.ledger.check_elsewhere(self.running)
            if self.ledger.elsewhere:
                self._arm_elsewhere()
        if not self.running:
            self.deadlines.renew_at = float("inf")
        retire = self.pool.next_retire(time.monotonic())
        self.deadlines.rearm(retire if retire is not None else float("inf"))

    def _arm_elsewhere(self) -> None:
        if self.elsewhere_at == math.inf:
            self.elsewhere_at = time.monotonic() + ELSEWHERE_CHECK
            self.deadlines.arm(self.elsewhere_at)

    def _arm_retire(self) -> None:
        """A wakeup for the next idle edge to retire (edges go idle as tasks end)."""
        retire = self.pool.next_retire(time.monotonic())
        if retire is not None:
            self.deadlines.arm(retire)

    def _renew(self) -> None:
        renewed = self.ledger.renew({iid: run.token for iid, run in self.running.items()})
        hiccup = any(ok is None for ok in renewed.values())
        for invocation_id, ok in renewed.items():
            run = self.running.get(invocation_id)
            if ok is False and run is not None:
                self._feed(run, m.LeaseLost())
        lease = self.spec.lease_seconds
        self.deadlines.renew_in(min(1.0, lease / 6) if hiccup else lease / 3)
