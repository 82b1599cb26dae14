"""The recovery requests on an agent's unfinished invocations: ``recover``,
``resolve_task``, ``abandon``, ``resume`` (a paused one), and the list that
``unfinished()`` and ``auto_recover`` read.

Each unfinished invocation is its own case: these functions take the
:class:`~hayata_py._actors.ledger.Ledger` that holds them and act on one,
named by id (or, with ``max_invocations=1`` and no id, the only one).
Everything that acts on records claims first (a new fencing token), so once
it has looked at them no older writer can change them; a refusal writes
nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

from hayata_py._actors.ledger import Ledger
from hayata_py._actors.results import stored_result
from hayata_py._codec import check_encodable
from hayata_py._errors import (
    EncodingError,
    ErrorInfo,
    InvocationBusy,
    RecoveryRejected,
    StaleWriter,
    StoreError,
)
from hayata_py._invocation import Hold, PauseKind, Resume
from hayata_py._rules import pauses
from hayata_py._rules.recovery import (
    resolvable_execution,
    resume_map,
    resume_step,
    uncertain_compensations,
    waiting_refusal,
)
from hayata_py.messages import (
    Abandon,
    Ack,
    AgentResult,
    ResolveTask,
    ResumePaused,
    Unfinished,
)
from hayata_py.store import InvocationRecord

Recovered = tuple[InvocationRecord, int, Resume]
"""What a recovery that goes on returns: the record it claimed, the new token,
and the event that continues the machine."""


def _refusal(exc: StoreError, record: InvocationRecord) -> RecoveryRejected:
    """A store's refusal (busy, unavailable, ...) as recover()'s answer."""
    return RecoveryRejected(str(exc), code=exc.code, invocation_id=record.invocation_id)


def nothing(ledger: Ledger) -> RecoveryRejected:
    return RecoveryRejected(f"agent {ledger.spec.id!r} has no unfinished invocation",
                            code="nothing_to_recover")


def pick(ledger: Ledger, invocation_id: str | None) -> InvocationRecord | RecoveryRejected:
    """The unfinished invocation a request names (None: the only one)."""
    ledger.refresh(invocation_id)
    if invocation_id is not None:
        record = ledger.unfinished.get(invocation_id)
        if record is None:
            return RecoveryRejected(
                f"agent {ledger.spec.id!r} has no unfinished invocation {invocation_id}",
                code="nothing_to_recover", invocation_id=invocation_id)
        return record
    if not ledger.unfinished:
        return nothing(ledger)
    if len(ledger.unfinished) > 1:
        ids = list(ledger.unfinished)
        return RecoveryRejected(
            f"agent {ledger.spec.id!r} has {len(ids)} unfinished invocations; name the one "
            "to recover: recover(invocation_id) (unfinished() lists them)",
            code="invocation_required", invocation_ids=ids[:20])
    return next(iter(ledger.unfinished.values()))


def classify(ledger: Ledger, record: InvocationRecord) -> RecoveryRejected | Resume:
    """What recovering ``record``'s interrupted step would do (reads its tasks);
    a failing one goes on with its compensations (none of them uncertain)."""
    assert ledger.store is not None
    if record.failing is not None:
        uncertain = ledger.compensations(record.invocation_id).uncertain
        if uncertain:
            return uncertain_compensations(record, uncertain)
        return Resume(failed=ErrorInfo.from_dict(record.failing))
    active = record.active_execution
    if active is None:
        return Resume()
    records = ledger.store.get_tasks(record.invocation_id, execution_id=active.execution_id)
    spec = ledger.spec
    if active.map:
        return resume_map(record, active, records, spec.idempotent_nodes,
                          spec.retry.get(active.node_ids[0]), time.time())
    return resume_step(record, active, records, spec.idempotent_nodes, spec.retry,
                       time.time())


def recover(ledger: Ledger, invocation_id: str | None,
            unplaced: Mapping[str, str] | None = None) -> RecoveryRejected | Recovered:
    """Claim an unfinished invocation and classify its interrupted step.

    A step that needs the user's decision (an uncertain task), or that has a
    task to run on a node no system can run now (``unplaced``: node id ->
    why), is refused before the claim: a refused recovery writes nothing, so a
    live edge of the step (the agent alone died) can still record its result,
    and the invocation waits for a later ``recover()``."""
    record = pick(ledger, invocation_id)
    if isinstance(record, RecoveryRejected) or ledger.store is None:
        return record if isinstance(record, RecoveryRejected) else nothing(ledger)
    if pauses.is_paused(record):
        return pauses.refuse_recover(record)
    try:
        # Someone else's live lease first: it may still be running the step.
        ledger.store.check_claimable(record.invocation_id, owner=ledger.owner)
        early = classify(ledger, record)
    except (InvocationBusy, StoreError) as exc:
        return _refusal(exc, record)
    if isinstance(early, RecoveryRejected):
        return early
    waiting = waiting_refusal(record, early, unplaced or {})
    if waiting is not None:
        return waiting
    try:
        # Claim first: from here on no older writer (an orphan edge of a dead
        # system) can record anything, so the classification below is final.
        token = ledger.claim(record)
        # What the store holds now that no one else can write.
        record = ledger.store.get_invocation(record.invocation_id) or record
        resumed = classify(ledger, record)
    except (InvocationBusy, StoreError) as exc:
        return _refusal(exc, record)
    if isinstance(resumed, RecoveryRejected):
        return resumed
    ledger.unfinished.pop(record.invocation_id, None)
    return record, token, resumed


def describe(ledger: Ledger, unplaced: Mapping[str, str] | None = None,
             invocation_id: str | None = None) -> list[Unfinished]:
    """Every unfinished invocation (or only ``invocation_id``, if it is one)
    with what ``recover()`` would do (reads only)."""
    ledger.refresh(invocation_id)
    out = []
    for record in list(ledger.unfinished.values()) if invocation_id is None else [
            r for r in (ledger.unfinished.get(invocation_id),) if r is not None]:
        thread = record.thread_id
        if pauses.is_paused(record):
            out.append(Unfinished(record.invocation_id, "paused", thread, record.step,
                                  code="invocation_paused"))
            continue
        try:
            assert ledger.store is not None
            ledger.store.check_claimable(record.invocation_id, owner=ledger.owner)
            early: RecoveryRejected | Resume = classify(ledger, record)
        except (InvocationBusy, StoreError) as exc:
            out.append(Unfinished(record.invocation_id, "busy", thread, record.step,
                                  code=exc.code, message=str(exc)))
            continue
        if isinstance(early, Resume):
            waiting = waiting_refusal(record, early, unplaced or {})
            early = waiting if waiting is not None else early
        if isinstance(early, Resume):
            out.append(Unfinished(record.invocation_id, "recoverable", thread, record.step))
            continue
        kind = {"task_execution_uncertain": "uncertain",
                "waiting_for_placement": "waiting_for_placement"}.get(early.code, "refused")
        out.append(Unfinished(record.invocation_id, kind, thread, record.step,
                              tuple(early.details.get("task_ids", ())), early.code,
                              str(early)))
    return out


def resolve(ledger: Ledger, message: ResolveTask) -> Any:
    """Record the user's result for an uncertain task of an unfinished invocation."""
    store = ledger.store
    if store is None or not ledger.unfinished:
        return nothing(ledger)
    task = store.get_task(message.task_id)
    if task is not None:
        ledger.refresh(task.invocation_id)
    record = None if task is None else ledger.unfinished.get(task.invocation_id)
    current = None if record is None else resolvable_execution(record)
    if task is None or record is None or current is None or task.execution_id != current:
        return RecoveryRejected(
            f"task {message.task_id!r} is not a task of the current step of an unfinished "
            "invocation", code="task_not_found", task_id=message.task_id)
    result: Any = message.result
    if not isinstance(result, dict):
        return RecoveryRejected("a task result must be a dict (as a node returns)",
                                code="invalid_result", task_id=message.task_id)
    try:
        # Check before claiming: a claim is a write (a new fencing token), and a
        # result the store cannot hold must change nothing.
        check_encodable(result, "result")
    except EncodingError as exc:
        return RecoveryRejected(str(exc), code=exc.code, task_id=message.task_id)
    try:
        token = ledger.claim(record)
        store.resolve_task(message.task_id, result=message.result, token=token)
    except (StoreError, EncodingError) as exc:
        return RecoveryRejected(str(exc), code=exc.code, task_id=message.task_id)
    ledger.log.info("task_resolved", task_id=message.task_id)
    return Ack(message.task_id)


@dataclasses.dataclass(frozen=True)
class Undoing:
    """What :func:`abandon` returns for an invocation with completed tasks to
    undo: the claimed record, to run its compensations (they end it failed)."""

    recovered: Recovered


def abandon(ledger: Ledger, message: Abandon
            ) -> tuple[Any, InvocationRecord | None] | Undoing:
    """End an unfinished invocation as failed (``abandoned``). Returns the answer
    and the next queued run of its thread, which the store started with it; or,
    when completed tasks of it are to be undone (``AgentConfig.compensate``),
    the claimed record to run its compensations (they end it failed)."""
    ledger.refresh(message.invocation_id)
    record = ledger.unfinished.get(message.invocation_id)
    if record is None or ledger.store is None:
        if ledger.unfinished and ledger.single:
            only = next(iter(ledger.unfinished))
            return RecoveryRejected(f"the unfinished invocation is {only}, not "
                                    f"{message.invocation_id}", code="not_found"), None
        if not ledger.unfinished:
            return nothing(ledger), None
        return RecoveryRejected(f"invocation {message.invocation_id} is not unfinished",
                                code="not_found"), None
    error = ErrorInfo("abandoned", "the invocation was abandoned by the user", {})
    try:
        undo = bool(ledger.compensations(record.invocation_id).todo)
        token = ledger.claim(record)
        if undo:
            ledger.unfinished.pop(record.invocation_id, None)
            ledger.log.info("invocation_abandoned", invocation_id=record.invocation_id,
                            compensating=True)
            return Undoing((record, token, Resume(failed=error)))
        started = ledger.store.finish_invocation(
            record.invocation_id, token=token, status="failed", error=error.to_dict(),
            lease_seconds=ledger.spec.lease_seconds)
    except Exception as raw:  # noqa: BLE001 - any store failure is reported
        exc = raw if isinstance(raw, StoreError) else StoreError(str(raw))
        return RecoveryRejected(str(exc), code=exc.code), None
    del ledger.unfinished[record.invocation_id]
    ledger.results.publish(AgentResult(record.invocation_id, False, None, error))
    ledger.log.info("invocation_abandoned", invocation_id=record.invocation_id)
    return Ack(record.invocation_id), started


def _not_paused(invocation_id: str, why: str) -> RecoveryRejected:
    return RecoveryRejected(f"invocation {invocation_id} is not paused{why}",
                            code="not_paused", invocation_id=invocation_id)


def _unknown(ledger: Ledger, invocation_id: str) -> RecoveryRejected | None:
    """``not_found`` if the store has no invocation ``invocation_id`` of this
    agent (None when it has one, or cannot tell: no store, or unreadable)."""
    if ledger.store is None:
        return None
    try:
        record = ledger.store.get_invocation(invocation_id)
    except Exception:  # noqa: BLE001 - cannot tell: refuse as not paused
        return None
    if record is not None and record.agent_id == ledger.spec.id:
        return None
    return RecoveryRejected(f"agent {ledger.spec.id!r} has no invocation {invocation_id!r}",
                            code="not_found", invocation_id=invocation_id)


def resume(ledger: Ledger, message: ResumePaused) -> RecoveryRejected | Recovered:
    """Claim the paused invocation and clear its pause (fenced); the event that
    continues it: the held step (``pause_before``) or the next decision."""
    ledger.refresh(message.invocation_id)
    record = ledger.unfinished.get(message.invocation_id)
    store = ledger.store
    if record is None or store is None or not pauses.is_paused(record):
        return _unknown(ledger, message.invocation_id) or _not_paused(message.invocation_id, "")
    try:
        check_encodable(message.value, "value")
    except EncodingError as exc:  # checked before the claim: nothing is written
        return RecoveryRejected(f"the resume value cannot be stored: {exc}", code=exc.code,
                                field="value", invocation_id=record.invocation_id)
    iid = record.invocation_id
    try:
        token = ledger.claim(record)
        now = store.get_invocation(iid)
        if now is None or now.status != "running" or not pauses.is_paused(now):
            if now is not None and now.status == "running":
                ledger.unfinished[iid] = now
            else:
                ledger.unfinished.pop(iid, None)
            return _not_paused(iid, " (resumed elsewhere)")
        # The value stays in the record until the next checkpoint replaces it, so a
        # crash before the next decision is recorded does not lose it.
        store.save_checkpoint(dataclasses.replace(
            now, paused={"resumed": True, "value": message.value}), token=token)
    except StaleWriter:
        return _not_paused(iid, " (another resume() won)")
    except StoreError as exc:
        return RecoveryRejected(str(exc), code=exc.code, invocation_id=iid)
    ledger.unfinished.pop(iid, None)
    assert now.paused is not None
    hold = Hold.from_dict(now.paused)
    active = now.active_execution
    if hold.kind is not PauseKind.BEFORE or active is None:
        return now, token, Resume()
    # Nothing of the held step started: every node (every item of a map) runs.
    if active.map:
        return now, token, Resume(active.execution_id, tuple(active.node_ids), active.input,
                                  map=True, reduce=active.reduce,
                                  items_to_run=dict.fromkeys(range(len(active.input)), 1))
    return now, token, Resume(active.execution_id, tuple(active.node_ids), active.input,
                              active.parallel, {n: 1 for n in active.node_ids})


__all__ = ["Recovered", "abandon", "classify", "describe", "nothing", "recover", "resolve",
           "resume", "stored_result"]
