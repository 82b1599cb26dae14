"""One invocation as a pure state machine: ``step(event) -> list[command]``.

The machine is the one owner of an execution's end: only it decides that a
step is over (all its tasks reported, one failed, its deadline passed, a node
died, the lease was lost, the agent stops) and that the invocation is over.
It holds one deadline per execution. It never calls the policy, the store or
a clock itself: it asks for those through commands and is told the answers
as events, so every path is a table row in its tests.

Phases::

    NEW --Begin/Resume--> DECIDING --PolicyAnswered(Next)--> SAVING --CheckpointSaved--> RUNNING
    RUNNING --last TaskOutcome--> DECIDING ...
    DECIDING --PolicyAnswered(Finish)--> FINISHING --ResultRecorded--> ENDED
    DECIDING --Pause / pause_before / pause_after--> PAUSING --PauseRecorded--> ENDED (kept)
    RUNNING --failed TaskOutcome with a retry--> (task held) --RetryDue--> dispatched again
    RUNNING --CancelRequested--> FINISHING (cancelled; its tasks stopped, recorded) --> ENDED
    any failure (durable) --> FINISHING --ResultRecorded--> ENDED
    interruption, lost lease (nothing written) --> ENDED

What a RUNNING step hears from its tasks is :mod:`hayata_py._invocation.stepping`.
A map step (``hy.Map``) stays RUNNING until its reducer answers; its window
of items and consolidation are :mod:`hayata_py._invocation.mapping`.

Guarantees (tested with hypothesis over random interleavings): exactly one
:class:`End`; streamed events numbered 1..n without gaps; every partial
result of a task before its ``node_completed``; nothing dispatched after the
end. Events that no longer apply (an outcome of a finished execution, a
second deadline) return no command.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from types import MappingProxyType
from typing import Any

from hayata_py._codec import check_encodable
from hayata_py._errors import EncodingError, ErrorInfo
from hayata_py._invocation import compensating, mapping, pause, reasons, stepping, waits
from hayata_py._invocation.commands import (
    ArmDeadline,
    CallPolicy,
    CancelTask,
    Checkpoint,
    Command,
    Dispatch,
    Emit,
    End,
    RecordCancelled,
    RecordResult,
    SaveCheckpoint,
    StoppedTask,
)
from hayata_py._invocation.compensation import Undo
from hayata_py._invocation.events import (
    Begin,
    CancelRequested,
    CheckpointSaved,
    CircuitChanged,
    DeadlinePassed,
    Event,
    LeaseLost,
    NodeDown,
    PartialResult,
    PauseRecorded,
    PolicyAnswered,
    PolicyRaised,
    Reduced,
    ReducerLost,
    ResultRecorded,
    Resume,
    RetryDue,
    Stop,
    StopKind,
    TaskKey,
    TaskOutcome,
    WriteRefused,
)
from hayata_py._invocation.state import Execution as _Execution
from hayata_py._invocation.state import Phase, Rules, Seed, execution_id_for
from hayata_py._invocation.state import Task as _Task
from hayata_py._policy import PolicyContext, validate_decision
from hayata_py.store._records import task_id_for

__all__ = ["Invocation", "Phase", "Rules", "Seed", "execution_id_for"]


class Invocation:
    """The state of one invocation and the decisions on it."""

    def __init__(self, seed: Seed, rules: Rules) -> None:
        self.id = seed.invocation_id
        self.rules = rules
        self.input = seed.input
        self.stream = seed.stream
        self.state = dict(seed.state)
        self.step_no = seed.step
        self.last_result = seed.last_result
        self.parallel_results = seed.parallel_results
        self.resume_value = seed.resume_value
        self.thread = seed.thread
        self.phase = Phase.NEW
        self.sequence = seed.sequence
        self.execution: _Execution | None = None
        self._ending: RecordResult | None = None
        self.hold = pause.Hold(pause.PauseKind.POLICY)
        """The pause being recorded."""
        history = seed.compensation
        self.undo: list[Undo] = list(history.todo)
        self.undone = list(history.done)
        self.undo_failed = list(history.failed)
        self.undoing: _Task | None = None
        self.failing: ErrorInfo | None = None

    # -- the one entry point -------------------------------------------------------

    def step(self, event: Event) -> list[Command]:
        """Apply ``event``; return what the actor must do, in order."""
        phase = self.phase
        if phase is Phase.ENDED:
            return []
        if isinstance(event, (Begin, Resume)):
            if phase is not Phase.NEW:
                return []
            return self._begin(event)
        if phase is Phase.NEW:
            return []
        if phase is Phase.COMPENSATING:
            return compensating.on_event(self, event)
        if isinstance(event, PolicyAnswered) and phase is Phase.DECIDING:
            return self._on_answer(event.answer)
        if isinstance(event, PolicyRaised) and phase is Phase.DECIDING:
            return self._fail(reasons.policy_failed(event.type_name, event.message,
                                                    self.step_no))
        if isinstance(event, CheckpointSaved) and phase is Phase.SAVING:
            return stepping.dispatch_step(self, event.unplaced)
        if isinstance(event, ResultRecorded) and phase is Phase.FINISHING:
            return self._ended()
        if isinstance(event, PauseRecorded) and phase is Phase.PAUSING:
            return waits.paused(self)
        if isinstance(event, WriteRefused) and phase in (Phase.SAVING, Phase.FINISHING,
                                                         Phase.PAUSING):
            return self._on_refused(event)
        if isinstance(event, TaskOutcome) and phase is Phase.RUNNING:
            return stepping.on_outcome(self, event)
        if isinstance(event, PartialResult) and phase is Phase.RUNNING:
            return stepping.on_partial(self, event)
        if isinstance(event, NodeDown) and phase is Phase.RUNNING:
            return stepping.on_node_down(self, event)
        if isinstance(event, DeadlinePassed) and phase is Phase.RUNNING:
            return stepping.on_deadline(self, event)
        if isinstance(event, RetryDue) and phase is Phase.RUNNING:
            return waits.on_retry_due(self, event)
        if isinstance(event, CircuitChanged) and phase is Phase.RUNNING:
            return waits.on_circuit(self, event)
        if isinstance(event, (Reduced, ReducerLost)) and phase is Phase.RUNNING:
            done = mapping.on_reduced(self, event)
            return [] if done is None else done or self._step_done(self.execution)
        if isinstance(event, LeaseLost) and phase is not Phase.FINISHING \
                and self.rules.durable:
            return self._lose_ownership()
        if isinstance(event, Stop) and phase is not Phase.FINISHING:
            return self._on_stop(event.kind)
        if isinstance(event, CancelRequested) and phase is Phase.RUNNING:
            return self._cancel()
        return []

    @property
    def ended(self) -> bool:
        return self.phase is Phase.ENDED

    def checkpoint(self) -> Checkpoint:
        """The invocation as it stands (what a recovery would start from)."""
        ex = self.execution
        return Checkpoint(self.step_no, dict(self.state), self.last_result,
                          self.parallel_results, ex.id if ex else None,
                          ex.nodes if ex else (), ex.input if ex else None,
                          ex.parallel if ex else False, bool(ex and ex.map),
                          ex.map.reduce if ex and ex.map else None,
                          self.failing.to_dict() if self.failing else None)

    # -- starting and deciding -----------------------------------------------------

    def _begin(self, event: Begin | Resume) -> list[Command]:
        if isinstance(event, Begin):
            out = self._emit("invocation_started", {"input": self.input})
            return out + self._decide()
        out = self._emit("invocation_started",
                         {"input": self.input, "recovered": True, "step": self.step_no})
        if event.failed is not None and event.execution_id is None:
            self.phase = Phase.RUNNING  # it was failing: its compensations go on
            return out + self._fail(event.failed)
        if event.execution_id is None:
            return out + self._decide()
        if event.failed is not None:
            self.phase = Phase.RUNNING
            return out + self._fail(event.failed)
        ex = _Execution(event.execution_id, tuple(event.nodes), event.input, event.parallel,
                        results=dict(event.reuse))
        self.execution = ex
        self.phase = Phase.RUNNING
        if event.map:
            ex.map = mapping.new_map(self.id, self.step_no, ex.nodes[0], event.input,
                                     event.reduce, dict(event.items_to_run),
                                     dict(event.items_reused))
        out += waits.hold_recovered(self, ex, event.retry, event.items_retry)
        if ex.map is not None:
            return out + mapping.start(self, ex)
        if not event.to_run and not event.retry:
            return out + self._step_done(ex)
        return out + self._send(ex, [(n, event.to_run[n]) for n in ex.nodes
                                     if n in event.to_run])

    def _decide(self) -> list[Command]:
        self.phase = Phase.DECIDING
        ctx = PolicyContext(self.step_no, MappingProxyType(dict(self.state)), self.input,
                            self.last_result, self.parallel_results, self.id,
                            self.resume_value, self.thread)
        self.resume_value = None  # for this decision only
        return [CallPolicy(ctx)]

    def _on_answer(self, answer: Any) -> list[Command]:
        decision = validate_decision(answer, self.rules.nodes, self.rules.reduce_check)
        if isinstance(decision, ErrorInfo):
            return self._fail(decision)
        if decision.pause:
            return waits.start_pause(self, pause.Hold(pause.PauseKind.POLICY, decision.result))
        if decision.finish:
            try:
                check_encodable(decision.result, "result")
            except EncodingError as exc:
                return self._fail(reasons.not_storable("Finish result", exc))
            return self._record(RecordResult(True, decision.result, None, dict(self.state)))
        if self.step_no >= self.rules.max_steps:
            return self._fail(reasons.max_steps_exceeded(self.step_no, self.rules.max_steps))
        try:
            check_encodable(decision.input, "input")
        except EncodingError as exc:
            return self._fail(reasons.not_storable("Next input", exc))
        self.execution = ex = _Execution(execution_id_for(self.id, self.step_no),
                                         decision.nodes, decision.input, decision.parallel)
        if decision.map:
            ex.map = mapping.new_map(self.id, self.step_no, decision.nodes[0], decision.input,
                                     decision.reduce)
        self.parallel_results = None
        self.phase = Phase.SAVING
        # The checkpoint names the work before any of it starts.
        return [SaveCheckpoint(self.checkpoint())]

    # -- running a step --------------------------------------------------------------

    def _send(self, ex: _Execution, runs: Iterable[tuple[str, int]],
              history: tuple[str, ...] = (), retry: bool = False) -> list[Command]:
        out: list[Command] = []
        for node_id, attempt in runs:
            key = TaskKey(node_id)
            task = _Task(key, task_id_for(self.id, self.step_no, node_id), attempt=attempt)
            ex.pending[key] = task
            out += self._emit("node_started", {"node_id": node_id, "execution_id": ex.id}
                              | ({"attempt": attempt} if retry else {}))
            out.append(Dispatch(ex.id, key, task.task_id, self.step_no,
                                ex.nodes.index(node_id), ex.input, dict(self.state), attempt,
                                history, retry))
            out.append(ArmDeadline(ex.id, self.rules.timeout_for(node_id), key))
        return out

    def _current(self, execution_id: str, key: TaskKey) -> tuple[_Execution, _Task] | None:
        ex = self.execution
        if ex is None or ex.id != execution_id or key not in ex.pending:
            return None
        return ex, ex.pending[key]

    def _step_done(self, ex: _Execution | None) -> list[Command]:
        assert ex is not None
        self.execution = None
        out = mapping.close(ex)
        if ex.map is not None and ex.map.reduce is None:
            self.parallel_results = list(ex.results[ex.nodes[0]])
        elif ex.parallel:
            self.parallel_results = [ex.results[n] for n in ex.nodes]
        else:
            result = ex.results[ex.nodes[0]]
            self.state.update(result)
            self.last_result = result
        self.step_no += 1
        hold = pause.breakpoint_at(self.rules.pause_after, ex.nodes, pause.PauseKind.AFTER)
        return out + (self._decide() if hold is None else waits.start_pause(self, hold))

    def _on_stop(self, kind: StopKind) -> list[Command]:
        if kind is StopKind.NODES_LOST and self.rules.durable:
            return self._interrupt(reasons.nodes_lost())
        if self.rules.durable and self.rules.compensate and self.undo:
            # Its compensations cannot run in a stopping agent: say it is failing,
            # and keep it; recover() runs them.
            return compensating.keep_failing(self, reasons.agent_stopped())
        return self._fail(reasons.agent_stopped())

    # -- ending ----------------------------------------------------------------------

    def _cancel(self) -> list[Command]:
        """``cancel()``: stop the running step's tasks, record them ``cancelled``
        and end ``cancelled``. Completed steps and tasks stay as recorded; no
        compensation runs (a cancel keeps what was done)."""
        ex = self.execution
        assert ex is not None
        stopped = tuple(StoppedTask(ex.id, key, task.task_id, self.step_no,
                                    *_task_place(ex, key.node_id, key.item))
                        for key, task in ex.pending.items() if task.retry is None)
        error = reasons.cancelled(self.step_no, [t.task_id for t in stopped])
        out: list[Command] = [RecordCancelled(stopped, error)] \
            if stopped and self.rules.durable else []
        return out + self._cancel_all() + self._record(
            RecordResult(False, None, error, dict(self.state)))

    def _cancel_all(self, timed_out: bool = False) -> list[Command]:
        ex = self.execution
        self.execution = None
        if ex is None:
            return []
        return [CancelTask(ex.id, t.key, t.task_id, timed_out)
                for t in ex.pending.values()] + mapping.close(ex)

    def _fail(self, error: ErrorInfo) -> list[Command]:
        if error.code == "stale_writer" and self.rules.durable:
            # A write of this run (an edge's record) was fenced: another system
            # owns the invocation now. Not a failure of the invocation.
            return self._lose_ownership()
        if error.code == "store_unavailable" and self.rules.durable:
            # An edge's task record was refused (the store down, locked, full):
            # the store still holds the invocation running; kept for recover().
            return self._interrupt(reasons.task_record_refused(error))
        timed_out = error.code == "execution_timeout"
        # Undo the completed tasks of compensated nodes first (if any), then record.
        return self._cancel_all(timed_out) + compensating.start(self, error)

    def _record(self, record: RecordResult) -> list[Command]:
        self.phase = Phase.FINISHING
        kind, data = _terminal(record)
        if self.stream or self.rules.durable:  # what _ended emits, if it is recorded
            record = dataclasses.replace(record, event=Emit(self.sequence + 1, kind, data))
        self._ending = record
        return [record]

    def _ended(self) -> list[Command]:
        record = self._ending
        assert record is not None
        self.phase = Phase.ENDED
        kind, data = _terminal(record)
        return [*self._emit(kind, data),
                End(True, record.result) if record.ok else End(False, error=record.error)]

    def _on_refused(self, refused: WriteRefused) -> list[Command]:
        if refused.fenced or refused.error.code == "stale_writer":
            return self._lose_ownership()
        # Not recorded (the store is down, say): the store still holds the
        # invocation running, so this run ends without a result and the
        # invocation is kept for recover(), as the store says. A refused
        # checkpoint also means nothing of its step may run.
        what = {Phase.SAVING: "checkpoint refused",
                Phase.COMPENSATING: "the checkpoint of its compensation refused",
                Phase.PAUSING: "the pause could not be recorded"}.get(
            self.phase, "the terminal result could not be recorded")
        error = reasons.refused(refused.error, what)
        if self.rules.durable:
            return self._interrupt(error)
        out = self._cancel_all()
        self.phase = Phase.ENDED
        return out + self._emit("invocation_failed", _error_data(error)) + [
            End(False, error=error)]

    def _lose_ownership(self) -> list[Command]:
        """Another system took the invocation over (fenced): stop at once and
        write nothing more; the invocation is kept, the new owner runs it."""
        return self._interrupt(reasons.ownership_lost(self.id, self.rules.owner))

    def _interrupt(self, error: ErrorInfo) -> list[Command]:
        """End this run without a durable result; the invocation stays running in
        the store for ``recover()``."""
        out = self._cancel_all()
        self.phase = Phase.ENDED
        return out + self._emit("invocation_interrupted", _error_data(error)) + [
            End(False, error=error, kept=True)]

    def _emit(self, event_type: str, data: dict[str, Any]) -> list[Command]:
        if not self.stream and not self.rules.durable:  # a durable agent logs them all
            return []
        self.sequence += 1
        return [Emit(self.sequence, event_type, data)]


def _task_place(ex: _Execution, node_id: str, item: int | None) -> tuple[int, Any]:
    """A task's branch index and input in its execution (as its ``Dispatch`` had them)."""
    if item is not None and ex.map is not None:
        return item, ex.map.items[item]
    return ex.nodes.index(node_id), ex.input


def _terminal(record: RecordResult) -> tuple[str, dict[str, Any]]:
    """The terminal event of a recorded result."""
    if record.ok:
        return "invocation_completed", {"result": record.result}
    assert record.error is not None
    return "invocation_failed", _error_data(record.error)


def _error_data(error: ErrorInfo) -> dict[str, Any]:
    return {"reason": error.code, "message": error.message, "details": dict(error.details)}
