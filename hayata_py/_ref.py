""":class:`AgentRef`, the blocking handle on one agent."""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from thespian.actors import PoisonMessage

from hayata_py import _ref_wait
from hayata_py._actor_messages import BatchSubscriber
from hayata_py._codec import check_encodable
from hayata_py._errors import ConfigError, EncodingError, HayataError, TimeoutError_
from hayata_py._eventlog_read import LogReader, read_events
from hayata_py._inbox import Inbox
from hayata_py._ref_checks import (
    alive,
    check_id,
    check_result,
    check_timeout,
    checked_invoke,
    checked_run,
    is_answer,
    result_for,
)
from hayata_py._ref_system import RefSystem
from hayata_py._ref_wait import _REFS
from hayata_py._stream_end import CHECK_PERIOD, file_from_log
from hayata_py._threads import ThreadInfo, check_thread, thread_info, thread_page
from hayata_py.messages import (
    Abandon,
    Ack,
    AgentEvent,
    AgentResult,
    AgentStatus,
    Caller,
    Cancel,
    GetResult,
    GetStatus,
    GetUnfinished,
    Recover,
    ResolveTask,
    ResultReply,
    ResumePaused,
    Run,
    RunAccepted,
    Unfinished,
    UnfinishedList,
)
from hayata_py.store import TaskClass, TaskRecord, classify_task

ASK_TIMEOUT = 30.0


_LOOKUP_LOCKS: weakref.WeakKeyDictionary[Any, dict[str, threading.Lock]] = \
    weakref.WeakKeyDictionary()
_LOOKUP_LOCKS_LOCK = threading.Lock()


def _lookup_lock(system: Any, agent_id: str) -> threading.Lock:
    """The lock one look-up of ``agent_id`` on ``system`` holds at a time."""
    with _LOOKUP_LOCKS_LOCK:
        return _LOOKUP_LOCKS.setdefault(system, {}).setdefault(agent_id, threading.Lock())


class AgentRef:
    """A handle on one agent: run it, read its results and status.

    The agent's address is looked up through its supervisor (it changes when
    the agent restarts) and cached until a call finds it stale. How
    :meth:`wait` and :meth:`invoke` wait is :func:`hayata_py._ref_wait.blocking_wait`.
    """

    def __init__(self, system: RefSystem, agent_id: str) -> None:
        self.system = system
        self.id = agent_id
        self._address: Any = None
        self._pid: int | None = None

    def _current_address(self) -> Any:
        """The agent's address, looked up again if the cached process is gone
        (an ask to a dead actor can take the whole timeout to fail). Threads
        sharing this ref share one look-up: the others wait for its answer
        instead of each asking the supervisor (a thousand runs at once)."""
        address, pid = self._address, self._pid
        if address is not None and pid is not None and alive(pid):
            return address
        with _lookup_lock(self.system, self.id):
            address, pid = self._address, self._pid
            if address is None or pid is None or not alive(pid):
                address, pid = self.system._agent_address(self.id)
                self._address, self._pid = address, pid
        return address

    def _ask(self, message: Any, timeout: float = ASK_TIMEOUT,
             accept: Callable[[Any], bool] = lambda _reply: True, address: Any = None) -> Any:
        """Send ``message`` (to ``address``, default the agent's) and return the
        first reply ``accept`` takes.

        Replies that do not match (a late answer to an earlier call that timed
        out) are dropped, so they can never be mistaken for this call's answer.
        """
        deadline = time.monotonic() + timeout
        ref = 0
        if hasattr(message, "ref"):
            ref = next(_REFS)
            message = dataclasses.replace(message, ref=ref)

        def mine(reply: Any) -> bool:
            # 0: an answer that names no request (an agent of an older version).
            return accept(reply) and getattr(reply, "ref", 0) in (0, ref)

        endpoint = self.system._system
        reply = endpoint.ask(address or self._current_address(), message, timeout)
        while reply is not None and not isinstance(reply, PoisonMessage) and not mine(reply):
            remaining = deadline - time.monotonic()
            reply = endpoint.listen(remaining) if remaining > 0 else None
        if reply is None or isinstance(reply, PoisonMessage):
            if isinstance(reply, PoisonMessage) or self._pid is None or not alive(self._pid):
                # gone: the next call looks it up (one still running is only
                # busy; forgetting it would send every caller to its supervisor)
                self._address = None
            raise TimeoutError_(f"agent {self.id!r} did not answer "
                                f"{type(message).__name__} within {timeout}s")
        return reply

    def _start(self, message: Run | Recover | ResumePaused, subscriber: Any, stream: bool
               ) -> str:
        """Send a Run or Recover; a ``hy.CALLER`` subscriber becomes this
        system's receiver, whose stream for the invocation starts afresh."""
        address = self._current_address()
        caller = isinstance(subscriber, Caller)
        if caller:
            inbox, receiver = self.system._caller_inbox()
            message = dataclasses.replace(message,
                                          subscriber=BatchSubscriber(receiver.address))
        reply = self._ask(message, accept=is_answer(RunAccepted, HayataError), address=address)
        if isinstance(reply, HayataError):
            raise reply
        if not isinstance(reply, RunAccepted):
            raise HayataError(f"unexpected answer to {type(message).__name__}: {reply!r}",
                              code="protocol_error")
        if caller:
            pid = self._pid if address == self._address else None
            inbox.expect(reply.invocation_id, address, stream, reply.run, reply.first, pid)
        return reply.invocation_id

    def run(self, input: Any = None, *, subscriber: Any = None, stream: bool = False,
            thread: str | None = None, multitask: str = "reject",
            invocation_id: str | None = None) -> str:
        """Start an invocation; return its id once the agent accepted it.

        ``subscriber``: an actor address, ``hy.CALLER`` (read with
        :meth:`messages`), or None. ``stream=True`` sends events too (needs a
        subscriber). ``thread``: a conversation id: the invocation starts from
        the state the thread's last completed invocation ended with, and its
        final state becomes the thread's (``ctx.thread`` names it). A run on a
        thread that is running one follows ``multitask``: ``"reject"``
        (``RunRejected("thread_busy")``) or ``"enqueue"`` (kept durably, started
        when the running one ends; its id is returned at once and
        :meth:`wait` waits for it). ``invocation_id``: the new invocation's id,
        chosen by the caller (32 lowercase hex digits, e.g. ``uuid.uuid4().hex``),
        so that after a crash the caller can tell whether its run began (the
        thread's invocations name it); None: the agent chooses. Raises
        :class:`RunRejected` (``agent_busy``: ``max_invocations`` are running,
        ``recovery_required``, ``thread_busy``, ``invocation_exists``,
        ``invalid_option``, ``invalid_input``).
        """
        return self._start(checked_run(input, subscriber, stream, thread, multitask,
                                       invocation_id), subscriber, stream)

    def messages(self, invocation_id: str, timeout: float = ASK_TIMEOUT
                 ) -> Iterator[AgentEvent | AgentResult]:
        """The events (in sequence order) then the result of an invocation run with
        ``subscriber=hy.CALLER``. What its agent process could not send before it
        stopped or died comes from the store's event log (the same events and
        result). Raises TimeoutError if nothing arrives in ``timeout`` s,
        ``HayataError(code="not_found")`` if this system follows no such stream.
        A bad ``invocation_id`` or ``timeout``: ``ConfigError`` at the call."""
        check_id(invocation_id, "invocation_id")
        check_timeout(timeout)
        return self._messages(invocation_id, timeout)

    def _messages(self, invocation_id: str, timeout: float
                  ) -> Iterator[AgentEvent | AgentResult]:
        inbox, _receiver = self.system._caller_inbox()
        while True:
            message = self._next_message(inbox, invocation_id, timeout)
            yield message
            if isinstance(message, AgentResult):
                return

    def _next_message(self, inbox: Inbox, invocation_id: str, timeout: float
                      ) -> AgentEvent | AgentResult:
        """The stream's next message; while none comes, its source is looked at
        every ``CHECK_PERIOD`` s (:func:`hayata_py._stream_end.file_from_log`)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                return inbox.next_message(invocation_id, max(0.0, min(remaining, CHECK_PERIOD)))
            except TimeoutError_:
                if inbox.closed or time.monotonic() >= deadline:
                    raise TimeoutError_(f"no message for invocation {invocation_id} within "
                                        f"{timeout}s", invocation_id=invocation_id) from None
            file_from_log(self, invocation_id)

    def get_result(self, invocation_id: str) -> AgentResult | None:
        """The result, or None while the invocation runs."""
        check_id(invocation_id, "invocation_id")
        reply = self._ask(GetResult(invocation_id), accept=result_for(invocation_id))
        assert isinstance(reply, ResultReply)
        if not reply.known:
            raise HayataError(f"unknown invocation {invocation_id!r}", code="not_found",
                              invocation_id=invocation_id)
        return reply.result

    def wait(self, invocation_id: str, timeout: float = ASK_TIMEOUT) -> AgentResult:
        """Block until the invocation ends (raises TimeoutError after ``timeout`` s).

        A wait in progress when the run is interrupted returns that run's result
        (``invocation_interrupted``/``ownership_lost``, ``details["recoverable"]``).
        Raises ``HayataError(code="recovery_required")`` if nothing runs it any
        more: the agent process died (its restarted successor found it
        unfinished) or its run was interrupted earlier; :meth:`recover`
        continues it.
        ``HayataError(code="no_system")`` if the whole actor system died.
        For a ``hy.CALLER`` run, it returns once this process holds the whole
        stream, so :meth:`messages` no longer needs the agent.
        """
        check_id(invocation_id, "invocation_id")
        return _ref_wait.blocking_wait(self, invocation_id, check_timeout(timeout), None)

    def invoke(self, input: Any = None, *, thread: str | None = None,
               multitask: str = "reject", timeout: float = ASK_TIMEOUT) -> AgentResult:
        """Run an invocation and block until it ends: :meth:`run` and :meth:`wait`
        in one message (LangGraph's ``invoke``). The agent answers with the
        result only, one round trip fewer than ``wait(run(...))``.

        ``thread``/``multitask`` as for :meth:`run` (an enqueued run is waited
        for too). Raises what those two raise: :class:`RunRejected` (before
        anything was recorded), and, naming the invocation in ``details``,
        ``TimeoutError``, ``recovery_required`` (:meth:`recover` it by that id)
        or ``no_system``. The id is chosen here, so the wait goes on with the
        agent's successor if the agent restarts; ``RunRejected(code="run_lost")``
        if it restarted before it had recorded the run (nothing of it ran: run
        it again).
        """
        run = checked_invoke(input, thread, multitask)
        assert run.invocation_id is not None
        return _ref_wait.blocking_wait(self, run.invocation_id, check_timeout(timeout), run)

    def status(self) -> str:
        """``idle``, ``running``, ``paused`` or ``recovery_required``."""
        return self.status_info().status

    def status_info(self, timeout: float = ASK_TIMEOUT) -> AgentStatus:
        """Status with the current (or unfinished) invocation id (TimeoutError if
        the agent does not answer within ``timeout`` s)."""
        reply = self._ask(GetStatus(), timeout, accept=is_answer(AgentStatus))
        assert isinstance(reply, AgentStatus)
        return reply

    def recover(self, invocation_id: str | None = None, *, subscriber: Any = None,
                stream: bool = False) -> str:
        """Continue an unfinished invocation; return its id.

        ``invocation_id``: the one to recover (:meth:`unfinished` lists them);
        None: the only one (``RecoveryRejected("invocation_required")`` if there
        are several).

        Completed tasks of the interrupted step are reused, not-started ones
        run, idempotent uncertain ones re-run. Raises :class:`RecoveryRejected`:
        ``nothing_to_recover``, ``task_execution_uncertain`` (``details`` name
        ``task_ids`` and ``node_ids``; nothing was run), ``invocation_busy``.
        With ``subscriber=hy.CALLER`` the recovered run's stream starts afresh,
        numbered on from the last event in the invocation's log: nothing of
        the interrupted run is mixed into it. A failing invocation (its
        compensations were running: ``AgentConfig.compensate``) goes on
        undoing, never back to the policy.
        """
        if invocation_id is not None:
            check_id(invocation_id, "invocation_id")
        checked_run(None, subscriber, stream)
        return self._start(Recover(subscriber, stream, invocation_id), subscriber, stream)

    def unfinished(self, invocation_id: str | None = None) -> list[Unfinished]:
        """The invocations that wait for recovery (oldest first), each with what
        :meth:`recover` would do: ``recoverable``, ``uncertain`` (``task_ids``;
        :meth:`resolve_task` or :meth:`abandon`), ``paused``,
        ``waiting_for_placement`` or ``busy``. On a shared store, also the
        invocations of this agent id that another system runs (``busy``) or
        left behind. ``invocation_id``: only that invocation, in a list of one
        if it waits for recovery, else empty (its agent reads that one only:
        what to ask when many callers each care about their own)."""
        if invocation_id is not None:
            check_id(invocation_id, "invocation_id")
        reply = self._ask(GetUnfinished(invocation_id=invocation_id),
                          accept=is_answer(UnfinishedList))
        assert isinstance(reply, UnfinishedList)
        return list(reply.invocations)

    def thread(self, thread_id: str) -> ThreadInfo:
        """A conversation thread: its state, whether it runs an invocation, its
        queued runs and its invocations, newest first.
        ``HayataError(code="not_found")`` for a thread with no invocation yet."""
        return thread_info(self._store(), self.id, check_thread(thread_id))

    def threads(self, limit: int = 50, after: str | None = None) -> list[ThreadInfo]:
        """The agent's threads in id order, ``limit`` at a time; ``after``: the last
        thread id of the previous page."""
        return thread_page(self._store(), self.id, limit, after)

    def clear_cache(self, node: str | None = None) -> int:
        """Delete the agent's cached node results (``AgentConfig.cache``), of
        ``node`` only if given; return how many entries went. Reads and writes
        the store directly: the agent need not be running."""
        if node is not None:
            check_id(node, "node")
        count: int = self._store().clear_cache(self.id, node_id=node)
        return count

    def _store(self) -> Any:
        store = self.system.store
        if store is None:
            raise HayataError("no store is known to this handle", code="no_store")
        return store

    def resume(self, invocation_id: str, value: Any = None, *, subscriber: Any = None,
               stream: bool = False) -> str:
        """Continue the paused invocation ``invocation_id``; return its id.

        Its next decision sees ``value`` (msgpack-encodable) as
        ``ctx.resume_value``; a ``pause_before`` breakpoint runs its held step
        first. Raises :class:`RecoveryRejected`: ``not_paused`` (it is not
        paused, or another ``resume()`` won), ``not_found`` (the store has no
        invocation of that id of this agent), ``invocation_busy``; and
        ``ConfigError("value")`` for a value that cannot be stored (nothing is
        sent). ``subscriber``/``stream`` as for :meth:`run`.
        """
        check_id(invocation_id, "invocation_id")
        checked_run(None, subscriber, stream)
        try:
            check_encodable(value, "value")
        except EncodingError as exc:
            raise ConfigError("value", f"cannot be stored durably: {exc}",
                              key=exc.details.get("key")) from exc
        return self._start(ResumePaused(invocation_id, value, subscriber, stream), subscriber,
                           stream)

    def resolve_task(self, task_id: str, *, result: dict[str, Any]) -> None:
        """Record ``result`` for an uncertain task (established by checking the
        external system); a later :meth:`recover` reuses it. ``result`` must be a
        dict with str keys that can be stored (``ConfigError("result")``)."""
        check_id(task_id, "task_id")
        check_result(result)
        self._expect_ack(self._ask(ResolveTask(task_id, result),
                                   accept=is_answer(Ack, HayataError)))

    def abandon(self, invocation_id: str) -> None:
        """End the unfinished invocation as failed (``abandoned``) and free the agent.

        With compensators (``AgentConfig.compensate``) its completed tasks are
        undone first (the call returns once that has begun; :meth:`wait` for
        the result, whose ``error.details["compensated"]`` lists them)."""
        check_id(invocation_id, "invocation_id")
        self._expect_ack(self._ask(Abandon(invocation_id), accept=is_answer(Ack, HayataError)))

    def cancel(self, invocation_id: str, timeout: float = ASK_TIMEOUT) -> AgentResult:
        """Stop the running invocation and return its result once it has ended.

        The tasks of its running step are stopped (a task's edge process is
        killed and replaced, or its coroutine cancelled) and recorded ``failed``
        with code ``cancelled``; the invocation ends failed with code
        ``cancelled`` (``result.status == "cancelled"``), its event log ends with
        ``invocation_failed``, and its thread, if any, runs its next queued run.
        Its completed steps and tasks stay as recorded; no compensation runs.

        An invocation that has already ended, or is ending on its own (its
        result being recorded, its compensations running), is left as it is:
        its result is returned (check ``status``). Raises ``HayataError``:
        ``not_found`` (no invocation of this agent by that id),
        ``not_running`` (paused, kept for ``recover()``, queued behind its
        thread's run, or run by another system: ``resume``/``recover``/
        ``abandon`` act on those); ``TimeoutError`` if it has not ended within
        ``timeout`` s."""
        timeout = check_timeout(timeout)
        self._ask_cancel(invocation_id)
        return self.wait(invocation_id, timeout)

    def _ask_cancel(self, invocation_id: str) -> None:
        """Ask the agent to stop the invocation (:meth:`cancel` without the wait)."""
        check_id(invocation_id, "invocation_id")
        self._expect_ack(self._ask(Cancel(invocation_id), accept=is_answer(Ack, HayataError)))

    @staticmethod
    def _expect_ack(reply: Any) -> None:
        if isinstance(reply, HayataError):
            raise reply
        if not isinstance(reply, Ack):
            raise HayataError(f"unexpected answer: {reply!r}", code="protocol_error")

    def events(self, invocation_id: str, *, after: int = 0, follow: bool = False,
               timeout: float | None = None) -> Iterator[AgentEvent]:
        """The invocation's events after sequence ``after``, from the store's event
        log: readable from any process that opens the store (the caller that
        crashed, another host), whether or not the agent runs. With ``follow``,
        then the new ones as they are stored, until the invocation's latest run
        ends (``TimeoutError`` after ``timeout`` s without one; None: as long as
        it runs). ``HayataError(code="not_found")`` for an id that is not one of
        this agent's invocations in the store; ``ConfigError`` for a bad
        ``after``/``timeout`` (both at the call)."""
        check_id(invocation_id, "invocation_id")
        return read_events(LogReader(self._store(), self.id, invocation_id, after=after,
                                     follow=follow, timeout=timeout))

    def tasks(self, invocation_id: str | None = None) -> list[tuple[TaskRecord, TaskClass]]:
        """The durable task records of an invocation of this agent (default: the
        current or unfinished one) with their recovery class, as this agent's
        ``recover()`` would make of them (an uncertain task of one of its
        ``idempotent_nodes`` is ``rerun``). ``HayataError(code="not_found")`` for
        an id that is not one of this agent's invocations."""
        if invocation_id is not None:
            check_id(invocation_id, "invocation_id")
        store = self.system.store
        if store is None:
            raise HayataError("no store is known to this handle", code="no_store")
        status = self.status_info()
        if invocation_id is None:
            invocation_id = status.invocation_id
            if invocation_id is None:
                records = store.list_invocations(self.id, limit=1)
                if not records:
                    return []
                invocation_id = records[0].invocation_id
        else:
            record = store.get_invocation(invocation_id)
            if record is None or record.agent_id != self.id:
                raise HayataError(f"agent {self.id!r} has no invocation {invocation_id!r}",
                                  code="not_found", invocation_id=invocation_id)
        idempotent = set(status.idempotent_nodes)
        return [(t, classify_task(t, idempotent=t.node_id in idempotent))
                for t in store.get_tasks(invocation_id)]
