"""The expiry of queued transmits, looked at only when one can have expired
(the ``queue_expiry`` patch: ``asyncTransportBase._complete_expired_intents``
and ``asyncTransportBase._qtx``).

Thespian's transport lets 20 transmits of a process be under way; the rest
wait in a queue (``_aTB_queuedPendingTransmits``). Each time a transmit ends
and each time one is scheduled, Thespian walks the whole queue to fail the
transmits whose time is up, building a timer view per transmit. A process
whose threads send hundreds of messages at once (a caller with a thread per
conversation, ``hayata serve`` with hundreds of streams) queues hundreds, and
the walks grow with the square of the load: a tenth of such a caller's CPU.

A transmit's time is up when the clock reaches its quit time, fixed when it
is made. So the replacement keeps the earliest quit time of the queue (a
lower bound: a transmit that leaves the queue leaves it in place) and walks
the queue only once the clock has reached it: with the same transmits
failed, in the same order, as Thespian's walk fails them then. A queue
Thespian's own code filled (before the patch, or after it is undone) has no
bound yet and is walked as Thespian walks it.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from typing import Any

import thespian.system.transport.asyncTransportBase as _atb
from thespian.system.timing import currentTime
from thespian.system.transport import SendStatus
from thespian.system.utilis import partition, thesplog

__all__ = ["complete_expired_intents", "queue_transmit"]

_DUE = "_supervisors_queue_due"
"""The transport's attribute holding the earliest quit time of its queue."""


def _quit_at(intent: Any) -> float:
    """When ``intent``'s time is up (its ``expired()`` turns true); never: inf."""
    end = intent._quitTime._time_to_quit
    return math.inf if end is None else float(end)


def complete_expired_intents(self: Any) -> tuple[int, bool]:
    """``asyncTransportBase._complete_expired_intents``: fail the queued
    transmits whose time is up; (transmits still queued, any failed)."""
    with self._aTB_lock:
        due = getattr(self, _DUE, None)
        if due is not None and currentTime() < due:
            return len(self._aTB_queuedPendingTransmits), False
        expiredTX, validTX = partition(lambda i: i.expired(),
                                       self._aTB_queuedPendingTransmits,
                                       deque)
        self._aTB_queuedPendingTransmits = validTX
        setattr(self, _DUE, min((_quit_at(i) for i in validTX), default=math.inf))
        rlen = len(validTX)
    for each in expiredTX:
        thesplog('TX intent %s timed out', each, level=logging.WARNING)
        each.tx_done(SendStatus.Failed)
    return rlen, bool(expiredTX)


def queue_transmit(self: Any, transmitIntent: Any) -> bool:
    """``asyncTransportBase._qtx``: queue ``transmitIntent`` unless the queue is
    full (False); its quit time lowers the queue's earliest one."""
    with self._aTB_lock:
        if len(self._aTB_queuedPendingTransmits) < _atb.DROP_TRANSMITS_LEVEL:
            self._aTB_queuedPendingTransmits.append(transmitIntent)
            due = getattr(self, _DUE, None)
            if due is not None:
                setattr(self, _DUE, min(due, _quit_at(transmitIntent)))
            return True
    return False
