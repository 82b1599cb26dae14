"""One Thespian endpoint driven by one thread: this process's receiver.

Thespian's TCP transport hands a message to an external endpoint only while
that endpoint runs its transport (``listen``/``ask``); until then the
*sender* keeps it queued, in its own process. A caller that is busy elsewhere
when the sending actor dies (stopped, restarted, SIGKILLed) loses everything
still queued there. The receiver runs the endpoint all the time, so whatever
an actor sends here is taken off the wire at once, whatever the caller does.

It also sends without blocking: a send is scheduled on the transport and
carried out by the receiver's loop, so a busy or stopped actor never blocks
the thread (or event loop) that asked for the send. Other threads wake the
loop through a pipe the transport watches. What waits for one agent when the
loop comes round goes as one message (:func:`bundles`).

This is the only module of the caller's side that touches Thespian's
transport internals (``_systemBase``, ``_run_transport``, ``set_watch``,
``TransmitIntent``; the agent's :mod:`hayata_py._actors.transmits` reads two more),
pinned by ``thespian==4.0.1`` and by the tests of the CALLER inbox.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog
from thespian.actors import WatchMessage
from thespian.system import isInternalActorSystemMessage
from thespian.system.timing import toTimeDeltaOrNone
from thespian.system.transport import ReceiveEnvelope, TransmitIntent

from hayata_py._actor_messages import Bundle
from supervisors import System

RUN_PERIOD = 1.0
"""Longest the loop blocks in the transport before it looks at its flags again."""

_log = structlog.get_logger("hayata_py.receiver")

Deliver = Callable[[Any, Any], None]
"""Called in the receiver thread with (sender address, message)."""

OnFailure = Callable[[Any], None]
"""Called in the receiver thread when a send could not be delivered."""


class Receiver:
    """A private endpoint of ``system`` with a thread that receives on it.

    ``deliver(sender, message)`` gets every message (in the receiver thread;
    it must not block). :meth:`send` may be called from any thread.
    """

    def __init__(self, system: System, deliver: Deliver, name: str = "hayata-receiver") -> None:
        self._ctx = system.new_endpoint()
        self._base = self._ctx._systemBase
        self.address: Any = self._base.transport.myAddress
        self._deliver = deliver
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._base.transport.set_watch([self._wake_r])
        self._outbox: deque[tuple[Any, Any, OnFailure | None]] = deque()
        self._closing = False
        self._wake_lock = threading.Lock()  # no write to the pipe once it is closed
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def send(self, target: Any, message: Any, on_failure: OnFailure | None = None) -> None:
        """Send ``message`` to ``target`` from this endpoint without waiting;
        ``on_failure(status)`` runs if Thespian reports it undeliverable."""
        if self._closing:
            if on_failure is not None:
                on_failure("closed")
            return
        self._outbox.append((target, message, on_failure))
        self._wake()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread and close the endpoint (idempotent)."""
        self._closing = True
        self._wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        with self._wake_lock:
            if self._wake_w >= 0:
                os.close(self._wake_w)
                self._wake_w = -1

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _wake(self) -> None:
        with self._wake_lock, contextlib.suppress(BlockingIOError, OSError):
            if self._wake_w >= 0:
                os.write(self._wake_w, b"\0")  # full pipe: a wakeup is pending anyway

    def _flush(self) -> None:
        """Send what the outbox holds: several messages for one target together
        (:func:`bundles`), each target's in the order they were sent."""
        waiting = list(self._outbox)
        for _ in waiting:
            self._outbox.popleft()
        for target, message, failures in bundles(waiting):
            def failed(status: Any, _intent: Any, failures: list[OnFailure] = failures) -> None:
                for on_failure in failures:
                    try:
                        on_failure(status)
                    except Exception as exc:  # noqa: BLE001 - never into Thespian's loop
                        _log.error("receiver_on_failure_failed", error=repr(exc))

            try:
                self._base.transport.scheduleTransmit(
                    None, TransmitIntent(target, message, onError=failed))
            except Exception as exc:  # noqa: BLE001 - e.g. unpicklable: tell the sender
                _log.warning("receiver_send_failed", error=repr(exc))
                failed(exc, None)

    def _loop(self) -> None:
        try:
            while not self._closing:
                self._flush()
                envelope = self._base._run_transport(toTimeDeltaOrNone(RUN_PERIOD))
                if not isinstance(envelope, ReceiveEnvelope):
                    continue
                message = envelope.message
                if isinstance(message, WatchMessage):
                    with contextlib.suppress(BlockingIOError, OSError):
                        while os.read(self._wake_r, 4096):
                            pass
                    continue
                if isInternalActorSystemMessage(message):
                    continue
                try:
                    self._deliver(envelope.sender, message)
                except Exception as exc:  # noqa: BLE001 - one bad message must not stop it
                    _log.error("receiver_deliver_failed", error=repr(exc))
        except Exception as exc:  # noqa: BLE001 - logged; the next CALLER call starts a new one
            _log.error("receiver_stopped", error=repr(exc))
        finally:
            with contextlib.suppress(Exception):
                self._ctx.exit_clone()
            with contextlib.suppress(OSError):
                os.close(self._wake_r)


BUNDLE_MAX = 256
"""Messages at most in one :class:`~hayata_py._actor_messages.Bundle`."""


def bundles(sends: list[tuple[Any, Any, OnFailure | None]]
            ) -> list[tuple[Any, Any, list[OnFailure]]]:
    """``sends`` (target, message, on_failure) as the messages to send: per
    target, in the order of its first send, its messages in order, two or more
    (up to :data:`BUNDLE_MAX`) as one :class:`~hayata_py._actor_messages.Bundle`;
    each with the failure callbacks of the messages it carries.

    The receiver sends only to agents (the asks of :mod:`hayata_py._ref_wait`),
    and an agent handles a bundle's messages one by one, as if each had come
    alone. Thespian carries one message at a time to each actor; a caller
    whose threads ask an agent together would otherwise queue one message
    per thread behind the one in flight."""
    by_target: dict[Any, tuple[Any, list[Any], list[OnFailure]]] = {}
    order: list[tuple[Any, list[Any], list[OnFailure]]] = []
    for target, message, on_failure in sends:
        key = getattr(target, "addressDetails", target)
        group = by_target.get(key)
        if group is None or len(group[1]) >= BUNDLE_MAX:
            group = by_target[key] = (target, [], [])
            order.append(group)
        group[1].append(message)
        if on_failure is not None:
            group[2].append(on_failure)
    return [(target, messages[0] if len(messages) == 1 else Bundle(tuple(messages)), failures)
            for target, messages, failures in order]
