"""The asyncio API: :class:`AsyncAgentSystem` and :class:`AsyncAgentRef`.

The same calls as the blocking API, awaited. Nothing blocks the event loop
and no call gets a thread of its own:

- waiting (:meth:`AsyncAgentRef.wait`) and streaming
  (:meth:`AsyncAgentRef.messages`) go through the system's one receiver
  thread (:mod:`hayata_py._receiver`): the request is sent from its endpoint
  without blocking, and the answer or the next event wakes the awaiting
  task through ``call_soon_threadsafe``;
- short requests (run, recover, status, get_result, resolve_task, abandon,
  start_agent, ...) run the blocking call on a small fixed pool of threads
  (:data:`POOL_THREADS`), so their errors, codes and ordering are exactly
  the blocking API's.

Cancelling an awaiting task detaches the caller: the invocation keeps
running, its stream keeps its position (a later ``messages()`` continues
where the cancelled one stopped), and a run whose acceptance was being
awaited still starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from hayata_py import _ref_wait
from hayata_py._api import AgentSystem
from hayata_py._api_checks import check_options
from hayata_py._config import AgentConfig
from hayata_py._errors import HayataError, TimeoutError_
from hayata_py._eventlog_read import POLL, LogReader
from hayata_py._ref import ASK_TIMEOUT, AgentRef
from hayata_py._ref_checks import (
    alive,
    check_id,
    check_timeout,
    checked_invoke,
    checked_run,
    run_lost,
    system_died,
    waited_result,
)
from hayata_py._stream_end import CHECK_PERIOD, file_from_log
from hayata_py._threads import ThreadInfo
from hayata_py.messages import (
    AgentEvent,
    AgentResult,
    AgentStatus,
    ResultReply,
    Run,
    Unfinished,
    WaitResult,
)
from hayata_py.store import TaskClass, TaskRecord

POOL_THREADS = 8
"""Threads an :class:`AsyncAgentSystem` runs its short blocking calls on."""

T = TypeVar("T")


class AsyncAgentSystem:
    """A hayata_py system driven from an event loop: ``async with
    hy.AsyncAgentSystem(data_dir, ...) as system:``. Takes the arguments of
    :class:`~hayata_py.AgentSystem` (checked at once: ``ConfigError``/
    ``TypeError``); the system starts in ``__aenter__`` (or :meth:`start`)
    and stops in ``__aexit__`` (or :meth:`shutdown`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        bound = inspect.signature(AgentSystem).bind(*args, **kwargs)
        check_options(**bound.arguments)
        self._args, self._kwargs = args, kwargs
        self._sync: AgentSystem | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._lookups: dict[str, asyncio.Future[tuple[Any, int | None] | None]] = {}
        self._admin_seen = -_ref_wait.LOOKUP_FRESH

    async def __aenter__(self) -> AsyncAgentSystem:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    @property
    def sync(self) -> AgentSystem:
        """The blocking handle (for calls without an async variant)."""
        if self._sync is None:
            raise HayataError("the AsyncAgentSystem is not started: use 'async with' or "
                              "await start()", code="not_started")
        return self._sync

    async def start(self) -> None:
        """Start the actor system (idempotent)."""
        if self._sync is not None:
            return
        pool = self._pool = self._pool or ThreadPoolExecutor(
            POOL_THREADS, thread_name_prefix="hayata-async")
        starting = asyncio.get_running_loop().run_in_executor(
            pool, functools.partial(AgentSystem, *self._args, **self._kwargs))
        try:
            self._sync = await asyncio.shield(starting)
        except asyncio.CancelledError:
            # Cancelled while it started: stop it once it is up, leave nothing behind.
            starting.add_done_callback(
                lambda f: None if f.cancelled() or f.exception() else f.result().shutdown())
            raise

    async def shutdown(self) -> None:
        """Stop every agent and process of the system (idempotent)."""
        if self._sync is not None:
            await self.call(self._sync.shutdown)
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    async def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking call of the API on the system's thread pool."""
        if self._pool is None:
            raise HayataError("the AsyncAgentSystem is not started", code="not_started")
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, functools.partial(function, *args, **kwargs))

    async def _agent_now(self, ref: AgentRef) -> tuple[Any, int | None] | None:
        """:func:`hayata_py._ref_wait.agent_now` on the pool, one at a time per
        agent: the waits that look meanwhile await the same answer."""
        looking = self._lookups.get(ref.id)
        if looking is None or looking.get_loop() is not asyncio.get_running_loop():
            looking = self._lookups[ref.id] = asyncio.ensure_future(
                self.call(_ref_wait.agent_now, ref))
            looking.add_done_callback(functools.partial(self._looked, ref.id))
        return await asyncio.shield(looking)

    def _looked(self, agent_id: str, done: asyncio.Future[Any]) -> None:
        if self._lookups.get(agent_id) is done:
            del self._lookups[agent_id]

    def _admin_alive(self) -> bool:
        """Whether the actor system's admin runs (looked at, for every wait,
        at most every :data:`~hayata_py._ref_wait.LOOKUP_FRESH` s)."""
        now = time.monotonic()
        if now - self._admin_seen < _ref_wait.LOOKUP_FRESH:
            return True
        if alive(self.sync.admin_pid):
            self._admin_seen = now
            return True
        return False

    async def start_agent(self, config: AgentConfig) -> AsyncAgentRef:
        """See :meth:`AgentSystem.start_agent`."""
        return AsyncAgentRef(self, await self.call(self.sync.start_agent, config))

    async def stop_agent(self, agent_id: str) -> None:
        """See :meth:`AgentSystem.stop_agent`."""
        await self.call(self.sync.stop_agent, agent_id)

    async def agent(self, agent_id: str) -> AsyncAgentRef:
        """The handle on a started agent (``AgentNotFound``)."""
        return AsyncAgentRef(self, await self.call(self.sync.agent, agent_id))

    async def agents(self) -> list[str]:
        """Ids of the started agents, in start order."""
        return await self.call(self.sync.agents)

    async def tree(self) -> dict[str, Any]:
        """The live actor tree (see :meth:`AgentSystem.tree`)."""
        return await self.call(self.sync.tree)


class AsyncAgentRef:
    """The asyncio handle on one agent (see :class:`~hayata_py.AgentRef`)."""

    def __init__(self, system: AsyncAgentSystem, ref: AgentRef) -> None:
        self.system = system
        self.sync = ref
        self.id = ref.id

    async def run(self, input: Any = None, *, subscriber: Any = None,
                  stream: bool = False, thread: str | None = None,
                  multitask: str = "reject", invocation_id: str | None = None) -> str:
        """Start an invocation; its id once the agent accepted it (``RunRejected``;
        ``thread``/``multitask``/``invocation_id`` as for :meth:`AgentRef.run`)."""
        checked_run(input, subscriber, stream, thread, multitask, invocation_id)
        return await self.system.call(self.sync.run, input, subscriber=subscriber,
                                      invocation_id=invocation_id,
                                      stream=stream, thread=thread, multitask=multitask)

    async def recover(self, invocation_id: str | None = None, *, subscriber: Any = None,
                      stream: bool = False) -> str:
        """Continue an unfinished invocation (see :meth:`AgentRef.recover`)."""
        checked_run(None, subscriber, stream)
        return await self.system.call(self.sync.recover, invocation_id,
                                      subscriber=subscriber, stream=stream)

    async def unfinished(self, invocation_id: str | None = None) -> list[Unfinished]:
        """The invocations that wait for recovery (see :meth:`AgentRef.unfinished`)."""
        return await self.system.call(self.sync.unfinished, invocation_id)

    async def thread(self, thread_id: str) -> ThreadInfo:
        """A conversation thread (see :meth:`AgentRef.thread`)."""
        return await self.system.call(self.sync.thread, thread_id)

    async def threads(self, limit: int = 50, after: str | None = None) -> list[ThreadInfo]:
        """The agent's threads, a page at a time (see :meth:`AgentRef.threads`)."""
        return await self.system.call(self.sync.threads, limit, after)

    async def clear_cache(self, node: str | None = None) -> int:
        """Delete the agent's cached node results (see :meth:`AgentRef.clear_cache`)."""
        return await self.system.call(self.sync.clear_cache, node)

    async def resume(self, invocation_id: str, value: Any = None, *, subscriber: Any = None,
                     stream: bool = False) -> str:
        """Continue the paused invocation (see :meth:`AgentRef.resume`)."""
        checked_run(None, subscriber, stream)
        return await self.system.call(self.sync.resume, invocation_id, value,
                                      subscriber=subscriber, stream=stream)

    async def get_result(self, invocation_id: str) -> AgentResult | None:
        """The result, or None while the invocation runs."""
        return await self.system.call(self.sync.get_result, invocation_id)

    async def status(self) -> str:
        """``idle``, ``running``, ``paused`` or ``recovery_required``."""
        return (await self.status_info()).status

    async def status_info(self) -> AgentStatus:
        """Status with the current (or unfinished) invocation id."""
        return await self.system.call(self.sync.status_info)

    async def resolve_task(self, task_id: str, *, result: dict[str, Any]) -> None:
        """Record ``result`` for an uncertain task (see :meth:`AgentRef.resolve_task`)."""
        await self.system.call(self.sync.resolve_task, task_id, result=result)

    async def abandon(self, invocation_id: str) -> None:
        """End the unfinished invocation as failed (``abandoned``)."""
        await self.system.call(self.sync.abandon, invocation_id)

    async def cancel(self, invocation_id: str, timeout: float = ASK_TIMEOUT) -> AgentResult:
        """Stop the running invocation; its result once it has ended (what
        :meth:`AgentRef.cancel` returns or raises)."""
        timeout = check_timeout(timeout)
        await self.system.call(self.sync._ask_cancel, invocation_id)
        return await self.wait(invocation_id, timeout)

    async def tasks(self, invocation_id: str | None = None
                    ) -> list[tuple[TaskRecord, TaskClass]]:
        """The durable task records of an invocation with their recovery class."""
        return await self.system.call(self.sync.tasks, invocation_id)

    def events(self, invocation_id: str, *, after: int = 0, follow: bool = False,
               timeout: float | None = None) -> AsyncIterator[AgentEvent]:
        """``async for`` the invocation's logged events after sequence ``after``,
        as :meth:`AgentRef.events` yields them (read from the store; ``not_found``
        and bad arguments are raised by the first ``__anext__``)."""
        check_id(invocation_id, "invocation_id")
        return self._events(invocation_id, after, follow, timeout)

    async def _events(self, invocation_id: str, after: int, follow: bool,
                      timeout: float | None) -> AsyncIterator[AgentEvent]:
        reader = await self.system.call(LogReader, self.sync._store(), self.sync.id,
                                        invocation_id, after=after, follow=follow,
                                        timeout=timeout)
        while True:
            events, over = await self.system.call(reader.poll)
            for event in events:
                yield event
            if over:
                return
            if not events:
                await asyncio.sleep(POLL)

    async def _address(self) -> Any:
        ref = self.sync
        if ref._address is not None and ref._pid is not None and alive(ref._pid):
            return ref._address
        return await self.system.call(ref._current_address)

    async def wait(self, invocation_id: str, timeout: float = ASK_TIMEOUT) -> AgentResult:
        """Await the end of the invocation: what :meth:`AgentRef.wait` returns or raises."""
        check_id(invocation_id, "invocation_id")
        return await self._wait(invocation_id, check_timeout(timeout), None)

    async def invoke(self, input: Any = None, *, thread: str | None = None,
                     multitask: str = "reject", timeout: float = ASK_TIMEOUT) -> AgentResult:
        """Run an invocation and await its end in one message: what
        :meth:`AgentRef.invoke` returns or raises."""
        run = checked_invoke(input, thread, multitask)
        assert run.invocation_id is not None
        return await self._wait(run.invocation_id, check_timeout(timeout), run)

    async def _wait(self, invocation_id: str, timeout: float, run: Run | None) -> AgentResult:
        """:func:`hayata_py._ref_wait.wait` on this event loop."""
        deadline = time.monotonic() + timeout
        system = self.system.sync
        inbox, receiver = system._caller_inbox()
        asked = await self._address()
        ref = next(_ref_wait._REFS)
        future = inbox.expect_reply(ref)
        answer = asyncio.wrap_future(future)
        ask = _ref_wait.asker(receiver, lambda: future)
        try:
            ask(asked, WaitResult(invocation_id, ref=ref) if run is None
                else dataclasses.replace(run, ref=ref))
            while True:
                remaining = _ref_wait.time_left(deadline, self.id, invocation_id, timeout)
                done, _ = await asyncio.wait(
                    {answer}, timeout=min(remaining, _ref_wait.WAIT_CHECK_PERIOD))
                reply = answer.result() if done else None
                if isinstance(reply, ResultReply) and reply.invocation_id == invocation_id:
                    break
                if run is not None and isinstance(reply, HayataError):
                    raise reply  # the agent refused the run
                if done:  # undeliverable (or a stray answer): look for a successor now
                    future = inbox.expect_reply(ref)
                    answer = asyncio.wrap_future(future)
                if not self.system._admin_alive():
                    raise system_died(system, invocation_id)
                if _ref_wait.moved(self.sync, asked, await self.system._agent_now(self.sync)):
                    asked = self.sync._address
                    ask(asked, WaitResult(invocation_id, ref=ref))
        finally:
            inbox.drop_reply(ref)
        if run is not None and not reply.known:
            raise run_lost(self.id, invocation_id)
        result = waited_result(reply, invocation_id)
        if inbox.follows(invocation_id):  # else settle has nothing to do
            await self.system.call(_ref_wait.settle, self.sync, invocation_id, result, asked,
                                   deadline)
        return result

    def messages(self, invocation_id: str, timeout: float = ASK_TIMEOUT
                 ) -> AsyncIterator[AgentEvent | AgentResult]:
        """``async for`` the events then the result of a ``hy.CALLER`` run, as
        :meth:`AgentRef.messages` yields them (``TimeoutError`` after
        ``timeout`` s without a message; a bad argument: ``ConfigError`` at the
        call)."""
        check_id(invocation_id, "invocation_id")
        check_timeout(timeout)
        return self._messages(invocation_id, timeout)

    async def _messages(self, invocation_id: str, timeout: float
                        ) -> AsyncIterator[AgentEvent | AgentResult]:
        inbox, _receiver = self.system.sync._caller_inbox()
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        while True:
            message = inbox.take(invocation_id)
            if message is None:
                arrived = asyncio.Event()
                inbox.on_message(invocation_id,
                                 functools.partial(loop.call_soon_threadsafe, arrived.set))
                try:
                    message = inbox.take(invocation_id)  # arrived before the wakeup was set
                    if message is None:
                        # Its source is looked at every CHECK_PERIOD s (_stream_end.py).
                        remaining = deadline - time.monotonic()
                        await asyncio.wait_for(arrived.wait(), min(remaining, CHECK_PERIOD))
                except TimeoutError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError_(f"no message for invocation {invocation_id} "
                                            f"within {timeout}s",
                                            invocation_id=invocation_id) from None
                    await self.system.call(file_from_log, self.sync, invocation_id)
                finally:
                    inbox.on_message(invocation_id, None)
                if message is None:
                    continue
            yield message
            deadline = time.monotonic() + timeout
            if isinstance(message, AgentResult):
                return
