"""The agent's side of its circuit breakers (:mod:`~hayata_py._rules.circuits`):
a task refused by an open circuit is recorded as failed before the machine
hears of it, and each change is logged and sent to telemetry.

The refusal's record: the step's checkpoint first if it was folded onto the
step's tasks (no edge will commit it with a ``started`` now), then the task
scheduled (attempt 0: it never ran) and marked failed with ``circuit_open``.
A task whose record is failed already (a retry's: the failure it follows)
needs no new write. So after any crash recovery finds a recorded failure,
never an uncertain task; a retry policy then retries it (not an attempt).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from hayata_py import _invocation as m
from hayata_py import _telemetry as telemetry
from hayata_py._actors.ledger import Ledger
from hayata_py._actors.store_access import as_store_error
from hayata_py._circuit import CircuitStatus
from hayata_py._config import AgentSpec
from hayata_py._errors import ErrorInfo
from hayata_py._rules.circuits import Circuits, Refusal
from hayata_py.store import TaskRecord


class GatedRun(Protocol):
    """What the gate reads and sets of a running invocation (the agent's ``InFlight``)."""

    inv: m.Invocation
    token: int
    folded: m.Checkpoint | None


class CircuitGate:
    """The breakers of one agent, with their durable refusals and telemetry."""

    def __init__(self, spec: AgentSpec, ledger: Ledger, log: Any,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.agent_id = spec.id
        self.ledger = ledger
        self.log = log
        self.circuits = Circuits(spec.circuit, spec.timeout_for, clock)

    def refuse(self, run: GatedRun, cmd: m.Dispatch) -> m.TaskOutcome | None:
        """None: send the task; else its failure, recorded (``circuit_open``, or the
        store's refusal of that record)."""
        if not self.circuits.breakers:
            return None
        refusal = self.circuits.admit(cmd.key.node_id, cmd.task_id)
        if refusal is None:
            return None
        error = refusal.error(cmd.task_id, cmd.history)
        self.log.info("task_refused", task_id=cmd.task_id, node_id=cmd.key.node_id,
                      code=error.code, retry_after=refusal.retry_after)
        refused = self._record(run, cmd, error)
        return m.TaskOutcome(cmd.execution_id, cmd.key, False, error=refused or error)

    def outcome(self, node_id: str, task_id: str, ok: bool, error: ErrorInfo | None
                ) -> list[m.CircuitChanged]:
        """A task's outcome: the breaker changes it caused (logged, telemetry)."""
        if not self.circuits.breakers:
            return []
        changes = self.circuits.outcome(node_id, task_id, ok, error.code if error else None)
        for change in changes:
            what = "opened" if change.opened else "closed"
            self.log.warning(f"circuit_{what}", node_id=node_id, failures=change.failures,
                             cool_down=change.cool_down)
            telemetry.execute(telemetry.CIRCUIT_OPENED if change.opened
                              else telemetry.CIRCUIT_CLOSED,
                              {"failures": change.failures, "cool_down": change.cool_down},
                              {"agent_id": self.agent_id, "node_id": node_id})
        return changes

    def release(self, node_id: str, task_id: str) -> None:
        """Task ``task_id`` was cancelled (if it was a probe, the next task probes)."""
        self.circuits.release(node_id, task_id)

    def status(self) -> tuple[CircuitStatus, ...]:
        return self.circuits.status()

    def _record(self, run: GatedRun, cmd: m.Dispatch, error: ErrorInfo) -> ErrorInfo | None:
        """Record the refusal as the task's failure; the store's refusal, or None."""
        store = self.ledger.store
        if store is None:
            return None
        folded = run.folded
        if folded is not None and folded.execution_id == cmd.execution_id:
            saved = self.ledger.checkpoint(run.inv.id, run.token, run.inv.input, folded)
            if saved is not None:
                return saved.error
            run.folded = None  # committed: the step's other tasks need not carry it
        if cmd.retry:
            return None  # its failed record is the failure this attempt follows
        try:
            found = store.get_task(cmd.task_id)
            if found is None:
                store.schedule_tasks([TaskRecord(
                    cmd.task_id, run.inv.id, cmd.execution_id, cmd.step, cmd.key.node_id,
                    cmd.branch_index, input=cmd.input)], token=run.token)
            if found is None or found.status in ("scheduled", "started"):
                store.mark_failed(cmd.task_id, token=run.token, error=error.to_dict())
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            exc = as_store_error(raw)
            self.log.warning("task_result_refused", task_id=cmd.task_id, code=exc.code)
            return ErrorInfo(exc.code, f"the refusal of task {cmd.task_id} was not "
                             f"recorded: {exc}", {"node_id": cmd.key.node_id,
                                                  "task_id": cmd.task_id})
        return None


__all__ = ["CircuitGate", "GatedRun", "Refusal"]
