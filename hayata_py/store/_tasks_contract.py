"""The task-record part of the :class:`~hayata_py.store.TaskStore` contract.

A task is one node run within one step of an invocation, recorded
``scheduled`` -> ``started`` -> ``completed``/``failed`` so a restarted
runtime can tell "never ran" from "maybe ran" (see
:mod:`hayata_py.store._classify`). The common guarantees of the contract's
module docs hold here too (each write one committed transaction, fenced by
the invocation's token, values encoded first, refusals with stable codes).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from hayata_py.store._records import InvocationRecord, TaskRecord

__all__ = ["TaskContract"]


class TaskContract(abc.ABC):
    """Task records: scheduled, started, completed or failed, and resolved."""

    @abc.abstractmethod
    def schedule_tasks(self, tasks: Sequence[TaskRecord], *, token: int) -> None:
        """Record ``tasks`` as scheduled; ids already stored are left untouched.

        Replaying the same schedule is therefore a no-op. All tasks must belong
        to one invocation (else ``invalid_argument``), which must be running
        (``invocation_finished``). Fenced (:class:`StaleWriter`).
        """

    @abc.abstractmethod
    def mark_started(
        self,
        task_id: str,
        *,
        token: int,
        system_instance: str | None,
        attempt: int,
        task: TaskRecord | None = None,
        checkpoint: InvocationRecord | None = None,
        retry: bool = False,
    ) -> TaskRecord:
        """Record that attempt ``attempt`` of the task starts now; return the stored record.

        ``retry``: this attempt follows the task's recorded failure (a retry
        policy); from ``failed`` it is accepted if ``attempt`` is higher than the
        failed one, and clears the recorded error.

        A missing row is created from ``task`` (``task_not_found`` if ``task`` is
        not given). From ``scheduled`` any ``attempt >= 1`` is accepted. From
        ``started`` the ``attempt`` must increase (re-running an uncertain
        idempotent task), except that repeating the identical call (same attempt
        and ``system_instance``) is a no-op; otherwise ``attempt_not_increasing``.
        A completed task, or a failed one without ``retry``, raises
        ``task_finished``. The invocation must be running
        (``invocation_finished``). Fenced (:class:`StaleWriter`).

        With ``checkpoint`` (which needs ``task``; it must be of the task's
        running invocation and name the task's execution and node, else
        ``invalid_argument`` and nothing is written), the invocation's
        checkpoint is saved as :meth:`save_checkpoint` would save it, in the
        same transaction: the checkpoint and the ``started`` record are
        committed together or not at all (the runtime's sequential steps, see
        ``docs/design.md``).
        """

    @abc.abstractmethod
    def mark_completed(self, task_id: str, *, token: int, result: Any) -> None:
        """Record the task's ``result``; it must be ``started`` (``task_not_started``).

        A finished task is never overwritten (``task_finished``); repeating the
        identical completion is a no-op. Fenced (:class:`StaleWriter`), and
        refused (``invocation_finished``) once the invocation has ended: no task
        record changes after its invocation's end (a late edge's write never lands).
        """

    @abc.abstractmethod
    def mark_failed(self, task_id: str, *, token: int, error: dict[str, Any]) -> None:
        """Record the task's final failure (``ErrorInfo.to_dict()``).

        Allowed from ``scheduled`` or ``started``; a finished task is never
        overwritten (``task_finished``); repeating the identical failure is a
        no-op. Fenced (:class:`StaleWriter`); ``invocation_finished`` once the
        invocation has ended, as for :meth:`mark_completed`.
        """

    @abc.abstractmethod
    def resolve_task(self, task_id: str, *, result: Any, token: int) -> None:
        """Complete an uncertain task with a user-established ``result``.

        Only ``started`` -> ``completed``; the record gets ``resolved=True``.
        Any other status raises ``task_not_uncertain``. Fenced (:class:`StaleWriter`).
        """

    @abc.abstractmethod
    def get_tasks(
        self, invocation_id: str, *, execution_id: str | None = None, step: int | None = None
    ) -> list[TaskRecord]:
        """Return the invocation's tasks, filtered, ordered by step then branch_index."""

    @abc.abstractmethod
    def get_task(self, task_id: str) -> TaskRecord | None:
        """Return one task record, or ``None`` if unknown."""
