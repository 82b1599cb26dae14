"""The event loop of an edge that runs several tasks of an ``async def`` node at once.

Thespian delivers messages only to the actor's main thread, and its ``send``
is not thread-safe. So the loop runs in a thread of its own, and the two
threads meet only here:

- main -> loop: :meth:`LoopTasks.start` and :meth:`LoopTasks.cancel`, each
  one ``call_soon_threadsafe`` (so a task's cancel always follows its start,
  even one the loop has not begun yet);
- loop -> main: every partial result (``ctx.streamer``) and every task's end
  is put in a thread-safe queue, and one byte is written to a pipe whose read
  end the actor has Thespian watch (``ThespianWatch``); on the ``WatchMessage``
  the main thread calls :meth:`LoopTasks.drain` and does the durable writes
  and the sends itself.

A task's end is reported from the asyncio task's done callback, so a task
cancelled before it ever ran still reports (``cancelled=True``): that report
is what tells the edge the loop has processed a cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hayata_py._actor_messages import Partial


@dataclass(frozen=True)
class PartialOut:
    """A partial result run ``run`` published (from the loop's thread)."""

    run: int
    partial: Partial


@dataclass(frozen=True)
class Ended:
    """Run ``run``'s coroutine ended: with ``value`` (``ok``), an exception, or cancelled."""

    run: int
    ok: bool
    value: Any = None
    error: BaseException | None = None
    cancelled: bool = False


LoopEvent = PartialOut | Ended


async def _body(fn: Callable[..., Any], ctx: Any) -> tuple[bool, Any]:
    """``fn(ctx)``, awaited; (True, result) or (False, the exception). Only a
    cancellation propagates (it makes the asyncio task cancelled)."""
    try:
        value = fn(ctx)
        if inspect.isawaitable(value):
            value = await value
        return True, value
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # noqa: BLE001 - user code must never reach the loop
        return False, exc


class LoopTasks:
    """An asyncio loop in a daemon thread, and the way its results reach the main thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.wake_fd, self._wake_w = os.pipe()
        os.set_blocking(self.wake_fd, False)
        os.set_blocking(self._wake_w, False)
        self._events: queue.SimpleQueue[LoopEvent] = queue.SimpleQueue()
        self._tasks: dict[int, asyncio.Task[tuple[bool, Any]]] = {}  # the loop's thread only
        threading.Thread(target=self._serve, name="hayata-edge-loop", daemon=True).start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    # -- from the main thread --------------------------------------------------------

    def start(self, run: int, fn: Callable[..., Any], ctx: Any) -> None:
        """Run ``fn(ctx)`` on the loop as run number ``run`` (unique per start)."""
        self.loop.call_soon_threadsafe(self._spawn, run, fn, ctx)

    def cancel(self, run: int) -> None:
        self.loop.call_soon_threadsafe(self._cancel, run)

    def drain(self) -> list[LoopEvent]:
        """Everything the loop has reported since the last call, in order."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wake_fd, 4096):
                pass
        events: list[LoopEvent] = []
        while True:
            try:
                events.append(self._events.get_nowait())
            except queue.Empty:
                return events

    # -- from the loop's thread ------------------------------------------------------

    def post(self, event: LoopEvent) -> None:
        """Queue ``event`` for the main thread and wake it (any thread)."""
        self._events.put(event)
        with contextlib.suppress(BlockingIOError):  # full: a wake-up is pending anyway
            os.write(self._wake_w, b"\0")

    def _spawn(self, run: int, fn: Callable[..., Any], ctx: Any) -> None:
        task = self.loop.create_task(_body(fn, ctx))
        self._tasks[run] = task
        task.add_done_callback(functools.partial(self._ended, run))

    def _cancel(self, run: int) -> None:
        task = self._tasks.get(run)
        if task is not None:
            task.cancel()

    def _ended(self, run: int, task: asyncio.Task[tuple[bool, Any]]) -> None:
        self._tasks.pop(run, None)
        if task.cancelled():
            self.post(Ended(run, False, cancelled=True))
            return
        ok, value = task.result()
        self.post(Ended(run, True, value) if ok else Ended(run, False, error=value))
