"""The agent actor: a shell around a table of invocation machines (``hayata_py._invocation``).

It turns messages into the machines' events and carries out their commands:
calling the decision policy, durable writes (the
:class:`~hayata_py._actors.ledger.Ledger`), sending tasks straight to edges
(the :class:`~hayata_py._rules.edge_pool.EdgePool`), cancelling them, arming
each task's deadline and retry backoff, and sending results. Each machine
alone decides when its steps and its invocation are over.

An agent runs up to ``max_invocations`` invocations at once. Every message
about a running one names it (a task's execution id is
``<invocation>:<step>``), so it reaches its machine in O(1); deadlines of all
of them share one heap (``_rules/deadlines.py``); tasks of all of them wait for edges in
one first-in first-out queue per node (``_rules/edge_pool.py``).

Its parts each own their state behind a small interface: how runs are let in
(and the group commit), :class:`~hayata_py._actors.admission.Admission`; the
timers, the leases' renewal among them,
:class:`~hayata_py._actors.agent_timers.AgentTimers`; its nodes and edges
coming and going, :class:`~hayata_py._actors.node_watch.NodeWatch`. Every
message goes to its handler through one table, :data:`ROUTES`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from thespian.actors import WakeupMessage

from hayata_py import _actor_messages as p
from hayata_py import _invocation as m
from hayata_py._actors import recovery_requests
from hayata_py._actors._wellformed import drop_malformed
from hayata_py._actors.admission import Admission
from hayata_py._actors.agent_timers import AgentTimers
from hayata_py._actors.caching import NodeCache
from hayata_py._actors.circuit_gate import CircuitGate
from hayata_py._actors.eventlog import EventLog
from hayata_py._actors.in_flight import Commit, InFlight
from hayata_py._actors.ledger import Ledger
from hayata_py._actors.node_watch import NodeWatch
from hayata_py._actors.run_checks import validate_run as validate_run
from hayata_py._actors.spans import InvocationSpans
from hayata_py._actors.store_access import as_store_error
from hayata_py._actors.transmits import busy_targets
from hayata_py._callables import import_problem, resolve_callable
from hayata_py._config import AgentSpec
from hayata_py._errors import HayataError
from hayata_py._invocation.compensation import is_compensation
from hayata_py._rules import cancels, pauses
from hayata_py._rules.deadlines import Deadlines, invocation_of
from hayata_py._rules.edge_pool import EdgePool, chain_windows, run_task
from hayata_py._rules.map_link import COMMANDS, MESSAGES, MapLink
from hayata_py._rules.outbox import Outbox
from hayata_py.messages import (
    Abandon,
    Ack,
    AgentResult,
    Cancel,
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
from supervisors import SupervisedActor

OUTBOX_RECHECK = 0.002
"""Seconds until the agent looks again whether sends it holds (their target was
still receiving an earlier message) may go, when no message comes meanwhile."""


class AgentActor(SupervisedActor):
    """Coordinates the invocations of one agent (child of its agent supervisor).

    Its parts each own their state: :attr:`admission` (runs, recoveries, the
    group commit), :attr:`timers` (deadlines, renewals, retirements),
    :attr:`nodes` (nodes and edges coming and going), :attr:`pool` (the edges),
    :attr:`ledger` (the store, results), :attr:`events` (the event log). The
    agent owns the table of running invocations (:attr:`running`), routes each
    message to its handler (:data:`ROUTES`) and carries out the machines'
    commands (:meth:`feed`)."""

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
        self.running: dict[str, InFlight] = {}
        self.spans = InvocationSpans(spec.id)
        self.deadlines = Deadlines(self.wakeupAfter)
        self.events = EventLog(self.ledger.store, self.log, self.send, self.deadlines.arm)
        self.timers = AgentTimers(self, self.running, spec, self.ledger, self.deadlines,
                                  self.events, self.pool)
        self.nodes = NodeWatch(self, self.running, spec, self.log, self.ledger, self.pool,
                               self.gate, self.spans)
        self.admission = Admission(self, self.running, spec, self.log, self.ledger,
                                   self.rules, self.spans, self.deadlines, self.events,
                                   self.nodes)
        self.outbox = Outbox()  # while batching: sends to nodes, edges, reducers
        self.send(nodes_supervisor, p.WatchNodes(self.myAddress))

    def on_stop(self) -> None:
        """Running invocations end as ``agent_stopped``, unless the node supervisor
        died (the agent restarts with it, nothing failed): then they are kept."""
        self.admission.commit()  # the creates and finishes already under way first
        self._flush_outbox(force=True)
        # From here on every write is made at once: no message to itself would
        # come back to a stopping actor (an end recorded late is never recorded).
        self.admission.batching = False
        self.events.stopping = True
        if not self.running:
            return
        lost = self.nodes.nodes_lost()
        if lost:
            self.pool.forget_all()  # its nodes and edges are dead: send them nothing
        stop = m.Stop(m.StopKind.NODES_LOST if lost else m.StopKind.REQUESTED)
        # An end can start its thread's next queued run (the store does, with the
        # end): that one is stopped too, or it would be left running with nobody
        # to run it.
        for _ in range(100_000):
            if not self.running:
                break
            for run in list(self.running.values()):
                self.feed(run, stop)
        self.events.close()

    # -- messages -> handlers ---------------------------------------------------------

    def on_receive(self, message: Any, sender: Any) -> None:
        if type(message) is p.Bundle:
            if not drop_malformed(self.log, message):
                for one in message.messages:
                    self._handle(one, sender)
        else:
            self._handle(message, sender)
        if self.outbox:
            self._flush_outbox()

    def _handle(self, message: Any, sender: Any) -> None:
        if not drop_malformed(self.log, message):
            handler = route(type(message))
            if handler is not None:
                handler(self, message, sender)

    def _flush_outbox(self, force: bool = False) -> None:
        """Send what the outbox holds for targets with nothing on its way (all of
        it if ``force``); look again soon if something is still held."""
        for to, message in self.outbox.take(() if force else busy_targets(self)):
            self.send(to, message)
        if self.outbox:
            self.deadlines.arm(time.monotonic() + OUTBOX_RECHECK)

    def _on_commit(self, _message: Commit, _sender: Any) -> None:
        self.admission.commit()

    def _on_outcomes(self, message: p.Outcomes, _sender: Any) -> None:
        for outcome in message.outcomes:
            self.outcome(outcome)

    def _on_partial(self, message: p.Partial, _sender: Any) -> None:
        run = self._running(message.execution_id)
        if run is not None:
            self.feed(run, m.PartialResult(
                message.execution_id, m.TaskKey(message.node_id, message.item),
                message.index, message.edge_id, message.result))

    def _on_map_message(self, message: Any, _sender: Any) -> None:
        run = self._running(message.execution_id)
        if run is not None and run.map is not None:
            sends, event = run.map.on_message(message)
            self.sends(sends)
            if event is not None:
                self.feed(run, event)

    def _on_edge_table(self, message: p.EdgeTable, sender: Any) -> None:
        self.sends(self.pool.on_table(sender, message))
        self.timers.arm_retire()

    def _on_node_table(self, message: p.NodeTable, _sender: Any) -> None:
        self.nodes.on_node_table(message)
        if self.admission.auto_pending:  # the nodes (and which cannot be placed) are known
            self.admission.auto_recover()

    def _on_status(self, message: GetStatus, sender: Any) -> None:
        status = self.ledger.status(self.running)
        self.send(sender, dataclasses.replace(status, ref=message.ref,
                                              circuits=self.gate.status()))

    def _on_unfinished(self, message: GetUnfinished, sender: Any) -> None:
        self.ledger.discover(self.admission.taken, message.invocation_id)
        self.send(sender, UnfinishedList(
            tuple(recovery_requests.describe(self.ledger, self.nodes.unplaced,
                                             message.invocation_id)), ref=message.ref))

    def _on_resolve(self, message: ResolveTask, sender: Any) -> None:
        self.reply(sender, message, recovery_requests.resolve(self.ledger, message))

    def _on_abandon(self, message: Abandon, sender: Any) -> None:
        abandoned = recovery_requests.abandon(self.ledger, message)
        if isinstance(abandoned, recovery_requests.Undoing):  # undone first, then it fails
            self.reply(sender, message, Ack(message.invocation_id))
            self.admission.resume(abandoned.recovered, None, False, None, True)
            return
        answer, started = abandoned
        self.reply(sender, message, answer)
        if started is not None:
            self.admission.start_queued(started)

    def _on_cancel(self, message: Cancel, sender: Any) -> None:
        """``cancel()``: stop the invocation if its step runs here (its machine
        records the stopped tasks and the end, ``cancelled``); a no-op for one
        that ended or ends on its own; refused for any other (``_rules/cancels.py``)."""
        invocation_id = message.invocation_id
        run = self.running.get(invocation_id)
        known = self.ledger.results.recent.get(invocation_id)
        ended = known is not None and known.status not in ("paused", "interrupted")
        record, queued = None, False
        if run is None and not ended:
            try:
                record, queued = self.ledger.cancel_facts(invocation_id)
            except Exception as raw:  # noqa: BLE001 - the store failed: the caller hears why
                self.reply(sender, message, as_store_error(raw))
                return
        decision = cancels.answer(
            invocation_id, self.spec.id, run.inv.phase if run is not None else None, record,
            ended=ended, queued=queued, paused=pauses.is_paused(record))
        if isinstance(decision, HayataError):
            self.reply(sender, message, decision)
            return
        if decision is cancels.CancelAnswer.STOP and run is not None:
            self.log.info("invocation_cancel", invocation_id=invocation_id)
            self.feed(run, m.CancelRequested())
        self.reply(sender, message, Ack(decision is cancels.CancelAnswer.STOP))

    def _on_result_request(self, message: GetResult | WaitResult, sender: Any) -> None:
        self.ledger.answer(message, sender, message.invocation_id in self.running,
                           self.admission.auto_pending)
        if self.ledger.results.elsewhere:
            self.timers.arm_elsewhere()

    def _running(self, execution_id: str) -> InFlight | None:
        return self.running.get(invocation_of(execution_id))

    def feed_all(self, event: m.Event) -> None:
        """Feed ``event`` (a node down, a breaker opened or closed) to every
        running invocation."""
        for run in list(self.running.values()):
            self.feed(run, event)

    # -- commands ---------------------------------------------------------------------

    def feed(self, run: InFlight, event: m.Event) -> None:
        """Step ``run``'s machine with ``event`` and carry out its commands; answers
        to commands (policy, writes) are fed back in order."""
        queue = [event]
        inv = run.inv
        while queue and inv.id in self.running:
            for command in inv.step(queue.pop(0)):
                answer = self._do(run, command)
                if answer is not None:
                    queue.append(answer)

    def _do(self, run: InFlight, cmd: Any) -> m.Event | None:
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
            self.sends(self.pool.dispatch(run_task(self.spec, inv, cmd, self.myAddress,
                                                    run.token, folded)))
        elif isinstance(cmd, m.CallPolicy):
            try:
                return m.PolicyAnswered(resolve_callable(self.spec.policy)(cmd.context))
            except BaseException as exc:  # noqa: BLE001 - user code must never reach Thespian
                return m.PolicyRaised(type(exc).__name__, str(exc))
        elif isinstance(cmd, m.SaveCheckpoint):
            run.folded, saved = self.ledger.save_step(inv.id, run.token, inv.input,
                                                      cmd.checkpoint, self.nodes.unplaced)
            return saved
        elif isinstance(cmd, m.RecordResult):
            if self.admission.batching:  # recorded with the others that end meanwhile
                self.admission.finish_later(run, cmd)
                return None
            # The run's unwritten events and its terminal one ride on this commit.
            taken = self.events.take(inv.id)
            refused, run.next_started = self.ledger.finish(
                inv.id, run.token, cmd, self.events.stored(taken, cmd.event, inv.id))
            self.events.written(inv.id, taken, cmd.event, refused is None)
            return refused or m.ResultRecorded()
        elif isinstance(cmd, m.ArmDeadline):
            self.timers.arm_deadline(run, cmd)
        elif isinstance(cmd, m.CancelTask):
            self.spans.task_ended(inv.id, cmd.task_id, None, "timed_out" if cmd.timed_out
                                  else "cancelled")
            reason = p.KillReason.TIMED_OUT if cmd.timed_out else p.KillReason.CANCELLED
            self.gate.release(cmd.key.node_id, cmd.task_id)
            self.sends(self.pool.cancel(cmd.key.node_id, cmd.task_id, reason))
        elif isinstance(cmd, COMMANDS):
            if isinstance(cmd, m.OpenMap):
                run.map = MapLink(self.myAddress, self.spec)
            if run.map is not None:
                self.sends(run.map.on_command(cmd, self.pool, inv.id))
        elif isinstance(cmd, m.End):
            self._end(run, cmd)
        elif isinstance(cmd, m.RecordPause):
            return self.ledger.checkpoint(inv.id, run.token, inv.input, cmd.checkpoint,
                                          cmd.hold.to_dict()) or m.PauseRecorded()
        elif isinstance(cmd, m.RecordCancelled):
            self.ledger.record_cancelled(inv.id, run.token, cmd.tasks, cmd.error)
        elif isinstance(cmd, m.ScheduleRetry):
            self.deadlines.arm_retry(cmd.execution_id, cmd.key, cmd.seconds)
            self.spans.retrying(cmd)
        return None

    def reply(self, to: Any, request: Any, answer: Any) -> None:
        """Send ``answer`` to ``to``, carrying the ``ref`` of the ``request`` it
        answers (a caller drops an answer with another ref: a late one)."""
        ref = getattr(request, "ref", 0)
        if ref and isinstance(answer, HayataError):
            answer.ref = ref
        elif ref and hasattr(answer, "ref") and dataclasses.is_dataclass(answer):
            answer = dataclasses.replace(answer, ref=ref)  # type: ignore[type-var]
        self.send(to, answer)

    def outcome(self, message: p.Outcome, _sender: Any = None) -> None:
        """A task's outcome: its circuit and cache first, then its machine."""
        if not is_compensation(message.execution_id):  # a compensator: neither
            self.cache.completed(message)
            for change in self.gate.outcome(message.node_id, message.task_id,
                                            message.ok, message.error):
                self.feed_all(change)
        run = self._running(message.execution_id)
        if run is not None:
            self.spans.task_ended(run.inv.id, message.task_id, message.error)
            self.feed(run, m.TaskOutcome(
                message.execution_id, m.TaskKey(message.node_id, message.item),
                message.ok, message.result, message.error, message.partials))
        # The slot frees after the machine took the outcome: a failure cancels
        # the items waiting for it before one of them could take it.
        self.sends(self.pool.done(message.task_id))
        self.timers.arm_retire()

    def sends(self, sends: list[tuple[Any, Any]]) -> None:
        """Send to nodes, edges and reducers; while batching, through the outbox
        (once the message being handled is done, together per target). Either
        way the tasks of ``sends`` for one edge (a chain) go as one RunTasks."""
        batching = self.admission.batching
        if not batching and len(sends) == 1 and not self.timers.deferred:
            self.send(*sends[0])  # the common case: nothing to merge
            return
        now = Outbox()
        for address, message in sends:
            self.timers.sent(message)
            (self.outbox if batching else now).put(address, message)
        for address, message in now.take() if now else ():
            self.send(address, message)

    def _end(self, run: InFlight, end: m.End) -> None:
        inv = run.inv
        self.events.ending(inv.id)  # its last events stored and sent, then the bookkeeping
        del self.running[inv.id]
        self.timers.forget(inv.id)
        self.cache.forget(inv.id)
        took = self.spans.ended(inv.id, end.ok, end.error, end.paused)
        self.log.info("invocation_ended", invocation_id=inv.id, ok=end.ok,
                      code=end.error.code if end.error else None, kept=end.kept,
                      duration_ms=took)
        result = AgentResult(inv.id, end.ok, end.result, end.error, status="paused"
                             if end.paused else "interrupted" if end.kept else "",
                             run=run.run_id)
        self.events.result(run.subscriber, result)
        self.ledger.results.publish(result)
        if end.kept:
            self.ledger.keep(inv.id, self.ledger.record_of(inv.id, inv.input, inv.checkpoint()))
        if run.next_started is not None:
            self.admission.start_queued(run.next_started)


Handler = Callable[[AgentActor, Any, Any], None]
ROUTES: dict[type, Handler] = {
    Run: lambda agent, message, sender: agent.admission.on_run(message, sender),
    Recover: lambda agent, message, sender: agent.admission.on_recover(message, sender),
    ResumePaused: lambda agent, message, sender: agent.admission.on_recover(message, sender),
    Commit: AgentActor._on_commit,
    p.Outcome: AgentActor.outcome,
    p.Outcomes: AgentActor._on_outcomes,
    p.Partial: AgentActor._on_partial,
    **dict.fromkeys(MESSAGES, AgentActor._on_map_message),
    p.EdgeTable: AgentActor._on_edge_table,
    p.EdgeLost: lambda agent, message, _sender: agent.nodes.on_edge_lost(message),
    WakeupMessage: lambda agent, message, _sender: agent.timers.on_timer(message.payload),
    p.NodeTable: AgentActor._on_node_table,
    p.NodeUp: lambda agent, message, _sender: agent.nodes.on_node_up(message),
    p.NodeExited: lambda agent, message, _sender: agent.nodes.on_node_down(message),
    GetStatus: AgentActor._on_status,
    GetUnfinished: AgentActor._on_unfinished,
    ResolveTask: AgentActor._on_resolve,
    Abandon: AgentActor._on_abandon,
    Cancel: AgentActor._on_cancel,
    GetResult: AgentActor._on_result_request,
    WaitResult: AgentActor._on_result_request,
}
"""The agent's one routing table: message type -> handler (the agent, the
message, its sender). A message of no type here is ignored."""


def route(kind: type) -> Handler | None:
    """The handler of a message of type ``kind`` (or of its nearest base in
    :data:`ROUTES`), None if it has none."""
    handler = ROUTES.get(kind)
    if handler is None:
        handler = next((ROUTES[base] for base in kind.__mro__ if base in ROUTES), None)
    return handler
