"""The node result cache part of the :class:`~hayata_py.store.TaskStore` contract.

The common guarantees of the contract's module docs hold here too (each
write one committed transaction, values encoded first, refusals with stable
codes).
"""

from __future__ import annotations

import abc
from typing import Any

from hayata_py.store._records import CachedResult, InvocationRecord, TaskRecord

__all__ = ["CacheContract"]


class CacheContract(abc.ABC):
    """Cached node results (``AgentConfig.cache``) and tasks completed from them."""

    # -- node result cache -------------------------------------------------

    @abc.abstractmethod
    def cache_get(self, agent_id: str, node_id: str, key: str) -> CachedResult | None:
        """Return the live cache entry of ``key`` for the agent's node, or ``None``
        (none stored, or expired: ``expires_at`` <= the store's clock now)."""

    @abc.abstractmethod
    def cache_put(self, agent_id: str, node_id: str, key: str, result: Any, *,
                  ttl: float) -> None:
        """Store ``result`` under ``key`` for the agent's node, expiring ``ttl``
        seconds from now (a finite number > 0, else ``invalid_argument``),
        replacing any entry of that key, live or expired; the node's expired
        entries are deleted in the same transaction. Not fenced: an entry
        belongs to the agent, not to an invocation."""

    @abc.abstractmethod
    def clear_cache(self, agent_id: str, *, node_id: str | None = None,
                    expired_only: bool = False) -> int:
        """Delete the agent's cache entries (of ``node_id`` only, if given; only
        the expired ones with ``expired_only``); return how many."""

    @abc.abstractmethod
    def complete_cached(
        self,
        task: TaskRecord,
        *,
        token: int,
        result: Any,
        attempt: int,
        system_instance: str | None,
        checkpoint: InvocationRecord | None = None,
        retry: bool = False,
    ) -> TaskRecord:
        """Record ``task`` completed with ``result`` from the cache (its node did
        not run): ``status`` completed, ``cached`` true, started and finished
        now, ``attempt``. The same rules as :meth:`mark_started` for an
        existing row (``task_finished``, ``attempt_not_increasing``; ``retry``
        accepts a failed row of a lower attempt), the same fencing and the same
        ``checkpoint`` option: the checkpoint and the completed record are
        committed together or not at all."""
