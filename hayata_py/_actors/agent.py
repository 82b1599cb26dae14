"""The agent actor: a shell around the invocation machine (``hayata_py._invocation``).

It turns messages into the machine's events and carries out its commands:
calling the decision policy, durable writes (the
:class:`~hayata_py._actors.ledger.Ledger`), sending tasks straight to edges
(the :class:`~hayata_py._actors.edges.EdgePool`), cancelling them, arming
each task's deadline and retry backoff, and sending the result. The machine
alone decides when a step and an invocation are over.

Ownership: a lease held by the system's name, renewed every third of
``spec.lease_seconds``; a refused renewal stops the run (``ownership_lost``).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from thespian.actors import WakeupMessage

from hayata_py import _invocation as m
from hayata_py._actors import _protocol as p
from hayata_py._actors import pauses, procs
from hayata_py._actors._wellformed import drop_malformed
from hayata_py._actors.boundary import validate_run as validate_run
from hayata_py._actors.edges import EdgePool, edge_died, run_task
from hayata_py._actors.ledger import Ledger
from hayata_py._actors.maps import COMMANDS, MESSAGES, MapLink
from hayata_py._actors.spans import InvocationSpans
from hayata_py._actors.timers import Deadlines
from hayata_py._callables import import_problem, resolve_callable
from hayata_py._config import AgentSpec
from hayata_py._errors import RunRejected, StoreError
from hayata_py.messages import (
    Abandon,
    AgentEvent,
    AgentResult,
    Caller,
    GetResult,
    GetStatus,
    Recover,
    ResolveTask,
    ResumePaused,
    Run,
    RunAccepted,
    WaitResult,
)
from supervisors import SupervisedActor


class AgentActor(SupervisedActor):
    """Coordinates invocations of one agent (child of its agent supervisor)."""

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
        self.maps = MapLink(self.myAddress, spec)
        self.inv: m.Invocation | None = None
        self.subscriber: Any = None
        self.token = 0
        self.spans = InvocationSpans(spec.id)
        self.unplaced: dict[str, str] = {}  # node id -> why no system can run it now
        self.nodes_sup: procs.Identity | None = None  # the node supervisor process
        self.deadlines = Deadlines(self.wakeupAfter)
        # The current step's checkpoint, not written here: it rides on every RunTask
        # of the step and each edge commits it with its ``started``, in the same
        # transaction (docs/design.md, "Fewer commits per step").
        self.folded: m.Checkpoint | None = None
        self.send(nodes_supervisor, p.WatchNodes(self.myAddress))

    def on_stop(self) -> None:
        """A running invocation ends as ``agent_stopped``, unless the node supervisor
        died (the agent restarts with it, nothing failed): then it is kept."""
        if self.inv is None:
            return
        lost = self.nodes_sup is not None and not procs.running(self.nodes_sup)
        if lost:
            self.pool = EdgePool(self.spec)  # its nodes and edges are dead: send them nothing
        self._feed(m.Stop(m.StopKind.NODES_LOST if lost else m.StopKind.REQUESTED))

    # -- messages -> events ----------------------------------------------------------

    def on_receive(self, message: Any, sender: Any) -> None:
        if drop_malformed(self.log, message):
            return
        if isinstance(message, p.Outcome):
            self._sends(self.pool.done(message.task_id))
            self.spans.task_ended(message.task_id, message.error)
            self._feed(m.TaskOutcome(message.execution_id, m.TaskKey(message.node_id,
                                     message.item), message.ok, message.result,
                                     message.error, message.partials))
        elif isinstance(message, p.Partial):
            self._feed(m.PartialResult(message.execution_id, m.TaskKey(
                message.node_id, message.item), message.index, message.edge_id,
                message.result))
        elif isinstance(message, MESSAGES):
            sends, event = self.maps.on_message(message)
            self._sends(sends)
            if event is not None:
                self._feed(event)
        elif isinstance(message, p.EdgeTable):
            self._sends(self.pool.on_table(sender, message))
        elif isinstance(message, p.EdgeLost):
            self._on_edge_lost(message)
        elif isinstance(message, Run):
            self._on_run(message, sender)
        elif isinstance(message, WakeupMessage):
            self._on_timer(message.payload)
        elif isinstance(message, p.NodeTable):
            self.unplaced = dict(message.waiting)
            if message.supervisor_pid is not None:
                self.nodes_sup = procs.identity(message.supervisor_pid) or (
                    message.supervisor_pid, -1.0)
            for node_id, address in message.nodes.items():
                self._node_up(node_id, address)
        elif isinstance(message, p.NodeUp):
            self.unplaced.pop(message.node_id, None)
            self._node_up(message.node_id, message.address)
        elif isinstance(message, p.NodeDown):
            self.pool.node_down(message.node_id)
            if message.cause is m.DownCause.WAITING_FOR_PLACEMENT:
                self.unplaced[message.node_id] = message.reason
            self._feed(m.NodeDown(message.node_id, message.cause, message.pid,
                                  message.reason))
        elif isinstance(message, GetStatus):
            status = self.ledger.status(self.inv.id if self.inv else None)
            self.send(sender, dataclasses.replace(status, ref=message.ref))
        elif isinstance(message, (Recover, ResumePaused)):
            self._on_recover(message, sender)
        elif isinstance(message, ResolveTask):
            self.send(sender, self.ledger.resolve(message))
        elif isinstance(message, Abandon):
            self.send(sender, self.ledger.abandon(message))
        elif isinstance(message, (GetResult, WaitResult)):
            self.ledger.answer(message, sender, self.inv.id if self.inv else None)

    def _node_up(self, node_id: str, address: Any) -> None:
        self._sends(self.pool.node_up(node_id, address) + self.maps.node_up(node_id, address))

    def _on_edge_lost(self, lost: p.EdgeLost) -> None:
        """Every task the edge was running when it died fails (none if it was
        killed or retired)."""
        error = edge_died(lost)
        runs = self.pool.on_lost(lost.node_id, lost.edge_id, lost.exit)
        for run in runs:  # all of them first: the first failure cancels the others
            self.spans.task_ended(run.task_id, error)
        for run in runs:
            # lead: idempotent re-run here (a node in spec.idempotent_nodes:
            # self._sends(self.pool.dispatch(dataclasses.replace(run, attempt=run.attempt + 1)))
            # instead of the failure below)
            self._feed(m.TaskOutcome(run.execution_id, m.TaskKey(run.node_id, run.item),
                                     False, error=error))

    # -- starting a run ---------------------------------------------------------------

    def _on_run(self, run: Run, sender: Any) -> None:
        rejected = self.ledger.refuse(run, self.inv.id if self.inv else None)
        if rejected is not None:
            self.send(sender, rejected)
            return
        state = dict(self.spec.state)
        seed = m.Seed(uuid.uuid4().hex, run.input, state, run.stream)
        try:
            token = self.ledger.create(seed.invocation_id, run.input, state)
        except StoreError as exc:
            self.send(sender, RunRejected(f"could not record the invocation: {exc}",
                                          code=exc.code))
            return
        self._begin(seed, token, run.subscriber, sender, m.Begin())

    def _on_recover(self, message: Recover | ResumePaused, sender: Any) -> None:
        """``recover()`` an interrupted invocation, or ``resume()`` a paused one."""
        rejected = validate_run(Run(None, message.subscriber, message.stream))
        answer: Any
        if isinstance(message, Recover):
            self.ledger.refresh_recovering()
            answer = self.ledger.nothing() if self.ledger.recovering is None else (
                rejected or self.ledger.recover(self.unplaced))
        else:
            answer = rejected or (pauses.resume(self.ledger, message) if self.inv is None else
                                  RunRejected(f"agent {self.spec.id!r} is running invocation "
                                              f"{self.inv.id}", code="agent_busy"))
        if not isinstance(answer, tuple):
            self.send(sender, answer)
            return
        record, token, resume = answer
        seed = m.Seed(record.invocation_id, record.input, dict(record.state), message.stream,
                      record.step, record.last_result, record.parallel_results,
                      resume_value=getattr(message, "value", None)
                      if isinstance(message, ResumePaused) else pauses.resumed_value(record))
        self.log.info("invocation_recovered" if isinstance(message, Recover) else
                      "invocation_resumed", invocation_id=seed.invocation_id, step=seed.step)
        self._begin(seed, token, message.subscriber, sender, resume)

    def _begin(self, seed: m.Seed, token: int, subscriber: Any, sender: Any,
               first: m.Begin | m.Resume) -> None:
        self.inv = m.Invocation(seed, self.rules)
        self.token = token
        self.subscriber = sender if isinstance(subscriber, Caller) else subscriber
        if self.ledger.store is not None:
            self.deadlines.renew_in(self.spec.lease_seconds / 3)
        self.spans.start(seed.invocation_id, isinstance(first, m.Resume))
        self.send(sender, RunAccepted(seed.invocation_id))
        self.log.info("invocation_started", invocation_id=seed.invocation_id)
        self._feed(first)

    # -- commands ---------------------------------------------------------------------

    def _feed(self, event: m.Event) -> None:
        """Step the machine with ``event`` and carry out its commands; answers to
        commands (policy, writes) are fed back in order."""
        queue = [event]
        while queue and self.inv is not None:
            for command in self.inv.step(queue.pop(0)):
                answer = self._do(self.inv, command)
                if answer is not None:
                    queue.append(answer)

    def _do(self, inv: m.Invocation, cmd: Any) -> m.Event | None:
        if isinstance(cmd, m.Emit):
            if self.subscriber is not None:
                self.send(self.subscriber, AgentEvent(inv.id, cmd.type, cmd.sequence, cmd.data))
        elif isinstance(cmd, m.Dispatch):
            self.spans.task_started(cmd.task_id, cmd.key.node_id, cmd.execution_id,
                                    cmd.key.item)
            folded = self.ledger.folded_record(inv.id, self.folded, cmd)
            self._sends(self.pool.dispatch(run_task(self.spec, inv, cmd, self.myAddress,
                                                    self.token, folded)))
        elif isinstance(cmd, m.CallPolicy):
            try:
                return m.PolicyAnswered(resolve_callable(self.spec.policy)(cmd.context))
            except BaseException as exc:  # noqa: BLE001 - user code must never reach Thespian
                return m.PolicyRaised(type(exc).__name__, str(exc))
        elif isinstance(cmd, m.SaveCheckpoint):
            self.folded, saved = self.ledger.save_step(inv.id, self.token, inv.input,
                                                       cmd.checkpoint, self.unplaced)
            return saved
        elif isinstance(cmd, m.RecordResult):
            return self.ledger.finish(inv.id, self.token, cmd) or m.ResultRecorded()
        elif isinstance(cmd, m.ArmDeadline):
            self.deadlines.arm_execution(cmd.execution_id, cmd.seconds, cmd.key)
        elif isinstance(cmd, m.CancelTask):
            self.spans.task_ended(cmd.task_id, None, "timed_out" if cmd.timed_out
                                  else "cancelled")
            reason = p.KillReason.TIMED_OUT if cmd.timed_out else p.KillReason.CANCELLED
            self._sends(self.pool.cancel(cmd.key.node_id, cmd.task_id, reason))
        elif isinstance(cmd, COMMANDS):
            self._sends(self.maps.on_command(cmd, self.pool, inv.id))
        elif isinstance(cmd, m.End):
            self._end(inv, cmd)
        elif isinstance(cmd, m.RecordPause):
            return self.ledger.checkpoint(inv.id, self.token, inv.input, cmd.checkpoint,
                                          cmd.hold.to_dict()) or m.PauseRecorded()
        elif isinstance(cmd, m.ScheduleRetry):
            self.deadlines.arm_retry(cmd.execution_id, cmd.key, cmd.seconds)
            self.spans.retrying(cmd)
        return None

    def _sends(self, sends: list[tuple[Any, Any]]) -> None:
        for address, message in sends:
            self.send(address, message)

    def _end(self, inv: m.Invocation, end: m.End) -> None:
        self.inv = None
        self.folded = None
        self.deadlines.clear()
        self.spans.ended(end.ok, end.error, end.paused)
        self.log.info("invocation_ended", invocation_id=inv.id, ok=end.ok,
                      code=end.error.code if end.error else None, kept=end.kept)
        result = AgentResult(inv.id, end.ok, end.result, end.error, status="paused"
                             if end.paused else "interrupted" if end.kept else "")
        if self.subscriber is not None:
            self.send(self.subscriber, result)
        self.ledger.publish(result)
        if end.kept:
            self.ledger.keep(inv.id, self.ledger.record_of(inv.id, inv.input, inv.checkpoint()))

    # -- timers: the execution deadline and the lease renewal ---------------------------

    def _on_timer(self, at: Any) -> None:
        self.deadlines.fired(at)
        inv = self.inv
        if inv is None:
            return
        if self.deadlines.renewal_due():
            renewed = self.ledger.renew(inv.id, self.token)
            if renewed is False:
                self._feed(m.LeaseLost())
                return
            lease = self.spec.lease_seconds
            self.deadlines.renew_in(lease / 3 if renewed else min(1.0, lease / 6))
        for execution_id, key in self.deadlines.execution_passed():
            self._feed(m.DeadlinePassed(execution_id, key))
        for execution_id, key in self.deadlines.retries_due():
            self._feed(m.RetryDue(execution_id, key))
        if self.inv is not None:
            self.deadlines.rearm()
