"""The transport loop of ``supervisors/_tcploop.py`` (``install_loop_patch``):
it is Thespian's loop in every actor process, and its shortcuts for idle
sockets and wait sets give Thespian's outcomes. That actor processes run it:
``tests/supervisors/test_thespian_patches_in_processes.py``."""

from __future__ import annotations

import socket
import types
from collections.abc import Iterator
from typing import Any

import pytest
import thespian.system.transport.TCPTransport as tcp
from thespian.system.timing import ExpirationTimer

from supervisors import _poll as P
from supervisors import _speed as T
from supervisors import _tcploop as L

pytestmark = pytest.mark.timeout(60)


def test_the_loop_patch_is_applied_and_thespians_loop_is_still_fingerprinted() -> None:
    assert tcp.TCPTransport._runWithExpiry is L.run_with_expiry
    assert T.install_loop_patch() is True
    # The fingerprint reads Thespian's own loop, not the replacement.
    assert T.selector_patch_fingerprint() == T.SELECTOR_PATCH_FITS


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    made: list[socket.socket] = []
    yield made
    for s in made:
        s.close()


class _Addr:
    """An address: ``opsKey`` reads ``addressDetails``."""

    def __init__(self, name: str) -> None:
        self.addressDetails = name


def _idle(sockets: list[socket.socket], name: str) -> Any:
    a, b = socket.socketpair()
    sockets += [a, b]
    return tcp.IdleSocket(a, _Addr(name))


def _transport(*idle: Any) -> Any:
    return types.SimpleNamespace(_openSockets={i.rmtaddr.addressDetails: i for i in idle},
                                 _incomingSockets={})


def test_a_kept_idle_socket_within_its_time_is_left_alone(sockets: list[socket.socket]) -> None:
    idle = _idle(sockets, "a")
    transport = _transport(idle)
    L._idle_sockets(transport, [idle], [])
    assert transport._openSockets == {"a": idle}
    assert idle.socket.fileno() >= 0


def test_a_kept_idle_socket_past_its_time_is_closed_and_dropped(
        sockets: list[socket.socket]) -> None:
    idle = _idle(sockets, "a")
    idle.validity = ExpirationTimer(0)  # ended
    transport = _transport(idle)
    L._idle_sockets(transport, [idle], [])
    assert transport._openSockets == {}
    assert idle.socket.fileno() == -1


def test_an_idle_socket_replaced_for_its_peer_is_closed_and_the_new_one_kept(
        sockets: list[socket.socket]) -> None:
    old, new = _idle(sockets, "a"), _idle(sockets, "a")
    transport = _transport(new)  # the peer's socket was replaced during the turn
    L._idle_sockets(transport, [old], [])
    assert transport._openSockets == {"a": new}
    assert old.socket.fileno() == -1
    assert new.socket.fileno() >= 0


def test_register_all_registers_as_register_does(sockets: list[socket.socket]) -> None:
    a, b = socket.socketpair()
    sockets += [a, b]
    fast = tcp.selectors.DefaultSelector()
    fast.register_all([a.fileno()], [b])
    assert fast._wanted == {a.fileno(): P._POLL_MASK[P._READ],
                            b.fileno(): P._POLL_MASK[P._WRITE]}
    fast.close()
    for readers, writers, error in (([a.fileno(), a.fileno()], [], KeyError),
                                    ([a.fileno()], [a], KeyError),
                                    ([-1], [], ValueError)):
        sel = tcp.selectors.DefaultSelector()
        with pytest.raises(error):
            sel.register_all(readers, writers)
        sel.close()
