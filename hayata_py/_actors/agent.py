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

How runs are let in is the :class:`~hayata_py._actors.admission.Admission`
mixin's; the timers, the leases' renewal among them, are the
:class:`~hayata_py._actors.upkeep.Upkeep` mixin's; its nodes and edges coming
and going, the :class:`~hayata_py._actors.membership.Membership` mixin's.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
from typing import Any

from thespian.actors import WakeupMessage

from hayata_py import _invocation as m
from hayata_py._actors import _protocol as p
from hayata_py._actors import procs, recoveries
from hayata_py._actors._wellformed import drop_malformed
from hayata_py._actors.admission import Admission
from hayata_py._actors.boundary import validate_run as validate_run
from hayata_py._actors.caching import NodeCache
from hayata_py._actors.circuit_gate import CircuitGate
from hayata_py._actors.edges import EdgePool, chain_windows, run_task
from hayata_py._actors.eventlog import EventLog
from hayata_py._actors.ledger import Ledger
from hayata_py._actors.maps import COMMANDS, MESSAGES, MapLink
from hayata_py._actors.membership import Membership
from hayata_py._actors.outbox import Outbox
from hayata_py._actors.running import Commit, Creating, Queued, Running
from hayata_py._actors.spans import InvocationSpans
from hayata_py._actors.timers import Deadlines, invocation_of
from hayata_py._actors.transmits import busy_targets
from hayata_py._actors.upkeep import Upkeep
from hayata_py._callables import import_problem, resolve_callable
from hayata_py._config import AgentSpec
from hayata_py._errors import HayataError
from hayata_py._invocation.compensation import is_compensation
from hayata_py.messages import (
    Abandon,
    Ack,
    AgentResult,
    GetResult,
    GetStatus,
    GetUnfinished,
    Recover,
    ResolveTask,
    ResumePaused,
    Run,
    UnfinishedList,
    WaitResult,
)
from hayata_py.store import task_id_for
from supervisors import SupervisedActor

OUTBOX_RECHECK = 0.002
"""Seconds until the agent looks again whether sends it holds (their target was
still receiving an earlier message) may go, when no message comes meanwhile."""


class AgentActor(Admission, Upkeep, Membership, SupervisedActor):
    """Coordinates the invocations of one agent (child of its agent supervisor)."""

    def on_start(self, spec: AgentSpec, nodes_supervisor: Any) -> None:
        self.spec = spec
        self.log = self.log.bind(agent_id=spec.id)
        self.pool = EdgePool(spec)
        self.ledger = Ledger(spec, self.log, self.send)
        self.cache = NodeCache(spec, self.ledger, self.log)
        self.gate = CircuitGate(spec, self.ledger, self.log)  # the circuit breakers
        self.rules = m.Rules(frozenset(spec.nodes), spec.max_steps, spec.execution_timeout,
                             durable=self.ledger.store is not None, owner=self.ledger.owner,
                             map_concurrency=spec.map_concurrency,
                             map_window=chain_windows(spec),
                             reduce_check=import_problem,
                             node_timeouts=spec.node_timeouts, retry=spec.retry,
                             pause_before=spec.pause_before, pause_after=spec.pause_after,
                             compensate=spec.compensate)
        self.running: dict[str, Running] = {}
        # Run identities: unique across this agent's restarts too (a random start).
        self.run_ids = itertools.count(random.randrange(1, 2**62))
        self.queued: dict[str, Queued] = {}
        # Deadlines of tasks that wait for a free edge: armed when they are sent.
        self.deferred: dict[str, dict[str, m.ArmDeadline]] = {}
        self.spans = InvocationSpans(spec.id)
        self.unplaced: dict[str, str] = {}  # node id -> why no system can run it now
        self.nodes_sup: procs.Identity | None = None  # the node supervisor process
        self.deadlines = Deadlines(self.wakeupAfter)
        self.events = EventLog(self.ledger.store, self.log, self.send, self.deadlines.arm)
        self.auto_pending = spec.auto_recover and bool(self.ledger.unfinished)
        # Group commit, for an agent serving many invocations: creates and finishes
        # that arrive together share one transaction (one fsync). One invocation
        # at a time keeps its single writes: nothing to share, no extra hop.
        self.batching = not self.ledger.single and self.ledger.store is not None
        self.creating: list[Creating] = []
        self.finishing: list[tuple[Running, m.RecordResult]] = []
        self.commit_pending = False
        self.outbox = Outbox()  # while batching: sends to nodes, edges, reducers
        self.send(nodes_supervisor, p.WatchNodes(self.myAddress))

    def on_stop(self) -> None:
        """Running invocations end as ``agent_stopped``, unless the node supervisor
        died (the agent restarts with it, nothing failed): then they are kept."""
        self._commit()  # the creates and finishes already under way first
        self._flush_outbox(force=True)
        # From here on every write is made at once: no message to itself would
        # come back to a stopping actor (an end recorded late is never recorded).
        self.batching = False
        self.events.stopping = True
        if not self.running:
            return
        lost = self.nodes_sup is not None and not procs.running(self.nodes_sup)
        if lost:
            self.pool = EdgePool(self.spec)  # its nodes and edges are dead: send them nothing
        stop = m.Stop(m.StopKind.NODES_LOST if lost else m.StopKind.REQUESTED)
        # An end can start its thread's next queued run (the store does, with the
        # end): that one is stopped too, or it would be left running with nobody
        # to run it.
        for _ in range(100_000):
            if not self.running:
                break
            for run in list(self.running.values()):
                self._feed(run, stop)
        self.events.close()

    # -- messages -> events ----------------------------------------------------------

    def on_receive(self, message: Any, sender: Any) -> None:
        self._on_message(message, sender)
        if self.outbox:
            self._flush_outbox()

    def _flush_outbox(self, force: bool = False) -> None:
        """Send what the outbox holds for targets with nothing on its way (all of
        it if ``force``); look again soon if something is still held."""
        for to, message in self.outbox.take(() if force else busy_targets(self)):
            self.send(to, message)
        if self.outbox:
            self.deadlines.arm(time.monotonic() + OUTBOX_RECHECK)

    def _on_message(self, message: Any, sender: Any) -> None:
        if drop_malformed(self.log, message):
            return
        if isinstance(message, Commit):
            self._commit()
        elif isinstance(message, p.Outcome):
            self._on_outcome(message)
        elif isinstance(message, p.Outcomes):
            for outcome in message.outcomes:
                self._on_outcome(outcome)
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
            status = self.ledger.status(self.running)
            self.send(sender, dataclasses.replace(status, ref=message.ref,
                                                  circuits=self.gate.status()))
        elif isinstance(message, GetUnfinished):
            self.send(sender, UnfinishedList(
                tuple(recoveries.describe(self.ledger, self.unplaced)), ref=message.ref))
        elif isinstance(message, (Recover, ResumePaused)):
            self._on_recover(message, sender)
        elif isinstance(message, ResolveTask):
            self._reply(sender, message, recoveries.resolve(self.ledger, message))
        elif isinstance(message, Abandon):
            abandoned = recoveries.abandon(self.ledger, message)
            if isinstance(abandoned, recoveries.Undoing):  # undone first, then it fails
                self._reply(sender, message, Ack(message.invocation_id))
                self._resume(abandoned.recovered, None, False, None, True)
                return
            answer, started = abandoned
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

    def _circuit(self, changes: list[m.CircuitChanged]) -> None:
        """A breaker opened or closed: every running invocation hears of it."""
        for change in changes:
            for run in list(self.running.values()):
                self._feed(run, change)

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
        if isinstance(cmd, m.Emit):  # stored first, then sent (eventlog.py)
            self.events.emit(inv.id, run.token, cmd, run.subscriber if inv.stream else None,
                             run.run_id)
        elif isinstance(cmd, m.Dispatch):
            self.spans.task_started(inv.id, cmd.task_id, cmd.key.node_id, cmd.execution_id,
                                    cmd.key.item)
            folded = self.ledger.folded_record(inv.id, run.folded, cmd)
            # A cached result first (the node is not called, so no circuit applies),
            # then an open circuit (a recorded failure): neither reaches an edge.
            # A compensation always runs.
            if cmd.function is None:
                done = self.cache.lookup(inv.id, run.token, cmd, folded) \
                    or self.gate.refuse(run, cmd)
                if done is not None:
                    self.spans.task_ended(inv.id, cmd.task_id, done.error)
                    return done
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
            # The run's unwritten events and its terminal one ride on this commit.
            taken = self.events.take(inv.id)
            refused, run.next_started = self.ledger.finish(
                inv.id, run.token, cmd, self.events.stored(taken, cmd.event, inv.id))
            self.events.written(inv.id, taken, cmd.event, refused is None)
            return refused or m.ResultRecorded()
        elif isinstance(cmd, m.ArmDeadline):
            self._arm_deadline(run, cmd)
        elif isinstance(cmd, m.CancelTask):
            self.spans.task_ended(inv.id, cmd.task_id, None, "timed_out" if cmd.timed_out
                                  else "cancelled")
            reason = p.KillReason.TIMED_OUT if cmd.timed_out else p.KillReason.CANCELLED
            self.gate.release(cmd.key.node_id, cmd.task_id)
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

    def _arm_deadline(self, run: Running, cmd: m.ArmDeadline) -> None:
        """A task's deadline runs from the moment an edge gets it: one that waits for
        a free edge (behind other invocations' tasks) is armed when it is sent."""
        key = cmd.key
        if key is not None and not self.ledger.single:
            step = int(cmd.execution_id.rpartition(":")[2])
            task_id = task_id_for(run.inv.id, step, key.node_id, key.item)
            if self.pool.waiting(key.node_id, task_id):
                self.deferred.setdefault(run.inv.id, {})[task_id] = cmd
                # A safety net until then: a task never waits for an edge for ever.
                self.deadlines.arm_execution(cmd.execution_id,
                                             cmd.seconds + max(60.0, 10 * cmd.seconds), key)
                return
        self.deadlines.arm_execution(cmd.execution_id, cmd.seconds, key)

    def _reply(self, to: Any, request: Any, answer: Any) -> None:
        """Send ``answer`` to ``to``, carrying the ``ref`` of the ``request`` it
        answers (a caller drops an answer with another ref: a late one)."""
        ref = getattr(request, "ref", 0)
        if ref and isinstance(answer, HayataError):
            answer.ref = ref
        elif ref and hasattr(answer, "ref") and dataclasses.is_dataclass(answer):
            answer = dataclasses.replace(answer, ref=ref)  # type: ignore[type-var]
        self.send(to, answer)

    def _on_outcome(self, message: p.Outcome) -> None:
        if not is_compensation(message.execution_id):  # a compensator: neither
            self.cache.completed(message)
            self._circuit(self.gate.outcome(message.node_id, message.task_id,
                                            message.ok, message.error))
        run = self._running(message.execution_id)
        if run is not None:
            self.spans.task_ended(run.inv.id, message.task_id, message.error)
            self._feed(run, m.TaskOutcome(
                message.execution_id, m.TaskKey(message.node_id, message.item),
                message.ok, message.result, message.error, message.partials))
        # The slot frees after the machine took the outcome: a failure cancels
        # the items waiting for it before one of them could take it.
        self._sends(self.pool.done(message.task_id))
        self._arm_retire()

    def _sends(self, sends: list[tuple[Any, Any]]) -> None:
        """Send to nodes, edges and reducers; while batching, through the outbox
        (once the message being handled is done, together per target). Either
        way the tasks of ``sends`` for one edge (a chain) go as one RunTasks."""
        if not self.batching and len(sends) == 1 and not self.deferred:
            self.send(*sends[0])  # the common case: nothing to merge
            return
        now = Outbox()
        for address, message in sends:
            if self.deferred and isinstance(message, p.RunTask):
                waited = self.deferred.get(message.invocation_id, {}).pop(message.task_id, None)
                if waited is not None:
                    self.deadlines.arm_execution(waited.execution_id, waited.seconds,
                                                 waited.key)
            (self.outbox if self.batching else now).put(address, message)
        for address, message in now.take() if now else ():
            self.send(address, message)

    def _end(self, run: Running, end: m.End) -> None:
        inv = run.inv
        self.events.ending(inv.id)  # its last events stored and sent, then the bookkeeping
        del self.running[inv.id]
        self.deadlines.forget(inv.id)
        self.deferred.pop(inv.id, None)
        self.cache.forget(inv.id)
        took = self.spans.ended(inv.id, end.ok, end.error, end.paused)
        self.log.info("invocation_ended", invocation_id=inv.id, ok=end.ok,
                      code=end.error.code if end.error else None, kept=end.kept,
                      duration_ms=took)
        result = AgentResult(inv.id, end.ok, end.result, end.error, status="paused"
                             if end.paused else "interrupted" if end.kept else "",
                             run=run.run_id)
        self.events.result(run.subscriber, result)
        self.ledger.publish(result)
        if end.kept:
            self.ledger.keep(inv.id, self.ledger.record_of(inv.id, inv.input, inv.checkpoint()))
        if run.next_started is not None:
            self._start_queued(run.next_started)
