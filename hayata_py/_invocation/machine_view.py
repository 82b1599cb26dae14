"""What the machine's glue modules use of the machine that calls them.

:mod:`~hayata_py._invocation.stepping`, :mod:`~hayata_py._invocation.mapping`
and :mod:`~hayata_py._invocation.waits` are functions that take the
:class:`~hayata_py._invocation.machine.Invocation` and return its commands.
They see it through :class:`Machine`, so they never import the machine
module, which imports them: imports run one way (``machine`` ->
``stepping``/``waits``/``mapping`` -> ``machine_view``/``state``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from hayata_py._errors import ErrorInfo
from hayata_py._invocation.commands import Checkpoint, Command, RecordResult
from hayata_py._invocation.compensation import Undo
from hayata_py._invocation.events import TaskKey, WriteRefused
from hayata_py._invocation.pause import Hold
from hayata_py._invocation.state import Execution, Phase, Rules, Task


class Machine(Protocol):
    """The part of an ``Invocation`` its glue reads, sets and calls."""

    id: str
    rules: Rules
    state: dict[str, Any]
    step_no: int
    phase: Phase
    execution: Execution | None
    hold: Hold
    undo: list[Undo]
    """Completed tasks a compensator undoes if the invocation fails (oldest first)."""
    undone: list[dict[str, str]]
    undo_failed: list[dict[str, str]]
    undoing: Task | None
    """The compensation running now."""
    failing: ErrorInfo | None
    """The error the invocation ends with once its compensations have run."""

    def checkpoint(self) -> Checkpoint:
        """The invocation as it stands (what a recovery would start from)."""
        ...

    def _emit(self, event_type: str, data: dict[str, Any]) -> list[Command]:
        """An ``Emit`` of the next streamed event, or nothing when not streaming."""
        ...

    def _send(self, ex: Execution, runs: Iterable[tuple[str, int]],
              history: tuple[str, ...] = (), retry: bool = False) -> list[Command]:
        """Dispatch ``runs`` (node, attempt) of a step that is not a map."""
        ...

    def _current(self, execution_id: str, key: TaskKey) -> tuple[Execution, Task] | None:
        """The running execution and its pending task ``key``, if still current."""
        ...

    def _fail(self, error: ErrorInfo) -> list[Command]:
        """End the invocation with ``error``."""
        ...

    def _step_done(self, ex: Execution | None) -> list[Command]:
        """The step ``ex`` ended well (its results set): close it, decide the next."""
        ...

    def _cancel_all(self, timed_out: bool = False) -> list[Command]:
        """Cancel the running step's tasks."""
        ...

    def _record(self, record: RecordResult) -> list[Command]:
        """Commit the terminal result (FINISHING)."""
        ...

    def _on_refused(self, refused: WriteRefused) -> list[Command]:
        """A write of the machine was refused."""
        ...

    def _lose_ownership(self) -> list[Command]:
        """Another owner took the invocation over: stop, write nothing more."""
        ...

    def _interrupt(self, error: ErrorInfo) -> list[Command]:
        """End this run without a durable result (kept for recover())."""
        ...
