"""The durable task store contract every backend implements.

Model
-----
An *invocation* is one run of an agent's graph; its checkpoint is an
:class:`InvocationRecord`. A *task* is one node run within one step
(:class:`TaskRecord`), recorded ``scheduled`` -> ``started`` ->
``completed``/``failed`` so a restarted runtime can tell "never ran" from
"maybe ran" (see :mod:`hayata_py.store._classify`).

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
from hayata_py.store._cache_contract import CacheContract
from hayata_py.store._events_contract import EventContract
from hayata_py.store._records import InvocationRecord, QueuedRun, StoredEvent, ThreadRecord
from hayata_py.store._tasks_contract import TaskContract

__all__ = ["TaskStore"]


class TaskStore(TaskContract, CacheContract, EventContract):
    """Durable invocation checkpoints (see the module docs), task records
    (:class:`TaskContract`), the node result cache (:class:`CacheContract`) and
    the event log (:class:`EventContract`)."""

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
        :mod:`~hayata_py.store._walsync`; other stores may sync it anyway). For
        a caller that lets nothing outside learn of the invocation before such
        a commit (``AgentRef.invoke``: the first task's ``started`` record or
        the invocation's end is synced before anything is seen).
        """

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
        """Raise :class:`InvocationBusy` if :meth:`claim_invocation` by ``owner``
        would (a different owner's lease has not expired); write nothing. For a
        caller that must not claim before it knows it can act (``recover()``
        refusing an uncertain step writes nothing)."""

    @abc.abstractmethod
    def renew_lease(
        self, invocation_id: str, *, owner: str, token: int, lease_seconds: float | None
    ) -> None:
        """Extend ``owner``'s lease to ``lease_seconds`` from now (``None``: drop it).

        Fenced: :class:`StaleWriter` unless ``token`` is current and ``owner`` is
        the recorded owner. Does not change the token.
        """

    def create_invocations(
        self, items: Sequence[tuple[InvocationRecord, int | None]], *, owner: str,
        lease_seconds: float | None = None, max_running: int | None = 1,
        durable: bool = True,
    ) -> list[int | StoreError]:
        """Create several invocations, each ``(record, thread_version)`` as
        :meth:`create_invocation` would, in one transaction where they all land
        (group commit: one fsync for the burst); otherwise each on its own. Per
        item: its token, or the :class:`StoreError` its own create raised.
        ``durable`` as for :meth:`create_invocation`, for all of them."""
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
        """Finish several invocations, each ``(invocation_id, token, status, result,
        error, state)`` as :meth:`finish_invocation` would, in one transaction
        where they all land; otherwise each on its own (a finish that starts a
        thread's queued run always does). Per item: the run it started, None, or
        the :class:`StoreError` its own finish raised."""
        out: list[InvocationRecord | StoreError | None] = []
        for invocation_id, token, status, result, error, state in items:
            try:
                out.append(self.finish_invocation(
                    invocation_id, token=token, status=status,  # type: ignore[arg-type]
                    result=result, error=error, state=state, lease_seconds=lease_seconds))
            except StoreError as exc:
                out.append(exc)
        return out

    @abc.abstractmethod
    def renew_leases(
        self, tokens: dict[str, int], *, owner: str, lease_seconds: float | None
    ) -> set[str]:
        """Extend ``owner``'s leases of many invocations (id -> its token) in one
        transaction, as :meth:`renew_lease` does each; returns the ids whose
        renewal was refused (token not current, another owner, not running).
        An agent serving many invocations renews them all with one commit."""

    @abc.abstractmethod
    def release(self, invocation_id: str, *, owner: str, token: int) -> None:
        """Drop ``owner``'s lease so another owner can claim at once.

        Fenced like :meth:`renew_lease`. The token is unchanged.
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
        """Return the agent's oldest running invocation (the only one when every
        create used ``max_running=1``), or ``None``."""

    @abc.abstractmethod
    def unfinished_invocations(self, agent_id: str) -> list[InvocationRecord]:
        """Return every running invocation of the agent, oldest first."""

    @abc.abstractmethod
    def list_invocations(self, agent_id: str, limit: int = 50) -> list[InvocationRecord]:
        """Return up to ``limit`` of the agent's invocations, newest first."""

    # -- threads -----------------------------------------------------------

    @abc.abstractmethod
    def enqueue_run(
        self, agent_id: str, thread_id: str, invocation_id: str, input: Any, *,
        stream: bool = False,
    ) -> int:
        """Queue a run of ``input`` behind the thread's running invocation; return
        its position in the thread's queue (1: it starts next).

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
        """Return the queued run with this id (and its current position), or
        ``None`` once it has started (then :meth:`get_invocation` has it) or if
        it was never queued."""

    @abc.abstractmethod
    def get_thread(self, agent_id: str, thread_id: str) -> ThreadRecord | None:
        """Return the thread (state, version, running invocation, queued ids in
        order), or ``None`` if unknown."""

    @abc.abstractmethod
    def list_threads(
        self, agent_id: str, *, limit: int = 50, after: str | None = None
    ) -> list[ThreadRecord]:
        """Return up to ``limit`` of the agent's threads ordered by ``thread_id``
        (in the database's collation), those after ``after`` (the last thread id
        of the previous page)."""

    @abc.abstractmethod
    def thread_invocations(
        self, agent_id: str, thread_id: str, *, limit: int = 50
    ) -> list[InvocationRecord]:
        """Return up to ``limit`` of the thread's invocations, newest first
        (queued runs not yet started are not invocations yet)."""

    # -- lifecycle ---------------------------------------------------------

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections held by this process. Idempotent."""

    def __enter__(self) -> TaskStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
