"""An exiting actor's last sends go out (the ``exit_drain`` patch).

Thespian 4.0.1 drains an exiting actor's transmits by running its transport
until nothing is left to send, but a timer of the actor (``wakeupAfter``) that
falls due meanwhile ends the drain at once, falsy like "nothing left": the
process exits with its last messages unsent (what an actor said in its stop
hook, e.g. the end of a run to its subscriber). :func:`drain_transmits` keeps
draining past such timers (they are dropped: the actor is gone), up to
Thespian's limit.
"""

from __future__ import annotations

from typing import Any

import thespian.system.systemCommon as _common
from thespian.system.timing import ExpirationTimer, unexpired
from thespian.system.transport import ReceiveEnvelope, TransmitOnly

__all__ = ["drain_transmits"]


def drain_transmits(self: Any) -> None:
    """``systemCommonBase.drainTransmits`` that a timer falling due does not end.

    Thespian's transport returns a due ``wakeupAfter`` as a ``ReceiveEnvelope``,
    which is falsy, and its drain stopped at the first falsy answer as if no
    transmit were left. Here it stops when none is left (``0``), when the
    transport ended, or at Thespian's drain limit; a timer is dropped (the
    actor exits: nobody would handle it)."""
    limit = ExpirationTimer(_common.MAX_SHUTDOWN_DRAIN_PERIOD)
    for remaining in unexpired(limit):
        left = self.transport.run(TransmitOnly, remaining.remaining())
        if not left and not isinstance(left, ReceiveEnvelope):
            break
