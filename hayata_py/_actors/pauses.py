"""The agent's durable side of pauses: what a paused invocation answers, and
``resume()``.

A paused invocation is a running one whose checkpoint holds the pause
(``InvocationRecord.paused``). An agent that finds it at start reports
``paused`` (not ``recovery_required``) and refuses runs with
``agent_paused``. ``resume`` claims it (a new fencing token) and, in one
fenced write, clears the pause: of two resumes at once, the one whose write
the store takes wins; the other is refused (``not_paused``) and runs nothing.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from hayata_py._codec import check_encodable
from hayata_py._errors import (
    EncodingError,
    RecoveryRejected,
    RunRejected,
    StaleWriter,
    StoreError,
)
from hayata_py._invocation import Hold, PauseKind, Resume
from hayata_py._invocation.pause import paused_error
from hayata_py.messages import AgentResult, ResumePaused
from hayata_py.store import InvocationRecord

if TYPE_CHECKING:
    from hayata_py._actors.ledger import Ledger


def is_paused(record: InvocationRecord | None) -> bool:
    """The record holds a pause not yet resumed (a resumed one keeps only the
    resume value, until the next checkpoint: ``resumed_value``)."""
    return record is not None and record.paused is not None \
        and not record.paused.get("resumed", False)


def resumed_value(record: InvocationRecord) -> Any:
    """The value of a resume() whose next decision was not recorded yet (or None)."""
    if record.paused is not None and record.paused.get("resumed", False):
        return record.paused.get("value")
    return None


def paused(ledger: Ledger) -> InvocationRecord | None:
    """The agent's paused invocation, or None."""
    record = ledger.recovering
    return record if is_paused(record) else None


def paused_result(record: InvocationRecord) -> AgentResult:
    assert record.paused is not None
    hold = Hold.from_dict(record.paused)
    return AgentResult(record.invocation_id, False, None,
                       paused_error(record.invocation_id, hold), status="paused")


def refuse_run(agent_id: str, record: InvocationRecord) -> RunRejected:
    return RunRejected(f"agent {agent_id!r} has paused invocation {record.invocation_id}; "
                       f"call resume({record.invocation_id!r}, value) or abandon() first",
                       code="agent_paused", invocation_id=record.invocation_id)


def refuse_recover(record: InvocationRecord) -> RecoveryRejected:
    return RecoveryRejected(f"invocation {record.invocation_id} is paused, not interrupted: "
                            f"call resume({record.invocation_id!r}, value)",
                            code="invocation_paused", invocation_id=record.invocation_id)


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


def resume(ledger: Ledger, message: ResumePaused
           ) -> RecoveryRejected | tuple[InvocationRecord, int, Resume]:
    """Claim the paused invocation and clear its pause (fenced); the event that
    continues it: the held step (``pause_before``) or the next decision."""
    ledger.refresh_recovering()
    record = paused(ledger)
    store = ledger.store
    if record is None or store is None or record.invocation_id != message.invocation_id:
        return _unknown(ledger, message.invocation_id) or _not_paused(message.invocation_id, "")
    try:
        check_encodable(message.value, "value")
    except EncodingError as exc:  # checked before the claim: nothing is written
        return RecoveryRejected(f"the resume value cannot be stored: {exc}", code=exc.code,
                                field="value", invocation_id=record.invocation_id)
    try:
        token = store.claim_invocation(record.invocation_id, owner=ledger.owner,
                                       lease_seconds=ledger.spec.lease_seconds)
        now = store.get_invocation(record.invocation_id)
        if now is None or now.status != "running" or not is_paused(now):
            ledger.recovering = now if now is not None and now.status == "running" else None
            return _not_paused(record.invocation_id, " (resumed elsewhere)")
        # The value stays in the record until the next checkpoint replaces it, so a
        # crash before the next decision is recorded does not lose it.
        store.save_checkpoint(dataclasses.replace(
            now, paused={"resumed": True, "value": message.value}), token=token)
    except StaleWriter:
        return _not_paused(record.invocation_id, " (another resume() won)")
    except StoreError as exc:
        return RecoveryRejected(str(exc), code=exc.code, invocation_id=record.invocation_id)
    ledger.recovering = None
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


def info(record: InvocationRecord) -> dict[str, Any]:
    """What ``hayata agent list`` shows of a paused invocation."""
    assert record.paused is not None
    return {"invocation_id": record.invocation_id, **Hold.from_dict(record.paused).to_dict()}

