"""Pauses as records: what a paused invocation is and answers (pure functions
of its :class:`~hayata_py.store.InvocationRecord`; ``resume()`` itself is in
:mod:`~hayata_py._actors.recovery_requests`).

A paused invocation is a running one whose checkpoint holds the pause
(``InvocationRecord.paused``). An agent that finds it at start reports
``paused`` (not ``recovery_required``) and refuses runs with
``agent_paused``. ``resume`` claims it (a new fencing token) and, in one
fenced write, clears the pause: of two resumes at once, the one whose write
the store takes wins; the other is refused (``not_paused``) and runs nothing.
"""

from __future__ import annotations

from typing import Any

from hayata_py._errors import RecoveryRejected, RunRejected
from hayata_py._invocation import Hold
from hayata_py._invocation.pause import paused_error
from hayata_py.messages import AgentResult
from hayata_py.store._records import InvocationRecord


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


def info(record: InvocationRecord) -> dict[str, Any]:
    """What ``hayata agent list`` shows of a paused invocation."""
    assert record.paused is not None
    return {"invocation_id": record.invocation_id, **Hold.from_dict(record.paused).to_dict()}

