"""A whole message in one turn of Thespian's transport loop.

Thespian's TCP transport frames every message (and every ACK) as
``<size>>`` followed by a pickle, and reads a frame in two ``recv`` calls:
20 bytes first (enough for the size), then exactly the rest. It makes the
second call only on the loop's next turn, after another ``poll``, although
the rest is almost always there already: a sender writes a frame with one
``send``. So every message cost its receiver two turns of the loop, and every
ACK cost its sender two more (``strace -c`` on the agent of a seq3
invocation: 20 ``poll`` and 20 ``recvfrom`` for 5 messages and 5 ACKs in).

The two functions here are Thespian's ``TCPTransport._handleReadableIncoming``
and ``TCPTransport._next_XMIT_4`` (Thespian 4.0.1) with one change: after a
``recv`` that leaves the frame incomplete, they ``recv`` the rest at once, in
the same turn, while the socket has it (the sockets are non-blocking; an
empty socket raises ``BlockingIOError`` and the frame is finished on a later
turn, as before). Each ``recv`` still asks for exactly what the frame lacks,
never more, so no byte of the next frame is read early, and every error path
is Thespian's own. They are the ``frame_read`` patch of
:mod:`supervisors._thespian.patch_table`, installed only where Thespian's two
methods have the fingerprint they were written against;
``SUPERVISORS_PLAIN_THESPIAN=1`` keeps Thespian's.
"""

from __future__ import annotations

import logging
from typing import Any

import thespian.system.transport.TCPTransport as _tcp
from thespian.system.transport.errmgmt import (
    err_recv_connreset,
    err_recv_inprogress,
    err_recv_retry,
)
from thespian.system.utilis import thesplog

__all__ = ["handle_readable_incoming", "next_xmit_4"]

_WAIT_FOR_ACK = _tcp.TCPTransport._XMITStepWaitForAck


def _recv_more(sock: Any, amount: int) -> bytes | None:
    """The rest of a frame, if the socket has some now; None if it has none
    yet or raised (the next turn's ``recv`` meets the same error on
    Thespian's own path)."""
    try:
        more: bytes = sock.recv(amount)
        return more or None
    except OSError:
        return None


def handle_readable_incoming(self: Any, inc: Any, has_exclusive_flag: bool = False) -> Any:
    """``TCPTransport._handleReadableIncoming``, reading the frame to its end
    while the socket has it (see the module's text)."""
    try:
        rdata = inc.socket.recv(min(1024000, inc.remainingSize()))
        inc.failCount = 0
    except OSError as e:
        inc.failCount = getattr(inc, "failCount", 0) + 1
        if err_recv_inprogress(e.errno) and \
           inc.failCount < _tcp.MAX_CONSECUTIVE_READ_FAILURES:
            inc.backoffPause(True)
            return inc
        inc.close()
        return None
    if not rdata:
        inc.close()
        return None
    while True:
        try:
            inc.addData(rdata)
        except Exception:  # noqa: BLE001 - as Thespian
            thesplog("corrupted incoming data; closing socket", level=logging.WARNING)
            inc.close()
            return None
        if inc.receivedAllData():
            break
        more = _recv_more(inc.socket, min(1024000, inc.remainingSize()))
        if more is None:
            return inc  # the rest on a later turn, as Thespian would
        rdata = more
    return self._addedDataToIncoming(inc, has_exclusive_flag=has_exclusive_flag)


def next_xmit_4(self: Any, intent: Any) -> Any:
    """``TCPTransport._next_XMIT_4`` (waiting for the ACK), reading the ACK to
    its end while the socket has it (see the module's text)."""
    try:
        rcv = intent.socket.recv(intent.ackbuf.remainingAmount())
    except OSError as err:
        if err_recv_retry(err.errno):
            intent.backoffPause(True)
            return True
        if err_recv_connreset(err):
            thesplog("Remote %s closed connection before ack received at %s for %s",
                     str(intent.targetAddr), str(self.myAddress), intent.identify(),
                     level=logging.INFO)
        else:
            thesplog("Socket Error waiting for transmit ack from %s to %s: %s",
                     str(intent.targetAddr), str(self.myAddress), err,
                     level=logging.ERROR, exc_info=True)
        rcv = ""
    except Exception as err:  # noqa: BLE001 - as Thespian
        thesplog("General error waiting for transmit ack from %s to %s: %s",
                 str(intent.targetAddr), str(self.myAddress), err,
                 level=logging.ERROR, exc_info=True)
        rcv = ""
    if not rcv:
        intent.backoffPause(True)
        intent.stage = self._XMITStepRetry
        return self._nextTransmitStep(intent)
    result = self._check_XMIT_4_done(intent, rcv)
    while result is True and intent.stage == _WAIT_FOR_ACK:
        ackbuf = getattr(intent, "ackbuf", None)
        if ackbuf is None or ackbuf.is_empty() or ackbuf.isDone():
            break  # nothing begun, or done: the next frame on a later turn
        more = _recv_more(intent.socket, ackbuf.remainingAmount())
        if more is None:
            break
        result = self._check_XMIT_4_done(intent, more)
    return result
