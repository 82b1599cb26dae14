"""A whole frame per loop turn (``supervisors/_tcpread.py``, ``install_read_patch``):
the transport reads the rest of a message or an ACK in the turn that read its
size, never a byte of the next frame, and leaves an unfinished frame for a
later turn without a backoff. That actor processes run it:
``tests/supervisors/test_thespian_patches_in_processes.py``."""

from __future__ import annotations

import pickle
import socket
import types
from collections.abc import Iterator
from typing import Any

import pytest
import thespian.system.transport.TCPTransport as tcp
from thespian.system.transport.streamBuffer import ReceiveBuffer, ackMsg, toSendBuffer

from supervisors import _speed as T
from supervisors import _tcpread as R

pytestmark = pytest.mark.timeout(60)


def test_the_read_patch_fits_the_installed_thespian_and_is_applied() -> None:
    # A new Thespian: compare its _handleReadableIncoming and _next_XMIT_4
    # with supervisors/_tcpread.py, then update READ_PATCH_FITS.
    assert T.read_patch_fingerprint() == T.READ_PATCH_FITS
    assert T.install_read_patch() is True
    assert tcp.TCPTransport._handleReadableIncoming is R.handle_readable_incoming
    assert tcp.TCPTransport._next_XMIT_4 is R.next_xmit_4


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    a.setblocking(False)
    yield a, b
    a.close()
    b.close()


def _frame(obj: Any) -> bytes:
    return bytes(toSendBuffer(obj, pickle.dumps))


class _Receiver:
    """The transport methods ``handle_readable_incoming`` calls."""

    def __init__(self) -> None:
        self.completed: list[Any] = []

    def _addedDataToIncoming(self, inc: Any, has_exclusive_flag: bool = False) -> None:
        self.completed.append(inc.data[0])


def _incoming(sock: socket.socket) -> Any:
    return tcp.TCPIncomingPersistent(None, sock)


def test_a_frame_that_is_all_there_is_read_in_one_call(
        pair: tuple[socket.socket, socket.socket]) -> None:
    mine, peer = pair
    message = ("sender", {"payload": "x" * 3000})
    peer.sendall(_frame(message))
    receiver = _Receiver()
    assert R.handle_readable_incoming(receiver, _incoming(mine)) is None
    assert receiver.completed == [message]


def test_a_frame_still_arriving_waits_for_a_later_turn_without_a_backoff(
        pair: tuple[socket.socket, socket.socket]) -> None:
    mine, peer = pair
    frame = _frame(("sender", "y" * 500))
    peer.sendall(frame[:100])
    receiver = _Receiver()
    inc = R.handle_readable_incoming(receiver, _incoming(mine))
    assert inc is not None and receiver.completed == []
    assert not inc.receivedAllData()
    assert not inc.backoffPause(), "an empty socket must not pause the frame"
    peer.sendall(frame[100:])
    assert R.handle_readable_incoming(receiver, inc) is None
    assert receiver.completed == [("sender", "y" * 500)]


def test_the_next_frame_is_left_in_the_socket(
        pair: tuple[socket.socket, socket.socket]) -> None:
    mine, peer = pair
    second = _frame(("sender", "second"))
    peer.sendall(_frame(("sender", "first")) + second)
    receiver = _Receiver()
    assert R.handle_readable_incoming(receiver, _incoming(mine)) is None
    assert receiver.completed == [("sender", "first")]
    assert mine.recv(4096) == second


def test_a_peer_that_closed_mid_frame_closes_the_incoming(
        pair: tuple[socket.socket, socket.socket]) -> None:
    mine, peer = pair
    peer.sendall(_frame(("sender", "z" * 500))[:60])
    receiver = _Receiver()
    inc = R.handle_readable_incoming(receiver, _incoming(mine))
    assert inc is not None
    peer.close()
    assert R.handle_readable_incoming(receiver, inc) is None  # Thespian's path: b"" closes
    assert receiver.completed == []


class _Sender:
    """The transport methods ``next_xmit_4`` calls, with Thespian's own check."""

    _XMITStepRetry = tcp.TCPTransport._XMITStepRetry
    _XMITStepFinishCleanup = tcp.TCPTransport._XMITStepFinishCleanup
    _XMITStepWaitForAck = tcp.TCPTransport._XMITStepWaitForAck
    _check_XMIT_4_done = tcp.TCPTransport._check_XMIT_4_done
    myAddress = "me"

    def __init__(self) -> None:
        self.steps: list[int] = []

    def _nextTransmitStep(self, intent: Any) -> bool:
        self.steps.append(intent.stage)
        return False


def _intent(sock: socket.socket) -> Any:
    intent = types.SimpleNamespace(socket=sock, ackbuf=ReceiveBuffer(pickle.loads),
                                   stage=tcp.TCPTransport._XMITStepWaitForAck,
                                   targetAddr="peer", result=None)
    intent.backoffPause = lambda *a: 0
    return intent


def test_an_ack_is_read_in_one_call(pair: tuple[socket.socket, socket.socket]) -> None:
    mine, peer = pair
    assert len(ackMsg) > 20  # Thespian's first read (20 bytes) never holds all of it
    peer.sendall(ackMsg)
    sender, intent = _Sender(), _intent(mine)
    assert R.next_xmit_4(sender, intent) is False
    assert sender.steps == [tcp.TCPTransport._XMITStepFinishCleanup]
    assert intent.result == tcp.SendStatus.Sent


def test_a_frame_behind_the_ack_stays_in_the_socket(
        pair: tuple[socket.socket, socket.socket]) -> None:
    mine, peer = pair
    behind = _frame(("peer", "a message"))
    peer.sendall(ackMsg + behind)
    sender, intent = _Sender(), _intent(mine)
    R.next_xmit_4(sender, intent)
    assert intent.result == tcp.SendStatus.Sent
    assert mine.recv(4096) == behind


def test_an_ack_still_arriving_waits_for_a_later_turn(
        pair: tuple[socket.socket, socket.socket]) -> None:
    mine, peer = pair
    peer.sendall(ackMsg[:20])
    sender, intent = _Sender(), _intent(mine)
    assert R.next_xmit_4(sender, intent) is True
    assert intent.stage == tcp.TCPTransport._XMITStepWaitForAck and sender.steps == []
    peer.sendall(ackMsg[20:])
    assert R.next_xmit_4(sender, intent) is False
    assert intent.result == tcp.SendStatus.Sent
