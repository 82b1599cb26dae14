"""The agent: runs one invocation at a time, calling the decision policy
between transitions and dispatching nodes.

Every transition has an ``execution_id`` (``<invocation>:<step>``) and every
node in it a ``task_id`` (derived from invocation, step and node by
``store.task_id_for``); both are stable,
so a checkpoint taken at a step boundary identifies the work exactly.
Stale messages (an outcome of a finished or cancelled execution, a partial
from a replaced edge) are recognised by these ids and dropped; they never
change a terminal state or cause a second notification.

Ownership: every invocation runs under a lease in the store, held by the
system's name (``spec.owner``) and renewed every third of
``spec.lease_seconds``. If the store says another system took the invocation
over (``StaleWriter`` on a renewal), the agent stops it at once without
writing anything (``ownership_lost``). If a node's host dies mid-execution
(its supervisor reports it ``unreachable``), the invocation is interrupted
but kept (``invocation_interrupted``): the agent then waits for ``recover()``.
"""

from __future__ import annotations

import dataclasses
import math
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from thespian.actors import ActorAddress, WakeupMessage

from hayata_py import _telemetry as telemetry
from hayata_py._actors._protocol import (
    Cancel,
    Execute,
    NodeDown,
    NodeTable,
    NodeUp,
    Outcome,
    Partial,
    WatchNodes,
)
from hayata_py._actors.durable import as_store_error, store_for
from hayata_py._callables import resolve_callable
from hayata_py._codec import check_encodable
from hayata_py._config import AgentSpec
from hayata_py._errors import (
    EncodingError,
    ErrorInfo,
    InvocationBusy,
    RecoveryRejected,
    RunRejected,
    StaleWriter,
    StoreError,
)
from hayata_py._policy import PolicyContext, validate_decision
from hayata_py.messages import (
    Abandon,
    Ack,
    AgentEvent,
    AgentResult,
    AgentStatus,
    Caller,
    GetResult,
    GetStatus,
    Recover,
    ResolveTask,
    ResultReply,
    Run,
    RunAccepted,
    WaitResult,
)
from hayata_py.store import (
    ActiveExecution,
    InvocationRecord,
    TaskClass,
    TaskStore,
    classify_execution,
    task_id_for,
)
from supervisors import SupervisedActor

RESULTS_KEPT = 1000
DEADLINE_MARGIN = 5.0


@dataclass
class _Execution:
    id: str
    nodes: tuple[str, ...]
    input: Any
    parallel: bool
    pending: set[str]
    results: dict[str, Any] = field(default_factory=dict)
    partials: dict[str, int] = field(default_factory=dict)
    held: dict[str, Outcome] = field(default_factory=dict)
    deadline: float = 0.0


@dataclass
class _Invocation:
    id: str
    input: Any
    subscriber: Any
    stream: bool
    state: dict[str, Any]
    step: int = 0
    last_result: Any = None
    parallel_results: list[Any] | None = None
    sequence: int = 0
    execution: _Execution | None = None
    token: int = 0
    span: telemetry.Span | None = None
    renew_at: float = math.inf


def _stored_result(record: InvocationRecord) -> AgentResult:
    """The result of a finished invocation, as the store has it."""
    error = ErrorInfo.from_dict(record.error) if record.error else None
    return AgentResult(record.invocation_id, record.status == "completed", record.result,
                       error)


def validate_run(run: Any) -> RunRejected | None:
    """The boundary check of a :class:`Run` message (pure)."""
    if not isinstance(run, Run):
        return RunRejected(f"expected hy.Run, got {type(run).__name__}", code="invalid_option",
                           field="run")
    stream: Any = run.stream
    if not isinstance(stream, bool):
        return RunRejected(f"stream must be True or False, got {stream!r}",
                           code="invalid_option", field="stream")
    if run.subscriber is not None and not isinstance(run.subscriber, (Caller, ActorAddress)):
        return RunRejected(
            f"subscriber must be an actor address or hy.CALLER, got "
            f"{type(run.subscriber).__name__}", code="invalid_option", field="subscriber")
    if run.stream and run.subscriber is None:
        return RunRejected("stream=True needs a subscriber (an actor address or hy.CALLER)",
                           code="invalid_option", field="subscriber")
    try:
        check_encodable(run.input, "input")
    except EncodingError as exc:
        return RunRejected(f"input cannot be stored durably: {exc}", code="invalid_input",
                           field="input", key=exc.details.get("key"))
    return None


class AgentActor(SupervisedActor):
    """Coordinates invocations of one agent (child of its agent supervisor)."""

    def on_start(self, spec: AgentSpec, nodes_supervisor: Any) -> None:
        self.spec = spec
        self.nodes_supervisor = nodes_supervisor
        self.node_addresses: dict[str, Any] = {}
        self.outbox: dict[str, list[Any]] = {}
        self.inv: _Invocation | None = None
        self.results: OrderedDict[str, AgentResult] = OrderedDict()
        self.waiters: dict[str, list[tuple[Any, int]]] = {}
        self._timers: list[float] = []  # when the pending wakeups fire (monotonic)
        self.unplaced: dict[str, str] = {}  # node id -> why no system can run it now
        self.owner = spec.owner or spec.instance
        self.log = self.log.bind(agent_id=spec.id)
        self.store: TaskStore | None = store_for(spec.store_url) if spec.store_url else None
        # An unfinished invocation in the store: this agent (or system) died
        # while running it. It waits for recover(), resolve or abandon.
        self.recovering: InvocationRecord | None = (
            self.store.unfinished_invocation(spec.id) if self.store else None)
        if self.recovering is not None:
            self.log.warning("recovery_required", invocation_id=self.recovering.invocation_id)
        self.send(nodes_supervisor, WatchNodes(self.myAddress))

    def on_stop(self) -> None:
        """Stopped on request (stop_agent, system shutdown): a running invocation
        ends as failed (``agent_stopped``), recorded, and its subscriber is told."""
        if self.inv is not None:
            self._fail_invocation(ErrorInfo(
                "agent_stopped", f"agent {self.spec.id!r} was stopped during the invocation",
                {}))

    # -- dispatch --------------------------------------------------------------------

    def on_receive(self, message: Any, sender: Any) -> None:
        if isinstance(message, Outcome):
            self._on_outcome(message)
        elif isinstance(message, Partial):
            self._on_partial(message)
        elif isinstance(message, Run):
            self._on_run(message, sender)
        elif isinstance(message, WakeupMessage):
            self._on_timer(message.payload)
        elif isinstance(message, NodeTable):
            self.node_addresses = dict(message.nodes)
            self.unplaced = dict(message.waiting)
            for node_id in list(self.outbox):
                self._flush(node_id)
        elif isinstance(message, NodeUp):
            self.node_addresses[message.node_id] = message.address
            self.unplaced.pop(message.node_id, None)
            self._flush(message.node_id)
        elif isinstance(message, NodeDown):
            self._on_node_down(message)
        elif isinstance(message, GetStatus):
            self._refresh_recovering()
            self.send(sender, dataclasses.replace(self._status(), ref=message.ref))
        elif isinstance(message, Recover):
            self._reply(sender, self._on_recover(message, sender))
        elif isinstance(message, ResolveTask):
            self._reply(sender, self._on_resolve(message))
        elif isinstance(message, Abandon):
            self._reply(sender, self._on_abandon(message))
        elif isinstance(message, GetResult):
            reply = self._result_reply(message.invocation_id)
            self.send(sender, dataclasses.replace(reply, ref=message.ref))
        elif isinstance(message, WaitResult):
            self._refresh_recovering()
            reply = self._result_reply(message.invocation_id)
            if reply.result is None and self.recovering is not None \
                    and self.recovering.invocation_id == message.invocation_id:
                self.send(sender, dataclasses.replace(reply, ref=message.ref,
                                                      recovery_required=True))
            elif reply.result is None and reply.known:
                self.waiters.setdefault(message.invocation_id, []).append(
                    (sender, message.ref))
            else:
                self.send(sender, dataclasses.replace(reply, ref=message.ref))

    def _refresh_recovering(self) -> None:
        """Forget an unfinished invocation that has ended meanwhile (another system
        recovered or abandoned it): keep its stored result, answer its waiters."""
        record = self.recovering
        if record is None or self.store is None:
            return
        try:
            now = self.store.get_invocation(record.invocation_id)
        except Exception as raw:  # noqa: BLE001 - keep what we know; report later
            self.log.warning("store_unavailable", code=as_store_error(raw).code)
            return
        if now is not None and now.status == "running":
            return
        self.recovering = None
        self.log.info("unfinished_invocation_ended_elsewhere",
                      invocation_id=record.invocation_id)
        if now is not None:
            self._publish(_stored_result(now))

    def _status(self) -> AgentStatus:
        if self.recovering is not None:
            return AgentStatus(self.spec.id, "recovery_required",
                               self.recovering.invocation_id)
        return AgentStatus(self.spec.id, "running" if self.inv else "idle",
                           self.inv.id if self.inv else None)

    def _reply(self, sender: Any, answer: Any) -> None:
        if answer is not None:
            self.send(sender, answer)

    def _result_reply(self, invocation_id: str) -> ResultReply:
        result = self.results.get(invocation_id)
        running = (self.inv is not None and self.inv.id == invocation_id) or (
            self.recovering is not None and self.recovering.invocation_id == invocation_id)
        if result is None and not running and self.store is not None:
            record = self.store.get_invocation(invocation_id)
            if record is not None and record.agent_id == self.spec.id:
                if record.status == "running":
                    return ResultReply(invocation_id, None, known=True)
                result = _stored_result(record)
        return ResultReply(invocation_id, result, known=result is not None or running)

    # -- invocation lifecycle -----------------------------------------------------------

    def _on_run(self, run: Run, sender: Any) -> None:
        self._refresh_recovering()
        rejected = validate_run(run)
        if rejected is None and self.recovering is not None:
            rejected = RunRejected(
                f"agent {self.spec.id!r} has an unfinished invocation "
                f"{self.recovering.invocation_id}; call recover(), resolve_task() or "
                "abandon() first", code="recovery_required",
                invocation_id=self.recovering.invocation_id)
        if rejected is None and self.inv is not None:
            rejected = RunRejected(f"agent {self.spec.id!r} is running invocation "
                                   f"{self.inv.id}", code="agent_busy",
                                   invocation_id=self.inv.id)
        if rejected is not None:
            self.send(sender, rejected)
            return
        subscriber = sender if isinstance(run.subscriber, Caller) else run.subscriber
        inv = _Invocation(uuid.uuid4().hex, run.input, subscriber, run.stream,
                          dict(self.spec.state))
        if self.store is not None:
            try:
                inv.token = self.store.create_invocation(
                    InvocationRecord(inv.id, self.spec.id, "running", 0, inv.state, inv.input),
                    owner=self.owner, lease_seconds=self.spec.lease_seconds)
            except Exception as raw:  # noqa: BLE001 - any store failure is reported
                exc = as_store_error(raw)
                self.send(sender, RunRejected(f"could not record the invocation: {exc}",
                                              code=exc.code))
                return
        self.inv = inv
        self._lease_renewed(inv)
        inv.span = telemetry.span_start(telemetry.AGENT_INVOCATION,
                                        {"agent_id": self.spec.id, "invocation_id": inv.id})
        self.send(sender, RunAccepted(inv.id))
        self.log.info("invocation_started", invocation_id=inv.id)
        self._emit("invocation_started", {"input": run.input})
        self._decide()

    def _decide(self) -> None:
        inv = self.inv
        assert inv is not None
        ctx = PolicyContext(inv.step, MappingProxyType(dict(inv.state)), inv.input,
                            inv.last_result, inv.parallel_results, inv.id)
        try:
            answer = resolve_callable(self.spec.policy)(ctx)
        except BaseException as exc:  # noqa: BLE001 - user code must never reach Thespian
            self._fail_invocation(ErrorInfo("policy_failed", f"{type(exc).__name__}: {exc}",
                                            {"type": type(exc).__name__, "step": inv.step}))
            return
        decision = validate_decision(answer, self.spec.nodes)
        if isinstance(decision, ErrorInfo):
            self._fail_invocation(decision)
            return
        if decision.finish:
            try:
                check_encodable(decision.result, "result")
            except EncodingError as exc:
                self._fail_invocation(ErrorInfo("invalid_policy_result",
                                     f"Finish result cannot be stored: {exc}", exc.details))
                return
            result = AgentResult(inv.id, True, decision.result)
            if self._finish(inv, result):
                self._emit("invocation_completed", {"result": decision.result})
                self._end(result)
            return
        if inv.step >= self.spec.max_steps:
            self._fail_invocation(ErrorInfo("max_steps_exceeded",
                                 f"the policy asked for step {inv.step + 1} but max_steps is "
                                 f"{self.spec.max_steps}", {"max_steps": self.spec.max_steps}))
            return
        try:
            check_encodable(decision.input, "input")
        except EncodingError as exc:
            self._fail_invocation(ErrorInfo("invalid_policy_result",
                                 f"Next input cannot be stored: {exc}", exc.details))
            return
        self._start_transition(decision.nodes, decision.input, decision.parallel)

    def _start_transition(self, nodes: tuple[str, ...], node_input: Any, parallel: bool) -> None:
        inv = self.inv
        assert inv is not None
        execution = _Execution(f"{inv.id}:{inv.step}", nodes, node_input, parallel, set(nodes))
        inv.execution = execution
        inv.parallel_results = None
        # The checkpoint names the work before any of it starts.
        if not self._checkpoint(inv):
            return
        waiting = [n for n in nodes if n in self.unplaced]
        if waiting and self.store is not None:
            # Its host died and no system can run it yet: say so now rather than
            # at the execution deadline. Nothing started; recover() runs the step.
            self.log.warning("invocation_interrupted", invocation_id=inv.id, node_id=waiting[0])
            self._stop_run_keep_invocation(inv, ErrorInfo(
                "invocation_interrupted",
                f"node {waiting[0]!r} has no system to run on ({self.unplaced[waiting[0]]}); "
                "the invocation is kept: call recover() once a system that satisfies the "
                "node's placement has joined",
                {"node_id": waiting[0], "reason": self.unplaced[waiting[0]],
                 "recoverable": True}))
            return
        for node_id in nodes:
            self._send_execute(inv, execution, node_id, attempt=1)

    def _send_execute(self, inv: _Invocation, execution: _Execution, node_id: str,
                      attempt: int) -> None:
        task_id = task_id_for(inv.id, inv.step, node_id)
        self._emit("node_started", {"node_id": node_id, "execution_id": execution.id})
        self._to_node(node_id, Execute(
            execution.id, task_id, inv.id, node_id, execution.input, dict(inv.state),
            self.myAddress, inv.stream, self.spec.execution_timeout, idempotency_key=task_id,
            step=inv.step, branch_index=execution.nodes.index(node_id), token=inv.token,
            attempt=attempt, store_url=self.spec.store_url, instance=self.spec.instance,
            agent_id=self.spec.id))
        # A last-resort deadline in case a node never receives its work.
        execution.deadline = time.monotonic() + self.spec.execution_timeout + DEADLINE_MARGIN
        self._arm_timer(execution.deadline)

    def _record_of(self, inv: _Invocation) -> InvocationRecord:
        """The checkpoint of ``inv`` as it stands in memory."""
        execution = inv.execution
        active = None if execution is None else ActiveExecution(
            execution.id, inv.step, execution.nodes, execution.input, execution.parallel)
        return InvocationRecord(inv.id, self.spec.id, "running", inv.step, inv.state,
                                inv.input, active, inv.parallel_results, inv.last_result)

    def _checkpoint(self, inv: _Invocation) -> bool:
        """Save the invocation's checkpoint; on refusal fail it (without writing)."""
        if self.store is None:
            return True
        record = self._record_of(inv)
        try:
            self.store.save_checkpoint(record, token=inv.token)
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            exc = as_store_error(raw)
            self._fail_invocation(ErrorInfo(exc.code, f"checkpoint refused: {exc}",
                                            dict(exc.details)), durable=False)
            return False
        return True

    def _active(self, execution_id: str, node_id: str) -> _Execution | None:
        execution = self.inv.execution if self.inv else None
        if execution is None or execution.id != execution_id or node_id not in execution.pending:
            return None
        return execution

    def _on_outcome(self, outcome: Outcome) -> None:
        execution = self._active(outcome.execution_id, outcome.node_id)
        if execution is None:
            return
        if outcome.ok and execution.partials.get(outcome.node_id, 0) < outcome.partials:
            execution.held[outcome.node_id] = outcome  # its partial events are still on the way
            return
        self._node_done(execution, outcome)

    def _on_partial(self, partial: Partial) -> None:
        execution = self._active(partial.execution_id, partial.node_id)
        if execution is None:
            return
        seen = execution.partials.get(partial.node_id, 0) + 1
        execution.partials[partial.node_id] = seen
        self._emit("node_partial_result", {
            "node_id": partial.node_id, "execution_id": partial.execution_id,
            "edge_id": partial.edge_id, "result": partial.result})
        held = execution.held.get(partial.node_id)
        if held is not None and seen >= held.partials:
            del execution.held[partial.node_id]
            self._node_done(execution, held)

    def _node_done(self, execution: _Execution, outcome: Outcome) -> None:
        execution.pending.discard(outcome.node_id)
        if not outcome.ok:
            assert outcome.error is not None
            self._fail_invocation(outcome.error)
            return
        execution.results[outcome.node_id] = outcome.result
        self._emit("node_completed", {"node_id": outcome.node_id,
                                      "execution_id": execution.id})
        if not execution.pending:
            self._transition_done(execution)

    def _transition_done(self, execution: _Execution) -> None:
        inv = self.inv
        assert inv is not None
        inv.execution = None
        if execution.parallel:
            inv.parallel_results = [execution.results[n] for n in execution.nodes]
        else:
            result = execution.results[execution.nodes[0]]
            inv.state.update(result)
            inv.last_result = result
        inv.step += 1
        self._decide()

    def _on_node_down(self, down: NodeDown) -> None:
        self.node_addresses.pop(down.node_id, None)
        if down.reason.startswith("waiting_for_placement"):
            self.unplaced[down.node_id] = down.reason
        execution = self.inv.execution if self.inv else None
        if execution is not None and down.node_id in execution.pending:
            execution.pending.discard(down.node_id)
            if down.reason.startswith(("unreachable", "waiting_for_placement")) \
                    and self.store is not None:
                self._interrupt(execution, down)
                return
            self._fail_invocation(ErrorInfo("node_crashed",
                                 f"node {down.node_id!r} (pid {down.pid}) died during execution "
                                 f"{execution.id}: {down.reason}",
                                 {"node_id": down.node_id, "pid": down.pid,
                                  "reason": down.reason}))

    def _interrupt(self, execution: _Execution, down: NodeDown) -> None:
        """The node's host died mid-execution: end this run of the invocation
        but keep it in the store (running, under our lease) for ``recover()``;
        tasks that had started there are uncertain, completed ones are kept."""
        inv = self.inv
        assert inv is not None and self.store is not None
        error = ErrorInfo(
            "invocation_interrupted",
            f"node {down.node_id!r} became unreachable during execution {execution.id} "
            f"({down.reason}); the invocation is kept: call recover() once a system "
            "that satisfies the node's placement is up",
            {"node_id": down.node_id, "reason": down.reason, "recoverable": True})
        self.log.warning("invocation_interrupted", invocation_id=inv.id, node_id=down.node_id)
        self._stop_run_keep_invocation(inv, error)

    def _stop_run_keep_invocation(self, inv: _Invocation, error: ErrorInfo) -> None:
        """End this run without a durable result: the subscriber and waiters get
        ``error``; the invocation stays running in the store, and the agent
        reports it as ``recovery_required`` (``recover()`` continues it, here
        or on the system that now owns it)."""
        assert self.store is not None
        self._fail_invocation(error, durable=False, event="invocation_interrupted")
        self.results.pop(inv.id, None)  # not its result: recover() will produce that
        try:
            record = self.store.get_invocation(inv.id)
        except Exception as raw:  # noqa: BLE001 - the store is unreachable right now
            self.log.error("store_unavailable", invocation_id=inv.id,
                           code=as_store_error(raw).code)
            record = self._record_of(inv)  # what we know; re-read on the next request
        if record is not None and record.status == "running":
            self.recovering = record

    # -- timers: execution deadline and lease renewal ------------------------------------

    def _arm_timer(self, at: float) -> None:
        """Make sure a wakeup fires by ``at``. Few timers stay pending (Thespian
        stalls with many): a new one is set only if none fires by then."""
        if any(t <= at + 0.01 for t in self._timers):
            return
        self._timers.append(at)
        self.wakeupAfter(timedelta(seconds=max(0.0, at - time.monotonic())), at)

    def _on_timer(self, at: Any) -> None:
        if at in self._timers:
            self._timers.remove(at)
        inv = self.inv
        if inv is None:
            return
        now = time.monotonic()
        if now >= inv.renew_at and not self._renew(inv):
            return
        execution = inv.execution
        if execution is not None and now >= execution.deadline:
            self._on_deadline(execution.id)
            return
        self._arm_timer(min(inv.renew_at, execution.deadline if execution else math.inf))

    def _lease_renewed(self, inv: _Invocation) -> None:
        if self.store is not None:
            inv.renew_at = time.monotonic() + self.spec.lease_seconds / 3
            self._arm_timer(inv.renew_at)

    def _lose_ownership(self, inv: _Invocation) -> None:
        """Another system took the invocation over (fenced): stop at once and
        write nothing more; the invocation is kept, the new owner runs it."""
        self.log.error("ownership_lost", invocation_id=inv.id)
        self._stop_run_keep_invocation(inv, ErrorInfo(
            "ownership_lost", f"another system took over invocation {inv.id} (this "
            "system's lease was not renewed in time): this system stops it and writes "
            "nothing more", {"owner": self.owner, "recoverable": True}))

    def _renew(self, inv: _Invocation) -> bool:
        """Extend the lease; False if the invocation was lost to another owner."""
        assert self.store is not None
        try:
            self.store.renew_lease(inv.id, owner=self.owner, token=inv.token,
                                   lease_seconds=self.spec.lease_seconds)
        except (StaleWriter, InvocationBusy):
            self._lose_ownership(inv)
            return False
        except Exception as raw:  # noqa: BLE001 - a store hiccup: try again soon
            self.log.warning("lease_renewal_failed", invocation_id=inv.id,
                             code=as_store_error(raw).code)
            inv.renew_at = time.monotonic() + min(1.0, self.spec.lease_seconds / 6)
            return True
        inv.renew_at = time.monotonic() + self.spec.lease_seconds / 3
        return True

    def _on_deadline(self, execution_id: Any) -> None:
        execution = self.inv.execution if self.inv else None
        if execution is not None and execution.id == execution_id:
            self._fail_invocation(ErrorInfo("execution_timeout",
                                 f"execution {execution_id} got no outcome from "
                                 f"{sorted(execution.pending)}",
                                 {"pending_nodes": sorted(execution.pending)}))

    def _fail_invocation(self, error: ErrorInfo, *, durable: bool = True,
                         event: str = "invocation_failed") -> None:
        inv = self.inv
        assert inv is not None
        if error.code == "stale_writer" and self.store is not None:
            # A write of this run (checkpoint, an edge's record) was fenced: another
            # system owns the invocation now. Not a failure of the invocation.
            self._lose_ownership(inv)
            return
        execution = inv.execution
        if execution is not None:
            for node_id in execution.pending:
                self._to_node(node_id, Cancel(execution.id))
            self.outbox = {k: [m for m in v if not isinstance(m, Execute)]
                           for k, v in self.outbox.items()}
        self.log.info("invocation_failed", invocation_id=inv.id, code=error.code)
        result = AgentResult(inv.id, False, None, error)
        if durable and not self._finish(inv, result):
            return
        self._emit(event, {"reason": error.code, "message": error.message,
                           "details": dict(error.details)})
        self._end(result)

    def _finish(self, inv: _Invocation, result: AgentResult) -> bool:
        """Commit the terminal result before anyone is told (False: refused, and handled)."""
        if self.store is None:
            return True
        try:
            self.store.finish_invocation(
                inv.id, token=inv.token, status="completed" if result.ok else "failed",
                result=result.result, error=result.error.to_dict() if result.error else None,
                state=inv.state)
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            exc = as_store_error(raw)
            self.log.error("finish_refused", invocation_id=inv.id, code=exc.code)
            if isinstance(exc, StaleWriter):
                self._lose_ownership(inv)
                return False
            error = ErrorInfo(exc.code, f"the terminal result could not be recorded: {exc}",
                              dict(exc.details))
            self._emit("invocation_failed", {"reason": error.code, "message": error.message,
                                             "details": dict(error.details)})
            self._end(AgentResult(inv.id, False, None, error))
            return False
        return True

    def _end(self, result: AgentResult) -> None:
        inv = self.inv
        assert inv is not None
        self.inv = None
        if inv.span is not None:
            error = result.error
            if error is not None and error.code in ("policy_failed", "node_failed") \
                    and "type" in error.details:
                telemetry.span_exception(inv.span, str(error.details["type"]),
                                         metadata={"error_code": error.code})
            else:
                status = "completed" if result.ok else (
                    "timed_out" if error is not None and error.code == "execution_timeout"
                    else "failed")
                telemetry.span_stop(inv.span, status,
                                    metadata={"error_code": error.code} if error else None)
        if inv.subscriber is not None:
            self.send(inv.subscriber, result)
        self._publish(result)

    def _publish(self, result: AgentResult) -> None:
        """Keep ``result`` (the last RESULTS_KEPT) and answer its waiters."""
        self.results[result.invocation_id] = result
        while len(self.results) > RESULTS_KEPT:
            self.results.popitem(last=False)
        for waiter, ref in self.waiters.pop(result.invocation_id, []):
            self.send(waiter, ResultReply(result.invocation_id, result, ref=ref))

    # -- recovery -------------------------------------------------------------------------

    def _claim(self, record: InvocationRecord) -> int:
        assert self.store is not None
        return self.store.claim_invocation(record.invocation_id, owner=self.owner,
                                           lease_seconds=self.spec.lease_seconds)

    def _nothing(self) -> RecoveryRejected:
        return RecoveryRejected(f"agent {self.spec.id!r} has no unfinished invocation",
                                code="nothing_to_recover")

    def _on_recover(self, message: Recover, sender: Any) -> Any:
        self._refresh_recovering()
        record = self.recovering
        if record is None or self.store is None:
            return self._nothing()
        rejected = validate_run(Run(None, message.subscriber, message.stream))
        if rejected is not None:
            return rejected
        try:
            # Claim first: from here on no older writer (an orphan edge of a dead
            # system) can record anything, so the classification below is final.
            token = self._claim(record)
        except (InvocationBusy, StoreError) as exc:
            return RecoveryRejected(str(exc), code=exc.code,
                                    invocation_id=record.invocation_id)
        active = record.active_execution
        classes = None
        tasks: dict[str, Any] = {}
        if active is not None:
            records = self.store.get_tasks(record.invocation_id,
                                           execution_id=active.execution_id)
            tasks = {t.node_id: t for t in records}
            classes = classify_execution(active.node_ids, records, self.spec.idempotent_nodes)
            if classes.has_uncertain:
                return RecoveryRejected(
                    f"task(s) {list(classes.uncertain_task_ids)} of node(s) "
                    f"{list(classes.uncertain_node_ids)} started but recorded no result; "
                    "check the external system, then resolve_task(), abandon(), or declare "
                    "the node idempotent", code="task_execution_uncertain",
                    invocation_id=record.invocation_id,
                    task_ids=list(classes.uncertain_task_ids),
                    node_ids=list(classes.uncertain_node_ids))
        subscriber = sender if isinstance(message.subscriber, Caller) else message.subscriber
        inv = _Invocation(record.invocation_id, record.input, subscriber, message.stream,
                          dict(record.state), record.step, record.last_result,
                          record.parallel_results, token=token)
        self.recovering = None
        self.inv = inv
        self._lease_renewed(inv)
        inv.span = telemetry.span_start(telemetry.AGENT_INVOCATION, {
            "agent_id": self.spec.id, "invocation_id": inv.id, "recovered": True})
        self.send(sender, RunAccepted(inv.id))
        self.log.info("invocation_recovered", invocation_id=inv.id, step=inv.step)
        self._emit("invocation_started", {"input": inv.input, "recovered": True,
                                          "step": inv.step})
        if active is None or classes is None:
            self._decide()
            return None
        if classes.failed_node_ids:
            failed = tasks[classes.failed_node_ids[0]]
            self._fail_invocation(ErrorInfo.from_dict(failed.error or {
                "code": "node_failed", "message": "recorded as failed"}))
            return None
        execution = _Execution(active.execution_id, active.node_ids, active.input,
                               active.parallel, set(classes.to_run), dict(classes.reuse))
        inv.execution = execution
        if not classes.to_run:
            self._transition_done(execution)
            return None
        for node_id in classes.to_run:
            rerun = classes.classes[node_id] is TaskClass.RERUN
            self._send_execute(inv, execution, node_id,
                               attempt=tasks[node_id].attempt + 1 if rerun else 1)
        return None

    def _on_resolve(self, message: ResolveTask) -> Any:
        self._refresh_recovering()
        record = self.recovering
        if record is None or self.store is None:
            return self._nothing()
        task = self.store.get_task(message.task_id)
        active = record.active_execution
        if task is None or active is None or task.execution_id != active.execution_id:
            return RecoveryRejected(
                f"task {message.task_id!r} is not a task of the unfinished invocation's "
                "current step", code="task_not_found", task_id=message.task_id)
        result: Any = message.result
        if not isinstance(result, dict):
            return RecoveryRejected("a task result must be a dict (as a node returns)",
                                    code="invalid_result", task_id=message.task_id)
        try:
            token = self._claim(record)
            self.store.resolve_task(message.task_id, result=message.result, token=token)
        except (StoreError, EncodingError) as exc:
            return RecoveryRejected(str(exc), code=exc.code, task_id=message.task_id)
        self.log.info("task_resolved", task_id=message.task_id)
        return Ack(message.task_id)

    def _on_abandon(self, message: Abandon) -> Any:
        self._refresh_recovering()
        record = self.recovering
        if record is None or self.store is None:
            return self._nothing()
        if record.invocation_id != message.invocation_id:
            return RecoveryRejected(
                f"the unfinished invocation is {record.invocation_id}, not "
                f"{message.invocation_id}", code="not_found")
        error = ErrorInfo("abandoned", "the invocation was abandoned by the user", {})
        try:
            token = self._claim(record)
            self.store.finish_invocation(record.invocation_id, token=token, status="failed",
                                         error=error.to_dict())
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            exc = as_store_error(raw)
            return RecoveryRejected(str(exc), code=exc.code)
        self.recovering = None
        self._publish(AgentResult(record.invocation_id, False, None, error))
        self.log.info("invocation_abandoned", invocation_id=record.invocation_id)
        return Ack(record.invocation_id)

    # -- helpers -----------------------------------------------------------------------

    def _emit(self, event_type: str, data: dict[str, Any]) -> None:
        inv = self.inv
        if inv is None or not inv.stream or inv.subscriber is None:
            return
        inv.sequence += 1
        self.send(inv.subscriber, AgentEvent(inv.id, event_type, inv.sequence, data))

    def _to_node(self, node_id: str, message: Any) -> None:
        self.outbox.setdefault(node_id, []).append(message)
        self._flush(node_id)

    def _flush(self, node_id: str) -> None:
        address = self.node_addresses.get(node_id)
        if address is None:
            return
        for message in self.outbox.pop(node_id, []):
            self.send(address, message)
