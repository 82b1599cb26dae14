"""What the machine's glue modules use of the machine that calls them.

:mod:`~hayata_py._invocation.mapping` and :mod:`~hayata_py._invocation.holding`
are functions that take the :class:`~hayata_py._invocation.machine.Invocation`
and return its commands. They see it through :class:`Machine`, so they never
import the machine module, which imports them: imports run one way
(``machine`` -> ``holding``/``mapping`` -> ``glue``/``state``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from hayata_py._errors import ErrorInfo
from hayata_py._invocation.commands import Checkpoint, Command
from hayata_py._invocation.events import TaskKey
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

    def checkpoint(self) -> Checkpoint:
        """The invocation as it stands (what a recovery would start from)."""
        ...

    def _emit(self, event_type: str, data: dict[str, Any]) -> list[Command]:
        """An ``Emit`` of the next streamed event, or nothing when not streaming."""
        ...

    def _send(self, ex: Execution, runs: Iterable[tuple[str, int]],
              history: tuple[str, ...] = ()) -> list[Command]:
        """Dispatch ``runs`` (node, attempt) of a step that is not a map."""
        ...

    def _current(self, execution_id: str, key: TaskKey) -> tuple[Execution, Task] | None:
        """The running execution and its pending task ``key``, if still current."""
        ...

    def _fail(self, error: ErrorInfo) -> list[Command]:
        """End the invocation with ``error``."""
        ...
