"""Fan-out of the page's live messages: from any thread to every open event stream.

Messages are plain dicts with a ``kind``: ``state`` (a whole snapshot of the
system), ``event`` / ``result`` (of an invocation the observer runs or
recovers). Everything touching the subscribers runs on the server's event
loop: a thread hands a message over with :meth:`Hub.publish`, the loop records
it and puts it on every subscriber's queue in the same step, so a stream that
opens at any moment gets the history once and every later message once.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

Message = dict[str, Any]

KEPT_INVOCATIONS = 50
"""How many invocations' event histories a new stream replays."""
KEPT_EVENTS = 2000
"""At most this many messages are kept per invocation."""

_CLOSED: Message = {"kind": "closed"}


class Hub:
    """The live messages of one observer; bound to the server's loop at startup."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queues: set[asyncio.Queue[Message]] = set()
        self._state: Message | None = None
        self._history: OrderedDict[str, list[Message]] = OrderedDict()
        self.wanted = threading.Event()
        """Set while at least one stream is open (the watcher polls only then)."""
        self.closed = threading.Event()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def publish(self, message: Message) -> None:
        """Hand ``message`` to every stream (thread-safe; dropped once closed)."""
        loop = self._loop
        if loop is None or self.closed.is_set():
            return
        try:
            loop.call_soon_threadsafe(self._deliver, message)
        except RuntimeError:  # the loop has just closed
            return

    def close(self) -> None:
        """End every stream (called on the loop thread by the server's shutdown)."""
        self.closed.set()
        for queue in self._queues:
            queue.put_nowait(_CLOSED)

    def _deliver(self, message: Message) -> None:
        if message["kind"] == "state":
            self._state = message
        elif "invocation_id" in message:
            history = self._history.setdefault(message["invocation_id"], [])
            self._history.move_to_end(message["invocation_id"])
            if len(history) < KEPT_EVENTS:
                history.append(message)
            while len(self._history) > KEPT_INVOCATIONS:
                self._history.popitem(last=False)
        for queue in self._queues:
            queue.put_nowait(message)

    async def subscribe(self) -> AsyncIterator[Message]:
        """The last state and the kept histories, then every new message."""
        queue: asyncio.Queue[Message] = asyncio.Queue()
        replay = [m for history in self._history.values() for m in history]
        if self._state is not None:
            replay.insert(0, self._state)
        self._queues.add(queue)
        self.wanted.set()
        try:
            for message in replay:
                yield message
            while not self.closed.is_set():
                message = await queue.get()
                if message is _CLOSED:
                    return
                yield message
        finally:
            self._queues.discard(queue)
            if not self._queues:
                self.wanted.clear()
