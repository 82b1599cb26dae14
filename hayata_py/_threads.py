"""Conversation threads as a caller reads them: :class:`ThreadInfo` from the store.

A thread is an identity with durable state, not a process: the store keeps its
state (the final state of its last completed invocation), which invocation
runs on it and the runs queued behind that one. Reading it needs no actor,
only the store, so any process that opens the store can ask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hayata_py._errors import ConfigError, HayataError
from hayata_py.messages import MAX_THREAD_ID

INVOCATIONS_SHOWN = 50
"""Invocations of a thread :meth:`AgentRef.thread` returns, newest first."""
MAX_PAGE = 1000


@dataclass(frozen=True)
class ThreadInfo:
    """One conversation thread of an agent.

    - ``state``: what the thread's next invocation starts from (the final
      state of its last completed one); ``version``: completed invocations
      so far.
    - ``status``: ``running`` (``running_invocation_id`` runs on it) or ``idle``.
    - ``queued``: ids of the runs waiting for the running one, in order.
    - ``invocations``: its invocations, newest first (``(id, status)``;
      status ``running``, ``completed``, ``failed``), at most 50.
    """

    agent_id: str
    thread_id: str
    state: dict[str, Any]
    version: int
    status: str
    running_invocation_id: str | None
    queued: tuple[str, ...]
    invocations: tuple[tuple[str, str], ...]
    created_at: float
    updated_at: float


def check_thread(thread_id: Any, field: str = "thread") -> str:
    """A thread id: a non-empty string of at most 256 characters."""
    if not isinstance(thread_id, str) or not thread_id.strip() \
            or len(thread_id) > MAX_THREAD_ID or "\x00" in thread_id:
        raise ConfigError(field, f"must be a non-empty string of at most {MAX_THREAD_ID} "
                          f"characters, got {thread_id!r:.80}")
    return thread_id


def _info(row: Any, invocations: list[tuple[str, str]]) -> ThreadInfo:
    return ThreadInfo(row.agent_id, row.thread_id, dict(row.state), row.version,
                      "running" if row.running_invocation_id else "idle",
                      row.running_invocation_id, tuple(row.queued),
                      tuple(invocations),
                      row.created_at, row.updated_at)


def thread_info(store: Any, agent_id: str, thread_id: str) -> ThreadInfo:
    row = store.get_thread(agent_id, thread_id)
    if row is None:
        raise HayataError(f"agent {agent_id!r} has no thread {thread_id!r}",
                          code="not_found", thread=thread_id)
    return _info(row, store.thread_invocation_statuses(agent_id, thread_id,
                                                       limit=INVOCATIONS_SHOWN))


def thread_page(store: Any, agent_id: str, limit: Any = 50, after: Any = None
                ) -> list[ThreadInfo]:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise ConfigError("limit", f"must be an int from 1 to {MAX_PAGE}, got {limit!r}")
    if after is not None:
        check_thread(after, "after")
    rows = store.list_threads(agent_id, limit=limit, after=after)
    return [_info(row, []) for row in rows]
