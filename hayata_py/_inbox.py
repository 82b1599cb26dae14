"""The CALLER inbox: what this process's receiver got, sorted by invocation.

Every ``hy.CALLER`` run of an :class:`~hayata_py.AgentSystem` names the
system's one receiver (:mod:`hayata_py._receiver`) as its subscriber. The
inbox files what arrives there: per invocation, events are released in
sequence order and the result after the terminal event, whatever order the
network delivered them in. Replies to requests sent from the receiver
(``ref``-tagged, e.g. the asyncio API's ``WaitResult``) complete futures.

A stream belongs to the agent process that accepted its run (its *source*)
and to that run (``RunAccepted.run``, carried by every event and the result):
a recovered run starts a fresh stream, and whatever an earlier run still
delivers afterwards (from a dead process, or from the same process before it
was interrupted) is dropped, so it can never be mixed into the recovered one.
Once its source process is gone, what it could not send any more is filed
from the durable event log (:meth:`Inbox.file_end`, read by
:mod:`hayata_py._stream_end`): a stream never waits for an agent that is gone.
Thread-safe; a blocking reader waits on its own stream's condition (what
arrives for one stream wakes only that stream's readers, not the thousand
others waiting), asyncio readers register a wakeup callback.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from thespian.actors import PoisonMessage

from hayata_py._actor_messages import EventBatch
from hayata_py._errors import HayataError, TimeoutError_
from hayata_py.messages import AgentEvent, AgentResult

TERMINAL_EVENTS = ("invocation_completed", "invocation_failed", "invocation_interrupted",
                   "invocation_paused")
MAX_STREAMS = 10_000
"""Streams kept at most: past it, the oldest that no reader waits on is
dropped (a stream nobody reads would be kept for ever)."""
MAX_EARLY = 10_000
"""Messages kept for invocations whose run has not been accepted here yet."""

Message = AgentEvent | AgentResult


@dataclass
class _Stream:
    source: Any
    streamed: bool
    run: int = 0
    """The run it follows (``RunAccepted.run``; 0: any run of its source)."""
    next: int = 1
    first: int = 1
    """The sequence of the run's first event."""
    pid: int | None = None
    """The source's process on this host (None: unknown, or on another host)."""
    events: dict[int, AgentEvent] = field(default_factory=dict)
    terminal: int | None = None
    result: AgentResult | None = None
    wakeups: list[Callable[[], object]] = field(default_factory=list)

    def takes(self, sender: Any, message: Message) -> bool:
        """``message`` belongs to this stream: from its source process, and of its
        run (a recovery by the same process is another run)."""
        return sender == self.source and (not self.run or not message.run
                                          or message.run == self.run)

    def file(self, message: Message) -> None:
        if isinstance(message, AgentResult):
            self.result = self.result or message
        elif message.sequence >= self.next:
            self.events[message.sequence] = message
            if message.type in TERMINAL_EVENTS:
                self.terminal = message.sequence

    def take(self) -> Message | None:
        event = self.events.pop(self.next, None)
        if event is not None:
            self.next += 1
            return event
        if self.result is not None and self.ready_for_result():
            return self.result
        return None

    def _last(self) -> int | None:
        """The run's last event: its terminal one, or the one its result names
        (the run's later events were never stored: ``AgentResult.last_event``)."""
        if self.result is not None and self.result.last_event is not None:
            return self.result.last_event
        return self.terminal

    def ready_for_result(self) -> bool:
        last = self._last()
        return not self.streamed or (last is not None and last < self.next)

    def complete(self) -> bool:
        """Everything of the run is here (nothing needs its agent any more)."""
        if self.result is None:
            return False
        if not self.streamed:
            return True
        last = self._last()
        return last is not None and all(s in self.events for s in range(self.next, last + 1))


@dataclass(frozen=True)
class _Source:
    """A stream's source and position (:meth:`Inbox.source`)."""

    address: Any
    pid: int | None
    run: int
    first: int
    taken: int
    """The last event the reader took (``first - 1``: none)."""
    streamed: bool
    has_result: bool


class Inbox:
    """Streams of ``hy.CALLER`` runs and replies to the receiver's requests."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        # Conditions (on ``_lock``) that blocking readers of an invocation's
        # stream wait on, with how many wait: one stream's arrivals wake only
        # its own readers.
        self._waits: dict[str, tuple[threading.Condition, list[int]]] = {}
        self._streams: OrderedDict[str, _Stream] = OrderedDict()
        self._early: OrderedDict[str, list[tuple[Any, Message]]] = OrderedDict()
        self._early_count = 0
        self._replies: dict[int, Future[Any]] = {}
        self._closed = False

    # -- the receiver thread -------------------------------------------------------

    def deliver(self, sender: Any, message: Any) -> None:
        if isinstance(message, (AgentEvent, AgentResult)):
            with self._lock:
                self._file(sender, message)
            return
        if isinstance(message, EventBatch):
            with self._lock:
                for each in message.messages:
                    if isinstance(each, (AgentEvent, AgentResult)):
                        self._file(sender, each)
            return
        ref = getattr(message, "ref", None)
        if isinstance(message, PoisonMessage):
            ref = getattr(message.poisonMessage, "ref", None)
        future = self._replies.get(ref) if isinstance(ref, int) else None
        if future is not None and not future.done():
            future.set_result(None if isinstance(message, PoisonMessage) else message)

    def _file(self, sender: Any, message: Message) -> None:
        stream = self._streams.get(message.invocation_id)
        if stream is None:
            early = self._early.setdefault(message.invocation_id, [])
            early.append((sender, message))
            self._early_count += 1
            while self._early_count > MAX_EARLY:
                _, dropped = self._early.popitem(last=False)
                self._early_count -= len(dropped)
            return
        if not stream.takes(sender, message):
            return  # from an earlier run of this invocation: stale
        stream.file(message)
        self._wake(message.invocation_id, stream)

    def _wake(self, invocation_id: str, stream: _Stream) -> None:
        waiting = self._waits.get(invocation_id)
        if waiting is not None:
            waiting[0].notify_all()
        for wakeup in stream.wakeups:
            try:
                wakeup()
            except RuntimeError:  # its event loop is closed: nobody waits any more
                stream.wakeups = []

    # -- callers -------------------------------------------------------------------

    def expect(self, invocation_id: str, source: Any, streamed: bool, run: int = 0,
               first: int = 1, pid: int | None = None) -> None:
        """The agent at ``source`` (process ``pid`` on this host, if known)
        accepted a run (or a recovery) of ``invocation_id`` for this inbox, as
        run ``run`` whose first event is ``first``: start its stream afresh."""
        with self._lock:
            old = self._streams.pop(invocation_id, None)
            stream = _Stream(source, streamed, run, next=first, first=first, pid=pid)
            if old is not None:
                stream.wakeups = old.wakeups
            self._streams[invocation_id] = stream
            early = self._early.pop(invocation_id, [])
            self._early_count -= len(early)
            for sender, message in early:
                if stream.takes(sender, message):
                    stream.file(message)
            while len(self._streams) > MAX_STREAMS:
                idle = next((i for i, s in self._streams.items()
                             if i not in self._waits and not s.wakeups), None)
                if idle is None:
                    break  # every stream is being waited on
                del self._streams[idle]
            self._wake(invocation_id, stream)

    def take(self, invocation_id: str) -> Message | None:
        """The next message of the stream if it is here (None: not yet).
        Raises ``HayataError(code="not_found")`` for an invocation this inbox
        does not follow (not a CALLER run of this system, or already read)."""
        with self._lock:
            stream = self._streams.get(invocation_id)
            if stream is None:
                raise HayataError(
                    f"invocation {invocation_id} has no stream here: it was not run with "
                    "subscriber=hy.CALLER from this system, or its result was already read",
                    code="not_found", invocation_id=invocation_id)
            message = stream.take()
            if isinstance(message, AgentResult):
                del self._streams[invocation_id]
            return message

    def next_message(self, invocation_id: str, timeout: float) -> Message:
        """Block until the next message of the stream (TimeoutError after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            message = self.take(invocation_id)
            if message is not None:
                return message
            with self._waiting(invocation_id) as condition:
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._closed:
                        raise TimeoutError_(f"no message for invocation {invocation_id} "
                                            f"within {timeout}s", invocation_id=invocation_id)
                    condition.wait(remaining)
                    message = self.take(invocation_id)
                    if message is not None:
                        return message

    @contextlib.contextmanager
    def _waiting(self, invocation_id: str) -> Iterator[threading.Condition]:
        """The condition a reader of ``invocation_id`` waits on (held: ``_lock``)."""
        waiting = self._waits.get(invocation_id)
        if waiting is None:
            waiting = self._waits[invocation_id] = (threading.Condition(self._lock), [0])
        waiting[1][0] += 1
        try:
            yield waiting[0]
        finally:
            waiting[1][0] -= 1
            if not waiting[1][0]:
                del self._waits[invocation_id]

    def on_message(self, invocation_id: str, wakeup: Callable[[], object] | None) -> None:
        """Call ``wakeup`` (in the receiver thread; it must not block) whenever
        something arrives for the stream; None removes it."""
        with self._lock:
            stream = self._streams.get(invocation_id)
            if stream is not None:
                stream.wakeups = [wakeup] if wakeup is not None else []

    def source(self, invocation_id: str) -> _Source | None:
        """Where the stream of ``invocation_id`` comes from and what it still
        needs of it, or None if this inbox does not follow it."""
        with self._lock:
            stream = self._streams.get(invocation_id)
            if stream is None:
                return None
            return _Source(stream.source, stream.pid, stream.run, stream.first,
                           stream.next - 1, stream.streamed, stream.result is not None)

    def file_end(self, invocation_id: str, source: Any, events: list[AgentEvent],
                 result: AgentResult) -> None:
        """File what the gone process ``source`` could not send of its run: the
        run's ``events`` and ``result``, read from the durable log. What did
        arrive stays (the log has the same under the same sequences)."""
        with self._lock:
            stream = self._streams.get(invocation_id)
            if stream is None or stream.source != source:
                return
            for event in events:
                stream.file(event)
            stream.file(result)
            self._wake(invocation_id, stream)

    def follows(self, invocation_id: str) -> bool:
        with self._lock:
            return invocation_id in self._streams

    def settle(self, invocation_id: str, result: AgentResult, until: float,
               sending: Callable[[], bool], source: Any) -> None:
        """``result`` is known (from ``wait()`` asking ``source``): keep it for
        the stream if ``source`` runs it, then wait until the rest of the
        stream is here, up to ``until`` (monotonic) and while ``sending()``
        says its source still runs."""
        with self._lock:
            stream = self._streams.get(invocation_id)
            if stream is None or stream.source != source:
                return
            if stream.result is None:
                stream.result = result
                self._wake(invocation_id, stream)
            with self._waiting(invocation_id) as condition:
                while not stream.complete() and self._streams.get(invocation_id) is stream:
                    remaining = until - time.monotonic()
                    if remaining <= 0 or self._closed or not sending():
                        return
                    condition.wait(min(remaining, 0.2))

    # -- replies to requests sent from the receiver -------------------------------------

    def expect_reply(self, ref: int) -> Future[Any]:
        """A future completed by the message carrying ``ref`` (None: undeliverable)."""
        future: Future[Any] = Future()
        self._replies[ref] = future
        return future

    def drop_reply(self, ref: int) -> None:
        self._replies.pop(ref, None)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for invocation_id, stream in self._streams.items():
                self._wake(invocation_id, stream)
            for condition, _count in self._waits.values():
                condition.notify_all()
        for future in list(self._replies.values()):
            if not future.done():
                future.set_result(None)
