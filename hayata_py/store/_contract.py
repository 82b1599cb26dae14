"""The durable task store contract every backend implements: :class:`TaskStore`.

The contract is this one class, in sections: invocations (and their group
commit and retention), ownership (claims and leases), threads, task records,
the node result cache, the event log, and the store's lifecycle. The SQL
implementation (:mod:`hayata_py.store._sql`) has one class per section.

Model
-----
An *invocation* is one run of an agent's graph; its checkpoint is an
:class:`InvocationRecord`. A *task* is one node run within one step
(:class:`TaskRecord`), recorded ``scheduled`` -> ``started`` ->
``completed``/``failed`` so a restarted runtime can tell "never ran" from
"maybe ran" (see :mod:`hayata_py.store._classify`). A node result cache entry
belongs to an agent's node (not to an invocation); an invocation's events are
numbered 1, 2, ...

Ownership and fencing
---------------------
Whoever drives an invocation holds its *fencing token*: ``create_invocation``
returns 1 and every ``claim_invocation`` returns the next integer. Every write
(checkpoint, finish, task records, lease) carries the writer's token and is
refused with :class:`StaleWriter` unless it equals the invocation's current
token; the check and the write happen in one transaction, so once a new
owner has claimed, nothing the old owner sends can land. A refused write
records nothing.

A *lease* (``lease_seconds``) additionally keeps other owners from claiming
until it expires. ``lease_seconds=None`` means no lease: anyone may claim at
any time and fencing alone protects the record.

Threads
-------
A *thread* (``ThreadRecord``) is a conversation of one agent: the state its
last completed invocation ended with, a version counting its completed
invocations, at most one running invocation, and a queue of runs waiting for
it. An invocation created with ``record.thread_id`` runs on that thread; its
end (``finish_invocation``) carries its final state to the thread, frees the
thread and starts the thread's first queued run, all in the transaction that
records the end: a crash never leaves a completed invocation with a stale
thread, a free thread with a waiting queue, or a queued run lost or started
twice.

Guarantees common to every method
---------------------------------
* Each write is one committed transaction: after it returns, the data
  survives a crash of this process and is visible to every other process.
  When it raises, nothing of it was written.
* Values are encoded before the transaction starts; an unencodable value
  raises :class:`EncodingError` (``details['key']`` names its path, e.g.
  ``state.customer.created_at``) and nothing is written.
* Reading undecodable stored bytes raises :class:`CorruptRecord` naming the
  record and column.
* Methods are synchronous and safe to call concurrently from threads and OS
  processes (each process uses its own connections, also after ``fork``).
* Refusals are :class:`StoreError` with a stable ``code``:
  ``invocation_exists``, ``agent_busy``, ``thread_busy``, ``thread_changed``,
  ``thread_free``, ``invocation_not_found``,
  ``invocation_finished``, ``invalid_status``, ``task_not_found``,
  ``task_finished``, ``task_not_started``, ``task_not_uncertain``,
  ``attempt_not_increasing``, ``invalid_argument``; plus the subclasses
  :class:`StaleWriter` (``stale_writer``) and :class:`InvocationBusy`
  (``invocation_busy``).

Timestamps are floats (unix seconds) from the store's clock; timestamps in
records passed to writes are ignored.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Literal

from hayata_py._errors import StoreError
from hayata_py.store._records import (
    CachedResult,
    InvocationRecord,
    PruneReport,
    QueuedRun,
    StoredEvent,
    TaskRecord,
    ThreadRecord,
)

__all__ = ["TaskStore"]


class TaskStore(abc.ABC):
    """Durable invocation checkpoints, their owners and threads, task records,
    the node result cache and the event log (see the module docs)."""

    # -- invocations -------------------------------------------------------

    @abc.abstractmethod
    def create_invocation(
        self,
        record: InvocationRecord,
        *,
        owner: str,
        lease_seconds: float | None = None,
        max_running: int | None = 1,
        thread_version: int | None = None,
        durable: bool = True,
    ) -> int:
        """Insert ``record`` as a running invocation owned by ``owner``; return token 1.

        ``record.status`` is stored as ``running`` whatever it says; the
        timestamps are stamped by the store.

        ``max_running``: with an int N, refused ``agent_busy`` if
        ``record.agent_id`` already runs N invocations (``details``:
        ``running``, ``max_running``; with N = 1 also ``invocation_id``, the
        running one); the count and the insert are atomic against concurrent
        creates, in any process. ``None``: no per-agent check (the caller
        keeps its own limit). Not a positive int or None: ``invalid_argument``.

        With ``record.thread_id``, in the same transaction: the thread is
        created if absent (its state ``record.state``, version 0) and this
        invocation becomes its running one. Refused ``thread_busy`` if the
        thread runs an invocation (``details``: ``thread_id``,
        ``invocation_id`` of the running one) and, when ``thread_version`` is
        given, ``thread_changed`` if the thread's version differs (an absent
        thread is at version 0; ``details``: ``version``): the caller read the
        thread (:meth:`get_thread`) and starts the invocation from its state.
        The invocation's state is ``record.state`` as given. ``thread_version``
        without ``thread_id`` is ``invalid_argument``.

        Checks in this order: ``invocation_exists`` (the id is stored in any
        status, or queued), ``thread_busy``, ``thread_changed``, ``agent_busy``.
        A refused create writes nothing (no thread row either).

        ``durable=False``: the create is committed (every reader sees it, a
        crash of the writing process keeps it) but may reach the disk only with
        the database's next synced commit (SQLite in WAL mode, see
        :mod:`~hayata_py.store._fast.walsync`; other stores may sync it anyway). For
        a caller that lets nothing outside learn of the invocation before such
        a commit (``AgentRef.invoke``: the first task's ``started`` record or
        the invocation's end is synced before anything is seen).
        """

    @abc.abstractmethod
    def save_checkpoint(self, record: InvocationRecord, *, token: int) -> None:
        """Overwrite the checkpoint of a running invocation with ``record``.

        Writes step, state, active execution, parallel results and last
        result; ``agent_id``, ``input`` (written once, at creation) and
        ``created_at`` never change. ``record.status``
        must be ``running`` (else ``invalid_status``; use
        :meth:`finish_invocation`). Raises :class:`StaleWriter` if ``token`` is
        not current, ``invocation_finished`` if terminal,
        ``invocation_not_found`` if unknown.
        """

    @abc.abstractmethod
    def finish_invocation(
        self,
        invocation_id: str,
        *,
        token: int,
        status: Literal["completed", "failed"],
        result: Any = None,
        error: dict[str, Any] | None = None,
        state: dict[str, Any] | None = None,
        lease_seconds: float | None = None,
        events: Sequence[StoredEvent] = (),
    ) -> InvocationRecord | None:
        """Make the invocation terminal with ``status``, ``result`` and ``error``.

        ``events`` (of this invocation) go into its event log in the same
        transaction, as :meth:`append_events` writes them (an event already
        stored under its sequence is left as it is): the end of a run and its
        last events cost one commit.

        ``state`` replaces the stored state when given. Clears owner and lease
        and frees the agent for a new invocation. Fenced (:class:`StaleWriter`).
        Repeating the identical finish is a no-op (returns None); any other
        write to a terminal invocation raises ``invocation_finished``.

        For an invocation on a thread, in the same transaction: ``completed``
        makes its final state (``state``, else its stored state) the thread's
        state and adds 1 to the thread's version; ``failed`` leaves both. Either
        way the thread is freed, then its first queued run (if any) is started:
        its invocation is created running (token 1, step 0, the thread's
        state, the queued input, the same ``thread_id``, owned by the finished
        invocation's owner under a lease of ``lease_seconds`` from now, no
        lease if None), leaves the queue and becomes the thread's running
        invocation. That new record is returned (else None, and always None
        for an invocation without a thread). The started run is not counted
        against any ``max_running`` (it takes the finished one's place). A
        repeated finish starts nothing: a caller that lost the first call's
        answer finds the started run with :meth:`get_thread` or
        :meth:`unfinished_invocations`.
        """

    @abc.abstractmethod
    def get_invocation(self, invocation_id: str) -> InvocationRecord | None:
        """Return the stored checkpoint, or ``None`` if unknown."""

    @abc.abstractmethod
    def unfinished_invocation(self, agent_id: str) -> InvocationRecord | None:
        """Return the agent's oldest running invocation, or ``None``.

        It is the only one when every create used ``max_running=1``.
        """

    @abc.abstractmethod
    def unfinished_invocations(self, agent_id: str) -> list[InvocationRecord]:
        """Return every running invocation of the agent, oldest first."""

    @abc.abstractmethod
    def list_invocations(self, agent_id: str, limit: int = 50) -> list[InvocationRecord]:
        """Return up to ``limit`` of the agent's invocations, newest first."""

    # -- invocations: group commit -------------------------------------------

    def create_invocations(
        self, items: Sequence[tuple[InvocationRecord, int | None]], *, owner: str,
        lease_seconds: float | None = None, max_running: int | None = 1,
        durable: bool = True,
    ) -> list[int | StoreError]:
        """Create several invocations at once; per item its token or its refusal.

        Each ``(record, thread_version)`` as :meth:`create_invocation` would, in
        one transaction where they all land (group commit: one fsync for the
        burst); otherwise each on its own. Per item: its token, or the
        :class:`StoreError` its own create raised. ``durable`` as for
        :meth:`create_invocation`, for all of them.
        """
        out: list[int | StoreError] = []
        for record, version in items:
            try:
                out.append(self.create_invocation(record, owner=owner,
                                                  lease_seconds=lease_seconds,
                                                  max_running=max_running,
                                                  thread_version=version,
                                                  durable=durable))
            except StoreError as exc:
                out.append(exc)
        return out

    def finish_invocations(
        self, items: Sequence[tuple[str, int, str, Any, dict[str, Any] | None,
                                    dict[str, Any] | None]],
        *, lease_seconds: float | None = None,
    ) -> list[InvocationRecord | StoreError | None]:
        """Finish several invocations at once; per item the run it started, None, or its refusal.

        Each ``(invocation_id, token, status, result, error, state)`` as
        :meth:`finish_invocation` would, in one transaction where they all land;
        otherwise each on its own (a finish that starts a thread's queued run
        always does). Per item: the run it started, None, or the
        :class:`StoreError` its own finish raised.
        """
        out: list[InvocationRecord | StoreError | None] = []
        for invocation_id, token, status, result, error, state in items:
            try:
                out.append(self.finish_invocation(
                    invocation_id, token=token, status=status,  # type: ignore[arg-type]
                    result=result, error=error, state=state, lease_seconds=lease_seconds))
            except StoreError as exc:
                out.append(exc)
        return out

    # -- invocations: retention ------------------------------------------------

    @abc.abstractmethod
    def prune(self, older_than: float, *, agent_id: str | None = None) -> PruneReport:
        """Delete finished invocations last updated over ``older_than`` seconds ago.

        The finished (completed or failed) invocations (of ``agent_id`` only, if
        given) last updated more than ``older_than`` seconds ago (a finite number
        >= 0, else ``invalid_argument``) go, with their task records and events,
        in one transaction. A running or paused invocation is never deleted.
        """

    # -- ownership: claims and leases ------------------------------------------

    @abc.abstractmethod
    def claim_invocation(
        self, invocation_id: str, *, owner: str, lease_seconds: float | None = None
    ) -> int:
        """Take ownership: return the next fencing token (strictly increasing).

        Records ``owner`` and a lease expiring ``lease_seconds`` from now
        (``None``: no lease). The same owner may re-claim at any time (getting a
        new token, which fences its own older writers).
        Raises :class:`InvocationBusy` if a different owner's lease has not
        expired, ``StoreError`` ``invocation_finished`` if the invocation is
        terminal, ``invocation_not_found`` if unknown.
        """

    @abc.abstractmethod
    def check_claimable(self, invocation_id: str, *, owner: str) -> None:
        """Raise :class:`InvocationBusy` if a claim by ``owner`` would; write nothing.

        :meth:`claim_invocation` would when a different owner's lease has not
        expired. For a caller
        that must not claim before it knows it can act (``recover()`` refusing
        an uncertain step writes nothing).
        """

    @abc.abstractmethod
    def renew_lease(
        self, invocation_id: str, *, owner: str, token: int, lease_seconds: float | None
    ) -> None:
        """Extend ``owner``'s lease to ``lease_seconds`` from now (``None``: drop it).

        Fenced: :class:`StaleWriter` unless ``token`` is current and ``owner`` is
        the recorded owner. Does not change the token.
        """

    @abc.abstractmethod
    def renew_leases(
        self, tokens: dict[str, int], *, owner: str, lease_seconds: float | None
    ) -> set[str]:
        """Extend ``owner``'s leases of many invocations in one transaction; return the refused ids.

        ``tokens`` maps each invocation id to its token; each is renewed as
        :meth:`renew_lease` does; a renewal is refused when the token is not
        current, another owner holds it, or it is not running. An agent
        serving many invocations renews them all with one commit.
        """

    @abc.abstractmethod
    def release(self, invocation_id: str, *, owner: str, token: int) -> None:
        """Drop ``owner``'s lease so another owner can claim at once.

        Fenced like :meth:`renew_lease`. The token is unchanged.
        """

    # -- threads ---------------------------------------------------------------

    @abc.abstractmethod
    def enqueue_run(
        self, agent_id: str, thread_id: str, invocation_id: str, input: Any, *,
        stream: bool = False,
    ) -> int:
        """Queue a run of ``input`` behind the thread's running invocation; return its position.

        The position is in the thread's queue (1: it starts next).
        ``invocation_id`` is the id its invocation will have when
        :meth:`finish_invocation` of the thread's running invocation (or of a
        later one) starts it; ``stream`` is kept for the caller
        (:meth:`queued_run`). One committed transaction: the run survives any
        crash and starts exactly once. Refused ``thread_free`` if the thread is
        unknown or runs no invocation (create the invocation directly; the
        check and the enqueue are atomic against a concurrent finish), and
        ``invocation_exists`` if the id is stored or already queued.
        """

    @abc.abstractmethod
    def queued_run(self, invocation_id: str) -> QueuedRun | None:
        """Return the queued run with this id (and its current position), or ``None``.

        ``None`` once it has started (then :meth:`get_invocation` has it) or if
        it was never queued.
        """

    @abc.abstractmethod
    def get_thread(self, agent_id: str, thread_id: str) -> ThreadRecord | None:
        """Return the thread, or ``None`` if unknown.

        Its state, version, running invocation and queued ids in order.
        """

    @abc.abstractmethod
    def list_threads(
        self, agent_id: str, *, limit: int = 50, after: str | None = None
    ) -> list[ThreadRecord]:
        """Return up to ``limit`` of the agent's threads ordered by ``thread_id``.

        In the database's collation; those after ``after`` (the last thread id
        of the previous page).
        """

    @abc.abstractmethod
    def thread_invocation_statuses(
        self, agent_id: str, thread_id: str, *, limit: int = 50
    ) -> list[tuple[str, str]]:
        """Return up to ``limit`` of the thread's invocations, newest first,
        as ``(invocation_id, status)``.

        Queued runs not yet started are not invocations yet.
        """

    # -- task records ------------------------------------------------------------

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

    # -- node result cache (``AgentConfig.cache``) -------------------------------

    @abc.abstractmethod
    def cache_get(self, agent_id: str, node_id: str, key: str) -> CachedResult | None:
        """Return the live cache entry of ``key`` for the agent's node, or ``None``.

        ``None`` when none is stored or it expired (``expires_at`` <= the
        store's clock now).
        """

    @abc.abstractmethod
    def cache_put(self, agent_id: str, node_id: str, key: str, result: Any, *,
                  ttl: float) -> None:
        """Store ``result`` under ``key`` for the agent's node, expiring ``ttl`` seconds from now.

        ``ttl`` is a finite number > 0, else ``invalid_argument``. Replaces any
        entry of that key, live or expired; the node's expired entries are
        deleted in the same transaction. Not fenced: an entry belongs to the
        agent, not to an invocation.
        """

    @abc.abstractmethod
    def clear_cache(self, agent_id: str, *, node_id: str | None = None,
                    expired_only: bool = False) -> int:
        """Delete the agent's cache entries; return how many.

        Only those of ``node_id``, if given; only the expired ones with
        ``expired_only``.
        """

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
        """Record ``task`` completed with ``result`` from the cache (its node did not run).

        ``status`` completed, ``cached`` true, started and finished now,
        ``attempt``. The same rules as :meth:`mark_started` for an existing row
        (``task_finished``, ``attempt_not_increasing``; ``retry`` accepts a
        failed row of a lower attempt), the same fencing and the same
        ``checkpoint`` option: the checkpoint and the completed record are
        committed together or not at all.
        """

    # -- event log -----------------------------------------------------------------

    @abc.abstractmethod
    def append_events(self, events: Sequence[tuple[StoredEvent, int]]
                      ) -> set[tuple[str, int]]:
        """Store ``events`` in one transaction; return those of a stale writer.

        Each event comes with its writer's fencing token; ``created_at`` is the
        store's clock. An event whose invocation's token
        is no longer that token (another owner took it over), or whose
        invocation does not exist, is not written: the ``(invocation id,
        token)`` pairs of those events are returned (a batch may hold a
        replaced run's events and those of the run that took over, under the
        new token). An event already stored under its invocation and sequence
        is left as it is (a batch written again changes nothing).
        """

    @abc.abstractmethod
    def get_events(self, invocation_id: str, *, after: int = 0,
                   limit: int | None = None) -> list[StoredEvent]:
        """Return the invocation's stored events with a sequence above ``after``, in order.

        At most ``limit`` of them, when given.
        """

    @abc.abstractmethod
    def last_event(self, invocation_id: str) -> int:
        """Return the highest stored sequence of the invocation (0: none)."""

    # -- lifecycle -------------------------------------------------------------------

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections held by this process. Idempotent."""

    def __enter__(self) -> TaskStore:
        """Return the store itself (closed when the block ends)."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the store."""
        self.close()
