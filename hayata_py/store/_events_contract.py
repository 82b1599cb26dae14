"""The event log part of the :class:`~hayata_py.store.TaskStore` contract.

The common guarantees of the contract's module docs hold here too (each
write one committed transaction, values encoded first, refusals with stable
codes).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from hayata_py.store._records import PruneReport, StoredEvent

__all__ = ["EventContract"]


class EventContract(abc.ABC):
    """Each invocation's events, numbered 1, 2, ..., and the retention of
    finished invocations."""

    @abc.abstractmethod
    def append_events(self, events: Sequence[tuple[StoredEvent, int]]
                      ) -> set[tuple[str, int]]:
        """Store ``events`` (each with its writer's fencing token) in one
        transaction; ``created_at`` is the store's clock. An event whose
        invocation's token is no longer that token (another owner took it over),
        or whose invocation does not exist, is not written: the ``(invocation id,
        token)`` pairs of those events are returned (a batch may hold a replaced
        run's events and those of the run that took over, under the new token).
        An event already stored under its invocation and sequence is left as it
        is (a batch written again changes nothing)."""

    @abc.abstractmethod
    def get_events(self, invocation_id: str, *, after: int = 0,
                   limit: int | None = None) -> list[StoredEvent]:
        """The stored events of the invocation with a sequence above ``after``, in
        sequence order (at most ``limit``)."""

    @abc.abstractmethod
    def last_event(self, invocation_id: str) -> int:
        """The highest stored sequence of the invocation (0: none)."""

    @abc.abstractmethod
    def prune(self, older_than: float, *, agent_id: str | None = None) -> PruneReport:
        """Delete the finished (completed or failed) invocations (of ``agent_id``
        only, if given) last updated more than ``older_than`` seconds ago (a
        finite number >= 0, else ``invalid_argument``), with their task records and
        events, in one transaction. A running or paused invocation is never
        deleted."""
