"""Sends to one target pushed out from inside a handler (the ``push_transmits``
patch: ``TCPTransport.take_acks`` and ``TCPTransport.push_transmits``).

Thespian's TCP transport sends one message at a time to a target: the next
waits (``_waitingTransmits``) until the target's ACK of the previous one is
read, and that ACK is read only in the actor's transport loop, which does not
turn while a handler runs. So a handler that sends a target several messages
while it works (an edge publishing partial results while its node runs) has
the first go out at once and the others only when it returns.
:meth:`supervisors.SupervisedActor.send_now` sends with both steps around
Thespian's ``send``:

- :func:`take_acks`, before: the ACKs ``target`` has already sent are read
  (Thespian's own step for a readable socket, ``_processIntents``), without
  waiting: the socket they free carries the next message at once, with no
  loop turn. This is the common case (the node worked between two partials);
- :func:`push_transmits`, after: while a message to ``target`` is still
  unwritten (waiting for its turn, connecting, being retried), Thespian's own
  loop turns in transmit-only mode (``_runWithExpiry(TransmitOnly)``, as its
  ``drainTransmits`` does), for at most ``seconds``. Incoming messages are
  read and ACKed as in any turn but not dispatched: they stay queued, in
  order, for the loop the handler returns to. The run's timer (``run_time``:
  the handler's loop's, or its next wake-up's) and the watched descriptors
  are put back as they were, so no wake-up or ``WatchMessage`` is taken from
  that loop. Then each written message to ``target`` is moved on to waiting
  for its ACK (the step a loop turn takes when its socket is writable; no
  I/O), so the next :func:`take_acks` reads that ACK.

Both do nothing outside the main thread; :func:`push_transmits` nothing while
the run is being aborted. It is a speed patch of
:mod:`supervisors._thespian.patch_table`: without it (skipped, or
``SUPERVISORS_PLAIN_THESPIAN=1``) ``send_now`` only sends, and the messages go
when the handler returns, as in plain Thespian.
"""

from __future__ import annotations

import select
import threading
from datetime import timedelta
from typing import Any

from thespian.system.timing import ExpirationTimer
from thespian.system.transport import TransmitOnly
from thespian.system.transport.asyncTransportBase import exclusive_processing

__all__ = ["push_transmits", "take_acks", "unwritten"]

_WRITTEN = 3  # TCPTransport._XMITStepShutdownWrite: the whole message was written
_WAIT_FOR_ACK = 4  # TCPTransport._XMITStepWaitForAck
_SENT = (_WRITTEN, _WAIT_FOR_ACK)


def unwritten(transport: Any, target: Any) -> bool:
    """A message to ``target`` is queued, connecting, partly written or to be retried."""
    for intent in transport._transmitIntents.values():
        if intent.targetAddr == target and intent.stage not in _SENT:
            return True
    for intent in transport._waitingTransmits:
        if intent.targetAddr == target:
            return True
    return any(intent.targetAddr == target
               for intent in transport._aTB_queuedPendingTransmits)


def push_transmits(self: Any, target: Any, seconds: float) -> bool:
    """``TCPTransport.push_transmits``: turn the loop, transmit-only, until every
    message to ``target`` is written (True) or ``seconds`` have passed (False)."""
    if threading.current_thread() is not threading.main_thread() \
            or hasattr(self, "_aborting_run"):
        return False
    try:
        return not unwritten(self, target) or _turn_until_written(self, target, seconds)
    finally:
        _await_acks(self, target)


def take_acks(self: Any, target: Any) -> None:
    """``TCPTransport.take_acks``: read the ACKs ``target`` has already sent for
    messages of a handler's ``push_transmits`` (no wait): a message sent after
    that goes out at once, on the socket the ACK freed, without a loop turn."""
    if threading.current_thread() is not threading.main_thread():
        return
    waiting = [fd for fd, intent in self._transmitIntents.items()
               if intent.targetAddr == target and intent.stage == _WAIT_FOR_ACK]
    if not waiting:
        return
    ready = _readable(waiting)
    if not ready:
        return
    with exclusive_processing(self):
        for fd in ready:
            self._processIntents(fd)  # Thespian's step for a readable socket: its ACK
    done, self._finished_intents = self._finished_intents, []
    for intent, status in done:  # as the loop does after each turn
        intent.tx_done(status)


def _turn_until_written(self: Any, target: Any, seconds: float) -> bool:
    saved_run, saved_watches = self.run_time, self._watches
    timer = ExpirationTimer(timedelta(seconds=seconds))
    self.run_time, self._watches = timer, []
    try:
        while unwritten(self, target):
            if timer.view().expired():
                return False
            if self._runWithExpiry(TransmitOnly) == 0:
                return not unwritten(self, target)  # the transport holds no transmit
        return True
    finally:
        self.run_time, self._watches = saved_run, saved_watches


def _await_acks(self: Any, target: Any) -> None:
    """Thespian's next step for each message to ``target`` that is written:
    wait for its ACK (a loop turn takes it when the socket is writable; it does
    no I/O). Done now, the next push reads the ACK in one turn, not two."""
    written = [fd for fd, intent in self._transmitIntents.items()
               if intent.targetAddr == target and intent.stage == _WRITTEN]
    if written:
        with exclusive_processing(self):
            for fd in written:
                self._processIntents(fd)


def _readable(fds: list[int]) -> list[int]:
    """Those of ``fds`` with something to read (or closed), now; ``poll``, not
    ``select``: a descriptor may be above 1023."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return [fd for fd, _events in poller.poll(0)]
